/* imatrix.c — collect, write and read importance matrices in llama.cpp's GGUF imatrix layout (see imatrix.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/gguf.h"
#include "assay/imatrix.h"

typedef struct {
    char *name;
    int64_t n_in;
    double *sum2;   /* Σ x² per column (double: millions of tokens) */
    double count;   /* tokens */
    float *mean;    /* sum2 / count, refreshed by assay_imatrix_get */
} im_entry;

struct assay_imatrix {
    im_entry *e;
    int64_t n, cap;
    int chunks;
    int chunk_size;
    char *dataset;
};

assay_imatrix *assay_imatrix_new(void) {
    assay_imatrix *im = assay_xmalloc(sizeof *im);
    memset(im, 0, sizeof *im);
    return im;
}

void assay_imatrix_free(assay_imatrix *im) {
    if (!im) return;
    for (int64_t i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].sum2);
        free(im->e[i].mean);
    }
    free(im->e);
    free(im->dataset);
    free(im);
}

static im_entry *im_find(const assay_imatrix *im, const char *name) {
    for (int64_t i = 0; i < im->n; i++)
        if (!strcmp(im->e[i].name, name)) return &im->e[i];
    return NULL;
}

static im_entry *im_add_entry(assay_imatrix *im, const char *name, int64_t n_in) {
    if (im->n == im->cap) {
        im->cap = im->cap ? 2 * im->cap : 64;
        im->e = realloc(im->e, sizeof(im_entry) * (size_t)im->cap);
        ASSAY_ASSERT(im->e);
    }
    im_entry *e = &im->e[im->n++];
    memset(e, 0, sizeof *e);
    size_t len = strlen(name);
    e->name = assay_xmalloc(len + 1);
    memcpy(e->name, name, len + 1);
    e->n_in = n_in;
    e->sum2 = assay_xmalloc(sizeof(double) * (size_t)n_in);
    for (int64_t i = 0; i < n_in; i++) e->sum2[i] = 0;
    return e;
}

void assay_imatrix_hook(void *user, const char *name, const float *x, int64_t n_tok, int64_t n_in) {
    assay_imatrix *im = user;
    if (strncmp(name, "blk.", 4) != 0) return;
    im_entry *e = im_find(im, name);
    if (!e) e = im_add_entry(im, name, n_in);
    ASSAY_ASSERT(e->n_in == n_in);
    for (int64_t t = 0; t < n_tok; t++) {
        const float *xt = x + t * n_in;
        for (int64_t i = 0; i < n_in; i++) e->sum2[i] += (double)xt[i] * xt[i];
    }
    e->count += (double)n_tok;
}

void assay_imatrix_end_chunk(assay_imatrix *im) { im->chunks++; }
int64_t assay_imatrix_count(const assay_imatrix *im) { return im->n; }
int assay_imatrix_chunks(const assay_imatrix *im) { return im->chunks; }
const char *assay_imatrix_dataset(const assay_imatrix *im) { return im->dataset ? im->dataset : ""; }

static int im_cmp(const void *a, const void *b) { return strcmp(((const im_entry *)a)->name, ((const im_entry *)b)->name); }

assay_status assay_imatrix_write(const assay_imatrix *im, const char *path, const char *dataset, int chunk_size,
                                 int overwrite) {
    if (im->n == 0) return assay_fail(ASSAY_ERR_ARG, "importance matrix: no activations were collected");
    im_entry *sorted = assay_xmalloc(sizeof(im_entry) * (size_t)im->n);
    memcpy(sorted, im->e, sizeof(im_entry) * (size_t)im->n);
    qsort(sorted, (size_t)im->n, sizeof(im_entry), im_cmp);
    float **bufs = assay_xmalloc(sizeof(float *) * (size_t)(2 * im->n));
    assay_gguf_writer *w = assay_gguf_writer_new();
    assay_gguf_writer_set_string(w, "general.type", "imatrix");
    assay_gguf_str ds = {dataset ? dataset : "", dataset ? strlen(dataset) : 0};
    assay_gguf_writer_set_string_array(w, "imatrix.datasets", &ds, 1);
    assay_gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)im->chunks);
    assay_gguf_writer_set_u32(w, "imatrix.chunk_size", (uint32_t)chunk_size);
    assay_status st = ASSAY_OK;
    char name[512];
    for (int64_t i = 0; i < im->n && st == ASSAY_OK; i++) {
        const im_entry *e = &sorted[i];
        float *s = assay_xmalloc(sizeof(float) * (size_t)e->n_in), *c = assay_xmalloc(sizeof(float));
        for (int64_t k = 0; k < e->n_in; k++) s[k] = (float)e->sum2[k];
        c[0] = (float)e->count;
        bufs[2 * i] = s;
        bufs[2 * i + 1] = c;
        int64_t ne_s[2] = {e->n_in, 1}, ne_c[2] = {1, 1};
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        st = assay_gguf_writer_add_tensor(w, name, ASSAY_TYPE_F32, 2, ne_s, s, sizeof(float) * (size_t)e->n_in);
        if (st != ASSAY_OK) break;
        snprintf(name, sizeof name, "%s.counts", e->name);
        st = assay_gguf_writer_add_tensor(w, name, ASSAY_TYPE_F32, 2, ne_c, c, sizeof(float));
    }
    if (st == ASSAY_OK) st = assay_gguf_writer_write(w, path, overwrite);
    assay_gguf_writer_free(w);
    for (int64_t i = 0; i < 2 * im->n; i++)
        if (i < 2 * im->n) free(bufs[i]);
    free(bufs);
    free(sorted);
    return st;
}

static int im_has_suffix(const char *s, size_t len, const char *suf, size_t *stem) {
    size_t n = strlen(suf);
    if (len < n || memcmp(s + len - n, suf, n)) return 0;
    *stem = len - n;
    return 1;
}

assay_status assay_imatrix_load(assay_imatrix **out, const char *path) {
    *out = NULL;
    assay_gguf *g;
    assay_status st = assay_gguf_open(&g, path);
    if (st != ASSAY_OK) return st;
    assay_gguf_str type;
    if (!assay_gguf_get_string(g, "general.type", &type) || type.len != 7 || memcmp(type.ptr, "imatrix", 7)) {
        assay_gguf_close(g);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: not an importance matrix (general.type is not \"imatrix\"; "
                                            "the legacy .dat format is not supported, convert it with llama-imatrix)", path);
    }
    assay_imatrix *im = assay_imatrix_new();
    im->chunks = (int)assay_gguf_get_int(g, "imatrix.chunk_count", 0);
    im->chunk_size = (int)assay_gguf_get_int(g, "imatrix.chunk_size", 0);
    const assay_gguf_kv *ds = assay_gguf_find(g, "imatrix.datasets");
    if (ds && ds->type == ASSAY_GGUF_ARRAY && ds->array_type == ASSAY_GGUF_STRING && ds->array_len > 0) {
        assay_gguf_str s = assay_gguf_array_str(ds, 0);
        im->dataset = assay_xmalloc(s.len + 1);
        memcpy(im->dataset, s.ptr, s.len);
        im->dataset[s.len] = 0;
    }
    char name[512];
    for (int64_t i = 0; i < assay_gguf_tensor_count(g) && st == ASSAY_OK; i++) {
        const assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        size_t stem;
        if (!im_has_suffix(t->name.ptr, t->name.len, ".in_sum2", &stem)) continue;
        if (stem >= sizeof name) continue;
        memcpy(name, t->name.ptr, stem);
        name[stem] = 0;
        char cname[600];
        snprintf(cname, sizeof cname, "%s.counts", name);
        const assay_gguf_tensor *c = assay_gguf_find_tensor(g, cname);
        if (!c || t->type != ASSAY_TYPE_F32 || c->type != ASSAY_TYPE_F32) {
            st = assay_fail(ASSAY_ERR_FORMAT, "%s: %s has no f32 counts tensor", path, name);
            break;
        }
        if (t->ne[1] != 1 || c->ne[0] != 1 || c->ne[1] != 1) {
            st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: %s holds several matrices (MoE experts): not supported", path, name);
            break;
        }
        im_entry *e = im_add_entry(im, name, t->ne[0]);
        const float *sv = t->data;
        float cnt;
        memcpy(&cnt, c->data, sizeof cnt);
        for (int64_t k = 0; k < t->ne[0]; k++) {
            float v;
            memcpy(&v, sv + k, sizeof v);
            if (!isfinite(v)) {
                st = assay_fail(ASSAY_ERR_FORMAT, "%s: %s has a non-finite value", path, name);
                break;
            }
            e->sum2[k] = v;
        }
        e->count = cnt;
    }
    assay_gguf_close(g);
    if (st != ASSAY_OK) {
        assay_imatrix_free(im);
        return st;
    }
    *out = im;
    return ASSAY_OK;
}

const float *assay_imatrix_get(const assay_imatrix *im_c, const char *name, int64_t n_in) {
    assay_imatrix *im = (assay_imatrix *)im_c;
    if (!im) return NULL;
    im_entry *e = im_find(im, name);
    if (!e || e->n_in != n_in) return NULL;
    if (!e->mean) e->mean = assay_xmalloc(sizeof(float) * (size_t)n_in);
    for (int64_t k = 0; k < n_in; k++) e->mean[k] = e->count > 0 ? (float)(e->sum2[k] / e->count) : 1.0f;
    return e->mean;
}

/* calib.c — calibration text -> token chunks -> engine forward passes with the linear-input hook (calib.h). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "assay/calib.h"
#include "assay/file.h"
#include "assay/progress.h"
#include "assay/strbuf.h"

static int cal_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cal_is_txt(const char *n) {
    size_t l = strlen(n);
    return l > 4 && !strcmp(n + l - 4, ".txt");
}

assay_status assay_calib_text_load(assay_calib_text *out, assay_tokenizer *tok, const char *path) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(path, &sb) != 0) return assay_fail(ASSAY_ERR_IO, "calibration text %s: not found", path);
    assay_strbuf text = {0};
    assay_status st = ASSAY_OK;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return assay_fail(ASSAY_ERR_IO, "calibration directory %s: cannot be read", path);
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!cal_is_txt(e->d_name)) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 32;
                names = realloc(names, cap * sizeof *names);
                ASSAY_ASSERT(names);
            }
            names[n] = assay_xmalloc(strlen(path) + strlen(e->d_name) + 2);
            sprintf(names[n], "%s/%s", path, e->d_name);
            n++;
        }
        closedir(d);
        qsort(names, n, sizeof *names, cal_cmp);
        for (size_t i = 0; i < n; i++) {
            char *data = NULL;
            size_t size = 0;
            if (st == ASSAY_OK) st = assay_read_file(names[i], &data, &size);
            if (st == ASSAY_OK) {
                if (text.len) assay_strbuf_append(&text, "\n\n", 2);
                assay_strbuf_append(&text, data, size);
            }
            free(data);
            free(names[i]);
        }
        free(names);
        if (st == ASSAY_OK && n == 0) st = assay_fail(ASSAY_ERR_ARG, "calibration directory %s has no .txt files", path);
    } else {
        char *data = NULL;
        size_t size = 0;
        st = assay_read_file(path, &data, &size);
        if (st == ASSAY_OK) assay_strbuf_append(&text, data, size);
        free(data);
    }
    if (st != ASSAY_OK) {
        assay_strbuf_free(&text);
        return st;
    }
    assay_tokens ids = {0};
    st = assay_tokenizer_encode(tok, text.data ? text.data : "", text.len, 0, &ids);
    assay_strbuf_free(&text);
    if (st != ASSAY_OK) {
        assay_tokens_free(&ids);
        return st;
    }
    out->ids = ids.ids;
    out->n = ids.n;
    out->bos = assay_tokenizer_add_bos(tok) ? assay_tokenizer_bos(tok) : -1;
    return ASSAY_OK;
}

void assay_calib_text_spread(assay_calib_text *t, int64_t n_chunks, int64_t seq_len) {
    int64_t avail = seq_len > 0 ? t->n / seq_len : 0;
    if (n_chunks <= 0 || n_chunks >= avail) return;
    /* window c is the aligned window floor(c * avail / n_chunks): evenly spaced, never overlapping, so a corpus of
     * many files is sampled in proportion to each file's length instead of only its first file */
    int32_t *ids = assay_xmalloc(sizeof(int32_t) * (size_t)(n_chunks * seq_len));
    for (int64_t c = 0; c < n_chunks; c++) {
        int64_t w = c * avail / n_chunks;
        memcpy(ids + c * seq_len, t->ids + w * seq_len, sizeof(int32_t) * (size_t)seq_len);
    }
    free(t->ids);
    t->ids = ids;
    t->n = n_chunks * seq_len;
}

void assay_calib_text_free(assay_calib_text *t) {
    free(t->ids);
    memset(t, 0, sizeof *t);
}

assay_status assay_calib_run(assay_model *m, const assay_calib_text *text, int64_t n_chunks, int64_t seq_len,
                             assay_calib_fn fn, void *user, assay_calib_chunk_fn chunk_fn, int64_t *done) {
    return assay_calib_run_layers(m, text, n_chunks, seq_len, 0, fn, user, chunk_fn, done);
}

assay_status assay_calib_run_layers(assay_model *m, const assay_calib_text *text, int64_t n_chunks, int64_t seq_len,
                                    int64_t n_layers, assay_calib_fn fn, void *user, assay_calib_chunk_fn chunk_fn,
                                    int64_t *done) {
    if (done) *done = 0;
    int64_t avail = seq_len > 0 ? text->n / seq_len : 0;
    if (avail < 1)
        return assay_fail(ASSAY_ERR_ARG, "calibration text has %lld tokens, fewer than one chunk of %lld",
                          (long long)text->n, (long long)seq_len);
    if (n_chunks > avail || n_chunks <= 0) n_chunks = avail;
    assay_session_options so;
    assay_session_options_default(&so);
    so.n_ctx = seq_len;
    so.kv_dtype = ASSAY_KV_F32;
    assay_session *s;
    assay_status st = assay_session_open(&s, m, &so);
    if (st != ASSAY_OK) return st;
    assay_session_set_calib_hook(s, fn, user);
    assay_session_set_layer_limit(s, n_layers);
    int32_t *tok = assay_xmalloc(sizeof(int32_t) * (size_t)seq_len), *pos = assay_xmalloc(sizeof(int32_t) * (size_t)seq_len);
    float *logits = assay_xmalloc(sizeof(float) * (size_t)assay_model_get_config(m)->n_vocab);
    assay_progress bar;
    assay_progress_begin(&bar, "calibrate", n_chunks, "chunk");
    for (int64_t c = 0; c < n_chunks && st == ASSAY_OK; c++) {
        memcpy(tok, text->ids + c * seq_len, sizeof(int32_t) * (size_t)seq_len);
        if (text->bos >= 0) tok[0] = text->bos;
        for (int64_t i = 0; i < seq_len; i++) pos[i] = (int32_t)i;
        assay_batch b = {.n_tokens = seq_len, .token = tok, .pos = pos};
        st = assay_session_forward(s, &b, logits);
        assay_session_seq_clear(s, 0);
        if (st == ASSAY_OK) {
            if (chunk_fn) chunk_fn(user, c);
            if (done) *done = c + 1;
        }
        assay_progress_update(&bar, c + 1);
    }
    assay_progress_end(&bar);
    free(tok);
    free(pos);
    free(logits);
    assay_session_close(s);
    return st;
}

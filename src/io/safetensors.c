/* safetensors.c — the safetensors reader, shard sets and writer (see include/assay/safetensors.h).
 *
 * The header is untrusted: every number is range-checked before it becomes an offset or a size, and the
 * tensors must tile the data section exactly, like the reference implementation demands, so a tensor can
 * never point outside the mapping.
 */
#include "assay/safetensors.h"

#include <dirent.h>
#include <string.h>

#include "assay/file.h"
#include "assay/strbuf.h"

typedef struct dtype_row {
    const char *name;
    assay_type type;
    size_t elem_bytes;
} dtype_row;

/* The one dtype table. Types with no assay equivalent of their own are read as raw bytes of the same width. */
static const dtype_row DTYPES[] = {
    {"F32", ASSAY_TYPE_F32, 4},          {"F16", ASSAY_TYPE_F16, 2},         {"BF16", ASSAY_TYPE_BF16, 2},
    {"F8_E4M3", ASSAY_TYPE_F8_E4M3, 1},  {"F8_E5M2", ASSAY_TYPE_F8_E5M2, 1}, {"I8", ASSAY_TYPE_I8, 1},
    {"I16", ASSAY_TYPE_I16, 2},          {"I32", ASSAY_TYPE_I32, 4},         {"I64", ASSAY_TYPE_I64, 8},
    {"F64", ASSAY_TYPE_F64, 8},          {"U8", ASSAY_TYPE_U8, 1},           {"BOOL", ASSAY_TYPE_U8, 1},
    {"U16", ASSAY_TYPE_I16, 2},          {"U32", ASSAY_TYPE_I32, 4},         {"U64", ASSAY_TYPE_I64, 8},
};

int assay_safetensors_dtype_lookup(const char *dtype, assay_type *type, size_t *elem_bytes) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++) {
        if (strcmp(DTYPES[i].name, dtype) == 0) {
            if (type) *type = DTYPES[i].type;
            if (elem_bytes) *elem_bytes = DTYPES[i].elem_bytes;
            return 1;
        }
    }
    return 0;
}

const char *assay_safetensors_dtype_name(assay_type type) {
    /* First row of the table with this type: the canonical spelling (I16 rather than U16). */
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (DTYPES[i].type == type) return DTYPES[i].name;
    return NULL;
}

struct assay_safetensors {
    assay_mapped_file file; /* empty when parsing a caller's buffer */
    char *label;
    assay_json_doc *doc;
    const assay_json *metadata;
    int64_t n;
    assay_safetensors_tensor *tensors; /* sorted by offset */
    const assay_safetensors_tensor **by_name; /* sorted by name */
};

static int cmp_offset(const void *a, const void *b) {
    const assay_safetensors_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_name_ptr(const void *a, const void *b) {
    return strcmp((*(const assay_safetensors_tensor *const *)a)->name, (*(const assay_safetensors_tensor *const *)b)->name);
}

void assay_safetensors_close(assay_safetensors *st) {
    if (!st) return;
    assay_json_doc_free(st->doc);
    free(st->tensors);
    free((void *)st->by_name);
    if (st->file.path) assay_mapped_file_close(&st->file);
    free(st->label);
    free(st);
}

static assay_status parse_tensor(const char *label, const assay_json *v, assay_safetensors_tensor *t) {
    if (t->name[0] == 0 || strlen(t->name) != v->key_len)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor name is empty or contains a NUL byte", label);
    if (!assay_json_is(v, ASSAY_JSON_OBJECT))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", label, t->name);
    const char *dtype = assay_json_string(assay_json_get(v, "dtype"), NULL);
    const assay_json *shape = assay_json_get(v, "shape");
    const assay_json *offs = assay_json_get(v, "data_offsets");
    if (!dtype || !assay_json_is(shape, ASSAY_JSON_ARRAY) || !assay_json_is(offs, ASSAY_JSON_ARRAY))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' lacks dtype, shape or data_offsets", label, t->name);
    if (!assay_safetensors_dtype_lookup(dtype, &t->type, &t->elem_bytes))
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' has unknown dtype '%s'", label, t->name, dtype);
    t->dtype = dtype;
    if (shape->count > ASSAY_SAFETENSORS_MAX_DIMS)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor '%s' has %lld dimensions (at most %d supported)", label,
                          t->name, (long long)shape->count, ASSAY_SAFETENSORS_MAX_DIMS);
    t->n_dims = (int)shape->count;
    uint64_t bytes = t->elem_bytes;
    int d = 0;
    for (const assay_json *s = shape->first; s; s = s->next, d++) {
        int64_t n = assay_json_int(s, -1);
        if (n < 0)
            return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' shape[%d] is not a non-negative integer", label,
                              t->name, d);
        t->shape[d] = n;
        if (__builtin_mul_overflow(bytes, (uint64_t)n, &bytes))
            return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' shape overflows", label, t->name);
    }
    if (offs->count != 2)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' data_offsets must have 2 entries", label, t->name);
    int64_t b = assay_json_int(offs->first, -1), e = assay_json_int(offs->first->next, -1);
    if (b < 0 || e < 0 || e < b)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' has invalid data_offsets [%lld, %lld]", label, t->name,
                          (long long)b, (long long)e);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    if ((uint64_t)(e - b) != bytes)
        return assay_fail(ASSAY_ERR_FORMAT,
                          "%s: tensor '%s' spans %llu bytes but its shape and dtype %s need %llu", label, t->name,
                          (unsigned long long)(e - b), dtype, (unsigned long long)bytes);
    t->bytes = (size_t)bytes;
    return ASSAY_OK;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF): the reference rejects headers that
 * are not, and names we echo in messages must be printable. Returns the offset of the first bad byte or n. */
static size_t utf8_valid_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
        else return i;
        if (n - i < len) return i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return i;
        i += len;
    }
    return n;
}

assay_status assay_safetensors_parse(assay_safetensors **out, const void *data, size_t size, const char *label) {
    *out = NULL;
    const uint8_t *p = data;
    if (size < 8) return assay_fail(ASSAY_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file", label, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | p[i];
    if (n > ASSAY_SAFETENSORS_MAX_HEADER)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit (not a safetensors file?)",
                          label, (unsigned long long)n);
    if (n > size - 8)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: header length %llu exceeds the file size %zu (truncated?)", label,
                          (unsigned long long)n, size);
    if (n < 2 || p[8] != '{')
        return assay_fail(ASSAY_ERR_FORMAT, "%s: header does not start with '{' (not a safetensors file)", label);

    size_t bad = utf8_valid_prefix(p + 8, (size_t)n);
    if (bad != n)
        return assay_fail(ASSAY_ERR_FORMAT, "%s: header byte %zu is not valid UTF-8", label, bad + 8);
    assay_safetensors *st = assay_xcalloc(1, sizeof *st);
    st->label = assay_xstrdup(label);
    assay_status rc = assay_json_parse((const char *)p + 8, (size_t)n, &st->doc);
    if (rc != ASSAY_OK) {
        assay_safetensors_close(st);
        return assay_fail_context(ASSAY_ERR_FORMAT, "%s: header JSON", label);
    }
    const assay_json *root = assay_json_root(st->doc);
    if (!assay_json_is(root, ASSAY_JSON_OBJECT)) {
        assay_safetensors_close(st);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: header is not a JSON object", label);
    }
    st->tensors = assay_xcalloc((size_t)root->count + 1, sizeof *st->tensors);
    for (const assay_json *v = root->first; v; v = v->next) {
        if (strcmp(v->key, "__metadata__") == 0) {
            if (st->metadata || !assay_json_is(v, ASSAY_JSON_OBJECT)) {
                rc = assay_fail(ASSAY_ERR_FORMAT, "%s: __metadata__ is repeated or not an object", label);
                goto fail;
            }
            for (const assay_json *m = v->first; m; m = m->next)
                if (!assay_json_is(m, ASSAY_JSON_STRING)) {
                    rc = assay_fail(ASSAY_ERR_FORMAT, "%s: __metadata__ value of '%s' is not a string", label, m->key);
                    goto fail;
                }
            st->metadata = v;
            continue;
        }
        assay_safetensors_tensor *t = &st->tensors[st->n];
        t->name = v->key;
        if ((rc = parse_tensor(label, v, t)) != ASSAY_OK) goto fail;
        st->n++;
    }
    const uint8_t *base = p + 8 + n;
    uint64_t data_size = size - 8 - n;
    qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, cmp_offset);
    uint64_t expect = 0;
    for (int64_t i = 0; i < st->n; i++) {
        assay_safetensors_tensor *t = &st->tensors[i];
        if (t->begin != expect) {
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' data_offsets [%llu, %llu] %s (expected to start at %llu)",
                            label, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                            t->begin < expect ? "overlap another tensor" : "leave a gap", (unsigned long long)expect);
            goto fail;
        }
        if (t->end > data_size) {
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' ends at byte %llu of a %llu-byte data section (truncated?)",
                            label, t->name, (unsigned long long)t->end, (unsigned long long)data_size);
            goto fail;
        }
        t->data = base + t->begin;
        expect = t->end;
    }
    if (expect != data_size) {
        rc = assay_fail(ASSAY_ERR_FORMAT, "%s: %llu bytes after the last tensor's data (expected the file to end)", label,
                        (unsigned long long)(data_size - expect));
        goto fail;
    }
    st->by_name = assay_xmalloc(((size_t)st->n + 1) * sizeof *st->by_name);
    for (int64_t i = 0; i < st->n; i++) st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_name_ptr);
    for (int64_t i = 1; i < st->n; i++)
        if (strcmp(st->by_name[i]->name, st->by_name[i - 1]->name) == 0) {
            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: tensor name '%s' appears twice", label, st->by_name[i]->name);
            goto fail;
        }
    *out = st;
    return ASSAY_OK;
fail:
    assay_safetensors_close(st);
    return rc;
}

assay_status assay_safetensors_open(assay_safetensors **out, const char *path) {
    *out = NULL;
    assay_mapped_file f;
    assay_status rc = assay_mapped_file_open(&f, path);
    if (rc != ASSAY_OK) return rc;
    rc = assay_safetensors_parse(out, f.data, f.size, path);
    if (rc != ASSAY_OK) {
        assay_mapped_file_close(&f);
        return rc;
    }
    (*out)->file = f;
    return ASSAY_OK;
}

const char *assay_safetensors_path(const assay_safetensors *st) { return st->label; }
int64_t assay_safetensors_tensor_count(const assay_safetensors *st) { return st->n; }
const assay_safetensors_tensor *assay_safetensors_tensor_at(const assay_safetensors *st, int64_t i) {
    ASSAY_ASSERT(i >= 0 && i < st->n);
    return &st->tensors[i];
}
const assay_json *assay_safetensors_metadata(const assay_safetensors *st) { return st->metadata; }

const assay_safetensors_tensor *assay_safetensors_find(const assay_safetensors *st, const char *name) {
    int64_t lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const assay_safetensors_tensor *t = st->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

/* ---- shard sets ---------------------------------------------------------------------------------------------- */

struct assay_safetensors_set {
    int64_t n;
    assay_safetensors **files;
};

void assay_safetensors_set_close(assay_safetensors_set *set) {
    if (!set) return;
    for (int64_t i = 0; i < set->n; i++) assay_safetensors_close(set->files[i]);
    free(set->files);
    free(set);
}

int64_t assay_safetensors_set_file_count(const assay_safetensors_set *set) { return set->n; }
const assay_safetensors *assay_safetensors_set_file(const assay_safetensors_set *set, int64_t i) {
    ASSAY_ASSERT(i >= 0 && i < set->n);
    return set->files[i];
}

const assay_safetensors_tensor *assay_safetensors_set_find(const assay_safetensors_set *set, const char *name,
                                                           const assay_safetensors **file) {
    for (int64_t i = 0; i < set->n; i++) {
        const assay_safetensors_tensor *t = assay_safetensors_find(set->files[i], name);
        if (t) {
            if (file) *file = set->files[i];
            return t;
        }
    }
    return NULL;
}

static assay_status set_add(assay_safetensors_set *set, const char *dir, const char *name) {
    char *path = assay_path_join(dir, name);
    assay_safetensors *st;
    assay_status rc = assay_safetensors_open(&st, path);
    free(path);
    if (rc != ASSAY_OK) return rc;
    set->files = assay_xrealloc(set->files, (size_t)(set->n + 1) * sizeof *set->files);
    set->files[set->n++] = st;
    return ASSAY_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static assay_status set_from_index(assay_safetensors_set *set, const char *dir, const char *index_path) {
    assay_json_doc *doc;
    assay_status rc = assay_json_parse_file(index_path, &doc);
    if (rc != ASSAY_OK) return rc;
    const assay_json *map = assay_json_get(assay_json_root(doc), "weight_map");
    if (!assay_json_is(map, ASSAY_JSON_OBJECT) || map->count == 0) {
        assay_json_doc_free(doc);
        return assay_fail(ASSAY_ERR_FORMAT, "%s: no weight_map object", index_path);
    }
    /* Distinct shard names, in sorted order. */
    const char **names = assay_xmalloc((size_t)map->count * sizeof *names);
    int64_t n_names = 0;
    for (const assay_json *e = map->first; e; e = e->next) {
        const char *f = assay_json_string(e, NULL);
        if (!f || !*f || strchr(f, '/') || strcmp(f, "..") == 0) {
            free(names);
            assay_json_doc_free(doc);
            return assay_fail(ASSAY_ERR_FORMAT, "%s: weight_map entry '%s' is not a file name in the directory",
                              index_path, e->key);
        }
        names[n_names++] = f;
    }
    qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    int64_t u = 0;
    for (int64_t i = 0; i < n_names; i++)
        if (u == 0 || strcmp(names[i], names[u - 1]) != 0) names[u++] = names[i];
    rc = ASSAY_OK;
    for (int64_t i = 0; i < u && rc == ASSAY_OK; i++) rc = set_add(set, dir, names[i]);
    free(names);
    /* The index and the shards must agree both ways. */
    int64_t listed = 0;
    for (const assay_json *e = map->first; e && rc == ASSAY_OK; e = e->next, listed++) {
        const assay_safetensors *file = NULL;
        const assay_safetensors_tensor *t = assay_safetensors_set_find(set, e->key, &file);
        const char *want = assay_json_string(e, "");
        if (!t) rc = assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' is not in %s", index_path, e->key, want);
        else {
            const char *got = strrchr(file->label, '/');
            got = got ? got + 1 : file->label;
            if (strcmp(got, want) != 0)
                rc = assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' is in %s, the index says %s", index_path, e->key,
                                got, want);
        }
    }
    int64_t total = 0;
    for (int64_t i = 0; i < set->n; i++) total += set->files[i]->n;
    if (rc == ASSAY_OK && total != listed)
        rc = assay_fail(ASSAY_ERR_FORMAT, "%s: the shards hold %lld tensors, the index lists %lld (duplicates or unlisted)",
                        index_path, (long long)total, (long long)listed);
    assay_json_doc_free(doc);
    return rc;
}

assay_status assay_safetensors_set_open(assay_safetensors_set **out, const char *dir) {
    *out = NULL;
    assay_safetensors_set *set = assay_xcalloc(1, sizeof *set);
    char *index = assay_path_join(dir, "model.safetensors.index.json");
    char *single = assay_path_join(dir, "model.safetensors");
    assay_status rc = ASSAY_OK;
    if (assay_path_exists(index)) {
        rc = set_from_index(set, dir, index);
    } else if (assay_path_exists(single)) {
        rc = set_add(set, dir, "model.safetensors");
    } else {
        DIR *d = opendir(dir);
        if (!d) rc = assay_fail(ASSAY_ERR_IO, "cannot read directory %s", dir);
        else {
            char **names = NULL;
            int64_t n = 0;
            struct dirent *e;
            while ((e = readdir(d))) {
                size_t len = strlen(e->d_name);
                if (len > 12 && strcmp(e->d_name + len - 12, ".safetensors") == 0) {
                    names = assay_xrealloc(names, (size_t)(n + 1) * sizeof *names);
                    names[n++] = assay_xstrdup(e->d_name);
                }
            }
            closedir(d);
            if (n > 0) qsort(names, (size_t)n, sizeof *names, cmp_str);
            for (int64_t i = 0; i < n; i++) {
                if (rc == ASSAY_OK) rc = set_add(set, dir, names[i]);
                free(names[i]);
            }
            free(names);
            if (rc == ASSAY_OK && n == 0) rc = assay_fail(ASSAY_ERR_IO, "%s: no *.safetensors files", dir);
            /* Without an index nothing says which file is authoritative: a name in two files is an error. */
            for (int64_t i = 0; rc == ASSAY_OK && i < set->n; i++)
                for (int64_t j = 0; rc == ASSAY_OK && j < set->files[i]->n; j++)
                    for (int64_t k = i + 1; rc == ASSAY_OK && k < set->n; k++)
                        if (assay_safetensors_find(set->files[k], set->files[i]->tensors[j].name))
                            rc = assay_fail(ASSAY_ERR_FORMAT, "%s: tensor '%s' is in both %s and %s", dir,
                                            set->files[i]->tensors[j].name, set->files[i]->label,
                                            set->files[k]->label);
        }
    }
    free(index);
    free(single);
    if (rc != ASSAY_OK) {
        assay_safetensors_set_close(set);
        return rc;
    }
    *out = set;
    return ASSAY_OK;
}

/* ---- writer -------------------------------------------------------------------------------------------------- */

typedef struct writer_tensor {
    char *name;
    char dtype[16];
    int n_dims;
    int64_t shape[ASSAY_SAFETENSORS_MAX_DIMS];
    const void *data;
    size_t bytes;
} writer_tensor;

struct assay_safetensors_writer {
    char **meta_keys, **meta_values;
    int64_t n_meta;
    writer_tensor *tensors;
    int64_t n, cap;
};

assay_safetensors_writer *assay_safetensors_writer_new(void) { return assay_xcalloc(1, sizeof(assay_safetensors_writer)); }

void assay_safetensors_writer_free(assay_safetensors_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_meta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->meta_keys);
    free(w->meta_values);
    for (int64_t i = 0; i < w->n; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

void assay_safetensors_writer_set_metadata(assay_safetensors_writer *w, const char *key, const char *value) {
    for (int64_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta_keys[i], key) == 0) {
            free(w->meta_values[i]);
            w->meta_values[i] = assay_xstrdup(value);
            return;
        }
    w->meta_keys = assay_xrealloc(w->meta_keys, (size_t)(w->n_meta + 1) * sizeof(char *));
    w->meta_values = assay_xrealloc(w->meta_values, (size_t)(w->n_meta + 1) * sizeof(char *));
    w->meta_keys[w->n_meta] = assay_xstrdup(key);
    w->meta_values[w->n_meta++] = assay_xstrdup(value);
}

assay_status assay_safetensors_writer_add(assay_safetensors_writer *w, const char *name, const char *dtype, int n_dims,
                                          const int64_t *shape, const void *data, size_t bytes) {
    size_t elem;
    if (!assay_safetensors_dtype_lookup(dtype, NULL, &elem))
        return assay_fail(ASSAY_ERR_ARG, "safetensors: unknown dtype '%s' for tensor '%s'", dtype, name);
    if (n_dims < 0 || n_dims > ASSAY_SAFETENSORS_MAX_DIMS)
        return assay_fail(ASSAY_ERR_ARG, "safetensors: tensor '%s' has %d dimensions", name, n_dims);
    if (!*name || strcmp(name, "__metadata__") == 0)
        return assay_fail(ASSAY_ERR_ARG, "safetensors: invalid tensor name '%s'", name);
    uint64_t need = elem;
    for (int d = 0; d < n_dims; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(need, (uint64_t)shape[d], &need))
            return assay_fail(ASSAY_ERR_ARG, "safetensors: tensor '%s' has an invalid shape", name);
    if (need != bytes)
        return assay_fail(ASSAY_ERR_ARG, "safetensors: tensor '%s' has %zu bytes, its shape needs %llu", name, bytes,
                          (unsigned long long)need);
    for (int64_t i = 0; i < w->n; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return assay_fail(ASSAY_ERR_ARG, "safetensors: tensor '%s' added twice", name);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->tensors = assay_xrealloc(w->tensors, (size_t)w->cap * sizeof *w->tensors);
    }
    writer_tensor *t = &w->tensors[w->n++];
    memset(t, 0, sizeof *t);
    t->name = assay_xstrdup(name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->shape[d] = shape[d];
    t->data = data;
    t->bytes = bytes;
    return ASSAY_OK;
}

assay_status assay_safetensors_writer_write(assay_safetensors_writer *w, const char *path, int overwrite) {
    assay_strbuf h = {0};
    assay_strbuf_putc(&h, '{');
    if (w->n_meta) {
        assay_strbuf_puts(&h, "\"__metadata__\":{");
        for (int64_t i = 0; i < w->n_meta; i++) {
            if (i) assay_strbuf_putc(&h, ',');
            assay_strbuf_json_string(&h, w->meta_keys[i], strlen(w->meta_keys[i]));
            assay_strbuf_putc(&h, ':');
            assay_strbuf_json_string(&h, w->meta_values[i], strlen(w->meta_values[i]));
        }
        assay_strbuf_putc(&h, '}');
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n; i++) {
        const writer_tensor *t = &w->tensors[i];
        if (i || w->n_meta) assay_strbuf_putc(&h, ',');
        assay_strbuf_json_string(&h, t->name, strlen(t->name));
        assay_strbuf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype);
        for (int d = 0; d < t->n_dims; d++) assay_strbuf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        assay_strbuf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                            (unsigned long long)(off + t->bytes));
        off += t->bytes;
    }
    assay_strbuf_putc(&h, '}');
    /* Pad with spaces (valid JSON whitespace) so the data section starts 8-byte aligned. */
    while (h.len % 8) assay_strbuf_putc(&h, ' ');
    assay_output_file out;
    assay_status rc = assay_output_file_open(&out, path, overwrite);
    if (rc != ASSAY_OK) {
        assay_strbuf_free(&h);
        return rc;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(len8, 1, 8, out.fp) == 8 && fwrite(h.data, 1, h.len, out.fp) == h.len;
    for (int64_t i = 0; ok && i < w->n; i++)
        if (w->tensors[i].bytes) ok = fwrite(w->tensors[i].data, 1, w->tensors[i].bytes, out.fp) == w->tensors[i].bytes;
    assay_strbuf_free(&h);
    if (!ok) {
        assay_output_file_abort(&out);
        return assay_fail(ASSAY_ERR_IO, "%s: write failed (disk full?)", path);
    }
    return assay_output_file_commit(&out);
}

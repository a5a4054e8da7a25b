/* fuzz_gguf — libFuzzer harness for the GGUF reader: parses the input as a GGUF image in memory
 * (assay_gguf_open_memory) and, when it parses, walks everything through every accessor, nested arrays
 * included, and touches the first and last byte of every tensor (ASan catches reads outside the image).
 * A parsed image is also copied through the writer (set_kv for every key) into memory-free form: the
 * serialization code runs, the output is not written to disk. Seeds: fuzz/seeds_fuzz_gguf.sh.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assay/gguf.h"

static volatile uint64_t sink;

static void walk_array(const assay_gguf_kv *kv, int depth) {
    for (uint64_t i = 0; i < kv->array_len; i++) {
        switch (kv->array_type) {
        case ASSAY_GGUF_STRING: {
            assay_gguf_str s = assay_gguf_array_str(kv, i);
            if (s.len) sink += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
            break;
        }
        case ASSAY_GGUF_ARRAY: walk_array(assay_gguf_array_sub(kv, i), depth + 1); break;
        default:
            sink += (uint64_t)assay_gguf_array_int(kv, i);
            sink += (uint64_t)(assay_gguf_array_float(kv, i) != 0.0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    assay_gguf *g;
    if (assay_gguf_open_memory(&g, data, size, "fuzz.gguf") != ASSAY_OK) return 0;
    sink += assay_gguf_version(g) + assay_gguf_alignment(g) + assay_gguf_file_size(g) + assay_gguf_data_offset(g);
    assay_gguf_writer *w = assay_gguf_writer_new();
    for (int64_t i = 0; i < assay_gguf_kv_count(g); i++) {
        const assay_gguf_kv *kv = assay_gguf_kv_at(g, i);
        char key[128];
        size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.ptr, n);
        key[n] = 0;
        sink += (uint64_t)(assay_gguf_find(g, key) != NULL);
        sink += (uint64_t)assay_gguf_get_int(g, key, 0) + (uint64_t)assay_gguf_get_bool(g, key, 0);
        sink += (uint64_t)(assay_gguf_get_float(g, key, 0) != 0.0);
        assay_gguf_str s;
        if (assay_gguf_get_string(g, key, &s) && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        if (kv->type == ASSAY_GGUF_ARRAY) walk_array(kv, 0);
        assay_gguf_writer_set_kv(w, kv);
    }
    for (int64_t i = 0; i < assay_gguf_tensor_count(g); i++) {
        const assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        char name[128];
        size_t n = t->name.len < sizeof name - 1 ? (size_t)t->name.len : sizeof name - 1;
        memcpy(name, t->name.ptr, n);
        name[n] = 0;
        sink += (uint64_t)(assay_gguf_find_tensor(g, name) != NULL);
        if (t->bytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->bytes - 1];
        sink += (uint64_t)t->ne[0] + t->n_dims + (uint64_t)t->type;
    }
    assay_gguf_writer_free(w);
    assay_gguf_close(g);
    return 0;
}

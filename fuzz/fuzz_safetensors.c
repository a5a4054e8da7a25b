/* fuzz_safetensors.c — libFuzzer harness for the safetensors header parser on a memory buffer.
 *   bash scripts/fuzz.sh 300      (seeds: fuzz/seeds_fuzz_safetensors.sh)
 * Whatever the bytes, parsing must either fail with a message or yield tensors that lie inside the buffer. */
#include <stdint.h>
#include <string.h>

#include "assay/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    assay_safetensors *st;
    if (assay_safetensors_parse(&st, data, size, "fuzz") != ASSAY_OK) {
        if (!assay_last_error()[0]) __builtin_trap(); /* every failure carries a message */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < assay_safetensors_tensor_count(st); i++) {
        const assay_safetensors_tensor *t = assay_safetensors_tensor_at(st, i);
        const uint8_t *p = t->data;
        if (p < data || p + t->bytes > data + size) __builtin_trap();
        if (t->bytes) sink ^= p[0] ^ p[t->bytes - 1]; /* ASan checks these reads */
        if (assay_safetensors_find(st, t->name) != t) __builtin_trap();
    }
    (void)sink;
    assay_safetensors_close(st);
    return 0;
}

/* test_dequant_gguf.c — our reference dequantizers against gguf-py's numpy dequantizer, on rows of the real
 * PyPI GGUF models (Q4_1, Q8_0, Q5_0, Q4_K, Q6_K) and on random blocks of every type (Q4_0 ... Q6_K).
 * The expected floats are produced by tests/py/dequant_fixture.py (gguf.quants.dequantize). Exact match is
 * expected up to float rounding of d*q - m (tolerance 1e-6 relative to the block's magnitude). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "assay/dequant.h"
#include "check.h"

int main(void) {
    const char *py = getenv("ASSAY_PYTHON"), *srcdir = getenv("ASSAY_SOURCE_DIR"), *bdir = getenv("ASSAY_BUILD_DIR");
    if (!py || !srcdir || !bdir) {
        fprintf(stderr, "run through ctest (ASSAY_PYTHON, ASSAY_SOURCE_DIR, ASSAY_BUILD_DIR)\n");
        return 1;
    }
    char out[4096], cmd[12288];
    snprintf(out, sizeof out, "%s/dequant_fixture.bin", bdir);
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/dequant_fixture.py' '%s' '%s'", py, srcdir, out, srcdir);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(out, "rb");
    CHECK(f != NULL);
    if (!f) return check_finish("dequant_gguf");
    int records = 0;
    for (;;) {
        uint32_t type;
        uint64_t n, nb;
        if (fread(&type, 4, 1, f) != 1) break;
        if (fread(&n, 8, 1, f) != 1 || fread(&nb, 8, 1, f) != 1) {
            CHECK(!"record header cut short");
            break;
        }
        uint8_t *raw = malloc(nb);
        float *want = malloc(n * 4), *got = malloc(n * 4);
        CHECK(fread(raw, 1, nb, f) == nb && fread(want, 4, n, f) == n);
        CHECK_OK(assay_dequantize((assay_type)type, raw, got, (int64_t)n));
        double maxerr = 0, maxabs = 0;
        int64_t bad = 0;
        for (uint64_t i = 0; i < n; i++) {
            double e = fabs((double)got[i] - want[i]);
            if (e > maxerr) maxerr = e;
            if (fabs(want[i]) > maxabs) maxabs = fabs(want[i]);
            if (e > 1e-6 * (1 + fabs(want[i])) + 1e-7) bad++;
        }
        printf("type %u: %llu elements, max |err| %.3g (max |x| %.3g), %lld mismatches\n", type, (unsigned long long)n,
               maxerr, maxabs, (long long)bad);
        CHECK(bad == 0);
        records++;
        free(raw);
        free(want);
        free(got);
    }
    fclose(f);
    CHECK(records >= 10);
    return check_finish("dequant_gguf");
}

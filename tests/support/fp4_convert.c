/* fp4_convert.c — test support: quantizes a file of f32 (n a multiple of 32) with quant_fp4.h and writes the
 * encoded bytes followed by the n dequantized f32 values, for tests/py/test_fp4.py.
 *
 *   fp4_convert mxfp4 floor|rceil in.f32 out     # scales[n/32] (E8M0), codes[n/2], then f32[n]
 *   fp4_convert mxfp4-ggml floor|rceil in.f32 out   # n/32 blocks of 17 bytes, then f32[n]
 *   fp4_convert nvfp4 - in.f32 out               # f32 global scale, block scales[n/16] (E4M3), codes[n/2], f32[n]
 *   fp4_convert nvfp4-ct - in.f32 out            # the same fields in compressed-tensors' arithmetic (gs = 2688/amax)
 *   (mxfp4 / mxfp4-ggml also take the scale rule "ct": compressed-tensors' power-of-two rounding)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/quant_fp4.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fp4_convert mxfp4|mxfp4-ggml|nvfp4|nvfp4-ct floor|rceil|ct|- IN OUT\n");
        return 2;
    }
    FILE *f = fopen(argv[3], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    int64_t n = bytes / 4;
    float *x = malloc((size_t)bytes + 4), *y = malloc((size_t)bytes + 4);
    if (fread(x, 4, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    if (n % 32) {
        fprintf(stderr, "n must be a multiple of 32\n");
        return 2;
    }
    assay_mx_scale_mode mode = strcmp(argv[2], "rceil") == 0 ? ASSAY_MX_SCALE_RCEIL
                               : strcmp(argv[2], "ct") == 0  ? ASSAY_MX_SCALE_CT
                                                             : ASSAY_MX_SCALE_FLOOR;
    FILE *o = fopen(argv[4], "wb");
    if (!o) return 1;
    if (strcmp(argv[1], "mxfp4") == 0) {
        uint8_t *sc = malloc((size_t)n / 32), *c = malloc((size_t)n / 2);
        assay_mxfp4_quantize(x, n, mode, sc, c);
        assay_mxfp4_dequantize(sc, c, n, y);
        fwrite(sc, 1, (size_t)n / 32, o);
        fwrite(c, 1, (size_t)n / 2, o);
        free(sc), free(c);
    } else if (strcmp(argv[1], "mxfp4-ggml") == 0) {
        assay_block_mxfp4 *b = malloc(sizeof *b * (size_t)(n / 32));
        assay_mxfp4_quantize_ggml(x, n, mode, b);
        assay_mxfp4_dequantize_ggml(b, n, y);
        fwrite(b, sizeof *b, (size_t)n / 32, o);
        free(b);
    } else if (strcmp(argv[1], "nvfp4") == 0) {
        float amax = 0;
        for (int64_t i = 0; i < n; i++) amax = x[i] > amax ? x[i] : -x[i] > amax ? -x[i] : amax;
        float g = assay_nvfp4_global_scale(amax);
        uint8_t *sb = malloc((size_t)n / 16), *c = malloc((size_t)n / 2);
        assay_nvfp4_quantize(x, n, g, sb, c);
        assay_nvfp4_dequantize(sb, c, n, g, y);
        fwrite(&g, 4, 1, o);
        fwrite(sb, 1, (size_t)n / 16, o);
        fwrite(c, 1, (size_t)n / 2, o);
        free(sb), free(c);
    } else if (strcmp(argv[1], "nvfp4-ct") == 0) {
        float amax = 0;
        for (int64_t i = 0; i < n; i++) amax = x[i] > amax ? x[i] : -x[i] > amax ? -x[i] : amax;
        float gs = assay_nvfp4_ct_global_scale(amax);
        uint8_t *sb = malloc((size_t)n / 16), *c = malloc((size_t)n / 2);
        assay_nvfp4_quantize_ct(x, n, gs, sb, c);
        assay_nvfp4_dequantize_ct(sb, c, n, gs, y);
        fwrite(&gs, 4, 1, o);
        fwrite(sb, 1, (size_t)n / 16, o);
        fwrite(c, 1, (size_t)n / 2, o);
        free(sb), free(c);
    } else {
        fprintf(stderr, "unknown format %s\n", argv[1]);
        return 2;
    }
    fwrite(y, 4, (size_t)n, o);
    free(x), free(y);
    return fclose(o) == 0 ? 0 : 1;
}

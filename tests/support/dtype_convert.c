/* dtype_convert.c — test support: converts a binary file with the dtype.h functions, so Python tests can
 * compare every code and millions of f32 patterns against ml_dtypes in one call.
 *
 *   dtype_convert encode e4m3 in.f32 out.u8      # f32 values -> codes (u8, or u16 for bf16/f16)
 *   dtype_convert decode bf16 in.u16 out.f32     # codes -> f32
 *   dtype_convert encode-row bf16 ...            # the same through the row converters (AVX2 when available)
 *
 * Formats: bf16 f16 e4m3 e5m2 e2m1 e8m0. Exit code 0 on success, 2 on usage errors, 1 on I/O errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/dtype.h"

static void *read_all(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    *bytes = (size_t)n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: dtype_convert encode|decode|encode-row|decode-row FORMAT IN OUT\n");
        return 2;
    }
    const char *op = argv[1], *fmt = argv[2];
    int encode = strncmp(op, "encode", 6) == 0, row = strstr(op, "-row") != NULL;
    int wide = !strcmp(fmt, "bf16") || !strcmp(fmt, "f16");
    size_t bytes = 0;
    void *in = read_all(argv[3], &bytes);
    if (!in) {
        fprintf(stderr, "cannot read %s\n", argv[3]);
        return 1;
    }
    size_t code_bytes = wide ? 2 : 1;
    int64_t n = (int64_t)(encode ? bytes / 4 : bytes / code_bytes);
    size_t out_bytes = (size_t)n * (encode ? code_bytes : 4);
    void *out = malloc(out_bytes ? out_bytes : 1);
    const float *f = in;
    const uint8_t *c8 = in;
    const uint16_t *c16 = in;
    float *of = out;
    uint8_t *o8 = out;
    uint16_t *o16 = out;
    int ok = 1;
    if (encode) {
        if (!strcmp(fmt, "bf16")) {
            if (row) assay_f32_to_bf16_row(f, o16, n);
            else for (int64_t i = 0; i < n; i++) o16[i] = assay_f32_to_bf16(f[i]);
        } else if (!strcmp(fmt, "f16")) {
            if (row) assay_f32_to_f16_row(f, o16, n);
            else for (int64_t i = 0; i < n; i++) o16[i] = assay_f32_to_f16(f[i]);
        } else if (!strcmp(fmt, "e4m3")) {
            if (row) assay_f32_to_fp8_e4m3_row(f, o8, n);
            else for (int64_t i = 0; i < n; i++) o8[i] = assay_f32_to_fp8_e4m3(f[i]);
        } else if (!strcmp(fmt, "e5m2")) {
            if (row) assay_f32_to_fp8_e5m2_row(f, o8, n);
            else for (int64_t i = 0; i < n; i++) o8[i] = assay_f32_to_fp8_e5m2(f[i]);
        } else if (!strcmp(fmt, "e2m1")) {
            for (int64_t i = 0; i < n; i++) o8[i] = assay_f32_to_fp4_e2m1(f[i]);
        } else if (!strcmp(fmt, "e8m0")) {
            for (int64_t i = 0; i < n; i++) o8[i] = assay_f32_to_e8m0(f[i]);
        } else ok = 0;
    } else {
        if (!strcmp(fmt, "bf16")) {
            if (row) assay_bf16_to_f32_row(c16, of, n);
            else for (int64_t i = 0; i < n; i++) of[i] = assay_bf16_to_f32(c16[i]);
        } else if (!strcmp(fmt, "f16")) {
            if (row) assay_f16_to_f32_row(c16, of, n);
            else for (int64_t i = 0; i < n; i++) of[i] = assay_f16_to_f32(c16[i]);
        } else if (!strcmp(fmt, "e4m3")) {
            if (row) assay_fp8_e4m3_to_f32_row(c8, of, n);
            else for (int64_t i = 0; i < n; i++) of[i] = assay_fp8_e4m3_to_f32(c8[i]);
        } else if (!strcmp(fmt, "e5m2")) {
            if (row) assay_fp8_e5m2_to_f32_row(c8, of, n);
            else for (int64_t i = 0; i < n; i++) of[i] = assay_fp8_e5m2_to_f32(c8[i]);
        } else if (!strcmp(fmt, "e2m1")) {
            for (int64_t i = 0; i < n; i++) of[i] = assay_fp4_e2m1_to_f32(c8[i]);
        } else if (!strcmp(fmt, "e8m0")) {
            for (int64_t i = 0; i < n; i++) of[i] = assay_e8m0_to_f32(c8[i]);
        } else ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "unknown format %s\n", fmt);
        return 2;
    }
    FILE *fo = fopen(argv[4], "wb");
    if (!fo || fwrite(out, 1, out_bytes, fo) != out_bytes || fclose(fo) != 0) {
        fprintf(stderr, "cannot write %s\n", argv[4]);
        return 1;
    }
    free(in);
    free(out);
    return 0;
}

/* Host helpers for the CUDA kernel lab: number formats, random inputs, timing, JSON records. C11. */
#ifndef ASSAY_LAB_UTIL_H
#define ASSAY_LAB_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/cuda_kernels.h"

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

#define KCALL(call)                                                                                   \
    do {                                                                                              \
        if ((call) != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, assay_cuda_last_error()); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

/* ---- number formats (reference conversions written from the format definitions) ---------------- */
static inline float lab_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t lab_f32_to_bf16(float f) { /* round to nearest even; inputs here are finite */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline double lab_f16_to_f64(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
/* Round to nearest even (finite inputs below 65520; the default rounding mode of nearbyint). */
static inline uint16_t lab_f64_to_f16(double x) {
    uint16_t s = x < 0 ? 0x8000 : 0;
    double a = fabs(x);
    if (a < ldexp(1.0, -14)) return s | (uint16_t)nearbyint(ldexp(a, 24)); /* subnormal (1024 = the smallest normal) */
    int ex;
    frexp(a, &ex);
    int e = ex - 1;
    double mant = nearbyint((ldexp(a, -e) - 1.0) * 1024.0);
    if (mant == 1024.0) { mant = 0; ++e; }
    return s | (uint16_t)((e + 15) << 10) | (uint16_t)mant;
}
/* 8-bit float with `mb` mantissa bits and exponent bias `bias` (e4m3: 3, 7; e5m2: 2, 15). */
static inline double lab_fp8_decode(uint8_t c, int mb, int bias) {
    int e = (c & 0x7F) >> mb, m = c & ((1 << mb) - 1);
    double v = e == 0 ? ldexp(m, 1 - bias - mb) : ldexp((1 << mb) + m, e - bias - mb);
    return (c & 0x80) ? -v : v;
}
/* Round to nearest even, saturating at the largest finite value `maxcode`. */
static inline uint8_t lab_fp8_encode(double x, int mb, int bias, uint8_t maxcode) {
    uint8_t s = x < 0 ? 0x80 : 0;
    double a = fabs(x);
    double maxv = lab_fp8_decode(maxcode, mb, bias);
    if (a >= maxv) return s | maxcode;
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) -> unbiased exponent e-1 */
    int ue = e - 1;
    if (a == 0) return s;
    if (ue < 1 - bias) { /* subnormal */
        double q = rint(ldexp(a, bias - 1 + mb));
        return s | (uint8_t)q; /* q == 1<<mb encodes the smallest normal, as it should */
    }
    double q = rint(ldexp(a, mb - ue)); /* in [2^mb, 2^(mb+1)] */
    if (q >= (1 << (mb + 1))) { q /= 2; ue += 1; }
    int code = ((ue + bias) << mb) | ((int)q - (1 << mb));
    if (code > maxcode) code = maxcode;
    return s | (uint8_t)code;
}
#define LAB_E4M3_ENC(x) lab_fp8_encode((x), 3, 7, 0x7E)
#define LAB_E5M2_ENC(x) lab_fp8_encode((x), 2, 15, 0x7B)
#define LAB_E4M3_DEC(c) lab_fp8_decode((c), 3, 7)
#define LAB_E5M2_DEC(c) lab_fp8_decode((c), 2, 15)

/* ---- random numbers (splitmix64; fresh seed per run unless LAB_SEED is set) ---------------------- */
static uint64_t lab_rng_state = 0x9E3779B97F4A7C15ull;
static inline uint64_t lab_rand_u64(void) {
    uint64_t z = (lab_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double lab_uniform(void) { return (double)(lab_rand_u64() >> 11) * 0x1.0p-53; }
static inline double lab_normal(void) {
    double u1 = lab_uniform() + 1e-300, u2 = lab_uniform();
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- device buffers ------------------------------------------------------------------------------ */
static inline void *lab_dmalloc(size_t n) {
    void *p = NULL;
    CK(cudaMalloc(&p, n ? n : 1));
    return p;
}
static inline void *lab_upload(const void *h, size_t n) {
    void *d = lab_dmalloc(n);
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

/* ---- error statistics ------------------------------------------------------------------------------ */
typedef struct lab_err {
    double num, den, max_abs; /* sum (out-ref)^2, sum ref^2, max |out-ref| */
    long nan, count;
} lab_err;
static inline void lab_err_add(lab_err *e, double out, double ref) {
    e->count++;
    if (isnan(out) || isinf(out)) { e->nan++; return; }
    double d = out - ref;
    e->num += d * d;
    e->den += ref * ref;
    if (fabs(d) > e->max_abs) e->max_abs = fabs(d);
}
static inline double lab_err_rel(const lab_err *e) { return e->den > 0 ? sqrt(e->num / e->den) : sqrt(e->num); }

/* ---- JSON records (one object per line inside an array) ----------------------------------------------- */
typedef struct lab_out {
    FILE *f;
    int n;
    int failures;
} lab_out;

static inline void lab_json_begin(lab_out *o, const char *path) {
    o->f = path ? fopen(path, "w") : NULL;
    o->n = 0;
    o->failures = 0;
    if (o->f) fprintf(o->f, "[\n");
}
static inline void lab_json_end(lab_out *o) {
    if (o->f) {
        fprintf(o->f, "\n]\n");
        fclose(o->f);
    }
}
/* A validation record: rel error against the float64 reference, tolerance, NaN/unwritten count. */
static inline void lab_validate(lab_out *o, const char *kernel, const char *shape, const lab_err *e, double tol) {
    double rel = lab_err_rel(e);
    int pass = e->nan == 0 && rel <= tol && e->count > 0;
    if (!pass) o->failures++;
    printf("%-6s %-28s %-44s rel %.3e  max_abs %.3e  nan %ld  (tol %.0e)\n", pass ? "PASS" : "FAIL", kernel, shape,
           rel, e->max_abs, e->nan, tol);
    fflush(stdout);
    if (o->f)
        fprintf(o->f,
                "%s{\"type\":\"validate\",\"kernel\":\"%s\",\"shape\":\"%s\",\"rel_err\":%.6e,\"max_abs\":%.6e,"
                "\"nan_or_unwritten\":%ld,\"checked\":%ld,\"tol\":%.1e,\"pass\":%s}",
                o->n++ ? ",\n" : "", kernel, shape, rel, e->max_abs, e->nan, e->count, tol, pass ? "true" : "false");
}
/* A benchmark record: median time, and the rate in the unit that bounds the kernel. */
static inline void lab_bench(lab_out *o, const char *kernel, const char *shape, double us, double flops,
                             double bytes) {
    double tflops = flops / (us * 1e-6) / 1e12, tbps = bytes / (us * 1e-6) / 1e12;
    printf("BENCH  %-28s %-44s %9.2f us  %7.1f TFLOP/s  %5.2f TB/s\n", kernel, shape, us, tflops, tbps);
    fflush(stdout);
    if (o->f)
        fprintf(o->f,
                "%s{\"type\":\"bench\",\"kernel\":\"%s\",\"shape\":\"%s\",\"us\":%.3f,\"flops\":%.6e,\"bytes\":%.6e,"
                "\"tflops\":%.3f,\"tbps\":%.4f}",
                o->n++ ? ",\n" : "", kernel, shape, us, flops, bytes, tflops, tbps);
}

static inline int lab_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* ---- timing: median over `reps` of `inner` back-to-back launches between CUDA events ------------------- */
typedef void (*lab_fn)(void *ctx, int iter);

static inline double lab_time_us(lab_fn fn, void *ctx, int inner, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) fn(ctx, i);
    CK(cudaDeviceSynchronize());
    double t[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a, 0));
        for (int i = 0; i < inner; ++i) fn(ctx, r * inner + i);
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[r] = ms * 1e3 / inner;
    }
    CK(cudaGetLastError());
    qsort(t, reps, sizeof(double), lab_cmp_double);
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[reps / 2];
}

#endif

/* cpu_kernels.c (built as bench_cpu_kernels) — speed of the CPU dot kernels alone, per weight type: the scalar
 * reference and the AVX2 kernels (one token, and the four-token prefill kernel where there is one), and the AVX-512
 * tiled gemms (avx512bf16: bf16 weights x bf16 activations; amx: AMX int8 tiles from 16 tokens on). q4g128 (packed GPTQ/AWQ int4, f32 activations) runs next to f32, the path it replaced.
 *
 *   bench_cpu_kernels [N_IN] [ROWS]      defaults 1536 and 256 (a weight slab that stays in L2)
 *
 * Times are thread CPU time (best of 5), so other jobs on a shared machine disturb them little; GMAC/s counts
 * multiply-adds, GB/s the weight bytes read. Weights are random bytes with sane fp16 block scales. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assay/weight_type.h"
#include "backend/cpu/cpu_kernels.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* byte offsets of the fp16 scales in a block (-1: none), so random bytes do not make Inf/NaN/denormal scales */
static void fix_scales(assay_type t, uint8_t *w, size_t bytes) {
    int off[2] = {-1, -1};
    switch (t) {
    case ASSAY_TYPE_Q4_0: case ASSAY_TYPE_Q5_0: case ASSAY_TYPE_Q8_0: off[0] = 0; break;
    case ASSAY_TYPE_Q4_1: case ASSAY_TYPE_Q5_1: case ASSAY_TYPE_Q4_K: case ASSAY_TYPE_Q5_K: off[0] = 0; off[1] = 2; break;
    case ASSAY_TYPE_Q6_K: off[0] = 208; break;
    case ASSAY_TYPE_Q4G32: case ASSAY_TYPE_Q4G64: case ASSAY_TYPE_Q4G128: off[0] = 0; break; /* zero bytes: any */
    case ASSAY_TYPE_F32: /* random bytes would hold denormals and NaNs, which are slow */
        for (size_t i = 0; i + 4 <= bytes; i += 4) {
            float f = (float)((int)((i / 4) % 200) - 100) / 256.0f;
            memcpy(w + i, &f, 4);
        }
        return;
    case ASSAY_TYPE_F16: case ASSAY_TYPE_BF16:
        for (size_t i = 0; i + 2 <= bytes; i += 2) {
            uint16_t h = (uint16_t)((t == ASSAY_TYPE_F16 ? 0x3400 : 0x3e80) + (i / 2) % 200);
            memcpy(w + i, &h, 2);
        }
        return;
    default: return;
    }
    size_t bb = assay_type_get(t)->block_bytes;
    uint16_t h = 0x2c00; /* 1/16 */
    for (size_t o = 0; o + bb <= bytes; o += bb)
        for (int k = 0; k < 2; k++)
            if (off[k] >= 0) memcpy(w + o + off[k], &h, 2);
}

static double time_dot(const assay_cpu_type_kernels *tk, int four, int64_t n, const uint8_t *w, size_t rb, int64_t rows,
                       const uint8_t *xq, size_t xr, int iters) {
    float s[4];
    volatile float sink = 0;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = cpu_now();
        for (int it = 0; it < iters; it++)
            for (int64_t r = 0; r < rows; r++) {
                if (four) tk->vec_dot4(n, s, w + r * rb, xq, xr);
                else tk->vec_dot(n, s, w + r * rb, xq);
                sink += s[0];
            }
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
    }
    (void)sink;
    return best;
}

/* the tiled gemm over all rows: nt tokens (1: decode, 64: a prefill tile), GMAC/s */
static double time_gemm(const assay_cpu_type_kernels *tk, int64_t n, const uint8_t *w, size_t rb, int64_t rows,
                        const float *x, int nt, int iters) {
    size_t xs = tk->gemm_pack ? (tk->gemm_act_bytes(n) + 63) & ~(size_t)63 : (size_t)n * sizeof(float);
    size_t extra = tk->gemm_act_extra ? tk->gemm_act_extra(n, nt) + 64 : 0;
    uint8_t *xp = aligned_alloc(64, (xs * (size_t)nt + extra + 63) & ~(size_t)63); /* size: a multiple of the alignment */
    for (int t = 0; t < nt; t++) {
        if (tk->gemm_pack) tk->gemm_pack(x + (t % 4) * n, xp + t * xs, n);
        else memcpy(xp + t * xs, x + (t % 4) * n, (size_t)n * sizeof(float));
    }
    if (tk->gemm_act_finish) tk->gemm_act_finish(xp, xs, n, nt);
    void *scratch = malloc(tk->gemm_scratch_bytes ? tk->gemm_scratch_bytes(n) : 1);
    float *y = malloc(sizeof(float) * (size_t)rows * (size_t)nt);
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = cpu_now();
        for (int it = 0; it < iters; it++) tk->gemm(n, rows, nt, w, rb, xp, xs, y, rows, scratch);
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
    }
    free(xp); free(scratch); free(y);
    return (double)iters * (double)rows * (double)n * nt / best / 1e9;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 1536, rows = argc > 2 ? atoll(argv[2]) : 256;
    if (n <= 0 || n % 256 || rows <= 0) return fprintf(stderr, "usage: bench_cpu_kernels [N_IN (multiple of 256)] [ROWS]\n"), 2;
    const assay_cpu_kernels *sets[5] = {assay_cpu_kernels_ref(), assay_cpu_has_avx2() ? assay_cpu_kernels_avx2() : NULL,
                                        assay_cpu_has_avx512() ? assay_cpu_kernels_avx512() : NULL,
                                        assay_cpu_has_avx512bf16() ? assay_cpu_kernels_avx512bf16() : NULL,
                                        assay_cpu_has_amx() ? assay_cpu_kernels_amx() : NULL};
    const assay_type types[] = {ASSAY_TYPE_Q4_0, ASSAY_TYPE_Q4_1, ASSAY_TYPE_Q5_0, ASSAY_TYPE_Q5_1, ASSAY_TYPE_Q8_0,
                                ASSAY_TYPE_Q4_K, ASSAY_TYPE_Q5_K, ASSAY_TYPE_Q6_K, ASSAY_TYPE_BF16, ASSAY_TYPE_F16,
                                ASSAY_TYPE_F32, ASSAY_TYPE_Q4G128}; /* f32: the peer of the packed GPTQ/AWQ q4g128 */
    float *x = malloc((size_t)(4 * n) * sizeof(float));
    for (int64_t i = 0; i < 4 * n; i++) x[i] = (float)((i * 37) % 101 - 50) / 50.0f;
    printf("n_in %lld, %lld rows; thread CPU time, best of 5; gemm columns: the tiled gemm over all rows\n"
           "%-6s %-7s %10s %10s %14s %14s %14s\n", (long long)n, (long long)rows,
           "type", "kernels", "GMAC/s", "GB/s", "4-tok GMAC/s", "gemm 1-tok", "gemm 64-tok");
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        assay_type t = types[k];
        size_t rb = assay_type_row_bytes(t, n);
        uint8_t *w = malloc(rb * (size_t)rows);
        for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)(i * 131 + 7);
        fix_scales(t, w, rb * (size_t)rows);
        for (int si = 0; si < 5; si++) {
            const assay_cpu_kernels *K = sets[si];
            if (!K || !K->type[t].vec_dot) continue;
            if (si == 3 && t != ASSAY_TYPE_BF16) continue; /* the bf16 table differs from avx512's only there */
            if (si == 4 && (K->type[t].gemm == sets[2]->type[t].gemm || t == ASSAY_TYPE_BF16)) continue; /* amx: its own */
            const assay_cpu_type_kernels *tk = &K->type[t];
            size_t xr = tk->vec_dot_type == ASSAY_TYPE_F32 ? (size_t)n * sizeof(float) : assay_type_row_bytes(tk->vec_dot_type, n);
            uint8_t *xq = malloc(4 * xr);
            for (int j = 0; j < 4; j++) K->from_float[tk->vec_dot_type](x + j * n, xq + j * xr, n);
            int iters = si == 0 ? 4 : 40;
            double macs = (double)iters * (double)rows * (double)n;
            double t1 = time_dot(tk, 0, n, w, rb, rows, xq, xr, iters);
            printf("%-6s %-7s %10.2f %10.2f", assay_type_name(t), K->name, macs / t1 / 1e9,
                   (double)iters * (double)rows * (double)rb / t1 / 1e9);
            if (tk->vec_dot4) printf(" %14.2f", 4 * macs / time_dot(tk, 1, n, w, rb, rows, xq, xr, iters) / 1e9);
            else printf(" %14s", "-");
            if (tk->gemm)
                printf(" %14.2f %14.2f\n", time_gemm(tk, n, w, rb, rows, x, 1, iters), time_gemm(tk, n, w, rb, rows, x, 64, iters / 8 + 1));
            else printf(" %14s %14s\n", "-", "-");
            free(xq);
        }
        free(w);
    }
    free(x);
    return 0;
}

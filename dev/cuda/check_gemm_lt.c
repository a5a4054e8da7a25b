/* Kernel lab section "gemm_lt": the cuBLASLt GEMMs (src/backend/cuda/gemm_cublaslt.cu) for prefill shapes.
 *
 * Validation: fresh random bf16 values / E4M3 codes and random scales, outputs poisoned with NaN, compared with a
 * float64 product of the exact decoded inputs. A scale applied to the wrong element (a layout mix-up) moves the
 * result by tens of percent, far above the tolerance; when a scaled variant fails, the error under the other
 * plausible scale layouts is printed too, so one run tells which layout the library actually read.
 * Benchmark: m = n = k = 8192, the shape of the PyTorch peers (cuBLAS bf16, torch._scaled_mm) in bench/peers.py. */
#include "lab_util.h"

void section_gemm_lt(lab_out *o, int quick, uint64_t seed);

typedef struct lt_case {
    int32_t m, n, k;
    uint16_t *xb, *wb;      /* bf16 inputs */
    uint8_t *x8, *w8;       /* e4m3 codes */
    float *xs, *ws;         /* scales (sized for the largest recipe) */
} lt_case;

/* Element (i, j) of the product under scaling s, with alternative scale layouts `alt` for the diagnosis:
 * alt bit 0: activation groups read as x_scale[m][k/128] instead of [k/128][m];
 * alt bit 1: weight blocks read as w_scale[k/128][n/128] instead of [n/128][k/128]. */
static double lt_ref(const lt_case *c, int fp8, int s, int alt, int i, int j) {
    double acc = 0;
    int kb_n = c->k / 128, nb_n = c->n / 128, kb_stride = assay_cuda_blas_block_scale_stride(c->k);
    for (int32_t kk = 0; kk < c->k; ++kk) {
        double x, w;
        if (!fp8) {
            x = lab_bf16_to_f32(c->xb[(size_t)i * c->k + kk]);
            w = lab_bf16_to_f32(c->wb[(size_t)j * c->k + kk]);
        } else {
            x = LAB_E4M3_DEC(c->x8[(size_t)i * c->k + kk]);
            w = LAB_E4M3_DEC(c->w8[(size_t)j * c->k + kk]);
            if (s == ASSAY_CUDA_FP8_PER_TENSOR) {
                x *= c->xs[0];
                w *= c->ws[0];
            } else if (s == ASSAY_CUDA_FP8_PER_TOKEN_CHANNEL) {
                x *= c->xs[i];
                w *= c->ws[j];
            } else {
                int kb = kk / 128, nb = j / 128;
                x *= (alt & 1) ? c->xs[(size_t)i * kb_n + kb] : c->xs[(size_t)kb * c->m + i];
                w *= (alt & 2) ? c->ws[(size_t)kb * nb_n + nb] : c->ws[(size_t)nb * kb_stride + kb];
            }
        }
        acc += x * w;
    }
    return acc;
}

static lab_err lt_compare(const lt_case *c, const uint16_t *y, int fp8, int s, int alt) {
    lab_err e = {0};
    for (int32_t i = 0; i < c->m; ++i)
        for (int32_t j = 0; j < c->n; ++j) lab_err_add(&e, lab_bf16_to_f32(y[(size_t)i * c->n + j]), lt_ref(c, fp8, s, alt, i, j));
    return e;
}

static void lt_fill(lt_case *c, int32_t m, int32_t n, int32_t k) {
    c->m = m, c->n = n, c->k = k;
    size_t xk = (size_t)m * k, wk = (size_t)n * k;
    c->xb = malloc(xk * 2), c->wb = malloc(wk * 2), c->x8 = malloc(xk), c->w8 = malloc(wk);
    size_t ns = (size_t)(m > n ? m : n) * (k / 128 + 1) + 1;
    c->xs = malloc(ns * sizeof(float)), c->ws = malloc(ns * sizeof(float));
    for (size_t i = 0; i < xk; ++i) {
        c->xb[i] = lab_f32_to_bf16((float)lab_normal());
        c->x8[i] = LAB_E4M3_ENC(lab_normal() * 64.0);
    }
    for (size_t i = 0; i < wk; ++i) {
        c->wb[i] = lab_f32_to_bf16((float)(lab_normal() * 0.05));
        c->w8[i] = LAB_E4M3_ENC(lab_normal() * 64.0);
    }
    /* scales spread over 2^-10 .. 2^-6 so that a misplaced one is visible */
    for (size_t i = 0; i < ns; ++i) {
        c->xs[i] = (float)ldexp(1.0 + lab_uniform(), -10 + (int)(lab_uniform() * 4));
        c->ws[i] = (float)ldexp(1.0 + lab_uniform(), -10 + (int)(lab_uniform() * 4));
    }
}

static void lt_free(lt_case *c) {
    free(c->xb), free(c->wb), free(c->x8), free(c->w8), free(c->xs), free(c->ws);
}

static const char *k_scaling_names[] = {"tensor", "token_channel", "block128"};

static void lt_validate(lab_out *o, assay_cuda_blas *blas, int32_t m, int32_t n, int32_t k) {
    lt_case c;
    lt_fill(&c, m, n, k);
    size_t xk = (size_t)m * k, wk = (size_t)n * k, ny = (size_t)m * n;
    size_t ns = (size_t)(m > n ? m : n) * (k / 128 + 1) + 1;
    void *dxb = lab_upload(c.xb, xk * 2), *dwb = lab_upload(c.wb, wk * 2);
    uint8_t *dx8 = lab_upload(c.x8, xk), *dw8 = lab_upload(c.w8, wk);
    float *dxs = lab_upload(c.xs, ns * sizeof(float)), *dws = lab_upload(c.ws, ns * sizeof(float));
    void *dy = lab_dmalloc(ny * 2);
    uint16_t *y = malloc(ny * 2);
    char shape[64];
    snprintf(shape, sizeof shape, "m%d n%d k%d", m, n, k);

    CK(cudaMemset(dy, 0xFF, ny * 2)); /* 0xFFFF is a bf16 NaN: anything left unwritten fails */
    KCALL(assay_cuda_blas_gemm_bf16(blas, dxb, dwb, dy, m, n, k, NULL));
    CK(cudaMemcpy(y, dy, ny * 2, cudaMemcpyDeviceToHost));
    lab_err e = lt_compare(&c, y, 0, 0, 0);
    lab_validate(o, "gemm_lt_bf16", shape, &e, 5e-3);

    for (int s = 0; s < ASSAY_CUDA_FP8_SCALING_COUNT; ++s) {
        char name[64];
        snprintf(name, sizeof name, "gemm_lt_fp8_%s", k_scaling_names[s]);
        CK(cudaMemset(dy, 0xFF, ny * 2));
        if (assay_cuda_blas_gemm_fp8(blas, dx8, dxs, dw8, dws, (assay_cuda_fp8_scaling)s, dy, m, n, k, NULL) != 0) {
            printf("FAIL   %-28s %-44s %s\n", name, shape, assay_cuda_last_error());
            lab_err none = {0};
            lab_validate(o, name, shape, &none, 5e-3); /* records the failure (nothing checked) */
            continue;
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(y, dy, ny * 2, cudaMemcpyDeviceToHost));
        e = lt_compare(&c, y, 1, s, 0);
        lab_validate(o, name, shape, &e, 5e-3);
        if (s == ASSAY_CUDA_FP8_BLOCK_128 && lab_err_rel(&e) > 5e-3)
            for (int alt = 1; alt < 4; ++alt) {
                lab_err ea = lt_compare(&c, y, 1, s, alt);
                printf("       diagnosis: %s read as x_scale %s, w_scale %s: rel %.3e\n", name,
                       (alt & 1) ? "[m][k/128]" : "[k/128][m]", (alt & 2) ? "[k/128][n/128]" : "[n/128][k/128]",
                       lab_err_rel(&ea));
            }
    }
    free(y);
    cudaFree(dxb), cudaFree(dwb), cudaFree(dx8), cudaFree(dw8), cudaFree(dxs), cudaFree(dws), cudaFree(dy);
    lt_free(&c);
}

/* The 1x128-group activation quantizer: codes and scales must equal a CPU transcription of the same float
 * arithmetic (scale = amax / 448, code = e4m3(x * (448 / amax)), round to nearest even, saturating), then the whole
 * block recipe (quantize X on the GPU, block-scaled GEMM) is compared with the float64 product of the bf16 X. */
static void lt_validate_groups(lab_out *o, assay_cuda_blas *blas, int32_t m, int32_t n, int32_t k, int with_gemm) {
    size_t xk = (size_t)m * k, wk = (size_t)n * k, ng = (size_t)m * (k / 128);
    uint16_t *x = malloc(xk * 2);
    uint8_t *w8 = malloc(wk), *codes = malloc(xk);
    const size_t kbs = (size_t)assay_cuda_blas_block_scale_stride(k), nws = (size_t)(n / 128) * kbs;
    float *xs = malloc(ng * sizeof(float)), *ws = malloc(nws * sizeof(float));
    for (size_t i = 0; i < xk; ++i) {
        double v = lab_normal();
        if ((i % k) % 97 == 5) v *= 40.0; /* outlier channels: the reason for per-group scales */
        if (i < (size_t)k && (i / 128) == 1) v = 0.0; /* one all-zero group: scale 0, codes 0 */
        x[i] = lab_f32_to_bf16((float)v);
    }
    for (size_t i = 0; i < wk; ++i) w8[i] = LAB_E4M3_ENC(lab_normal() * 64.0);
    for (size_t i = 0; i < nws; ++i) ws[i] = (float)ldexp(1.0 + lab_uniform(), -9);
    void *dx = lab_upload(x, xk * 2);
    uint8_t *dq = lab_dmalloc(xk), *dw = lab_upload(w8, wk);
    float *dxs = lab_dmalloc(ng * sizeof(float)), *dws = lab_upload(ws, nws * sizeof(float));
    void *dy = lab_dmalloc((size_t)m * n * 2);
    CK(cudaMemset(dq, 0x7F, xk)); /* 0x7F is an e4m3 NaN code */
    CK(cudaMemset(dxs, 0xFF, ng * sizeof(float)));
    KCALL(assay_cuda_quant_fp8_groups128(dx, dq, dxs, m, k, NULL));
    CK(cudaMemcpy(codes, dq, xk, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(xs, dxs, ng * sizeof(float), cudaMemcpyDeviceToHost));
    long code_mismatch = 0, scale_mismatch = 0;
    for (int32_t t = 0; t < m; ++t)
        for (int32_t g = 0; g < k / 128; ++g) {
            float amax = 0.f;
            for (int j = 0; j < 128; ++j) amax = fmaxf(amax, fabsf(lab_bf16_to_f32(x[(size_t)t * k + g * 128 + j])));
            float inv = amax > 0.f ? 448.f / amax : 0.f, sc = amax / 448.f;
            if (memcmp(&sc, &xs[(size_t)g * m + t], 4) != 0) scale_mismatch++;
            for (int j = 0; j < 128; ++j) {
                size_t i = (size_t)t * k + g * 128 + j;
                float v = lab_bf16_to_f32(x[i]) * inv;
                if (LAB_E4M3_ENC(v) != codes[i]) code_mismatch++;
            }
        }
    char shape[96];
    snprintf(shape, sizeof shape, "m%d k%d code_mismatch%ld scale_mismatch%ld", m, k, code_mismatch, scale_mismatch);
    lab_err e = {0};
    for (size_t i = 0; i < xk; ++i) { /* dequantized value against the bf16 input: the FP8 rounding error */
        size_t t = i / k, g = (i % k) / 128;
        lab_err_add(&e, LAB_E4M3_DEC(codes[i]) * xs[g * m + t], lab_bf16_to_f32(x[i]));
    }
    if (code_mismatch || scale_mismatch) e.nan++; /* counted as a failure: the codes must be exact */
    lab_validate(o, "quant_fp8_groups128", shape, &e, 4e-2);

    uint16_t *y = malloc((size_t)m * n * 2);
    if (!with_gemm) goto done;
    CK(cudaMemset(dy, 0xFF, (size_t)m * n * 2));
    lab_err eq = {0};
    snprintf(shape, sizeof shape, "m%d n%d k%d vs bf16 x", m, n, k);
    if (assay_cuda_blas_gemm_fp8(blas, dq, dxs, dw, dws, ASSAY_CUDA_FP8_BLOCK_128, dy, m, n, k, NULL) != 0 ||
        cudaDeviceSynchronize() != cudaSuccess) {
        printf("FAIL   %-28s %-44s %s %s\n", "gemm_lt_fp8_block128_e2e", shape, assay_cuda_last_error(),
               cudaGetErrorString(cudaGetLastError()));
        lab_validate(o, "gemm_lt_fp8_block128_e2e", shape, &eq, 4e-2); /* nothing checked: recorded as failed */
        goto done;
    }
    CK(cudaMemcpy(y, dy, (size_t)m * n * 2, cudaMemcpyDeviceToHost));
    for (int32_t i = 0; i < m; ++i)
        for (int32_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int32_t kk = 0; kk < k; ++kk)
                acc += (double)lab_bf16_to_f32(x[(size_t)i * k + kk]) * LAB_E4M3_DEC(w8[(size_t)j * k + kk]) *
                       ws[(size_t)(j / 128) * kbs + kk / 128];
            lab_err_add(&eq, lab_bf16_to_f32(y[(size_t)i * n + j]), acc);
        }
    lab_validate(o, "gemm_lt_fp8_block128_e2e", shape, &eq, 4e-2);
done:
    free(x), free(w8), free(codes), free(xs), free(ws), free(y);
    cudaFree(dx), cudaFree(dq), cudaFree(dw), cudaFree(dxs), cudaFree(dws), cudaFree(dy);
}

typedef struct lt_quant {
    void *x;
    uint8_t *q;
    float *s;
    int32_t m, k;
} lt_quant;

static void lt_quant_fn(void *ctx, int it) {
    (void)it;
    lt_quant *q = ctx;
    KCALL(assay_cuda_quant_fp8_groups128(q->x, q->q, q->s, q->m, q->k, NULL));
}

typedef struct lt_bench {
    assay_cuda_blas *blas;
    int fp8, scaling;
    int32_t m, n, k;
    void *x, *w, *y;
    float *xs, *ws;
} lt_bench;

static void lt_bench_fn(void *ctx, int it) {
    (void)it;
    lt_bench *b = ctx;
    if (b->fp8)
        KCALL(assay_cuda_blas_gemm_fp8(b->blas, b->x, b->xs, b->w, b->ws, (assay_cuda_fp8_scaling)b->scaling, b->y, b->m,
                                       b->n, b->k, NULL));
    else
        KCALL(assay_cuda_blas_gemm_bf16(b->blas, b->x, b->w, b->y, b->m, b->n, b->k, NULL));
}

/* Random device bytes without a host round trip of 128 MB: a pool of codes replicated on the device. */
static void *lt_device_random(size_t bytes, int fp8) {
    size_t pool = 1u << 22;
    uint8_t *h = malloc(pool);
    for (size_t i = 0; i < pool; i += 2) {
        if (fp8) {
            h[i] = LAB_E4M3_ENC(lab_normal() * 64.0);
            h[i + 1] = LAB_E4M3_ENC(lab_normal() * 64.0);
        } else {
            uint16_t v = lab_f32_to_bf16((float)lab_normal());
            memcpy(h + i, &v, 2);
        }
    }
    uint8_t *d = lab_dmalloc(bytes);
    for (size_t off = 0; off < bytes; off += pool)
        CK(cudaMemcpy(d + off, h, bytes - off < pool ? bytes - off : pool, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

void section_gemm_lt(lab_out *o, int quick, uint64_t seed) {
    lab_rng_state = seed ^ 0x6C74ull; /* this file's own stream, still fresh per run */
    assay_cuda_blas *blas;
    KCALL(assay_cuda_blas_open(&blas));
    lt_validate(o, blas, 200, 384, 1024); /* m not a multiple of 16: cuBLASLt's edge handling is checked too */
    if (!quick) lt_validate(o, blas, 512, 256, 2048);
    lt_validate(o, blas, 136, 256, 1152);          /* 9 blocks along k: the padded weight-scale stride */
    lt_validate_groups(o, blas, 137, 256, 1152, 0); /* 1233 groups: the last warp's tail is partial */
    lt_validate_groups(o, blas, 136, 256, 1152, 1); /* and the whole recipe (block GEMMs need m % 4 == 0) */

    const int32_t m = 8192, n = 8192, k = 8192;
    lt_bench b = {blas, 0, 0, m, n, k, NULL, NULL, NULL, NULL, NULL};
    double flops = 2.0 * m * n * k;
    char shape[64];
    snprintf(shape, sizeof shape, "m%d n%d k%d", m, n, k);
    b.x = lt_device_random((size_t)m * k * 2, 0), b.w = lt_device_random((size_t)n * k * 2, 0);
    b.y = lab_dmalloc((size_t)m * n * 2);
    lab_bench(o, "gemm_lt_bf16", shape, lab_time_us(lt_bench_fn, &b, 5, 7), flops, 0);
    cudaFree(b.x), cudaFree(b.w);

    b.fp8 = 1;
    b.x = lt_device_random((size_t)m * k, 1), b.w = lt_device_random((size_t)n * k, 1);
    size_t ns = (size_t)m * (k / 128);
    float *hs = malloc(ns * sizeof(float));
    for (size_t i = 0; i < ns; ++i) hs[i] = (float)(0.5 + lab_uniform());
    b.xs = lab_upload(hs, ns * sizeof(float)), b.ws = lab_upload(hs, ns * sizeof(float));
    free(hs);
    for (int s = 0; s < ASSAY_CUDA_FP8_SCALING_COUNT; ++s) {
        char name[64];
        snprintf(name, sizeof name, "gemm_lt_fp8_%s", k_scaling_names[s]);
        b.scaling = s;
        if (assay_cuda_blas_gemm_fp8(blas, b.x, b.xs, b.w, b.ws, (assay_cuda_fp8_scaling)s, b.y, m, n, k, NULL) != 0) {
            printf("SKIP   %-28s %-44s %s\n", name, shape, assay_cuda_last_error());
            continue;
        }
        lab_bench(o, name, shape, lab_time_us(lt_bench_fn, &b, 5, 7), flops, 0);
    }
    cudaFree(b.x), cudaFree(b.w), cudaFree(b.y), cudaFree(b.xs), cudaFree(b.ws);

    /* the activation quantizer at the same shape: bf16 in, codes + one scale per 128 values out */
    lt_quant q = {lt_device_random((size_t)m * k * 2, 0), lab_dmalloc((size_t)m * k), lab_dmalloc(ns * sizeof(float)),
                  m, k};
    lab_bench(o, "quant_fp8_groups128", "m8192 k8192", lab_time_us(lt_quant_fn, &q, 10, 7), 0,
              3.0 * m * k + 4.0 * ns);
    cudaFree(q.x), cudaFree(q.q), cudaFree(q.s);
    assay_cuda_blas_close(blas);
}

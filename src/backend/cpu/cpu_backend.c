/* cpu_backend.c — the CPU implementation of assay_backend_ops: threaded matmul over weight blocks, attention
 * with an online softmax over the paged KV cache, and the element-wise ops.
 *
 * Scratch memory (quantized activations, per-thread attention tiles) grows only when a call needs more than
 * any earlier call, so steady-state decoding allocates nothing. */
#include <assert.h>
#include <cpuid.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <pthread.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "assay/backend.h"
#include "assay/sampler.h"
#include "assay/dequant.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kv_convert.h"
#include "backend/cpu/threadpool.h"

typedef struct cpu_thread_scratch {
    float *buf;
    size_t cap; /* floats */
} cpu_thread_scratch;

typedef struct cpu_backend {
    assay_backend base;
    const assay_cpu_kernels *k;
    assay_threadpool *tp;
    int n_threads;
    void *act;        /* quantized activations */
    size_t act_cap;
    cpu_thread_scratch *ts;
    int64_t *tiles; /* attention: first token of each query tile, and the end */
    int64_t tiles_cap;
    int exact; /* ASSAY_CPU_EXACT=1: weights dequantized to f32 rows, f32 activations (the spec; slow) */
    /* linear's scratch: the fake-quantized input (values, codes, scales) and the permuted input; grown on demand */
    float *lin_x, *lin_scales, *lin_perm;
    uint8_t *lin_codes;
    size_t lin_x_cap, lin_scales_cap, lin_perm_cap, lin_x_cap_codes;
    /* the host memory of dummy weights made by prepare_weight, freed at close */
    void **dummies;
    size_t n_dummies;
} cpu_backend;

static cpu_backend *cpu_of(assay_backend *be) { return (cpu_backend *)be; }

int assay_cpu_has_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0)); /* the OS saves ymm state */
    if ((lo & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1;
}

/* AVX-512 F (ebx 16), DQ (17), BW (30), VL (31) and VNNI (ecx 11) of leaf 7, with the OS saving opmask and zmm
 * state (XCR0 bits 5-7) as well as ymm (bits 1-2). */
int assay_cpu_has_avx512(void) {
    if (!assay_cpu_has_avx2()) return 0;
    unsigned a, b, c, d, lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned need_b = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
    return (b & need_b) == need_b && ((c >> 11) & 1);
}

/* AVX512_BF16: leaf 7 sub-leaf 1, eax bit 5 */
int assay_cpu_has_avx512bf16(void) {
    if (!assay_cpu_has_avx512()) return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1;
}

/* AMX-TILE (leaf 7 edx bit 24) and AMX-INT8 (bit 25), the OS saving tile configuration and data (XCR0 bits 17, 18),
 * and on Linux the process's permission to use tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once). */
static int amx_ok;
static void amx_probe(void) {
    if (!assay_cpu_has_avx512bf16()) return;
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || ((d >> 24) & 3) != 3) return;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return;
#if defined(__linux__) && defined(SYS_arch_prctl)
    amx_ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#endif
}

int assay_cpu_has_amx(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_probe);
    return amx_ok;
}

static void ensure_thread_scratch(cpu_backend *cb, size_t floats) {
    for (int i = 0; i < cb->n_threads; i++) {
        if (cb->ts[i].cap >= floats) continue;
        free(cb->ts[i].buf);
        cb->ts[i].buf = assay_xmalloc(floats * sizeof(float));
        cb->ts[i].cap = floats;
    }
}

static void *ensure_act(cpu_backend *cb, size_t bytes) {
    if (cb->act_cap < bytes) {
        free(cb->act);
        cb->act = assay_xmalloc(bytes);
        cb->act_cap = bytes;
    }
    return cb->act;
}

/* ---- memory ----------------------------------------------------------------------------------------------- */

static void *cpu_alloc(assay_backend *be, size_t bytes) { return calloc(1, bytes ? bytes : 1); }
static void cpu_free(assay_backend *be, void *p) { free(p); }
/* host memory is the CPU backend's memory: copies are plain, and nothing is ever in flight */
static void cpu_copy(assay_backend *be, void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static void cpu_synchronize(assay_backend *be) {}
static void cpu_download_f32(assay_backend *be, float *dst, const float *src, int64_t n) {
    memmove(dst, src, (size_t)n * sizeof(float));
}

typedef struct dummy_fill_job {
    const assay_weight *w;
    uint8_t *dst;
    int64_t rows_per;
} dummy_fill_job;

static void dummy_fill_task(void *ctx, int64_t task, int thread) {
    const dummy_fill_job *j = ctx;
    int64_t r0 = task * j->rows_per, n = j->w->n_out - r0 < j->rows_per ? j->w->n_out - r0 : j->rows_per;
    assay_weight_dummy_fill(j->w, j->dst + (size_t)r0 * j->w->row_bytes, r0, n); /* the type was checked */
}

/* A dummy weight's values in host memory of its own, filled by the workers in chunks of rows. */
static assay_status cpu_make_dummy(cpu_backend *cb, assay_weight *w) {
    if (w->type != ASSAY_TYPE_F32 && w->type != ASSAY_TYPE_F16 && w->type != ASSAY_TYPE_BF16)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: dummy weights are f32, f16 or bf16, not %s", w->name ? w->name : "weight",
                          assay_type_name(w->type));
    size_t bytes = w->row_bytes * (size_t)w->n_out;
    uint8_t *p = malloc(bytes ? bytes : 1);
    if (!p)
        return assay_fail(ASSAY_ERR_NOMEM, "%s: no memory for %.1f MiB of dummy weights", w->name ? w->name : "weight",
                          (double)bytes / 1048576.0);
    int64_t rows_per = (int64_t)((1u << 20) / (w->row_bytes ? w->row_bytes : 1)); /* about 1 MiB a task */
    if (rows_per < 1) rows_per = 1;
    dummy_fill_job j = {w, p, rows_per};
    assay_threadpool_run(cb->tp, dummy_fill_task, &j, (w->n_out + rows_per - 1) / rows_per);
    cb->dummies = assay_xrealloc(cb->dummies, (cb->n_dummies + 1) * sizeof *cb->dummies);
    cb->dummies[cb->n_dummies++] = p;
    cb->base.weight_bytes += bytes;
    w->data = p;
    return ASSAY_OK;
}

static assay_status cpu_prepare_weight(assay_backend *be, assay_weight *w) {
    cpu_backend *cb = cpu_of(be);
    if ((int)w->type < 0 || w->type >= ASSAY_TYPE_COUNT || !cb->k->type[w->type].vec_dot)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the CPU backend has no kernel for type %s", w->name ? w->name : "weight",
                          assay_type_name(w->type));
    if (assay_weight_is_dummy(w)) {
        assay_status st = cpu_make_dummy(cb, w);
        if (st) return st;
    }
    w->prepared = NULL; /* the CPU kernels read the stored blocks directly */
    return ASSAY_OK;
}

/* grows a scratch buffer to at least n elements of `size` bytes */
static void *grow(void *p, size_t *cap, size_t n, size_t size) {
    if (*cap >= n) return p;
    free(p);
    *cap = n;
    return assay_xmalloc(n * size);
}

/* ---- matmul ----------------------------------------------------------------------------------------------- */

static size_t act_row_bytes(assay_type t, int64_t n) {
    switch (t) {
    case ASSAY_TYPE_Q8_0: return (size_t)(n / 32) * sizeof(assay_block_q8_0);
    case ASSAY_TYPE_Q8_1: return (size_t)(n / 32) * sizeof(assay_block_q8_1);
    case ASSAY_TYPE_Q8_K: return (size_t)(n / 256) * sizeof(assay_block_q8_K);
    case ASSAY_TYPE_BF16: return (size_t)n * 2;
    default: return (size_t)n * sizeof(float);
    }
}

typedef struct matmul_job {
    float *y;
    const assay_weight *w;
    const uint8_t *xq;
    size_t xq_row;
    int64_t n_tok, rows_per_task;
    assay_cpu_vec_dot_fn dot;
    assay_cpu_vec_dot4_fn dot4;
    assay_cpu_vec_dot2x4_fn dot2x4;
} matmul_job;

enum { MATMUL_TOK_TILE = 4 };

static void matmul_task(void *ctx, int64_t task, int thread) {
    const matmul_job *j = ctx;
    const assay_weight *w = j->w;
    int64_t r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > w->n_out) r1 = w->n_out;
    const uint8_t *wd = w->data;
    /* tokens in small tiles so the task's weight rows stay in cache while each token of the tile uses them */
    for (int64_t t0 = 0; t0 < j->n_tok; t0 += MATMUL_TOK_TILE) {
        int64_t t1 = t0 + MATMUL_TOK_TILE < j->n_tok ? t0 + MATMUL_TOK_TILE : j->n_tok;
        int64_t r = r0;
        if (j->dot2x4 && t1 - t0 == 4)
            for (; r + 2 <= r1; r += 2) {
                float s8[8];
                j->dot2x4(w->n_in, s8, wd + (size_t)r * w->row_bytes, w->row_bytes, j->xq + (size_t)t0 * j->xq_row, j->xq_row);
                for (int u = 0; u < 4; u++) {
                    j->y[(t0 + u) * w->n_out + r] = s8[u];
                    j->y[(t0 + u) * w->n_out + r + 1] = s8[4 + u];
                }
            }
        for (; r < r1; r++) {
            const void *wr = wd + (size_t)r * w->row_bytes;
            if (j->dot4 && t1 - t0 == 4) {
                float s4[4];
                j->dot4(w->n_in, s4, wr, j->xq + (size_t)t0 * j->xq_row, j->xq_row);
                for (int u = 0; u < 4; u++) j->y[(t0 + u) * w->n_out + r] = s4[u];
                continue;
            }
            for (int64_t t = t0; t < t1; t++) j->dot(w->n_in, &j->y[t * w->n_out + r], wr, j->xq + (size_t)t * j->xq_row);
        }
    }
}

typedef struct exact_job {
    float *y;
    const assay_weight *w;
    const float *x;
    int64_t n_tok, rows_per_task;
    cpu_backend *cb;
} exact_job;

static void exact_task(void *ctx, int64_t task, int thread) {
    const exact_job *j = ctx;
    const assay_weight *w = j->w;
    float *row = j->cb->ts[thread].buf;
    assay_dequant_row_fn dq = assay_dequant_row_get(w->type);
    int64_t r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task < w->n_out ? r0 + j->rows_per_task : w->n_out;
    for (int64_t r = r0; r < r1; r++) {
        dq((const uint8_t *)w->data + (size_t)r * w->row_bytes, row, w->n_in);
        for (int64_t t = 0; t < j->n_tok; t++) {
            double s = 0;
            for (int64_t i = 0; i < w->n_in; i++) s += (double)row[i] * j->x[t * w->n_in + i];
            j->y[t * w->n_out + r] = (float)s;
        }
    }
}

typedef struct quant_job {
    const float *x;
    uint8_t *xq;
    int64_t n_in;
    size_t row;
    assay_cpu_from_float_fn q;
} quant_job;

static void quant_task(void *ctx, int64_t t, int thread) {
    const quant_job *j = ctx;
    j->q(j->x + t * j->n_in, j->xq + (size_t)t * j->row, j->n_in);
}

typedef struct gemm_job {
    float *y;
    const assay_weight *w;
    const void *xa;
    size_t xs;
    int64_t n_tok, rows_per_task;
    assay_cpu_gemm_fn gemm;
    cpu_backend *cb;
} gemm_job;

static void gemm_task(void *ctx, int64_t task, int thread) {
    const gemm_job *j = ctx;
    const assay_weight *w = j->w;
    int64_t r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task < w->n_out ? r0 + j->rows_per_task : w->n_out;
    j->gemm(w->n_in, r1 - r0, j->n_tok, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes, j->xa, j->xs,
            j->y + r0, w->n_out, j->cb->ts[thread].buf);
}

/* Tiled path: activations packed once per call (in parallel over tokens), then the output columns (weight rows) split
 * between threads in slabs that are multiples of the 4-row tile; each slab runs all tokens. */
static void cpu_matmul_gemm(cpu_backend *cb, const assay_cpu_type_kernels *tk, float *y, const assay_weight *w,
                            const float *x, int64_t n_tok) {
    gemm_job j = {.y = y, .w = w, .n_tok = n_tok, .gemm = tk->gemm, .cb = cb};
    if (tk->gemm_pack) {
        j.xs = (tk->gemm_act_bytes(w->n_in) + 63) & ~(size_t)63;
        size_t extra = tk->gemm_act_extra ? tk->gemm_act_extra(w->n_in, n_tok) + 64 : 0;
        uint8_t *xq = ensure_act(cb, j.xs * (size_t)n_tok + extra);
        quant_job qj = {x, xq, w->n_in, j.xs, tk->gemm_pack};
        assay_threadpool_run(cb->tp, quant_task, &qj, n_tok);
        if (tk->gemm_act_finish) tk->gemm_act_finish(xq, j.xs, w->n_in, n_tok);
        j.xa = xq;
    } else {
        j.xa = x;
        j.xs = (size_t)w->n_in * sizeof(float);
    }
    ensure_thread_scratch(cb, tk->gemm_scratch_bytes ? (tk->gemm_scratch_bytes(w->n_in) + 3) / 4 : 1);
    /* decode: about 4 slabs per thread for balance; prefill: slabs of at least 16 rows so each weight slab is
     * reused by many tokens while it sits in L1/L2 */
    int64_t tasks = (int64_t)cb->n_threads * 4;
    int64_t rows = (w->n_out + tasks - 1) / tasks;
    int64_t min_rows = n_tok > 1 ? 16 : 4;
    if (rows < min_rows) rows = min_rows;
    rows = (rows + 3) & ~(int64_t)3;
    j.rows_per_task = rows;
    assay_threadpool_run(cb->tp, gemm_task, &j, (w->n_out + rows - 1) / rows);
}

static void cpu_matmul(assay_backend *be, float *y, const assay_weight *w, const float *x, int64_t n_tok) {
    cpu_backend *cb = cpu_of(be);
    const assay_cpu_type_kernels *tk = &cb->k->type[w->type];
    ASSAY_ASSERT((int)w->type < ASSAY_TYPE_COUNT && tk->vec_dot);
    if (cb->exact) {
        ensure_thread_scratch(cb, (size_t)w->n_in);
        exact_job ej = {y, w, x, n_tok, 16, cb};
        assay_threadpool_run(cb->tp, exact_task, &ej, (w->n_out + 15) / 16);
        return;
    }
    if (tk->gemm) {
        cpu_matmul_gemm(cb, tk, y, w, x, n_tok);
        return;
    }
    matmul_job j = {.y = y, .w = w, .n_tok = n_tok, .dot = tk->vec_dot, .dot4 = tk->vec_dot4, .dot2x4 = tk->vec_dot2x4};
    if (tk->vec_dot_type == ASSAY_TYPE_F32) {
        j.xq = (const uint8_t *)x;
        j.xq_row = (size_t)w->n_in * sizeof(float);
    } else {
        j.xq_row = act_row_bytes(tk->vec_dot_type, w->n_in);
        uint8_t *xq = ensure_act(cb, j.xq_row * (size_t)n_tok);
        quant_job qj = {x, xq, w->n_in, j.xq_row, cb->k->from_float[tk->vec_dot_type]};
        assay_threadpool_run(cb->tp, quant_task, &qj, n_tok);
        j.xq = xq;
    }
    /* enough tasks to balance threads, few enough that each covers a useful run of rows */
    int64_t tasks = (int64_t)cb->n_threads * 8;
    int64_t rows = (w->n_out + tasks - 1) / tasks;
    if (rows < 8) rows = 8;
    j.rows_per_task = rows;
    assay_threadpool_run(cb->tp, matmul_task, &j, (w->n_out + rows - 1) / rows);
}

/* The input treatment is emulated exactly (act_quant.h's reference: the matmul reads code * scale), written to
 * scratch so that x, shared by q/k/v and by gate/up whose treatments may differ, stays the unquantized input. */
static void cpu_linear(assay_backend *be, float *y, const assay_weight *w, const assay_act_quant *act, const float *x,
                       int64_t n_tok, const float *bias) {
    cpu_backend *cb = cpu_of(be);
    size_t n = (size_t)(n_tok * w->n_in);
    if (act && act->kind != ASSAY_ACT_QUANT_NONE) {
        cb->lin_x = grow(cb->lin_x, &cb->lin_x_cap, n, sizeof(float));
        size_t ns = (size_t)(n_tok * assay_act_quant_scales_per_row(act, w->n_in));
        cb->lin_scales = grow(cb->lin_scales, &cb->lin_scales_cap, ns ? ns : 1, sizeof(float));
        cb->lin_codes = grow(cb->lin_codes, &cb->lin_x_cap_codes, n, 1);
        assay_act_quant_apply(act, x, n_tok, w->n_in, cb->lin_x, cb->lin_codes, cb->lin_scales);
        x = cb->lin_x;
    }
    if (w->perm) { /* act-order weights packed by groups: each column gets its input */
        cb->lin_perm = grow(cb->lin_perm, &cb->lin_perm_cap, n, sizeof(float));
        for (int64_t t = 0; t < n_tok; t++) {
            const float *xt = x + t * w->n_in;
            float *pt = cb->lin_perm + t * w->n_in;
            for (int64_t c = 0; c < w->n_in; c++) pt[c] = xt[w->perm[c]];
        }
        x = cb->lin_perm;
    }
    cpu_matmul(be, y, w, x, n_tok);
    if (bias)
        for (int64_t t = 0; t < n_tok; t++) {
            float *yt = y + t * w->n_out;
            for (int64_t o = 0; o < w->n_out; o++) yt[o] += bias[o];
        }
}

/* ---- element-wise ----------------------------------------------------------------------------------------- */

/* The plain loops (every kernel set without its own op), over rows [0, n_rows). */
static void ew_rmsnorm_c(float *y, const float *x, const float *gamma, int64_t n, int64_t n_rows, float eps) {
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (int64_t i = 0; i < n; i++) yr[i] = xr[i] * inv * gamma[i];
    }
}

static void ew_rope_c(float *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride, const int32_t *pos,
                      int neox, int64_t n_rot, const float *inv_freq) {
    int64_t half = n_rot / 2;
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < half; i++) {
            float ang = (float)pos[t] * inv_freq[i];
            float c = cosf(ang), s = sinf(ang);
            for (int64_t h = 0; h < n_head; h++) {
                float *v = x + t * row_stride + h * head_dim;
                int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
}

static void ew_swiglu_c(float *out, const float *gate, const float *up, int64_t n, int64_t n_rows, int64_t stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < n; i++) {
            float g = gate[r * stride + i];
            out[r * n + i] = g / (1.0f + expf(-g)) * up[r * stride + i];
        }
}

static void ew_add_c(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void ew_softmax_c(float *x, int64_t n, int64_t n_rows, float softcap) {
    for (int64_t r = 0; r < n_rows; r++) {
        float *v = x + r * n;
        if (softcap > 0)
            for (int64_t i = 0; i < n; i++) v[i] = softcap * tanhf(v[i] / softcap);
        float m = -INFINITY;
        for (int64_t i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
        double s = 0;
        for (int64_t i = 0; i < n; i++) {
            v[i] = expf(v[i] - m);
            s += v[i];
        }
        float inv = (float)(1.0 / s);
        for (int64_t i = 0; i < n; i++) v[i] *= inv;
    }
}

/* Large element-wise calls (prefill) are split over the threads by rows; a decode step's rows run on the caller. */
enum { EW_PAR_MIN = 1 << 15 }; /* elements */

typedef struct ew_job {
    const assay_cpu_kernels *k;
    int op; /* 0 rmsnorm, 1 rope, 2 swiglu, 3 add, 4 softmax */
    float *y;
    const float *a, *b, *c;
    int64_t n, n_rows, rows_per, stride, n_head, head_dim;
    float f;
    const int32_t *pos;
    const assay_rope_params *rp;
} ew_job;

static void ew_task(void *ctx, int64_t task, int thread) {
    const ew_job *j = ctx;
    const assay_cpu_kernels *k = j->k;
    int64_t r0 = task * j->rows_per, nr = j->n_rows - r0 < j->rows_per ? j->n_rows - r0 : j->rows_per;
    switch (j->op) {
    case 0:
        (k->rmsnorm ? k->rmsnorm : ew_rmsnorm_c)(j->y + r0 * j->n, j->a + r0 * j->n, j->c, j->n, nr, j->f);
        break;
    case 1: {
        int neox = j->rp->mode == ASSAY_ROPE_MODE_NEOX;
        (k->rope ? k->rope : ew_rope_c)(j->y + r0 * j->stride, nr, j->n_head, j->head_dim, j->stride, j->pos + r0, neox,
                                        j->rp->n_rot, j->rp->inv_freq);
        break;
    }
    case 2:
        (k->swiglu ? k->swiglu : ew_swiglu_c)(j->y + r0 * j->n, j->a + r0 * j->stride, j->b + r0 * j->stride, j->n, nr,
                                              j->stride);
        break;
    case 3: (k->add ? k->add : ew_add_c)(j->y + r0 * j->n, j->a + r0 * j->n, j->b + r0 * j->n, nr * j->n); break;
    default: (k->softmax ? k->softmax : ew_softmax_c)(j->y + r0 * j->n, j->n, nr, j->f); break;
    }
}

static void ew_run(cpu_backend *cb, ew_job *j, int64_t row_elems) {
    int64_t tasks = 1;
    if (cb->n_threads > 1 && j->n_rows * row_elems >= EW_PAR_MIN) tasks = j->n_rows < 2 * cb->n_threads ? j->n_rows : 2 * cb->n_threads;
    j->k = cb->k;
    j->rows_per = (j->n_rows + tasks - 1) / tasks;
    tasks = j->rows_per ? (j->n_rows + j->rows_per - 1) / j->rows_per : 0;
    if (tasks == 1) ew_task(j, 0, 0);
    else assay_threadpool_run(cb->tp, ew_task, j, tasks);
}

static void cpu_rmsnorm(assay_backend *be, float *y, const float *x, const float *gamma, int64_t n, int64_t n_rows,
                        float eps) {
    ew_job j = {.op = 0, .y = y, .a = x, .c = gamma, .n = n, .n_rows = n_rows, .f = eps};
    ew_run(cpu_of(be), &j, n);
}

static void cpu_rope(assay_backend *be, float *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride,
                     const int32_t *pos, const assay_rope_params *rp) {
    ew_job j = {.op = 1, .y = x, .n_rows = n_tok, .stride = row_stride, .n_head = n_head, .head_dim = head_dim, .pos = pos,
                .rp = rp};
    ew_run(cpu_of(be), &j, n_head * rp->n_rot);
}

static void cpu_swiglu(assay_backend *be, float *out, const float *gate, const float *up, int64_t n, int64_t n_rows,
                       int64_t stride) {
    ew_job j = {.op = 2, .y = out, .a = gate, .b = up, .n = n, .n_rows = n_rows, .stride = stride};
    ew_run(cpu_of(be), &j, n);
}

static void cpu_geglu(assay_backend *be, float *out, const float *gate, const float *up, int64_t n, int64_t n_rows,
                      int64_t stride) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi): the tanh approximation Gemma uses */
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < n; i++) {
            float g = gate[r * stride + i];
            float ge = 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g)));
            out[r * n + i] = ge * up[r * stride + i];
        }
}

/* as rows of 1024 (any n: the last row shorter) */
static void cpu_add(assay_backend *be, float *y, const float *a, const float *b, int64_t n) {
    enum { W = 1024 };
    if (n > W) {
        int64_t full = n / W * W;
        ew_job j = {.op = 3, .y = y, .a = a, .b = b, .n = W, .n_rows = n / W};
        ew_run(cpu_of(be), &j, W);
        a += full, b += full, y += full, n -= full;
    }
    if (n > 0) (cpu_of(be)->k->add ? cpu_of(be)->k->add : ew_add_c)(y, a, b, n);
}

static void cpu_add_rmsnorm(assay_backend *be, float *y, float *x, const float *h, const float *gamma, int64_t n,
                            int64_t n_rows, float eps) {
    cpu_add(be, x, x, h, n * n_rows);
    cpu_rmsnorm(be, y, x, gamma, n, n_rows, eps);
}

static void cpu_gather_rows(assay_backend *be, float *dst, const float *src, const int32_t *rows, int64_t n_rows,
                            int64_t width) {
    for (int64_t r = 0; r < n_rows; r++) memcpy(dst + r * width, src + (int64_t)rows[r] * width, (size_t)width * sizeof(float));
}

static void cpu_tanh_cap(assay_backend *be, float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

static void cpu_argmax(assay_backend *be, int32_t *ids, const float *x, int64_t n, int64_t n_rows) {
    for (int64_t r = 0; r < n_rows; r++) ids[r] = assay_argmax(x + r * n, n);
}

static float cpu_absmax(assay_backend *be, const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static void cpu_scale(assay_backend *be, float *y, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

static void cpu_softmax(assay_backend *be, float *x, int64_t n, int64_t n_rows, float softcap) {
    ew_job j = {.op = 4, .y = x, .n = n, .n_rows = n_rows, .f = softcap};
    ew_run(cpu_of(be), &j, n);
}

static void cpu_get_rows(assay_backend *be, float *y, const assay_weight *w, const int32_t *ids, int64_t n) {
    assay_dequant_row_fn f = assay_dequant_row_get(w->type);
    ASSAY_ASSERT(f);
    for (int64_t t = 0; t < n; t++) {
        ASSAY_ASSERT(ids[t] >= 0 && ids[t] < w->n_out);
        f((const uint8_t *)w->data + (size_t)ids[t] * w->row_bytes, y + t * w->n_in, w->n_in);
    }
}

/* ---- KV cache --------------------------------------------------------------------------------------------- */

static size_t kv_elem(assay_kv_dtype t) { return assay_kv_dtype_size(t); }

static void cpu_kv_store(assay_backend *be, const assay_kv_layer *L, const assay_kv_geom *g, const float *k,
                         const float *v, const assay_step *step) {
    cpu_backend *cb = cpu_of(be);
    size_t es = kv_elem(g->dtype);
    int64_t hd = g->head_dim, kvd = g->n_head_kv * hd;
    for (int64_t t = 0; t < step->n_tokens; t++) {
        int64_t phys = step->slot[t] / ASSAY_KV_BLOCK, off = step->slot[t] % ASSAY_KV_BLOCK;
        for (int64_t h = 0; h < g->n_head_kv; h++) {
            int64_t slot = (phys * g->n_head_kv + h) * ASSAY_KV_BLOCK + off;
            for (int kv = 0; kv < 2; kv++) {
                const float *src = (kv ? v : k) + t * kvd + h * hd;
                uint8_t *dst = (uint8_t *)(kv ? L->v : L->k) + (size_t)slot * hd * es;
                float inv = 1.0f;
                if (assay_kv_dtype_scaled(g->dtype)) {
                    /* a static per-layer scale when the layer has one (values past it saturate in the encoder),
                     * else one dynamic scale per (token, head): its absmax maps to the format's max */
                    float sc = kv ? L->v_static : L->k_static;
                    if (!(sc > 0)) {
                        float amax = 0;
                        for (int64_t i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(src[i]));
                        sc = amax > 0 ? amax / assay_kv_dtype_qmax(g->dtype) : 1.0f;
                    }
                    (kv ? L->v_scale : L->k_scale)[slot] = sc;
                    inv = 1.0f / sc;
                }
                assay_kv_encode(cb->k, g->dtype, src, dst, hd, inv);
            }
        }
    }
}

static void cpu_kv_copy_block(assay_backend *be, const assay_kv_layer *L, const assay_kv_geom *g, int64_t src,
                              int64_t dst) {
    size_t slots = (size_t)g->n_head_kv * ASSAY_KV_BLOCK, bytes = slots * (size_t)g->head_dim * kv_elem(g->dtype);
    memcpy((uint8_t *)L->k + (size_t)dst * bytes, (const uint8_t *)L->k + (size_t)src * bytes, bytes);
    memcpy((uint8_t *)L->v + (size_t)dst * bytes, (const uint8_t *)L->v + (size_t)src * bytes, bytes);
    if (assay_kv_dtype_scaled(g->dtype)) {
        memcpy(L->k_scale + dst * slots, L->k_scale + src * slots, slots * sizeof(float));
        memcpy(L->v_scale + dst * slots, L->v_scale + src * slots, slots * sizeof(float));
    }
}

typedef struct attn_job {
    float *out;
    const float *q;
    const assay_attn_params *ap;
    const assay_kv_layer *L;
    const assay_kv_geom *g;
    const assay_step *step;
    const int32_t *pos;
    cpu_backend *cb;
} attn_job;

/* the physical blocks of token t's sequence */
static const int32_t *attn_table(const attn_job *j, int64_t t) { return j->step->block_tables[j->step->seq_of_tok[t]]; }

/* One (token, KV head): the query heads that share this KV head (GQA group) walk the sequence's KV blocks together,
 * so each block of keys and values is decoded to float once per group. Per head, scores of one block at a time
 * with a running max m, running sum l and output accumulator rescaled by exp(m_old - m_new) whenever the max
 * grows (FlashAttention's online softmax): no score matrix, any context length. */
static void attn_task(void *ctx, int64_t task, int thread) {
    const attn_job *j = ctx;
    const assay_attn_params *ap = j->ap;
    const assay_kv_geom *g = j->g;
    const assay_cpu_kernels *K = j->cb->k;
    const int64_t hd = ap->head_dim, grp = ap->n_head / ap->n_head_kv, B = ASSAY_KV_BLOCK;
    int64_t t = task / ap->n_head_kv, kvh = task % ap->n_head_kv;
    /* scratch: acc[grp][hd] | kt[B][hd] | vt[B][hd] | s[grp][B] | m[grp] | l[grp] */
    float *acc = j->cb->ts[thread].buf, *kt = acc + grp * hd, *vt = kt + B * hd, *s = vt + B * hd, *m = s + grp * B,
          *l = m + grp;
    size_t es = kv_elem(g->dtype);
    int64_t p = j->pos[t], start = 0;
    if (ap->window > 0 && p - ap->window + 1 > 0) start = p - ap->window + 1;
    const int32_t *table = attn_table(j, t);
    int scaled = assay_kv_dtype_scaled(g->dtype);
    for (int64_t h = 0; h < grp; h++) {
        m[h] = -INFINITY;
        l[h] = 0;
    }
    memset(acc, 0, (size_t)(grp * hd) * sizeof(float));
    for (int64_t blk = start / B; blk <= p / B; blk++) {
        int64_t base = blk * B;
        int64_t j0 = start > base ? start - base : 0, j1 = p - base + 1 < B ? p - base + 1 : B;
        int64_t slot0 = ((int64_t)table[blk] * g->n_head_kv + kvh) * B;
        const uint8_t *kb = (const uint8_t *)j->L->k + (size_t)slot0 * hd * es;
        const uint8_t *vb = (const uint8_t *)j->L->v + (size_t)slot0 * hd * es;
        const float *kf = (const float *)kb, *vf = (const float *)vb;
        if (g->dtype != ASSAY_KV_F32) {
            for (int64_t i = j0; i < j1; i++) {
                assay_kv_decode(K, g->dtype, kb + (size_t)i * hd * es, kt + i * hd, hd, scaled ? j->L->k_scale[slot0 + i] : 1.0f);
                assay_kv_decode(K, g->dtype, vb + (size_t)i * hd * es, vt + i * hd, hd, scaled ? j->L->v_scale[slot0 + i] : 1.0f);
            }
            kf = kt;
            vf = vt;
        }
        for (int64_t h = 0; h < grp; h++) {
            const float *q = j->q + (t * ap->n_head + kvh * grp + h) * hd;
            float *sh = s + h * B, *ah = acc + h * hd, mt = -INFINITY;
            for (int64_t i = j0; i < j1; i++) {
                float sc = K->dot_f32(hd, q, kf + i * hd) * ap->scale;
                if (ap->softcap > 0) sc = ap->softcap * tanhf(sc / ap->softcap);
                sh[i] = sc;
                mt = sc > mt ? sc : mt;
            }
            if (mt > m[h]) {
                float corr = expf(m[h] - mt); /* exp(-inf) = 0 on the first tile */
                l[h] *= corr;
                for (int64_t d = 0; d < hd; d++) ah[d] *= corr;
                m[h] = mt;
            }
            for (int64_t i = j0; i < j1; i++) {
                float pr = expf(sh[i] - m[h]);
                l[h] += pr;
                K->axpy_f32(hd, ah, pr, vf + i * hd);
            }
        }
    }
    for (int64_t h = 0; h < grp; h++) {
        float *out = j->out + (t * ap->n_head + kvh * grp + h) * hd, inv = 1.0f / l[h];
        for (int64_t d = 0; d < hd; d++) out[d] = acc[h * hd + d] * inv;
    }
}

enum { ATTN_TILE_TOK = 16 };

/* Tiled attention (kernels with attn_block16): a tile of up to 16 consecutive tokens of one sequence and one KV head;
 * its query rows (tokens x GQA heads) walk the KV blocks together, so each block of keys and values is decoded (and
 * the keys transposed, for 16 scores per vector FMA) once per tile instead of once per token. */
static void attn_tile_task(void *ctx, int64_t task, int thread) {
    const attn_job *j = ctx;
    const assay_attn_params *ap = j->ap;
    const assay_kv_geom *g = j->g;
    const assay_cpu_kernels *K = j->cb->k;
    const int64_t hd = ap->head_dim, grp = ap->n_head / ap->n_head_kv, B = ASSAY_KV_BLOCK;
    const int64_t *tiles = j->cb->tiles;
    int64_t tile = task / ap->n_head_kv, kvh = task % ap->n_head_kv, t0 = tiles[tile], t1 = tiles[tile + 1];
    int64_t nr = (t1 - t0) * grp;
    /* scratch: acc[nr][hd] | kT[hd][B] | vt[B][hd] | row[hd] | m[nr] | l[nr] */
    float *acc = j->cb->ts[thread].buf, *kT = acc + nr * hd, *vt = kT + hd * B, *row = vt + B * hd, *m = row + hd,
          *l = m + nr;
    size_t es = kv_elem(g->dtype);
    int scaled = assay_kv_dtype_scaled(g->dtype);
    const int32_t *table = attn_table(j, t0);
    int64_t start[ATTN_TILE_TOK], lo = INT64_MAX, hi = 0;
    for (int64_t t = t0; t < t1; t++) {
        int64_t p = j->pos[t];
        start[t - t0] = ap->window > 0 && p - ap->window + 1 > 0 ? p - ap->window + 1 : 0;
        if (start[t - t0] < lo) lo = start[t - t0];
        if (p > hi) hi = p;
    }
    for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
    }
    memset(acc, 0, (size_t)(nr * hd) * sizeof(float));
    for (int64_t blk = lo / B; blk <= hi / B; blk++) {
        int64_t base = blk * B, jlo = B, jhi = 0;
        for (int64_t t = t0; t < t1; t++) {
            int64_t a = start[t - t0] > base ? start[t - t0] - base : 0, b = j->pos[t] - base + 1 < B ? j->pos[t] - base + 1 : B;
            if (a < b) {
                jlo = a < jlo ? a : jlo;
                jhi = b > jhi ? b : jhi;
            }
        }
        if (jlo >= jhi) continue;
        int64_t slot0 = ((int64_t)table[blk] * g->n_head_kv + kvh) * B;
        const uint8_t *kb = (const uint8_t *)j->L->k + (size_t)slot0 * hd * es;
        const uint8_t *vb = (const uint8_t *)j->L->v + (size_t)slot0 * hd * es;
        const float *vf = (const float *)vb;
        for (int64_t i = jlo; i < jhi; i++) {
            const float *kr = (const float *)(kb + (size_t)i * hd * es);
            if (g->dtype != ASSAY_KV_F32) {
                assay_kv_decode(K, g->dtype, kb + (size_t)i * hd * es, row, hd, scaled ? j->L->k_scale[slot0 + i] : 1.0f);
                kr = row;
            }
            for (int64_t d = 0; d < hd; d++) kT[d * B + i] = kr[d];
            if (g->dtype != ASSAY_KV_F32)
                assay_kv_decode(K, g->dtype, vb + (size_t)i * hd * es, vt + i * hd, hd, scaled ? j->L->v_scale[slot0 + i] : 1.0f);
        }
        if (g->dtype != ASSAY_KV_F32) vf = vt;
        for (int64_t t = t0; t < t1; t++) {
            int64_t a = start[t - t0] > base ? start[t - t0] - base : 0, b = j->pos[t] - base + 1 < B ? j->pos[t] - base + 1 : B;
            if (a >= b) continue;
            int64_t r0 = (t - t0) * grp;
            K->attn_block16(hd, grp, j->q + (t * ap->n_head + kvh * grp) * hd, kT, vf, (int)a, (int)b, ap->scale, ap->softcap,
                            m + r0, l + r0, acc + r0 * hd);
        }
    }
    for (int64_t t = t0; t < t1; t++)
        for (int64_t h = 0; h < grp; h++) {
            int64_t r = (t - t0) * grp + h;
            float *out = j->out + (t * ap->n_head + kvh * grp + h) * hd, inv = 1.0f / l[r];
            for (int64_t d = 0; d < hd; d++) out[d] = acc[r * hd + d] * inv;
        }
}

static void cpu_attention(assay_backend *be, float *out, const float *q, const assay_attn_params *ap,
                          const assay_kv_layer *L, const assay_kv_geom *g, const assay_step *step) {
    cpu_backend *cb = cpu_of(be);
    int64_t n_tok = step->n_tokens;
    const int32_t *pos = step->pos, *seq_of_tok = step->seq_of_tok;
    int64_t grp = ap->n_head / ap->n_head_kv;
    if (cb->k->attn_block16 && ap->head_dim % 16 == 0) {
        static_assert(ASSAY_KV_BLOCK == 16, "attn_block16 takes 16 keys per KV block");
        if (cb->tiles_cap < n_tok + 1) {
            free(cb->tiles);
            cb->tiles = assay_xmalloc((size_t)(n_tok + 1) * sizeof *cb->tiles);
            cb->tiles_cap = n_tok + 1;
        }
        int64_t n_tiles = 0;
        for (int64_t t = 0; t < n_tok;) { /* consecutive tokens of the same sequence */
            int64_t u = t + 1;
            while (u < n_tok && u - t < ATTN_TILE_TOK && seq_of_tok[u] == seq_of_tok[t]) u++;
            cb->tiles[n_tiles++] = t;
            t = u;
        }
        cb->tiles[n_tiles] = n_tok;
        int64_t hd = ap->head_dim, nr = ATTN_TILE_TOK * grp;
        ensure_thread_scratch(cb, (size_t)(nr * hd + 2 * ASSAY_KV_BLOCK * hd + hd + 2 * nr));
        attn_job j = {out, q, ap, L, g, step, pos, cb};
        assay_threadpool_run(cb->tp, attn_tile_task, &j, n_tiles * ap->n_head_kv);
        return;
    }
    ensure_thread_scratch(cb, (size_t)(grp * ap->head_dim + 2 * ASSAY_KV_BLOCK * ap->head_dim + grp * ASSAY_KV_BLOCK + 2 * grp));
    attn_job j = {out, q, ap, L, g, step, pos, cb};
    assay_threadpool_run(cb->tp, attn_task, &j, n_tok * ap->n_head_kv);
}

/* ---- open / close ----------------------------------------------------------------------------------------- */

static void cpu_close(assay_backend *be);

static const assay_backend_ops cpu_ops = {
    .name = "cpu",
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .prepare_weight = cpu_prepare_weight,
    .linear = cpu_linear,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .kv_copy_block = cpu_kv_copy_block,
    .gather_rows = cpu_gather_rows,
    .tanh_cap = cpu_tanh_cap,
    .absmax = cpu_absmax,
    .add_rmsnorm = cpu_add_rmsnorm,
    .download_f32 = cpu_download_f32,
    .argmax = cpu_argmax,
    .swiglu = cpu_swiglu,
    .geglu = cpu_geglu,
    .add = cpu_add,
    .scale = cpu_scale,
    .softmax = cpu_softmax,
    .get_rows = cpu_get_rows,
};

/* The kernel sets by name; each runs only where the CPU has its instructions (cpuid, and the OS saving the registers). */
static const char *const cpu_kernel_sets[] = {"scalar", "avx2", "avx512", "avx512bf16", "amx", NULL};

/* The named set's table when this CPU runs it, else NULL; *needs: what the set requires (NULL: no such set). */
static const assay_cpu_kernels *cpu_kernels_named(const char *name, const char **needs) {
    *needs = NULL;
    if (!name) return NULL;
    if (strcmp(name, "scalar") == 0) {
        *needs = "nothing";
        return assay_cpu_kernels_ref();
    }
    if (strcmp(name, "avx2") == 0) {
        *needs = "AVX2, FMA and F16C";
        return assay_cpu_has_avx2() ? assay_cpu_kernels_avx2() : NULL;
    }
    if (strcmp(name, "avx512") == 0) {
        *needs = "AVX2, FMA, F16C and AVX-512 F/BW/VL/DQ with VNNI";
        return assay_cpu_has_avx512() ? assay_cpu_kernels_avx512() : NULL;
    }
    if (strcmp(name, "avx512bf16") == 0) {
        *needs = "AVX2, FMA, F16C, AVX-512 F/BW/VL/DQ with VNNI, and AVX512_BF16";
        return assay_cpu_has_avx512bf16() ? assay_cpu_kernels_avx512bf16() : NULL;
    }
    if (strcmp(name, "amx") == 0) {
        *needs = "AVX2, FMA, F16C, AVX-512 F/BW/VL/DQ with VNNI, AVX512_BF16, AMX-TILE and AMX-INT8 (and the OS's leave)";
        return assay_cpu_has_amx() ? assay_cpu_kernels_amx() : NULL;
    }
    return NULL;
}

const char *const *assay_backend_cpu_kernel_sets(void) { return cpu_kernel_sets; }

int assay_backend_cpu_kernels_supported(const char *kernels) {
    const char *needs;
    return cpu_kernels_named(kernels, &needs) != NULL;
}

static void cpu_open_with(assay_backend **out, int n_threads, const assay_cpu_kernels *k, int exact) {
    assay_kv_convert_init();
    cpu_backend *cb = assay_xcalloc(1, sizeof *cb);
    cb->base.ops = &cpu_ops;
    cb->base.impl = cb;
    cb->base.act_type = ASSAY_TYPE_F32;
    cb->base.host_memory = 1;
    cb->k = k;
    cb->exact = exact;
    if (n_threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (int)nc : 1;
    }
    cb->n_threads = n_threads;
    cb->tp = assay_threadpool_new(n_threads);
    cb->ts = assay_xcalloc((size_t)n_threads, sizeof *cb->ts);
    *out = &cb->base;
}

assay_status assay_backend_cpu_open(assay_backend **out, int n_threads) {
    const char *no_simd = getenv("ASSAY_CPU_NO_SIMD"), *exact = getenv("ASSAY_CPU_EXACT");
    const char *no_avx512 = getenv("ASSAY_CPU_NO_AVX512"); /* AVX2 kernels only (comparisons) */
    const assay_cpu_kernels *k = assay_cpu_kernels_ref();
    if (!(no_simd && *no_simd && *no_simd != '0') && assay_cpu_has_avx2() && assay_cpu_kernels_avx2()) {
        k = assay_cpu_kernels_avx2();
        if (!(no_avx512 && *no_avx512 && *no_avx512 != '0') && assay_cpu_has_avx512() && assay_cpu_kernels_avx512()) {
            k = assay_cpu_kernels_avx512();
            const char *no_bf16 = getenv("ASSAY_CPU_NO_BF16"); /* f32 activations for bf16 weights (comparisons) */
            const char *no_amx = getenv("ASSAY_CPU_NO_AMX"); /* VNNI prefill instead of AMX tiles (comparisons) */
            if (!(no_bf16 && *no_bf16 && *no_bf16 != '0') && assay_cpu_has_avx512bf16() && assay_cpu_kernels_avx512bf16()) {
                k = assay_cpu_kernels_avx512bf16();
                if (!(no_amx && *no_amx && *no_amx != '0') && assay_cpu_has_amx() && assay_cpu_kernels_amx())
                    k = assay_cpu_kernels_amx();
            }
        }
    }
    cpu_open_with(out, n_threads, k, exact && *exact && *exact != '0');
    return ASSAY_OK;
}

assay_status assay_backend_cpu_open_kernels(assay_backend **out, int n_threads, const char *kernels) {
    if (!kernels || strcmp(kernels, "auto") == 0) return assay_backend_cpu_open(out, n_threads);
    const char *needs;
    const assay_cpu_kernels *k = cpu_kernels_named(kernels, &needs);
    if (!needs) return assay_fail(ASSAY_ERR_ARG, "unknown CPU kernel set '%s' (scalar, avx2, avx512, avx512bf16, amx or auto)", kernels);
    if (!k) return assay_fail(ASSAY_ERR_UNSUPPORTED, "CPU kernel set '%s' needs %s, which this CPU lacks", kernels, needs);
    cpu_open_with(out, n_threads, k, 0);
    return ASSAY_OK;
}

static void cpu_close(assay_backend *be) {
    cpu_backend *cb = cpu_of(be);
    assay_threadpool_free(cb->tp);
    for (int i = 0; i < cb->n_threads; i++) free(cb->ts[i].buf);
    free(cb->ts);
    free(cb->act);
    free(cb->tiles);
    free(cb->lin_x); free(cb->lin_scales); free(cb->lin_perm); free(cb->lin_codes);
    for (size_t i = 0; i < cb->n_dummies; i++) free(cb->dummies[i]);
    free(cb->dummies);
    free(cb);
}


const char *assay_backend_cpu_kernels(const assay_backend *be) { return ((const cpu_backend *)be)->k->name; }

const assay_backend_ops *assay_backend_cpu_ops(void) { return &cpu_ops; }

void assay_backend_cpu_f32_activations(assay_backend *be) {
    cpu_backend *cb = cpu_of(be);
    if (be->ops == &cpu_ops && (cb->k == assay_cpu_kernels_avx512bf16() || cb->k == assay_cpu_kernels_amx()))
        cb->k = assay_cpu_kernels_avx512();
}

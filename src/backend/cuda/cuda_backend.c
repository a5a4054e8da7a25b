/* cuda_backend.c — the model on an NVIDIA GPU: backend.h's ops over the measured kernels (cuda_kernels.h) and the
 * small ops of backend_ops.cu.
 *
 * Activations are bf16 (be->act_type); weights are uploaded once by prepare_weight as bf16 (any stored type the CPU
 * can dequantize), or as e4m3 codes for on-the-fly fp8 (--quantization fp8: W8A8 with per-token activation scales
 * through cuBLASLt's FP8 GEMM), or made on the device by a fill kernel for dummy weights (dummy_weights.h); matmuls go
 * through cuBLASLt (the measured decode GEMMs are not wired in yet).
 * Each step's descriptor (token ids, positions, slots, block tables) is copied to the device in one transfer by
 * begin_step, together with the attention plan worked out on the host:
 *   - every sequence of the step has one query token (a decode step): the paged decode kernel, split-KV;
 *   - otherwise the sequences with one query token still go to the decode kernel (their rows gathered), and the
 *     others to the varlen prefill kernel (wgmma on Hopper) over their cache slots gathered to bf16 rows, causal
 *     bottom-right, so a chunk of a long prompt sees the chunks before it;
 *   - a sliding window, a score softcap, a head size other than 64/128, a cache with per-slot dynamic scales or a
 *     step without cu_seqlens_q: the reference paged kernel (backend_ops.cu) for every token.
 * Decode steps are replayed from CUDA graphs captured per batch-size bucket (model.c, run_step_graph);
 * ASSAY_CUDA_GRAPHS=0 runs every step eagerly. ASSAY_CUDA_ATTN_REF=1 sends all attention to the reference kernel.
 * A CUDA error inside an op cannot be returned through the op table: it is reported and the process exits 1 (an
 * illegal address leaves the context unusable anyway).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/backend.h"
#include "assay/cuda_kernels.h"
#include "assay/dequant.h"
#include "assay/quant_fp8.h"
#include "backend_ops.h"

typedef struct cuda_weight {
    void *w;         /* bf16 [n_out][n_in], or e4m3 codes [n_out][n_in] when w_scale is set */
    float *w_scale;  /* FP8 weights: [n_out] per-channel scales (the per-tensor scale repeated), else NULL */
    int32_t *perm;   /* device copy of the weight's perm, or NULL */
} cuda_weight;

/* a device buffer that grows on demand (outside graph capture) */
typedef struct grow_buf {
    void *p;
    size_t cap;
} grow_buf;

typedef struct cuda_backend {
    assay_backend base;
    cudaStream_t st;
    assay_cuda_blas *blas;
    char device_name[256];
    /* staging: the step's host arrays are packed into pinned memory and copied in one transfer */
    uint8_t *stage_h, *stage_d;
    size_t stage_cap, stage_n, stage_sent;
    cudaEvent_t stage_ev;
    /* the current step on the device */
    const assay_step *step;
    int32_t *d_token, *d_pos, *d_seq_of_tok, *d_tables;
    int64_t *d_slot;
    int64_t table_stride;
    int have_cu;       /* the step has cu_seqlens_q (contiguous sequences) */
    int all_decode;    /* every sequence has exactly one query token, token i of sequence i */
    /* decode part */
    int64_t n_dec, max_dec_len;
    int32_t *d_dec_rows, *d_dec_tables, *d_dec_lens;
    /* prefill part */
    int64_t n_pre, pre_q, pre_k, max_pre_q;
    int32_t *d_pre_rows, *d_cu_pq, *d_cu_pk;
    int64_t *d_pre_slots;
    /* scratch */
    grow_buf qg, og, pre_qo, kg, vg, xperm, ws, f32, xq, xs, ids;
    float *d_absmax;
    /* captured steps (graph_launch): one executable graph per key */
    struct { int64_t key; cudaGraphExec_t exec; } graphs[64];
    int n_graphs, capturing, capture_failed;
    int graphs_off; /* ASSAY_CUDA_GRAPHS=0: every step runs eagerly (for comparisons) */
    void *retired[16]; /* buffers replaced while capturing (a captured graph may still point at them) */
    int n_retired;
    /* one static scale per KV head for the decode kernel, per layer (keyed by the layer's K storage) */
    struct layer_scales { const void *k; float ks, vs; float *d; } *lscales;
    int n_lscales;
    /* every prepared weight, freed at close */
    cuda_weight **weights;
    size_t n_weights, cap_weights;
} cuda_backend;

static cuda_backend *cuda_of(assay_backend *be) { return (cuda_backend *)be; }

static void die_cuda(const char *what, const char *msg) {
    fprintf(stderr, "assay: CUDA error in %s: %s\n", what, msg);
    exit(1);
}
#define CK(expr)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (expr);                                                                  \
        if (e_ != cudaSuccess) die_cuda(#expr, cudaGetErrorString(e_));                           \
    } while (0)
#define KK(expr)                                                                                  \
    do {                                                                                          \
        if ((expr) != 0) die_cuda(#expr, assay_cuda_last_error());                                \
    } while (0)

static void graphs_drop(cuda_backend *cb);

static void *grow(cuda_backend *cb, grow_buf *b, size_t bytes) {
    if (bytes <= b->cap) return b->p;
    if (cb->capturing) { /* no synchronizing now: keep the old buffer until the graphs go, and fail the capture */
        cb->capture_failed = 1;
        if (b->p && cb->n_retired < 16) cb->retired[cb->n_retired++] = b->p;
    } else if (b->p) { /* kernels queued before may still read the old buffer; graphs captured on it go */
        CK(cudaStreamSynchronize(cb->st));
        CK(cudaFree(b->p));
        graphs_drop(cb);
    }
    b->cap = bytes + bytes / 4 + 4096;
    CK(cudaMalloc(&b->p, b->cap));
    return b->p;
}

/* ---- memory ----------------------------------------------------------------------------------------------- */

static void *cuda_alloc(assay_backend *be, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    CK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, cuda_of(be)->st));
    return p;
}
static void cuda_free(assay_backend *be, void *p) {
    (void)be;
    if (p) CK(cudaFree(p));
}
static void cuda_upload(assay_backend *be, void *dst, const void *src, size_t bytes) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_of(be)->st));
}
static void cuda_download(assay_backend *be, void *dst, const void *src, size_t bytes) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cuda_of(be)->st));
    CK(cudaStreamSynchronize(cuda_of(be)->st));
}
static void cuda_copy(assay_backend *be, void *dst, const void *src, size_t bytes) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_of(be)->st));
}
static void cuda_synchronize(assay_backend *be) { CK(cudaStreamSynchronize(cuda_of(be)->st)); }

static void cuda_download_f32(assay_backend *be, float *dst, const float *src, int64_t n) {
    cuda_backend *cb = cuda_of(be);
    float *tmp = grow(cb, &cb->f32, (size_t)n * sizeof(float));
    KK(cuda_op_bf16_to_f32(src, tmp, n, cb->st));
    cuda_download(be, dst, tmp, (size_t)n * sizeof(float));
}

static void cuda_memory_info(assay_backend *be, size_t *free_bytes, size_t *total_bytes) {
    (void)be;
    CK(cudaMemGetInfo(free_bytes, total_bytes));
}

/* ---- weights ---------------------------------------------------------------------------------------------- */

static uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* On-the-fly fp8 weights (values = e4m3 code x one scale): the codes themselves, one byte each, for cuBLASLt's FP8
 * GEMM with per-token x per-channel scales. */
static assay_status prepare_fp8(cuda_backend *cb, const assay_weight *w, cuda_weight *cw) {
    size_t n = (size_t)(w->n_in * w->n_out);
    if (cudaMalloc(&cw->w, n) != cudaSuccess || cudaMalloc((void **)&cw->w_scale, (size_t)w->n_out * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        if (cw->w) cudaFree(cw->w);
        return assay_fail(ASSAY_ERR_NOMEM, "%s: no GPU memory for %.1f MiB of fp8 weights", w->name, (double)n / 1048576.0);
    }
    /* the model keeps the codes for a device backend (model.c's fp8_weight); exact f32 values code x scale otherwise */
    uint8_t *q = (uint8_t *)w->data, *made = NULL;
    if (w->type == ASSAY_TYPE_F32) {
        const float *f = w->data;
        float inv = 1.0f / w->fp8_scale;
        q = made = assay_xmalloc(n);
        for (size_t i = 0; i < n; i++) q[i] = assay_fp8_encode(ASSAY_FP8_E4M3, f[i] * inv); /* exact: f is code x scale */
    }
    float *sc = assay_xmalloc((size_t)w->n_out * sizeof(float));
    for (int64_t o = 0; o < w->n_out; o++) sc[o] = w->fp8_scale;
    CK(cudaMemcpyAsync(cw->w, q, n, cudaMemcpyHostToDevice, cb->st));
    CK(cudaMemcpyAsync(cw->w_scale, sc, (size_t)w->n_out * sizeof(float), cudaMemcpyHostToDevice, cb->st));
    CK(cudaStreamSynchronize(cb->st));
    free(made);
    free(sc);
    cb->base.weight_bytes += n + (size_t)w->n_out * sizeof(float);
    return ASSAY_OK;
}

static assay_status cuda_prepare_weight(assay_backend *be, assay_weight *w) {
    cuda_backend *cb = cuda_of(be);
    if (w->prepared) return ASSAY_OK;
    int dummy = assay_weight_is_dummy(w);
    int fp8_codes = w->type == ASSAY_TYPE_F8_E4M3 && w->fp8_scale > 0; /* model.c keeps these for a device backend */
    if (dummy ? w->type != ASSAY_TYPE_F32 && w->type != ASSAY_TYPE_F16 && w->type != ASSAY_TYPE_BF16
              : !fp8_codes && !assay_dequant_row_get(w->type))
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the CUDA backend has no kernel for %s%s weights", w->name,
                          dummy ? "dummy " : "", assay_type_name(w->type));
    cuda_weight *cw = assay_xcalloc(1, sizeof *cw);
    if (!dummy && w->fp8_scale > 0 && (w->type == ASSAY_TYPE_F32 || fp8_codes) && !w->perm && w->n_in % 16 == 0 &&
        w->n_out % 16 == 0) {
        assay_status st = prepare_fp8(cb, w, cw);
        if (st) {
            free(cw);
            return st;
        }
        goto done;
    }
    size_t bytes = (size_t)(w->n_in * w->n_out) * 2;
    if (cudaMalloc(&cw->w, bytes) != cudaSuccess) {
        cudaGetLastError();
        free(cw);
        return assay_fail(ASSAY_ERR_NOMEM, "%s: no GPU memory for %.1f MiB of bf16 weights", w->name, (double)bytes / 1048576.0);
    }
    if (dummy) {
        /* made on the device by a kernel: the values never pass through host memory */
        KK(cuda_op_dummy_fill(cw->w, w->n_in * w->n_out, w->dummy_seed, w->dummy_range, w->type == ASSAY_TYPE_F16, cb->st));
        CK(cudaStreamSynchronize(cb->st));
        goto filled;
    }
    /* rows converted on the host in chunks of about 32 MiB, each uploaded before the next is made */
    int64_t rows_per = (int64_t)((32u << 20) / ((size_t)w->n_in * 4));
    if (rows_per < 1) rows_per = 1;
    if (rows_per > w->n_out) rows_per = w->n_out;
    float *f = assay_xmalloc((size_t)(rows_per * w->n_in) * sizeof(float));
    uint16_t *h = assay_xmalloc((size_t)(rows_per * w->n_in) * 2);
    for (int64_t r0 = 0; r0 < w->n_out; r0 += rows_per) {
        int64_t nr = w->n_out - r0 < rows_per ? w->n_out - r0 : rows_per;
        for (int64_t r = 0; r < nr; r++) {
            const uint8_t *src = (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes;
            if (w->type == ASSAY_TYPE_BF16) memcpy(h + r * w->n_in, src, (size_t)w->n_in * 2);
            else {
                assay_status st = assay_dequantize(w->type, src, f + r * w->n_in, w->n_in);
                if (st) {
                    free(f); free(h); cudaFree(cw->w); free(cw);
                    return assay_fail_context(st, "%s", w->name);
                }
                for (int64_t i = 0; i < w->n_in; i++) h[r * w->n_in + i] = bf16_rne(f[r * w->n_in + i]);
            }
        }
        /* on the backend's (non-blocking) stream, finished before the host chunk is refilled */
        CK(cudaMemcpyAsync((uint16_t *)cw->w + r0 * w->n_in, h, (size_t)(nr * w->n_in) * 2, cudaMemcpyHostToDevice, cb->st));
        CK(cudaStreamSynchronize(cb->st));
    }
    free(f);
    free(h);
filled:
    be->weight_bytes += bytes;
    if (w->perm) {
        CK(cudaMalloc((void **)&cw->perm, (size_t)w->n_in * sizeof(int32_t)));
        CK(cudaMemcpyAsync(cw->perm, w->perm, (size_t)w->n_in * sizeof(int32_t), cudaMemcpyHostToDevice, cb->st));
        CK(cudaStreamSynchronize(cb->st));
    }
done:
    if (cb->n_weights == cb->cap_weights) {
        cb->cap_weights = cb->cap_weights ? 2 * cb->cap_weights : 64;
        cb->weights = assay_xrealloc(cb->weights, cb->cap_weights * sizeof *cb->weights);
    }
    cb->weights[cb->n_weights++] = cw;
    w->prepared = cw;
    return ASSAY_OK;
}

/* ---- the step on the device -------------------------------------------------------------------------------- */

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Room for `bytes` more in the staging area; returns the host and device addresses. */
static void *stage_take(cuda_backend *cb, size_t bytes, void **dev) {
    size_t off = align256(cb->stage_n);
    if (off + bytes > cb->stage_cap) {
        /* grow: wait for everything that reads the old buffers, keep what was packed so far */
        CK(cudaStreamSynchronize(cb->st));
        size_t cap = 2 * (off + bytes) + (1 << 20);
        uint8_t *h, *d;
        CK(cudaMallocHost((void **)&h, cap));
        CK(cudaMalloc((void **)&d, cap));
        if (cb->stage_n) {
            memcpy(h, cb->stage_h, cb->stage_n);
            CK(cudaMemcpyAsync(d, cb->stage_d, cb->stage_n, cudaMemcpyDeviceToDevice, cb->st));
            CK(cudaStreamSynchronize(cb->st));
        }
        /* the device pointers handed out so far move with the buffer */
        ptrdiff_t shift = cb->stage_d ? (ptrdiff_t)((uintptr_t)d - (uintptr_t)cb->stage_d) : 0;
        if (cb->stage_h) CK(cudaFreeHost(cb->stage_h));
        if (cb->stage_d) CK(cudaFree(cb->stage_d));
#define MOVE(p) if (p) p = (void *)((uint8_t *)(p) + shift)
        if (shift) {
            MOVE(cb->d_token); MOVE(cb->d_pos); MOVE(cb->d_seq_of_tok); MOVE(cb->d_tables); MOVE(cb->d_slot);
            MOVE(cb->d_dec_rows); MOVE(cb->d_dec_tables); MOVE(cb->d_dec_lens);
            MOVE(cb->d_pre_rows); MOVE(cb->d_cu_pq); MOVE(cb->d_cu_pk); MOVE(cb->d_pre_slots);
        }
#undef MOVE
        cb->stage_h = h;
        cb->stage_d = d;
        cb->stage_cap = cap;
        if (cb->capturing) cb->capture_failed = 1;
        graphs_drop(cb); /* they read the step from the old device buffer */
    }
    cb->stage_n = off + bytes;
    *dev = cb->stage_d + off;
    return cb->stage_h + off;
}

/* At least `bytes` of staging room from the current fill on (called before anything is packed). */
static void stage_reserve(cuda_backend *cb, size_t bytes) {
    void *dev;
    size_t keep = cb->stage_n;
    stage_take(cb, bytes, &dev);
    cb->stage_n = keep;
}

/* Sends what was packed since the last send. */
static void stage_send(cuda_backend *cb) {
    if (cb->stage_n == cb->stage_sent) return;
    CK(cudaMemcpyAsync(cb->stage_d + cb->stage_sent, cb->stage_h + cb->stage_sent, cb->stage_n - cb->stage_sent,
                       cudaMemcpyHostToDevice, cb->st));
    CK(cudaEventRecord(cb->stage_ev, cb->st));
    cb->stage_sent = cb->stage_n;
}

/* A host array for an op: the step's own arrays are already on the device; others are staged now. */
static const void *dev_array(cuda_backend *cb, const void *host, size_t bytes) {
    const assay_step *s = cb->step;
    if (s && host == s->token) return cb->d_token;
    if (s && host == s->pos) return cb->d_pos;
    void *dev;
    if (cb->capturing) cb->capture_failed = 1; /* a graph would copy whatever the buffer holds when it replays */
    memcpy(stage_take(cb, bytes, &dev), host, bytes);
    stage_send(cb);
    return dev;
}

#define TAKE(ptr, count, type) ((type *)stage_take(cb, (size_t)(count) * sizeof(type), (void **)&(ptr)))

static void cuda_begin_step(assay_backend *be, const assay_step *s) {
    cuda_backend *cb = cuda_of(be);
    /* the previous step's transfers must have left the pinned buffer before it is refilled */
    CK(cudaEventSynchronize(cb->stage_ev));
    cb->stage_n = cb->stage_sent = 0;
    cb->d_token = cb->d_pos = cb->d_seq_of_tok = cb->d_tables = NULL;
    cb->d_slot = NULL;
    cb->d_dec_rows = cb->d_dec_tables = cb->d_dec_lens = NULL;
    cb->d_pre_rows = cb->d_cu_pq = cb->d_cu_pk = NULL;
    cb->d_pre_slots = NULL;
    cb->step = s;
    int64_t n = s->n_tokens, S = s->n_seqs;
    int64_t stride = 1;
    for (int64_t i = 0; i < S; i++) {
        int64_t nb = ((int64_t)s->seq_lens[i] + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK;
        if (nb > stride) stride = nb;
    }
    if (s->graph_ctx > 0) { /* one layout for every step of this size: tables as wide as the longest context */
        int64_t g = (s->graph_ctx + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK;
        if (g > stride) stride = g;
    }
    cb->table_stride = stride;
    /* room for the whole descriptor and plan (at most) plus the step's later small arrays, so that no pointer
     * packed below moves */
    int64_t ctx = 0;
    for (int64_t i = 0; i < S; i++) ctx += s->seq_lens[i];
    stage_reserve(cb, (size_t)(n * 32 + 2 * S * stride * 4 + S * 16 + ctx * 8) + 16 * 256 + (64u << 10));
    memcpy(TAKE(cb->d_token, n, int32_t), s->token, (size_t)n * 4);
    memcpy(TAKE(cb->d_pos, n, int32_t), s->pos, (size_t)n * 4);
    memcpy(TAKE(cb->d_seq_of_tok, n, int32_t), s->seq_of_tok, (size_t)n * 4);
    memcpy(TAKE(cb->d_slot, n, int64_t), s->slot, (size_t)n * 8);
    int32_t *tab = TAKE(cb->d_tables, S * stride, int32_t);
    for (int64_t i = 0; i < S; i++) {
        int64_t nb = ((int64_t)s->seq_lens[i] + ASSAY_KV_BLOCK - 1) / ASSAY_KV_BLOCK;
        for (int64_t j = 0; j < stride; j++) tab[i * stride + j] = j < nb ? s->block_tables[i][j] : 0;
    }
    /* the attention plan */
    cb->have_cu = s->cu_seqlens_q != NULL;
    cb->n_dec = cb->n_pre = cb->pre_q = cb->pre_k = cb->max_pre_q = cb->max_dec_len = 0;
    cb->all_decode = 0;
    if (cb->have_cu) {
        const int32_t *cu = s->cu_seqlens_q;
        for (int64_t i = 0; i < S; i++) {
            int64_t nq = cu[i + 1] - cu[i];
            if (nq == 1) {
                cb->n_dec++;
                if (s->seq_lens[i] > cb->max_dec_len) cb->max_dec_len = s->seq_lens[i];
            } else if (nq > 1) {
                cb->n_pre++;
                cb->pre_q += nq;
                cb->pre_k += s->seq_lens[i];
                if (nq > cb->max_pre_q) cb->max_pre_q = nq;
            }
        }
        cb->all_decode = cb->n_dec == S && n == S;
        if (s->graph_ctx > cb->max_dec_len) cb->max_dec_len = s->graph_ctx; /* the decode split, fixed too */
        if (cb->n_dec > 0) {
            int32_t *rows = TAKE(cb->d_dec_rows, cb->n_dec, int32_t);
            int32_t *dt = TAKE(cb->d_dec_tables, cb->n_dec * stride, int32_t);
            int32_t *lens = TAKE(cb->d_dec_lens, cb->n_dec, int32_t);
            int64_t d = 0;
            for (int64_t i = 0; i < S; i++)
                if (cu[i + 1] - cu[i] == 1) {
                    rows[d] = cu[i];
                    memcpy(dt + d * stride, tab + i * stride, (size_t)stride * 4);
                    lens[d++] = s->seq_lens[i];
                }
        }
        if (cb->n_pre > 0) {
            int32_t *rows = TAKE(cb->d_pre_rows, cb->pre_q, int32_t);
            int32_t *cuq = TAKE(cb->d_cu_pq, cb->n_pre + 1, int32_t);
            int32_t *cuk = TAKE(cb->d_cu_pk, cb->n_pre + 1, int32_t);
            int64_t *slots = TAKE(cb->d_pre_slots, cb->pre_k, int64_t);
            int64_t p = 0, rq = 0, rk = 0;
            cuq[0] = cuk[0] = 0;
            for (int64_t i = 0; i < S; i++) {
                int64_t nq = cu[i + 1] - cu[i];
                if (nq <= 1) continue;
                for (int64_t t = 0; t < nq; t++) rows[rq++] = cu[i] + (int32_t)t;
                for (int64_t j = 0; j < s->seq_lens[i]; j++)
                    slots[rk++] = (int64_t)s->block_tables[i][j / ASSAY_KV_BLOCK] * ASSAY_KV_BLOCK + j % ASSAY_KV_BLOCK;
                cuq[p + 1] = (int32_t)rq;
                cuk[p + 1] = (int32_t)rk;
                p++;
            }
        }
    }
    stage_send(cb);
}

/* ---- ops ---------------------------------------------------------------------------------------------------- */

static void cuda_matmul(assay_backend *be, float *y, const assay_weight *w, const float *x, int64_t n_tok) {
    cuda_backend *cb = cuda_of(be);
    const cuda_weight *cw = w->prepared;
    if (!cw) die_cuda("matmul", "weight not prepared");
    KK(assay_cuda_blas_gemm_bf16(cb->blas, x, cw->w, y, (int32_t)n_tok, (int32_t)w->n_out, (int32_t)w->n_in, cb->st));
}

static void cuda_linear(assay_backend *be, float *y, const assay_weight *w, const assay_act_quant *act, const float *x,
                        int64_t n_tok, const float *bias) {
    cuda_backend *cb = cuda_of(be);
    const cuda_weight *cw = w->prepared;
    if (cw && cw->w_scale) { /* W8A8: per-token e4m3 activations (vLLM's dynamic scales) x per-channel e4m3 weights */
        if (!act || act->kind != ASSAY_ACT_QUANT_FP8_TOKEN) die_cuda("linear", "fp8 weights need per-token fp8 inputs");
        uint8_t *xq = grow(cb, &cb->xq, (size_t)(n_tok * w->n_in));
        float *xs = grow(cb, &cb->xs, (size_t)n_tok * sizeof(float));
        KK(assay_cuda_quant_fp8_per_token(x, xq, xs, (int32_t)n_tok, (int32_t)w->n_in, cb->st));
        KK(assay_cuda_blas_gemm_fp8(cb->blas, xq, xs, cw->w, cw->w_scale, ASSAY_CUDA_FP8_PER_TOKEN_CHANNEL, y,
                                    (int32_t)n_tok, (int32_t)w->n_out, (int32_t)w->n_in, cb->st));
        if (bias) KK(cuda_op_add_bias(y, bias, n_tok, w->n_out, cb->st));
        return;
    }
    if (act && act->kind != ASSAY_ACT_QUANT_NONE)
        die_cuda("linear", "this input quantization is not wired into the CUDA backend yet");
    if (cw && cw->perm) {
        void *xp = grow(cb, &cb->xperm, (size_t)(n_tok * w->n_in) * 2);
        KK(cuda_op_gather_cols(xp, x, cw->perm, n_tok, w->n_in, cb->st));
        x = xp;
    }
    cuda_matmul(be, y, w, x, n_tok);
    if (bias) KK(cuda_op_add_bias(y, bias, n_tok, w->n_out, cb->st));
}

static void cuda_rmsnorm(assay_backend *be, float *y, const float *x, const float *gamma, int64_t n, int64_t n_rows,
                         float eps) {
    KK(cuda_op_rmsnorm(y, x, gamma, n, n_rows, eps, cuda_of(be)->st));
}
static void cuda_add_rmsnorm(assay_backend *be, float *y, float *x, const float *h, const float *gamma, int64_t n,
                             int64_t n_rows, float eps) {
    KK(cuda_op_add_rmsnorm(y, x, h, gamma, n, n_rows, eps, cuda_of(be)->st));
}
static void cuda_rope(assay_backend *be, float *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride,
                      const int32_t *pos, const assay_rope_params *rp) {
    cuda_backend *cb = cuda_of(be);
    const int32_t *dpos = dev_array(cb, pos, (size_t)n_tok * 4);
    KK(cuda_op_rope(x, n_tok, n_head, head_dim, row_stride, dpos, rp->mode == ASSAY_ROPE_MODE_NEOX, rp->n_rot,
                    rp->inv_freq, cb->st));
}
static void cuda_swiglu(assay_backend *be, float *out, const float *gate, const float *up, int64_t n, int64_t n_rows,
                        int64_t stride) {
    KK(cuda_op_glu(out, gate, up, n, n_rows, stride, 0, cuda_of(be)->st));
}
static void cuda_geglu(assay_backend *be, float *out, const float *gate, const float *up, int64_t n, int64_t n_rows,
                       int64_t stride) {
    KK(cuda_op_glu(out, gate, up, n, n_rows, stride, 1, cuda_of(be)->st));
}
static void cuda_add(assay_backend *be, float *y, const float *a, const float *b, int64_t n) {
    KK(cuda_op_add(y, a, b, n, cuda_of(be)->st));
}
static void cuda_scale(assay_backend *be, float *y, float s, int64_t n) { KK(cuda_op_scale(y, s, n, cuda_of(be)->st)); }
static void cuda_softmax(assay_backend *be, float *x, int64_t n, int64_t n_rows, float softcap) {
    KK(cuda_op_softmax(x, n, n_rows, softcap, cuda_of(be)->st));
}
static void cuda_tanh_cap(assay_backend *be, float *x, int64_t n, float cap) {
    KK(cuda_op_tanh_cap(x, n, cap, cuda_of(be)->st));
}
static void cuda_get_rows(assay_backend *be, float *y, const assay_weight *w, const int32_t *ids, int64_t n) {
    cuda_backend *cb = cuda_of(be);
    const cuda_weight *cw = w->prepared;
    if (!cw) die_cuda("get_rows", "weight not prepared");
    KK(cuda_op_get_rows(y, cw->w, dev_array(cb, ids, (size_t)n * 4), n, w->n_in, cb->st));
}
static void cuda_gather_rows(assay_backend *be, float *dst, const float *src, const int32_t *rows, int64_t n_rows,
                             int64_t width) {
    cuda_backend *cb = cuda_of(be);
    KK(cuda_op_gather_rows(dst, src, dev_array(cb, rows, (size_t)n_rows * 4), n_rows, width, cb->st));
}
static void cuda_argmax(assay_backend *be, int32_t *ids, const float *x, int64_t n, int64_t n_rows) {
    cuda_backend *cb = cuda_of(be);
    int32_t *d = grow(cb, &cb->ids, (size_t)n_rows * sizeof(int32_t));
    KK(cuda_op_argmax(x, n, n_rows, d, cb->st));
    cuda_download(be, ids, d, (size_t)n_rows * sizeof(int32_t));
}

static float cuda_absmax(assay_backend *be, const float *x, int64_t n) {
    cuda_backend *cb = cuda_of(be);
    KK(cuda_op_absmax(x, n, cb->d_absmax, cb->st));
    float m = 0;
    cuda_download(be, &m, cb->d_absmax, sizeof m);
    return m;
}

/* ---- KV cache and attention ------------------------------------------------------------------------------------ */

static cuda_kv_view kv_view(const assay_kv_layer *L, const assay_kv_geom *g) {
    cuda_kv_view v = {L->k, L->v, L->k_scale, L->v_scale, L->k_static, L->v_static, L->static_uniform, CUDA_KV_BF16,
                      (int32_t)g->n_head_kv, (int32_t)g->head_dim};
    switch (g->dtype) {
    case ASSAY_KV_BF16: v.elem = CUDA_KV_BF16; break;
    case ASSAY_KV_FP8_E4M3: v.elem = CUDA_KV_FP8_E4M3; break;
    case ASSAY_KV_FP8_E5M2: v.elem = CUDA_KV_FP8_E5M2; break;
    case ASSAY_KV_INT8: v.elem = CUDA_KV_INT8; break;
    default: die_cuda("KV cache", "the CUDA backend keeps bf16, fp8 or int8 caches (the engine maps f16 to bf16)");
    }
    return v;
}

static void cuda_kv_store(assay_backend *be, const assay_kv_layer *L, const assay_kv_geom *g, const float *k,
                          const float *v, const assay_step *step) {
    cuda_backend *cb = cuda_of(be);
    cuda_kv_view kv = kv_view(L, g);
    if (step != cb->step) die_cuda("kv_store", "begin_step was not called for this step");
    KK(cuda_op_kv_store(&kv, k, v, cb->d_slot, step->n_tokens, cb->st));
}

static void cuda_kv_copy_block(assay_backend *be, const assay_kv_layer *L, const assay_kv_geom *g, int64_t src,
                               int64_t dst) {
    size_t slots = (size_t)g->n_head_kv * ASSAY_KV_BLOCK, bytes = slots * (size_t)g->head_dim * assay_kv_dtype_size(g->dtype);
    cuda_copy(be, (uint8_t *)L->k + (size_t)dst * bytes, (const uint8_t *)L->k + (size_t)src * bytes, bytes);
    cuda_copy(be, (uint8_t *)L->v + (size_t)dst * bytes, (const uint8_t *)L->v + (size_t)src * bytes, bytes);
    if (assay_kv_dtype_scaled(g->dtype)) {
        cuda_copy(be, L->k_scale + dst * slots, L->k_scale + src * slots, slots * sizeof(float));
        cuda_copy(be, L->v_scale + dst * slots, L->v_scale + src * slots, slots * sizeof(float));
    }
}

static void cuda_kv_requantize(assay_backend *be, const assay_kv_layer *L, const assay_kv_geom *g, int64_t n_blocks) {
    cuda_kv_view kv = kv_view(L, g);
    KK(cuda_op_kv_requantize(&kv, n_blocks, cuda_of(be)->st));
}

static assay_cuda_dtype decode_dtype(cuda_kv_elem e) {
    static const assay_cuda_dtype map[] = {ASSAY_CUDA_BF16, ASSAY_CUDA_FP8_E4M3, ASSAY_CUDA_FP8_E5M2, ASSAY_CUDA_INT8};
    return map[e];
}

/* The layer's static k/v scales repeated per KV head, in device memory that stays (a captured graph reads it). */
static float *layer_scales(cuda_backend *cb, const cuda_kv_view *kv) {
    struct layer_scales *ls = NULL;
    for (int i = 0; i < cb->n_lscales && !ls; i++)
        if (cb->lscales[i].k == kv->k) ls = &cb->lscales[i];
    if (!ls) {
        cb->lscales = assay_xrealloc(cb->lscales, (size_t)(cb->n_lscales + 1) * sizeof *cb->lscales);
        ls = &cb->lscales[cb->n_lscales++];
        ls->k = kv->k;
        ls->ks = ls->vs = -1;
        CK(cudaMalloc((void **)&ls->d, 2 * (size_t)kv->n_head_kv * sizeof(float)));
    }
    if (ls->ks != kv->k_static || ls->vs != kv->v_static) {
        if (cb->capturing) cb->capture_failed = 1;
        float h[2 * 64];
        int nk = kv->n_head_kv < 64 ? kv->n_head_kv : 64;
        for (int i = 0; i < nk; i++) {
            h[i] = kv->k_static;
            h[nk + i] = kv->v_static;
        }
        CK(cudaMemcpyAsync(ls->d, h, 2 * (size_t)nk * sizeof(float), cudaMemcpyHostToDevice, cb->st));
        CK(cudaStreamSynchronize(cb->st));
        ls->ks = kv->k_static;
        ls->vs = kv->v_static;
    }
    return ls->d;
}

/* The decode sequences of the step: the paged decode kernel, split-KV. */
static void attend_decode(cuda_backend *cb, void *out, const void *q, const assay_attn_params *ap, const cuda_kv_view *kv) {
    int64_t qd = ap->n_head * ap->head_dim, nd = cb->n_dec;
    const void *qq = q;
    void *oo = out;
    if (!cb->all_decode) {
        qq = grow(cb, &cb->qg, (size_t)(nd * qd) * 2);
        oo = grow(cb, &cb->og, (size_t)(nd * qd) * 2);
        KK(cuda_op_gather_rows((void *)qq, q, cb->d_dec_rows, nd, qd, cb->st));
    }
    assay_cuda_attn_decode_args d = {0};
    d.q = qq;
    d.k_pages = kv->k;
    d.v_pages = kv->v;
    d.o = oo;
    d.block_table = cb->d_dec_tables;
    d.seq_lens = cb->d_dec_lens;
    if (kv->elem != CUDA_KV_BF16) { /* one static scale per layer, given per KV head */
        float *sc = layer_scales(cb, kv);
        d.k_scale = sc;
        d.v_scale = sc + kv->n_head_kv;
    }
    d.batch = (int32_t)nd;
    d.n_heads_q = (int32_t)ap->n_head;
    d.n_heads_kv = (int32_t)ap->n_head_kv;
    d.head_dim = (int32_t)ap->head_dim;
    d.page_size = ASSAY_KV_BLOCK;
    d.max_pages_per_seq = (int32_t)cb->table_stride;
    d.max_seq_len = (int32_t)cb->max_dec_len;
    d.scale = ap->scale;
    d.kv_dtype = decode_dtype(kv->elem);
    size_t ws = assay_cuda_attn_decode_workspace(&d);
    d.workspace = grow(cb, &cb->ws, ws);
    d.workspace_bytes = cb->ws.cap;
    KK(assay_cuda_attn_decode(&d, cb->st));
    if (!cb->all_decode) {
        /* scatter back: out row dec_rows[i] = oo[i] */
        KK(cuda_op_scatter_rows(out, oo, cb->d_dec_rows, nd, qd, cb->st));
    }
}

/* The sequences with several query tokens: their cache slots gathered to bf16 rows, the varlen prefill kernel. */
static void attend_prefill(cuda_backend *cb, void *out, const void *q, const assay_attn_params *ap, const cuda_kv_view *kv) {
    int64_t qd = ap->n_head * ap->head_dim, kvd = ap->n_head_kv * ap->head_dim;
    /* separate from the decode part's scratch: both parts of a mixed step are in flight on the stream */
    size_t qb = (size_t)(cb->pre_q * qd) * 2, kb = (size_t)(cb->pre_k * kvd) * 2;
    uint8_t *qo = grow(cb, &cb->pre_qo, 2 * qb);
    void *qg = qo, *og = qo + qb;
    void *kg = grow(cb, &cb->kg, kb), *vg = grow(cb, &cb->vg, kb);
    KK(cuda_op_gather_rows(qg, q, cb->d_pre_rows, cb->pre_q, qd, cb->st));
    KK(cuda_op_kv_gather(kv, cb->d_pre_slots, cb->pre_k, kg, vg, cb->st));
    assay_cuda_attn_prefill_args a = {0};
    a.q = qg;
    a.k = kg;
    a.v = vg;
    a.o = og;
    a.cu_seqlens_q = cb->d_cu_pq;
    a.cu_seqlens_k = cb->d_cu_pk;
    a.batch = (int32_t)cb->n_pre;
    a.max_seqlen_q = (int32_t)cb->max_pre_q;
    a.n_heads_q = (int32_t)ap->n_head;
    a.n_heads_kv = (int32_t)ap->n_head_kv;
    a.head_dim = (int32_t)ap->head_dim;
    a.scale = ap->scale;
    a.causal = 1;
    a.total_q = (int32_t)cb->pre_q;
    a.total_k = (int32_t)cb->pre_k;
    KK(assay_cuda_attn_prefill(&a, cb->st));
    KK(cuda_op_scatter_rows(out, og, cb->d_pre_rows, cb->pre_q, qd, cb->st));
}

static int use_reference_attention(const cuda_backend *cb, const assay_attn_params *ap, const cuda_kv_view *kv) {
    static int forced = -1;
    if (forced < 0) forced = getenv("ASSAY_CUDA_ATTN_REF") && atoi(getenv("ASSAY_CUDA_ATTN_REF")) != 0;
    /* the decode kernel takes one scale per layer: only when every slot carries it */
    int dynamic = kv->elem != CUDA_KV_BF16 && !(kv->k_static > 0 && kv->v_static > 0 && kv->uniform);
    return forced || !cb->have_cu || ap->window > 0 || ap->softcap > 0 || (ap->head_dim != 64 && ap->head_dim != 128) ||
           dynamic || ap->n_head / ap->n_head_kv > 16;
}

static void cuda_attention(assay_backend *be, float *out, const float *q, const assay_attn_params *ap,
                           const assay_kv_layer *L, const assay_kv_geom *g, const assay_step *step) {
    cuda_backend *cb = cuda_of(be);
    if (step != cb->step) die_cuda("attention", "begin_step was not called for this step");
    cuda_kv_view kv = kv_view(L, g);
    if (use_reference_attention(cb, ap, &kv)) {
        cuda_attn_ref_args a = {out, q, cb->d_pos, cb->d_seq_of_tok, cb->d_tables, step->n_tokens, cb->table_stride,
                                (int32_t)ap->n_head, (int32_t)ap->head_dim, ap->scale, ap->softcap, ap->window};
        KK(cuda_op_attention_ref(&a, &kv, cb->st));
        return;
    }
    if (cb->n_dec > 0) attend_decode(cb, out, q, ap, &kv);
    if (cb->n_pre > 0) attend_prefill(cb, out, q, ap, &kv);
}

/* ---- graphs ------------------------------------------------------------------------------------------------------ */

static void graphs_drop(cuda_backend *cb) {
    for (int i = 0; i < cb->n_graphs; i++) cudaGraphExecDestroy(cb->graphs[i].exec);
    cb->n_graphs = 0;
    if (!cb->capturing) {
        for (int i = 0; i < cb->n_retired; i++) cudaFree(cb->retired[i]);
        cb->n_retired = 0;
    }
}

static int cuda_graph_launch(assay_backend *be, int64_t key) {
    cuda_backend *cb = cuda_of(be);
    for (int i = 0; i < cb->n_graphs; i++)
        if (cb->graphs[i].key == key) {
            CK(cudaGraphLaunch(cb->graphs[i].exec, cb->st));
            return 1;
        }
    return 0;
}

static void cuda_graph_capture_begin(assay_backend *be, int64_t key) {
    cuda_backend *cb = cuda_of(be);
    (void)key;
    if (cb->graphs_off) return;
    CK(cudaStreamBeginCapture(cb->st, cudaStreamCaptureModeThreadLocal));
    cb->capturing = 1;
    cb->capture_failed = 0;
}

static int cuda_graph_capture_end(assay_backend *be, int64_t key) {
    cuda_backend *cb = cuda_of(be);
    if (cb->graphs_off) return 0;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(cb->st, &g);
    cb->capturing = 0;
    cudaGraphExec_t exec = NULL;
    if (e == cudaSuccess && !cb->capture_failed && cb->n_graphs < 64) e = cudaGraphInstantiate(&exec, g, 0);
    if (g) cudaGraphDestroy(g);
    if (e != cudaSuccess || cb->capture_failed || !exec) {
        cudaGetLastError();
        if (exec) cudaGraphExecDestroy(exec);
        graphs_drop(cb);
        return 0;
    }
    cb->graphs[cb->n_graphs].key = key;
    cb->graphs[cb->n_graphs++].exec = exec;
    CK(cudaGraphLaunch(exec, cb->st));
    return 1;
}

static void cuda_graph_reset(assay_backend *be) { graphs_drop(cuda_of(be)); }

/* ---- open / close --------------------------------------------------------------------------------------------- */

static void cuda_close(assay_backend *be) {
    cuda_backend *cb = cuda_of(be);
    cudaStreamSynchronize(cb->st);
    graphs_drop(cb);
    for (int i = 0; i < cb->n_lscales; i++) cudaFree(cb->lscales[i].d);
    free(cb->lscales);
    for (size_t i = 0; i < cb->n_weights; i++) {
        cudaFree(cb->weights[i]->w);
        if (cb->weights[i]->w_scale) cudaFree(cb->weights[i]->w_scale);
        if (cb->weights[i]->perm) cudaFree(cb->weights[i]->perm);
        free(cb->weights[i]);
    }
    free(cb->weights);
    grow_buf *bufs[] = {&cb->qg, &cb->og, &cb->pre_qo, &cb->kg, &cb->vg, &cb->xperm, &cb->ws, &cb->f32, &cb->xq, &cb->xs, &cb->ids};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->p) cudaFree(bufs[i]->p);
    if (cb->d_absmax) cudaFree(cb->d_absmax);
    if (cb->stage_h) cudaFreeHost(cb->stage_h);
    if (cb->stage_d) cudaFree(cb->stage_d);
    if (cb->blas) assay_cuda_blas_close(cb->blas);
    cudaEventDestroy(cb->stage_ev);
    cudaStreamDestroy(cb->st);
    free(cb);
}

static const assay_backend_ops cuda_ops = {
    .name = "cuda",
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .prepare_weight = cuda_prepare_weight,
    .linear = cuda_linear,
    .matmul = cuda_matmul,
    .rmsnorm = cuda_rmsnorm,
    .rope = cuda_rope,
    .kv_store = cuda_kv_store,
    .attention = cuda_attention,
    .kv_copy_block = cuda_kv_copy_block,
    .kv_requantize = cuda_kv_requantize,
    .swiglu = cuda_swiglu,
    .geglu = cuda_geglu,
    .add = cuda_add,
    .scale = cuda_scale,
    .softmax = cuda_softmax,
    .get_rows = cuda_get_rows,
    .gather_rows = cuda_gather_rows,
    .tanh_cap = cuda_tanh_cap,
    .absmax = cuda_absmax,
    .argmax = cuda_argmax,
    .add_rmsnorm = cuda_add_rmsnorm,
    .begin_step = cuda_begin_step,
    .download_f32 = cuda_download_f32,
    .memory_info = cuda_memory_info,
    .graph_launch = cuda_graph_launch,
    .graph_capture_begin = cuda_graph_capture_begin,
    .graph_capture_end = cuda_graph_capture_end,
    .graph_reset = cuda_graph_reset,
};

assay_status assay_backend_cuda_open(assay_backend **out, int n_threads) {
    (void)n_threads;
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "--device cuda: no CUDA device (%s)",
                          e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess || (e = cudaSetDevice(0)) != cudaSuccess)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "--device cuda: %s", cudaGetErrorString(e));
    if (prop.major < 8)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "--device cuda: %s is compute capability %d.%d; assay needs 8.0 or later",
                          prop.name, prop.major, prop.minor);
    cuda_backend *cb = assay_xcalloc(1, sizeof *cb);
    snprintf(cb->device_name, sizeof cb->device_name, "%s", prop.name);
    cb->base.ops = &cuda_ops;
    cb->base.impl = cb;
    cb->base.act_type = ASSAY_TYPE_BF16;
    cb->base.host_memory = 0;
    if ((e = cudaStreamCreateWithFlags(&cb->st, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&cb->stage_ev, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaMalloc((void **)&cb->d_absmax, sizeof(float))) != cudaSuccess) {
        free(cb);
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "--device cuda: %s", cudaGetErrorString(e));
    }
    CK(cudaEventRecord(cb->stage_ev, cb->st));
    cb->graphs_off = getenv("ASSAY_CUDA_GRAPHS") && strcmp(getenv("ASSAY_CUDA_GRAPHS"), "0") == 0;
    stage_reserve(cb, 16u << 20); /* steps rarely need more: a captured graph's step pointers then never move */
    if (assay_cuda_blas_open(&cb->blas) != 0) {
        assay_status st = assay_fail(ASSAY_ERR_UNSUPPORTED, "--device cuda: cuBLASLt: %s", assay_cuda_last_error());
        cuda_close(&cb->base);
        return st;
    }
    *out = &cb->base;
    return ASSAY_OK;
}

const char *assay_backend_cuda_device_name(const assay_backend *be) {
    return strcmp(be->ops->name, "cuda") == 0 ? ((const cuda_backend *)be)->device_name : NULL;
}

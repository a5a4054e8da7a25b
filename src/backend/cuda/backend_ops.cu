// The CUDA backend's small ops (backend_ops.h): memory-bound kernels, one thread block per row where a row reduces.
#include "common.cuh"
#include "backend_ops.h"
#include "assay/dummy_weights.h"

#define KV_BLOCK 16 // ASSAY_KV_BLOCK (backend.h)

namespace {

__device__ __forceinline__ float ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) part[w] = v;
    __syncthreads();
    int nw = blockDim.x / 32;
    v = l < nw ? part[l] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float block_max(float v) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) part[w] = v;
    __syncthreads();
    int nw = blockDim.x / 32;
    v = l < nw ? part[l] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

int row_threads(int64_t n) { return n >= 1024 ? 1024 : n >= 256 ? 256 : 128; }
unsigned grid_for(int64_t n, int per) {
    int64_t g = (n + per - 1) / per;
    return (unsigned)(g > 65535 * 32 ? 65535 * 32 : g < 1 ? 1 : g);
}

__global__ void k_f32_to_bf16(const float *x, __nv_bfloat16 *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void k_bf16_to_f32(const __nv_bfloat16 *x, float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}

// One block per row; with h: x += h first (the residual add, rounded to bf16 like a separate add).
__global__ void k_rmsnorm(__nv_bfloat16 *y, __nv_bfloat16 *x, const __nv_bfloat16 *h, const float *gamma, int64_t n,
                          float eps) {
    __nv_bfloat16 *xr = x + blockIdx.x * n;
    __nv_bfloat16 *yr = y + blockIdx.x * n;
    float ss = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = ld(xr, i);
        if (h) {
            __nv_bfloat16 s = __float2bfloat16_rn(v + ld(h + blockIdx.x * n, i));
            xr[i] = s;
            v = __bfloat162float(s);
        }
        ss += v * v;
    }
    float inv = rsqrtf(block_sum(ss) / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __float2bfloat16_rn(ld(xr, i) * inv * gamma[i]);
}

__global__ void k_rope(__nv_bfloat16 *x, int64_t n_head, int64_t head_dim, int64_t row_stride, const int32_t *pos,
                       int neox, int64_t half, const float *inv_freq) {
    int64_t t = blockIdx.x;
    for (int64_t j = threadIdx.x; j < n_head * half; j += blockDim.x) {
        int64_t h = j / half, i = j % half;
        float s, c;
        sincosf((float)pos[t] * inv_freq[i], &s, &c);
        __nv_bfloat16 *v = x + t * row_stride + h * head_dim;
        int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float x0 = __bfloat162float(v[a]), x1 = __bfloat162float(v[b]);
        v[a] = __float2bfloat16_rn(x0 * c - x1 * s);
        v[b] = __float2bfloat16_rn(x0 * s + x1 * c);
    }
}

__global__ void k_glu(__nv_bfloat16 *out, const __nv_bfloat16 *gate, const __nv_bfloat16 *up, int64_t n, int64_t rows,
                      int64_t stride, int gelu) {
    int64_t total = n * rows;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = k / n, i = k % n;
        float g = ld(gate, r * stride + i), u = ld(up, r * stride + i), a;
        if (gelu) a = 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
        else a = g / (1.0f + expf(-g));
        out[k] = __float2bfloat16_rn(a * u);
    }
}

__global__ void k_add(__nv_bfloat16 *y, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(ld(a, i) + ld(b, i));
}
__global__ void k_scale(__nv_bfloat16 *y, float s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(ld(y, i) * s);
}
__global__ void k_tanh_cap(__nv_bfloat16 *y, float cap, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(cap * tanhf(ld(y, i) / cap));
}

__global__ void k_softmax(__nv_bfloat16 *x, int64_t n, float softcap) {
    __nv_bfloat16 *v = x + blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float a = ld(v, i);
        if (softcap > 0) a = softcap * tanhf(a / softcap);
        m = fmaxf(m, a);
    }
    m = block_max(m);
    float s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float a = ld(v, i);
        if (softcap > 0) a = softcap * tanhf(a / softcap);
        s += expf(a - m);
    }
    float inv = 1.0f / block_sum(s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float a = ld(v, i);
        if (softcap > 0) a = softcap * tanhf(a / softcap);
        v[i] = __float2bfloat16_rn(expf(a - m) * inv);
    }
}

__global__ void k_gather_rows(__nv_bfloat16 *dst, const __nv_bfloat16 *src, const int32_t *rows, int64_t width) {
    const __nv_bfloat16 *s = src + (int64_t)rows[blockIdx.x] * width;
    __nv_bfloat16 *d = dst + blockIdx.x * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) d[i] = s[i];
}

__global__ void k_scatter_rows(__nv_bfloat16 *dst, const __nv_bfloat16 *src, const int32_t *rows, int64_t width) {
    const __nv_bfloat16 *s = src + blockIdx.x * width;
    __nv_bfloat16 *d = dst + (int64_t)rows[blockIdx.x] * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) d[i] = s[i];
}

__global__ void k_gather_cols(__nv_bfloat16 *y, const __nv_bfloat16 *x, const int32_t *perm, int64_t n) {
    const __nv_bfloat16 *xr = x + blockIdx.x * n;
    __nv_bfloat16 *yr = y + blockIdx.x * n;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) yr[c] = xr[perm[c]];
}

__global__ void k_add_bias(__nv_bfloat16 *y, const float *bias, int64_t n_tok, int64_t n) {
    int64_t total = n_tok * n;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x)
        y[k] = __float2bfloat16_rn(ld(y, k) + bias[k % n]);
}

// One block per row: (value, index) pairs reduced to the largest value, the lowest index among equals.
__global__ void k_argmax(const __nv_bfloat16 *x, int64_t n, int32_t *ids) {
    const __nv_bfloat16 *row = x + blockIdx.x * n;
    float best = -INFINITY;
    int32_t bi = 0x7fffffff;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = __bfloat162float(row[i]);
        if (v > best) { best = v; bi = (int32_t)i; } // i grows per thread: the first of equals stays
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
    }
    __shared__ float sv[32];
    __shared__ int32_t si[32];
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) { sv[w] = best; si[w] = bi; }
    __syncthreads();
    if (w == 0) {
        int nw = blockDim.x / 32;
        best = l < nw ? sv[l] : -INFINITY;
        bi = l < nw ? si[l] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, o);
            int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
        }
        if (l == 0) ids[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
    }
}

__global__ void k_absmax(const __nv_bfloat16 *x, int64_t n, float *out) {
    float m = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(ld(x, i)));
    m = block_max(m);
    // non-negative floats order like their bit patterns
    if (threadIdx.x == 0) atomicMax((unsigned int *)out, __float_as_uint(m));
}

// ---- the paged KV cache ----------------------------------------------------------------------------------------

__device__ __forceinline__ float kv_qmax(cuda_kv_elem e) {
    return e == CUDA_KV_FP8_E4M3 ? 448.f : e == CUDA_KV_FP8_E5M2 ? 57344.f : e == CUDA_KV_INT8 ? 127.f : 1.f;
}

__device__ __forceinline__ void kv_put(void *base, int64_t i, cuda_kv_elem e, float x) {
    switch (e) {
    case CUDA_KV_BF16: ((__nv_bfloat16 *)base)[i] = __float2bfloat16_rn(x); break;
    case CUDA_KV_FP8_E4M3: ((__nv_fp8_storage_t *)base)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); break;
    case CUDA_KV_FP8_E5M2: ((__nv_fp8_storage_t *)base)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); break;
    case CUDA_KV_INT8: ((int8_t *)base)[i] = (int8_t)fminf(127.f, fmaxf(-127.f, rintf(x))); break;
    }
}

__device__ __forceinline__ float kv_get(const void *base, int64_t i, cuda_kv_elem e) {
    switch (e) {
    case CUDA_KV_BF16: return __bfloat162float(((const __nv_bfloat16 *)base)[i]);
    case CUDA_KV_FP8_E4M3: {
        __half_raw h = __nv_cvt_fp8_to_halfraw(((const __nv_fp8_storage_t *)base)[i], __NV_E4M3);
        return __half2float(__half(h));
    }
    case CUDA_KV_FP8_E5M2: {
        __half_raw h = __nv_cvt_fp8_to_halfraw(((const __nv_fp8_storage_t *)base)[i], __NV_E5M2);
        return __half2float(__half(h));
    }
    case CUDA_KV_INT8: return (float)((const int8_t *)base)[i];
    }
    return 0.f;
}

__device__ __forceinline__ int64_t k_index(int64_t slot, int64_t h, int64_t d, int64_t nkv, int64_t hd) {
    int64_t blk = slot / KV_BLOCK, off = slot % KV_BLOCK;
    return ((blk * nkv + h) * KV_BLOCK + off) * hd + d;
}
__device__ __forceinline__ int64_t v_index(int64_t slot, int64_t h, int64_t d, int64_t nkv, int64_t hd) {
    int64_t blk = slot / KV_BLOCK, off = slot % KV_BLOCK;
    return ((blk * nkv + h) * hd + d) * KV_BLOCK + off;
}
__device__ __forceinline__ int64_t scale_index(int64_t slot, int64_t h, int64_t nkv) {
    return ((slot / KV_BLOCK) * nkv + h) * KV_BLOCK + slot % KV_BLOCK;
}

__device__ __forceinline__ float kv_slot_scale(const cuda_kv_view &kv, int is_v, int64_t slot, int64_t h) {
    if (kv.elem == CUDA_KV_BF16) return 1.f;
    return (is_v ? kv.v_scale : kv.k_scale)[scale_index(slot, h, kv.n_head_kv)];
}

// One warp per (token, head, k|v).
__global__ void k_kv_store(cuda_kv_view kv, const __nv_bfloat16 *k, const __nv_bfloat16 *v, const int64_t *slots,
                           int64_t n_tok) {
    int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    int64_t nkv = kv.n_head_kv, hd = kv.head_dim;
    if (w >= n_tok * nkv * 2) return;
    int is_v = (int)(w % 2);
    int64_t h = (w / 2) % nkv, t = w / 2 / nkv;
    const __nv_bfloat16 *src = (is_v ? v : k) + t * nkv * hd + h * hd;
    int64_t slot = slots[t];
    if (slot < 0) return; // a padding row of a captured step
    float inv = 1.f;
    if (kv.elem != CUDA_KV_BF16) {
        float sc = is_v ? kv.v_static : kv.k_static;
        if (!(sc > 0)) {
            float amax = 0;
            for (int64_t d = lane; d < hd; d += 32) amax = fmaxf(amax, fabsf(__bfloat162float(src[d])));
            for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            sc = amax > 0 ? amax / kv_qmax(kv.elem) : 1.f;
        }
        if (lane == 0) (is_v ? kv.v_scale : kv.k_scale)[scale_index(slot, h, nkv)] = sc;
        inv = 1.f / sc;
    }
    void *dst = is_v ? kv.v : kv.k;
    for (int64_t d = lane; d < hd; d += 32) {
        float x = __bfloat162float(src[d]);
        if (kv.elem != CUDA_KV_BF16) x *= inv;
        kv_put(dst, is_v ? v_index(slot, h, d, nkv, hd) : k_index(slot, h, d, nkv, hd), kv.elem, x);
    }
}

// One warp per (block, head, slot, k|v).
__global__ void k_kv_requantize(cuda_kv_view kv, int64_t n_slots) {
    int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    int64_t nkv = kv.n_head_kv, hd = kv.head_dim;
    if (w >= n_slots * nkv * 2) return;
    int is_v = (int)(w % 2);
    int64_t h = (w / 2) % nkv, slot = w / 2 / nkv;
    float *sp = (is_v ? kv.v_scale : kv.k_scale) + scale_index(slot, h, nkv);
    float old = *sp, now = is_v ? kv.v_static : kv.k_static;
    if (old == now || !(old > 0)) return;
    void *base = is_v ? kv.v : kv.k;
    for (int64_t d = lane; d < hd; d += 32) {
        int64_t i = is_v ? v_index(slot, h, d, nkv, hd) : k_index(slot, h, d, nkv, hd);
        kv_put(base, i, kv.elem, kv_get(base, i, kv.elem) * old / now);
    }
    __syncwarp();
    if (lane == 0) *sp = now;
}

__global__ void k_kv_gather(cuda_kv_view kv, const int64_t *slots, int64_t n_rows, __nv_bfloat16 *k, __nv_bfloat16 *v) {
    int64_t nkv = kv.n_head_kv, hd = kv.head_dim, width = nkv * hd;
    int64_t r = blockIdx.x;
    int64_t slot = slots[r];
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
        int64_t h = j / hd, d = j % hd;
        k[r * width + j] = __float2bfloat16_rn(kv_get(kv.k, k_index(slot, h, d, nkv, hd), kv.elem) * kv_slot_scale(kv, 0, slot, h));
        v[r * width + j] = __float2bfloat16_rn(kv_get(kv.v, v_index(slot, h, d, nkv, hd), kv.elem) * kv_slot_scale(kv, 1, slot, h));
    }
}

// Reference attention: one warp per (token, head), an online softmax over the keys, head_dim <= 256.
__global__ void k_attention_ref(cuda_attn_ref_args a, cuda_kv_view kv) {
    int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (w >= a.n_tok * a.n_head) return;
    int64_t t = w / a.n_head, h = w % a.n_head;
    int64_t nkv = kv.n_head_kv, hd = kv.head_dim, hk = h / (a.n_head / nkv);
    const __nv_bfloat16 *q = (const __nv_bfloat16 *)a.q + (t * a.n_head + h) * hd;
    float qv[8], acc[8];
    int nd = (int)((hd + 31) / 32);
    for (int i = 0; i < nd; i++) {
        int64_t d = lane + 32 * i;
        qv[i] = d < hd ? __bfloat162float(q[d]) : 0.f;
        acc[i] = 0.f;
    }
    int64_t p = a.pos[t];
    int64_t lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    const int32_t *table = a.tables + (int64_t)a.seq_of_tok[t] * a.table_stride;
    float m = -INFINITY, l = 0.f;
    for (int64_t j = lo; j <= p; j++) {
        int64_t slot = (int64_t)table[j / KV_BLOCK] * KV_BLOCK + j % KV_BLOCK;
        float ks = kv_slot_scale(kv, 0, slot, hk), vs = kv_slot_scale(kv, 1, slot, hk);
        float dot = 0.f;
        for (int i = 0; i < nd; i++) {
            int64_t d = lane + 32 * i;
            if (d < hd) dot += qv[i] * kv_get(kv.k, k_index(slot, hk, d, nkv, hd), kv.elem);
        }
        for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        float s = dot * ks * a.scale;
        if (a.softcap > 0) s = a.softcap * tanhf(s / a.softcap);
        float mn = fmaxf(m, s), corr = expf(m - mn), e = expf(s - mn);
        l = l * corr + e;
        for (int i = 0; i < nd; i++) {
            int64_t d = lane + 32 * i;
            float vv = d < hd ? kv_get(kv.v, v_index(slot, hk, d, nkv, hd), kv.elem) * vs : 0.f;
            acc[i] = acc[i] * corr + e * vv;
        }
        m = mn;
    }
    __nv_bfloat16 *o = (__nv_bfloat16 *)a.out + (t * a.n_head + h) * hd;
    float inv = l > 0 ? 1.f / l : 0.f;
    for (int i = 0; i < nd; i++) {
        int64_t d = lane + 32 * i;
        if (d < hd) o[d] = __float2bfloat16_rn(acc[i] * inv);
    }
}

// A dummy weight's bf16 matrix, element i = the seeded value of (seed, i) (dummy_weights.h: the same hash and float
// arithmetic as the host), rounded to bf16 directly, or first to f16 and back when the checkpoint's dtype is f16 (the
// bf16 the upload of an f16 weight would give).
__global__ void k_dummy_fill(__nv_bfloat16 *w, int64_t n, uint64_t seed, float range, int via_f16) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = assay_dummy_value(seed, (uint64_t)i, range);
        if (via_f16) v = __half2float(__float2half_rn(v));
        w[i] = __float2bfloat16_rn(v);
    }
}

} // namespace

#define BF(p) ((__nv_bfloat16 *)(p))
#define CBF(p) ((const __nv_bfloat16 *)(p))
#define FLAT(n) grid_for((n), 256), 256, 0, st

extern "C" {

int cuda_op_f32_to_bf16(const float *x, void *y, int64_t n, assay_cuda_stream st) {
    if (n <= 0) return 0;
    k_f32_to_bf16<<<FLAT(n)>>>(x, BF(y), n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_dummy_fill(void *w, int64_t n, uint64_t seed, float range, int via_f16, assay_cuda_stream st) {
    if (n <= 0) return 0;
    k_dummy_fill<<<FLAT(n)>>>(BF(w), n, seed, range, via_f16);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_bf16_to_f32(const void *x, float *y, int64_t n, assay_cuda_stream st) {
    if (n <= 0) return 0;
    k_bf16_to_f32<<<FLAT(n)>>>(CBF(x), y, n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_rmsnorm(void *y, const void *x, const float *gamma, int64_t n, int64_t rows, float eps, assay_cuda_stream st) {
    if (rows <= 0) return 0;
    k_rmsnorm<<<(unsigned)rows, row_threads(n), 0, st>>>(BF(y), BF(x), nullptr, gamma, n, eps);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_add_rmsnorm(void *y, void *x, const void *h, const float *gamma, int64_t n, int64_t rows, float eps,
                        assay_cuda_stream st) {
    if (rows <= 0) return 0;
    k_rmsnorm<<<(unsigned)rows, row_threads(n), 0, st>>>(BF(y), BF(x), CBF(h), gamma, n, eps);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_rope(void *x, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t row_stride, const int32_t *pos,
                 int neox, int64_t n_rot, const float *inv_freq, assay_cuda_stream st) {
    if (n_tok <= 0) return 0;
    k_rope<<<(unsigned)n_tok, 256, 0, st>>>(BF(x), n_head, head_dim, row_stride, pos, neox, n_rot / 2, inv_freq);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_glu(void *out, const void *gate, const void *up, int64_t n, int64_t rows, int64_t stride, int gelu,
                assay_cuda_stream st) {
    if (n * rows <= 0) return 0;
    k_glu<<<FLAT(n * rows)>>>(BF(out), CBF(gate), CBF(up), n, rows, stride, gelu);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_add(void *y, const void *a, const void *b, int64_t n, assay_cuda_stream st) {
    if (n <= 0) return 0;
    k_add<<<FLAT(n)>>>(BF(y), CBF(a), CBF(b), n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_scale(void *y, float s, int64_t n, assay_cuda_stream st) {
    if (n <= 0) return 0;
    k_scale<<<FLAT(n)>>>(BF(y), s, n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_tanh_cap(void *x, int64_t n, float cap, assay_cuda_stream st) {
    if (n <= 0) return 0;
    k_tanh_cap<<<FLAT(n)>>>(BF(x), cap, n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_softmax(void *x, int64_t n, int64_t rows, float softcap, assay_cuda_stream st) {
    if (rows <= 0) return 0;
    k_softmax<<<(unsigned)rows, row_threads(n), 0, st>>>(BF(x), n, softcap);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_get_rows(void *y, const void *w, const int32_t *ids, int64_t n_ids, int64_t width, assay_cuda_stream st) {
    return cuda_op_gather_rows(y, w, ids, n_ids, width, st);
}
int cuda_op_gather_rows(void *dst, const void *src, const int32_t *rows, int64_t n_rows, int64_t width,
                        assay_cuda_stream st) {
    if (n_rows <= 0) return 0;
    k_gather_rows<<<(unsigned)n_rows, 256, 0, st>>>(BF(dst), CBF(src), rows, width);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_scatter_rows(void *dst, const void *src, const int32_t *rows, int64_t n_rows, int64_t width,
                         assay_cuda_stream st) {
    if (n_rows <= 0) return 0;
    k_scatter_rows<<<(unsigned)n_rows, 256, 0, st>>>(BF(dst), CBF(src), rows, width);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_gather_cols(void *y, const void *x, const int32_t *perm, int64_t n_tok, int64_t n, assay_cuda_stream st) {
    if (n_tok <= 0) return 0;
    k_gather_cols<<<(unsigned)n_tok, 256, 0, st>>>(BF(y), CBF(x), perm, n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_add_bias(void *y, const float *bias, int64_t n_tok, int64_t n, assay_cuda_stream st) {
    if (n_tok * n <= 0) return 0;
    k_add_bias<<<FLAT(n_tok * n)>>>(BF(y), bias, n_tok, n);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_argmax(const void *x, int64_t n, int64_t rows, int32_t *ids, assay_cuda_stream st) {
    if (rows <= 0) return 0;
    k_argmax<<<(unsigned)rows, 1024, 0, st>>>(CBF(x), n, ids);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_absmax(const void *x, int64_t n, float *out, assay_cuda_stream st) {
    ASSAY_CUDA_TRY(cudaMemsetAsync(out, 0, sizeof(float), st));
    if (n <= 0) return 0;
    k_absmax<<<grid_for(n, 256 * 8) > 1024 ? 1024 : grid_for(n, 256 * 8), 256, 0, st>>>(CBF(x), n, out);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

int cuda_op_kv_store(const cuda_kv_view *kv, const void *k, const void *v, const int64_t *slot, int64_t n_tok,
                     assay_cuda_stream st) {
    if (n_tok <= 0) return 0;
    int64_t warps = n_tok * kv->n_head_kv * 2;
    k_kv_store<<<grid_for(warps * 32, 256), 256, 0, st>>>(*kv, CBF(k), CBF(v), slot, n_tok);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_kv_requantize(const cuda_kv_view *kv, int64_t n_blocks, assay_cuda_stream st) {
    if (kv->elem == CUDA_KV_BF16 || !(kv->k_static > 0 && kv->v_static > 0) || n_blocks <= 0) return 0;
    int64_t warps = n_blocks * KV_BLOCK * kv->n_head_kv * 2;
    k_kv_requantize<<<grid_for(warps * 32, 256), 256, 0, st>>>(*kv, n_blocks * KV_BLOCK);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_kv_gather(const cuda_kv_view *kv, const int64_t *slot, int64_t n_rows, void *k, void *v,
                      assay_cuda_stream st) {
    if (n_rows <= 0) return 0;
    k_kv_gather<<<(unsigned)n_rows, 256, 0, st>>>(*kv, slot, n_rows, BF(k), BF(v));
    ASSAY_CUDA_LAUNCHED();
    return 0;
}
int cuda_op_attention_ref(const cuda_attn_ref_args *a, const cuda_kv_view *kv, assay_cuda_stream st) {
    if (kv->head_dim > 256) return assay_cuda_fail("reference attention: head_dim %d > 256", kv->head_dim);
    if (a->n_tok <= 0) return 0;
    int64_t warps = a->n_tok * a->n_head;
    k_attention_ref<<<grid_for(warps * 32, 128), 128, 0, st>>>(*a, *kv);
    ASSAY_CUDA_LAUNCHED();
    return 0;
}

} // extern "C"

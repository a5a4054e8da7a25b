// Large GEMMs through cuBLASLt: bf16, and FP8 E4M3 with per-tensor, per-token x per-channel, or DeepSeek-style
// block scales (1x128 activation groups, 128x128 weight blocks). Host code only: the kernels are NVIDIA's.
//
// Why cuBLASLt and not our own kernels here: at prefill shapes (M in the thousands) the product is compute-bound
// and cuBLASLt's Hopper kernels (TMA + wgmma, tuned tile shapes) sit at 75-85% of peak; our own kernels are for
// the decode shapes (M <= 64), where the weights' bytes bound the time (gemm_decode*.cu).
//
// Layout mapping. assay computes Y[m][n] = sum_k X[m][k] W[n][k] with every matrix row-major. cuBLASLt is
// column-major, so we ask it for Y^T (N x M, column-major = Y row-major) = W * X^T with
//   A = W   : stored K x N column-major (W row-major [N][K]), op T  -> N x K
//   B = X^T : stored K x M column-major (X row-major [M][K]), op N  -> K x M
// This "TN" form is also the only one Hopper's FP8 GEMMs accept. The scale vectors follow: A's scales belong to
// the weights (per output channel n, or 128x128 blocks), B's to the activations (per token m, or 1x128 groups).
#include <cublasLt.h>

#include "common.cuh"

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt's heuristics assume for their best Hopper kernels
constexpr int kPlanSlots = 32;

// One cached plan per (kind, scaling, m, n, k): building descriptors and running the heuristic costs tens of
// microseconds of CPU, which a decode step cannot afford per call.
struct Plan {
    int used;
    int kind;  // 0 bf16, 1 fp8
    int scaling;
    int32_t m, n, k;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    uint64_t last_use;
};

}  // namespace

struct assay_cuda_blas {
    cublasLtHandle_t lt;
    void *workspace;
    Plan plans[kPlanSlots];
    uint64_t clock;
};

static int lt_fail(const char *what, cublasStatus_t s) {
    return assay_cuda_fail("cuBLASLt %s failed: status %d", what, (int)s);
}

#define LT_TRY(what, expr)                                    \
    do {                                                      \
        cublasStatus_t s_ = (expr);                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) return lt_fail(what, s_); \
    } while (0)

static void plan_free(Plan *p) {
    if (!p->used) return;
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->d);
    cublasLtMatmulDescDestroy(p->desc);
    p->used = 0;
}

extern "C" int assay_cuda_blas_open(assay_cuda_blas **out) {
    *out = nullptr;
    assay_cuda_blas *b = (assay_cuda_blas *)calloc(1, sizeof *b);
    if (!b) return assay_cuda_fail("out of host memory");
    cublasStatus_t s = cublasLtCreate(&b->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return lt_fail("create", s);
    }
    if (cudaMalloc(&b->workspace, kWorkspaceBytes) != cudaSuccess) {
        cublasLtDestroy(b->lt);
        free(b);
        return assay_cuda_fail("cudaMalloc of the %zu-byte cuBLASLt workspace failed", kWorkspaceBytes);
    }
    *out = b;
    return 0;
}

extern "C" void assay_cuda_blas_close(assay_cuda_blas *b) {
    if (!b) return;
    for (int i = 0; i < kPlanSlots; ++i) plan_free(&b->plans[i]);
    cudaFree(b->workspace);
    cublasLtDestroy(b->lt);
    free(b);
}

// Scale modes of (A = weights, B = activations), indexed by assay_cuda_fp8_scaling; a table, so a new recipe is
// one row. (C++ has no array designators: the order is the enum's, checked below.)
struct ScalingRow {
    assay_cuda_fp8_scaling scaling;
    cublasLtMatmulMatrixScale_t a_mode, b_mode;
    const char *name;
};
static const ScalingRow kScalings[] = {
    {ASSAY_CUDA_FP8_PER_TENSOR, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
     "per-tensor"},
    {ASSAY_CUDA_FP8_PER_TOKEN_CHANNEL, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, "per-token x per-channel"},
    {ASSAY_CUDA_FP8_BLOCK_128, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
     "1x128 x 128x128 blocks"},
};
static_assert(sizeof kScalings / sizeof kScalings[0] == ASSAY_CUDA_FP8_SCALING_COUNT, "one row per scaling");

// The scale pointers of the first call go on the descriptor before the heuristic runs: for the vector and block
// scalings cuBLASLt's heuristic returns CUBLAS_STATUS_INVALID_VALUE while they are null.
static int plan_build(assay_cuda_blas *b, Plan *p, int kind, int scaling, int32_t m, int32_t n, int32_t k,
                      const float *w_scale, const float *x_scale) {
    const cudaDataType_t in_t = kind ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    LT_TRY("matmul descriptor", cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    LT_TRY("transa", cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    LT_TRY("transb", cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    if (kind) {
        const ScalingRow *r = &kScalings[scaling];
        LT_TRY("A scale mode",
               cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &r->a_mode, sizeof r->a_mode));
        LT_TRY("B scale mode",
               cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &r->b_mode, sizeof r->b_mode));
        LT_TRY("A scale", cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                                         sizeof w_scale));
        LT_TRY("B scale", cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                                         sizeof x_scale));
    }
    LT_TRY("A layout", cublasLtMatrixLayoutCreate(&p->a, in_t, k, n, k));
    LT_TRY("B layout", cublasLtMatrixLayoutCreate(&p->b, in_t, k, m, k));
    LT_TRY("D layout", cublasLtMatrixLayoutCreate(&p->d, CUDA_R_16BF, n, m, n));

    cublasLtMatmulPreference_t pref;
    LT_TRY("preference", cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(b->lt, p->desc, p->a, p->b, p->d, p->d, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->d);
        cublasLtMatmulDescDestroy(p->desc);
        return assay_cuda_fail("cuBLASLt has no %s GEMM for m %d n %d k %d%s%s (status %d)", kind ? "fp8 e4m3" : "bf16",
                               m, n, k, kind ? " with scaling " : "", kind ? kScalings[scaling].name : "", (int)s);
    }
    p->algo = h.algo;
    p->kind = kind;
    p->scaling = scaling;
    p->m = m;
    p->n = n;
    p->k = k;
    p->used = 1;
    return 0;
}

static int plan_get(assay_cuda_blas *b, int kind, int scaling, int32_t m, int32_t n, int32_t k, const float *w_scale,
                    const float *x_scale, Plan **out) {
    Plan *victim = &b->plans[0];
    for (int i = 0; i < kPlanSlots; ++i) {
        Plan *p = &b->plans[i];
        if (p->used && p->kind == kind && p->scaling == scaling && p->m == m && p->n == n && p->k == k) {
            p->last_use = ++b->clock;
            *out = p;
            return 0;
        }
        if (!p->used || (victim->used && p->last_use < victim->last_use)) victim = p;
    }
    plan_free(victim);
    if (plan_build(b, victim, kind, scaling, m, n, k, w_scale, x_scale) != 0) return -1;
    victim->last_use = ++b->clock;
    *out = victim;
    return 0;
}

static int check_shape(int32_t m, int32_t n, int32_t k, int fp8) {
    if (m <= 0 || n <= 0 || k <= 0) return assay_cuda_fail("GEMM shape m %d n %d k %d: all must be positive", m, n, k);
    // cuBLASLt's FP8 kernels need 16-byte aligned leading dimensions; bf16 needs 8 elements for its fast paths.
    if (fp8 && (k % 16 || n % 16))
        return assay_cuda_fail("fp8 GEMM: k (%d) and n (%d) must be multiples of 16", k, n);
    if (!fp8 && (k % 8 || n % 8)) return assay_cuda_fail("bf16 GEMM: k (%d) and n (%d) must be multiples of 8", k, n);
    return 0;
}

static int run_plan(assay_cuda_blas *b, Plan *p, const void *w, const void *x, void *y, assay_cuda_stream stream) {
    const float one = 1.0f, zero = 0.0f;
    LT_TRY("matmul", cublasLtMatmul(b->lt, p->desc, &one, w, p->a, x, p->b, &zero, y, p->d, y, p->d, &p->algo,
                                    b->workspace, kWorkspaceBytes, (cudaStream_t)stream));
    return 0;
}

extern "C" int assay_cuda_blas_gemm_bf16(assay_cuda_blas *b, const void *x_bf16, const void *w_bf16, void *y_bf16,
                                         int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if (check_shape(m, n, k, 0) != 0) return -1;
    Plan *p;
    if (plan_get(b, 0, 0, m, n, k, nullptr, nullptr, &p) != 0) return -1;
    return run_plan(b, p, w_bf16, x_bf16, y_bf16, stream);
}

extern "C" int assay_cuda_blas_gemm_fp8(assay_cuda_blas *b, const uint8_t *x_e4m3, const float *x_scale,
                                        const uint8_t *w_e4m3, const float *w_scale, assay_cuda_fp8_scaling scaling,
                                        void *y_bf16, int32_t m, int32_t n, int32_t k, assay_cuda_stream stream) {
    if ((unsigned)scaling >= sizeof kScalings / sizeof kScalings[0])
        return assay_cuda_fail("fp8 GEMM: unknown scaling %d", (int)scaling);
    if (check_shape(m, n, k, 1) != 0) return -1;
    // Block scales: cuBLASLt wants 16-byte aligned scale rows. The activation scales [k/128][m] therefore need
    // m % 4 == 0 (it refuses m = 137 with CUBLAS_STATUS_NOT_SUPPORTED), and the weight scales are stored with a
    // row stride rounded up to 4 floats (assay_cuda_blas_block_scale_stride).
    if (scaling == ASSAY_CUDA_FP8_BLOCK_128 && (k % 128 || n % 128 || m % 4))
        return assay_cuda_fail("fp8 GEMM with 128-blocks: k (%d) and n (%d) must be multiples of 128 and m (%d) of 4", k,
                               n, m);
    if (!x_scale || !w_scale) return assay_cuda_fail("fp8 GEMM: both scale pointers are required");
    Plan *p;
    if (plan_get(b, 1, (int)scaling, m, n, k, w_scale, x_scale, &p) != 0) return -1;
    // The scale pointers change per call (per layer), so they are set on the cached descriptor each time.
    LT_TRY("A scale", cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                                     sizeof w_scale));
    LT_TRY("B scale", cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                                     sizeof x_scale));
    return run_plan(b, p, w_e4m3, x_e4m3, y_bf16, stream);
}

extern "C" int32_t assay_cuda_blas_block_scale_stride(int32_t k) { return (k / 128 + 3) / 4 * 4; }

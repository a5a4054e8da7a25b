/* int_quant.c — INT4 RTN / GPTQ / AWQ and INT8 SmoothQuant on one linear layer at a time, plus the GPTQ and AWQ
 * checkpoint packers. The algorithms follow the reference implementations described in
 * ../shared/research/quant.md (IST-DASLab gptq.py, mit-han-lab llm-awq, mit-han-lab smoothquant); the model-level
 * drivers (which layers, calibration passes, folding scales into norms) live with the quantize command.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/backend.h"
#include "assay/dtype.h"
#include "assay/int_quant.h"
#include "assay/status.h"

assay_int4_params assay_int4_params_default(void) {
    assay_int4_params p = {.bits = 4, .group_size = 128, .sym = 0, .act_order = 0, .damp = 0.01, .block = 128,
                           .awq_range = 0};
    return p;
}

void assay_int4_result_free(assay_int4_result *r) {
    if (!r) return;
    free(r->q);
    free(r->scales);
    free(r->zeros);
    free(r->g_idx);
    memset(r, 0, sizeof *r);
}

/* fp16-representable value nearest to x (scales are stored as fp16 in every checkpoint format here) */
static float iq_fp16_round(float x) { return assay_f16_to_f32(assay_f32_to_f16(x)); }

/* torch.round: half to even (default FP environment) */
static inline float iq_rne(float x) { return nearbyintf(x); }

static inline int iq_code(float w, float scale, int zero, int maxq) {
    int q = (int)iq_rne(w / scale) + zero;
    return q < 0 ? 0 : (q > maxq ? maxq : q);
}

/* Group parameters from n values (stride apart). GPTQ's quantizer: the range is widened to contain 0 (AWQ's
 * pseudo_quantize_tensor does not: zero_in_range = 0), sym uses [-amax, amax] with zero at the middle code. */
static void iq_find_params(const float *x, int64_t n, int64_t stride, int maxq, int sym, int zero_in_range,
                           float *scale, int *zero) {
    float xmin = x[0], xmax = x[0];
    for (int64_t i = 1; i < n; i++) {
        float v = x[i * stride];
        if (v < xmin) xmin = v;
        if (v > xmax) xmax = v;
    }
    if (zero_in_range || sym) {
        if (xmin > 0) xmin = 0;
        if (xmax < 0) xmax = 0;
    }
    if (sym) {
        float a = fabsf(xmin) > xmax ? fabsf(xmin) : xmax;
        xmax = a;
        if (xmin < 0) xmin = -a;
    }
    if (xmin == 0 && xmax == 0) {
        xmin = -1;
        xmax = 1;
    }
    float range = xmax - xmin;
    if (!zero_in_range && range < 1e-5f) range = 1e-5f; /* AWQ clamps the range (max - min) at 1e-5 */
    float s = range / maxq;
    s = iq_fp16_round(s);
    if (s == 0) s = 6.0e-8f; /* below fp16's smallest subnormal: keep a usable scale */
    *scale = s;
    if (sym) *zero = (maxq + 1) / 2;
    else {
        int z = (int)iq_rne(-xmin / s);
        *zero = z < 0 ? 0 : (z > maxq ? maxq : z);
    }
}

/* GPTQ's quantizer with mse: the range [p·min, p·max] (0 kept in it) for p = 1, 0.99, ..., 0.21 that minimises
 * Σ |Q(x) − x|^2.4 over the group (grid 100, max shrink 0.8, norm 2.4 as in gptq's quant.py); ties keep the wider
 * range. Asymmetric only. */
static void iq_find_params_mse(const float *x, int64_t n, int maxq, float *scale, int *zero) {
    float xmin = x[0], xmax = x[0];
    for (int64_t i = 1; i < n; i++) {
        xmin = x[i] < xmin ? x[i] : xmin;
        xmax = x[i] > xmax ? x[i] : xmax;
    }
    if (xmin > 0) xmin = 0;
    if (xmax < 0) xmax = 0;
    if (xmin == 0 && xmax == 0) {
        iq_find_params(x, n, 1, maxq, 0, 1, scale, zero);
        return;
    }
    double best = INFINITY;
    for (int i = 0; i < 80; i++) {
        float pr = 1.0f - (float)i / 100.0f;
        float lo = pr * xmin, hi = pr * xmax;
        float s = iq_fp16_round((hi - lo) / maxq);
        if (s == 0) continue;
        int z = (int)iq_rne(-lo / s);
        z = z < 0 ? 0 : (z > maxq ? maxq : z);
        double err = 0;
        for (int64_t k = 0; k < n; k++) {
            double d = fabs((double)s * (iq_code(x[k], s, z, maxq) - z) - x[k]);
            err += pow(d, 2.4);
        }
        if (err < best) {
            best = err;
            *scale = s;
            *zero = z;
        }
    }
}

static assay_status iq_alloc(assay_int4_result *r, int64_t n_out, int64_t n_in, const assay_int4_params *p) {
    memset(r, 0, sizeof *r);
    if (p->bits < 2 || p->bits > 8) return assay_fail(ASSAY_ERR_ARG, "int quantization: %d bits is not supported", p->bits);
    int64_t gs = p->group_size <= 0 ? n_in : p->group_size;
    if (n_in % gs)
        return assay_fail(ASSAY_ERR_ARG, "input size %lld is not a multiple of the group size %lld", (long long)n_in,
                          (long long)gs);
    r->n_out = n_out;
    r->n_in = n_in;
    r->group_size = gs;
    r->n_groups = n_in / gs;
    r->bits = p->bits;
    r->q = assay_xmalloc((size_t)(n_out * n_in));
    r->scales = assay_xmalloc(sizeof(float) * (size_t)(n_out * r->n_groups));
    r->zeros = assay_xmalloc(sizeof(int32_t) * (size_t)(n_out * r->n_groups));
    r->g_idx = assay_xmalloc(sizeof(int32_t) * (size_t)n_in);
    for (int64_t i = 0; i < n_in; i++) r->g_idx[i] = (int32_t)(i / gs);
    return ASSAY_OK;
}

void assay_int4_dequantize(const assay_int4_result *r, float *w_hat) {
    for (int64_t o = 0; o < r->n_out; o++)
        for (int64_t i = 0; i < r->n_in; i++) {
            int64_t g = o * r->n_groups + r->g_idx[i];
            w_hat[o * r->n_in + i] = r->scales[g] * (float)(r->q[o * r->n_in + i] - r->zeros[g]);
        }
}

static void iq_rtn_into(const float *w, assay_int4_result *r, int sym, int zero_in_range) {
    int maxq = (1 << r->bits) - 1;
    int64_t gs = r->group_size;
    for (int64_t o = 0; o < r->n_out; o++)
        for (int64_t g = 0; g < r->n_groups; g++) {
            const float *x = w + o * r->n_in + g * gs;
            float s;
            int z;
            iq_find_params(x, gs, 1, maxq, sym, zero_in_range, &s, &z);
            r->scales[o * r->n_groups + g] = s;
            r->zeros[o * r->n_groups + g] = z;
            for (int64_t i = 0; i < gs; i++) r->q[o * r->n_in + g * gs + i] = (uint8_t)iq_code(x[i], s, z, maxq);
        }
}

assay_status assay_int4_rtn(const float *w, int64_t n_out, int64_t n_in, const assay_int4_params *p,
                            assay_int4_result *out) {
    assay_status st = iq_alloc(out, n_out, n_in, p);
    if (st != ASSAY_OK) return st;
    iq_rtn_into(w, out, p->sym && !p->awq_range, !p->awq_range);
    return ASSAY_OK;
}

void assay_gram_accumulate(double *h, const float *x, int64_t n_tok, int64_t n_in) {
    for (int64_t t = 0; t < n_tok; t++) {
        const float *xt = x + t * n_in;
        for (int64_t i = 0; i < n_in; i++) {
            double xi = xt[i];
            if (xi == 0) continue;
            double *hi = h + i * n_in;
            for (int64_t j = 0; j <= i; j++) hi[j] += xi * xt[j];
        }
    }
    for (int64_t i = 0; i < n_in; i++)
        for (int64_t j = i + 1; j < n_in; j++) h[i * n_in + j] = h[j * n_in + i];
}

/* In-place lower Cholesky of a [n][n] SPD matrix; returns 0 when it is not positive definite. */
static int iq_cholesky(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int64_t k = 0; k < j; k++) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0)) return 0;
        d = sqrt(d);
        a[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            const double *ai = a + i * n, *aj = a + j * n;
            for (int64_t k = 0; k < j; k++) s -= ai[k] * aj[k];
            a[i * n + j] = s / d;
        }
        for (int64_t k = j + 1; k < n; k++) a[j * n + k] = 0;
    }
    return 1;
}

/* U upper with Uᵀ·U = H⁻¹, from the lower Cholesky factor L of H (H = L·Lᵀ): H⁻¹ = L⁻ᵀ·L⁻¹, then factor again.
 * This is GPTQ's cholesky_inverse followed by cholesky(upper=True). Returns 0 on failure. */
static int iq_upper_chol_of_inverse(double *L, int64_t n, double *U) {
    /* Linv (lower) in U's storage */
    double *Li = U;
    memset(Li, 0, sizeof(double) * (size_t)(n * n));
    for (int64_t j = 0; j < n; j++) {
        Li[j * n + j] = 1.0 / L[j * n + j];
        for (int64_t i = j + 1; i < n; i++) {
            double s = 0;
            for (int64_t k = j; k < i; k++) s -= L[i * n + k] * Li[k * n + j];
            Li[i * n + j] = s / L[i * n + i];
        }
    }
    /* Hinv = Liᵀ·Li into L's storage (L is no longer needed) */
    double *Hi = L;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double s = 0;
            for (int64_t k = i; k < n; k++) s += Li[k * n + i] * Li[k * n + j]; /* Li[k][j] = 0 for k < j <= i */
            Hi[i * n + j] = s;
            Hi[j * n + i] = s;
        }
    if (!iq_cholesky(Hi, n)) return 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) U[i * n + j] = j >= i ? Hi[j * n + i] : 0.0;
    return 1;
}

static const double *iq_sort_diag;
static int iq_cmp_desc(const void *a, const void *b) {
    double x = iq_sort_diag[*(const int64_t *)a], y = iq_sort_diag[*(const int64_t *)b];
    if (x > y) return -1;
    if (x < y) return 1;
    return *(const int64_t *)a < *(const int64_t *)b ? -1 : 1; /* stable on ties */
}

static int iq_threads(void);

typedef struct {
    double *W;
    const double *U;
    const int64_t *perm;
    assay_int4_result *out;
    int64_t r0, r1, n, n_in, gs, B;
    int maxq, sym, mse;
} iq_gptq_job;

/* GPTQ's column loop for rows [r0, r1): quantize a column, spread its error over the rest of the block through
 * U's row, then apply the block's errors to the later columns at once (lazy batch). */
static void *iq_gptq_worker(void *arg) {
    iq_gptq_job *j = arg;
    double *W = j->W;
    const double *U = j->U;
    const int64_t *perm = j->perm;
    assay_int4_result *out = j->out;
    int64_t n = j->n, n_in = j->n_in, gs = j->gs, B = j->B, n_out = j->r1;
    int maxq = j->maxq;
    struct { int sym; } pp = {j->sym}, *p = &pp;
    double *E = assay_xmalloc(sizeof(double) * (size_t)(n_out * B));
    float *cur_s = assay_xmalloc(sizeof(float) * (size_t)n_out);
    int *cur_z = assay_xmalloc(sizeof(int) * (size_t)n_out);
    float *col = assay_xmalloc(sizeof(float) * (size_t)(n_out * gs));
    float *snap = assay_xmalloc(sizeof(float) * (size_t)(n_out * (B + gs)));
    for (int64_t i1 = 0; i1 < n; i1 += B) {
        int64_t i2 = i1 + B < n ? i1 + B : n;
        /* gptq.py takes group parameters from W as it stands when the block starts (earlier blocks' updates in,
         * this block's not): keep that state of every column a group starting here can reach */
        int64_t s_end = i2 + gs - 1 < n ? i2 + gs - 1 : n, sw = s_end - i1;
        for (int64_t o = j->r0; o < j->r1; o++)
            for (int64_t k = 0; k < sw; k++) snap[o * sw + k] = (float)W[o * n + i1 + k];
        for (int64_t c = i1; c < i2; c++) {
            if (c % gs == 0) {
                int64_t g = c / gs;
                for (int64_t o = j->r0; o < j->r1; o++) {
                    for (int64_t k = 0; k < gs; k++) col[o * gs + k] = snap[o * sw + (c - i1) + k];
                    if (j->mse && !p->sym) iq_find_params_mse(col + o * gs, gs, maxq, &cur_s[o], &cur_z[o]);
                    else iq_find_params(col + o * gs, gs, 1, maxq, p->sym, 1, &cur_s[o], &cur_z[o]);
                    out->scales[o * out->n_groups + g] = cur_s[o];
                    out->zeros[o * out->n_groups + g] = cur_z[o];
                }
            }
            double d = U[c * n + c];
            for (int64_t o = j->r0; o < j->r1; o++) {
                double wv = W[o * n + c];
                int q = iq_code((float)wv, cur_s[o], cur_z[o], maxq);
                out->q[o * n_in + perm[c]] = (uint8_t)q;
                double qv = (double)cur_s[o] * (q - cur_z[o]);
                double err = (wv - qv) / d;
                double *wr = W + o * n;
                const double *ur = U + c * n;
                for (int64_t j = c + 1; j < i2; j++) wr[j] -= err * ur[j];
                E[o * B + (c - i1)] = err;
            }
        }
        /* lazy batch update of the columns after this block */
        for (int64_t o = j->r0; o < j->r1; o++) {
            double *wr = W + o * n;
            for (int64_t k = 0; k < i2 - i1; k++) {
                double e = E[o * B + k];
                if (e == 0) continue;
                const double *ur = U + (i1 + k) * n;
                for (int64_t j = i2; j < n; j++) wr[j] -= e * ur[j];
            }
        }
    }
    free(E);
    free(cur_s);
    free(cur_z);
    free(col);
    free(snap);
    return NULL;
}

assay_status assay_int4_gptq(const float *w, int64_t n_out, int64_t n_in, const double *h_in,
                             const assay_int4_params *p, assay_int4_result *out) {
    assay_status st = iq_alloc(out, n_out, n_in, p);
    if (st != ASSAY_OK) return st;
    out->act_order = p->act_order;
    int maxq = (1 << p->bits) - 1;
    int64_t n = n_in, gs = out->group_size, B = p->block > 0 ? p->block : 128;
    double *H = assay_xmalloc(sizeof(double) * (size_t)(n * n));
    double *U = assay_xmalloc(sizeof(double) * (size_t)(n * n));
    double *W = assay_xmalloc(sizeof(double) * (size_t)(n_out * n));
    double *diag = assay_xmalloc(sizeof(double) * (size_t)n);
    int64_t *perm = assay_xmalloc(sizeof(int64_t) * (size_t)n);

    for (int64_t i = 0; i < n; i++) diag[i] = h_in[i * n + i];
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (p->act_order) {
        iq_sort_diag = diag;
        qsort(perm, (size_t)n, sizeof(int64_t), iq_cmp_desc);
    }
    /* permuted copies; dead inputs (no activation energy) get H_ii = 1 and zero weights */
    for (int64_t a = 0; a < n; a++) {
        int64_t pa = perm[a];
        int dead = diag[pa] == 0;
        for (int64_t b = 0; b < n; b++) H[a * n + b] = h_in[pa * n + perm[b]];
        if (dead) H[a * n + a] = 1;
        for (int64_t o = 0; o < n_out; o++) W[o * n + a] = dead ? 0.0 : w[o * n_in + pa];
    }
    double mean_diag = 0;
    for (int64_t a = 0; a < n; a++) mean_diag += H[a * n + a];
    mean_diag /= (double)n;
    /* dampening, raised stepwise when the factorisation fails (GPTQModel's damp_auto_increment) */
    int ok = 0;
    double damp = p->damp;
    double *Hd = assay_xmalloc(sizeof(double) * (size_t)(n * n));
    for (int attempt = 0; attempt < 40 && !ok; attempt++, damp += 0.0025) {
        memcpy(Hd, H, sizeof(double) * (size_t)(n * n));
        for (int64_t a = 0; a < n; a++) Hd[a * n + a] += damp * mean_diag;
        ok = iq_cholesky(Hd, n) && iq_upper_chol_of_inverse(Hd, n, U);
    }
    free(Hd);
    if (!ok) {
        st = assay_fail(ASSAY_ERR_RANGE, "GPTQ: the Hessian stays singular even with dampening %.4f", damp);
        goto done;
    }

    {
        /* rows are independent once U is known: split them over threads */
        int nt = iq_threads();
        if (nt > n_out) nt = (int)n_out;
        iq_gptq_job jobs[64];
        pthread_t th[64];
        for (int k = 0; k < nt; k++) {
            jobs[k] = (iq_gptq_job){W, U, perm, out, n_out * k / nt, n_out * (k + 1) / nt, n, n_in, gs, B, maxq, p->sym,
                                    p->mse};
            if (k) pthread_create(&th[k], NULL, iq_gptq_worker, &jobs[k]);
        }
        iq_gptq_worker(&jobs[0]);
        for (int k = 1; k < nt; k++) pthread_join(th[k], NULL);
    }
    for (int64_t c = 0; c < n; c++) out->g_idx[perm[c]] = (int32_t)(c / gs);
done:
    free(H);
    free(U);
    free(W);
    free(diag);
    free(perm);
    if (st != ASSAY_OK) assay_int4_result_free(out);
    return st;
}

/* ---- AWQ ------------------------------------------------------------------------------------------------- */

static float iq_dot(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    float t = 0;
    for (; i < n; i++) t += a[i] * b[i];
    return t + ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Σ over tokens and outputs of (x_t · d_o)², split over threads by output row. */
typedef struct {
    const float *x, *d;
    int64_t n_tok, n_in, o0, o1;
    double sum;
} iq_err_job;

static void *iq_err_worker(void *arg) {
    iq_err_job *j = arg;
    double s = 0;
    for (int64_t o = j->o0; o < j->o1; o++) {
        const float *dr = j->d + o * j->n_in;
        for (int64_t t = 0; t < j->n_tok; t++) {
            double v = iq_dot(j->x + t * j->n_in, dr, j->n_in);
            s += v * v;
        }
    }
    j->sum = s;
    return NULL;
}

static int iq_threads(void) {
    const char *e = getenv("ASSAY_THREADS");
    long n = e ? atol(e) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 64 ? 64 : (int)n);
}

static double iq_output_error(const float *x, int64_t n_tok, int64_t n_in, const float *d, int64_t n_out) {
    int nt = iq_threads();
    if (nt > n_out) nt = (int)n_out;
    iq_err_job jobs[64];
    pthread_t th[64];
    for (int k = 0; k < nt; k++) {
        jobs[k] = (iq_err_job){x, d, n_tok, n_in, n_out * k / nt, n_out * (k + 1) / nt, 0};
        if (k) pthread_create(&th[k], NULL, iq_err_worker, &jobs[k]);
    }
    iq_err_worker(&jobs[0]);
    double s = jobs[0].sum;
    for (int k = 1; k < nt; k++) {
        pthread_join(th[k], NULL);
        s += jobs[k].sum;
    }
    return s;
}

/* AWQ's pseudo-quantization of one group in place (range not widened to 0). */
static void iq_fake_quant_group(float *x, int64_t n, int maxq) {
    float s;
    int z;
    iq_find_params(x, n, 1, maxq, 0, 0, &s, &z);
    for (int64_t i = 0; i < n; i++) x[i] = s * (float)(iq_code(x[i], s, z, maxq) - z);
}

assay_status assay_awq_search_scale_fn(const float *x_absmean, int64_t n_in, const float *const *w,
                                       const int64_t *n_out, int n_lin, const assay_int4_params *p, int n_grid, int duo,
                                       assay_awq_loss_fn loss_fn, void *ctx, float *s_best, float *alpha) {
    int64_t gs = p->group_size <= 0 ? n_in : p->group_size;
    if (n_in % gs) return assay_fail(ASSAY_ERR_ARG, "AWQ: input size %lld is not a multiple of the group size", (long long)n_in);
    ASSAY_ASSERT(n_lin >= 1 && n_lin <= 8);
    int maxq = (1 << p->bits) - 1;
    float *s = assay_xmalloc(sizeof(float) * (size_t)n_in);
    double *wmean = assay_xmalloc(sizeof(double) * (size_t)n_in);
    float *wq[8];
    for (int k = 0; k < n_lin; k++) wq[k] = assay_xmalloc(sizeof(float) * (size_t)(n_out[k] * n_in));
    /* AutoAWQ's duo scaling: the mean over every row of the group's linears of |w| / (max |w| of its g128 group) */
    int64_t rows = 0;
    for (int64_t i = 0; i < n_in; i++) wmean[i] = 0;
    for (int k = 0; k < n_lin && duo; k++)
        for (int64_t o = 0; o < n_out[k]; o++, rows++)
            for (int64_t g = 0; g < n_in / gs; g++) {
                const float *wr = w[k] + o * n_in + g * gs;
                float amax = 0;
                for (int64_t i = 0; i < gs; i++) amax = fabsf(wr[i]) > amax ? fabsf(wr[i]) : amax;
                for (int64_t i = 0; i < gs; i++) wmean[g * gs + i] += fabsf(wr[i]) / (amax + 1e-6);
            }
    for (int64_t i = 0; i < n_in && duo; i++) wmean[i] /= (double)rows;
    double best = INFINITY;
    float best_ratio = 0;
    for (int64_t i = 0; i < n_in; i++) s_best[i] = 1;
    /* duo 2 is llm-compressor's grid: the identity (ratio 0 without the weights' term) first, then duo scaling at
     * ratios i / (n_grid - 2) for i = 0 .. n_grid - 2 (1.0 included), n_grid candidates in all */
    for (int gi = 0; gi < n_grid; gi++) {
        double ratio = duo == 2 ? (gi == 0 ? 0.0 : (double)(gi - 1) / (n_grid > 2 ? n_grid - 2 : 1)) : (double)gi / n_grid;
        int use_w = duo == 2 ? gi > 0 : duo;
        double smax = 0, smin = INFINITY;
        for (int64_t i = 0; i < n_in; i++) {
            double v = pow(x_absmean[i], ratio);
            if (use_w) v /= pow(wmean[i], 1 - ratio) + 1e-4;
            if (!(v >= 1e-4)) v = 1e-4;
            if (isinf(v)) v = 1;
            s[i] = (float)v;
            smax = v > smax ? v : smax;
            smin = v < smin ? v : smin;
        }
        float norm = (float)sqrt(smax * smin);
        for (int64_t i = 0; i < n_in; i++) s[i] /= norm;
        for (int k = 0; k < n_lin; k++)
            for (int64_t o = 0; o < n_out[k]; o++) { /* Q(W·s)/s, row by row */
                const float *wr = w[k] + o * n_in;
                float *dr = wq[k] + o * n_in;
                for (int64_t i = 0; i < n_in; i++) dr[i] = wr[i] * s[i];
                for (int64_t g = 0; g < n_in / gs; g++) iq_fake_quant_group(dr + g * gs, gs, maxq);
                for (int64_t i = 0; i < n_in; i++) dr[i] /= s[i];
            }
        double loss = loss_fn(ctx, (const float *const *)wq);
        if (loss < best) {
            best = loss;
            best_ratio = use_w || duo != 2 ? (float)ratio : -1.0f; /* -1: the identity won */
            memcpy(s_best, s, sizeof(float) * (size_t)n_in);
        }
    }
    if (alpha) *alpha = best_ratio;
    free(s);
    free(wmean);
    for (int k = 0; k < n_lin; k++) free(wq[k]);
    return ASSAY_OK;
}

/* the default loss: Σ over the linears of ‖X Wᵀ − X W_qᵀ‖² on the calibration rows */
typedef struct {
    const float *x;
    int64_t n_tok, n_in;
    const float *const *w;
    const int64_t *n_out;
    int n_lin;
    float *d;
} iq_linear_loss;

static double iq_linear_loss_fn(void *ctx, const float *const *wq) {
    iq_linear_loss *c = ctx;
    double loss = 0;
    for (int k = 0; k < c->n_lin; k++) {
        for (int64_t i = 0; i < c->n_out[k] * c->n_in; i++) c->d[i] = c->w[k][i] - wq[k][i];
        loss += iq_output_error(c->x, c->n_tok, c->n_in, c->d, c->n_out[k]);
    }
    return loss;
}

assay_status assay_awq_search_scale(const float *x, int64_t n_tok, int64_t n_in, const float *const *w,
                                    const int64_t *n_out, int n_lin, const assay_int4_params *p, int n_grid,
                                    float *s_best, float *alpha) {
    float *xmean = assay_xmalloc(sizeof(float) * (size_t)n_in);
    assay_awq_absmean(x, n_tok, n_in, xmean);
    int64_t max_out = 0;
    for (int k = 0; k < n_lin; k++) max_out = n_out[k] > max_out ? n_out[k] : max_out;
    iq_linear_loss c = {x, n_tok, n_in, w, n_out, n_lin, assay_xmalloc(sizeof(float) * (size_t)(max_out * n_in))};
    assay_status st = assay_awq_search_scale_fn(xmean, n_in, w, n_out, n_lin, p, n_grid, 0, iq_linear_loss_fn, &c,
                                                s_best, alpha);
    free(c.d);
    free(xmean);
    return st;
}

void assay_awq_absmean(const float *x, int64_t n_tok, int64_t n_in, float *out) {
    double *acc = assay_xcalloc((size_t)n_in, sizeof(double));
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n_in; i++) acc[i] += fabsf(x[t * n_in + i]);
    for (int64_t i = 0; i < n_in; i++) out[i] = (float)(acc[i] / (double)(n_tok > 0 ? n_tok : 1));
    free(acc);
}

/* The clipping search scores a candidate by Σ_t (x_t,g · d)² over the input rows, d being the change the clip and
 * the quantization make to one row's group. That equals dᵀ G_g d with the group's Gram matrix G_g = Σ_t x_t,g x_t,gᵀ,
 * so each candidate costs gs² instead of n_tok·gs and the search can score thousands of rows. */
typedef struct {
    const float *x;
    float *gram; /* [n_in / gs][gs][gs] */
    int64_t n_tok, n_in, gs, g0, g1;
} iq_group_gram_job;

static void *iq_group_gram_worker(void *arg) {
    iq_group_gram_job *j = arg;
    int64_t gs = j->gs;
    for (int64_t g = j->g0; g < j->g1; g++) {
        float *G = j->gram + g * gs * gs;
        memset(G, 0, sizeof(float) * (size_t)(gs * gs));
        for (int64_t t = 0; t < j->n_tok; t++) {
            const float *xg = j->x + t * j->n_in + g * gs;
            for (int64_t a = 0; a < gs; a++) {
                float xa = xg[a];
                float *row = G + a * gs;
                for (int64_t b = 0; b < gs; b++) row[b] += xa * xg[b];
            }
        }
    }
    return NULL;
}

typedef struct {
    float *w;
    const float *gram;
    int64_t n_in, gs, o0, o1;
    int maxq, two_sided;
} iq_clip_job;

/* dᵀ G d for a symmetric G, from its upper triangle (half the multiplies) */
static double iq_quad_form(const float *G, const float *d, int64_t n) {
    double e = 0;
    for (int64_t r = 0; r < n; r++)
        e += (double)d[r] * (G[r * n + r] * d[r] + 2 * iq_dot(G + r * n + r + 1, d + r + 1, n - r - 1));
    return e;
}

#define IQ_CLIP_STEPS 10 /* shrink factors 1 − i/20, i = 0..9 (AutoAWQ: n_grid 20, max_shrink 0.5) */

static void *iq_clip_worker(void *arg) {
    iq_clip_job *j = arg;
    int64_t gs = j->gs;
    float *wq = assay_xmalloc(sizeof(float) * (size_t)gs), *d = assay_xmalloc(sizeof(float) * (size_t)gs);
    for (int64_t g = 0; g < j->n_in / gs; g++) {
        const float *G = j->gram + g * gs * gs;
        for (int64_t o = j->o0; o < j->o1; o++) {
            float *wg = j->w + o * j->n_in + g * gs;
            float mx = wg[0], mn = wg[0];
            for (int64_t i = 1; i < gs; i++) {
                mx = wg[i] > mx ? wg[i] : mx;
                mn = wg[i] < mn ? wg[i] : mn;
            }
            float amax = fmaxf(mx, -mn);
            double best = INFINITY;
            float best_lo = mn, best_hi = mx;
            /* symmetric (AutoAWQ): [−m, m] with m = max|w|·(1 − i/20); two-sided: the high end max·(1 − a/20) and
             * the low end min·(1 − b/20) searched independently (an end on the wrong side of 0 is not moved).
             * The first candidate is the unclipped group and ties keep the earlier (less clipped) candidate. */
            int n_a = IQ_CLIP_STEPS, n_b = j->two_sided ? IQ_CLIP_STEPS : 1;
            for (int a = 0; a < n_a; a++)
                for (int b = 0; b < n_b; b++) {
                    float lo, hi;
                    if (j->two_sided) {
                        if ((a && mx <= 0) || (b && mn >= 0)) continue;
                        hi = mx > 0 ? mx * (1 - a / 20.0f) : mx;
                        lo = mn < 0 ? mn * (1 - b / 20.0f) : mn;
                    } else {
                        hi = amax * (1 - a / 20.0f);
                        lo = -hi;
                    }
                    for (int64_t i = 0; i < gs; i++) wq[i] = wg[i] > hi ? hi : (wg[i] < lo ? lo : wg[i]);
                    iq_fake_quant_group(wq, gs, j->maxq);
                    for (int64_t i = 0; i < gs; i++) d[i] = wq[i] - wg[i];
                    double err = iq_quad_form(G, d, gs);
                    if (err < best) {
                        best = err;
                        best_lo = lo;
                        best_hi = hi;
                    }
                }
            for (int64_t i = 0; i < gs; i++) wg[i] = wg[i] > best_hi ? best_hi : (wg[i] < best_lo ? best_lo : wg[i]);
        }
    }
    free(wq);
    free(d);
    return NULL;
}

void assay_awq_clip(float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok, const assay_int4_params *p) {
    int64_t gs = p->group_size <= 0 ? n_in : p->group_size, n_groups = n_in / gs;
    ASSAY_ASSERT(n_in % gs == 0);
    float *gram = assay_xmalloc(sizeof(float) * (size_t)(n_groups * gs * gs));
    int nt = iq_threads();
    pthread_t th[64];
    int ng = nt > n_groups ? (int)n_groups : nt;
    iq_group_gram_job gj[64];
    for (int k = 0; k < ng; k++) {
        gj[k] = (iq_group_gram_job){x, gram, n_tok, n_in, gs, n_groups * k / ng, n_groups * (k + 1) / ng};
        if (k) pthread_create(&th[k], NULL, iq_group_gram_worker, &gj[k]);
    }
    iq_group_gram_worker(&gj[0]);
    for (int k = 1; k < ng; k++) pthread_join(th[k], NULL);
    if (nt > n_out) nt = (int)n_out;
    iq_clip_job jobs[64];
    for (int k = 0; k < nt; k++) {
        jobs[k] = (iq_clip_job){w, gram, n_in, gs, n_out * k / nt, n_out * (k + 1) / nt, (1 << p->bits) - 1,
                                p->awq_clip_two_sided};
        if (k) pthread_create(&th[k], NULL, iq_clip_worker, &jobs[k]);
    }
    iq_clip_worker(&jobs[0]);
    for (int k = 1; k < nt; k++) pthread_join(th[k], NULL);
    free(gram);
}

/* ---- packing --------------------------------------------------------------------------------------------- */

void assay_int4_pack_gptq(const assay_int4_result *r, int32_t *qweight, int32_t *qzeros, uint16_t *scales) {
    ASSAY_ASSERT(r->bits == 4 && r->n_in % 8 == 0 && r->n_out % 8 == 0);
    for (int64_t i = 0; i < r->n_in / 8; i++)
        for (int64_t o = 0; o < r->n_out; o++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++) v |= (uint32_t)(r->q[o * r->n_in + 8 * i + k] & 0xF) << (4 * k);
            qweight[i * r->n_out + o] = (int32_t)v;
        }
    for (int64_t g = 0; g < r->n_groups; g++) {
        for (int64_t j = 0; j < r->n_out / 8; j++) {
            uint32_t v = 0;
            /* the "gptq" (v1) checkpoint format stores zero − 1; readers add the 1 back */
            for (int k = 0; k < 8; k++) v |= (uint32_t)((r->zeros[(8 * j + k) * r->n_groups + g] - 1) & 0xF) << (4 * k);
            qzeros[g * (r->n_out / 8) + j] = (int32_t)v;
        }
        for (int64_t o = 0; o < r->n_out; o++) scales[g * r->n_out + o] = assay_f32_to_f16(r->scales[o * r->n_groups + g]);
    }
}

static const int iq_awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

void assay_int4_pack_awq(const assay_int4_result *r, int32_t *qweight, int32_t *qzeros, uint16_t *scales) {
    ASSAY_ASSERT(r->bits == 4 && !r->act_order && r->n_out % 8 == 0);
    int64_t n8 = r->n_out / 8;
    for (int64_t i = 0; i < r->n_in; i++)
        for (int64_t j = 0; j < n8; j++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++) v |= (uint32_t)(r->q[(8 * j + iq_awq_order[k]) * r->n_in + i] & 0xF) << (4 * k);
            qweight[i * n8 + j] = (int32_t)v;
        }
    for (int64_t g = 0; g < r->n_groups; g++) {
        for (int64_t j = 0; j < n8; j++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++)
                v |= (uint32_t)(r->zeros[(8 * j + iq_awq_order[k]) * r->n_groups + g] & 0xF) << (4 * k);
            qzeros[g * n8 + j] = (int32_t)v;
        }
        for (int64_t o = 0; o < r->n_out; o++) scales[g * r->n_out + o] = assay_f32_to_f16(r->scales[o * r->n_groups + g]);
    }
}

/* The readers' side of the two packers (the engine's GPTQ / AWQ checkpoint loaders): w[o][i] in f32. Inputs are
 * validated by the caller (g_idx in range); words are read with memcpy because mmapped tensors may be unaligned. */
static uint32_t iq_word(const void *p, int64_t i) {
    uint32_t v;
    memcpy(&v, (const uint8_t *)p + 4 * i, 4);
    return v;
}

void assay_int4_unpack_gptq(const void *qweight, const void *qzeros, const float *scales, const int32_t *g_idx,
                            int64_t n_in, int64_t n_out, int zero_offset, float *w) {
    ASSAY_ASSERT(n_in % 8 == 0 && n_out % 8 == 0);
    for (int64_t i = 0; i < n_in; i++) {
        int64_t g = g_idx[i];
        for (int64_t o = 0; o < n_out; o++) {
            int q = (int)(iq_word(qweight, (i / 8) * n_out + o) >> (4 * (i % 8))) & 0xF;
            /* no wrap: a stored 15 (zero 0 written as −1) reads back as 16, as every "gptq" v1 reader does */
            int z = ((int)(iq_word(qzeros, g * (n_out / 8) + o / 8) >> (4 * (o % 8))) & 0xF) + zero_offset;
            w[o * n_in + i] = scales[g * n_out + o] * (float)(q - z);
        }
    }
}

void assay_int4_unpack_awq(const void *qweight, const void *qzeros, const float *scales, int64_t n_in, int64_t n_out,
                           int64_t group_size, float *w) {
    ASSAY_ASSERT(n_out % 8 == 0 && group_size > 0);
    int64_t n8 = n_out / 8;
    for (int64_t i = 0; i < n_in; i++) {
        int64_t g = i / group_size;
        for (int64_t j = 0; j < n8; j++) {
            uint32_t qv = iq_word(qweight, i * n8 + j), zv = iq_word(qzeros, g * n8 + j);
            for (int k = 0; k < 8; k++) {
                int64_t o = 8 * j + iq_awq_order[k];
                int q = (int)(qv >> (4 * k)) & 0xF, z = (int)(zv >> (4 * k)) & 0xF;
                w[o * n_in + i] = scales[g * n_out + o] * (float)(q - z);
            }
        }
    }
}

/* ---- INT8 ------------------------------------------------------------------------------------------------ */

void assay_smoothquant_scales(const float *act_absmax, int64_t n_in, const float *const *w, const int64_t *n_out,
                              int n_lin, float alpha, float *s) {
    for (int64_t j = 0; j < n_in; j++) {
        float wmax = 0;
        for (int k = 0; k < n_lin; k++)
            for (int64_t o = 0; o < n_out[k]; o++) {
                float v = fabsf(w[k][o * n_in + j]);
                wmax = v > wmax ? v : wmax;
            }
        if (wmax < 1e-5f) wmax = 1e-5f;
        float a = act_absmax[j] > 1e-5f ? act_absmax[j] : 1e-5f;
        float v = powf(a, alpha) / powf(wmax, 1 - alpha);
        s[j] = v > 1e-5f ? v : 1e-5f;
    }
}

void assay_int8_quantize_token(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float s = amax / 127.0f;
    *scale = s;
    for (int64_t i = 0; i < n; i++) {
        float v = s > 0 ? iq_rne(x[i] / s) : 0.0f;
        q[i] = (int8_t)(v > 127 ? 127 : (v < -127 ? -127 : v));
    }
}

void assay_int8_quantize_rows(const float *w, int64_t n_out, int64_t n_in, int8_t *q, float *scales) {
    for (int64_t o = 0; o < n_out; o++) assay_int8_quantize_token(w + o * n_in, n_in, q + o * n_in, &scales[o]);
}

/* test_kv_scales.c — static and --calculate-kv-scales KV-cache scales.
 *
 *  1. Static per-layer scales (a checkpoint's k_scale/v_scale): every slot records the layer's scale; a value
 *     decodes to within E4M3's half step (2^-4 relative) of x, values past 448*scale saturate to exactly
 *     448*scale; codes are checked against dtype.h's E4M3 encoder (itself checked against ml_dtypes).
 *  2. --calculate-kv-scales semantics on synthetic keys/values through the cache and the CPU backend's kv_store:
 *     warm-up (paused) tokens never count and are stored with their own dynamic scale; the scale is the running
 *     max / 448 over exactly the first N real tokens (rows past N in the crossing batch do not count); it never
 *     goes down; it is frozen after N; tokens written before the scale was final decode unclamped with the scale
 *     they were written with.
 *  3. The same on the house model through sessions: scales equal max|K|, max|V| / 448 of the first N real tokens as
 *     seen by the KV hook, and a warm-up pass before the real traffic changes no scale bit.
 */
#include <stdint.h>
#include <stdlib.h>

#include "assay/backend.h"
#include "assay/dtype.h"
#include "assay/model.h"
#include "check.h"
#include "engine/kv_cache.h"

enum { HKV = 2, HD = 16, NCTX = 128 };

static float decode_slot(const assay_kv_cache *kv, int kind, int64_t pos, int64_t h, int64_t i, float *slot_scale) {
    const assay_kv_layer *L = &kv->layers[0];
    int64_t phys = pos / ASSAY_KV_BLOCK; /* one sequence on blocks 0, 1, 2, ... */
    int64_t slot = (phys * HKV + h) * ASSAY_KV_BLOCK + pos % ASSAY_KV_BLOCK;
    const uint8_t *codes = kind ? L->v : L->k;
    float sc = (kind ? L->v_scale : L->k_scale)[slot];
    if (slot_scale) *slot_scale = sc;
    return assay_fp8_e4m3_to_f32(codes[slot * HD + i]) * sc;
}

/* n rows of keys/values at positions p0.., stored through observe + the backend's kv_store */
static void store(assay_kv_cache *kv, const float *k, const float *v, int64_t p0, int64_t n) {
    int32_t pos[64], seq[64], table[NCTX / ASSAY_KV_BLOCK];
    int64_t slot[64];
    for (int64_t b = 0; b < NCTX / ASSAY_KV_BLOCK; b++) table[b] = (int32_t)b;
    for (int64_t t = 0; t < n; t++) {
        pos[t] = (int32_t)(p0 + t);
        seq[t] = 0;
        slot[t] = p0 + t;
        CHECK(p0 + t < NCTX);
    }
    const int32_t *tables[1] = {table};
    int32_t len = (int32_t)(p0 + n);
    assay_step step = {.n_tokens = n, .pos = pos, .seq_of_tok = seq, .slot = slot, .n_seqs = 1, .seq_lens = &len,
                       .block_tables = tables};
    assay_kv_cache_observe(kv, 0, k, v, n);
    kv->be->ops->kv_store(kv->be, &kv->layers[0], &kv->geom, k, v, &step);
}

/* rows with |x| <= amax, the value amax reached at row `at` (element 5 of head 1), sign alternating */
static void fill(float *x, int64_t n, float amax, int64_t at, unsigned seed) {
    for (int64_t i = 0; i < n * HKV * HD; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = amax * 0.9f * ((float)(seed >> 8) / 16777216.0f * 2 - 1);
    }
    x[at * HKV * HD + HD + 5] = (at & 1) ? -amax : amax;
}

static void check_row_exact(const assay_kv_cache *kv, int kind, const float *x, int64_t pos, int64_t row, float want_scale) {
    for (int64_t h = 0; h < HKV; h++)
        for (int64_t i = 0; i < HD; i++) {
            float sc, got = decode_slot(kv, kind, pos, h, i, &sc), ref = x[row * HKV * HD + h * HD + i];
            if (want_scale > 0) CHECK(sc == want_scale);
            /* E4M3: 3 mantissa bits -> relative error <= 2^-4 for normals, absolute 2^-10*sc below them */
            CHECK(fabsf(got - ref) <= fabsf(ref) * 0.0625f + sc * 0.001f);
        }
}

static void test_static(assay_backend *be) {
    assay_kv_cache kv;
    assay_kv_geom g = {ASSAY_KV_FP8_E4M3, HKV, HD};
    CHECK_OK(assay_kv_cache_init(&kv, be, &g, 1, NCTX / ASSAY_KV_BLOCK));
    float ks = 1.0f / 448, vs = 0.5f / 448;
    assay_kv_cache_set_static(&kv, 0, ks, vs);
    float k[4 * HKV * HD], v[4 * HKV * HD];
    fill(k, 4, 0.9f, 1, 7);
    fill(v, 4, 0.45f, 2, 8);
    k[3 * HKV * HD + 2] = 3.0f; /* past 448 * ks = 1: saturates */
    v[3 * HKV * HD + 3] = -7.0f;
    store(&kv, k, v, 0, 4);
    for (int64_t t = 0; t < 3; t++) {
        check_row_exact(&kv, 0, k, t, t, ks);
        check_row_exact(&kv, 1, v, t, t, vs);
    }
    CHECK(decode_slot(&kv, 0, 3, 0, 2, NULL) == 1.0f);
    CHECK(decode_slot(&kv, 1, 3, 0, 3, NULL) == -0.5f);
    /* the code is the E4M3 rounding of x / scale */
    CHECK(((const uint8_t *)kv.layers[0].k)[(0 * HKV + 1) * ASSAY_KV_BLOCK * HD + 7] ==
          assay_f32_to_fp8_e4m3(k[1 * HD + 7] / ks));
    assay_kv_cache_free(&kv);
}

static void test_calc(assay_backend *be) {
    assay_kv_cache kv;
    assay_kv_geom g = {ASSAY_KV_FP8_E4M3, HKV, HD};
    CHECK_OK(assay_kv_cache_init(&kv, be, &g, 1, NCTX / ASSAY_KV_BLOCK));
    const int64_t N = 40;
    assay_kv_cache_calc_begin(&kv, N);
    float k[16 * HKV * HD], v[16 * HKV * HD];
    int64_t p = 0;

    /* warm-up with huge values: not counted, stored with per-slot dynamic scales (decodes fine, no clamp) */
    assay_kv_cache_calc_pause(&kv, 1);
    fill(k, 8, 1000.0f, 3, 1);
    fill(v, 8, 900.0f, 4, 2);
    store(&kv, k, v, p, 8);
    CHECK(kv.layers[0].k_static == 0 && kv.layers[0].v_static == 0 && kv.calc.seen[0] == 0);
    for (int64_t t = 0; t < 8; t++) check_row_exact(&kv, 0, k, p + t, t, 0);
    /* the warm-up request ends (its slots are simply overwritten by what follows) */
    assay_kv_cache_calc_pause(&kv, 0);

    /* batch A: 10 real tokens, amax 2 / 1.5 */
    float ka[16 * HKV * HD], va[16 * HKV * HD];
    fill(ka, 10, 2.0f, 6, 3);
    fill(va, 10, 1.5f, 2, 4);
    store(&kv, ka, va, p, 10);
    CHECK(kv.layers[0].k_static == 2.0f / 448 && kv.layers[0].v_static == 1.5f / 448 && kv.calc.seen[0] == 10);
    int64_t pa = p;
    p += 10;
    /* batch B: smaller values never lower the scale */
    fill(k, 10, 1.0f, 0, 5);
    fill(v, 10, 0.5f, 9, 6);
    store(&kv, k, v, p, 10);
    p += 10;
    CHECK(kv.layers[0].k_static == 2.0f / 448 && kv.layers[0].v_static == 1.5f / 448 && kv.calc.seen[0] == 20);
    /* batch C: larger values widen it before they are written: none of them is clamped */
    fill(k, 10, 5.0f, 7, 7);
    fill(v, 10, 4.0f, 1, 8);
    store(&kv, k, v, p, 10);
    CHECK(kv.layers[0].k_static == 5.0f / 448 && kv.layers[0].v_static == 4.0f / 448 && kv.calc.seen[0] == 30);
    for (int64_t t = 0; t < 10; t++) check_row_exact(&kv, 0, k, p + t, t, 5.0f / 448);
    p += 10;
    /* batch A's tokens, written with the smaller scale, still decode unclamped with it */
    for (int64_t t = 0; t < 10; t++) {
        check_row_exact(&kv, 0, ka, pa + t, t, 2.0f / 448);
        check_row_exact(&kv, 1, va, pa + t, t, 1.5f / 448);
    }
    CHECK(!assay_kv_cache_calc_frozen(&kv));
    /* batch D crosses N: rows 0..9 count (amax 6 at row 3), row 12 holds 100 and does not */
    fill(k, 15, 6.0f, 3, 9);
    fill(v, 15, 3.0f, 4, 10);
    k[12 * HKV * HD + 1] = 100.0f;
    v[12 * HKV * HD + 1] = -100.0f;
    store(&kv, k, v, p, 15);
    CHECK(kv.layers[0].k_static == 6.0f / 448 && kv.layers[0].v_static == 4.0f / 448 && kv.calc.seen[0] == N);
    CHECK(assay_kv_cache_calc_frozen(&kv));
    CHECK(decode_slot(&kv, 0, p + 12, 0, 1, NULL) == 6.0f);  /* saturated at the frozen scale */
    CHECK(decode_slot(&kv, 1, p + 12, 0, 1, NULL) == -4.0f);
    p += 15;
    /* frozen: neither bigger traffic nor a warm-up pass changes it */
    fill(k, 10, 50.0f, 0, 11);
    fill(v, 10, 50.0f, 0, 12);
    store(&kv, k, v, p, 10);
    p += 10;
    assay_kv_cache_calc_pause(&kv, 1);
    store(&kv, k, v, p, 10);
    CHECK(kv.layers[0].k_static == 6.0f / 448 && kv.layers[0].v_static == 4.0f / 448);
    assay_kv_cache_free(&kv);
}

/* ---- 3. house model ---- */
typedef struct hook_amax {
    int real;
    int64_t target, seen[64];
    float k[64], v[64];
} hook_amax;

static void hook(void *user, int64_t layer, const float *k, const float *v, int64_t n_tok, int64_t kv_dim) {
    hook_amax *h = user;
    if (!h->real) return;
    int64_t take = h->target - h->seen[layer] < n_tok ? h->target - h->seen[layer] : n_tok;
    for (int64_t i = 0; i < take * kv_dim; i++) {
        h->k[layer] = fmaxf(h->k[layer], fabsf(k[i]));
        h->v[layer] = fmaxf(h->v[layer], fabsf(v[i]));
    }
    h->seen[layer] += take;
}

static void run_house(assay_model *m, int warmup, float *ks, float *vs, hook_amax *h) {
    const int64_t L = assay_model_get_config(m)->n_layer;
    assay_session_options so;
    assay_session_options_default(&so);
    so.kv_dtype = ASSAY_KV_FP8_E4M3;
    so.n_ctx = 128;
    so.kv_calc_tokens = 48;
    assay_session *s = NULL;
    CHECK_OK(assay_session_open(&s, m, &so));
    if (!s) return;
    if (h) assay_session_set_kv_hook(s, hook, h);
    int32_t ids[40], pos[40];
    float *logits = malloc(sizeof(float) * (size_t)assay_model_get_config(m)->n_vocab);
    if (warmup) { /* a probe with different tokens, then cleared */
        assay_session_kv_scales_pause(s, 1);
        for (int i = 0; i < 40; i++) ids[i] = 4000 + 37 * i, pos[i] = i;
        assay_batch b = {40, ids, pos, NULL, NULL};
        CHECK_OK(assay_session_forward(s, &b, logits));
        assay_session_seq_clear(s, 0);
        assay_session_kv_scales_pause(s, 0);
    }
    if (h) h->real = 1;
    /* real traffic: 30 tokens, then 30 more (crosses 48 inside the second batch) */
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 30; i++) ids[i] = 100 + 13 * (30 * r + i), pos[i] = 30 * r + i;
        assay_batch b = {30, ids, pos, NULL, NULL};
        CHECK_OK(assay_session_forward(s, &b, logits));
    }
    for (int64_t l = 0; l < L; l++) assay_session_kv_scales_get(s, l, &ks[l], &vs[l]);
    CHECK(strstr(assay_session_kv_scales_desc(s), "first 48 tokens") != NULL);
    free(logits);
    assay_session_close(s);
}

static void test_house(void) {
    assay_model *m = NULL;
    CHECK_OK(assay_model_load(&m, check_shared_path("models/house"), NULL));
    if (!m) return;
    const int64_t L = assay_model_get_config(m)->n_layer;
    float ka[64], va[64], kb[64], vb[64];
    hook_amax h = {.target = 48};
    run_house(m, 1, ka, va, &h);
    run_house(m, 0, kb, vb, NULL);
    for (int64_t l = 0; l < L; l++) {
        CHECK(h.seen[l] == 48);
        CHECK(ka[l] == h.k[l] / 448 && va[l] == h.v[l] / 448);
        CHECK(ka[l] == kb[l] && va[l] == vb[l]); /* the warm-up changed nothing */
        CHECK(ka[l] > 0 && va[l] > 0);
    }
    /* --calculate-kv-scales needs an 8-bit cache */
    assay_session_options so;
    assay_session_options_default(&so);
    so.kv_calc_tokens = 16;
    assay_session *s = NULL;
    CHECK(assay_session_open(&s, m, &so) == ASSAY_ERR_ARG && s == NULL);
    assay_model_free(m);
}

int main(void) {
    assay_backend *be = NULL;
    CHECK_OK(assay_backend_cpu_open(&be, 1));
    test_static(be);
    test_calc(be);
    assay_backend_close(be);
    test_house();
    return check_finish("kv_scales");
}

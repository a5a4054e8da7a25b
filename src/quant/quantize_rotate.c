/* quantize_rotate.c — `--rotate hadamard` (QuaRot-style rotations folded into the weights) and the unquantized
 * f32 / bf16 schemes that write a rotated (or plain) model as an HF safetensors directory.
 *
 * What is folded, for a Llama-family model (HF layout: W is [out, in], y = x Wᵀ), all exact in real arithmetic:
 *   1. RMSNorm gains into the linears that read the normed stream: W_{q,k,v} ← W·diag(attn_norm),
 *      W_{gate,up} ← W·diag(ffn_norm), lm_head ← W·diag(output_norm); the norm weights become 1, so every
 *      RMSNorm is the plain x / rms(x), which commutes with an orthogonal Q because ‖xQ‖ = ‖x‖.
 *   2. The residual stream is rotated by Q = diag(s)·H/√n (n = hidden size, a power of two; H the Sylvester
 *      Hadamard matrix; s random signs from --seed): embeddings E ← E·Q; readers of the stream (q, k, v, gate, up,
 *      lm_head) W ← W·Q; writers into it (o_proj, down_proj, and an o_proj bias) W ← Qᵀ·W. The lm_head is
 *      always written as its own tensor (a tied lm_head would need E·Q·diag(...) ≠ E·Q once the final norm gain
 *      is folded), and tie_word_embeddings becomes false.
 *   3. Per attention head, v_proj's output rows and o_proj's matching input columns are rotated by the
 *      normalized Hadamard matrix of size head_dim (QuaRot's offline half of R2), so o_proj's input groups
 *      see mixed coordinates too. Exact under GQA: every query head of a group reads the same rotated values.
 * Not done: QuaRot's online rotations (across heads before o_proj, R3 on q/k after RoPE, and R4 before down_proj:
 * its inverse folds into down_proj but the forward rotation of the activation after SwiGLU is not foldable and
 * would need a Hadamard in the engine's forward pass). Weight-only quantization gains most from 2.
 * The rotated model is written in f32 so that only the arithmetic of the rotation itself rounds (for a quantizing
 * scheme, the tensors it does not quantize go back to a bf16 source's dtype); its config.json records the
 * rotation under "assay_rotation" (kind, seed, what was folded). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/dtype.h"
#include "assay/file.h"
#include "assay/progress.h"
#include "assay/safetensors.h"
#include "assay/strbuf.h"
#include "quant/quantize_schemes.h"

/* In-place normalized fast Walsh-Hadamard transform of n = 2^k vectors of `width` floats each: element i of
 * the transform is row i of x (rows `stride` floats apart). width 1 transforms one vector. */
static void fwht_rows(float *x, int64_t n, int64_t width, int64_t stride) {
    for (int64_t h = 1; h < n; h *= 2)
        for (int64_t i = 0; i < n; i += 2 * h)
            for (int64_t j = i; j < i + h; j++) {
                float *a = x + j * stride, *b = x + (j + h) * stride;
                for (int64_t c = 0; c < width; c++) {
                    float u = a[c], v = b[c];
                    a[c] = u + v;
                    b[c] = u - v;
                }
            }
    const float norm = 1.0f / sqrtf((float)n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < width; c++) x[i * stride + c] *= norm;
}

static int is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* splitmix64: the signs are a documented function of the seed, so the rotation can be rebuilt elsewhere */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Row vectors times Q: each of `rows` rows of length n (contiguous) becomes fwht(row ∘ s) / √n. */
static void rotate_inputs(float *w, int64_t rows, int64_t n, const float *s) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = w + r * n;
        for (int64_t i = 0; i < n; i++) row[i] *= s[i];
        fwht_rows(row, n, 1, 1);
    }
}

/* Qᵀ times a [n, cols] matrix: column c becomes fwht(s ∘ column) / √n, done across rows for all columns at once. */
static void rotate_outputs(float *w, int64_t n, int64_t cols, const float *s) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < cols; c++) w[i * cols + c] *= s[i];
    fwht_rows(w, n, cols, cols);
}

typedef enum { ROLE_OTHER, ROLE_EMBED, ROLE_LM_HEAD, ROLE_READER, ROLE_WRITER, ROLE_NORM } tensor_role;

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static tensor_role role_of(const char *name) {
    if (strcmp(name, "token_embd.weight") == 0) return ROLE_EMBED;
    if (strcmp(name, "output.weight") == 0) return ROLE_LM_HEAD;
    if (strcmp(name, "output_norm.weight") == 0) return ROLE_NORM;
    if (strncmp(name, "blk.", 4) != 0) return ROLE_OTHER;
    if (ends_with(name, ".attn_norm.weight") || ends_with(name, ".ffn_norm.weight")) return ROLE_NORM;
    if (ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_v.weight") ||
        ends_with(name, ".ffn_gate.weight") || ends_with(name, ".ffn_up.weight"))
        return ROLE_READER;
    if (ends_with(name, ".attn_output.weight") || ends_with(name, ".ffn_down.weight") || ends_with(name, ".attn_output.bias"))
        return ROLE_WRITER;
    return ROLE_OTHER;
}

/* The norm whose gain a reader absorbs: blk.N.attn_norm for q/k/v, blk.N.ffn_norm for gate/up, output_norm for
 * the lm_head. */
static const assay_tensor *gain_of(const assay_model_file *mf, const char *name) {
    char buf[128];
    if (strcmp(name, "output.weight") == 0 || strcmp(name, "token_embd.weight") == 0)
        return assay_model_file_find(mf, "output_norm.weight");
    long layer = strtol(name + 4, NULL, 10);
    int ffn = ends_with(name, ".ffn_gate.weight") || ends_with(name, ".ffn_up.weight");
    snprintf(buf, sizeof buf, "blk.%ld.%s.weight", layer, ffn ? "ffn_norm" : "attn_norm");
    return assay_model_file_find(mf, buf);
}

static assay_status add_tensor(assay_safetensors_writer *w, assay_quantize_keep *k, const char *name, int n_dims,
                               const int64_t *ne, float *v, assay_type out_type) {
    int64_t shape[4], n = 1;
    for (int d = 0; d < n_dims; d++) shape[d] = ne[n_dims - 1 - d], n *= ne[d];
    if (out_type == ASSAY_TYPE_BF16) {
        uint16_t *b = assay_quantize_keep_add(k, assay_xmalloc((size_t)n * 2));
        assay_f32_to_bf16_row(v, b, n);
        return assay_safetensors_writer_add(w, name, "BF16", n_dims, shape, b, (size_t)n * 2);
    }
    return assay_safetensors_writer_add(w, name, "F32", n_dims, shape, v, (size_t)n * 4);
}

/* Writes the model of `mf` into directory `dir` (which exists) as model.safetensors in out_type + config.json +
 * tokenizer files, rotated when `signs` is set (then `seed` is recorded). With `source_dtype_outside_linears`, the
 * tensors that are not decoder-block linears (embeddings, lm_head, norms) keep a bf16 source's dtype: a scheme
 * quantizes only the block linears (from their f32 values) and copies the rest as stored. */
static assay_status write_model(const assay_model_file *mf, const char *dir, assay_type out_type, const float *signs,
                                uint64_t seed, int source_dtype_outside_linears) {
    const assay_model_config *c = assay_model_file_config(mf);
    const int64_t nt = assay_model_file_tensor_count(mf), E = c->n_embd, hd = c->head_dim;
    const int rot = signs != NULL;
    assay_safetensors_writer *w = assay_safetensors_writer_new();
    assay_safetensors_writer_set_metadata(w, "format", "pt");
    assay_quantize_keep keep = {0};
    assay_status rc = ASSAY_OK;
    assay_progress bar;
    assay_progress_begin(&bar, rot ? "rotate" : "convert", nt, "tensor");
    for (int64_t i = 0; i < nt && rc == ASSAY_OK; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        int64_t n = assay_tensor_nelements(t);
        float *v = assay_quantize_keep_add(&keep, assay_xmalloc((size_t)n * sizeof(float)));
        if ((rc = assay_quantize_tensor_f32(t, v, rot ? "--rotate" : "this")) != ASSAY_OK) break;
        tensor_role role = rot ? role_of(t->name) : ROLE_OTHER;
        int64_t rows = n / t->ne[0];
        if (role == ROLE_NORM) {
            for (int64_t j = 0; j < n; j++) v[j] = 1.0f;
        } else if (role == ROLE_READER || role == ROLE_LM_HEAD) {
            const assay_tensor *g = gain_of(mf, t->name);
            float *gain = assay_xmalloc((size_t)E * sizeof(float));
            rc = assay_quantize_tensor_f32(g, gain, "--rotate");
            for (int64_t r = 0; r < rows && rc == ASSAY_OK; r++)
                for (int64_t j = 0; j < E; j++) v[r * E + j] *= gain[j];
            free(gain);
            rotate_inputs(v, rows, E, signs);
            if (ends_with(t->name, ".attn_v.weight") && is_pow2(hd)) /* R2: rows of each KV head */
                for (int64_t h = 0; h < rows / hd; h++) fwht_rows(v + h * hd * E, hd, E, E);
        } else if (role == ROLE_EMBED) {
            rotate_inputs(v, rows, E, signs);
        } else if (role == ROLE_WRITER) {
            if (t->n_dims == 1) { /* o_proj bias: a row vector of the stream */
                rotate_inputs(v, 1, E, signs);
            } else {
                rotate_outputs(v, E, t->ne[0], signs);
                if (ends_with(t->name, ".attn_output.weight") && is_pow2(hd)) /* R2: each head's input columns */
                    for (int64_t r = 0; r < E; r++)
                        for (int64_t h = 0; h < t->ne[0] / hd; h++) fwht_rows(v + r * t->ne[0] + h * hd, hd, 1, 1);
            }
        } else if (rot && ends_with(t->name, ".attn_v.bias") && is_pow2(hd)) {
            for (int64_t h = 0; h < n / hd; h++) fwht_rows(v + h * hd, hd, 1, 1);
        }
        assay_type ty = out_type;
        if (source_dtype_outside_linears && !assay_quantize_is_block_linear(t->name) && t->type == ASSAY_TYPE_BF16)
            ty = ASSAY_TYPE_BF16;
        if (rc == ASSAY_OK) rc = add_tensor(w, &keep, t->source_name, t->n_dims, t->ne, v, ty);
        /* tied embeddings: the lm_head is E·diag(output_norm)·Q, its own tensor now */
        if (rc == ASSAY_OK && role == ROLE_EMBED && c->tied_embeddings) {
            float *o = assay_quantize_keep_add(&keep, assay_xmalloc((size_t)n * sizeof(float)));
            float *gain = assay_xmalloc((size_t)E * sizeof(float));
            rc = assay_quantize_tensor_f32(t, o, "--rotate");
            if (rc == ASSAY_OK) rc = assay_quantize_tensor_f32(gain_of(mf, t->name), gain, "--rotate");
            for (int64_t r = 0; r < rows && rc == ASSAY_OK; r++)
                for (int64_t j = 0; j < E; j++) o[r * E + j] *= gain[j];
            free(gain);
            rotate_inputs(o, rows, E, signs);
            if (rc == ASSAY_OK) rc = add_tensor(w, &keep, "lm_head.weight", t->n_dims, t->ne, o, ty);
        }
        assay_progress_update(&bar, i + 1);
    }
    assay_progress_end(&bar);
    if (rc == ASSAY_OK) {
        char *p = assay_path_join(dir, "model.safetensors");
        rc = assay_safetensors_writer_write(w, p, 0);
        free(p);
    }
    assay_safetensors_writer_free(w);
    assay_quantize_keep_free(&keep);
    if (rc == ASSAY_OK) {
        char rotation[512];
        snprintf(rotation, sizeof rotation,
                 "{\"kind\": \"hadamard\", \"seed\": %llu, \"signs\": \"splitmix64(seed)\", \"residual\": %lld, "
                 "\"v_o_per_head\": %s, \"norms_folded\": true, \"online\": []}",
                 (unsigned long long)seed, (long long)E, is_pow2(hd) ? "true" : "false");
        const char *keys[] = {"tie_word_embeddings", "assay_rotation"};
        const char *vals[] = {"false", rotation};
        char *p = assay_path_join(dir, "config.json");
        rc = assay_quantize_write_hf_config(assay_model_file_path(mf), p, keys, vals, rot ? 2 : 0);
        free(p);
    }
    if (rc == ASSAY_OK) rc = assay_quantize_copy_hf_extras(assay_model_file_path(mf), dir);
    return rc;
}

assay_status assay_quantize_rotated_model(const assay_model_file *mf, const assay_quantize_options *opt,
                                          const char *dir, int source_dtype_outside_linears) {
    const assay_model_config *c = assay_model_file_config(mf);
    if (!opt->rotate || strcmp(opt->rotate, "hadamard") != 0)
        return assay_fail(ASSAY_ERR_ARG, "unknown rotation '%s' (known: hadamard)", opt->rotate ? opt->rotate : "");
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: --rotate reads an HF safetensors model; convert the GGUF first",
                          assay_model_file_path(mf));
    if (!is_pow2(c->n_embd))
        return assay_fail(ASSAY_ERR_UNSUPPORTED,
                          "%s: hidden size %lld is not a power of two; --rotate hadamard builds Sylvester Hadamard "
                          "matrices only",
                          assay_model_file_path(mf), (long long)c->n_embd);
    if (c->has_post_norms || c->scale_embeddings)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: --rotate hadamard supports llama/mistral/qwen2/qwen3 blocks (%s "
                          "has norms after the attention and MLP outputs, which do not commute with a rotation)",
                          assay_model_file_path(mf), c->arch);
    float *signs = assay_xmalloc((size_t)c->n_embd * sizeof(float));
    uint64_t st = opt->seed;
    for (int64_t i = 0; i < c->n_embd; i++) signs[i] = (splitmix64(&st) >> 63) ? -1.0f : 1.0f;
    assay_status rc = write_model(mf, dir, ASSAY_TYPE_F32, signs, opt->seed, source_dtype_outside_linears);
    free(signs);
    return rc;
}

assay_status assay_quantize_plain(const assay_quantize_scheme *scheme, const assay_model_file *mf,
                                  const assay_quantize_options *opt, const char *out_path) {
    if (assay_model_file_format(mf) != ASSAY_MODEL_FORMAT_HF)
        return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the %s scheme writes an HF directory from an HF model; use assay "
                          "convert for GGUF files", assay_model_file_path(mf), scheme->name);
    assay_quantize_outdir od;
    assay_status rc = assay_quantize_outdir_begin(&od, out_path, opt->force);
    if (rc != ASSAY_OK) return rc;
    rc = write_model(mf, od.temp_path, (assay_type)scheme->param, NULL, 0, 0);
    if (rc == ASSAY_OK) rc = assay_quantize_outdir_commit(&od);
    else assay_quantize_outdir_abort(&od);
    return rc;
}

/* quantize_gguf.c — a whole model to a GGUF file under one of llama.cpp's quantization mixes (llama-quantize's job).
 *
 * Every tensor is read as float32 (dequantized when the source is already quantized, Q/K rows permuted for HF
 * llama sources), given a type by the mix rules (ggml_mix.c), encoded (ggml_quantize.c, with the importance
 * matrix of that weight when one is given) and written through the GGUF writer. Metadata: a GGUF source keeps
 * all of its keys; an HF source gets convert's keys (assay_convert_gguf_metadata). general.file_type and
 * general.quantization_version are set as llama-quantize sets them, plus quantize.imatrix.* with an imatrix.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assay/dequant.h"
#include "assay/dtype.h"
#include "assay/ggml_quant.h"
#include "assay/gguf.h"
#include "assay/imatrix.h"
#include "assay/model_file.h"
#include "assay/progress.h"
#include "quantize_gguf_internal.h"

#define GGML_QNT_VERSION 2 /* ggml's current quantization format version */

/* Reads tensor t as float32 [nelements]. */
assay_status assay_tensor_read_f32(const assay_tensor *t, float *dst) {
    int64_t n = assay_tensor_nelements(t);
    if (t->permute_heads > 0) {
        void *raw = malloc(t->bytes);
        if (!raw) return assay_fail(ASSAY_ERR_NOMEM, "out of memory reading %s", t->name);
        assay_tensor_copy_rows(t, raw);
        assay_status st = assay_dequantize(t->type, raw, dst, n);
        free(raw);
        return st;
    }
    return assay_dequantize(t->type, t->data, dst, n);
}

typedef struct {
    assay_type type;
    const float *src;
    void *dst;
    int64_t r0, r1, n_per_row;
    const float *imatrix;
    assay_status st;
} qg_job;

static void *qg_worker(void *arg) {
    qg_job *j = arg;
    size_t row_bytes = assay_ggml_quant_bytes(j->type, 1, j->n_per_row);
    j->st = assay_ggml_quantize(j->type, j->src + j->r0 * j->n_per_row, (uint8_t *)j->dst + (size_t)j->r0 * row_bytes,
                                j->r1 - j->r0, j->n_per_row, j->imatrix);
    return NULL;
}

/* Rows split over threads: the encoders are per-row independent, so the bytes do not depend on the split. */
assay_status assay_ggml_quantize_threaded(assay_type type, const float *src, void *dst, int64_t nrow,
                                          int64_t n_per_row, const float *imatrix, int threads) {
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > 64) threads = 64;
    if (threads > nrow) threads = nrow > 0 ? (int)nrow : 1;
    qg_job jobs[64];
    pthread_t th[64];
    for (int k = 0; k < threads; k++) {
        jobs[k] = (qg_job){type, src, dst, nrow * k / threads, nrow * (k + 1) / threads, n_per_row, imatrix, ASSAY_OK};
        if (k) pthread_create(&th[k], NULL, qg_worker, &jobs[k]);
    }
    qg_worker(&jobs[0]);
    assay_status st = jobs[0].st;
    for (int k = 1; k < threads; k++) {
        pthread_join(th[k], NULL);
        if (st == ASSAY_OK) st = jobs[k].st;
    }
    return st;
}

static int qg_layer_of(const char *name) {
    int l;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

assay_status assay_ggml_quantize_model(const assay_model_file *mf, const char *out_path,
                                       const assay_ggml_model_options *o, assay_ggml_model_report *rep) {
    const assay_model_config *c = assay_model_file_config(mf);
    int64_t nt = assay_model_file_tensor_count(mf);
    double t0 = assay_now_seconds();
    assay_ggml_mix mix;
    assay_ggml_mix_init(&mix, o->ftype, (int)c->n_layer, (int)c->n_head, (int)c->n_head_kv);
    mix.has_imatrix = o->imatrix != NULL;
    for (int64_t i = 0; i < nt; i++) assay_ggml_mix_count(&mix, assay_model_file_tensor(mf, i)->name);

    assay_gguf_writer *w = assay_gguf_writer_new();
    assay_status st = ASSAY_OK;
    const assay_gguf *src = assay_model_file_gguf(mf);
    if (src) {
        for (int64_t i = 0; i < assay_gguf_kv_count(src); i++) assay_gguf_writer_set_kv(w, assay_gguf_kv_at(src, i));
        assay_gguf_writer_set_u32(w, "general.file_type", (uint32_t)o->ftype);
    } else {
        st = assay_ggml_hf_metadata(w, mf, (int)o->ftype);
    }
    assay_gguf_writer_set_u32(w, "general.quantization_version", GGML_QNT_VERSION);
    if (o->imatrix) {
        assay_gguf_writer_set_string(w, "quantize.imatrix.file", o->imatrix_path ? o->imatrix_path : "");
        assay_gguf_writer_set_string(w, "quantize.imatrix.dataset", assay_imatrix_dataset(o->imatrix));
        assay_gguf_writer_set_i32(w, "quantize.imatrix.entries_count", (int32_t)assay_imatrix_count(o->imatrix));
        assay_gguf_writer_set_i32(w, "quantize.imatrix.chunks_count", assay_imatrix_chunks(o->imatrix));
    }

    void **bufs = calloc((size_t)nt, sizeof(void *));
    float *f32 = NULL;
    size_t f32_cap = 0;
    int64_t n_imatrix_used = 0;
    uint64_t bytes_out = 0;
    assay_progress bar;
    assay_progress_begin(&bar, "quantize", c->n_layer, "layer");
    for (int64_t i = 0; i < nt && st == ASSAY_OK; i++) {
        const assay_tensor *t = assay_model_file_tensor(mf, i);
        int64_t n = assay_tensor_nelements(t);
        if (f32_cap < (size_t)n) {
            free(f32);
            f32_cap = (size_t)n;
            f32 = malloc(sizeof(float) * f32_cap);
            if (!f32) {
                st = assay_fail(ASSAY_ERR_NOMEM, "out of memory for tensor %s", t->name);
                break;
            }
        }
        assay_type type = assay_ggml_mix_tensor_type(&mix, t->name, t->n_dims, t->ne);
        if (o->is_ignored && o->is_ignored(o->ignore_ctx, t->name, t->source_name)) type = ASSAY_TYPE_F32;
        if (type == ASSAY_TYPE_F32 && t->n_dims >= 2 &&
            (t->type == ASSAY_TYPE_F16 || t->type == ASSAY_TYPE_BF16))
            type = t->type; /* a tensor llama.cpp does not quantize keeps its float type (1-D ones become f32) */
        if (!assay_dequant_row_get(t->type)) {
            st = assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which cannot be read as float", 
                            assay_model_file_path(mf), t->name, assay_type_name(t->type));
            break;
        }
        st = assay_tensor_read_f32(t, f32);
        if (st != ASSAY_OK) break;
        size_t bytes;
        void *out;
        if (assay_ggml_quant_supported(type)) {
            int64_t n_per_row = t->ne[0], nrow = n / n_per_row;
            const float *im = o->imatrix ? assay_imatrix_get(o->imatrix, t->name, n_per_row) : NULL;
            n_imatrix_used += im != NULL;
            bytes = assay_ggml_quant_bytes(type, nrow, n_per_row);
            out = malloc(bytes);
            if (!out) {
                st = assay_fail(ASSAY_ERR_NOMEM, "out of memory for tensor %s", t->name);
                break;
            }
            st = assay_ggml_quantize_threaded(type, f32, out, nrow, n_per_row, im, o->threads);
        } else if (type == ASSAY_TYPE_F16 || type == ASSAY_TYPE_BF16) {
            bytes = (size_t)n * 2;
            out = malloc(bytes);
            if (!out) {
                st = assay_fail(ASSAY_ERR_NOMEM, "out of memory for tensor %s", t->name);
                break;
            }
            if (type == ASSAY_TYPE_F16) assay_f32_to_f16_row(f32, out, n);
            else assay_f32_to_bf16_row(f32, out, n);
        } else {
            type = ASSAY_TYPE_F32;
            bytes = (size_t)n * 4;
            out = f32;
            f32 = NULL;
            f32_cap = 0;
        }
        bufs[i] = out;
        if (st != ASSAY_OK) break;
        st = assay_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, out, bytes);
        bytes_out += bytes;
        if (rep) rep->type_count[type < ASSAY_TYPE_COUNT ? type : 0]++;
        int l = qg_layer_of(t->name);
        if (l >= 0) assay_progress_update(&bar, l);
    }
    assay_progress_update(&bar, c->n_layer);
    assay_progress_end(&bar);
    if (st == ASSAY_OK && o->imatrix && n_imatrix_used == 0)
        st = assay_fail(ASSAY_ERR_ARG, "the importance matrix has no entry matching this model's weights");
    if (st == ASSAY_OK) st = assay_gguf_writer_write(w, out_path, o->overwrite);
    assay_gguf_writer_free(w);
    for (int64_t i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    free(f32);
    if (rep) {
        rep->seconds = assay_now_seconds() - t0;
        rep->tensor_bytes = bytes_out;
        rep->n_fallback = mix.n_fallback;
        rep->n_imatrix_used = n_imatrix_used;
    }
    return st;
}

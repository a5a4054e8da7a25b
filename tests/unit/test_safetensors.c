/* test_safetensors.c — the safetensors reader's checks on hand-built files, the writer round trip, and the
 * house model directory through model_file (hyper-parameters from its README and config.json). */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "assay/file.h"
#include "assay/hf_config.h"
#include "assay/model_file.h"
#include "assay/safetensors.h"
#include "check.h"

/* A file image: 8-byte length, header, data. */
static size_t build(uint8_t *buf, const char *header, const void *data, size_t data_len) {
    size_t n = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    memcpy(buf + 8 + n, data, data_len);
    return 8 + n + data_len;
}

static assay_status parse_header(const char *header, size_t data_len) {
    static uint8_t buf[4096];
    static const uint8_t zeros[256];
    size_t n = build(buf, header, zeros, data_len);
    assay_safetensors *st = NULL;
    assay_status rc = assay_safetensors_parse(&st, buf, n, "t");
    assay_safetensors_close(st);
    return rc;
}

static int error_mentions(const char *what) { return strstr(assay_last_error(), what) != NULL; }

int main(void) {
    /* A valid two-tensor file. */
    uint8_t buf[4096];
    float data[6] = {1, 2, 3, 4, 5, 6};
    size_t n = build(buf,
                     "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}   ",
                     data, sizeof(float) * 6);
    assay_safetensors *st = NULL;
    CHECK_OK(assay_safetensors_parse(&st, buf, n, "mem"));
    CHECK(assay_safetensors_tensor_count(st) == 2);
    const assay_safetensors_tensor *a = assay_safetensors_find(st, "a"), *b = assay_safetensors_find(st, "b");
    CHECK(a && b && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 2 && a->bytes == 16);
    float b1 = 0; /* tensor data has no alignment guarantee in safetensors: read through memcpy */
    if (b) memcpy(&b1, (const char *)b->data + sizeof(float), sizeof b1);
    CHECK(b1 == 6.0f);
    CHECK(strcmp(assay_safetensors_tensor_at(st, 0)->name, "a") == 0); /* file order is data order */
    CHECK(strcmp(assay_json_string(assay_json_get(assay_safetensors_metadata(st), "format"), ""), "pt") == 0);
    CHECK(assay_safetensors_find(st, "c") == NULL);
    assay_safetensors_close(st);

    /* Each structural defect is rejected with a message naming it. */
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("overlap"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("gap"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("truncated"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("need 12"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("twice"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("unknown dtype"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("after the last tensor"));
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4) == ASSAY_ERR_FORMAT);
    CHECK(parse_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 4) ==
          ASSAY_ERR_FORMAT);
    CHECK(parse_header("[1,2]", 0) == ASSAY_ERR_FORMAT);
    CHECK(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4) == ASSAY_ERR_FORMAT);
    CHECK(parse_header("{\"__metadata__\":{\"x\":1}}", 0) == ASSAY_ERR_FORMAT);
    {   /* header length beyond the file */
        uint8_t h[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
        assay_safetensors *x = NULL;
        CHECK(assay_safetensors_parse(&x, h, 10, "t") == ASSAY_ERR_FORMAT && x == NULL);
        CHECK(error_mentions("exceeds the file size"));
        CHECK(assay_safetensors_parse(&x, h, 5, "t") == ASSAY_ERR_FORMAT);
    }
    CHECK(parse_header("{\"\xc3(\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4) == ASSAY_ERR_FORMAT);
    CHECK(error_mentions("UTF-8"));
    CHECK(parse_header("{}", 0) == ASSAY_OK); /* an empty file is valid */
    CHECK(parse_header("{\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,2]},"
                       "\"z\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[2,2]}}", 2) == ASSAY_OK);

    /* Writer round trip: alignment, metadata, every dtype's size. */
    char tmpl[] = "/tmp/assay_st_XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    char *path = assay_path_join(tmpl, "w.safetensors");
    uint16_t bf[3] = {0x3f80, 0x4000, 0xc040};
    uint8_t f8[5] = {1, 2, 3, 4, 5};
    int64_t s3[1] = {3}, s5[2] = {1, 5};
    assay_safetensors_writer *w = assay_safetensors_writer_new();
    assay_safetensors_writer_set_metadata(w, "format", "pt");
    CHECK_OK(assay_safetensors_writer_add(w, "x.bf16", "BF16", 1, s3, bf, sizeof bf));
    CHECK_OK(assay_safetensors_writer_add(w, "y.fp8", "F8_E4M3", 2, s5, f8, sizeof f8));
    CHECK(assay_safetensors_writer_add(w, "y.fp8", "F8_E4M3", 2, s5, f8, sizeof f8) == ASSAY_ERR_ARG);
    CHECK(assay_safetensors_writer_add(w, "z", "F32", 1, s3, bf, sizeof bf) == ASSAY_ERR_ARG);
    CHECK_OK(assay_safetensors_writer_write(w, path, 0));
    CHECK(assay_safetensors_writer_write(w, path, 0) == ASSAY_ERR_IO); /* refuses to overwrite */
    assay_safetensors_writer_free(w);
    CHECK_OK(assay_safetensors_open(&st, path));
    if (st) {
        const assay_safetensors_tensor *x = assay_safetensors_find(st, "x.bf16"), *y = assay_safetensors_find(st, "y.fp8");
        CHECK(x && x->type == ASSAY_TYPE_BF16 && memcmp(x->data, bf, sizeof bf) == 0);
        CHECK(y && y->type == ASSAY_TYPE_F8_E4M3 && y->shape[1] == 5 && memcmp(y->data, f8, 5) == 0);
        CHECK(x && ((uintptr_t)x->data % 8) == 0); /* data section starts 8-byte aligned */
        assay_safetensors_close(st);
    }
    unlink(path);
    rmdir(tmpl);
    free(path);

    /* Config parsing: classic keys, llama3 scaling, qwen2 defaults. */
    assay_json_doc *doc;
    const char *llama3 = "{\"model_type\":\"llama\",\"vocab_size\":128256,\"hidden_size\":4096,\"num_hidden_layers\":32,"
                         "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"intermediate_size\":14336,"
                         "\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,"
                         "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},"
                         "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008],\"tie_word_embeddings\":false}";
    CHECK_OK(assay_json_parse(llama3, strlen(llama3), &doc));
    assay_model_config c;
    CHECK_OK(assay_model_config_from_hf_json(&c, assay_json_root(doc), "llama3"));
    CHECK(c.head_dim == 128 && c.n_head_kv == 8 && c.rope_scaling == ASSAY_ROPE_SCALING_LLAMA3);
    CHECK(c.rope_factor == 8.0 && c.rope_high_freq_factor == 4.0 && c.rope_orig_ctx == 8192 && c.rope_theta == 500000.0);
    CHECK(c.eos_id == 128001 && c.bos_id == 128000 && c.rope_style == ASSAY_ROPE_NORM);
    assay_json_doc_free(doc);
    const char *qwen = "{\"model_type\":\"qwen2\",\"vocab_size\":151936,\"hidden_size\":896,\"num_hidden_layers\":24,"
                       "\"num_attention_heads\":14,\"num_key_value_heads\":2,\"intermediate_size\":4864,"
                       "\"rope_theta\":1000000.0,\"rms_norm_eps\":1e-06,\"tie_word_embeddings\":true}";
    CHECK_OK(assay_json_parse(qwen, strlen(qwen), &doc));
    CHECK_OK(assay_model_config_from_hf_json(&c, assay_json_root(doc), "qwen"));
    CHECK(c.head_dim == 64 && c.has_qkv_bias && c.rope_style == ASSAY_ROPE_NEOX && c.tied_embeddings);
    assay_json_doc_free(doc);
    const char *bad = "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":64,\"num_hidden_layers\":2,"
                      "\"num_attention_heads\":3,\"num_key_value_heads\":2,\"intermediate_size\":8}";
    CHECK_OK(assay_json_parse(bad, strlen(bad), &doc));
    CHECK(assay_model_config_from_hf_json(&c, assay_json_root(doc), "bad") == ASSAY_ERR_FORMAT);
    assay_json_doc_free(doc);

    char nm[96];
    CHECK(assay_hf_to_gguf_name("model.layers.12.self_attn.k_proj.weight", "llama", nm, sizeof nm) &&
          strcmp(nm, "blk.12.attn_k.weight") == 0);
    CHECK(assay_gguf_to_hf_name("blk.3.ffn_down.weight", "qwen3", nm, sizeof nm) &&
          strcmp(nm, "model.layers.3.mlp.down_proj.weight") == 0);
    CHECK(!assay_hf_to_gguf_name("model.layers.1.self_attn.rotary_emb.inv_freq", "llama", nm, sizeof nm));

    /* The house model (values from its README / config.json). */
    assay_model_file *mf = NULL;
    CHECK_OK(assay_model_file_open(&mf, check_shared_path("models/house")));
    if (mf) {
        const assay_model_config *hc = assay_model_file_config(mf);
        CHECK(strcmp(hc->arch, "llama") == 0 && hc->n_layer == 7 && hc->n_embd == 512 && hc->n_head == 8);
        CHECK(hc->n_head_kv == 2 && hc->head_dim == 64 && hc->n_ff == 1408 && hc->n_vocab == 8192);
        CHECK(hc->rope_theta == 10000.0 && hc->norm_eps == 1e-5 && !hc->tied_embeddings && hc->n_ctx_train == 2048);
        CHECK(assay_model_file_tensor_count(mf) == 66);
        int64_t params = 0;
        for (int64_t i = 0; i < assay_model_file_tensor_count(mf); i++)
            params += assay_tensor_nelements(assay_model_file_tensor(mf, i));
        CHECK(params == 28122624);
        const assay_tensor *q = assay_model_file_find(mf, "blk.0.attn_q.weight");
        const assay_tensor *k = assay_model_file_find(mf, "blk.6.attn_k.weight");
        const assay_tensor *v = assay_model_file_find(mf, "blk.6.attn_v.weight");
        CHECK(q && q->ne[0] == 512 && q->ne[1] == 512 && q->permute_heads == 8 && q->type == ASSAY_TYPE_BF16);
        CHECK(k && k->ne[0] == 512 && k->ne[1] == 128 && k->permute_heads == 2);
        CHECK(v && v->permute_heads == 0);
        if (k) {
            /* Head 0 of k: destination rows 0,1,2,3 come from source rows 0,32,1,33 (head_dim 64). */
            uint8_t *dst = malloc(k->bytes);
            assay_tensor_copy_rows(k, dst);
            size_t rb = 512 * 2;
            const uint8_t *src = k->data;
            CHECK(memcmp(dst + 0 * rb, src + 0 * rb, rb) == 0 && memcmp(dst + 1 * rb, src + 32 * rb, rb) == 0);
            CHECK(memcmp(dst + 2 * rb, src + 1 * rb, rb) == 0 && memcmp(dst + 3 * rb, src + 33 * rb, rb) == 0);
            CHECK(memcmp(dst + 64 * rb, src + 64 * rb, rb) == 0 && memcmp(dst + 127 * rb, src + 127 * rb, rb) == 0);
            free(dst);
        }
        CHECK(assay_model_file_find(mf, "output.weight") != NULL);
        CHECK(assay_model_file_tokenizer_json(mf) != NULL);
        CHECK(assay_model_file_chat_template(mf) == NULL);
        assay_model_file_close(mf);
    }
    CHECK(assay_model_file_open(&mf, "/nonexistent/model") == ASSAY_ERR_IO);
    return check_finish("safetensors");
}

/* cmd_run.c — `assay run MODEL -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--chat]
 * [--threads N] [--kv-cache-dtype T] [--quantization fp8] [--ctx-size N] [--ignore-eos]`.
 * Prints the prompt and then each generated token's bytes to stdout as they come; prompt and generation speed
 * go to stderr. --temp 0 is greedy decoding. --chat renders the prompt as a user turn with the model's chat template
 * (chat_template.h) and does not echo it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/chat_template.h"
#include "assay/model.h"
#include "assay/progress.h"
#include "assay/sampler.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "cli.h"
#include "commands.h"

/* The prompt as one user turn in the model's chat template, with the generation prompt opened. */
static assay_status chat_render(const assay_model *m, const assay_tokenizer *tok, const char *prompt, assay_strbuf *out,
                                int *writes_bos) {
    const assay_model_file *mf = assay_model_get_file(m);
    const char *tmpl = assay_model_file_chat_template(mf);
    if (!tmpl) return assay_fail(ASSAY_ERR_UNSUPPORTED, "%s: the model has no chat template", assay_model_file_path(mf));
    char bos[256] = "", eos[256] = "";
    size_t len;
    const char *p;
    if (assay_tokenizer_bos(tok) >= 0 && (p = assay_tokenizer_piece(tok, assay_tokenizer_bos(tok), &len)) && len < sizeof bos)
        memcpy(bos, p, len), bos[len] = 0;
    if (assay_tokenizer_eos(tok) >= 0 && (p = assay_tokenizer_piece(tok, assay_tokenizer_eos(tok), &len)) && len < sizeof eos)
        memcpy(eos, p, len), eos[len] = 0;
    assay_chat_template *ct;
    assay_status st = assay_chat_template_parse(&ct, tmpl, bos[0] ? bos : NULL, eos[0] ? eos : NULL);
    if (st) return st;
    const assay_chat_message msg = {"user", prompt};
    st = assay_chat_template_render(ct, &msg, 1, 1, out);
    *writes_bos = assay_chat_template_writes_bos(ct);
    assay_chat_template_free(ct);
    return st;
}

static void emit(const assay_tokenizer *tok, int32_t id, int after_bos_spm) {
    if (assay_tokenizer_token_type(tok, id) == ASSAY_TOKEN_CONTROL) return;
    size_t len;
    const char *b = assay_tokenizer_token_bytes(tok, id, &len);
    /* SentencePiece marks word starts with a space; the first word after BOS has none in the text */
    if (after_bos_spm && len > 0 && b[0] == ' ') b++, len--;
    fwrite(b, 1, len, stdout);
    fflush(stdout);
}

int assay_cmd_run(int argc, char **argv) {
    const char *prompt = NULL, *kv_name = "f16";
    int64_t n_predict = 128, top_k = 40, seed = 0, threads = 0, n_ctx = 0;
    double temp = 0.8, top_p = 0.95, min_p = 0.05;
    int chat = 0, ignore_eos = 0, calc_kv = 0;
    int64_t kv_scale_tokens = 1024;
    const char *quant = NULL;
    const cli_option opts[] = {
        {"-p", "--prompt", CLI_STRING, &prompt, "TEXT", "the prompt (\"\" : start from BOS alone)"},
        {"-n", "--n-predict", CLI_INT, &n_predict, "N", "tokens to generate (default 128)"},
        {NULL, "--temp", CLI_FLOAT, &temp, "T", "temperature; 0 = greedy (default 0.8)"},
        {NULL, "--top-k", CLI_INT, &top_k, "K", "keep the K most likely tokens; 0 = off (default 40)"},
        {NULL, "--top-p", CLI_FLOAT, &top_p, "P", "nucleus: smallest set reaching probability P; 1 = off (default 0.95)"},
        {NULL, "--min-p", CLI_FLOAT, &min_p, "P", "drop tokens below P x the top probability; 0 = off (default 0.05)"},
        {NULL, "--seed", CLI_INT, &seed, "S", "random seed: same seed, same text (default 0)"},
        {NULL, "--chat", CLI_FLAG, &chat, NULL, "wrap the prompt as a user turn of the model's chat format"},
        {"-t", "--threads", CLI_INT, &threads, "N", "CPU threads (default: all cores)"},
        {NULL, "--kv-cache-dtype", CLI_STRING, &kv_name, "T", "f16 (default), bf16, f32, fp8_e4m3, fp8_e5m2, int8"},
        {NULL, "--calculate-kv-scales", CLI_FLAG, &calc_kv, NULL,
         "8-bit KV: per-layer k/v scales from the running max of the first --kv-scale-tokens tokens"},
        {NULL, "--kv-scale-tokens", CLI_INT, &kv_scale_tokens, "N", "tokens --calculate-kv-scales observes (default 1024)"},
        {"-q", "--quantization", CLI_STRING, &quant, "SCHEME", "quantize the weights at load: fp8 (E4M3, vLLM's online fp8)"},
        {"-c", "--ctx-size", CLI_INT, &n_ctx, "N", "context length (default: prompt + n-predict)"},
        {NULL, "--ignore-eos", CLI_FLAG, &ignore_eos, NULL, "keep generating after an end-of-generation token"},
        {0}};
    const cli_spec spec = {"run", "MODEL -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--chat]",
                           "generate text, streaming, with tok/s at the end", opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    if (!prompt) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "-p TEXT is required");
    }
    if (n_predict < 0 || top_k < 0 || temp < 0 || threads < 0 || n_ctx < 0 || kv_scale_tokens < 1) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "-n, --top-k, --temp, --threads and --ctx-size must not be negative, "
                                      "--kv-scale-tokens must be positive");
    }
    assay_kv_dtype kv_dtype;
    if (assay_kv_dtype_from_name(kv_name, &kv_dtype) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "%s", assay_last_error());
    }
    if (quant && assay_model_quantization_check(quant) != ASSAY_OK) {
        cli_args_free(&args);
        return cli_usage_error(&spec, "--quantization: %s", assay_last_error());
    }
    const char *path = args.positional[0];
    assay_model *m = NULL;
    assay_tokenizer *tok = NULL;
    assay_session *s = NULL;
    assay_sampler *sm = NULL;
    assay_tokens ids = {0};
    assay_strbuf text = {0};
    float *logits = NULL;
    int exit_code = CLI_EXIT_ERROR;
    assay_model_options mo;
    assay_model_options_default(&mo);
    mo.n_threads = (int)threads;
    mo.quantization = quant;
    double t_load = assay_now_seconds();
    if (assay_model_load(&m, path, &mo) != ASSAY_OK || assay_tokenizer_load(&tok, path) != ASSAY_OK) goto done;
    t_load = assay_now_seconds() - t_load;
    const assay_model_config *c = assay_model_get_config(m);
    const char *p = prompt;
    int writes_bos = 0;
    if (chat) {
        if (chat_render(m, tok, prompt, &text, &writes_bos) != ASSAY_OK) goto done;
        p = text.data;
    }
    int flags = (chat ? ASSAY_TOK_PARSE_SPECIAL : 0) | (writes_bos ? 0 : ASSAY_TOK_ADD_SPECIAL);
    if (assay_tokenizer_encode(tok, p, strlen(p), flags, &ids) != ASSAY_OK) goto done;
    if (ids.n == 0) { /* an empty prompt without BOS: start from BOS anyway, or there is nothing to condition on */
        int32_t bos = assay_tokenizer_bos(tok);
        if (bos < 0) {
            assay_fail(ASSAY_ERR_ARG, "empty prompt and the model has no BOS token");
            goto done;
        }
        assay_tokens_push(&ids, bos);
    }
    int64_t n_prompt = ids.n;
    assay_session_options so;
    assay_session_options_default(&so);
    so.kv_dtype = kv_dtype;
    so.kv_calc_tokens = calc_kv ? kv_scale_tokens : 0;
    so.n_ctx = n_ctx > 0 ? n_ctx : n_prompt + n_predict;
    if (so.n_ctx < n_prompt + n_predict) {
        assay_fail(ASSAY_ERR_RANGE, "prompt (%lld tokens) + %lld new tokens exceed the context of %lld", (long long)n_prompt,
                   (long long)n_predict, (long long)so.n_ctx);
        goto done;
    }
    if (assay_session_open(&s, m, &so) != ASSAY_OK) goto done;
    fprintf(stderr, "assay run: %s\n", assay_session_kv_scales_desc(s));
    assay_sampler_params sp = {(float)temp, (int)top_k, (float)top_p, (float)min_p, (uint64_t)seed};
    sm = assay_sampler_new(&sp, c->n_vocab);
    logits = assay_xmalloc((size_t)c->n_vocab * sizeof(float));
    int spm = assay_tokenizer_get_kind(tok) == ASSAY_TOKENIZER_SPM;
    if (!chat)
        for (int64_t i = 0; i < n_prompt; i++) emit(tok, ids.ids[i], spm && i > 0 && ids.ids[i - 1] == assay_tokenizer_bos(tok));

    int32_t *pos = assay_xmalloc((size_t)(n_prompt + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < n_prompt; i++) pos[i] = (int32_t)i;
    double t0 = assay_now_seconds();
    assay_batch b = {n_prompt, ids.ids, pos, NULL, NULL};
    assay_status st = assay_session_forward(s, &b, logits);
    free(pos);
    if (st) goto done;
    double t_prompt = assay_now_seconds() - t0;
    int64_t n_gen = 0;
    int32_t prev = ids.ids[n_prompt - 1];
    t0 = assay_now_seconds();
    for (; n_gen < n_predict; n_gen++) {
        int32_t next = assay_sampler_sample(sm, logits);
        if (!ignore_eos && assay_tokenizer_is_eog(tok, next)) break;
        emit(tok, next, spm && !chat && prev == assay_tokenizer_bos(tok));
        prev = next;
        if (n_gen + 1 == n_predict) {
            n_gen++;
            break;
        }
        int32_t ps = (int32_t)(n_prompt + n_gen);
        assay_batch bd = {1, &next, &ps, NULL, NULL};
        if ((st = assay_session_forward(s, &bd, logits))) goto done;
    }
    double t_gen = assay_now_seconds() - t0;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "assay run: load %.2f s; prompt %lld tokens in %.3f s (%.1f tok/s); generation %lld tokens in %.3f s "
                    "(%.1f tok/s); %s kernels, KV %s\n",
            t_load, (long long)n_prompt, t_prompt, n_prompt / (t_prompt > 0 ? t_prompt : 1e-9), (long long)n_gen, t_gen,
            n_gen > 1 ? (n_gen - 1) / (t_gen > 0 ? t_gen : 1e-9) : 0.0, assay_model_kernels(m), assay_kv_dtype_name(kv_dtype));
    if (calc_kv) {
        char line[4096];
        assay_session_kv_scales_format(s, line, sizeof line);
        fprintf(stderr, "assay run: KV calculated %s\n", line);
    }
    exit_code = CLI_EXIT_OK;
done:
    if (exit_code != CLI_EXIT_OK) cli_report_error("run");
    free(logits);
    assay_sampler_free(sm);
    assay_session_close(s);
    assay_tokens_free(&ids);
    assay_strbuf_free(&text);
    assay_tokenizer_free(tok);
    assay_model_free(m);
    cli_args_free(&args);
    return exit_code;
}

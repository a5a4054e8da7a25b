/* cmd_run.c — `assay run MODEL {-p TEXT | -f FILE} [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]
 * [--chat] [--ctx-size N] [--ignore-eos] [engine flags]`: one request through the serving engine (engine.h).
 * -f - reads the prompt from standard input. Without --seed (or with --seed -1) the seed is random and printed.
 * Prints the prompt and then each generated token's bytes to stdout as they come; prompt and generation speed
 * go to stderr. --temp 0 is greedy decoding. --chat renders the prompt as a user turn with the model's chat template
 * (chat_template.h) and does not echo it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/chat_template.h"
#include "assay/engine.h"
#include "assay/model.h"
#include "assay/progress.h"
#include "assay/strbuf.h"
#include "assay/tokenizer.h"
#include "cli.h"
#include "commands.h"
#include "engine_cli.h"

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
    const char *prompt = NULL, *file = NULL;
    int64_t n_predict = 128, top_k = 40, n_ctx = 0;
    double temp = 0.8, top_p = 0.95, min_p = 0.05;
    int chat = 0, ignore_eos = 0;
    engine_cli ec;
    engine_cli_init(&ec);
    ec.max_num_seqs = 1;
    ec.seed = -1; /* like llama.cpp: a random seed unless one is given */
    ec.seed_help = "sampling seed: same seed, same text (default -1: a random one, printed)";
    const cli_option opts[] = {
        {"-p", "--prompt", CLI_STRING, &prompt, "TEXT", "the prompt (\"\" : start from BOS alone)"},
        {"-f", "--file", CLI_STRING, &file, "FILE", "read the prompt from FILE (-: standard input)"},
        {"-n", "--n-predict", CLI_INT, &n_predict, "N", "tokens to generate (default 128)", CLI_AT_LEAST(1)},
        {NULL, "--temp", CLI_FLOAT, &temp, "T", "temperature; 0 = greedy (default 0.8)", CLI_AT_LEAST(0)},
        {NULL, "--top-k", CLI_INT, &top_k, "K", "keep the K most likely tokens; 0 = off (default 40)", CLI_AT_LEAST(0)},
        {NULL, "--top-p", CLI_FLOAT, &top_p, "P", "nucleus: smallest set reaching probability P; 1 = off (default 0.95)",
         CLI_IN_OPEN_CLOSED(0, 1)},
        {NULL, "--min-p", CLI_FLOAT, &min_p, "P", "drop tokens below P x the top probability; 0 = off (default 0.05)",
         CLI_IN(0, 1)},
        {NULL, "--chat", CLI_FLAG, &chat, NULL, "wrap the prompt as a user turn of the model's chat format"},
        {"-c", "--ctx-size", CLI_INT, &n_ctx, "N", "context length (default 0: prompt + n-predict; same as --max-model-len)",
         CLI_AT_LEAST(0)},
        {NULL, "--ignore-eos", CLI_FLAG, &ignore_eos, NULL, "keep generating after an end-of-generation token"},
        ENGINE_CLI_OPTIONS(ec),
        {0}};
    const cli_spec spec = {"run", "MODEL {-p TEXT | -f FILE} [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--chat]",
                           "generate text, streaming, with tok/s at the end", opts, 1, 1};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args);
    if (rc != CLI_CONTINUE) return rc;
    assay_engine_args ea;
    if (!prompt && !file) rc = cli_usage_error(&spec, "give the prompt: -p TEXT, or -f FILE (-f -: standard input)");
    else if (prompt && file) rc = cli_usage_error(&spec, "-p TEXT and -f FILE exclude each other");
    else {
        if (temp == 0 && ec.seed == -1) ec.seed = 0; /* greedy: no seed to draw or to print */
        rc = engine_cli_args(&ec, &spec, args.positional[0], &ea);
    }
    if (rc != CLI_CONTINUE) {
        cli_args_free(&args);
        return rc;
    }
    if (n_ctx > 0) ea.max_model_len = n_ctx;
    const char *path = args.positional[0];
    assay_model *m = NULL;
    assay_tokenizer *tok = NULL;
    assay_engine *e = NULL;
    assay_tokens ids = {0};
    assay_strbuf text = {0};
    char *file_text = NULL;
    int exit_code = CLI_EXIT_ERROR;
    if (file) {
        if (cli_read_text("run", file, &file_text, NULL) != 0) {
            cli_args_free(&args);
            return CLI_EXIT_ERROR;
        }
        prompt = file_text;
    }
    assay_model_options mo;
    assay_engine_args_model_options(&ea, &mo);
    double t_load = assay_now_seconds();
    if (assay_model_load(&m, path, &mo) != ASSAY_OK || assay_tokenizer_load(&tok, path) != ASSAY_OK) goto done;
    t_load = assay_now_seconds() - t_load;
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
    int64_t n_prompt = ids.n, train = assay_model_get_config(m)->n_ctx_train;
    const char *ctx_flag = n_ctx > 0 ? "-c/--ctx-size" : "--max-model-len";
    if (ea.max_model_len > 0 && train > 0 && ea.max_model_len > train) {
        assay_fail(ASSAY_ERR_RANGE, "%s %lld is longer than the model's context of %lld tokens", ctx_flag,
                   (long long)ea.max_model_len, (long long)train);
        goto done;
    }
    if (ea.max_model_len <= 0) {
        ea.max_model_len = n_prompt + n_predict;
        if (train > 0 && ea.max_model_len > train) {
            assay_fail(ASSAY_ERR_RANGE, "prompt (%s) + -n/--n-predict %lld = %lld tokens exceed the model's context of %lld "
                       "tokens", cli_count(n_prompt, "token", "tokens").s, (long long)n_predict, (long long)(n_prompt + n_predict),
                       (long long)train);
            goto done;
        }
    } else if (n_prompt + n_predict > ea.max_model_len) {
        assay_fail(ASSAY_ERR_RANGE, "prompt (%s) + -n/--n-predict %lld = %lld tokens exceed %s %lld",
                   cli_count(n_prompt, "token", "tokens").s, (long long)n_predict, (long long)(n_prompt + n_predict), ctx_flag,
                   (long long)ea.max_model_len);
        goto done;
    }
    if (assay_engine_open_model(&e, m, tok, &ea) != ASSAY_OK) goto done;
    /* which scales an 8-bit KV cache uses matters to its quality: always said; the rest only with -v */
    if (ec.verbose || assay_kv_dtype_scaled(ea.kv_cache_dtype)) fprintf(stderr, "assay run: %s\n", assay_engine_describe(e));
    assay_sampling_params sp;
    assay_sampling_params_default(&sp);
    sp.temperature = (float)temp;
    sp.top_k = (int)top_k;
    sp.top_p = (float)top_p;
    sp.min_p = (float)min_p;
    sp.has_seed = 1;
    sp.seed = ea.seed;
    sp.max_tokens = n_predict;
    sp.ignore_eos = ignore_eos;
    int64_t id;
    if (assay_engine_add_request(e, ids.ids, n_prompt, &sp, &id) != ASSAY_OK) goto done;
    int spm = assay_tokenizer_get_kind(tok) == ASSAY_TOKENIZER_SPM;
    if (!chat)
        for (int64_t i = 0; i < n_prompt; i++) emit(tok, ids.ids[i], spm && i > 0 && ids.ids[i - 1] == assay_tokenizer_bos(tok));
    /* the step that finishes the prompt samples the first token; the steps after it are the generation */
    int64_t n_gen = 0;
    int32_t prev = ids.ids[n_prompt - 1];
    double t0 = assay_now_seconds(), t_prompt = 0;
    while (assay_engine_has_unfinished(e)) {
        const assay_request_output *o;
        int64_t n_out;
        if (assay_engine_step(e, &o, &n_out) != ASSAY_OK) goto done;
        for (int64_t i = 0; i < n_out; i++)
            for (int64_t j = 0; j < o[i].n_new; j++) {
                int32_t next = o[i].new_tokens[j];
                if (n_gen++ == 0) t_prompt = assay_now_seconds() - t0;
                /* the end-of-generation token that stopped it is not printed */
                if (o[i].finish == ASSAY_FINISH_STOP && next == o[i].stop_token) n_gen--;
                else emit(tok, next, spm && !chat && prev == assay_tokenizer_bos(tok));
                prev = next;
            }
    }
    double t_gen = assay_now_seconds() - t0 - t_prompt;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "assay run: load %.2f s; prompt %s in %.3f s (%.1f tok/s); generation %s in %.3f s "
                    "(%.1f tok/s); %s kernels, KV %s\n",
            t_load, cli_count(n_prompt, "token", "tokens").s, t_prompt, n_prompt / (t_prompt > 0 ? t_prompt : 1e-9), cli_count(n_gen, "token", "tokens").s, t_gen,
            n_gen > 1 ? (n_gen - 1) / (t_gen > 0 ? t_gen : 1e-9) : 0.0, assay_model_kernels(m),
            assay_kv_dtype_name(ea.kv_cache_dtype));
    exit_code = CLI_EXIT_OK;
done:
    if (exit_code != CLI_EXIT_OK) cli_report_error("run");
    assay_engine_close(e);
    assay_tokens_free(&ids);
    assay_strbuf_free(&text);
    free(file_text);
    assay_tokenizer_free(tok);
    assay_model_free(m);
    cli_args_free(&args);
    return exit_code;
}

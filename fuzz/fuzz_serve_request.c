/* fuzz_serve_request.c — libFuzzer harness for the server's request parser (src/server/request.c): the bytes of a
 * POST body, read both as a /v1/completions and as a /v1/chat/completions body (UTF-8 check, JSON, parameters,
 * prompts tokenized with the house model's tokenizer, chat messages rendered with the chatml template), exactly as
 * the server reads them, without a socket or an engine.
 *   bash scripts/fuzz.sh 300      (seeds: fuzz/corpus/fuzz_serve_request; dictionary: fuzz/fuzz_serve_request.dict)
 * Whatever the bytes, the parser must refuse with 400 or 404 and a message, or hand over engine requests the
 * engine's own checks accept: a prompt of 1 .. context-1 tokens inside the vocabulary, room in the context for
 * max_tokens, sampling parameters and logprobs in range, stop strings and ids as many as announced. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/chat_template.h"
#include "assay/file.h"
#include "assay/tokenizer.h"
#include "server/request.h"

#define CONTEXT 256 /* small, so prompts past the context are within the fuzzer's reach */

static serve_model model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[4096];
    snprintf(path, sizeof path, "%s/models/house", assay_shared_dir());
    static assay_tokenizer *tok;
    static assay_chat_template *ct;
    if (assay_tokenizer_load(&tok, path) != ASSAY_OK || assay_chat_template_builtin(&ct, "chatml", NULL, NULL) != ASSAY_OK) {
        fprintf(stderr, "fuzz_serve_request: %s\n", assay_last_error());
        exit(1);
    }
    model = (serve_model){tok, NULL, ct, NULL, "house", CONTEXT, assay_tokenizer_n_vocab(tok)};
    return 0;
}

static void check_accepted(const gen_request *g) {
    const call *c = g->c;
    if (!c || g->n < 1 || c->n < 1 || c->n > MAX_CHOICES || c->n % g->n) __builtin_trap();
    for (int i = 0; i < c->n; i++) {
        const sreq *r = &c->reqs[i];
        const assay_sampling_params *sp = &r->sp;
        if (r->c != c || r->index != i || r->sample != i % g->n) __builtin_trap();
        if (r->n_prompt < 1 || r->n_prompt >= CONTEXT || !r->prompt || !r->prompt_text) __builtin_trap();
        for (int64_t k = 0; k < r->n_prompt; k++)
            if (r->prompt[k] < 0 || r->prompt[k] >= model.n_vocab) __builtin_trap();
        if (sp->max_tokens < 1 || (!sp->prompt_only && r->n_prompt + sp->max_tokens > CONTEXT)) __builtin_trap();
        if (!(sp->temperature >= 0) || !isfinite(sp->temperature) || !(sp->top_p > 0 && sp->top_p <= 1) ||
            !(sp->min_p >= 0 && sp->min_p <= 1) || sp->top_k < -1 || sp->min_tokens < 0)
            __builtin_trap();
        if (sp->logprobs < -1 || sp->logprobs > 20 || sp->prompt_logprobs < -1 || sp->prompt_logprobs > 20) __builtin_trap();
        if (sp->n_stop < 0 || (sp->n_stop > 0 && !sp->stop)) __builtin_trap();
        for (int k = 0; k < sp->n_stop; k++)
            if (!sp->stop[k]) __builtin_trap();
        if (sp->n_stop_token_ids < 0 || (sp->n_stop_token_ids > 0 && !sp->stop_token_ids)) __builtin_trap();
        for (int k = 0; k < sp->n_stop_token_ids; k++)
            if (sp->stop_token_ids[k] < 0 || sp->stop_token_ids[k] >= model.n_vocab) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int chat = 0; chat < 2; chat++) {
        gen_request g;
        req_error er = {0};
        if (serve_parse_body(&model, (const char *)data, size, chat, &g, &er)) check_accepted(&g);
        else if ((er.status != 400 && er.status != 404) || !er.msg[0]) __builtin_trap(); /* a status and a message */
        if (g.c) serve_call_free(g.c);
    }
    return 0;
}

/* bench.h — offline throughput of the engine: prompt (prefill) and generation (decode) tokens per second at
 * several batch sizes, several sequences per batch, median of repeats. Used by `assay decide` (baseline and
 * candidate measured the same way on the same machine) and `assay bench`.
 *
 *   assay_bench_options bo;
 *   assay_bench_options_default(&bo);                // batches 1,4; 256 prompt + 32 generated tokens; 3 repeats
 *   assay_bench_result r;
 *   if (assay_bench_model(model, &session_options, &bo, &r) != ASSAY_OK) ... assay_last_error()
 *   r.points[i].batch, .prefill_tps, .decode_tps (medians), .prefill_s / .decode_s (median seconds)
 *
 * Method, per batch size B, through the serving engine (engine.h) on the given model: B requests of n_prompt tokens
 * submitted at once, greedy (or sampled as the options say), each generating n_gen + 1 tokens, prefix caching off:
 *   prefill: the steps until every request has its first token (the prompts go through in chunks of the token
 *            budget, so.n_batch, default 512; logits of each prompt's last token only) -> B * n_prompt / seconds;
 *   decode:  the n_gen steps after that, one token per request each (the greedy pick included, as generation
 *            does) -> B * n_gen / seconds;
 *   a short warm-up request first pages the mmapped weights in. Prompt tokens are a fixed sequence spread over the
 *   vocabulary (speed does not depend on the text), different per sequence. Wall-clock time: on a shared machine the
 *   spread (min..max) is reported beside the median.
 */
#ifndef ASSAY_BENCH_H
#define ASSAY_BENCH_H

#include <stdint.h>

#include "assay/model.h"
#include "assay/status.h"
#include "assay/strbuf.h"

enum { ASSAY_BENCH_MAX_POINTS = 8 };

typedef struct assay_bench_options {
    int n_batches;
    int batches[ASSAY_BENCH_MAX_POINTS]; /* sequences per batch */
    int64_t n_prompt;                    /* prompt tokens per sequence */
    int64_t n_gen;                       /* generated tokens per sequence */
    int reps;                            /* repeats; the median is reported */
    /* sampling of the generated tokens: temp 0 (default) is greedy; otherwise temperature, top-k, top-p and min-p as
     * the engine applies them (sampling's cost against greedy's) */
    float temp, top_p, min_p;
    int top_k;
} assay_bench_options;

typedef struct assay_bench_point {
    int batch;
    double prefill_tps, decode_tps;           /* medians */
    double prefill_s, decode_s;               /* median seconds of one repeat */
    double prefill_tps_min, prefill_tps_max;  /* spread over the repeats */
    double decode_tps_min, decode_tps_max;
} assay_bench_point;

typedef struct assay_bench_result {
    int n_points;
    assay_bench_point points[ASSAY_BENCH_MAX_POINTS];
    int64_t n_prompt, n_gen;
    int reps;
} assay_bench_result;

void assay_bench_options_default(assay_bench_options *o);
/* "1,4,8" -> o->batches; ASSAY_ERR_ARG on anything but 1..8 positive integers in [1, 256]. */
assay_status assay_bench_parse_batches(const char *text, assay_bench_options *o);
/* so: the session options of the configuration measured (its KV-cache type); n_ctx / n_seq are set here. */
assay_status assay_bench_model(assay_model *m, const assay_session_options *so, const assay_bench_options *o,
                               assay_bench_result *out);
/* {"n_prompt": ..., "n_gen": ..., "reps": ..., "points": [{"batch": 1, "prefill_tps": ...}, ...]} */
void assay_bench_result_json(const assay_bench_result *r, assay_strbuf *out);

#endif

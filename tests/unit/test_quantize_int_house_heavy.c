/* test_quantize_int_house_heavy.c — the house model to int4-gptq (act-order, g_idx) and int4-awq (GEMM) with a
 * small calibration run, then tests/py/intq_model_oracle.py checks the checkpoints with independent numpy code:
 * config.json's quantization_config, the documented packing, the error bounds each method guarantees
 * (RTN: |w - ŵ| <= scale/2 per group; INT8: <= scale/2 per row after undoing the SmoothQuant scales folded into
 * the norms), and that every other tensor is the source's. GPTQ codes are checked against the error bound of RTN on the compensated weights, AWQ through the folded scales.
 * GPTQ's and AWQ's two calibration routes (cached layer inputs, engine passes) must give the same checkpoints. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "assay/quantize_int.h"
#include "check.h"

int main(void) {
    const char *build = getenv("ASSAY_BUILD_DIR"), *py = getenv("ASSAY_PYTHON"), *src = getenv("ASSAY_SOURCE_DIR");
    if (!build || !py || !src) return fprintf(stderr, "run through ctest\n"), 1;
    char house[4096], out[4096], cmd[16384];
    snprintf(house, sizeof house, "%s", check_shared_path("models/house"));
    /* gptq-cached / gptq-engine: GPTQ without act-order (whose column order follows diag(H) and so reshuffles the
     * groups on float-rounding differences) with its sequential calibration on the cached layer inputs and through
     * the engine (truncated forwards from the embeddings): the two routes must pick nearly the same codes */
    /* awq-cached / awq-engine: AWQ on the cached residual stream and from the engine's hooks, both scoring every
     * calibration token (2 x 128: awq_tokens 256 keeps them all, awq_seqs 2 both sequences) */
    const char *names[] = {"gptq", "awq", "gptq-cached", "gptq-engine", "awq-cached", "awq-engine"};
    assay_intq_method methods[] = {ASSAY_INTQ_GPTQ, ASSAY_INTQ_AWQ, ASSAY_INTQ_GPTQ, ASSAY_INTQ_GPTQ, ASSAY_INTQ_AWQ,
                                   ASSAY_INTQ_AWQ};
    for (int i = 0; i < 6; i++) {
        assay_intq_options o;
        assay_intq_options_default(&o, methods[i]);
        o.seq_engine = i == 3;
        if (i == 2 || i == 3) o.act_order = 0;
        o.calib_chunks = 2;
        o.calib_seq_len = 128;
        o.threads = 2;
        o.awq_tokens = 128; /* a lighter AWQ search than the default (4096 rows, 20 grid points) keeps CI short */
        o.awq_grid = 10;
        if (i >= 4) {
            o.awq_cached = i == 4;
            o.awq_tokens = 256;
            o.awq_seqs = 2;
        }
        o.calib_path = check_shared_path("data/calibration/shakespeare-macbeth.txt");
        snprintf(out, sizeof out, "%s/house-%s", build, names[i]);
        mkdir(out, 0755);
        CHECK_OK(assay_intq_quantize_model(house, out, &o, NULL));
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/intq_model_oracle.py' '%s' gptq:%s/house-gptq awq:%s/house-awq "
             "same:%s/house-gptq-cached,%s/house-gptq-engine sameawq:%s/house-awq-cached,%s/house-awq-engine", py, src,
             house, build, build, build, build, build, build);
    CHECK(system(cmd) == 0);
    return check_finish("quantize_int_house_heavy");
}

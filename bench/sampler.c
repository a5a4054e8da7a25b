/* bench_sampler — the cost of one sampled token against greedy's, on logits shaped like a language model's
 * (a few strong candidates over a long tail), for a vocabulary size given on the command line:
 *
 *   build/bench_sampler [N_VOCAB] [DRAWS] [CASE]   (default 49152 = SmolLM2's vocabulary, 2000 draws, every case)
 *
 * Prints microseconds per draw for greedy and for each filter setting (run's defaults: temperature 0.8, top-k 40,
 * top-p 0.95, min-p 0.05; top-p alone; temperature alone), and the ratio to greedy. Compare with the decode time per
 * token of `assay bench` on the same model: a draw costs that much on top of every generated token. For instruction
 * counts that do not depend on the machine's load: valgrind --tool=callgrind build/bench_sampler 49152 200. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "assay/progress.h"
#include "assay/sampler.h"
#include "assay/status.h"

int main(int argc, char **argv) {
    int64_t V = argc > 1 ? atoll(argv[1]) : 49152;
    int draws = argc > 2 ? atoi(argv[2]) : 2000;
    int only = argc > 3 ? atoi(argv[3]) : -1; /* one case (0 = greedy), e.g. for callgrind */
    uint64_t st = 12345;
    /* a long tail of N(0, 1.5) logits with a handful of candidates 6-12 above it, different every draw */
    enum { N_SETS = 16 };
    float *sets = malloc((size_t)V * N_SETS * sizeof(float));
    for (int k = 0; k < N_SETS; k++)
        for (int64_t i = 0; i < V; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            double u1 = ((st >> 11) + 0.5) / 9007199254740992.0;
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            double u2 = ((st >> 11) + 0.5) / 9007199254740992.0;
            float g = (float)(1.5 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
            if (i % 9973 == (int64_t)k) g += 6.0f + (float)(i % 7);
            sets[(size_t)k * V + i] = g;
        }
    struct { const char *name; assay_sampler_params p; } cases[] = {
        {"greedy", {0, 0, 1, 0, 1}},
        {"temp 0.8, top-k 40, top-p 0.95, min-p 0.05", {0.8f, 40, 0.95f, 0.05f, 1}},
        {"temp 0.8, top-p 0.95", {0.8f, 0, 0.95f, 0, 1}},
        {"temp 0.8, min-p 0.05", {0.8f, 0, 1, 0.05f, 1}},
        {"temp 0.8", {0.8f, 0, 1, 0, 1}},
    };
    double greedy_us = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (only >= 0 && (int)c != only) continue;
        assay_sampler *s = assay_sampler_new(&cases[c].p, V);
        uint64_t state = 7, check = 0;
        double t0 = assay_now_seconds();
        for (int d = 0; d < draws; d++)
            check += (uint64_t)assay_sampler_sample_with(s, &cases[c].p, &state, sets + (size_t)(d % N_SETS) * V);
        double us = (assay_now_seconds() - t0) / draws * 1e6;
        if (c == 0) greedy_us = us;
        printf("%-45s %8.1f us/draw  %5.2fx greedy  (checksum %llu)\n", cases[c].name, us, greedy_us > 0 ? us / greedy_us : 0,
               (unsigned long long)check);
        assay_sampler_free(s);
    }
    free(sets);
    return 0;
}

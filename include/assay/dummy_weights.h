/* dummy_weights.h — the values of a dummy model (vLLM's `--load-format dummy`): every weight is seeded pseudo-random
 * data of the checkpoint's shape and dtype, for measuring speed on shapes no weight file here holds.
 *
 *   uint64_t s = assay_dummy_tensor_seed(run_seed, "blk.3.attn_q.weight");
 *   float v = assay_dummy_value(s, i, ASSAY_DUMMY_RANGE);       // element i (row-major [n_out][n_in])
 *
 * The value of element i is a pure function of (tensor seed, i): a counter-based hash (splitmix64's finalizer over
 * seed + (i + 1) * golden gamma), whose top 24 bits become an integer in [-2^23, 2^23) scaled by range / 2^23 — one
 * exactly rounded float multiply, so the host (the CPU backend, model.c) and a GPU kernel (the CUDA backend's fill)
 * compute the same float bit for bit, and a weight filled in parallel, in any order or in pieces, is the same as one
 * filled serially. The float then becomes the stored dtype by round-to-nearest-even (bf16, f16) as a checkpoint
 * converted by torch would hold it.
 *
 * Linear weights and embeddings are uniform in [-range, range) with ASSAY_DUMMY_RANGE = 0.02 (about N(0, 0.0115)):
 * activations stay finite and of ordinary size through 80 layers. RMSNorm weights are 1.0; biases are uniform values
 * like the linears'. This header is plain C and compiles as CUDA too (the functions become __host__ __device__). */
#ifndef ASSAY_DUMMY_WEIGHTS_H
#define ASSAY_DUMMY_WEIGHTS_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ASSAY_DUMMY_FN static __host__ __device__ __forceinline__
#else
#define ASSAY_DUMMY_FN static inline
#endif

#define ASSAY_DUMMY_RANGE 0.02f

/* splitmix64's output function: a bijective 64-bit mix. */
ASSAY_DUMMY_FN uint64_t assay_dummy_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Element i of the tensor seeded `seed`: uniform in [-range, range), a multiple of range / 2^23. */
ASSAY_DUMMY_FN float assay_dummy_value(uint64_t seed, uint64_t i, float range) {
    uint64_t h = assay_dummy_mix(seed + (i + 1) * 0x9e3779b97f4a7c15ull);
    int32_t s = (int32_t)(h >> 40) - (int32_t)(1 << 23);
    return (float)s * (range * (1.0f / 8388608.0f));
}

/* The seed of one tensor: the run's seed mixed with the FNV-1a hash of the tensor's canonical name, so each tensor
 * of a model gets its own stream and the same name gets the same values in every run with that seed. */
static inline uint64_t assay_dummy_tensor_seed(uint64_t run_seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    return assay_dummy_mix(assay_dummy_mix(run_seed ^ 0x6a09e667f3bcc909ull) ^ h);
}

#endif

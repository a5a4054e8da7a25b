/* pyrandom.c — CPython's random module (MT19937 seeded by init_by_array, _randbelow, Random.sample), so few-shot
 * examples drawn here are the ones lm-evaluation-harness draws with random.Random(fewshot_seed). The
 * generator is the published MT19937 (Matsumoto & Nishimura 1998); sample() follows CPython 3.11's
 * Lib/random.py: pool selection for small populations, rejection from a set otherwise. */
#include <stdlib.h>
#include <string.h>

#include "assay/eval.h"

static void init_genrand(assay_pyrandom *r, uint32_t s) {
    r->mt[0] = s;
    for (int i = 1; i < 624; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->index = 624;
}

/* CPython seeds an int through init_by_array with its 32-bit limbs; a seed below 2^32 is one limb. */
void assay_pyrandom_seed(assay_pyrandom *r, uint32_t seed) {
    const uint32_t key[1] = {seed};
    const int key_len = 1;
    init_genrand(r, 19650218u);
    int i = 1, j = 0;
    for (int k = 624 > key_len ? 624 : key_len; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= 624) {
            r->mt[0] = r->mt[623];
            i = 1;
        }
        if (j >= key_len) j = 0;
    }
    for (int k = 623; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= 624) {
            r->mt[0] = r->mt[623];
            i = 1;
        }
    }
    r->mt[0] = 0x80000000u;
    r->index = 624;
}

uint32_t assay_pyrandom_u32(assay_pyrandom *r) {
    if (r->index >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (r->mt[k] & 0x80000000u) | (r->mt[(k + 1) % 624] & 0x7fffffffu);
            r->mt[k] = r->mt[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        r->index = 0;
    }
    uint32_t y = r->mt[r->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double assay_pyrandom_random(assay_pyrandom *r) {
    uint32_t a = assay_pyrandom_u32(r) >> 5, b = assay_pyrandom_u32(r) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

static int bit_length(uint64_t n) {
    int k = 0;
    while (n) {
        k++;
        n >>= 1;
    }
    return k;
}

/* random._randbelow_with_getrandbits; getrandbits(k) for k <= 32 is the top k bits of one output. */
static int64_t randbelow(assay_pyrandom *r, int64_t n) {
    if (n <= 0) return 0;
    int k = bit_length((uint64_t)n);
    ASSAY_ASSERT(k <= 32);
    int64_t v = (int64_t)(assay_pyrandom_u32(r) >> (32 - k));
    while (v >= n) v = (int64_t)(assay_pyrandom_u32(r) >> (32 - k));
    return v;
}

void assay_pyrandom_sample(assay_pyrandom *r, int64_t n, int k, int64_t *out) {
    ASSAY_ASSERT(k >= 0 && k <= n);
    int64_t setsize = 21;
    if (k > 5) {
        /* 4 ** ceil(log(3k, 4)), computed without floating point */
        int64_t p = 1;
        while (p < 3 * (int64_t)k) p *= 4;
        setsize += p;
    }
    if (n <= setsize) {
        int64_t *pool = assay_xmalloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
        for (int64_t i = 0; i < n; i++) pool[i] = i;
        for (int i = 0; i < k; i++) {
            int64_t j = randbelow(r, n - i);
            out[i] = pool[j];
            pool[j] = pool[n - i - 1];
        }
        free(pool);
    } else {
        for (int i = 0; i < k; i++) {
            int64_t j;
            int again;
            do {
                j = randbelow(r, n);
                again = 0;
                for (int q = 0; q < i; q++)
                    if (out[q] == j) again = 1;
            } while (again);
            out[i] = j;
        }
    }
}

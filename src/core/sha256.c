/* sha256.c — SHA-256 per FIPS 180-4 (see include/assay/sha256.h). Files are hashed through mmap. */
#include "assay/sha256.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/file.h"
#include "assay/strbuf.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void compress(uint32_t s[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s[0] += a;
    s[1] += b;
    s[2] += c;
    s[3] += d;
    s[4] += e;
    s[5] += f;
    s[6] += g;
    s[7] += h;
}

void assay_sha256_init(assay_sha256 *h) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, iv, sizeof iv);
    h->bytes = 0;
    h->fill = 0;
}

void assay_sha256_update(assay_sha256 *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->bytes += n;
    if (h->fill) {
        size_t take = 64 - h->fill < n ? 64 - h->fill : n;
        memcpy(h->block + h->fill, p, take);
        h->fill += take;
        p += take;
        n -= take;
        if (h->fill < 64) return;
        compress(h->state, h->block);
        h->fill = 0;
    }
    for (; n >= 64; p += 64, n -= 64) compress(h->state, p);
    memcpy(h->block, p, n);
    h->fill = n;
}

void assay_sha256_final(assay_sha256 *h, uint8_t digest[32]) {
    uint64_t bits = h->bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t padn = (h->fill < 56 ? 56 : 120) - h->fill;
    for (int i = 0; i < 8; i++) pad[padn + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    assay_sha256_update(h, pad, padn + 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(h->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(h->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(h->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)h->state[i];
    }
}

void assay_sha256_hex(const uint8_t digest[32], char hex[65]) {
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

static assay_status hash_file(const char *path, char hex[65]) {
    assay_mapped_file f;
    assay_status st = assay_mapped_file_open(&f, path);
    if (st != ASSAY_OK) return st;
    assay_sha256 h;
    uint8_t d[32];
    assay_sha256_init(&h);
    assay_sha256_update(&h, f.data, f.size);
    assay_sha256_final(&h, d);
    assay_sha256_hex(d, hex);
    assay_mapped_file_close(&f);
    return ASSAY_OK;
}

static int model_file_name(const char *n) {
    size_t l = strlen(n);
    return strcmp(n, "config.json") == 0 || strcmp(n, "tokenizer.json") == 0 ||
           (l > 12 && strcmp(n + l - 12, ".safetensors") == 0) || (l > 5 && strcmp(n + l - 5, ".gguf") == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

assay_status assay_sha256_path(const char *path, char hex[65]) {
    if (!assay_path_is_dir(path)) return hash_file(path, hex);
    DIR *d = opendir(path);
    if (!d) return assay_fail(ASSAY_ERR_IO, "%s: cannot list the directory", path);
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!model_file_name(e->d_name)) continue;
        names = assay_xrealloc(names, sizeof(char *) * (n + 1));
        names[n++] = assay_xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(char *), cmp_str);
    assay_sha256 h;
    assay_sha256_init(&h);
    assay_status st = ASSAY_OK;
    for (size_t i = 0; i < n && st == ASSAY_OK; i++) {
        char *p = assay_path_join(path, names[i]), fh[65];
        st = hash_file(p, fh);
        free(p);
        if (st == ASSAY_OK) {
            assay_strbuf line = {0};
            assay_strbuf_printf(&line, "%s\n%s\n", names[i], fh);
            assay_sha256_update(&h, line.data, line.len);
            assay_strbuf_free(&line);
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st != ASSAY_OK) return st;
    uint8_t dg[32];
    assay_sha256_final(&h, dg);
    assay_sha256_hex(dg, hex);
    return ASSAY_OK;
}

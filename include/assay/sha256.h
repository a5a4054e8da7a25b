/* sha256.h — SHA-256 (FIPS 180-4) for model fingerprints in results files.
 *
 *   char hex[65];
 *   if (assay_sha256_path("model.gguf", hex) != ASSAY_OK) ...   // a file, or a directory's model files
 *
 *   assay_sha256 h; assay_sha256_init(&h); assay_sha256_update(&h, data, n); assay_sha256_final(&h, digest32);
 */
#ifndef ASSAY_SHA256_H
#define ASSAY_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "assay/status.h"

typedef struct assay_sha256 {
    uint32_t state[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} assay_sha256;

void assay_sha256_init(assay_sha256 *h);
void assay_sha256_update(assay_sha256 *h, const void *data, size_t n);
void assay_sha256_final(assay_sha256 *h, uint8_t digest[32]);
void assay_sha256_hex(const uint8_t digest[32], char hex[65]);
/* A file's SHA-256; for a directory, the SHA-256 of "<name>\n<sha256 hex>\n" lines of its config.json,
 * tokenizer.json and *.safetensors / *.gguf files in name order. */
assay_status assay_sha256_path(const char *path, char hex[65]);

#endif

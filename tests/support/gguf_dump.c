/* gguf_dump — test support: prints the reader's view of a GGUF file as JSON, for tests/py to compare with
 * gguf-py's view of the same file.
 *
 *   gguf_dump FILE [--no-data]
 *   gguf_dump --types               the weight type table as JSON
 *
 * Strings (keys, values, tensor names) are written as hex of their bytes so any byte sequence compares
 * exactly; floats are written as the integer bit pattern of their f32/f64 encoding. Each tensor carries its
 * absolute file offset, byte count and the CRC-32 of its bytes as read through t->data (--no-data skips the
 * CRC). On a reader error: {"error": message, "status": code} and exit status 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "assay/gguf.h"
#include "assay/strbuf.h"

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

/* The zlib CRC-32 (same as Python's zlib.crc32). */
static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void put_hex(assay_strbuf *b, const char *p, uint64_t n) {
    static const char digits[] = "0123456789abcdef";
    assay_strbuf_putc(b, '"');
    for (uint64_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        assay_strbuf_putc(b, digits[ch >> 4]);
        assay_strbuf_putc(b, digits[ch & 15]);
    }
    assay_strbuf_putc(b, '"');
}

static void put_f32_bits(assay_strbuf *b, double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    assay_strbuf_printf(b, "%" PRIu32, u);
}

static void put_f64_bits(assay_strbuf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    assay_strbuf_printf(b, "%" PRIu64, u);
}

/* One element of an array through the public accessors. */
static void put_elem(assay_strbuf *b, const assay_gguf_kv *kv, uint64_t i) {
    switch (kv->array_type) {
    case ASSAY_GGUF_FLOAT32: put_f32_bits(b, assay_gguf_array_float(kv, i)); break;
    case ASSAY_GGUF_FLOAT64: put_f64_bits(b, assay_gguf_array_float(kv, i)); break;
    case ASSAY_GGUF_BOOL: assay_strbuf_puts(b, assay_gguf_array_int(kv, i) ? "true" : "false"); break;
    case ASSAY_GGUF_UINT64: assay_strbuf_printf(b, "%" PRIu64, (uint64_t)assay_gguf_array_int(kv, i)); break;
    case ASSAY_GGUF_STRING: {
        assay_gguf_str s = assay_gguf_array_str(kv, i);
        put_hex(b, s.ptr, s.len);
        break;
    }
    case ASSAY_GGUF_ARRAY: break; /* handled by put_array */
    default: assay_strbuf_printf(b, "%" PRId64, assay_gguf_array_int(kv, i)); break;
    }
}

static void put_array(assay_strbuf *b, const assay_gguf_kv *kv) {
    assay_strbuf_printf(b, "{\"elem\": \"%s\", \"len\": %" PRIu64 ", \"value\": [", assay_gguf_type_name(kv->array_type),
                        kv->array_len);
    for (uint64_t i = 0; i < kv->array_len; i++) {
        if (i) assay_strbuf_puts(b, ", ");
        if (kv->array_type == ASSAY_GGUF_ARRAY) put_array(b, assay_gguf_array_sub(kv, i));
        else put_elem(b, kv, i);
    }
    assay_strbuf_puts(b, "]}");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gguf_dump FILE [--no-data]\n");
        return 2;
    }
    if (strcmp(argv[1], "--types") == 0) {
        /* the type table, for tests/py/test_weight_types.py */
        printf("[");
        int first = 1;
        for (int t = 0; t < ASSAY_TYPE_COUNT; t++) {
            const assay_type_info *ti = assay_type_get((assay_type)t);
            if (!ti) continue;
            assay_type back;
            if (assay_type_from_name(ti->name, &back) != ASSAY_OK || back != (assay_type)t) return 3;
            printf("%s\n {\"id\": %d, \"name\": \"%s\", \"block_elems\": %lld, \"block_bytes\": %zu, \"quantized\": %d, "
                   "\"row_bytes_4096\": %zu}",
                   first ? "" : ",", t, ti->name, (long long)ti->block_elems, ti->block_bytes, ti->is_quantized,
                   assay_type_row_ok((assay_type)t, 4096) ? assay_type_row_bytes((assay_type)t, 4096) : 0);
            first = 0;
        }
        printf("]\n");
        return 0;
    }
    int with_data = !(argc > 2 && strcmp(argv[2], "--no-data") == 0);
    crc_init();
    assay_gguf *g;
    assay_strbuf b = {0};
    assay_status st = assay_gguf_open(&g, argv[1]);
    if (st != ASSAY_OK) {
        assay_strbuf_puts(&b, "{\"error\": ");
        const char *msg = assay_last_error();
        assay_strbuf_json_string(&b, msg, strlen(msg));
        assay_strbuf_printf(&b, ", \"status\": %d}\n", (int)st);
        fputs(b.data, stdout);
        assay_strbuf_free(&b);
        return 1;
    }
    assay_strbuf_printf(&b, "{\"version\": %" PRIu32 ", \"alignment\": %" PRIu64 ", \"file_size\": %zu, \"data_offset\": %zu,\n \"kv\": [",
                        assay_gguf_version(g), assay_gguf_alignment(g), assay_gguf_file_size(g), assay_gguf_data_offset(g));
    for (int64_t i = 0; i < assay_gguf_kv_count(g); i++) {
        const assay_gguf_kv *kv = assay_gguf_kv_at(g, i);
        /* the lookup must find the same entry (keys with NUL bytes cannot be looked up by C string) */
        char key[512];
        if (kv->key.len < sizeof key && !memchr(kv->key.ptr, 0, kv->key.len)) {
            memcpy(key, kv->key.ptr, kv->key.len);
            key[kv->key.len] = 0;
            if (assay_gguf_find(g, key) != kv) {
                fprintf(stderr, "gguf_dump: assay_gguf_find(\"%s\") does not return entry %" PRId64 "\n", key, i);
                return 3;
            }
        }
        assay_strbuf_puts(&b, i ? ",\n  {\"key\": " : "\n  {\"key\": ");
        put_hex(&b, kv->key.ptr, kv->key.len);
        assay_strbuf_printf(&b, ", \"type\": \"%s\", \"value\": ", assay_gguf_type_name(kv->type));
        switch (kv->type) {
        case ASSAY_GGUF_STRING: put_hex(&b, kv->value.str.ptr, kv->value.str.len); break;
        case ASSAY_GGUF_ARRAY: put_array(&b, kv); break;
        case ASSAY_GGUF_FLOAT32: put_f32_bits(&b, kv->value.f64); break;
        case ASSAY_GGUF_FLOAT64: put_f64_bits(&b, kv->value.f64); break;
        case ASSAY_GGUF_BOOL: assay_strbuf_puts(&b, kv->value.i64 ? "true" : "false"); break;
        case ASSAY_GGUF_UINT8: case ASSAY_GGUF_UINT16: case ASSAY_GGUF_UINT32: case ASSAY_GGUF_UINT64:
            assay_strbuf_printf(&b, "%" PRIu64, kv->value.u64);
            break;
        default: assay_strbuf_printf(&b, "%" PRId64, kv->value.i64); break;
        }
        assay_strbuf_puts(&b, "}");
    }
    assay_strbuf_puts(&b, "],\n \"tensors\": [");
    for (int64_t i = 0; i < assay_gguf_tensor_count(g); i++) {
        const assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        char name[512];
        if (t->name.len < sizeof name && !memchr(t->name.ptr, 0, t->name.len)) {
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = 0;
            if (assay_gguf_find_tensor(g, name) != t) {
                fprintf(stderr, "gguf_dump: assay_gguf_find_tensor(\"%s\") does not return tensor %" PRId64 "\n", name, i);
                return 3;
            }
        }
        assay_strbuf_puts(&b, i ? ",\n  {\"name\": " : "\n  {\"name\": ");
        put_hex(&b, t->name.ptr, t->name.len);
        assay_strbuf_printf(&b, ", \"type\": %d, \"type_name\": \"%s\", \"n_dims\": %" PRIu32 ", \"ne\": [%" PRId64
                                ", %" PRId64 ", %" PRId64 ", %" PRId64 "], \"offset\": %" PRIu64 ", \"abs_offset\": %" PRIu64
                                ", \"bytes\": %zu",
                            (int)t->type, assay_type_name(t->type), t->n_dims, t->ne[0], t->ne[1], t->ne[2], t->ne[3],
                            t->offset, (uint64_t)assay_gguf_data_offset(g) + t->offset, t->bytes);
        if (with_data) assay_strbuf_printf(&b, ", \"crc32\": %" PRIu32, crc32_bytes(t->data, t->bytes));
        assay_strbuf_puts(&b, "}");
    }
    assay_strbuf_puts(&b, "]}\n");
    fputs(b.data, stdout);
    assay_strbuf_free(&b);
    assay_gguf_close(g);
    return 0;
}

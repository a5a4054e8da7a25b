/* strbuf.c — growable strings (see include/assay/strbuf.h). */
#include "assay/strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assay/status.h"

static void reserve(assay_strbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = assay_xrealloc(b->data, cap);
    b->cap = cap;
}

void assay_strbuf_append(assay_strbuf *b, const char *bytes, size_t n) {
    reserve(b, n);
    if (n) memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = 0;
}

void assay_strbuf_puts(assay_strbuf *b, const char *s) { assay_strbuf_append(b, s, strlen(s)); }
void assay_strbuf_putc(assay_strbuf *b, char c) { assay_strbuf_append(b, &c, 1); }

void assay_strbuf_printf(assay_strbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ASSAY_ASSERT(n >= 0);
    reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence starting at s (1..4), or 0 if invalid. */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) len = 2, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

void assay_strbuf_json_string(assay_strbuf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    assay_strbuf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            assay_strbuf_append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            static const char *const named[0x20] = {['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n",
                                                    ['\r'] = "\\r", ['\t'] = "\\t"};
            if (named[c]) assay_strbuf_puts(b, named[c]);
            else assay_strbuf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_valid_len(u + i, n - i);
            if (len == 0) {
                assay_strbuf_printf(b, "\\u%04x", c);
                i++;
            } else {
                assay_strbuf_append(b, s + i, len);
                i += len;
            }
        }
    }
    assay_strbuf_putc(b, '"');
}

void assay_strbuf_json_number(assay_strbuf *b, double v) {
    if (!isfinite(v)) {
        assay_strbuf_puts(b, "null");
        return;
    }
    char buf[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    assay_strbuf_puts(b, buf);
}

void assay_strbuf_clear(assay_strbuf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void assay_strbuf_free(assay_strbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* strbuf.h — a growable byte string, for building JSON, reports and messages.
 *
 *   assay_strbuf b = {0};
 *   assay_strbuf_printf(&b, "{\"ppl\": %.4f, ", ppl);
 *   assay_strbuf_json_string(&b, name, strlen(name));   // quoted, escaped
 *   fputs(b.data, stdout);
 *   assay_strbuf_free(&b);
 */
#ifndef ASSAY_STRBUF_H
#define ASSAY_STRBUF_H

#include <stddef.h>

typedef struct assay_strbuf {
    char *data; /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
} assay_strbuf;

void assay_strbuf_append(assay_strbuf *b, const char *bytes, size_t n);
void assay_strbuf_puts(assay_strbuf *b, const char *s);
void assay_strbuf_putc(assay_strbuf *b, char c);
void assay_strbuf_printf(assay_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends `s` as a JSON string literal: quotes, escapes for " \ and control characters. Bytes that are not
 * valid UTF-8 are written as \u00XX of the byte (JSON must be UTF-8). */
void assay_strbuf_json_string(assay_strbuf *b, const char *s, size_t n);
/* Appends a double as JSON: shortest repr that round-trips ("%.17g" trimmed), and null for NaN/inf. */
void assay_strbuf_json_number(assay_strbuf *b, double v);
void assay_strbuf_clear(assay_strbuf *b);
void assay_strbuf_free(assay_strbuf *b);

#endif

/* utf8.h — strict UTF-8 (overlong forms, surrogates and code points above U+10FFFF are
 * invalid). */
#ifndef TLM_UTF8_H
#define TLM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is invalid or truncated
 * (or n is 0). */
size_t tlm_utf8_valid_len(const char *s, size_t n);
/* Decodes one code point from valid UTF-8; returns its length (an invalid byte decodes as
 * itself, length 1). */
size_t tlm_utf8_decode(const char *s, size_t n, uint32_t *cp);
size_t tlm_utf8_encode(uint32_t cp, char *out); /* writes 1..4 bytes */
/* Offset of the first invalid byte, or n when all of s is valid UTF-8. */
size_t tlm_utf8_check(const char *s, size_t n);

#endif

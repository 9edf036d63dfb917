/* byte_image.h — file images built by hand in the format tests (GGUF, zip/.npz): a growing byte
 * buffer and little-endian integers, whatever the host. Zero-initialise a `bytes`; free(b.p). */
#ifndef TLM_TESTS_BYTE_IMAGE_H
#define TLM_TESTS_BYTE_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *p;
    size_t n, cap;
} bytes;

static inline void put(bytes *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) exit(2);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void put_le16(bytes *b, unsigned v) {
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    put(b, x, 2);
}
static inline void put_le32(bytes *b, uint32_t v) { put_le16(b, v & 0xFFFF), put_le16(b, v >> 16); }
static inline void put_le64(bytes *b, uint64_t v) { put_le32(b, (uint32_t)v), put_le32(b, (uint32_t)(v >> 32)); }

#endif

/* buf.c — the growable byte buffer. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tlm_grow_array(void **data, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > ((size_t)-1) / 2 / elem) return -1;
        c *= 2;
    }
    void *p = realloc(*data, c * elem);
    if (!p) return -1;
    *data = p;
    *cap = c;
    return 0;
}

static int reserve(tlm_buf *b, size_t n) { /* room for n more bytes and the NUL */
    if (b->oom) return -1;
    if (n > (size_t)-1 - b->len - 1 || tlm_grow_array((void **)&b->data, &b->cap, b->len + n + 1, 1)) {
        b->oom = 1;
        return -1;
    }
    return 0;
}

int tlm_buf_put(tlm_buf *b, const void *p, size_t n) {
    if (reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int tlm_buf_puts(tlm_buf *b, const char *s) { return tlm_buf_put(b, s, strlen(s)); }

int tlm_buf_printf(tlm_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return -1;
    }
    if (reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void tlm_buf_free(tlm_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

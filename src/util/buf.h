/* buf.h — a growable byte buffer (text or binary), the one used by the tokenizers, the
 * safetensors writer and the SVG figures. */
#ifndef TLM_BUF_H
#define TLM_BUF_H

#include <stddef.h>

#include "util/error.h"

/* data[0..len) plus a NUL after it once anything was put (so text can be used as a string).
 * After a failed allocation oom is set and every later put does nothing and fails: a writer
 * may append freely and check oom once at the end. Zero-initialise; free with tlm_buf_free. */
typedef struct {
    char *data;
    size_t len, cap;
    int oom;
} tlm_buf;

/* Each returns 0, or -1 when out of memory (then b->oom is set). */
int tlm_buf_put(tlm_buf *b, const void *p, size_t n);
int tlm_buf_puts(tlm_buf *b, const char *s);
int tlm_buf_printf(tlm_buf *b, const char *fmt, ...) TLM_PRINTF(2, 3);
void tlm_buf_free(tlm_buf *b);

/* Makes the array *data of *cap elements of elem bytes hold at least need (doubling). -1 when
 * out of memory or the size would overflow (the array is kept). */
int tlm_grow_array(void **data, size_t *cap, size_t need, size_t elem);

#endif

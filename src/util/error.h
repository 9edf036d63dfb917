/* error.h — one thread-local "last error" message for the whole library.
 *
 * Every fallible function returns -1 (or NULL) and leaves a message here that names
 * the file and the field, e.g. "config.json: num_attention_heads = 3 does not divide ...".
 * The CLI prints it; tests assert on it. */
#ifndef TLM_ERROR_H
#define TLM_ERROR_H

#include <stddef.h>

#if defined(__GNUC__)
#define TLM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TLM_PRINTF(a, b)
#endif

/* Sets the last error message (printf-style). Always returns -1 so callers can write
 * `return tlm_error("...")`. */
int tlm_error(const char *fmt, ...) TLM_PRINTF(1, 2);

/* Prepends "prefix: " to the current message (adds the file name as errors travel up). */
int tlm_error_prefix(const char *fmt, ...) TLM_PRINTF(1, 2);

/* The last message, or "" when none was set. */
const char *tlm_last_error(void);
void tlm_clear_error(void);

#endif

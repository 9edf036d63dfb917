#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

int tlm_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

int tlm_error_prefix(const char *fmt, ...) {
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof last_error - 3) n = sizeof last_error - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t room = sizeof last_error - n - 3, m = strlen(old);
    if (m > room) m = room;
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return -1;
}

const char *tlm_last_error(void) { return last_error; }
void tlm_clear_error(void) { last_error[0] = '\0'; }

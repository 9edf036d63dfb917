/* clock.h — a monotonic clock in seconds, for timings printed to users. */
#ifndef TLM_CLOCK_H
#define TLM_CLOCK_H

#include <time.h>

static inline double tlm_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif

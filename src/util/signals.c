/* signals.c — holds on asynchronous signals (signals.h). */
#include "signals.h"

#include <omp.h>
#include <pthread.h>
#include <signal.h>

static _Thread_local int depth;           /* nested holds in this thread */
static _Thread_local int blocked_for_good; /* an OpenMP worker whose signals stay blocked */
static _Thread_local int quiet_pool;       /* this thread's pool: how many threads block for good */
static _Thread_local sigset_t before;     /* this thread's mask before its hold */

/* every signal but the synchronous ones (a fault in the kernel must still be reported) */
static sigset_t asynchronous(void) {
    sigset_t s;
    sigfillset(&s);
    const int sync[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
    for (unsigned i = 0; i < sizeof sync / sizeof *sync; i++) sigdelset(&s, sync[i]);
    return s;
}

/* The workers of this thread's pool block for good. libgomp keeps a pool per thread that
 * opens parallel regions and reuses its threads in order, so the count is kept per thread;
 * workers started inside a hold inherit the blocked mask anyway. */
static void quiet_workers(void) {
    const int n = omp_get_max_threads();
    if (n <= quiet_pool) return;
    const sigset_t s = asynchronous();
#pragma omp parallel num_threads(n)
    if (omp_get_thread_num() != 0) {
        pthread_sigmask(SIG_BLOCK, &s, NULL);
        blocked_for_good = 1;
    }
    quiet_pool = n;
}

void signals_hold(void) {
    if (blocked_for_good || depth++) return;
    const sigset_t s = asynchronous();
    pthread_sigmask(SIG_BLOCK, &s, &before);
    if (!omp_in_parallel()) quiet_workers();
}

void signals_release(void) {
    if (blocked_for_good || --depth) return;
    pthread_sigmask(SIG_SETMASK, &before, NULL);
}

/* A window sets the hold aside: code inside it (another model's pass, called from a hook) takes
 * holds of its own from depth 0, and may open windows of its own (the caller keeps the depth). */
int signals_window_open(void) {
    if (blocked_for_good || !depth) return 0;
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    const int held = depth;
    depth = 0;
    return held;
}

void signals_window_close(int held) {
    if (blocked_for_good || !held) return;
    depth = held;
    const sigset_t s = asynchronous();
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

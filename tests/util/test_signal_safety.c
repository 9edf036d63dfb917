/* test_signal_safety.c — a signal handled while the engine runs never runs its handler off the
 * thread's own stack (util/signals.h: oneDNN 2.x's JIT GEMM kernels point rsp at the heap, so a
 * handler there writes its frame over heap memory; a Python process aborted on that later with
 * "corrupted size vs. prev_size").
 *
 * Forward and backward passes of stories260K on 2 threads for 1.5 s while another thread sends
 * SIGUSR1 to the process and to each thread of the pool every 50 us; the handler checks that
 * its own frame lies inside the stack of the thread it runs on (bounds taken beforehand). Then
 * the same through the KV cache (prefill + decode), and a GEMM called outside any pass. */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check_count.h"
#include "ops/ops.h"
#include "tinylm.h"

enum { MAX_THREADS = 8 };
static struct {
    long tid;
    uintptr_t lo, hi;
} stacks[MAX_THREADS + 1];
static int n_stacks;
static atomic_long handled, off_stack, unknown;
static atomic_int stop;

static void on_signal(int sig) {
    (void)sig;
    volatile char here = 0;
    const uintptr_t at = (uintptr_t)&here;
    const long tid = syscall(SYS_gettid);
    for (int i = 0; i < n_stacks; i++)
        if (stacks[i].tid == tid) {
            if (at < stacks[i].lo || at >= stacks[i].hi) atomic_fetch_add(&off_stack, 1);
            atomic_fetch_add(&handled, 1);
            return;
        }
    atomic_fetch_add(&unknown, 1); /* (the sender's own thread: not checked) */
}

static void record_stack(void) {
    pthread_attr_t a;
    void *base;
    size_t size;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &base, &size);
    pthread_attr_destroy(&a);
    const long tid = syscall(SYS_gettid);
#pragma omp critical
    {
        stacks[n_stacks].tid = tid, stacks[n_stacks].lo = (uintptr_t)base, stacks[n_stacks].hi = (uintptr_t)base + size;
        n_stacks++;
    }
}

static void *sender(void *arg) {
    (void)arg;
    const struct timespec gap = {0, 50000};
    while (!atomic_load(&stop)) {
        kill(getpid(), SIGUSR1);
        for (int i = 0; i < n_stacks; i++) syscall(SYS_tgkill, getpid(), stacks[i].tid, SIGUSR1);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(void) {
    omp_set_num_threads(2);
    tlm_model *m = tlm_load(TLM_SOURCE_DIR "/data/stories260K.bin");
    if (!m) {
        fprintf(stderr, "test_signal_safety: %s\n", tlm_error_message());
        return 1;
    }
#pragma omp parallel num_threads(2)
    record_stack(); /* the pool's threads, the main one among them */

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* (the pass's own waits resume) */
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t th;
    pthread_create(&th, NULL, sender, NULL);

    enum { B = 2, T = 160 };
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = 1 + (i * 37) % 500, tgt[i] = 1 + (i * 53) % 500;
    int passes = 0, bad = 0;
    float loss = 0;
    for (const double end = now() + 1.5; now() < end && !bad; passes++)
        bad = tlm_forward(m, tok, tgt, B, T, &loss) || tlm_backward(m, 1.0f);
    CHECK(!bad, "passes with signals arriving run (%d passes, loss %.3f)", passes, loss);
    /* a product outside any pass (gemm's own hold): 2 threads, 64 x 256 x 256 */
    static float a[256 * 256], b[256 * 256], c[256 * 256];
    for (int i = 0; i < 256 * 256; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    for (const double end = now() + 0.5; now() < end;) gemm(0, 1, 64, 256, 256, 1.0f, a, 256, b, 256, 0.0f, c, 256);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    signal(SIGUSR1, SIG_IGN); /* (what the workers still hold pending is dropped) */

    const long h = atomic_load(&handled), off = atomic_load(&off_stack);
    CHECK(h >= 100, "the handler ran %ld times on the pool's threads (signals arrive between the products)", h);
    CHECK(off == 0, "no handler ran off its thread's stack (%ld of %ld did)", off, h);
    tlm_free(m);
    printf("test_signal_safety: %d passes, %ld signals handled, %ld off the stack; %d checks, %d failed\n", passes, h,
           off, checks, failures);
    return failures != 0;
}

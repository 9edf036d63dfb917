/* test_signal_safety.c — a signal handled while the engine runs never runs its handler off the
 * thread's own stack (util/signals.h: oneDNN 2.x's JIT GEMM kernels point rsp at the heap, so a
 * handler there writes its frame over heap memory; a Python process aborted on that later with
 * "corrupted size vs. prev_size").
 *
 * Forward and backward passes of stories260K on 2 threads for 1.5 s while another thread sends
 * SIGUSR1 to the process and to each thread of the pool every 50 us; the handler checks that
 * its own frame lies inside the stack of the thread it runs on (bounds taken beforehand). Then
 * a GEMM called outside any pass; and the masks around hooks (nested: a hook running another
 * model's hooked pass). */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- masks around hooks: a hook sees signals unblocked, also a hook of another model's pass run
 * from inside a hook (windows nest), and everything is as before after the passes ------------- */
static tlm_model *inner_model;
static int hook_calls, hook_blocked, inner_runs;

static int usr1_blocked(void) {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    return sigismember(&now, SIGUSR1);
}

static int on_hook(void *user, int id, float *data, int ndim, const int64_t *shape, int is_grad) {
    (void)id, (void)data, (void)ndim, (void)shape, (void)is_grad;
    hook_calls++;
    if (usr1_blocked()) hook_blocked++;
    if (user) { /* the outer model's hook: a pass of the inner model, hooked too */
        int tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        if (tlm_forward(inner_model, tok, NULL, 1, 8, NULL)) return 1;
        inner_runs++;
        if (usr1_blocked()) hook_blocked++;
    }
    return 0;
}

static void check_hook_masks(tlm_model *outer) {
    inner_model = tlm_load(TLM_SOURCE_DIR "/data/stories260K.bin");
    CHECK(inner_model != NULL, "a second model loads");
    if (!inner_model) return;
    const int n = tlm_hook_count(outer);
    unsigned char *fwd = calloc((size_t)n, 1);
    int embed = -1, resid = -1; /* two points of the outer pass, one of the inner */
    for (int id = 0; id < n; id++) {
        char name[96];
        if (!tlm_hook_info(outer, id, name, sizeof name, 1, 64, NULL, NULL)) continue;
        if (!strcmp(name, "hook_embed")) embed = id;
        if (!strcmp(name, "blocks.1.hook_resid_post")) resid = id;
    }
    CHECK(embed >= 0 && resid >= 0, "hook points hook_embed (%d) and blocks.1.hook_resid_post (%d)", embed, resid);
    if (embed < 0 || resid < 0) return;
    fwd[embed] = 1, fwd[resid] = 1;
    static int outer_flag = 1;
    tlm_set_hooks(outer, on_hook, &outer_flag, fwd, NULL);
    memset(fwd, 0, (size_t)n), fwd[resid] = 1;
    tlm_set_hooks(inner_model, on_hook, NULL, fwd, NULL);
    int tok[64];
    for (int i = 0; i < 64; i++) tok[i] = 1 + (i * 37) % 500;
    const int rc = tlm_forward(outer, tok, NULL, 1, 64, NULL);
    CHECK(rc == 0 && inner_runs == 2 && hook_calls == 4, "hooks ran: %d calls, %d inner passes (rc %d)", hook_calls,
          inner_runs, rc);
    CHECK(hook_blocked == 0, "every hook, nested ones too, ran with signals unblocked (%d did not)", hook_blocked);
    CHECK(!usr1_blocked(), "after the passes the thread's mask is as before");
    tlm_set_hooks(outer, NULL, NULL, NULL, NULL);
    tlm_set_hooks(inner_model, NULL, NULL, NULL, NULL);
    free(fwd);
    tlm_free(inner_model);
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

    check_hook_masks(m);
    const long h = atomic_load(&handled), off = atomic_load(&off_stack);
    CHECK(h >= 100, "the handler ran %ld times on the pool's threads (signals arrive between the products)", h);
    CHECK(off == 0, "no handler ran off its thread's stack (%ld of %ld did)", off, h);
    tlm_free(m);
    printf("test_signal_safety: %d passes, %ld signals handled, %ld off the stack; %d checks, %d failed\n", passes, h,
           off, checks, failures);
    return failures != 0;
}

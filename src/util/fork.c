/* fork.c — the forked-child mark (fork.h), set by a pthread_atfork handler registered when the
 * library is loaded. */
#include "fork.h"

#include <omp.h>
#include <pthread.h>

static int forked_child;

static void after_fork_in_child(void) {
    forked_child = 1;
    omp_set_num_threads(1);
}

__attribute__((constructor)) static void register_fork_handler(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

int process_forked_child(void) { return forked_child; }

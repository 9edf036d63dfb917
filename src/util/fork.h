/* fork.h — whether this process is a child forked from one that had loaded the library.
 *
 * libgomp's thread pool does not survive fork() (the child has only the forking thread, and the
 * next parallel region waits for the parent's threads forever), so a forked child runs on one
 * thread: the handler sets OpenMP's count to 1 in the child, and the engine's thread counts
 * (model/context.c) and tlm_set_threads (api/api.c) keep it there. */
#ifndef TLM_FORK_H
#define TLM_FORK_H

/* 1 in a child forked after the library was loaded, else 0 */
int process_forked_child(void);

#endif

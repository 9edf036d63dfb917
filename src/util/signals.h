/* signals.h — asynchronous signals held off while the GEMM library's kernels run.
 *
 * oneDNN 2.x's JIT f32 GEMM kernels (Debian 12 ships 2.6) point rsp at a heap workspace while
 * they run (oneDNN issue 4845, fixed in 3.11): a signal handled then writes its frame over the
 * heap. Python's Ctrl-C handler is one such handler; the heap check aborts later, elsewhere.
 * So a kernel never runs where a handler could: the thread that calls in blocks the
 * asynchronous signals for the call (a hold; nested holds cost nothing, so a pass takes one
 * hold around all its products), and OpenMP's worker threads block them for good (a signal
 * sent to the process then goes to a thread that takes it safely, or waits for the release). */
#ifndef TLM_SIGNALS_H
#define TLM_SIGNALS_H

/* Blocks the asynchronous signals in this thread (the first of nested holds) and in the
 * workers of its OpenMP pool; signals_release ends the hold (pending signals arrive then). */
void signals_hold(void);
void signals_release(void);
/* Inside a hold, handlers may run between signals_window_open and _close (a callback into
 * other code, such as the Python package's hooks, which take Ctrl-C there); open returns the
 * hold's depth, which close takes back (windows nest: a hook may run another model's pass). */
int signals_window_open(void);
void signals_window_close(int held);

#endif

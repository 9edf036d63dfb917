/* profile.h — time per op, summed over a run, when profiling is on (`tinylm train --profile`).
 * An op marks its body with PROF_SCOPE("name"); when profiling is off that costs one branch.
 * Scopes nest: an op called inside another (the GEMM inside a linear layer's forward) is timed as
 * the child of that call, and the report is the tree of calls, each op's time counted once in
 * its parent's. The same name under the same parent, from any call site, is one node.
 * Ops are called from one thread (their OpenMP loops are inside them), or from several that
 * each run a part of a split batch with only the first timed (tlm_prof_quiet), so the tree
 * needs no locking; do not put a scope inside an op's parallel loop. */
#ifndef TLM_PROFILE_H
#define TLM_PROFILE_H

#include <stdio.h>

typedef struct prof_node prof_node;

typedef struct {
    prof_node *node; /* NULL when profiling is off (or no memory for a new node) */
    double t0;
} prof_timer;

extern int tlm_profiling;
/* set on a thread: its scopes are not timed (the threads of a split batch other than the first,
 * which run the same ops at the same time: model.c) */
extern _Thread_local int tlm_prof_quiet;

prof_timer prof_begin(const char *name);
void prof_end(prof_timer *t);
/* clears every op's time (e.g. after warm-up steps); the tree stays */
void prof_reset(void);
/* One line per op, nested ops indented under their caller: ms per step, share of `step_s`, calls
 * per step. The top-level lines add up with the last one, the rest of the step, to `step_s`. */
void prof_report(FILE *f, int steps, double step_s);

#define PROF_SCOPE(label) __attribute__((cleanup(prof_end), unused)) prof_timer prof_timer_ = prof_begin(label)

#endif

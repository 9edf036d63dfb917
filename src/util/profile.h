/* profile.h — time per op, summed over a run, when profiling is on (`tinylm train --profile`).
 * An op marks its body with PROF_SCOPE("name"); when profiling is off that costs one branch.
 * Ops are called from one thread (their OpenMP loops are inside them), or from several that
 * each run a part of a split batch with only the first timed (tlm_prof_quiet), so the slots
 * need no locking; do not put a scope inside an op's parallel loop. */
#ifndef TLM_PROFILE_H
#define TLM_PROFILE_H

#include <stdio.h>

typedef struct prof_slot {
    const char *name;
    double seconds;
    long calls;
    struct prof_slot *next; /* registered slots, in order of first use */
    int registered;
} prof_slot;

typedef struct {
    prof_slot *slot; /* NULL when profiling is off */
    double t0;
} prof_timer;

extern int tlm_profiling;
/* set on a thread: its scopes are not timed (the threads of a split batch other than the first,
 * which run the same ops at the same time: model.c) */
extern _Thread_local int tlm_prof_quiet;

prof_timer prof_begin(prof_slot *slot);
void prof_end(prof_timer *t);
/* clears every slot's time (e.g. after warm-up steps) */
void prof_reset(void);
/* one line per op: ms per step, share of `step_s`, calls per step; then the rest of the step */
void prof_report(FILE *f, int steps, double step_s);

#define PROF_SCOPE(label)                                                                                      \
    static prof_slot prof_slot_ = {label, 0.0, 0, 0, 0};                                                      \
    __attribute__((cleanup(prof_end), unused)) prof_timer prof_timer_ = prof_begin(&prof_slot_)

#endif

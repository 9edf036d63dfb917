/* profile.c — see profile.h */
#include "profile.h"

#include "clock.h"

int tlm_profiling;
_Thread_local int tlm_prof_quiet;
static prof_slot *first, **last = &first;

prof_timer prof_begin(prof_slot *slot) {
    if (!tlm_profiling || tlm_prof_quiet) return (prof_timer){0};
    if (!slot->registered) {
        slot->registered = 1;
        *last = slot;
        last = &slot->next;
    }
    return (prof_timer){slot, tlm_now_s()};
}

void prof_end(prof_timer *t) {
    if (!t->slot) return;
    t->slot->seconds += tlm_now_s() - t->t0;
    t->slot->calls++;
}

void prof_reset(void) {
    for (prof_slot *s = first; s; s = s->next) s->seconds = 0, s->calls = 0;
}

void prof_report(FILE *f, int steps, double step_s) {
    if (steps <= 0) return;
    double covered = 0;
    fprintf(f, "%-24s %10s %7s %10s\n", "op", "ms/step", "share", "calls/step");
    for (prof_slot *s = first; s; s = s->next) {
        if (!s->calls) continue;
        covered += s->seconds;
        fprintf(f, "%-24s %10.4f %6.2f%% %10.1f\n", s->name, s->seconds * 1e3 / steps,
                step_s > 0 ? 100.0 * s->seconds / steps / step_s : 0.0, (double)s->calls / steps);
    }
    const double rest = step_s * steps - covered;
    fprintf(f, "%-24s %10.4f %6.2f%%\n", "(rest of the step)", rest * 1e3 / steps, step_s > 0 ? 100.0 * rest / steps / step_s : 0.0);
}

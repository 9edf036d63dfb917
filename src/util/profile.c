/* profile.c — see profile.h */
#include "profile.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

struct prof_node {
    const char *name;
    double seconds;
    long calls;
    prof_node *parent, *children, *next; /* children in order of first call */
};

int tlm_profiling;
_Thread_local int tlm_prof_quiet;
static prof_node root;
static _Thread_local prof_node *open_scope; /* the innermost running scope of this thread (NULL: none) */

/* parent's child called `name`, added on its first call (NULL: out of memory) */
static prof_node *child(prof_node *parent, const char *name) {
    prof_node **p = &parent->children;
    for (; *p; p = &(*p)->next)
        if ((*p)->name == name || !strcmp((*p)->name, name)) return *p;
    prof_node *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->name = name, c->parent = parent;
    return *p = c;
}

prof_timer prof_begin(const char *name) {
    if (!tlm_profiling || tlm_prof_quiet) return (prof_timer){0};
    prof_node *n = child(open_scope ? open_scope : &root, name);
    if (!n) return (prof_timer){0};
    open_scope = n;
    return (prof_timer){n, tlm_now_s()};
}

void prof_end(prof_timer *t) {
    if (!t->node) return;
    t->node->seconds += tlm_now_s() - t->t0;
    t->node->calls++;
    open_scope = t->node->parent == &root ? NULL : t->node->parent;
}

static void reset(prof_node *n) {
    for (; n; n = n->next) n->seconds = 0, n->calls = 0, reset(n->children);
}

void prof_reset(void) { reset(root.children); }

static void report(FILE *f, const prof_node *n, int depth, int steps, double step_s) {
    for (; n; n = n->next) {
        if (!n->calls) continue;
        char label[64];
        snprintf(label, sizeof label, "%*s%s", 2 * depth, "", n->name);
        fprintf(f, "%-30s %10.4f %6.2f%% %10.1f\n", label, n->seconds * 1e3 / steps,
                step_s > 0 ? 100.0 * n->seconds / steps / step_s : 0.0, (double)n->calls / steps);
        report(f, n->children, depth + 1, steps, step_s);
    }
}

void prof_report(FILE *f, int steps, double step_s) {
    if (steps <= 0) return;
    fprintf(f, "%-30s %10s %7s %10s\n", "op (nested: inside the op above)", "ms/step", "share", "calls/step");
    report(f, root.children, 0, steps, step_s);
    double covered = 0;
    for (const prof_node *n = root.children; n; n = n->next) covered += n->seconds;
    const double rest = step_s * steps - covered;
    fprintf(f, "%-30s %10.4f %6.2f%%\n", "(rest of the step)", rest * 1e3 / steps,
            step_s > 0 ? 100.0 * rest / steps / step_s : 0.0);
}

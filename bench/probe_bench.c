/* probe_bench.c — times model_forward with no after-pass hook, a hook that does nothing, a
 * probe attached that selects nothing, or a probe recording everything, for
 * bench/probe_overhead.sh.
 *
 *   probe_bench [off|noop|empty|all] [ITERS]
 *
 * Model: d 256, 6 layers, 8 heads, d_ff 1024, vocab 2048, one sequence of 128 tokens.
 * Prints: mode, records, median / min milliseconds per forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "convert/family.h"
#include "probes/probe.h"
#include "util/error.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int noop_hook(void *user, const tlm_model *m, int is_backward) {
    (void)user, (void)m, (void)is_backward;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "off";
    int iters = argc > 2 ? atoi(argv[2]) : 40;
    if (strcmp(mode, "off") && strcmp(mode, "noop") && strcmp(mode, "empty") && strcmp(mode, "all")) {
        fprintf(stderr, "usage: probe_bench [off|noop|empty|all] [ITERS]\n");
        return 2;
    }
    if (iters < 1) iters = 1;
    tlm_config cfg;
    if (config_parse(&cfg,
                     "{\"model_type\": \"tinylm\", \"vocab_size\": 2048, \"hidden_size\": 256, "
                     "\"num_hidden_layers\": 6, \"num_attention_heads\": 8, \"intermediate_size\": 1024}",
                     "bench config")) {
        fprintf(stderr, "probe_bench: %s\n", tlm_last_error());
        return 1;
    }
    tlm_model *m = model_create(&cfg);
    if (!m) return fprintf(stderr, "probe_bench: %s\n", tlm_last_error()), 1;
    model_init_weights(m, 1);
    enum { T = 128 };
    int tokens[T];
    for (int i = 0; i < T; i++) tokens[i] = (i * 7919 + 13) % cfg.vocab_size;
    tlm_probe *p = probe_create();
    if (!strcmp(mode, "all")) probe_select(p, "*");
    if (!strcmp(mode, "noop"))
        m->after_pass = noop_hook;
    else if (strcmp(mode, "off"))
        probe_attach(p, m);
    double *ms = malloc(sizeof(double) * iters);
    for (int i = -3; i < iters; i++) { /* 3 warm-up passes */
        double t0 = now_ms();
        if (model_forward(m, tokens, NULL, 1, T, NULL)) return fprintf(stderr, "probe_bench: %s\n", tlm_last_error()), 1;
        if (i >= 0) ms[i] = now_ms() - t0;
    }
    qsort(ms, (size_t)iters, sizeof(double), cmp_double);
    printf("mode=%s records=%zu median_ms=%.4f min_ms=%.4f\n", mode, probe_count(p), ms[iters / 2], ms[0]);
    probe_detach(m);
    probe_free(p);
    free(ms);
    model_free(m);
    return 0;
}

/* test_softmax_row.c — one row of attention's masked, optionally soft-capped softmax
 * (attention_softmax_row) against a float64 reference: every row length from 1 to 70 (tails
 * of every size for the 16-lane kernel), windows (a first visible key > 0), in place and not,
 * and a NaN score, which must make the row NaN. ctest runs it natively and with TLM_ISA=avx2,
 * so the AVX-512 kernel and the portable loops are both checked; it prints the set that ran. */
#include "isa_cap.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops.h"
#include "util/cpu.h"

static float rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* 0 when row p (and the scores s after the call) match the reference for scores `in`; masked
 * keys: p 0 and s -inf, or only p 0 when p is s (in place, p is written last) */
static int check_row(const float *in, const float *s, const float *p, int n, int first, int last, float cap) {
    double mx = -INFINITY, sum = 0, want[128];
    for (int j = first; j <= last; j++) {
        double v = cap > 0 ? cap * tanh(in[j] / cap) : in[j];
        want[j] = v;
        if (v > mx) mx = v;
    }
    for (int j = first; j <= last; j++) sum += want[j] = exp(want[j] - mx);
    for (int j = 0; j < n; j++) {
        if (j < first || j > last) {
            if (p[j] != 0.0f || (s != p && s[j] != -INFINITY)) return printf("  masked key %d: p %g s %g\n", j, p[j], s[j]), 1;
        } else if (!(fabs(p[j] - want[j] / sum) <= 2e-6)) {
            return printf("  key %d: %.9g, want %.9g\n", j, p[j], want[j] / sum), 1;
        }
    }
    return 0;
}

int main(void) {
    if (isa_cap_changes_nothing("test_softmax_row")) return ISA_CAP_SKIP;
    printf("kernels: %s\n", tlm_isa_name(tlm_cpu_isa()));
    unsigned seed = 7;
    int checks = 0, failures = 0;
    float in[128], s[128], p[128];
    for (int n = 1; n <= 70; n++)
        for (int variant = 0; variant < 6; variant++) {
            const int in_place = variant & 1;
            const float cap = variant >= 4 ? 3.0f : 0.0f;
            const int last = variant >= 2 ? n - 1 - n / 3 : n - 1;  /* causal rows end before n */
            const int first = variant >= 2 ? last / 4 : 0;          /* a sliding window starts after 0 */
            for (int j = 0; j < n; j++) in[j] = s[j] = 6.0f * rnd(&seed), p[j] = 123.0f;
            float *out = in_place ? s : p;
            attention_softmax_row(s, out, n, first, last, cap);
            checks++;
            if (check_row(in, s, out, n, first, last, cap)) {
                printf("FAIL n %d first %d last %d cap %g in place %d\n", n, first, last, cap, in_place);
                failures++;
            }
        }
    /* a NaN score among the visible keys: every visible probability is NaN */
    for (int n = 1; n <= 40; n++) {
        for (int j = 0; j < n; j++) s[j] = rnd(&seed);
        s[n / 2] = NAN;
        attention_softmax_row(s, p, n, 0, n - 1, 0.0f);
        checks++;
        for (int j = 0; j < n; j++)
            if (!isnan(p[j])) {
                printf("FAIL NaN score at %d of %d: p[%d] = %g\n", n / 2, n, j, p[j]);
                failures++;
                break;
            }
    }
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}

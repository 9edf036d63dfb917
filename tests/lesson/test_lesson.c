/* test_lesson.c — lesson 15's numbers as a unit test. Each value is computed by the engine's
 * kernels (lessons/lesson15.c) and compared with the lesson's stated value; a few are also
 * recomputed here from the formulas in double precision, independently of the kernels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lessons/lesson15.h"
#include "ops/ops.h"

static int failures = 0, checks = 0;

static void expect(int ok, const char *what) {
    checks++;
    if (!ok) failures++;
    printf("%-60s %s\n", what, ok ? "ok" : "FAIL");
}

int main(void) {
    lesson_check c[64];
    int n = lesson15_run(c, 64);
    expect(n >= 20, "lesson 15 produced all its checks");
    for (int i = 0; i < n; i++) {
        printf("  %s: %s (lesson: %s)\n", c[i].what, c[i].computed, c[i].stated);
        expect(c[i].ok, c[i].what);
    }
    /* independent recomputation of the norms in double */
    float x[4] = {2, -1, 3, 0}, ones[4] = {1, 1, 1, 1}, y[4], mean, rstd;
    double ms = (4 + 1 + 9 + 0) / 4.0, rms = sqrt(ms + 1e-5);
    rmsnorm_forward(y, &rstd, x, ones, 0.0f, 1, 4, 1e-5f);
    int ok = 1;
    for (int i = 0; i < 4; i++) ok &= fabs(y[i] - x[i] / rms) < 1e-6;
    expect(ok, "RMSNorm([2,-1,3,0]) = x / sqrt(mean(x^2) + eps) in double");
    layernorm_forward(y, &mean, &rstd, x, ones, NULL, 1, 4, 1e-5f);
    double mu = 1.0, var = (1 + 4 + 4 + 1) / 4.0;
    ok = 1;
    for (int i = 0; i < 4; i++) ok &= fabs(y[i] - (x[i] - mu) / sqrt(var + 1e-5)) < 1e-6;
    expect(ok, "LayerNorm([2,-1,3,0]) = (x - mean) / sqrt(var + eps) in double");
    float caps[4] = {10, 30, 60, 200}, capped[4];
    softcap_forward(capped, caps, 4, 30.0f);
    ok = 1;
    for (int i = 0; i < 4; i++) ok &= fabs(capped[i] - 30.0 * tanh(caps[i] / 30.0)) < 1e-5;
    expect(ok, "soft-cap = cap * tanh(x / cap) in double");
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}

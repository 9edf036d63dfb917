/* tinylm lesson 15 — the lesson's worked numbers, computed by the engine. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lessons/lesson15.h"

int cmd_lesson(int argc, char **argv) {
    if (argc != 2 || strcmp(argv[1], "15") != 0) {
        fprintf(stderr, "usage: tinylm lesson 15\n  (lesson 15: residual connections and normalization)\n");
        return 2;
    }
    lesson_check checks[64];
    int n = lesson15_run(checks, 64);
    if (n < 0) return cli_fail("lesson");
    printf("Lesson 15 — residual connections and normalization, computed by tinylm's own kernels\n\n");
    printf("%-54s %-34s %-28s %s\n", "what", "tinylm computes", "the lesson states", "");
    int bad = 0;
    for (int i = 0; i < n; i++) {
        printf("%-54s %-34s %-28s %s\n", checks[i].what, checks[i].computed, checks[i].stated,
               checks[i].ok ? "ok" : "MISMATCH");
        bad += !checks[i].ok;
    }
    printf("\n%d of %d numbers agree with the text.\n", n - bad, n);
    return bad ? 1 : 0;
}

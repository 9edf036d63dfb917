/* tinylm lesson 15 — the lesson's worked numbers, computed by the engine. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lessons/lesson15.h"

static const char USAGE[] = "usage: tinylm lesson 15\n  (lesson 15: residual connections and normalization)\n";

int cmd_lesson(int argc, char **argv) {
    const char *lesson[1];
    cli_command cmd = {"lesson", USAGE, NULL, 0, 1, lesson, 1, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (cmd.n_args == 0) return cli_usage_error("lesson", "which lesson? (15)");
    if (strcmp(lesson[0], "15") != 0) return cli_usage_error("lesson", "there is no lesson \"%s\" (only 15)", lesson[0]);

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

/* tinylm lesson [TOPIC] — the course: with no topic its index, with one the topic's worked
 * numbers computed by the engine (src/lessons/course.h), lesson 15 as before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lessons/course.h"
#include "lessons/lesson15.h"
#include "util/error.h"
#include "util/io.h"

static const char USAGE[] =
    "usage: tinylm lesson                      the course's index: every topic, in the lessons' order\n"
    "       tinylm lesson TOPIC [--lang zh|en] [--json] [--html FILE.html] [--stories FILE] [--data FILE] [--quick]\n"
    "       tinylm lesson stream --model DIR (--prompt TEXT | --ids \"1 2 3\") [--tokenizer PATH] [--no-bos]\n"
    "  TOPIC             residual, rms, rmsnorm-vs-layernorm, placement, stream, qk-norm, softcap, init-depth,\n"
    "                    reading-configs, 15\n"
    "  --lang zh|en      the language of the explanations (default en)\n"
    "  --json            the numbers as JSON (each with its section, computed and stated value, ok)\n"
    "  --html FILE.html  also a self-contained page: the numbers, the figures and (placement) a switch between\n"
    "                    the variants showing their stream and gradient norms side by side\n"
    "  --stories FILE    stories260K.bin for the stream and reading-configs demos (default data/stories260K.bin)\n"
    "  --data FILE       the text the placement demo trains on (default data/tinyshakespeare.txt)\n"
    "  --quick           the placement demo with 100 steps instead of 200\n"
    "  --model DIR       (stream) the residual-stream table of any checkpoint on --prompt or --ids\n"
    "Exit status 1 when a computed number disagrees with its stated value.\n";

static int lesson15_text(void) {
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

static int put_json(char *s) {
    if (!s) return tlm_error("out of memory writing JSON");
    puts(s);
    free(s);
    return 0;
}

int cmd_lesson(int argc, char **argv) {
    const char *topic_arg[1], *lang = NULL, *html = NULL;
    lesson_args a = {0};
    int json = 0;
    cli_opt opts[] = {
        {"--lang", CLI_STR, &lang, 0, 0, 0},          {"--json", CLI_FLAG, &json, 0, 0, 0},
        {"--model", CLI_STR, &a.model, 0, 0, 0},      {"--prompt", CLI_STR, &a.prompt, 0, 0, 0},
        {"--ids", CLI_STR, &a.ids, 0, 0, 0},          {"--tokenizer", CLI_STR, &a.tokenizer, 0, 0, 0},
        {"--no-bos", CLI_FLAG, &a.no_bos, 0, 0, 0},   {"--stories", CLI_STR, &a.stories, 0, 0, 0},
        {"--data", CLI_STR, &a.data, 0, 0, 0},        {"--quick", CLI_FLAG, &a.quick, 0, 0, 0},
        {"--html", CLI_STR, &html, 0, 0, 0},
    };
    cli_command cmd = {"lesson", USAGE, opts, sizeof opts / sizeof opts[0], 1, topic_arg, 1, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    lesson_lang lg = LESSON_EN;
    if (lang && !strcmp(lang, "zh"))
        lg = LESSON_ZH;
    else if (lang && strcmp(lang, "en") != 0)
        return cli_usage_error("lesson", "--lang \"%s\": expected zh or en", lang);
    if (cmd.n_args == 0) {
        if (a.model || a.prompt || a.ids) return cli_usage_error("lesson", "--model/--prompt/--ids go with a topic (stream)");
        if (html) return cli_usage_error("lesson", "--html goes with a topic");
        if (json) return put_json(lesson_index_json()) ? cli_fail("lesson") : 0;
        lesson_print_index(stdout, lg);
        return 0;
    }
    const lesson_topic *t = lesson_find(topic_arg[0]);
    if (!t) {
        char names[256];
        size_t k = 0;
        for (const lesson_topic *p = lesson_topics; p->name && k < sizeof names; p++)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", p->name);
        return cli_usage_error("lesson", "there is no topic \"%s\" (topics: %s)", topic_arg[0], names);
    }
    int is_stream = !strcmp(t->name, "stream");
    if ((a.model || a.prompt || a.ids || a.tokenizer) && !is_stream)
        return cli_usage_error("lesson", "--model/--prompt/--ids/--tokenizer go with the topic stream");
    if (a.model && !a.prompt == !a.ids)
        return cli_usage_error("lesson", "lesson stream --model DIR needs one of --prompt TEXT and --ids \"1 2 3\"");
    if ((a.prompt || a.ids) && !a.model) return cli_usage_error("lesson", "--prompt/--ids need --model DIR");
    if (a.prompt && !*a.prompt) return cli_usage_error("lesson", "--prompt is empty");
    if (html && tlm_output_check(html)) return cli_fail("lesson"); /* (before any work) */
    if (!strcmp(t->name, "15") && !json && !html && lg == LESSON_EN) return lesson15_text(); /* as it always printed */

    lesson_out o;
    lesson_out_init(&o, lg, t->name);
    int rc = lesson_run(t, &o, &a);
    int bad = 0;
    for (int i = 0; i < o.n_num; i++) bad += !o.num[i].ok;
    if (!rc) {
        if (json)
            rc = put_json(lesson_json(&o, t));
        else
            lesson_print_text(stdout, &o, t);
        if (!rc && html) rc = lesson_html(html, &o, t);
    }
    lesson_out_free(&o);
    if (!rc && (fflush(stdout) || ferror(stdout))) rc = tlm_error("writing to standard output failed");
    if (rc) return cli_fail("lesson");
    return bad ? 1 : 0;
}

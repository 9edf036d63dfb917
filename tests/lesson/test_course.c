/* test_course.c — every topic of the course (src/lessons/course.h): each number it prints agrees
 * with its stated value at the stated precision, the count of numbers per topic is what it is (a
 * number that goes missing fails), the Chinese run computes the same numbers, the values the
 * lesson texts state are all there, and the derived stated values are recomputed here in double
 * from their formulas (independently of the float32 kernels that must match them). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lessons/course.h"
#include "util/error.h"

static int failures = 0, checks = 0;

static void expect(int ok, const char *what) {
    checks++;
    if (!ok) failures++;
    printf("%-78s %s\n", what, ok ? "ok" : "FAIL");
}

/* how many numbers each topic prints */
static const struct {
    const char *topic;
    int n;
} COUNTS[] = {
    {"residual", 9}, {"rms", 14}, {"rmsnorm-vs-layernorm", 18}, {"placement", 3}, {"stream", 7},
    {"qk-norm", 10}, {"softcap", 6}, {"init-depth", 6}, {"reading-configs", 11}, {"15", 20},
};

/* the values the lesson texts state (issue 46's list), each in the topic that must print it */
static const struct {
    const char *topic, *stated;
} TEXT[] = {
    {"rms", "[9, 16]"},          {"rms", "12.5"},          {"rms", "3.535534"},
    {"rms", "1.000"},            {"rms", "0.75"},          {"rms", "35.355"},
    {"rms", "[13, 14]"},         {"rms", "[0.962, 1.036]"}, {"rms", "[0.849, 1.131]"},
    {"rmsnorm-vs-layernorm", "[-1, 1]"}, {"rmsnorm-vs-layernorm", "[0.849, 1.131]"},
    {"rmsnorm-vs-layernorm", "3.5"},     {"rmsnorm-vs-layernorm", "0.25"},
    {"residual", "[11.0, 18.0, 30.5]"},  {"residual", "0.0008"}, {"residual", "342"},
    {"qk-norm", "11.3"},                 {"softcap", "[9.6, 22.8, 28.9, 30.0]"}, {"softcap", "48.2"},
    {"init-depth", "0.0008"},            {"init-depth", "342"},
};

static int count_of(const char *topic) {
    for (size_t i = 0; i < sizeof COUNTS / sizeof COUNTS[0]; i++)
        if (!strcmp(COUNTS[i].topic, topic)) return COUNTS[i].n;
    return -1;
}

static int has_text_value(const lesson_out *o, const char *stated) {
    for (int i = 0; i < o->n_num; i++)
        if (o->num[i].from_text && !strcmp(o->num[i].stated, stated) && o->num[i].ok) return 1;
    return 0;
}

/* a stated value derived from a formula: the formula in double, printed the same way */
static void formula(const char *what, double v, int digits, const char *stated) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", digits, v);
    char line[160];
    snprintf(line, sizeof line, "formula %s = %s (stated %s)", what, buf, stated);
    expect(!strcmp(buf, stated), line);
}

int main(void) {
    lesson_args a = {0};
    a.stories = TLM_SOURCE_DIR "/data/stories260K.bin";
    a.data = TLM_SOURCE_DIR "/data/tinyshakespeare.txt";
    a.quick = 1;
    char line[256];
    for (const lesson_topic *t = lesson_topics; t->name; t++) {
        lesson_out en, zh;
        lesson_out_init(&en, LESSON_EN, t->name);
        int rc = lesson_run(t, &en, &a);
        snprintf(line, sizeof line, "lesson %s runs%s%s", t->name, rc ? ": " : "", rc ? tlm_last_error() : "");
        expect(rc == 0, line);
        snprintf(line, sizeof line, "lesson %s prints %d numbers (expected %d)", t->name, en.n_num, count_of(t->name));
        expect(en.n_num == count_of(t->name), line);
        for (int i = 0; i < en.n_num; i++) {
            const lesson_number *k = &en.num[i];
            snprintf(line, sizeof line, "  [%s] %.40s: %.40s (%s %.30s)", k->section, k->what, k->computed,
                     k->from_text ? "text" : "formula", k->stated);
            expect(k->ok, line);
            char want[80];
            snprintf(want, sizeof want, "%s §", t->name);
            if (strncmp(k->section, want, strlen(want)) != 0) expect(0, "    its label names the topic");
        }
        for (size_t j = 0; j < sizeof TEXT / sizeof TEXT[0]; j++) {
            if (strcmp(TEXT[j].topic, t->name)) continue;
            snprintf(line, sizeof line, "lesson %s prints the text's %s", t->name, TEXT[j].stated);
            expect(has_text_value(&en, TEXT[j].stated), line);
        }
        if (strcmp(t->name, "placement") != 0) { /* (the demo trains: once is enough) */
            lesson_out_init(&zh, LESSON_ZH, t->name);
            rc = lesson_run(t, &zh, &a);
            int same = !rc && zh.n_num == en.n_num;
            for (int i = 0; same && i < en.n_num; i++)
                same &= zh.num[i].ok == en.num[i].ok && !strcmp(zh.num[i].computed, en.num[i].computed) &&
                        !strcmp(zh.num[i].stated, en.num[i].stated) && !strcmp(zh.num[i].section, en.num[i].section);
            snprintf(line, sizeof line, "lesson %s --lang zh: the same numbers", t->name);
            expect(same, line);
            int han = 0;
            for (int i = 0; i < zh.n_item; i++)
                if (zh.item[i].text && strstr(zh.item[i].text, "\xe7\x9a\x84")) han = 1; /* 的 */
            snprintf(line, sizeof line, "lesson %s --lang zh: explained in Chinese", t->name);
            expect(han || !strcmp(t->name, "15"), line);
            lesson_out_free(&zh);
        }
        lesson_out_free(&en);
    }

    /* the derived values, from their formulas */
    formula("sqrt(12.5)", sqrt(12.5), 6, "3.535534");
    formula("sqrt((30^2 + 40^2) / 2)", sqrt(1250.0), 3, "35.355");
    formula("13 / sqrt(182.5)", 13 / sqrt(182.5), 3, "0.962");
    formula("14 / sqrt(182.5)", 14 / sqrt(182.5), 3, "1.036");
    formula("sqrt(182.5)", sqrt(182.5), 3, "13.509");
    formula("3e-4 / sqrt(1.25e-7 + 1e-5)", 3e-4 / sqrt(1.25e-7 + 1e-5), 3, "0.094");
    formula("4e-4 / sqrt(1.25e-7 + 1e-5)", 4e-4 / sqrt(1.25e-7 + 1e-5), 3, "0.126");
    formula("2 * 3 / sqrt(12.5)", 6 / sqrt(12.5), 3, "1.697");
    formula("0.5 * 4 / sqrt(12.5)", 2 / sqrt(12.5), 3, "0.566");
    formula("(2 - 1) / sqrt(2.5)", 1 / sqrt(2.5), 3, "0.632");
    formula("-2 / sqrt(2.5)", 2 / sqrt(2.5), 3, "1.265");
    formula("3 / sqrt(3.5)", 3 / sqrt(3.5), 3, "1.604");
    formula("sqrt(128)", sqrt(128.0), 1, "11.3");
    formula("4 sqrt(128)", 4 * sqrt(128.0), 1, "45.3");
    formula("e^sqrt(128) / (e^sqrt(128) + 1023)", exp(sqrt(128.0)) / (exp(sqrt(128.0)) + 1023), 3, "0.988");
    formula("30 tanh(1/3)", 30 * tanh(1.0 / 3), 1, "9.6");
    formula("30 tanh(1)", 30 * tanh(1.0), 1, "22.8");
    formula("50 tanh(2)", 50 * tanh(2.0), 1, "48.2");
    formula("1 - tanh^2(1/3)", 1 - pow(tanh(1.0 / 3), 2), 3, "0.897");
    formula("1 - tanh^2(1)", 1 - pow(tanh(1.0), 2), 3, "0.420");
    formula("1 - tanh^2(2)", 1 - pow(tanh(2.0), 2), 3, "0.071");
    formula("0.8^32", pow(0.8, 32), 4, "0.0008");
    formula("1.2^32", pow(1.2, 32), 0, "342");
    formula("1.01^32", pow(1.01, 32), 3, "1.375");
    formula("1/sqrt(24)", 1 / sqrt(24.0), 3, "0.204");
    formula("0.02/sqrt(24)", 0.02 / sqrt(24.0), 4, "0.0041");
    formula("sqrt(896)", sqrt(896.0), 2, "29.93");
    formula("151936 * 896 / 1e6", 151936.0 * 896 / 1e6, 1, "136.1");
    formula("2 * 24 * 128 * 2 / 1024", 2.0 * 24 * 128 * 2 / 1024, 0, "12");
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}

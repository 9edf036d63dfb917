/* course.h — the course: one `tinylm lesson TOPIC` per topic of the lessons, each computing the
 * topic's worked numbers with the engine's own kernels (ops/) and checking them against the value
 * the text states, at the text's precision: a number agrees when the engine's value, printed with
 * the text's number of decimals, is the text's string. Each number carries a label naming the
 * topic and the section it belongs to (tinylm's division of the topic, not a page of a text).
 * Demos (short training runs, a real checkpoint read wrongly) print their own tables. */
#ifndef TLM_COURSE_H
#define TLM_COURSE_H

#include <stdio.h>

typedef enum { LESSON_EN = 0, LESSON_ZH = 1 } lesson_lang;

typedef struct {
    char section[64];   /* "rms §2" */
    char what[192];     /* what is computed, in the lesson's language */
    char computed[192]; /* the engine's value(s) at the text's precision */
    char stated[128];   /* the stated value */
    int from_text;      /* 1: the value a lesson text states; 0: derived here from the topic's formula */
    int ok;             /* computed == stated */
} lesson_number;

enum { LESSON_HEADING, LESSON_NUMBER, LESSON_TEXT, LESSON_PRE };

typedef struct {
    int kind;   /* LESSON_* */
    int number; /* LESSON_NUMBER: index into num */
    char *text; /* heading / paragraph / preformatted line (malloc'd) */
} lesson_item;

/* what a lesson may read besides its own numbers (NULL: not given) */
typedef struct {
    const char *model, *prompt, *ids, *tokenizer; /* lesson stream --model DIR (--prompt | --ids) */
    const char *stories;                          /* stories260K.bin (default data/stories260K.bin) */
    const char *data;                             /* a text to train demos on (default data/tinyshakespeare.txt) */
    int no_bos;
    int quick; /* fewer steps for the demos (the tests) */
} lesson_args;

typedef struct {
    lesson_lang lang;
    const char *topic;
    char section[64];
    int derived; /* the numbers added now are derived from the formulas, not stated by a text */
    lesson_number *num;
    int n_num, cap_num;
    lesson_item *item;
    int n_item, cap_item;
    int oom;
    /* lesson stream --model: the table's columns (owned; NULL otherwise), [data_L + 1] / [data_L] */
    int data_L;
    double *data_at, *data_mean, *data_attn, *data_ffn;
    /* what a page draws beyond the numbers (placement: the variants' curves, stream and gradient
     * norms), a cJSON object owned here, or NULL */
    void *page;
} lesson_out;

typedef struct {
    const char *name;              /* the command's argument: "rms" */
    const char *title_en, *title_zh;
    const char *shows_en, *shows_zh; /* what it shows, one line */
    const char *takes;             /* how long it takes on 2 cores ("< 1 s") */
    int (*run)(lesson_out *o, const lesson_args *a); /* 0, or -1 with tlm_error set */
} lesson_topic;

/* the topics in the lessons' order (lesson 15 last), NULL-terminated */
extern const lesson_topic lesson_topics[];
const lesson_topic *lesson_find(const char *name);

void lesson_out_init(lesson_out *o, lesson_lang lang, const char *topic);
void lesson_out_free(lesson_out *o);

/* pick the text of the lesson's language */
#define LZ(o, en, zh) ((o)->lang == LESSON_ZH ? (zh) : (en))

/* a new section: its label is "<topic> §<id>" (id "2", "check 1", "demo") */
void lesson_section(lesson_out *o, const char *id, const char *title_en, const char *title_zh);
/* the numbers that follow are stated by a lesson text (0) or derived from the topic's formula (1) */
static inline void lesson_derived(lesson_out *o, int derived) { o->derived = derived; }
/* a number (n values, one shown bare, more as [a, b, ...]) printed with `digits` decimals,
 * against the text's `stated` string in the same form; returns ok */
int lesson_num(lesson_out *o, const char *what_en, const char *what_zh, const double *v, int n, int digits,
               const char *stated);
/* a fact that is not one number: `holds` computed by the caller, `computed` its evidence */
int lesson_fact(lesson_out *o, const char *what_en, const char *what_zh, int holds, const char *computed,
                const char *stated);
/* a paragraph of explanation */
void lesson_say(lesson_out *o, const char *en, const char *zh);
/* a preformatted line (a demo's table) */
void lesson_pre(lesson_out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* runs one topic into o (lesson_out_init first); 0 or -1 */
int lesson_run(const lesson_topic *t, lesson_out *o, const lesson_args *a);
/* writers */
int lesson_print_text(FILE *f, const lesson_out *o, const lesson_topic *t);
char *lesson_json(const lesson_out *o, const lesson_topic *t); /* malloc'd */
/* the page (src/report, kind "lesson"): the numbers, the text, the figures, the placement switch;
 * written atomically. 0 or -1 + tlm_error naming the path */
int lesson_html(const char *path, const lesson_out *o, const lesson_topic *t);
int lesson_print_index(FILE *f, lesson_lang lang);
char *lesson_index_json(void); /* malloc'd */

/* the topics (lesson_topics.c, lesson_demos.c) */
int lesson_residual(lesson_out *o, const lesson_args *a);
int lesson_rms(lesson_out *o, const lesson_args *a);
int lesson_rms_vs_ln(lesson_out *o, const lesson_args *a);
int lesson_placement(lesson_out *o, const lesson_args *a);
int lesson_stream(lesson_out *o, const lesson_args *a);
int lesson_qk_norm(lesson_out *o, const lesson_args *a);
int lesson_softcap(lesson_out *o, const lesson_args *a);
int lesson_init_depth(lesson_out *o, const lesson_args *a);
int lesson_reading_configs(lesson_out *o, const lesson_args *a);
int lesson_fifteen(lesson_out *o, const lesson_args *a);

#endif

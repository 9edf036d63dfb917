/* course.c — the course's index, the bookkeeping of a lesson's numbers, and its writers
 * (a terminal text and JSON). The topics themselves are in lesson_topics.c and lesson_demos.c. */
#include "course.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lesson15.h"
#include "report/report.h"
#include "util/error.h"

static void add_stream(struct cJSON *root, const lesson_out *o);

const lesson_topic lesson_topics[] = {
    {"residual", "The residual connection: y = x + F(x)", "残差连接：y = x + F(x)",
     "the update example, the gradient 1 + F'(x), 32 layers with and without the identity path",
     "更新的例子、梯度 1 + F'(x)、32 层有无恒等路径的梯度", "< 1 s", lesson_residual},
    {"rms", "RMS and RMSNorm", "RMS 与 RMSNorm",
     "RMS([3,4]) step by step, the check questions, scale invariance, eps, the gain",
     "逐步计算 RMS([3,4])、思考题答案、缩放不变性、eps、增益", "< 1 s", lesson_rms},
    {"rmsnorm-vs-layernorm", "LayerNorm vs RMSNorm", "LayerNorm 与 RMSNorm 的对比",
     "LayerNorm([3,4]) = [-1, 1] against RMSNorm's [0.849, 1.131], mean and variance, shift invariance",
     "LayerNorm([3,4]) = [-1, 1] 对比 RMSNorm 的 [0.849, 1.131]、均值与方差、平移不变性", "< 1 s", lesson_rms_vs_ln},
    {"placement", "Where the norm goes: Pre, Post, sandwich, output, none", "归一化放在哪里：Pre、Post、三明治、输出、无",
     "the five placements trained side by side (loss curves, stream norms, gradients by layer)",
     "五种放置方式并排训练（损失曲线、残差流范数、各层梯度）", "about 20 s", lesson_placement},
    {"stream", "The residual stream", "残差流",
     "stream norms by layer, increments, the Post-Norm stream at sqrt(d), the early logit lens; --model DIR: any checkpoint",
     "各层残差流范数、增量、Post-Norm 的 sqrt(d)、早期 logit lens；--model DIR：任意检查点", "about 2 s", lesson_stream},
    {"qk-norm", "QK-Norm and its bound on the attention logits", "QK-Norm 与注意力 logit 的上界",
     "the bound sqrt(128) = 11.3 with unit gains, reached and not reached, what gains do",
     "单位增益时的上界 sqrt(128) ≈ 11.3、达到与未达到、增益的作用", "< 1 s", lesson_qk_norm},
    {"softcap", "Soft-capping: cap * tanh(x / cap)", "软上限：cap * tanh(x / cap)",
     "the capped values, their gradients against hard clipping", "软上限后的数值、与硬截断的梯度对比", "< 1 s",
     lesson_softcap},
    {"init-depth", "Initialisation and depth", "初始化与深度",
     "0.8^32 and 1.2^32, GPT-2's 1/sqrt(2N), the stream at init by depth with and without it",
     "0.8^32 与 1.2^32、GPT-2 的 1/sqrt(2N)、初始化时残差流随深度的变化", "about 2 s", lesson_init_depth},
    {"reading-configs", "Reading a config and a DecoderLayer.forward", "读懂 config 与 DecoderLayer.forward",
     "Qwen2.5-0.5B's config read by the engine (head_dim, GQA, parameters, KV cache); the 1 + w norm offset read wrongly",
     "引擎读取 Qwen2.5-0.5B 的 config（head_dim、GQA、参数量、KV cache）；把 1 + w 读错的后果", "about 2 s",
     lesson_reading_configs},
    {"15", "Lesson 15: residual connections and normalization (the original checks)",
     "第 15 课：残差连接与归一化（原有的核对）", "lesson 15's numbers as before", "第 15 课原有的数值", "< 1 s",
     lesson_fifteen},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};

const lesson_topic *lesson_find(const char *name) {
    for (const lesson_topic *t = lesson_topics; t->name; t++)
        if (!strcmp(t->name, name)) return t;
    return NULL;
}

void lesson_out_init(lesson_out *o, lesson_lang lang, const char *topic) {
    memset(o, 0, sizeof *o);
    o->lang = lang;
    o->topic = topic;
}

void lesson_out_free(lesson_out *o) {
    for (int i = 0; i < o->n_item; i++) free(o->item[i].text);
    free(o->item), free(o->num);
    free(o->data_at), free(o->data_mean), free(o->data_attn), free(o->data_ffn);
    cJSON_Delete(o->page);
    memset(o, 0, sizeof *o);
}

static lesson_item *new_item(lesson_out *o, int kind, const char *text) {
    if (o->n_item == o->cap_item) {
        int cap = o->cap_item ? 2 * o->cap_item : 64;
        lesson_item *p = realloc(o->item, sizeof *p * (size_t)cap);
        if (!p) return o->oom = 1, NULL;
        o->item = p, o->cap_item = cap;
    }
    char *copy = NULL;
    if (text && !(copy = strdup(text))) return o->oom = 1, NULL;
    lesson_item *it = &o->item[o->n_item++];
    it->kind = kind, it->number = -1, it->text = copy;
    return it;
}

void lesson_section(lesson_out *o, const char *id, const char *title_en, const char *title_zh) {
    snprintf(o->section, sizeof o->section, "%s §%s", o->topic, id);
    char buf[320];
    snprintf(buf, sizeof buf, "[%s] %s", o->section, LZ(o, title_en, title_zh));
    new_item(o, LESSON_HEADING, buf);
}

/* a bounded copy (the strings are labels; a cut one is still a label) */
static void copy(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static lesson_number *new_number(lesson_out *o, const char *what_en, const char *what_zh) {
    if (o->n_num == o->cap_num) {
        int cap = o->cap_num ? 2 * o->cap_num : 64;
        lesson_number *p = realloc(o->num, sizeof *p * (size_t)cap);
        if (!p) return o->oom = 1, NULL;
        o->num = p, o->cap_num = cap;
    }
    lesson_item *it = new_item(o, LESSON_NUMBER, NULL);
    if (!it) return NULL;
    it->number = o->n_num;
    lesson_number *k = &o->num[o->n_num++];
    memset(k, 0, sizeof *k);
    copy(k->section, sizeof k->section, o->section);
    copy(k->what, sizeof k->what, LZ(o, what_en, what_zh));
    k->from_text = !o->derived;
    return k;
}

/* one value at `digits` decimals; a negative zero prints as 0 ("-0.000" is not a number a text writes) */
static void fmt_one(char *buf, size_t size, double v, int digits) {
    snprintf(buf, size, "%.*f", digits, v);
    if (buf[0] == '-') {
        int zero = 1;
        for (const char *p = buf + 1; *p; p++)
            if (*p != '0' && *p != '.') zero = 0;
        if (zero) memmove(buf, buf + 1, strlen(buf));
    }
}

int lesson_num(lesson_out *o, const char *what_en, const char *what_zh, const double *v, int n, int digits,
               const char *stated) {
    lesson_number *k = new_number(o, what_en, what_zh);
    if (!k) return 0;
    size_t len = 0, cap = sizeof k->computed;
    if (n > 1) len += (size_t)snprintf(k->computed + len, cap - len, "[");
    for (int i = 0; i < n && len < cap; i++) {
        char one[64];
        fmt_one(one, sizeof one, v[i], digits);
        len += (size_t)snprintf(k->computed + len, cap - len, "%s%s", i ? ", " : "", one);
    }
    if (n > 1 && len < cap) snprintf(k->computed + len, cap - len, "]");
    copy(k->stated, sizeof k->stated, stated);
    int finite = 1;
    for (int i = 0; i < n; i++) finite &= isfinite(v[i]) != 0;
    k->ok = finite && !strcmp(k->computed, stated);
    return k->ok;
}

int lesson_fact(lesson_out *o, const char *what_en, const char *what_zh, int holds, const char *computed,
                const char *stated) {
    lesson_number *k = new_number(o, what_en, what_zh);
    if (!k) return 0;
    copy(k->computed, sizeof k->computed, computed);
    copy(k->stated, sizeof k->stated, stated);
    k->ok = holds != 0;
    return k->ok;
}

void lesson_say(lesson_out *o, const char *en, const char *zh) { new_item(o, LESSON_TEXT, LZ(o, en, zh)); }

void lesson_pre(lesson_out *o, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    new_item(o, LESSON_PRE, buf);
}

/* lesson 15's own checks, as numbers of the topic "15" (its printer in cmd_lesson.c is unchanged) */
int lesson_fifteen(lesson_out *o, const lesson_args *a) {
    (void)a;
    lesson_check c[64];
    int n = lesson15_run(c, 64);
    if (n < 0) return -1;
    lesson_section(o, "1", "Lesson 15's worked numbers", "第 15 课的数值");
    lesson_derived(o, 0);
    for (int i = 0; i < n; i++) lesson_fact(o, c[i].what, c[i].what, c[i].ok, c[i].computed, c[i].stated);
    return 0;
}

int lesson_run(const lesson_topic *t, lesson_out *o, const lesson_args *a) {
    int rc = t->run(o, a);
    if (!rc && o->oom) return tlm_error("out of memory collecting the lesson's numbers");
    return rc;
}

/* ---- writers ------------------------------------------------------------------------------------- */

/* English paragraphs wrap at spaces; Chinese ones (no spaces to break at) are printed whole */
static void print_para(FILE *f, const char *s, int width, int wrap) {
    const char *p = s;
    if (!wrap) {
        fprintf(f, "  %s\n", p);
        return;
    }
    while (*p) {
        size_t len = strlen(p);
        if ((int)len <= width) {
            fprintf(f, "  %s\n", p);
            return;
        }
        int cut = width;
        while (cut > 0 && p[cut] != ' ') cut--;
        if (cut == 0) {
            fprintf(f, "  %s\n", p);
            return;
        }
        fprintf(f, "  %.*s\n", cut, p);
        p += cut + 1;
    }
}

int lesson_print_text(FILE *f, const lesson_out *o, const lesson_topic *t) {
    int zh = o->lang == LESSON_ZH;
    fprintf(f, "tinylm lesson %s — %s\n", t->name, zh ? t->title_zh : t->title_en);
    fprintf(f, "%s\n", zh ? "（每个数都由引擎自己的算子计算，按给定值的精度与它比较；给定值来自课文或由主题的公式推出，见“课文:”/“公式:”；标签是主题与小节，不是课文的页码）"
                          : "(every number is computed by the engine's own kernels and compared with its stated value at "
                            "that value's precision; \"text:\" marks a value a lesson text states, \"formula:\" one "
                            "derived from the topic's formula; a label names the topic and section, not a page)");
    int bad = 0;
    for (int i = 0; i < o->n_item; i++) {
        const lesson_item *it = &o->item[i];
        switch (it->kind) {
        case LESSON_HEADING:
            fprintf(f, "\n%s\n", it->text);
            break;
        case LESSON_TEXT:
            print_para(f, it->text, 96, !zh);
            break;
        case LESSON_PRE:
            fprintf(f, "    %s\n", it->text);
            break;
        case LESSON_NUMBER: {
            const lesson_number *k = &o->num[it->number];
            fprintf(f, "  %-58s = %-30s %-8s %-22s %s\n", k->what, k->computed,
                    k->from_text ? (zh ? "课文:" : "text:") : (zh ? "公式:" : "formula:"), k->stated,
                    k->ok ? "ok" : "MISMATCH");
            bad += !k->ok;
            break;
        }
        }
    }
    if (zh)
        fprintf(f, "\n%d 个数中 %d 个与给定的值一致。\n", o->n_num, o->n_num - bad);
    else
        fprintf(f, "\n%d of %d numbers agree with the stated values.\n", o->n_num - bad, o->n_num);
    return bad;
}

char *lesson_json(const lesson_out *o, const lesson_topic *t) {
    cJSON *root = cJSON_CreateObject(), *nums = cJSON_CreateArray(), *items = cJSON_CreateArray();
    if (!root || !nums || !items) {
        cJSON_Delete(root), cJSON_Delete(nums), cJSON_Delete(items);
        return NULL;
    }
    int bad = 0;
    cJSON_AddStringToObject(root, "topic", t->name);
    cJSON_AddStringToObject(root, "title", o->lang == LESSON_ZH ? t->title_zh : t->title_en);
    cJSON_AddStringToObject(root, "lang", o->lang == LESSON_ZH ? "zh" : "en");
    for (int i = 0; i < o->n_num; i++) {
        const lesson_number *k = &o->num[i];
        cJSON *n = cJSON_CreateObject();
        cJSON_AddStringToObject(n, "section", k->section);
        cJSON_AddStringToObject(n, "what", k->what);
        cJSON_AddStringToObject(n, "computed", k->computed);
        cJSON_AddStringToObject(n, "stated", k->stated);
        cJSON_AddStringToObject(n, "source", k->from_text ? "text" : "formula");
        cJSON_AddBoolToObject(n, "ok", k->ok);
        cJSON_AddItemToArray(nums, n);
        bad += !k->ok;
    }
    for (int i = 0; i < o->n_item; i++) {
        const lesson_item *it = &o->item[i];
        if (it->kind == LESSON_NUMBER) continue;
        cJSON *n = cJSON_CreateObject();
        cJSON_AddStringToObject(n, "kind", it->kind == LESSON_HEADING ? "heading"
                                           : it->kind == LESSON_TEXT  ? "text"
                                                                      : "pre");
        cJSON_AddStringToObject(n, "text", it->text);
        cJSON_AddItemToArray(items, n);
    }
    cJSON_AddItemToObject(root, "numbers", nums);
    add_stream(root, o);
    cJSON_AddItemToObject(root, "text", items);
    cJSON_AddNumberToObject(root, "agree", o->n_num - bad);
    cJSON_AddNumberToObject(root, "total", o->n_num);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

static void add_stream(cJSON *root, const lesson_out *o) {
    if (!o->data_at) return;
    cJSON *st = cJSON_AddObjectToObject(root, "stream");
    cJSON_AddNumberToObject(st, "layers", o->data_L);
    cJSON_AddItemToObject(st, "norm_last_token", cJSON_CreateDoubleArray(o->data_at, o->data_L + 1));
    cJSON_AddItemToObject(st, "norm_mean", cJSON_CreateDoubleArray(o->data_mean, o->data_L + 1));
    cJSON_AddItemToObject(st, "attn_increment_last_token", cJSON_CreateDoubleArray(o->data_attn, o->data_L));
    cJSON_AddItemToObject(st, "ffn_increment_last_token", cJSON_CreateDoubleArray(o->data_ffn, o->data_L));
}

int lesson_html(const char *path, const lesson_out *o, const lesson_topic *t) {
    int zh = o->lang == LESSON_ZH;
    cJSON *root = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(root, "items");
    cJSON_AddStringToObject(root, "kind", "lesson");
    cJSON_AddStringToObject(root, "topic", t->name);
    cJSON_AddStringToObject(root, "title", zh ? t->title_zh : t->title_en);
    cJSON_AddStringToObject(root, "lang", zh ? "zh" : "en");
    cJSON_AddStringToObject(root, "note",
                            zh ? "每个数都由引擎自己的算子计算，按给定值的精度比较。标签是主题与小节（tinylm 对主题的划分），不是课文的页码。"
                               : "Every number is computed by the engine's own kernels and compared with its stated "
                                 "value at that value's precision. A label names the topic and a section (tinylm's "
                                 "division of the topic), not a page of a lesson text.");
    int bad = 0;
    for (int i = 0; i < o->n_item; i++) {
        const lesson_item *it = &o->item[i];
        cJSON *n = cJSON_CreateObject();
        if (it->kind == LESSON_NUMBER) {
            const lesson_number *k = &o->num[it->number];
            cJSON_AddStringToObject(n, "kind", "number");
            cJSON_AddStringToObject(n, "section", k->section);
            cJSON_AddStringToObject(n, "what", k->what);
            cJSON_AddStringToObject(n, "computed", k->computed);
            cJSON_AddStringToObject(n, "stated", k->stated);
            cJSON_AddStringToObject(n, "source", k->from_text ? "text" : "formula");
            cJSON_AddBoolToObject(n, "ok", k->ok);
            bad += !k->ok;
        } else {
            cJSON_AddStringToObject(n, "kind", it->kind == LESSON_HEADING ? "heading" : it->kind == LESSON_TEXT ? "text" : "pre");
            cJSON_AddStringToObject(n, "text", it->text);
        }
        cJSON_AddItemToArray(items, n);
    }
    cJSON_AddNumberToObject(root, "agree", o->n_num - bad);
    cJSON_AddNumberToObject(root, "total", o->n_num);
    add_stream(root, o);
    if (o->page) cJSON_AddItemReferenceToObject(root, "figures", (cJSON *)o->page);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return tlm_error("%s: out of memory", path);
    char title[160];
    snprintf(title, sizeof title, "tinylm lesson %s", t->name);
    int rc = report_write_html(path, title, json);
    free(json);
    return rc;
}

int lesson_print_index(FILE *f, lesson_lang lang) {
    int zh = lang == LESSON_ZH;
    fprintf(f, "%s\n\n", zh ? "tinylm 课程：从残差连接到读懂一个真实模型的 config，按课文的顺序"
                            : "The tinylm course: from the residual connection to reading a real model's config, in the "
                              "lessons' order");
    int i = 1;
    for (const lesson_topic *t = lesson_topics; t->name; t++, i++) {
        fprintf(f, "%2d. tinylm lesson %-22s %s\n", i, t->name, zh ? t->title_zh : t->title_en);
        fprintf(f, "    %s  (%s)\n", zh ? t->shows_zh : t->shows_en, t->takes);
    }
    fprintf(f, "\n%s\n", zh ? "选项：--lang zh|en（默认 en）、--json；lesson stream --model DIR --prompt TEXT 读任意检查点。"
                             "实验（训练几分钟以检验课文的论断）：docs/experiments.md。"
                           : "Options: --lang zh|en (default en), --json; lesson stream --model DIR --prompt TEXT reads any "
                             "checkpoint. The experiments that test the lessons' claims by training (minutes each): "
                             "docs/experiments.md.");
    return 0;
}

char *lesson_index_json(void) {
    cJSON *root = cJSON_CreateArray();
    if (!root) return NULL;
    for (const lesson_topic *t = lesson_topics; t->name; t++) {
        cJSON *n = cJSON_CreateObject();
        char cmd[64];
        snprintf(cmd, sizeof cmd, "tinylm lesson %s", t->name);
        cJSON_AddStringToObject(n, "topic", t->name);
        cJSON_AddStringToObject(n, "command", cmd);
        cJSON_AddStringToObject(n, "title", t->title_en);
        cJSON_AddStringToObject(n, "title_zh", t->title_zh);
        cJSON_AddStringToObject(n, "shows", t->shows_en);
        cJSON_AddStringToObject(n, "shows_zh", t->shows_zh);
        cJSON_AddStringToObject(n, "takes", t->takes);
        cJSON_AddItemToArray(root, n);
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

/* lesson_demos.c — the topics whose claims are about a model: placement (the five norm placements
 * trained side by side), stream (the residual stream of stories260K or any checkpoint, through
 * the probes of src/probes), init-depth (the stream at initialisation by depth), reading-configs
 * (Qwen2.5-0.5B's config read by the engine; stories260K's norm gains read with the wrong offset). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "course.h"
#include "lesson15.h"
#include "convert/checkpoint.h"
#include "convert/family.h"
#include "model/config.h"
#include "model/context.h"
#include "model/model.h"
#include "ops/ops.h"
#include "probes/inspect.h"
#include "tokenizer/tokenizer.h"
#include "train/optim.h"
#include "util/error.h"
#include "util/io.h"
#include "util/rng.h"

static const char *stories_path(const lesson_args *a) { return a->stories ? a->stories : "data/stories260K.bin"; }

/* stories260K's tokenizer: tok512.bin beside the checkpoint (a llama2.c file holds none) */
static tlm_tokenizer *stories_tokenizer(const char *path) {
    char tp[4096];
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) : 0;
    if (snprintf(tp, sizeof tp, "%.*s%stok512.bin", dir, path, slash ? "/" : "") >= (int)sizeof tp) {
        tlm_error("%s: the path is too long", path);
        return NULL;
    }
    tlm_tokenizer *t = tlm_tokenizer_load(tp);
    if (!t) tlm_error_prefix("stories260K's tokenizer (tok512.bin beside %s)", path);
    return t;
}

/* ---- the residual stream of one prompt (inspect_run_ex) --------------------------------------- */

typedef struct {
    int L, T;
    double *at, *mean;           /* [L + 1] stream norm after the embedding, after each block */
    double *attn_at, *ffn_at;    /* [L] the increments at the position */
    double *attn_mean, *ffn_mean;
} stream_table;

static void stream_free(stream_table *s) {
    free(s->at), free(s->mean), free(s->attn_at), free(s->ffn_at), free(s->attn_mean), free(s->ffn_mean);
}

static int stream_from_report(stream_table *s, const inspect_report *r) {
    const int L = r->n_layers;
    memset(s, 0, sizeof *s);
    s->L = L, s->T = r->T;
    s->at = malloc(sizeof(double) * (L + 1)), s->mean = malloc(sizeof(double) * (L + 1));
    s->attn_at = malloc(sizeof(double) * (L + 1)), s->ffn_at = malloc(sizeof(double) * (L + 1));
    s->attn_mean = malloc(sizeof(double) * (L + 1)), s->ffn_mean = malloc(sizeof(double) * (L + 1));
    if (!s->at || !s->mean || !s->attn_at || !s->ffn_at || !s->attn_mean || !s->ffn_mean)
        return stream_free(s), tlm_error("out of memory");
    for (int k = 0; k <= L; k++) s->at[k] = r->points[2 * k].v.at, s->mean[k] = r->points[2 * k].v.mean;
    for (int l = 0; l < L; l++) {
        s->attn_at[l] = r->incr[2 * l].v.at, s->attn_mean[l] = r->incr[2 * l].v.mean;
        s->ffn_at[l] = r->incr[2 * l + 1].v.at, s->ffn_mean[l] = r->incr[2 * l + 1].v.mean;
    }
    return 0;
}

/* the lesson's table: every block's stream norm and increments, then the lesson's summary */
static void stream_print(lesson_out *o, const stream_table *s, const char *where) {
    const int L = s->L;
    lesson_pre(o, "%-18s %14s %14s %14s %14s %12s", LZ(o, "stream after", "残差流位置"), where, LZ(o, "mean/tokens", "各位置均值"),
               LZ(o, "attn increment", "注意力增量"), LZ(o, "FFN increment", "FFN 增量"), "|inc|/|x|");
    lesson_pre(o, "%-18s %14.4g %14.4g", LZ(o, "the embedding", "嵌入"), s->at[0], s->mean[0]);
    for (int l = 0; l < L; l++) {
        char name[32];
        snprintf(name, sizeof name, "%s %d", LZ(o, "layer", "层"), l);
        double inc = s->attn_at[l] + s->ffn_at[l];
        lesson_pre(o, "%-18s %14.4g %14.4g %14.4g %14.4g %12.3f", name, s->at[l + 1], s->mean[l + 1], s->attn_at[l],
                   s->ffn_at[l], s->at[l] > 0 ? inc / s->at[l] : 0.0);
    }
    double lo = INFINITY, hi = 0;
    int m0 = L / 4, m1 = (3 * L) / 4; /* the middle half of the blocks */
    if (m1 <= m0) m0 = 0, m1 = L - 1;
    for (int l = m0; l <= m1 && l < L; l++) lo = fmin(lo, s->at[l + 1]), hi = fmax(hi, s->at[l + 1]);
    lesson_pre(o, "%s %.3g -> %s %.3g -> %s %d-%d: %.3g-%.3g -> %s %.3g -> %s %.3g; %s %.3g", LZ(o, "embedding", "嵌入"),
               s->at[0], LZ(o, "layer 0", "第 0 层"), s->at[1], LZ(o, "middle layers", "中间层"), m0, m1, lo, hi,
               LZ(o, "before the last block", "最后一块之前"), L >= 2 ? s->at[L - 1] : s->at[0], LZ(o, "after it", "之后"),
               s->at[L], LZ(o, "last FFN increment", "最后一个 FFN 增量"), s->ffn_at[L - 1]);
}

static int stream_of(tlm_model *m, const int *ids, int n, inspect_report *r, stream_table *s) {
    memset(r, 0, sizeof *r);
    if (inspect_run_ex(m, ids, n, n - 1, 5, 0, NULL, r)) return -1;
    return stream_from_report(s, r);
}

/* lesson stream --model DIR: the table for any checkpoint (no stated numbers: a recipe) */
static int stream_model(lesson_out *o, const lesson_args *a) {
    tlm_model *m = model_load_dir(a->model);
    if (!m) return -1;
    tlm_tokenizer *tok = NULL;
    int *ids = NULL, n = 0, rc = -1;
    size_t n_ids = 0;
    inspect_report r = {0};
    stream_table s = {0};
    if (a->ids) {
        char *end = NULL;
        const char *p = a->ids;
        ids = malloc(sizeof(int) * (strlen(p) + 1));
        if (!ids) goto done;
        while (*p) {
            while (*p == ' ' || *p == ',') p++;
            if (!*p) break;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v >= m->cfg.vocab_size) {
                tlm_error("--ids \"%s\": expected token ids in 0..%d", a->ids, m->cfg.vocab_size - 1);
                goto done;
            }
            ids[n++] = (int)v, p = end;
        }
    } else {
        tok = a->tokenizer ? tlm_tokenizer_load(a->tokenizer) : model_load_tokenizer(a->model);
        if (!tok) {
            tlm_error_prefix("no tokenizer for %s (give --tokenizer PATH, or --ids)", a->model);
            goto done;
        }
        if (tlm_tokenizer_encode(tok, a->prompt, strlen(a->prompt), !a->no_bos, &ids, &n_ids)) goto done;
        n = (int)n_ids;
    }
    if (n == 0) {
        tlm_error("the prompt has no tokens");
        goto done;
    }
    if (n > m->cfg.max_seq) {
        tlm_error("the prompt has %d tokens; %s takes at most %d", n, a->model, m->cfg.max_seq);
        goto done;
    }
    if (stream_of(m, ids, n, &r, &s)) goto done;
    char title[256];
    snprintf(title, sizeof title, "%s: %s, %d %s", LZ(o, "The residual stream of", "残差流："), a->model, n,
             LZ(o, "tokens", "个 token"));
    lesson_section(o, "model", title, title);
    lesson_say(o,
               "L2 norms of the residual stream at the last token (and the mean over the tokens) after the "
               "embedding and after each block, with each block's two increments (what its attention and its FFN "
               "add). The lesson's Qwen2.5-0.5B on \"年假怎么申请？\": 0.47 -> 4.8 -> 15-20 -> 76.1 -> 58.1, the last "
               "block shrinking the stream.",
               "最后一个 token 处（以及各位置平均）的残差流 L2 范数：嵌入之后、每一块之后，以及每一块的两个增量"
               "（注意力与 FFN 各自加上的部分）。课文中 Qwen2.5-0.5B 在“年假怎么申请？”上：0.47 -> 4.8 -> 15-20 -> "
               "76.1 -> 58.1，最后一块使残差流变小。");
    stream_print(o, &s, LZ(o, "last token", "最后 token"));
    char buf[128];
    snprintf(buf, sizeof buf, "%.2g", r.sum_err_rel);
    lesson_derived(o, 1);
    if (r.decomp_applies)
        lesson_fact(o, "the stream is the embedding plus every increment (relative error)", "残差流等于嵌入加上所有增量（相对误差）",
                    r.sum_err_rel < 1e-4, buf, "< 1e-4");
    o->data_L = s.L;
    o->data_at = s.at, o->data_mean = s.mean, o->data_attn = s.attn_at, o->data_ffn = s.ffn_at;
    s.at = s.mean = s.attn_at = s.ffn_at = NULL; /* (o owns them now) */
    rc = 0;
done:
    stream_free(&s);
    inspect_report_free(&r);
    free(ids);
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc;
}

int lesson_stream(lesson_out *o, const lesson_args *a) {
    if (a->model) return stream_model(o, a);
    const char *path = stories_path(a);
    tlm_model *m = model_load_dir(path);
    if (!m) return tlm_error_prefix("stories260K (give its path with --stories FILE)");
    tlm_tokenizer *tok = stories_tokenizer(path);
    int *ids = NULL, rc = -1;
    size_t n = 0;
    inspect_report r = {0};
    stream_table s = {0};
    const char *prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside";
    if (!tok || tlm_tokenizer_encode(tok, prompt, strlen(prompt), 1, &ids, &n)) goto done;
    if (stream_of(m, ids, (int)n, &r, &s)) goto done;
    const int L = s.L, d = m->cfg.d_model;

    lesson_section(o, "1", "The stream grows; each block adds an increment", "残差流在增长；每一块加上一个增量");
    lesson_say(o,
               "stories260K (5 layers, d 64, Pre-Norm) on a story prompt. An increment is what one sublayer writes "
               "onto the stream: x_after = x_before + increment. In Pre-Norm nothing normalises the stream itself, "
               "so the increments pile up and its norm grows with depth.",
               "stories260K（5 层，d 64，Pre-Norm）在一段故事开头上。增量是一个子层写到残差流上的东西："
               "x_after = x_before + 增量。Pre-Norm 中没有任何东西归一化残差流本身，所以增量不断累积，范数随深度增长。");
    stream_print(o, &s, LZ(o, "last token", "最后 token"));
    lesson_derived(o, 1);
    char buf[160];
    snprintf(buf, sizeof buf, "%.3g -> %.3g (x%.2f)", s.mean[0], s.mean[L], s.mean[L] / s.mean[0]);
    lesson_fact(o, "mean stream norm after the last block > 2x after the embedding", "最后一块之后的平均范数 > 嵌入之后的 2 倍",
                s.mean[L] > 2 * s.mean[0], buf, "> x2");
    int grows = 1;
    for (int k = 1; k <= L; k++) grows &= s.mean[k] > s.mean[k - 1];
    lesson_fact(o, "it grows at every block (mean over tokens)", "每一块之后都在增长（各位置平均）", grows, grows ? "yes" : "no",
                "yes");
    snprintf(buf, sizeof buf, "%.2g", r.sum_err_rel);
    lesson_fact(o, "the final stream = the embedding + all 2L increments (relative error)",
                "最终的残差流 = 嵌入 + 全部 2L 个增量（相对误差）", r.decomp_applies && r.sum_err_rel < 1e-5, buf, "< 1e-5");
    o->data_L = s.L; /* (the page's figure; o owns them now) */
    o->data_at = s.at, o->data_mean = s.mean, o->data_attn = s.attn_at, o->data_ffn = s.ffn_at;
    s.at = s.mean = s.attn_at = s.ffn_at = NULL;
    lesson_say(o,
               "The lesson's Qwen2.5-0.5B goes 0.47 -> 4.8 -> 15-20 -> 76.1 -> 58.1: the same growth, larger (24 "
               "layers, trained far longer), and a last block that shrinks the stream, which no small model here "
               "shows (docs/experiments.md, stream_growth). With the weights: tinylm lesson stream --model DIR "
               "--prompt \"年假怎么申请？\".",
               "课文中的 Qwen2.5-0.5B：0.47 -> 4.8 -> 15-20 -> 76.1 -> 58.1：同样的增长，但更大（24 层，训练得久得多），"
               "而且最后一块使残差流变小，这里的小模型都没有出现（docs/experiments.md，stream_growth）。"
               "有权重时：tinylm lesson stream --model DIR --prompt \"年假怎么申请？\"。");

    lesson_section(o, "2", "Post-Norm: the stream sits at sqrt(d)", "Post-Norm：残差流停在 sqrt(d)");
    {
        float x[896], w[896], y[896], rstd;
        rng_state g;
        rng_seed(&g, 7);
        for (int i = 0; i < 896; i++) x[i] = (float)(40.0 * rng_normal(&g)), w[i] = 1.0f;
        double v[2];
        rmsnorm_forward(y, &rstd, x, w, 0.0f, 1, 896, 1e-6f);
        double n2 = 0;
        for (int i = 0; i < 896; i++) n2 += (double)y[i] * y[i];
        v[0] = sqrt(n2);
        lesson_num(o, "|RMSNorm(x)| at d = 896, unit gains (any x)", "d = 896、单位增益时的 |RMSNorm(x)|（任意 x）", v, 1, 2, "29.93");
        rmsnorm_forward(y, &rstd, x, w, 0.0f, 1, d, 1e-6f);
        n2 = 0;
        for (int i = 0; i < d; i++) n2 += (double)y[i] * y[i];
        v[0] = sqrt(n2);
        char st[32];
        snprintf(st, sizeof st, "%.2f", sqrt((double)d));
        lesson_num(o, "the same at stories260K's d = 64", "stories260K 的 d = 64 时", v, 1, 2, st);
    }
    lesson_say(o,
               "A Post-Norm block normalises the sum x + F(x) itself, so every block hands on a vector of RMS 1 "
               "(times the gains): length sqrt(d) whatever came in. The stream cannot grow, and each block's "
               "increment is measured against a stream of fixed size: 29.93 at Qwen's d = 896.",
               "Post-Norm 的块对和 x + F(x) 本身做归一化，所以每一块传出去的都是 RMS 为 1（乘以增益）的向量："
               "不管输入多大，长度都是 sqrt(d)。残差流无法增长，每个增量都相对于固定大小的残差流：在 Qwen 的 d = 896 时是 29.93。");

    lesson_section(o, "3", "Why an early logit lens reads the input token", "为什么早期的 logit lens 读出的是输入 token");
    {
        int same = 0;
        for (int t = 0; t < s.T; t++) same += r.lens_grid[t] == ids[t]; /* lens row 0: the embedding */
        double frac = (double)same / s.T;
        snprintf(buf, sizeof buf, "%d of %d (%.0f%%)", same, s.T, 100 * frac);
        lesson_fact(o, "logit lens at the embedding: top-1 is the input token itself", "嵌入处的 logit lens：top-1 就是输入 token 本身",
                    frac > 0.5, buf, "most positions");
        int last_same = 0;
        for (int t = 0; t < s.T; t++) last_same += r.lens_grid[(size_t)L * s.T + t] == ids[t];
        snprintf(buf, sizeof buf, "%d of %d", last_same, s.T);
        lesson_fact(o, "after the last block: the input token is top-1 far less often", "最后一块之后：输入 token 为 top-1 的次数少得多",
                    last_same < same, buf, "fewer");
    }
    lesson_say(o,
               "The logit lens reads a stage of the stream through the final norm and the unembedding. stories260K "
               "ties the unembedding to the embedding, so at the embedding stage the logit of token j is e_j . e_t: "
               "largest, as a rule, for j = t itself. The early lens predicts the token it was given; the blocks "
               "then move the stream toward the next token.",
               "logit lens 把残差流的某个阶段送进最终归一化和反嵌入来读。stories260K 的反嵌入与嵌入共享权重，"
               "所以在嵌入阶段 token j 的 logit 是 e_j · e_t：通常在 j = t 本身时最大。早期的 lens 预测的就是输入的 token；"
               "之后的各块才把残差流推向下一个 token。");
    rc = 0;
done:
    stream_free(&s);
    inspect_report_free(&r);
    free(ids);
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc;
}

/* ---- init-depth ---------------------------------------------------------------------------------- */

/* stream norm after the last block / after the embedding, at initialisation (mean over tokens) */
static int init_growth(int depth, int scaled, double *ratio) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"model_type\": \"tinylm\", \"vocab_size\": 64, \"hidden_size\": 64, \"num_hidden_layers\": %d,"
             " \"num_attention_heads\": 2, \"intermediate_size\": 128, \"max_position_embeddings\": 32,"
             " \"norm_placement\": \"pre\", \"scale_residual_init\": %s, \"tie_word_embeddings\": true}",
             depth, scaled ? "true" : "false");
    tlm_config cfg;
    if (config_parse(&cfg, json, "init-depth") || config_validate(&cfg, "init-depth")) return -1;
    tlm_model *m = model_create(&cfg);
    if (!m) return -1;
    model_init_weights(m, 46);
    int ids[16];
    for (int i = 0; i < 16; i++) ids[i] = (i * 7 + 3) % 64;
    inspect_report r = {0};
    int rc = inspect_run_ex(m, ids, 16, 15, 1, 0, NULL, &r);
    if (!rc) *ratio = r.points[2 * depth].v.mean / r.points[0].v.mean;
    inspect_report_free(&r);
    model_free(m);
    return rc;
}

int lesson_init_depth(lesson_out *o, const lesson_args *a) {
    (void)a;
    double v[4];
    lesson_section(o, "1", "Products of gains over depth", "深度上增益的连乘");
    lesson_derived(o, 0);
    v[0] = lesson_chain_gradient(0.8f, 32, 0);
    lesson_num(o, "32 layers of gain 0.8: 0.8^32", "32 层增益 0.8：0.8^32", v, 1, 4, "0.0008");
    v[0] = lesson_chain_gradient(1.2f, 32, 0);
    lesson_num(o, "32 layers of gain 1.2: 1.2^32", "32 层增益 1.2：1.2^32", v, 1, 0, "342");
    lesson_say(o,
               "Through a stack without residuals a signal (and its gradient) is multiplied by every layer's gain: a "
               "little below 1 and it vanishes, a little above and it explodes. Initialisation chooses the weights' "
               "scale so that each layer's gain starts near 1.",
               "在没有残差的堆叠中，信号（以及它的梯度）被每一层的增益相乘：略小于 1 就消失，略大于 1 就爆炸。"
               "初始化就是选择权重的尺度，让每一层的增益从 1 附近开始。");

    lesson_section(o, "2", "GPT-2's residual scaling 1/sqrt(2N)", "GPT-2 的残差缩放 1/sqrt(2N)");
    lesson_derived(o, 1);
    v[0] = 1.0 / sqrt(2.0 * 12), v[1] = 0.02 / sqrt(2.0 * 12);
    lesson_num(o, "N = 12 blocks: 1/sqrt(2N)", "N = 12 块：1/sqrt(2N)", v, 1, 3, "0.204");
    lesson_num(o, "the residual projections' std: 0.02/sqrt(2N)", "残差投影的标准差：0.02/sqrt(2N)", v + 1, 1, 4, "0.0041");
    lesson_say(o,
               "Each of the N blocks adds two increments (attention, FFN) to the stream. Independent increments of "
               "variance s^2 sum to variance 2N s^2, so the stream's norm grows like sqrt(2N); GPT-2 scales the "
               "projections that write into the stream by 1/sqrt(2N) to keep the sum at the size of one increment.",
               "N 个块中每一块向残差流加上两个增量（注意力、FFN）。方差为 s^2 的独立增量相加后方差为 2N s^2，"
               "所以残差流的范数像 sqrt(2N) 一样增长；GPT-2 把写入残差流的投影缩放 1/sqrt(2N)，让总和保持一个增量的大小。");

    lesson_section(o, "demo", "The stream at initialisation by depth (Pre-Norm, d 64)", "初始化时残差流随深度的变化（Pre-Norm，d 64）");
    static const int depths[] = {2, 4, 8, 16, 32};
    double un[5], sc[5];
    for (int i = 0; i < 5; i++)
        if (init_growth(depths[i], 0, &un[i]) || init_growth(depths[i], 1, &sc[i])) return -1;
    lesson_pre(o, "%8s %28s %28s", LZ(o, "depth", "深度"), LZ(o, "last/embedding, unscaled", "最后/嵌入，不缩放"),
               LZ(o, "last/embedding, 1/sqrt(2N)", "最后/嵌入，1/sqrt(2N)"));
    for (int i = 0; i < 5; i++) lesson_pre(o, "%8d %28.3f %28.3f", depths[i], un[i], sc[i]);
    char buf[160];
    int up = 1;
    for (int i = 1; i < 5; i++) up &= un[i] > un[i - 1];
    snprintf(buf, sizeof buf, "%.3f -> %.3f", un[0], un[4]);
    lesson_fact(o, "unscaled: the stream at init grows with every doubling of depth", "不缩放：每次深度加倍，初始化时的残差流都变大", up,
                buf, "growing");
    snprintf(buf, sizeof buf, "x%.2f vs x%.2f", un[4] / un[0], sc[4] / sc[0]);
    lesson_fact(o, "scaled: growth from 2 to 32 layers far smaller than unscaled", "缩放后：从 2 层到 32 层的增长远小于不缩放",
                sc[4] / sc[0] < 0.5 * (un[4] / un[0]), buf, "smaller");
    lesson_say(o,
               "Measured on freshly initialised models (the engine's init, std 0.02, with and without "
               "scale_residual_init): without the scaling the stream at the last block grows with depth; with it "
               "the growth is held back. The experiment residual_init trains such models (docs/experiments.md).",
               "在刚初始化的模型上测量（引擎的初始化，std 0.02，scale_residual_init 开与关）：不缩放时最后一块的残差流"
               "随深度增长；缩放后增长被抑制。实验 residual_init 训练了这样的模型（docs/experiments.md）。");
    return 0;
}

/* ---- placement --------------------------------------------------------------------------------------- */

enum { PL_LAYERS = 4 };

typedef struct {
    double loss0, loss_end, val;
    double *curve; /* [n_log] */
    double stream_ratio;       /* trained: stream after the last block / after the embedding (mean) */
    double stream_last;        /* trained: stream norm after the last block (mean over tokens) */
    double grad_first, grad_last; /* at init: parameter-gradient norm of block 0 and of the last block */
    double stream0[PL_LAYERS + 1], stream1[PL_LAYERS + 1]; /* stream norm (mean over the window) by block, init / trained */
    double grad0[PL_LAYERS], grad1[PL_LAYERS];             /* parameter-gradient norm by block, init / trained */
    int diverged;
} placement_run;

/* the stream's norm after the embedding and each block, mean over the window's tokens */
static int window_stream(tlm_model *m, const int *window, int T, double *out) {
    inspect_report ir = {0};
    model_set_mode(m, MODEL_INFER);
    int rc = inspect_run_ex(m, window, T, T - 1, 1, 0, NULL, &ir);
    for (int k = 0; !rc && k <= PL_LAYERS; k++) out[k] = ir.points[2 * k].v.mean;
    inspect_report_free(&ir);
    model_set_mode(m, MODEL_TRAIN);
    return rc;
}

/* each block's parameter-gradient norm on one batch */
static int batch_grads(tlm_model *m, const int *tok, const int *tgt, int B, int T, double *out) {
    inspect_grad_report g = {0};
    int rc = inspect_grad(m, tok, tgt, B, T, &g);
    for (int l = 0; !rc && l < PL_LAYERS; l++) out[l] = g.layer_total[l];
    inspect_grad_report_free(&g);
    return rc;
}

static int train_variant(const char *placement, const int *data, size_t n_data, int V, int steps, int log_every,
                         placement_run *out) {
    enum { B = 4, T = 64, L = PL_LAYERS };
    char json[640];
    snprintf(json, sizeof json,
             "{\"model_type\": \"tinylm\", \"vocab_size\": %d, \"hidden_size\": 64, \"num_hidden_layers\": %d,"
             " \"num_attention_heads\": 4, \"intermediate_size\": 176, \"max_position_embeddings\": %d,"
             " \"norm_placement\": \"%s\", \"tie_word_embeddings\": true}",
             V, L, T, placement);
    tlm_config cfg;
    if (config_parse(&cfg, json, placement) || config_validate(&cfg, placement)) return -1;
    tlm_model *m = model_create(&cfg);
    if (!m) return -1;
    model_init_weights(m, 1337);
    int *tok = malloc(sizeof(int) * B * T), *tgt = malloc(sizeof(int) * B * T), *first = malloc(sizeof(int) * B * T * 2);
    adamw opt = {0};
    optim_config oc = {.lr = 3e-3f, .min_lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                       .weight_decay = 0.1f, .grad_clip = 1.0f, .warmup_steps = steps / 10, .total_steps = steps};
    int rc = -1;
    if (!tok || !tgt || !first) {
        tlm_error("out of memory");
        goto done;
    }
    if (model_alloc_grads(m) || adamw_init(&opt, m, &oc)) goto done;
    const size_t n_train = n_data * 9 / 10;
    const int *window = data + n_train; /* the same prompt for every variant: the first validation window */
    rng_state r;
    rng_seed(&r, 46);
    /* the gradients are measured on the first training batch, before and after */
    for (int i = 0; i < B * T; i++) first[i] = data[i], first[B * T + i] = data[i + 1];
    if (batch_grads(m, first, first + B * T, B, T, out->grad0) || window_stream(m, window, T, out->stream0)) goto done;
    out->grad_first = out->grad0[0], out->grad_last = out->grad0[L - 1];
    for (int step = 0; step < steps; step++) {
        for (int b = 0; b < B; b++) {
            size_t at = (size_t)rng_below(&r, (uint64_t)(n_train - T - 1));
            for (int t = 0; t < T; t++) tok[b * T + t] = data[at + t], tgt[b * T + t] = data[at + t + 1];
        }
        float loss;
        double gn;
        model_zero_grads(m);
        if (model_forward(m, tok, tgt, B, T, &loss) || model_backward(m, 1.0f)) goto done;
        gn = grad_global_norm(m);
        if (!isfinite(loss) || !isfinite(gn)) {
            out->diverged = step + 1;
            break;
        }
        if (step == 0) out->loss0 = loss;
        if (step % log_every == 0) out->curve[step / log_every] = loss;
        if (step == steps - 1) out->curve[(steps - 1) / log_every + 1] = loss;
        out->loss_end = loss;
        adamw_step(&opt, m, lr_at(&oc, step), gn);
    }
    if (batch_grads(m, first, first + B * T, B, T, out->grad1)) goto done;
    /* validation: the held-out tenth, 8 windows */
    double sum = 0;
    for (int k = 0; k < 8; k++) {
        const int *w = data + n_train + (size_t)k * T;
        float loss;
        if (model_forward(m, w, w + 1, 1, T, &loss)) goto done;
        sum += loss;
    }
    out->val = sum / 8;
    if (window_stream(m, window, T, out->stream1)) goto done;
    out->stream_ratio = out->stream1[L] / out->stream1[0];
    out->stream_last = out->stream1[L];
    rc = 0;
done:
    adamw_free(&opt);
    free(tok), free(tgt), free(first);
    model_free(m);
    return rc;
}

int lesson_placement(lesson_out *o, const lesson_args *a) {
    const char *path = a->data ? a->data : "data/tinyshakespeare.txt";
    size_t len = 0;
    char *text = read_text_file(path, &len);
    if (!text) return tlm_error_prefix("the demo's text (give it with --data FILE)");
    if (len > 300000) len = 300000; /* a few hundred steps see far less */
    tlm_tokenizer *tok = tlm_tokenizer_chars(text, len);
    int *ids = NULL, rc = -1;
    size_t n = 0;
    static const char *variants[] = {"pre", "post", "sandwich", "output", "none"};
    enum { NV = 5 };
    placement_run runs[NV];
    const int steps = a->quick ? 100 : 200, log_every = 20, n_log = (steps - 1) / log_every + 2;
    memset(runs, 0, sizeof runs);
    if (!tok || tlm_tokenizer_encode(tok, text, len, 0, &ids, &n)) goto done;
    if (n < 20000) {
        tlm_error("%s: %zu characters; the demo needs at least 20000", path, n);
        goto done;
    }
    const int V = tlm_tokenizer_vocab_size(tok);
    /* one thread: at 256 tokens of d 64 a step is too small to share, and a second thread that
     * waits for a busy core costs far more than it brings */
    int threads = omp_get_max_threads(), failed = 0;
    omp_set_num_threads(1);
    for (int i = 0; i < NV && !failed; i++) {
        if (!(runs[i].curve = calloc((size_t)n_log + 1, sizeof(double)))) failed = 1, tlm_error("out of memory");
        if (!failed && train_variant(variants[i], ids, n, V, steps, log_every, &runs[i])) failed = 1;
    }
    omp_set_num_threads(threads);
    if (failed) goto done;
    double unigram = 0;
    {
        double *cnt = calloc((size_t)V, sizeof(double));
        if (!cnt) goto done;
        for (size_t i = 0; i < n; i++) cnt[ids[i]] += 1;
        for (int v = 0; v < V; v++)
            if (cnt[v] > 0) unigram -= cnt[v] / n * log(cnt[v] / n);
        free(cnt);
    }

    lesson_section(o, "demo", "Five placements trained side by side", "五种放置方式并排训练");
    char head[160];
    snprintf(head, sizeof head,
             "%s", LZ(o, "4 layers, d 64, character-level TinyShakespeare, batch 4 x 64, AdamW lr 3e-3 (warmup 10%, cosine), "
                         "the same data order for every variant",
                      "4 层，d 64，字符级 TinyShakespeare，batch 4 x 64，AdamW lr 3e-3（10% 预热，余弦），每种变体数据顺序相同"));
    lesson_say(o, head, head);
    lesson_pre(o, "%-10s %9s %9s %9s %12s %15s %18s", LZ(o, "placement", "放置"), LZ(o, "loss 0", "初始损失"),
               LZ(o, "loss end", "最终损失"), LZ(o, "val loss", "验证损失"), LZ(o, "|stream|", "|残差流|"),
               LZ(o, "stream last/emb", "残差流 末/嵌入"), LZ(o, "grad last/first@0", "初始梯度 末/首"));
    for (int i = 0; i < NV; i++)
        lesson_pre(o, "%-10s %9.3f %9.3f %9.3f %12.2f %15.2f %18.3f%s", variants[i], runs[i].loss0, runs[i].loss_end,
                   runs[i].val, runs[i].stream_last, runs[i].stream_ratio, runs[i].grad_last / runs[i].grad_first,
                   runs[i].diverged ? " (diverged)" : "");
    lesson_say(o,
               "|stream|: the norm after the last block (mean over the tokens of a validation window; sqrt(64) = 8); "
               "grad last/first@0: the gradient norm of the last block's parameters over block 0's, at "
               "initialisation.",
               "|残差流|：最后一块之后的范数（验证窗口各位置平均；sqrt(64) = 8）；初始梯度 末/首：初始化时最后一块参数的梯度范数与第 0 块之比。");
    lesson_pre(o, "%s", "");
    char line[512];
    int k = snprintf(line, sizeof line, "%-8s", LZ(o, "step", "步"));
    for (int i = 0; i < NV; i++) k += snprintf(line + k, sizeof line - (size_t)k, " %9s", variants[i]);
    lesson_pre(o, "%s", line);
    for (int s = 0; s < n_log; s++) {
        int step = s == n_log - 1 ? steps - 1 : s * log_every;
        k = snprintf(line, sizeof line, "%-8d", step);
        for (int i = 0; i < NV; i++) k += snprintf(line + k, sizeof line - (size_t)k, " %9.3f", runs[i].curve[s]);
        lesson_pre(o, "%s", line);
    }
    {   /* the page's switch: every variant's curve, stream and gradients, on the same window */
        cJSON *pg = cJSON_CreateObject(), *vs = cJSON_AddArrayToObject(pg, "variants");
        double *steps_at = malloc(sizeof(double) * (size_t)n_log);
        char *window = tlm_tokenizer_decode(tok, ids + n * 9 / 10, 64);
        if (!pg || !vs || !steps_at || !window) {
            cJSON_Delete(pg), free(steps_at), free(window);
            tlm_error("out of memory");
            goto done;
        }
        for (int s = 0; s < n_log; s++) steps_at[s] = s == n_log - 1 ? steps - 1 : s * log_every;
        cJSON_AddStringToObject(pg, "window", window);
        cJSON_AddNumberToObject(pg, "layers", PL_LAYERS);
        cJSON_AddItemToObject(pg, "steps", cJSON_CreateDoubleArray(steps_at, n_log));
        for (int i = 0; i < NV; i++) {
            cJSON *v = cJSON_CreateObject();
            cJSON_AddStringToObject(v, "name", variants[i]);
            cJSON_AddItemToObject(v, "loss", cJSON_CreateDoubleArray(runs[i].curve, n_log));
            cJSON_AddItemToObject(v, "stream_init", cJSON_CreateDoubleArray(runs[i].stream0, PL_LAYERS + 1));
            cJSON_AddItemToObject(v, "stream_trained", cJSON_CreateDoubleArray(runs[i].stream1, PL_LAYERS + 1));
            cJSON_AddItemToObject(v, "grad_init", cJSON_CreateDoubleArray(runs[i].grad0, PL_LAYERS));
            cJSON_AddItemToObject(v, "grad_trained", cJSON_CreateDoubleArray(runs[i].grad1, PL_LAYERS));
            cJSON_AddNumberToObject(v, "val_loss", runs[i].val);
            cJSON_AddItemToArray(vs, v);
        }
        free(steps_at), free(window);
        o->page = pg;
    }
    lesson_derived(o, 1);
    char buf[160];
    snprintf(buf, sizeof buf, "%.3f", unigram);
    int all_learn = 1;
    for (int i = 0; i < NV; i++) all_learn &= !runs[i].diverged && runs[i].loss_end < runs[i].loss0;
    lesson_fact(o, "every placement's loss falls (none diverges here)", "每种放置方式的损失都下降（这里都没有发散）", all_learn,
                all_learn ? "yes" : "no", "yes");
    snprintf(buf, sizeof buf, "post %.2f, pre %.2f", runs[1].stream_last, runs[0].stream_last);
    lesson_fact(o, "Post-Norm's stream ends near sqrt(d) = 8 (within 2x), Pre-Norm's above it",
                "Post-Norm 的残差流停在 sqrt(d) = 8 附近（2 倍以内），Pre-Norm 的高于它",
                runs[1].stream_last > 4 && runs[1].stream_last < 16 && runs[0].stream_last > runs[1].stream_last, buf,
                "post ~8 < pre");
    snprintf(buf, sizeof buf, "unigram %.3f; pre %.3f", unigram, runs[0].val);
    lesson_fact(o, "Pre-Norm learns beyond the character frequencies (val < unigram entropy)", "Pre-Norm 学到了字符频率以外的东西（验证损失 < 一元熵）",
                runs[0].val < unigram, buf, "below");
    lesson_say(o,
               "Pre-Norm normalises each sublayer's input and leaves the stream free to grow; Post-Norm normalises "
               "the sum after each block, so its stream stays at sqrt(d); sandwich adds a norm on each sublayer's "
               "output too; 'output' has that norm only; 'none' has no norm in the blocks. In a model this small "
               "and shallow all of them train; the differences the lessons describe (Post-Norm's need for warmup, "
               "its limit on the learning rate) appear with depth, width and larger rates: the experiments "
               "norm_placement and post_norm_warmup measure them (docs/experiments.md).",
               "Pre-Norm 归一化每个子层的输入，残差流可以自由增长；Post-Norm 在每块之后归一化和，所以残差流保持在 "
               "sqrt(d)；三明治在每个子层的输出上也加一个归一化；output 只有这个归一化；none 块内没有归一化。"
               "在这么小、这么浅的模型里它们都能训练；课文描述的差别（Post-Norm 需要预热、学习率受限）要在更深、"
               "更宽、学习率更大时才出现：实验 norm_placement 与 post_norm_warmup 测量了它们（docs/experiments.md）。");
    rc = 0;
done:
    for (int i = 0; i < NV; i++) free(runs[i].curve);
    free(ids), free(text);
    tlm_tokenizer_free(tok);
    return rc;
}

/* ---- reading-configs ---------------------------------------------------------------------------------- */

/* Qwen2.5-0.5B's config.json (the published values the lesson reads) */
static const char QWEN25_05B[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
    " \"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 24,"
    " \"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2,"
    " \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true,"
    " \"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

/* greedy continuation of `prompt` by forwards over the whole context (the model is tiny) */
static int greedy(tlm_model *m, const tlm_tokenizer *tok, const char *prompt, int n_new, char **text) {
    int *ids = NULL;
    size_t n = 0;
    if (tlm_tokenizer_encode(tok, prompt, strlen(prompt), 1, &ids, &n)) return -1;
    int *ctx = realloc(ids, sizeof(int) * (n + (size_t)n_new));
    if (!ctx) return free(ids), tlm_error("out of memory");
    const int V = m->cfg.vocab_size;
    size_t n0 = n;
    for (int k = 0; k < n_new && (int)n < m->cfg.max_seq; k++) {
        if (model_forward(m, ctx, NULL, 1, (int)n, NULL)) return free(ctx), -1;
        const float *row = m->ctx->acts.logits + (n - 1) * (size_t)V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        ctx[n++] = best;
    }
    *text = tlm_tokenizer_decode(tok, ctx + n0, n - n0);
    free(ctx);
    return *text ? 0 : -1;
}

int lesson_reading_configs(lesson_out *o, const lesson_args *a) {
    tlm_config c;
    if (config_parse(&c, QWEN25_05B, "Qwen2.5-0.5B config.json") || config_validate(&c, "Qwen2.5-0.5B config.json"))
        return -1;
    double v[4];
    lesson_section(o, "1", "Qwen2.5-0.5B's config.json, read by the engine", "引擎读取的 Qwen2.5-0.5B config.json");
    lesson_derived(o, 1);
    v[0] = c.head_dim;
    lesson_num(o, "head_dim = hidden_size / num_attention_heads = 896 / 14", "head_dim = hidden_size / num_attention_heads = 896 / 14",
               v, 1, 0, "64");
    v[0] = (double)c.n_heads / c.n_kv_heads;
    lesson_num(o, "query heads per key/value head (GQA) = 14 / 2", "每个 key/value 头对应的 query 头数（GQA）= 14 / 2", v, 1, 0, "7");
    v[0] = c.n_kv_heads * c.head_dim;
    lesson_num(o, "k and v width = 2 x 64", "k、v 的宽度 = 2 x 64", v, 1, 0, "128");
    int nt = 0;
    size_t nf = 0;
    tensor_info *t = config_tensor_table(&c, &nt, &nf);
    if (!t) return -1;
    free(t);
    v[0] = (double)nf / 1e9;
    lesson_derived(o, 0);
    lesson_num(o, "parameters (billions; the embedding counted once: tied)", "参数量（十亿；嵌入只算一次：共享）", v, 1, 2, "0.49");
    lesson_derived(o, 1);
    v[0] = (double)c.vocab_size * c.d_model / 1e6;
    lesson_num(o, "of which the embedding 151936 x 896 (millions)", "其中嵌入 151936 x 896（百万）", v, 1, 1, "136.1");
    v[0] = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 2 / 1024.0;
    lesson_num(o, "KV cache per token in bf16: 2 x 24 layers x 128 x 2 bytes (KiB)", "bf16 下每个 token 的 KV cache：2 x 24 层 x 128 x 2 字节（KiB）",
               v, 1, 0, "12");
    char buf[160];
    snprintf(buf, sizeof buf, "%s, %s, eps %g, qkv bias %s, o bias %s", norm_type_name(c.norm), placement_name(c.placement),
             c.norm_eps, c.attn_bias ? "yes" : "no", c.attn_out_bias ? "yes" : "no");
    lesson_fact(o, "the block: RMSNorm, Pre-Norm, eps 1e-6, bias on q/k/v only", "块结构：RMSNorm、Pre-Norm、eps 1e-6、只有 q/k/v 有偏置",
                c.norm == NORM_RMSNORM && c.placement == PLACE_PRE && c.attn_bias && !c.attn_out_bias &&
                    fabsf(c.norm_eps - 1e-6f) < 1e-12f,
                buf, "rmsnorm, pre, 1e-06, yes, no");
    snprintf(buf, sizeof buf, "%g, tied %s", c.rope_theta, c.tie_embeddings ? "yes" : "no");
    lesson_fact(o, "rope_theta 1e6 and a tied head", "rope_theta 1e6，输出头共享嵌入", c.rope_theta == 1e6f && c.tie_embeddings, buf,
                "1e+06, tied yes");
    lesson_say(o,
               "A config.json is the architecture in numbers: the widths fix the head size and the grouping of "
               "query heads over key/value heads, the flags fix the block (where the norms go, which projections "
               "have biases). Qwen2's DecoderLayer.forward is: residual = h; h = input_layernorm(h); h = "
               "self_attn(h); h = residual + h; residual = h; h = post_attention_layernorm(h); h = mlp(h); h = "
               "residual + h. Both norms act on a sublayer's input: Pre-Norm, despite the name "
               "post_attention_layernorm. `tinylm info --model DIR --explain` reads any checkpoint this way.",
               "config.json 是用数字写成的架构：宽度决定了 head 大小和 query 头在 key/value 头上的分组，"
               "开关决定了块的结构（归一化放在哪里、哪些投影有偏置）。Qwen2 的 DecoderLayer.forward 是："
               "residual = h; h = input_layernorm(h); h = self_attn(h); h = residual + h; residual = h; "
               "h = post_attention_layernorm(h); h = mlp(h); h = residual + h。两个归一化都作用在子层的输入上："
               "这是 Pre-Norm，尽管名字叫 post_attention_layernorm。`tinylm info --model DIR --explain` 可以这样读任何检查点。");

    lesson_section(o, "demo", "The norm's gain read with the wrong offset (stories260K)", "用错误的偏移读取归一化增益（stories260K）");
    const char *path = stories_path(a);
    tlm_model *m = model_load_dir(path);
    if (!m) return tlm_error_prefix("stories260K (give its path with --stories FILE)");
    tlm_tokenizer *tok = stories_tokenizer(path);
    char *right = NULL, *gemma = NULL, *wrong = NULL;
    int rc = -1;
    const char *prompt = "Once upon a time";
    if (!tok) goto done;
    model_set_mode(m, MODEL_INFER);
    if (greedy(m, tok, prompt, 40, &right)) goto done;
    /* store the gains as Gemma does (w - 1, applied as 1 + w) and read them both ways */
    double mean_w = 0;
    long nw = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *ti = &m->tensors[i];
        if (ti->kind != TENSOR_NORM) continue;
        float *x = m->param_mem + ti->offset;
        for (size_t j = 0; j < ti->numel; j++) mean_w += x[j], nw++, x[j] -= 1.0f;
    }
    mean_w /= nw ? nw : 1;
    m->cfg.norm = NORM_RMSNORM_1P;
    if (greedy(m, tok, prompt, 40, &gemma)) goto done;
    m->cfg.norm = NORM_RMSNORM;
    if (greedy(m, tok, prompt, 40, &wrong)) goto done;
    lesson_pre(o, "%s: \"%s\"", LZ(o, "prompt", "提示"), prompt);
    lesson_pre(o, "%-34s %s", LZ(o, "gains w as stored (llama):", "按存储读取 w（llama）："), right);
    lesson_pre(o, "%-34s %s", LZ(o, "stored w - 1, read as 1 + w:", "存为 w - 1，按 1 + w 读取："), gemma);
    lesson_pre(o, "%-34s %s", LZ(o, "stored w - 1, read as w (the bug):", "存为 w - 1，按 w 读取（错误）："), wrong);
    snprintf(buf, sizeof buf, "%.3f", mean_w);
    lesson_fact(o, "stories260K's mean norm gain (why 1 + w storage exists: gains sit near 1)", "stories260K 的平均归一化增益（增益在 1 附近）",
                mean_w > 0.3, buf, "near 1, not 0");
    lesson_fact(o, "the offset read right gives the same text", "偏移读对时文本相同", !strcmp(right, gemma), "same", "same");
    lesson_fact(o, "read without the offset, the text changes", "不加偏移读取，文本改变了", strcmp(right, wrong) != 0, "changed",
                "changed");
    lesson_say(o,
               "Gemma stores each RMSNorm gain as w and applies 1 + w (its weights start at 0); Llama stores the gain "
               "itself. A loader that reads a 1 + w checkpoint as w multiplies every normalised vector by w - 1 "
               "instead of w: the model still runs, produces no error, and writes something else. The config (or "
               "the family, model_type) is the only place this is written down.",
               "Gemma 把每个 RMSNorm 增益存为 w，使用时是 1 + w（权重从 0 开始）；Llama 直接存增益本身。"
               "把 1 + w 的检查点按 w 读取的加载器，会把每个归一化后的向量乘以 w - 1 而不是 w：模型照样运行、"
               "不报错，却写出别的东西。只有 config（或模型家族 model_type）记录了这一点。");
    rc = 0;
done:
    free(right), free(gemma), free(wrong);
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc;
}

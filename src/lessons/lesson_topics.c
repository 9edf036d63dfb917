/* lesson_topics.c — the topics whose numbers are worked examples: residual, rms,
 * rmsnorm-vs-layernorm, qk-norm, softcap. Every value comes from the engine's kernels (ops/):
 * rmsnorm_forward, layernorm_forward, matmul_forward/backward, vec_add, softcap_forward/backward,
 * attention_softmax_row; only what no kernel computes (a square, hard clipping) is written here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "course.h"
#include "lesson15.h"
#include "ops/ops.h"
#include "util/rng.h"

enum { MAXD = 1024 };

/* RMSNorm with gain g (NULL: ones) of a worked example (n <= 16); returns the RMS (1 / rstd) */
static double k_rms(double *out, const double *x, const double *g, int n, float eps) {
    float xf[16] = {0}, w[16] = {0}, y[16], rstd;
    for (int i = 0; i < n; i++) xf[i] = (float)x[i], w[i] = g ? (float)g[i] : 1.0f;
    rmsnorm_forward(y, &rstd, xf, w, 0.0f, 1, n, eps);
    for (int i = 0; out && i < n; i++) out[i] = y[i];
    return 1.0 / rstd;
}

/* LayerNorm with unit gain, no bias (n <= 16); *mean and *var (= 1/rstd^2 - eps) from the kernel's statistics */
static void k_ln(double *out, double *mean, double *var, const double *x, int n, float eps) {
    float xf[16] = {0}, w[16] = {0}, y[16], mu, rstd;
    for (int i = 0; i < n; i++) xf[i] = (float)x[i], w[i] = 1.0f;
    layernorm_forward(y, &mu, &rstd, xf, w, NULL, 1, n, eps);
    for (int i = 0; i < n; i++) out[i] = y[i];
    if (mean) *mean = mu;
    if (var) *var = 1.0 / ((double)rstd * rstd) - eps;
}

static double rms_of(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i] * v[i];
    return sqrt(s / n);
}

/* ---- residual ----------------------------------------------------------------------------------- */

/* y = x + F(x), F linear with weight gain * I (the engine's matmul), and dL/dx for dL/dy = 1 */
static void residual_linear(double *y, double *dx, const double *x, float gain, int n) {
    float w[16 * 16] = {0}, xf[16] = {0}, f[16], yf[16], dy[16] = {0}, dxf[16] = {0};
    for (int i = 0; i < n; i++) w[i * n + i] = gain, xf[i] = (float)x[i], dy[i] = 1.0f, dxf[i] = 0.0f;
    matmul_forward(f, xf, w, NULL, 1, n, n);
    vec_add(yf, xf, f, (size_t)n);
    vec_acc(dxf, dy, (size_t)n);                           /* the identity path */
    matmul_backward(dxf, NULL, NULL, dy, xf, w, 1, n, n); /* the F path */
    for (int i = 0; i < n; i++) y[i] = yf[i], dx[i] = dxf[i];
}

int lesson_residual(lesson_out *o, const lesson_args *a) {
    (void)a;
    double y[4], dx[4];
    lesson_section(o, "1", "A block writes an update onto the stream", "每个模块只在残差流上写一个更新");
    lesson_derived(o, 0);
    {
        float x[3] = {10, 20, 30}, f[3] = {1, -2, 0.5f}, s[3];
        vec_add(s, x, f, 3);
        double v[3] = {s[0], s[1], s[2]};
        lesson_num(o, "x + F(x), x = [10, 20, 30], F(x) = [1, -2, 0.5]", "x + F(x)，x = [10, 20, 30]，F(x) = [1, -2, 0.5]",
                   v, 3, 1, "[11.0, 18.0, 30.5]");
    }
    lesson_say(o,
               "The block computes only a correction F(x); the stream x passes through untouched and the two are "
               "added. The inputs x and F(x) here are reconstructed to give the text's result [11, 18, 30.5]: "
               "each entry moves by F's entry, no more.",
               "模块只计算一个修正量 F(x)；残差流 x 原样通过，两者相加。这里的 x 与 F(x) 是按课文的结果 [11, 18, 30.5] "
               "反推的：每一维只移动 F 的那一维。");

    lesson_section(o, "2", "The identity path in the forward and the backward pass", "前向与反向中的恒等路径");
    lesson_derived(o, 0);
    const double x34[2] = {3, 4};
    residual_linear(y, dx, x34, 0.0f, 2);
    lesson_num(o, "x + F(x), F = 0, x = [3, 4]", "x + F(x)，F = 0，x = [3, 4]", y, 2, 0, "[3, 4]");
    residual_linear(y, dx, x34, 2.0f, 2);
    lesson_num(o, "x + F(x), F(x) = 2x", "x + F(x)，F(x) = 2x", y, 2, 0, "[9, 12]");
    lesson_num(o, "dy/dx = 1 + F'(x), F(x) = 2x", "dy/dx = 1 + F'(x)，F(x) = 2x", dx, 1, 0, "3");
    residual_linear(y, dx, x34, -1.0f, 2);
    lesson_num(o, "dy/dx with F(x) = -x (the one way to cancel the path)", "F(x) = -x 时的 dy/dx（唯一抵消恒等路径的情形）",
               dx, 1, 0, "0");
    lesson_say(o,
               "The derivative of x + F(x) is 1 + F'(x): the 1 is the identity path, so the gradient reaching x is "
               "the gradient at y plus whatever F adds. Only an F that exactly undoes x (F' = -1) closes the path.",
               "x + F(x) 的导数是 1 + F'(x)：其中的 1 就是恒等路径，所以到达 x 的梯度等于 y 处的梯度再加上 F 的贡献。"
               "只有恰好抵消 x 的 F（F' = -1）才会关掉这条路。");

    lesson_section(o, "3", "32 layers with and without the identity path", "32 层：有无恒等路径");
    lesson_derived(o, 0);
    double g = lesson_chain_gradient(0.8f, 32, 0);
    lesson_num(o, "gradient after 32 layers of gain 0.8, no residual (0.8^32)", "32 层增益 0.8、无残差后的梯度（0.8^32）", &g,
               1, 4, "0.0008");
    g = lesson_chain_gradient(1.2f, 32, 0);
    lesson_num(o, "gradient after 32 layers of gain 1.2, no residual (1.2^32)", "32 层增益 1.2、无残差后的梯度（1.2^32）", &g,
               1, 0, "342");
    lesson_derived(o, 1);
    g = lesson_chain_gradient(0.01f, 32, 0);
    lesson_num(o, "32 layers with F' = 0.01 (a block near zero at init), no residual", "32 层 F' = 0.01（初始化时近乎为零的模块），无残差",
               &g, 1, 6, "0.000000");
    g = lesson_chain_gradient(0.01f, 32, 1);
    lesson_num(o, "the same 32 layers with the residual: 1.01^32", "同样 32 层加上残差：1.01^32", &g, 1, 3, "1.375");
    lesson_say(o,
               "Without the identity path the gradient is the product of the layers' gains: 0.8 per layer leaves "
               "0.0008 after 32 layers, 1.2 per layer gives 342. A block that does little at initialisation (gain "
               "0.01) would pass 1e-64, which is 0 in float32; with the residual every factor is 1 + 0.01 and the "
               "gradient arrives almost whole (1.375).",
               "没有恒等路径时，梯度是各层增益的乘积：每层 0.8，32 层后只剩 0.0008；每层 1.2 则放大到 342。"
               "初始化时几乎不起作用的模块（增益 0.01）会只传回 1e-64，在 float32 中就是 0；有了残差，每个因子是 "
               "1 + 0.01，梯度几乎完整地到达（1.375）。");
    return 0;
}

/* ---- rms ------------------------------------------------------------------------------------------ */

int lesson_rms(lesson_out *o, const lesson_args *a) {
    (void)a;
    double y[4], v[4];
    const double x34[2] = {3, 4};
    lesson_section(o, "1", "RMS([3, 4]) step by step", "逐步计算 RMS([3, 4])");
    lesson_derived(o, 0);
    v[0] = x34[0] * x34[0], v[1] = x34[1] * x34[1];
    lesson_num(o, "squares", "平方", v, 2, 0, "[9, 16]");
    double r = k_rms(y, x34, NULL, 2, 0.0f);
    v[0] = r * r;
    lesson_num(o, "mean of the squares (the kernel's RMS, squared)", "平方的均值（算子给出的 RMS 的平方）", v, 1, 1, "12.5");
    lesson_num(o, "RMS = sqrt(12.5)", "RMS = sqrt(12.5)", &r, 1, 6, "3.535534");
    lesson_num(o, "RMSNorm([3, 4]) = x / RMS", "RMSNorm([3, 4]) = x / RMS", y, 2, 3, "[0.849, 1.131]");
    v[0] = rms_of(y, 2);
    lesson_num(o, "RMS of the result", "结果的 RMS", v, 1, 3, "1.000");
    v[0] = y[0] / y[1];
    lesson_num(o, "ratio of the entries (3:4 kept)", "两维之比（保持 3:4）", v, 1, 2, "0.75");
    lesson_say(o,
               "RMSNorm divides by the root of the mean square: the result always has RMS 1, and the direction "
               "(here the ratio 3:4) is untouched. It changes the length of the vector, not where it points. (These "
               "numbers use eps = 0, as the text's formula; the engine's default eps 1e-5 moves them in the 6th "
               "decimal: tinylm lesson 15.)",
               "RMSNorm 除以均方根：结果的 RMS 总是 1，方向（这里是 3:4 的比例）不变。它只改变向量的长度，不改变方向。"
               "（这里按课文的公式取 eps = 0；引擎默认的 eps 1e-5 只影响小数点后第 6 位：见 tinylm lesson 15。）");

    lesson_section(o, "check 1", "Check question: RMS of [30, 40]", "思考题：[30, 40] 的 RMS");
    const double x3040[2] = {30, 40};
    r = k_rms(y, x3040, NULL, 2, 0.0f);
    lesson_num(o, "RMS([30, 40])", "RMS([30, 40])", &r, 1, 3, "35.355");
    lesson_derived(o, 1);
    lesson_num(o, "RMSNorm([30, 40]): the same as for [3, 4]", "RMSNorm([30, 40])：与 [3, 4] 相同", y, 2, 3, "[0.849, 1.131]");
    lesson_say(o, "Ten times the input gives ten times the RMS and the same output: RMSNorm is scale invariant.",
               "输入放大十倍，RMS 也放大十倍，输出不变：RMSNorm 对缩放不变。");

    lesson_section(o, "check 2", "Check question: [3, 4] + 10", "思考题：[3, 4] + 10");
    lesson_derived(o, 0);
    const double x1314[2] = {13, 14};
    v[0] = x1314[0], v[1] = x1314[1];
    lesson_num(o, "[3, 4] + 10", "[3, 4] + 10", v, 2, 0, "[13, 14]");
    r = k_rms(y, x1314, NULL, 2, 0.0f);
    lesson_derived(o, 1);
    lesson_num(o, "RMS([13, 14]) = sqrt(182.5)", "RMS([13, 14]) = sqrt(182.5)", &r, 1, 3, "13.509");
    lesson_derived(o, 0);
    lesson_num(o, "RMSNorm([13, 14])", "RMSNorm([13, 14])", y, 2, 3, "[0.962, 1.036]");
    lesson_say(o,
               "Adding the same constant to every entry is not a scaling: the output moves toward [1, 1] and the 3:4 "
               "contrast is almost gone. RMSNorm does not remove a shared offset (LayerNorm does: tinylm lesson "
               "rmsnorm-vs-layernorm).",
               "给每一维加上同一个常数不是缩放：输出向 [1, 1] 靠拢，3:4 的差别几乎消失。RMSNorm 不会去掉共同的偏移"
               "（LayerNorm 会：见 tinylm lesson rmsnorm-vs-layernorm）。");

    lesson_section(o, "3", "eps and the gain", "eps 与增益");
    lesson_derived(o, 1);
    const double zero[2] = {0, 0}, tiny[2] = {3e-4, 4e-4}, gain[2] = {2, 0.5};
    k_rms(y, zero, NULL, 2, 1e-5f);
    lesson_num(o, "RMSNorm([0, 0]), eps 1e-5 (finite, no division by 0)", "RMSNorm([0, 0])，eps 1e-5（有限，不除以 0）", y, 2, 0,
               "[0, 0]");
    k_rms(y, tiny, NULL, 2, 1e-5f);
    lesson_num(o, "RMSNorm([3e-4, 4e-4]), eps 1e-5: eps dominates", "RMSNorm([3e-4, 4e-4])，eps 1e-5：eps 占主导", y, 2, 3,
               "[0.094, 0.126]");
    k_rms(y, x34, gain, 2, 0.0f);
    lesson_num(o, "RMSNorm([3, 4]) with gain g = [2, 0.5]", "增益 g = [2, 0.5] 时的 RMSNorm([3, 4])", y, 2, 3, "[1.697, 0.566]");
    lesson_say(o,
               "eps sits inside the square root: it keeps a zero vector finite, and for a vector whose mean square "
               "is near eps (here 1.25e-7 against 1e-5) it stops the normalisation from blowing the vector up to RMS "
               "1. The learned gain g then sets each dimension's scale after the normalisation.",
               "eps 在平方根里面：它让零向量的结果保持有限；当向量的均方接近 eps 时（这里是 1.25e-7 对 1e-5），"
               "它阻止归一化把向量放大到 RMS 1。之后由学习到的增益 g 决定每一维的尺度。");
    return 0;
}

/* ---- rmsnorm-vs-layernorm ------------------------------------------------------------------------------ */

int lesson_rms_vs_ln(lesson_out *o, const lesson_args *a) {
    (void)a;
    double y[4], v[4], mean, var;
    const double x34[2] = {3, 4};
    lesson_section(o, "1", "The central contrast: [3, 4]", "核心对比：[3, 4]");
    lesson_derived(o, 0);
    k_ln(y, &mean, &var, x34, 2, 0.0f);
    lesson_num(o, "LayerNorm: mean", "LayerNorm：均值 μ", &mean, 1, 1, "3.5");
    lesson_num(o, "LayerNorm: variance", "LayerNorm：方差 σ²", &var, 1, 2, "0.25");
    v[0] = sqrt(var);
    lesson_derived(o, 1);
    lesson_num(o, "LayerNorm: standard deviation", "LayerNorm：标准差 σ", v, 1, 1, "0.5");
    lesson_derived(o, 0);
    lesson_num(o, "LayerNorm([3, 4]) = (x - mean) / std", "LayerNorm([3, 4]) = (x - μ) / σ", y, 2, 0, "[-1, 1]");
    k_rms(y, x34, NULL, 2, 0.0f);
    lesson_num(o, "RMSNorm([3, 4]) = x / RMS", "RMSNorm([3, 4]) = x / RMS", y, 2, 3, "[0.849, 1.131]");
    lesson_say(o,
               "LayerNorm first subtracts the mean, then divides by the standard deviation: [3, 4] becomes [-1, 1], "
               "its mean gone and only the difference left. RMSNorm skips the centring: it keeps the common part and "
               "the 3:4 ratio.",
               "LayerNorm 先减去均值，再除以标准差：[3, 4] 变成 [-1, 1]，均值被去掉，只留下差异。RMSNorm 不做中心化："
               "它保留了共同部分和 3:4 的比例。");

    lesson_section(o, "2", "More worked examples", "更多例子");
    lesson_derived(o, 0);
    const double x2446[4] = {2, 4, 4, 6}, x[4] = {2, -1, 3, 0};
    k_ln(y, &mean, &var, x2446, 4, 1e-5f);
    lesson_derived(o, 1);
    lesson_num(o, "LayerNorm([2, 4, 4, 6]): mean", "LayerNorm([2, 4, 4, 6])：均值", &mean, 1, 0, "4");
    lesson_num(o, "LayerNorm([2, 4, 4, 6]): variance", "LayerNorm([2, 4, 4, 6])：方差", &var, 1, 0, "2");
    lesson_derived(o, 0);
    lesson_num(o, "LayerNorm([2, 4, 4, 6])", "LayerNorm([2, 4, 4, 6])", y, 4, 3, "[-1.414, 0.000, 0.000, 1.414]");
    v[0] = k_rms(NULL, x2446, NULL, 4, 0.0f);
    lesson_num(o, "RMS of [2, 4, 4, 6] = sqrt(18)", "[2, 4, 4, 6] 的 RMS = sqrt(18)", v, 1, 2, "4.24");
    k_ln(y, &mean, &var, x, 4, 1e-5f);
    lesson_derived(o, 1);
    lesson_num(o, "LayerNorm([2, -1, 3, 0]): mean", "LayerNorm([2, -1, 3, 0])：均值", &mean, 1, 0, "1");
    lesson_num(o, "LayerNorm([2, -1, 3, 0]): variance", "LayerNorm([2, -1, 3, 0])：方差", &var, 1, 1, "2.5");
    lesson_derived(o, 0);
    lesson_num(o, "LayerNorm([2, -1, 3, 0])", "LayerNorm([2, -1, 3, 0])", y, 4, 3, "[0.632, -1.265, 1.265, -0.632]");
    k_rms(y, x, NULL, 4, 1e-5f);
    lesson_num(o, "RMSNorm([2, -1, 3, 0])", "RMSNorm([2, -1, 3, 0])", y, 4, 3, "[1.069, -0.535, 1.604, 0.000]");

    lesson_section(o, "3", "What each is invariant to", "各自对什么不变");
    lesson_derived(o, 1);
    const double x1314[2] = {13, 14};
    k_ln(y, NULL, NULL, x1314, 2, 0.0f);
    lesson_num(o, "LayerNorm([13, 14]) (shifted by 10): unchanged", "LayerNorm([13, 14])（平移 10）：不变", y, 2, 0, "[-1, 1]");
    k_rms(y, x1314, NULL, 2, 0.0f);
    lesson_num(o, "RMSNorm([13, 14]): changed", "RMSNorm([13, 14])：改变了", y, 2, 3, "[0.962, 1.036]");
    const double x3040[2] = {30, 40};
    k_ln(y, NULL, NULL, x3040, 2, 0.0f);
    lesson_num(o, "LayerNorm([30, 40]) (scaled by 10): unchanged", "LayerNorm([30, 40])（放大 10 倍）：不变", y, 2, 0, "[-1, 1]");
    k_rms(y, x3040, NULL, 2, 0.0f);
    lesson_num(o, "RMSNorm([30, 40]): unchanged", "RMSNorm([30, 40])：不变", y, 2, 3, "[0.849, 1.131]");
    v[0] = 2 * 896, v[1] = 896;
    lesson_num(o, "parameters per norm at d = 896: LayerNorm (gain + bias), RMSNorm (gain)",
               "d = 896 时每个归一化层的参数：LayerNorm（增益 + 偏置）、RMSNorm（增益）", v, 2, 0, "[1792, 896]");
    lesson_say(o,
               "Both are invariant to scaling the input; only LayerNorm is invariant to shifting it. RMSNorm drops the "
               "mean (one reduction instead of two) and the bias (half the parameters), and in practice trains as well: "
               "the re-centring is not what makes normalisation work (Zhang & Sennrich 2019; the experiment "
               "rmsnorm_vs_layernorm measures it here).",
               "两者都对输入的缩放不变；只有 LayerNorm 对平移不变。RMSNorm 去掉了均值（一次归约而不是两次）和偏置"
               "（参数减半），实践中训练效果相当：让归一化起作用的不是重新中心化（Zhang & Sennrich 2019；"
               "实验 rmsnorm_vs_layernorm 在这里测量了它）。");
    return 0;
}

/* ---- qk-norm ------------------------------------------------------------------------------------------- */

/* q . k / sqrt(d) after RMSNorm of q and k (gains gq, gk; NULL = ones), by the engine's matmul */
static double qk_logit(const float *q, const float *k, const float *gq, const float *gk, int d, int normed) {
    float ones[MAXD], qn[MAXD], kn[MAXD], rstd, s;
    for (int i = 0; i < d; i++) ones[i] = 1.0f;
    if (normed) {
        rmsnorm_forward(qn, &rstd, q, gq ? gq : ones, 0.0f, 1, d, 1e-6f);
        rmsnorm_forward(kn, &rstd, k, gk ? gk : ones, 0.0f, 1, d, 1e-6f);
    } else {
        memcpy(qn, q, sizeof(float) * (size_t)d), memcpy(kn, k, sizeof(float) * (size_t)d);
    }
    matmul_forward(&s, qn, kn, NULL, 1, d, 1);
    return s / sqrt((double)d);
}

int lesson_qk_norm(lesson_out *o, const lesson_args *a) {
    (void)a;
    enum { D = 128 };
    float q[D], k[D], q10[D], kneg[D], k3[D], ones[D], twos[D], y[D], rstd;
    rng_state r;
    rng_seed(&r, 46);
    for (int i = 0; i < D; i++) {
        q[i] = (float)rng_normal(&r), k[i] = (float)rng_normal(&r);
        q10[i] = 10.0f * q[i], k3[i] = 3.0f * q[i], kneg[i] = -0.5f * q[i], ones[i] = 1.0f, twos[i] = 2.0f;
    }
    double v[4];
    lesson_section(o, "1", "The bound with unit gains, head_dim 128", "单位增益、head_dim 128 时的上界");
    lesson_derived(o, 1);
    rmsnorm_forward(y, &rstd, q, ones, 0.0f, 1, D, 1e-6f);
    double n2 = 0;
    for (int i = 0; i < D; i++) n2 += (double)y[i] * y[i];
    v[0] = sqrt(n2);
    lesson_num(o, "|RMSNorm(q)| = sqrt(head_dim)", "|RMSNorm(q)| = sqrt(head_dim)", v, 1, 1, "11.3");
    lesson_derived(o, 0);
    v[0] = sqrt((double)D);
    lesson_num(o, "the bound sqrt(128) on |q.k| / sqrt(128)", "|q·k| / sqrt(128) 的上界 sqrt(128)", v, 1, 1, "11.3");
    lesson_derived(o, 1);
    v[0] = qk_logit(q, k3, NULL, NULL, D, 1);
    lesson_num(o, "logit for k = 3q (same direction): the bound is reached", "k = 3q（同方向）时的 logit：达到上界", v, 1, 1,
               "11.3");
    v[0] = qk_logit(q, kneg, NULL, NULL, D, 1);
    lesson_num(o, "logit for k = -q/2 (opposite): the lower bound", "k = -q/2（反方向）时的 logit：下界", v, 1, 1, "-11.3");
    double rnd = qk_logit(q, k, NULL, NULL, D, 1);
    char buf[96];
    snprintf(buf, sizeof buf, "%.3f", rnd);
    lesson_fact(o, "logit for independent random q, k (inside the bound)", "独立随机 q、k 的 logit（在上界之内）",
                fabs(rnd) < sqrt((double)D), buf, "|logit| < 11.3");
    double raw = qk_logit(q, k, NULL, NULL, D, 0), raw10 = qk_logit(q10, k, NULL, NULL, D, 0);
    double n10 = qk_logit(q10, k, NULL, NULL, D, 1);
    snprintf(buf, sizeof buf, "%.3f -> %.3f", raw, raw10);
    lesson_fact(o, "without QK-Norm, q * 10 multiplies the logit by 10", "没有 QK-Norm 时，q 乘 10 使 logit 乘 10",
                fabs(raw10 - 10 * raw) <= 1e-4 * fabs(raw10) + 1e-5, buf, "x10: unbounded");
    snprintf(buf, sizeof buf, "%.3f -> %.3f", rnd, n10);
    lesson_fact(o, "with QK-Norm, q * 10 leaves the logit unchanged", "有 QK-Norm 时，q 乘 10 不改变 logit",
                fabs(n10 - rnd) <= 1e-4, buf, "unchanged");
    lesson_say(o,
               "After RMSNorm each query and key has length sqrt(head_dim) (with unit gains), so their dot product "
               "is at most head_dim and the scaled logit q.k / sqrt(head_dim) at most sqrt(head_dim): sqrt(128) = "
               "11.3, whatever the activations do. Without the norm, growing q or k grows the logits without "
               "limit, the softmax saturates and the training can spike.",
               "经过 RMSNorm（单位增益）后，每个 query 和 key 的长度都是 sqrt(head_dim)，所以点积至多为 head_dim，"
               "缩放后的 logit q·k / sqrt(head_dim) 至多为 sqrt(head_dim)：sqrt(128) ≈ 11.3，与激活值无关。"
               "没有这个归一化，q 或 k 变大时 logit 无限增长，softmax 饱和，训练可能出现尖峰。");

    lesson_section(o, "2", "What the gains and the head size do", "增益与 head 大小的作用");
    lesson_derived(o, 1);
    v[0] = qk_logit(q, k3, twos, twos, D, 1);
    lesson_num(o, "gains 2 on q and k: the bound becomes 4 * sqrt(128)", "q、k 的增益为 2：上界变为 4 * sqrt(128)", v, 1, 1,
               "45.3");
    v[0] = sqrt(64.0);
    lesson_num(o, "head_dim 64 (Qwen2.5-0.5B): sqrt(64)", "head_dim 64（Qwen2.5-0.5B）：sqrt(64)", v, 1, 1, "8.0");
    {
        enum { N = 1024 };
        float *s = calloc(N, sizeof(float)), *p = calloc(N, sizeof(float));
        if (!s || !p) {
            free(s), free(p);
            return -1;
        }
        s[0] = (float)sqrt((double)D);
        attention_softmax_row(s, p, N, 0, N - 1, 0.0f);
        v[0] = p[0];
        free(s), free(p);
    }
    lesson_num(o, "softmax weight of one key at the bound among 1024 keys at 0", "1024 个 key 中一个在上界、其余为 0 时它的 softmax 权重",
               v, 1, 3, "0.988");
    lesson_say(o,
               "The gains are learned, so the bound is learned too: it is sqrt(head_dim) times the largest product of "
               "the q and k gains. The bound is loose enough for sharp attention (one key at 11.3 against 1023 keys "
               "at 0 still takes 98.8% of the weight) and tight enough that no logit runs away.",
               "增益是学习得到的，所以上界也随之学习：它等于 sqrt(head_dim) 乘以 q、k 增益乘积的最大值。"
               "这个上界足够宽松，允许尖锐的注意力（一个 key 在 11.3、其余 1023 个在 0 时，它仍占 98.8% 的权重），"
               "又足够紧，不让任何 logit 失控。");
    return 0;
}

/* ---- softcap ---------------------------------------------------------------------------------------------- */

int lesson_softcap(lesson_out *o, const lesson_args *a) {
    (void)a;
    float x[4] = {10, 30, 60, 200}, y[4], dy[4] = {1, 1, 1, 1}, dx[4] = {0};
    double v[4];
    lesson_section(o, "1", "cap * tanh(x / cap)", "cap * tanh(x / cap)");
    lesson_derived(o, 0);
    softcap_forward(y, x, 4, 30.0f);
    for (int i = 0; i < 4; i++) v[i] = y[i];
    lesson_num(o, "soft-cap 30 of [10, 30, 60, 200]", "软上限 30：[10, 30, 60, 200]", v, 4, 1, "[9.6, 22.8, 28.9, 30.0]");
    float h = 100, hy;
    softcap_forward(&hy, &h, 1, 50.0f);
    v[0] = hy;
    lesson_num(o, "soft-cap 50 of 100", "软上限 50：100", v, 1, 1, "48.2");
    lesson_say(o,
               "Small values pass almost unchanged (10 -> 9.6), values near the cap are bent (30 -> 22.8) and "
               "nothing exceeds the cap (200 -> 30.0). Gemma 2 caps the attention logits at 50 and the final logits "
               "at 30.",
               "小的值几乎不变（10 -> 9.6），接近上限的值被弯曲（30 -> 22.8），没有值超过上限（200 -> 30.0）。"
               "Gemma 2 把注意力 logit 限制在 50，把最终 logit 限制在 30。");

    lesson_section(o, "2", "The gradient: soft-cap against hard clipping", "梯度：软上限与硬截断");
    lesson_derived(o, 1);
    softcap_backward(dx, dy, y, 4, 30.0f);
    for (int i = 0; i < 4; i++) v[i] = dx[i];
    lesson_num(o, "d/dx of 30 tanh(x/30) = 1 - tanh^2(x/30) at [10, 30, 60, 200]", "30 tanh(x/30) 的导数 1 - tanh^2(x/30)，在 [10, 30, 60, 200]",
               v, 4, 3, "[0.897, 0.420, 0.071, 0.000]");
    /* hard clipping is no engine op: min(max(x, -cap), cap), with PyTorch clamp's gradient (1 inside [-cap, cap]) */
    for (int i = 0; i < 4; i++) v[i] = x[i] > 30 ? 30 : x[i];
    lesson_num(o, "hard clipping min(x, 30)", "硬截断 min(x, 30)", v, 4, 1, "[10.0, 30.0, 30.0, 30.0]");
    for (int i = 0; i < 4; i++) v[i] = x[i] <= 30 ? 1 : 0;
    lesson_num(o, "its gradient", "它的梯度", v, 4, 0, "[1, 1, 0, 0]");
    char buf[96];
    snprintf(buf, sizeof buf, "%.4f < %.4f", y[2], y[3]);
    lesson_fact(o, "soft-cap keeps 60 and 200 apart (clipping makes both 30)", "软上限仍能区分 60 与 200（硬截断都变成 30）",
                y[2] < y[3], buf, "60 -> below 200's");
    lesson_say(o, "The soft-cap and hard clipping side by side (cap 30):", "软上限与硬截断并排（上限 30）：");
    lesson_pre(o, "%8s %12s %14s %12s %14s", "x", "soft-cap", "d soft-cap", "clip", "d clip");
    for (int i = 0; i <= 8; i++) {
        float xi = 15.0f * i, yi, gi = 0, one = 1;
        softcap_forward(&yi, &xi, 1, 30.0f);
        softcap_backward(&gi, &one, &yi, 1, 30.0f);
        lesson_pre(o, "%8.0f %12.3f %14.4f %12.1f %14d", xi, yi, gi, xi > 30 ? 30.0 : xi, xi <= 30 ? 1 : 0);
    }
    lesson_say(o,
               "Past the cap, clipping passes no gradient at all: a logit stuck above it cannot be trained back and "
               "the order of the clipped values is lost. The soft-cap's gradient 1 - tanh^2 shrinks smoothly but "
               "never reaches zero, and it keeps the order of the values.",
               "超过上限后，硬截断完全不传梯度：卡在上限以上的 logit 无法被训练回来，被截断值之间的顺序也丢失了。"
               "软上限的梯度 1 - tanh^2 平滑地变小，但不为零，并且保留了数值的顺序。");
    return 0;
}

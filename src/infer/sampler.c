#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

typedef struct prob_index prob_index;

int sampler_check(float temperature, int top_k, float top_p) {
    if (temperature < 0.0f || !isfinite(temperature)) return tlm_error("--temperature %g must be >= 0", temperature);
    if (top_k < 0) return tlm_error("--top-k %d must be >= 0", top_k);
    if (!(top_p >= 0.0f && top_p <= 1.0f)) return tlm_error("--top-p %g must be in [0, 1]", top_p);
    return 0;
}

/* a nonzero xorshift64* state from any seed */
static uint64_t mixed_state(uint64_t seed) {
    uint64_t z;
    do z = splitmix64(&seed);
    while (z == 0);
    return z;
}

void sampler_seed_runc(sampler *s, uint64_t seed) { s->state = seed ? seed : mixed_state(0); }

int sampler_init(sampler *s, int vocab_size, float temperature, int top_k, float top_p, uint64_t seed) {
    memset(s, 0, sizeof *s);
    if (sampler_check(temperature, top_k, top_p)) return -1;
    s->vocab_size = vocab_size, s->temperature = temperature, s->top_k = top_k, s->top_p = top_p;
    s->state = mixed_state(seed);
    s->probs = malloc(sizeof(float) * vocab_size);
    s->candidates = malloc(sizeof(prob_index) * vocab_size);
    s->merge_tmp = malloc(sizeof(prob_index) * vocab_size);
    if (!s->probs || !s->candidates || !s->merge_tmp) {
        sampler_free(s);
        return tlm_error("out of memory for the sampler");
    }
    return 0;
}

void sampler_free(sampler *s) {
    free(s->probs), free(s->candidates), free(s->merge_tmp);
    s->probs = NULL, s->candidates = s->merge_tmp = NULL;
}

/* run.c's xorshift64* generator */
static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}
static float random_f32(uint64_t *state) { return (float)(random_u32(state) >> 8) / 16777216.0f; }

/* stable merge sort by descending probability (what glibc's qsort does for run.c) */
static void sort_desc(prob_index *a, prob_index *tmp, int n) {
    if (n < 2) return;
    int h = n / 2;
    sort_desc(a, tmp, h);
    sort_desc(a + h, tmp, n - h);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = a[j].prob > a[i].prob ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof(prob_index) * n);
}

/* The first index of the largest logit, as the scan `if (x[i] > x[best]) best = i` from best = 0
 * finds it (NaNs never win; a NaN x[0] stays), in 16 lanes that the compiler vectorizes: each
 * lane keeps the first index of its strict maximum above -inf, and the lanes are combined by value,
 * then by index, starting from x[0] (a NaN there compares neither above nor equal: 0 stays).
 * That scan, one compare on a loaded x[best] per logit, is several times slower over a vocabulary
 * (docs/performance.md, "Figures behind the code"). */
enum { ARGMAX_LANES = 16 };
static int argmax(const float *x, int n) {
    float lv[ARGMAX_LANES];
    int li[ARGMAX_LANES];
    for (int k = 0; k < ARGMAX_LANES; k++) lv[k] = -INFINITY, li[k] = -1;
    int j = 0;
    for (; j + ARGMAX_LANES <= n; j += ARGMAX_LANES)
        for (int k = 0; k < ARGMAX_LANES; k++) {
            const int gt = x[j + k] > lv[k];
            lv[k] = gt ? x[j + k] : lv[k];
            li[k] = gt ? j + k : li[k];
        }
    for (int k = 0; j + k < n; k++)
        if (x[j + k] > lv[k]) lv[k] = x[j + k], li[k] = j + k;
    int best = 0;
    float bv = x[0];
    for (int k = 0; k < ARGMAX_LANES; k++)
        if (li[k] >= 0 && (lv[k] > bv || (lv[k] == bv && li[k] < best))) bv = lv[k], best = li[k];
    return best;
}

static void softmax(float *x, int n) {
    float mx = x[0], sum = 0.0f;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

static int sample_multinomial(const float *p, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += p[i];
        if (coin < cdf) return i;
    }
    return n - 1;
}

/* keeps the k most probable tokens (ties broken by lower id) and renormalizes */
static void keep_top_k(sampler *s, float *p, int n) {
    if (s->top_k <= 0 || s->top_k >= n) return;
    prob_index *c = s->candidates;
    for (int i = 0; i < n; i++) c[i].prob = p[i], c[i].index = i;
    sort_desc(c, s->merge_tmp, n);
    float sum = 0.0f;
    for (int i = 0; i < s->top_k; i++) sum += c[i].prob;
    for (int i = s->top_k; i < n; i++) p[c[i].index] = 0.0f;
    for (int i = 0; i < n; i++) p[i] /= sum;
}

static int sample_top_p(sampler *s, const float *p, int n, float coin) {
    const float cutoff = (1.0f - s->top_p) / (float)(n - 1);
    prob_index *c = s->candidates;
    int n0 = 0;
    for (int i = 0; i < n; i++)
        if (p[i] >= cutoff) c[n0].index = i, c[n0].prob = p[i], n0++;
    sort_desc(c, s->merge_tmp, n0);
    float cum = 0.0f;
    int last = n0 - 1;
    for (int i = 0; i < n0; i++) {
        cum += c[i].prob;
        if (cum > s->top_p) {
            last = i;
            break;
        }
    }
    float r = coin * cum, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += c[i].prob;
        if (r < cdf) return c[i].index;
    }
    return c[last].index;
}

int sampler_next(sampler *s, const float *logits) {
    const int n = s->vocab_size;
    if (s->temperature == 0.0f) return argmax(logits, n);
    float *p = s->probs;
    for (int i = 0; i < n; i++) p[i] = logits[i] / s->temperature;
    softmax(p, n);
    keep_top_k(s, p, n);
    float coin = random_f32(&s->state);
    if (s->top_p <= 0.0f || s->top_p >= 1.0f) return sample_multinomial(p, n, coin);
    return sample_top_p(s, p, n, coin);
}

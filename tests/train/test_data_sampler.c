/* test_data_sampler.c — the data loader's edge cases and the sampler's guarantees.
 *
 * Data: the smallest corpus that fits one window per split works and a token fewer fails;
 * training windows never reach into the validation split; targets are the inputs shifted by
 * one; a seed reproduces the batch sequence; validation batches never change.
 * Sampler: temperature 0 is argmax; the same seed gives the same draws; top-k never leaves
 * the k most likely tokens; top-p never leaves the nucleus; over many draws the frequencies
 * follow softmax(logits / T) (within 4 standard deviations). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "infer/sampler.h"

static int failures = 0, checks = 0;
static void expect(int ok, const char *what) {
    checks++;
    failures += !ok;
    printf("%-70s %s\n", what, ok ? "ok" : "FAIL");
}

static void test_data(void) {
    enum { SEQ = 8, BATCH = 4 };
    /* n_train = n - n/10 must hold SEQ+1, and n/10 too: n = 90 gives 81 / 9 */
    int tokens[200];
    for (int i = 0; i < 200; i++) tokens[i] = i;
    dataset d;
    expect(dataset_init(&d, tokens, 90, SEQ, BATCH, 2, 1, "t") == 0, "90 tokens: both splits hold one window of 9");
    dataset_free(&d);
    expect(dataset_init(&d, tokens, 89, SEQ, BATCH, 2, 1, "t") != 0, "89 tokens: the validation split is too short");
    expect(dataset_init(&d, tokens, 200, 0, BATCH, 2, 1, "t") != 0, "sequence length 0 is refused");

    dataset_init(&d, tokens, 200, SEQ, BATCH, 3, 42, "t");
    int in[BATCH * SEQ], tg[BATCH * SEQ], in2[BATCH * SEQ], tg2[BATCH * SEQ];
    rng_state r1, r2;
    rng_seed(&r1, 7), rng_seed(&r2, 7);
    int inside = 1, shifted = 1, same = 1;
    for (int step = 0; step < 500; step++) {
        dataset_train_batch(&d, &r1, in, tg);
        dataset_train_batch(&d, &r2, in2, tg2);
        same &= !memcmp(in, in2, sizeof in) && !memcmp(tg, tg2, sizeof tg);
        for (int i = 0; i < BATCH * SEQ; i++) {
            inside &= tg[i] < (int)d.n_train; /* tokens are their positions */
            shifted &= tg[i] == in[i] + 1;
        }
    }
    expect(inside, "500 training batches: no input or target from the validation split");
    expect(shifted, "targets are the inputs shifted by one token");
    expect(same, "the same RNG state gives the same batches");
    int v1[BATCH * SEQ], v2[BATCH * SEQ], vt[BATCH * SEQ], in_val = 1;
    dataset_val_batch(&d, 2, v1, vt);
    dataset_train_batch(&d, &r1, in, tg);
    dataset_val_batch(&d, 2, v2, vt);
    for (int i = 0; i < BATCH * SEQ; i++) in_val &= v1[i] >= (int)d.n_train;
    expect(!memcmp(v1, v2, sizeof v1) && in_val, "validation batches come from the validation split and never move");
    dataset_free(&d);

    /* with a BOS (--bos-token): each window is the BOS, then SEQ - 1 text tokens; the targets are
     * SEQ text tokens, the first predicted from the BOS alone; still inside the training split */
    dataset_init(&d, tokens, 200, SEQ, BATCH, 3, 42, "t");
    d.bos = 1000;
    rng_seed(&r1, 7);
    int bos_first = 1, bos_once = 1, bos_shift = 1, bos_inside = 1;
    for (int step = 0; step < 500; step++) {
        dataset_train_batch(&d, &r1, in, tg);
        for (int b = 0; b < BATCH; b++) {
            const int *x = in + b * SEQ, *y = tg + b * SEQ;
            bos_first &= x[0] == 1000;
            for (int i = 1; i < SEQ; i++) bos_once &= x[i] != 1000 && x[i] == y[i - 1];
            for (int i = 1; i < SEQ; i++) bos_shift &= y[i] == y[i - 1] + 1;
            for (int i = 0; i < SEQ; i++) bos_inside &= y[i] < (int)d.n_train;
        }
    }
    dataset_val_batch(&d, 1, v1, vt);
    for (int b = 0; b < BATCH; b++) bos_first &= v1[b * SEQ] == 1000 && vt[b * SEQ] == v1[b * SEQ + 1];
    expect(bos_first && bos_once, "BOS: every training and validation window starts with it, and only there");
    expect(bos_shift && bos_inside, "BOS: the targets are SEQ consecutive text tokens of the training split");
    dataset_free(&d);
}

static void test_sampler(void) {
    enum { V = 6 };
    const float logits[V] = {1.0f, 3.0f, 0.5f, 2.5f, -1.0f, 2.9f};
    sampler s;
    sampler_init(&s, V, 0.0f, 0, 0.0f, 1);
    expect(sampler_next(&s, logits) == 1, "temperature 0 picks the argmax");
    sampler_free(&s);
    /* temperature 0 against the plain scan `if (x[i] > x[best]) best = i` (the first of equal
     * maxima; a NaN never wins, and a NaN first logit stays) on rows of every length up to 70 built
     * from few values, NaN and infinities (ties, a -inf maximum, NaNs before and after the max) */
    {
        enum { MAXN = 70 };
        const float pick[8] = {NAN, -INFINITY, INFINITY, -2.0f, 0.0f, 1.0f, 1.0f, 3.0f};
        float row[MAXN];
        unsigned r = 12345;
        int same = 1;
        for (int trial = 0; trial < 20000; trial++) {
            const int n = 1 + trial % MAXN;
            for (int i = 0; i < n; i++) r = r * 1103515245u + 12345u, row[i] = pick[(r >> 16) % 8];
            int want = 0;
            for (int i = 1; i < n; i++)
                if (row[i] > row[want]) want = i;
            sampler_init(&s, n, 0.0f, 0, 0.0f, 1);
            same &= sampler_next(&s, row) == want;
            sampler_free(&s);
        }
        expect(same, "temperature 0 picks what the plain first-maximum scan picks (ties, NaN, infinities)");
    }

    int a[200], b[200];
    sampler_init(&s, V, 1.0f, 0, 0.0f, 99);
    for (int i = 0; i < 200; i++) a[i] = sampler_next(&s, logits);
    sampler_free(&s);
    sampler_init(&s, V, 1.0f, 0, 0.0f, 99);
    for (int i = 0; i < 200; i++) b[i] = sampler_next(&s, logits);
    sampler_free(&s);
    expect(!memcmp(a, b, sizeof a), "the same seed gives the same 200 draws");

    int ok = 1;
    sampler_init(&s, V, 1.5f, 3, 0.0f, 5);
    for (int i = 0; i < 2000; i++) {
        int t = sampler_next(&s, logits);
        ok &= t == 1 || t == 5 || t == 3; /* the three largest logits */
    }
    sampler_free(&s);
    expect(ok, "top-k 3: 2000 draws stay within the 3 most likely tokens");

    /* softmax(logits): p1 = .363, p5 = .329, p3 = .220 ... top-p 0.6 keeps {1, 5} (cumulative .69) */
    ok = 1;
    sampler_init(&s, V, 1.0f, 0, 0.6f, 5);
    for (int i = 0; i < 2000; i++) {
        int t = sampler_next(&s, logits);
        ok &= t == 1 || t == 5;
    }
    sampler_free(&s);
    expect(ok, "top-p 0.6: 2000 draws stay within the nucleus {1, 5}");

    const float T = 0.7f;
    const int N = 40000;
    int count[V] = {0};
    sampler_init(&s, V, T, 0, 0.0f, 2024);
    for (int i = 0; i < N; i++) count[sampler_next(&s, logits)]++;
    sampler_free(&s);
    double z = 0, mx = -1e9, p[V];
    for (int i = 0; i < V; i++) mx = fmax(mx, logits[i] / T);
    for (int i = 0; i < V; i++) z += p[i] = exp(logits[i] / T - mx);
    ok = 1;
    for (int i = 0; i < V; i++) {
        p[i] /= z;
        double sd = sqrt(N * p[i] * (1 - p[i]));
        ok &= fabs(count[i] - N * p[i]) <= 4 * sd + 1;
    }
    expect(ok, "40000 draws at T 0.7 follow softmax(logits / T) within 4 sd");
    expect(sampler_init(&s, V, -1.0f, 0, 0.0f, 1) != 0 && sampler_init(&s, V, 1.0f, 0, 1.5f, 1) != 0,
           "negative temperature and top-p > 1 are refused");
}

int main(void) {
    test_data();
    test_sampler();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}

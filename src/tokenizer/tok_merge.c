/* tok_merge.c — the pair-merging loop shared by the BPE tokenizers, in O(n log n):
 * a linked list of symbols plus a heap of candidate pairs, where stale candidates are
 * skipped when popped.
 *   - ranks (tokenizer.json / GPT-2): merge the pair with the lowest merge rank first;
 *   - scores (llama2.c run.c): merge the pair whose concatenation is the vocabulary entry
 *     with the highest score (> -1e10) first.
 * Ties go to the leftmost pair, which is what both references do (run.c scans left to right
 * and keeps the first strictly better pair; tokenizers orders by (rank, position)). A symbol
 * keeps its original index, so index order is sequence order; a merged-away symbol gets id -1. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* A candidate is one 64-bit number: (priority key << 32) | left symbol index, smallest first.
 * The key is the merge rank, or for scores a bit pattern that orders higher scores first. The
 * candidate is re-derived from the current symbols when popped: it is stale unless the pair
 * at `left` still has the same key (then merging it is exactly what a fresh scan would do). */
typedef struct { uint64_t *a; size_t n, cap; } heap;

static int heap_push(heap *h, uint64_t c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        uint64_t *a = realloc(h->a, cap * sizeof *a);
        if (!a) return -1;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->a[p] <= c) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = c;
    return 0;
}

static uint64_t heap_pop(heap *h) {
    uint64_t top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = l;
        if (l >= h->n) break;
        if (r < h->n && h->a[r] < h->a[l]) m = r;
        if (h->a[m] >= last) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (h->n) h->a[i] = last;
    return top;
}

typedef struct {
    const tlm_tokenizer *t;
    int use_scores;
    tlm_buf concat;
} merger;

static uint32_t score_key(float s) {
    if (s == 0.0f) s = 0.0f; /* -0.0 ties with 0.0, as in run.c's float comparison */
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* monotone in s */
    return ~u;                                       /* higher score -> smaller key */
}

/* The merge of the pair (a, b): 1 with *key and *new_id set, 0 when it cannot merge,
 * -1 when out of memory. */
static int pair_candidate(merger *m, int a, int b, uint32_t *key, int *new_id) {
    const tlm_tokenizer *t = m->t;
    if (!m->use_scores) {
        const tok_pairmap_slot *s = tok_pairmap_get(&t->merges, a, b);
        if (!s) return 0;
        *key = (uint32_t)s->rank;
        *new_id = s->id;
        return 1;
    }
    size_t la, lb;
    const char *sa = tok_form(t, a, &la), *sb = tok_form(t, b, &lb);
    m->concat.len = 0;
    if (tlm_buf_put(&m->concat, sa, la) || tlm_buf_put(&m->concat, sb, lb)) return -1;
    int id = tok_strmap_get(&t->vocab, m->concat.data, m->concat.len);
    if (id < 0 || !(t->scores[id] > -1e10f)) return 0; /* run.c's starting best score; NaN never wins */
    *key = score_key(t->scores[id]);
    *new_id = id;
    return 1;
}

static int push_pair(merger *m, heap *h, const int *ids, int left, int right) {
    if (left < 0 || right < 0) return 0;
    uint32_t key;
    int id;
    int ok = pair_candidate(m, ids[left], ids[right], &key, &id);
    if (ok <= 0) return ok;
    return heap_push(h, ((uint64_t)key << 32) | (uint32_t)left);
}

static size_t merge(const tlm_tokenizer *t, int *ids, size_t n, int use_scores) {
    if (n < 2) return n;
    if (n > (size_t)0x7fffffff) return (size_t)-1;
    merger m = {t, use_scores, {0}};
    heap h = {0};
    int *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
    size_t result = (size_t)-1;
    if (!next || !prev) goto done;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int)i + 1 : -1;
        prev[i] = (int)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (push_pair(&m, &h, ids, (int)i, (int)i + 1)) goto done;
    while (h.n) {
        uint64_t c = heap_pop(&h);
        int left = (int)(uint32_t)c, right = next[left];
        uint32_t key;
        int id;
        if (ids[left] < 0 || right < 0) continue;
        int ok = pair_candidate(&m, ids[left], ids[right], &key, &id);
        if (ok < 0) goto done;
        if (!ok || key != (uint32_t)(c >> 32)) continue; /* stale */
        ids[left] = id;
        ids[right] = -1;
        next[left] = next[right];
        if (next[right] >= 0) prev[next[right]] = left;
        if (push_pair(&m, &h, ids, prev[left], left) || push_pair(&m, &h, ids, left, next[left])) goto done;
    }
    size_t k = 0;
    for (int i = 0; i >= 0; i = next[i]) ids[k++] = ids[i];
    result = k;
done:
    free(next);
    free(prev);
    free(h.a);
    tlm_buf_free(&m.concat);
    return result;
}

size_t tok_merge_scores(const tlm_tokenizer *t, int *ids, size_t n) { return merge(t, ids, n, 1); }
size_t tok_merge_ranks(const tlm_tokenizer *t, int *ids, size_t n) { return merge(t, ids, n, 0); }

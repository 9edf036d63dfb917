/* sampler.h — choosing the next token from logits: greedy at temperature 0, otherwise
 * temperature, optional top-k, optional top-p (nucleus). The random stream and the top-p
 * procedure are llama2.c's run.c (xorshift64*, the (1 - p) / (n - 1) pre-filter, a stable
 * descending sort), so a llama2.c checkpoint sampled with the same seed gives run.c's text.
 *
 * Seeding: xorshift64* must never hold the state 0 (it stays 0: every coin is 0, every
 * sample the first token). sampler_init mixes the seed through splitmix64 (a bijection; the
 * one seed it maps to 0 takes the next output), so every 64-bit seed gives a full-quality
 * stream and nearby seeds give unrelated ones. sampler_seed_runc instead uses the seed as the
 * state, as run.c does, to reproduce run.c's samples (run.c never uses 0: it replaces a seed
 * <= 0 with the time; here 0 gets the mixed state). */
#ifndef TLM_SAMPLER_H
#define TLM_SAMPLER_H

#include <stdint.h>

typedef struct {
    int vocab_size;
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = off */
    float top_p;       /* <= 0 or >= 1 = off */
    uint64_t state;    /* run.c's xorshift64* state, never 0 */
    float *probs;      /* [vocab] scratch */
    struct prob_index { float prob; int index; } *candidates, *merge_tmp;
} sampler;

/* -1 + message naming the option when a setting is out of range */
int sampler_check(float temperature, int top_k, float top_p);
int sampler_init(sampler *s, int vocab_size, float temperature, int top_k, float top_p, uint64_t seed);
/* run.c's seeding: the state is the seed itself (0: the mixed state of sampler_init) */
void sampler_seed_runc(sampler *s, uint64_t seed);
void sampler_free(sampler *s);
/* Picks a token; reads logits [vocab] (not modified). */
int sampler_next(sampler *s, const float *logits);

#endif

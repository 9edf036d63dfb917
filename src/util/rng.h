/* rng.h — a small deterministic RNG (xoshiro256**, seeded by splitmix64), so that a seed
 * reproduces an init, a data order and a sample on every machine. The whole state is four
 * words, saved in training checkpoints for exact resume. */
#ifndef TLM_RNG_H
#define TLM_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng_state;

/* splitmix64: advances *x and returns the next output (a bijection of the counter) */
uint64_t splitmix64(uint64_t *x);
void rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_u64(rng_state *r);
/* uniform in [0, 1) with 24 random bits */
float rng_float(rng_state *r);
/* uniform integer in [0, n) without modulo bias */
uint64_t rng_below(rng_state *r, uint64_t n);
/* standard normal (Box-Muller, computed in double) */
double rng_normal(rng_state *r);
/* the normal that rng_normal makes of its two draws a, b (in that order): the draws are cheap and
 * sequential, this is the costly part, which threads may share (tensor_init_from_draws) */
double rng_normal_of(uint64_t a, uint64_t b);

#endif

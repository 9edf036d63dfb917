/* attention_tiles.h — the products of one (batch row, head)'s causal attention block of `rows`
 * queries q0.. over keys [k0, k1) in AVX-512 register tiles (attention_tiles.c), for heads of
 * 8k floats on x86-64 CPUs with AVX-512. Row r of a block is query q0 + r and sees keys up to
 * q0 + r; matrices are row-major with the given leading dimensions; key and column indices of
 * S, P and dS are absolute (0..T-1), their rows relative to the block. */
#ifndef TLM_ATTENTION_TILES_H
#define TLM_ATTENTION_TILES_H

/* keys per chunk of the transposed-keys scratch kt (attention_scratch_floats sizes it) */
#define ATTN_KEY_CHUNK 64

/* S [rows, keys] = scale a [rows, hd] . keys [k1, hd]^T for the keys each 8-row tile can see
 * (the masked entries of a tile's earlier rows are written too, the softmax overwrites them);
 * kt: scratch of ATTN_KEY_CHUNK * hd floats */
void attn_tile_dots(float *S, int ldS, const float *a, int lda, const float *keys, int ldk, int rows, int q0, int k0,
                    int k1, int hd, float scale, float *kt);
/* out [rows, hd] = (or += with accumulate) P [rows, keys] . x [keys, hd] over the visible keys */
void attn_tile_rows(float *out, int ldo, const float *P, int ldP, const float *x, int ldx, int rows, int q0, int k0,
                    int k1, int hd, int accumulate);
/* out [keys, hd] += P^T . x [rows, hd] (P [rows, keys]) over the queries that see each key */
void attn_tile_cols(float *out, int ldo, const float *P, int ldP, const float *x, int ldx, int rows, int q0, int k0,
                    int k1, int hd);

#endif

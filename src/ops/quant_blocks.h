/* quant_blocks.h — ggml's block layouts and their small field decoders, shared by quant.c (the
 * conversions and the widening products) and quant_int.c (the integer products). Private to
 * src/ops. */
#ifndef TLM_QUANT_BLOCKS_H
#define TLM_QUANT_BLOCKS_H

#include <stdint.h>

#include "util/f16.h"

/* ---- block layouts ---------------------------------------------------------------------------- */
/* ggml-common.h's structs with every field as bytes: alignment 1 (a row may start anywhere),
 * f16 scales read little-endian whatever the host. The sizes are ggml's sizeof(block_*). */

#define QK 32    /* elements per block of the 32-element formats */
#define QK_K 256 /* elements per super-block of the K formats */

typedef struct { /* (q - 8) * d; element j < 16: low nibble of qs[j], j >= 16: high nibble of qs[j - 16] */
    uint8_t d[2];
    uint8_t qs[QK / 2];
} blk_q4_0;
typedef struct { /* q * d + m, nibbles as Q4_0 */
    uint8_t d[2], m[2];
    uint8_t qs[QK / 2];
} blk_q4_1;
typedef struct { /* (q - 16) * d; the 5th bit of element j is bit j of qh (a little-endian u32) */
    uint8_t d[2];
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} blk_q5_0;
typedef struct { /* q * d + m, bits as Q5_0 */
    uint8_t d[2], m[2];
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} blk_q5_1;
typedef struct { /* q * d */
    uint8_t d[2];
    int8_t qs[QK];
} blk_q8_0;
/* 16 sub-blocks of 16: d * (scales & 15) * q - dmin * (scales >> 4), q of 2 bits: element e is
 * bits 2 * ((e % 128) / 32) of qs[32 * (e / 128) + e % 32] */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint8_t d[2], dmin[2];
} blk_q2_k;
/* 16 sub-blocks of 16: d * (s - 32) * (q - 4 * !hbit), s of 6 bits (low 4 in scales[0..7]'s
 * nibbles, high 2 in scales[8..11]), q's 2 bits as Q2_K, hbit: bit e / 32 of hmask[e % 32] */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint8_t d[2];
} blk_q3_k;
/* 8 sub-blocks of 32: d * sc * q - dmin * m, sc and m of 6 bits (scale_min_k4), q of 4 bits:
 * element e is the low (sub-block e / 32 even) or high nibble of qs[32 * (e / 64) + e % 32] */
typedef struct {
    uint8_t d[2], dmin[2];
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} blk_q4_k;
/* as Q4_K with a 5th bit: bit e / 32 of qh[e % 32] */
typedef struct {
    uint8_t d[2], dmin[2];
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} blk_q5_k;
/* 16 sub-blocks of 16: d * scales[e / 16] * (q - 32), q of 6 bits: in each half h of 128, group
 * g = (e % 128) / 32, l = e % 32: the low (g < 2) or high nibble of ql[64 h + 32 (g & 1) + l] and
 * bits 2 g of qh[32 h + l] */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint8_t d[2];
} blk_q6_k;

_Static_assert(sizeof(blk_q4_0) == 18 && sizeof(blk_q4_1) == 20 && sizeof(blk_q5_0) == 22 && sizeof(blk_q5_1) == 24,
               "32-element block sizes");
_Static_assert(sizeof(blk_q8_0) == 34 && sizeof(blk_q2_k) == 84 && sizeof(blk_q3_k) == 110, "block sizes");
_Static_assert(sizeof(blk_q4_k) == 144 && sizeof(blk_q5_k) == 176 && sizeof(blk_q6_k) == 210, "K block sizes");

static inline float f16_at(const uint8_t p[2]) { return tlm_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline void f16_put(uint8_t p[2], float v) {
    const uint16_t h = tlm_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* Q4_K / Q5_K: the 6-bit scale and minimum of sub-block j (0..7) from the 12 bytes: j < 4 in
 * the low 6 bits of bytes j and j + 4; j >= 4 in byte j + 4's nibbles, with the top 2 bits in
 * the spare top bits of bytes j - 4 and j */
static inline void scale_min_k4(const uint8_t s[12], int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63, *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q3_K: the 6-bit scale of sub-block j (0..15), minus 32 */
static inline int scale_q3_k(const uint8_t s[12], int j) {
    const int low = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | high << 4) - 32;
}

#endif

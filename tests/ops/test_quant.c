/* test_quant.c — ggml's block formats (ops/quant.c): the type table and sizes, the dequantizer
 * on blocks built here from the formats' definitions, the quantizers' rounding, and the
 * products against a float64 reference. Run once per kernel set: ctest runs it natively and
 * with TLM_ISA=avx2 / scalar, and it checks that the kernel set asked for is the one that ran.
 *
 * The blocks are packed by this file from chosen levels and scales, writing each field where
 * ggml-common.h puts it (byte offsets below, not quant.c's structs), so the dequantizer is
 * checked against the layout, not against itself.
 *
 * Products are checked two ways:
 *  - exactly, on weights and inputs chosen so that f32 arithmetic makes no error (power-of-two
 *    scales, inputs in halves, sums below 2^24 grid steps: the test checks that it holds): in
 *    any summation order y must equal the float64 reference, so one wrong weight shows;
 *  - within the f32 summation bound on realistic data: |y - ref| <= (IC + 2) 2^-24 (sum_k
 *    |x_k w_k| + |b|), which bounds the rounding of IC products and IC + 1 additions in any
 *    order (to first order in 2^-24), ref the float64 dot of x with wq_dequantize_row(W).
 * matvec_quant_part must equal matvec_quant bit for bit (memcmp), for every row of x and for
 * any split of the outputs, and so must matvec_quant under 1, 2 and 3 threads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "check_count.h"
#include "ops/ops.h"
#include "ops/quant.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/rng.h"

static const int all_types[] = {WQ_F32,  WQ_F16,  WQ_BF16, WQ_Q4_0, WQ_Q4_1, WQ_Q5_0, WQ_Q5_1,
                                WQ_Q8_0, WQ_Q2_K, WQ_Q3_K, WQ_Q4_K, WQ_Q5_K, WQ_Q6_K};
#define NTYPES (int)(sizeof all_types / sizeof all_types[0])

static rng_state rng;
static int below(int n) { return (int)rng_below(&rng, (uint64_t)n); }
static int between(int lo, int hi) { return lo + below(hi - lo + 1); }

static void put16(uint8_t *p, uint16_t h) { p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8); }
static void put_f16(uint8_t *p, float v) { put16(p, tlm_f32_to_f16(v)); }
static float get_f16(const uint8_t *p) { return tlm_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* the test's own premises (products exact in f32, exact sums below 2^24 steps): counted here and
 * checked once in main */
static long premise_failures;

/* value = p - m with p, m exact products (held exactly by a double and then by a float: checked),
 * rounded once: what every format's f32 value is */
static float exact_minus(double p, double m) {
    if (!((double)(float)p == p && (double)(float)m == m)) premise_failures++;
    return (float)p - (float)m;
}

/* ---- blocks from levels and scales, as ggml-common.h lays them out ------------------------ */
/* Each packer writes one block at b and the 32 or 256 values it encodes at v. */

static void pack_q4_0(uint8_t *b, float d, const int q[32], float *v) { /* d@0 qs@2 */
    put_f16(b, d), d = get_f16(b);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    for (int e = 0; e < 32; e++) v[e] = exact_minus((double)(q[e] - 8) * d, 0);
}
static void pack_q4_1(uint8_t *b, float d, float m, const int q[32], float *v) { /* d@0 m@2 qs@4 */
    put_f16(b, d), put_f16(b + 2, m), d = get_f16(b), m = get_f16(b + 2);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    for (int e = 0; e < 32; e++) v[e] = exact_minus((double)q[e] * d, -(double)m);
}
/* qh: bit e of a little-endian u32 holds bit 4 of element e */
static void pack_qh32(uint8_t *qh, const int q[32]) {
    memset(qh, 0, 4);
    for (int e = 0; e < 32; e++) qh[e / 8] |= (uint8_t)((q[e] >> 4) << (e % 8));
}
static void pack_q5_0(uint8_t *b, float d, const int q[32], float *v) { /* d@0 qh@2 qs@6 */
    put_f16(b, d), d = get_f16(b);
    pack_qh32(b + 2, q);
    for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
    for (int e = 0; e < 32; e++) v[e] = exact_minus((double)(q[e] - 16) * d, 0);
}
static void pack_q5_1(uint8_t *b, float d, float m, const int q[32], float *v) { /* d@0 m@2 qh@4 qs@8 */
    put_f16(b, d), put_f16(b + 2, m), d = get_f16(b), m = get_f16(b + 2);
    pack_qh32(b + 4, q);
    for (int j = 0; j < 16; j++) b[8 + j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
    for (int e = 0; e < 32; e++) v[e] = exact_minus((double)q[e] * d, -(double)m);
}
static void pack_q8_0(uint8_t *b, float d, const int q[32], float *v) { /* d@0 qs@2 */
    put_f16(b, d), d = get_f16(b);
    for (int e = 0; e < 32; e++) b[2 + e] = (uint8_t)(int8_t)q[e], v[e] = exact_minus((double)q[e] * d, 0);
}
/* 2-bit levels of the K formats: element e in bits 2 ((e % 128) / 32) of byte 32 (e / 128) + e % 32 */
static void pack_2bit(uint8_t *qs, const int q[256], int offset) {
    memset(qs, 0, 64);
    for (int e = 0; e < 256; e++)
        qs[32 * (e / 128) + e % 32] |= (uint8_t)(((q[e] + offset) & 3) << (2 * ((e % 128) / 32)));
}
static void pack_q2_k(uint8_t *b, float d, float dmin, const int sc[16], const int m[16], const int q[256], float *v) {
    /* scales@0 (low nibble scale, high nibble min) qs@16 d@80 dmin@82 */
    for (int j = 0; j < 16; j++) b[j] = (uint8_t)(sc[j] | m[j] << 4);
    pack_2bit(b + 16, q, 0);
    put_f16(b + 80, d), put_f16(b + 82, dmin), d = get_f16(b + 80), dmin = get_f16(b + 82);
    for (int e = 0; e < 256; e++) v[e] = exact_minus((double)d * sc[e / 16] * q[e], (double)dmin * m[e / 16]);
}
static void pack_q3_k(uint8_t *b, float d, const int s[16], const int q[256], float *v) {
    /* hmask@0 qs@32 scales@96 d@108; q in -4..3 stored as q + 4: low 2 bits in qs, bit 2 in
     * bit e / 32 of hmask[e % 32]; s in -32..31 stored as s + 32: low nibble in byte j (j < 8) or
     * the high nibble of byte j - 8, the top 2 bits in bits 2 (j / 4) of byte 8 + j % 4 */
    memset(b, 0, 110);
    for (int e = 0; e < 256; e++) b[e % 32] |= (uint8_t)((((q[e] + 4) >> 2) & 1) << (e / 32));
    pack_2bit(b + 32, q, 4);
    for (int j = 0; j < 16; j++) {
        const int u = s[j] + 32;
        b[96 + (j < 8 ? j : j - 8)] |= (uint8_t)((u & 15) << (j < 8 ? 0 : 4));
        b[96 + 8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
    }
    put_f16(b + 108, d), d = get_f16(b + 108);
    for (int e = 0; e < 256; e++) v[e] = exact_minus((double)d * s[e / 16] * q[e], 0);
}
/* the 12 bytes of 8 6-bit scales and mins: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4:
 * low nibbles in byte j + 4 (scale low, min high), top 2 bits in bits 6-7 of bytes j - 4 and j */
static void pack_k_scales(uint8_t *s, const int sc[8], const int m[8]) {
    for (int j = 0; j < 4; j++)
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6), s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
    for (int j = 4; j < 8; j++) s[j + 4] = (uint8_t)((sc[j] & 15) | (m[j] & 15) << 4);
}
static void pack_q4_k(uint8_t *b, float d, float dmin, const int sc[8], const int m[8], const int q[256], float *v) {
    /* d@0 dmin@2 scales@4 qs@16: element e is nibble (e / 32) % 2 of byte 32 (e / 64) + e % 32 */
    put_f16(b, d), put_f16(b + 2, dmin), d = get_f16(b), dmin = get_f16(b + 2);
    pack_k_scales(b + 4, sc, m);
    memset(b + 16, 0, 128);
    for (int e = 0; e < 256; e++) b[16 + 32 * (e / 64) + e % 32] |= (uint8_t)(q[e] << (4 * ((e / 32) % 2)));
    for (int e = 0; e < 256; e++) v[e] = exact_minus((double)d * sc[e / 32] * q[e], (double)dmin * m[e / 32]);
}
static void pack_q5_k(uint8_t *b, float d, float dmin, const int sc[8], const int m[8], const int q[256], float *v) {
    /* d@0 dmin@2 scales@4 qh@16 qs@48: low 4 bits as Q4_K, bit 4 in bit e / 32 of qh[e % 32] */
    put_f16(b, d), put_f16(b + 2, dmin), d = get_f16(b), dmin = get_f16(b + 2);
    pack_k_scales(b + 4, sc, m);
    memset(b + 16, 0, 160);
    for (int e = 0; e < 256; e++) {
        b[16 + e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
        b[48 + 32 * (e / 64) + e % 32] |= (uint8_t)((q[e] & 15) << (4 * ((e / 32) % 2)));
    }
    for (int e = 0; e < 256; e++) v[e] = exact_minus((double)d * sc[e / 32] * q[e], (double)dmin * m[e / 32]);
}
static void pack_q6_k(uint8_t *b, float d, const int sc[16], const int q[256], float *v) {
    /* ql@0 qh@128 scales@192 d@208; q in -32..31 stored as q + 32: per half h of 128 and group g =
     * (e % 128) / 32, l = e % 32: low 4 bits in nibble g / 2 of ql[64 h + 32 (g % 2) + l], top 2
     * bits in bits 2 g of qh[32 h + l] */
    memset(b, 0, 210);
    for (int e = 0; e < 256; e++) {
        const int u = q[e] + 32, h = e / 128, g = (e % 128) / 32, l = e % 32;
        b[64 * h + 32 * (g % 2) + l] |= (uint8_t)((u & 15) << (4 * (g / 2)));
        b[128 + 32 * h + l] |= (uint8_t)((u >> 4) << (2 * g));
    }
    for (int j = 0; j < 16; j++) b[192 + j] = (uint8_t)(int8_t)sc[j];
    put_f16(b + 208, d), d = get_f16(b + 208);
    for (int e = 0; e < 256; e++) v[e] = exact_minus((double)d * sc[e / 16] * q[e], 0);
}

/* Scales for the blocks: `exact` picks one power of two (pow2, for the exact products) for every
 * scale; otherwise a random f16 of either sign and a wide range, subnormal ones included. */
static float pick_scale(int exact, float pow2) {
    if (exact) return pow2;
    const int k = below(16);
    if (k == 0) return ldexpf(1.0f, -20) * (float)between(1, 1000); /* f16 subnormals */
    return (below(4) ? 1.0f : -1.0f) * (0.5f + rng_float(&rng)) * ldexpf(1.0f, -between(0, 14));
}

/* One row of n elements of type t, random levels and scales: the bytes into dst, the values into v */
static void random_row(int t, int64_t n, uint8_t *dst, float *v, int exact, float pow2) {
    const size_t bb = wq_block_bytes(t);
    const int be = wq_block_elems(t);
    int q[256], sc[16], m[16];
    for (int64_t i = 0; i < n / be; i++, dst += bb, v += be) {
        const float d = pick_scale(exact, pow2), d2 = pick_scale(exact, pow2);
        switch (t) {
        case WQ_F32: {
            const float x = exact ? between(-64, 64) / 64.0f : (float)rng_normal(&rng);
            memcpy(dst, &x, 4), *v = x;
            break;
        }
        case WQ_F16:
            put_f16(dst, exact ? between(-64, 64) / 64.0f : (float)rng_normal(&rng)), *v = get_f16(dst);
            break;
        case WQ_BF16: {
            const uint16_t h = tlm_f32_to_bf16(exact ? between(-64, 64) / 64.0f : (float)rng_normal(&rng));
            put16(dst, h), *v = tlm_bf16_to_f32(h);
            break;
        }
        case WQ_Q4_0:
            for (int e = 0; e < 32; e++) q[e] = below(16);
            pack_q4_0(dst, d, q, v);
            break;
        case WQ_Q4_1:
            for (int e = 0; e < 32; e++) q[e] = below(16);
            pack_q4_1(dst, d, exact ? d * between(-16, 16) : d2, q, v);
            break;
        case WQ_Q5_0:
            for (int e = 0; e < 32; e++) q[e] = below(32);
            pack_q5_0(dst, d, q, v);
            break;
        case WQ_Q5_1:
            for (int e = 0; e < 32; e++) q[e] = below(32);
            pack_q5_1(dst, d, exact ? d * between(-16, 16) : d2, q, v);
            break;
        case WQ_Q8_0:
            for (int e = 0; e < 32; e++) q[e] = between(-128, 127);
            pack_q8_0(dst, d, q, v);
            break;
        case WQ_Q2_K:
            for (int j = 0; j < 16; j++) sc[j] = below(16), m[j] = below(16);
            for (int e = 0; e < 256; e++) q[e] = below(4);
            pack_q2_k(dst, d, d2, sc, m, q, v);
            break;
        case WQ_Q3_K:
            for (int j = 0; j < 16; j++) sc[j] = between(-32, 31);
            for (int e = 0; e < 256; e++) q[e] = between(-4, 3);
            pack_q3_k(dst, d, sc, q, v);
            break;
        case WQ_Q4_K:
        case WQ_Q5_K:
            for (int j = 0; j < 8; j++) sc[j] = below(64), m[j] = below(64);
            for (int e = 0; e < 256; e++) q[e] = below(t == WQ_Q4_K ? 16 : 32);
            (t == WQ_Q4_K ? pack_q4_k : pack_q5_k)(dst, d, d2, sc, m, q, v);
            break;
        case WQ_Q6_K:
            for (int j = 0; j < 16; j++) sc[j] = between(-128, 127);
            for (int e = 0; e < 256; e++) q[e] = between(-32, 31);
            pack_q6_k(dst, d, sc, q, v);
            break;
        }
    }
}

/* ---- the type table -------------------------------------------------------------------------- */

static void test_table(void) {
    /* ggml's sizeof(block_*) and block sizes */
    const struct {
        int t;
        const char *name;
        int elems;
        size_t bytes;
        double bits;
    } want[] = {
        {WQ_F32, "F32", 1, 4, 32},           {WQ_F16, "F16", 1, 2, 16},        {WQ_BF16, "BF16", 1, 2, 16},
        {WQ_Q4_0, "Q4_0", 32, 18, 4.5},      {WQ_Q4_1, "Q4_1", 32, 20, 5},     {WQ_Q5_0, "Q5_0", 32, 22, 5.5},
        {WQ_Q5_1, "Q5_1", 32, 24, 6},        {WQ_Q8_0, "Q8_0", 32, 34, 8.5},   {WQ_Q2_K, "Q2_K", 256, 84, 2.625},
        {WQ_Q3_K, "Q3_K", 256, 110, 3.4375}, {WQ_Q4_K, "Q4_K", 256, 144, 4.5}, {WQ_Q5_K, "Q5_K", 256, 176, 5.5},
        {WQ_Q6_K, "Q6_K", 256, 210, 6.5625}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const int t = want[i].t;
        CHECK(wq_supported(t), "%s supported", want[i].name);
        CHECK(!strcmp(wq_name(t), want[i].name), "name of %d: %s", t, wq_name(t));
        CHECK(wq_block_elems(t) == want[i].elems, "%s block elems %d", want[i].name, wq_block_elems(t));
        CHECK(wq_block_bytes(t) == want[i].bytes, "%s block bytes %zu, ggml's sizeof %zu", want[i].name,
              wq_block_bytes(t), want[i].bytes);
        CHECK(wq_bits_per_weight(t) == want[i].bits, "%s bits per weight %g", want[i].name, wq_bits_per_weight(t));
        CHECK(wq_row_bytes(t, 768) == 768 / want[i].elems * want[i].bytes, "%s row bytes", want[i].name);
        CHECK(want[i].elems == 1 || wq_row_bytes(t, 768 + 16) == 0, "%s: a row of partial blocks has no size",
              want[i].name);
        char lower[8];
        for (size_t k = 0; k <= strlen(want[i].name); k++)
            lower[k] =
                (char)(want[i].name[k] >= 'A' && want[i].name[k] <= 'Z' ? want[i].name[k] + 32 : want[i].name[k]);
        int got = -1;
        CHECK(wq_from_name(lower, &got) == 0 && got == t, "from_name(%s) = %d", lower, got);
        got = -1;
        CHECK(wq_from_name(want[i].name, &got) == 0 && got == t, "from_name(%s) = %d", want[i].name, got);
        const int writable = t != WQ_Q2_K && t != WQ_Q3_K;
        CHECK(wq_can_quantize(t) == writable, "%s can_quantize %d", want[i].name, wq_can_quantize(t));
    }
    int got = 0;
    CHECK(wq_from_name("Q4_K_M", &got) == -1 && strstr(tlm_last_error(), "Q4_K_M"), "unknown name refused");
    CHECK(!wq_supported(WQ_Q8_1) && !wq_supported(WQ_Q8_K) && !wq_supported(23) && !wq_supported(-1) &&
              !wq_supported(WQ_TYPE_LIMIT),
          "unreadable types");
    CHECK(!strcmp(wq_name(WQ_Q8_K), "Q8_K") && !strcmp(wq_name(23), "type 23"), "names: %s, %s", wq_name(WQ_Q8_K),
          wq_name(23));
    CHECK(wq_block_bytes(23) == 0 && wq_block_elems(23) == 0 && wq_row_bytes(23, 256) == 0 &&
              wq_bits_per_weight(23) == 0,
          "an unsupported type has no sizes");
}

/* ---- dequantizing blocks built from the definitions ---------------------------------------------- */

static void test_dequantize(void) {
    /* a few literal blocks first (values by hand) */
    {
        uint8_t b[34];
        float v[32], got[32];
        int q[32];
        for (int e = 0; e < 32; e++) q[e] = e - 16;
        pack_q8_0(b, 0.25f, q, v);
        CHECK(b[0] == 0x00 && b[1] == 0x34 && b[2] == 0xf0 && b[33] == 0x0f,
              "Q8_0 bytes: d 0x3400 little-endian, qs[0] = -16");
        wq_dequantize_row(WQ_Q8_0, b, got, 32);
        CHECK(got[0] == -4.0f && got[16] == 0.0f && got[31] == 3.75f, "Q8_0 literal: %g %g %g", got[0], got[16],
              got[31]);
        for (int e = 0; e < 32; e++) q[e] = e < 16 ? e : 31 - e; /* low nibbles 0..15, high 15..0 */
        pack_q4_0(b, 2.0f, q, v);
        CHECK(b[2] == 0xf0 && b[17] == 0x0f, "Q4_0 bytes: element 0 low nibble, element 16 high");
        wq_dequantize_row(WQ_Q4_0, b, got, 32);
        CHECK(got[0] == -16.0f && got[15] == 14.0f && got[16] == 14.0f && got[31] == -16.0f,
              "Q4_0 literal: %g %g %g %g", got[0], got[15], got[16], got[31]);
        for (int e = 0; e < 32; e++) q[e] = e == 3 || e == 20 ? 31 : e % 16;
        pack_q5_0(b, 1.0f, q, v);
        CHECK(b[2] == 0x08 && b[4] == 0x10, "Q5_0 qh: bits 3 and 20 of the u32");
        wq_dequantize_row(WQ_Q5_0, b, got, 32);
        CHECK(got[3] == 15.0f && got[20] == 15.0f && got[0] == -16.0f && got[31] == -1.0f, "Q5_0 literal: %g %g %g %g",
              got[3], got[20], got[0], got[31]);
    }
    /* then blocks of random levels and scales, every type, every element */
    for (int i = 0; i < NTYPES; i++) {
        const int t = all_types[i];
        const int64_t n = 8 * 256;
        uint8_t *row = malloc(wq_row_bytes(t, n));
        float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n),
              *rows = malloc(sizeof(float) * 2 * n);
        random_row(t, n, row, want, 0, 0);
        wq_dequantize_row(t, row, got, n);
        int64_t bad = 0, first = -1;
        for (int64_t e = 0; e < n; e++)
            if (!(got[e] == want[e])) bad++, first = first < 0 ? e : first;
        CHECK(bad == 0, "%s: %lld of %lld values differ from the definition (first %lld: %g, want %g)", wq_name(t),
              (long long)bad, (long long)n, (long long)first, first >= 0 ? got[first] : 0,
              first >= 0 ? want[first] : 0);
        /* wq_dequantize_rows (the vector decoders where there are) gives the same bits */
        const int IC = (int)n / 2;
        wq_dequantize_rows(t, row, IC, 0, 2, rows);
        CHECK(!memcmp(rows, got, sizeof(float) * n), "%s: wq_dequantize_rows != wq_dequantize_row", wq_name(t));
        wq_dequantize_rows(t, row, IC, 1, 2, rows);
        CHECK(!memcmp(rows, got + IC, sizeof(float) * IC), "%s: wq_dequantize_rows of row 1", wq_name(t));
        /* wq_dequantize_rows_bf16 (prompt tiles for bf16 products): each value rounded to nearest even */
        uint16_t *h = malloc(sizeof(uint16_t) * IC);
        wq_dequantize_rows_bf16(t, row, IC, 1, 2, h);
        int64_t off = 0;
        for (int e = 0; e < IC; e++) off += h[e] != tlm_f32_to_bf16(got[IC + e]);
        CHECK(off == 0, "%s: wq_dequantize_rows_bf16: %lld of %d values are not the bf16 rounding of the value",
              wq_name(t), (long long)off, IC);
        free(h);
        free(row), free(want), free(got), free(rows);
    }
    float out[32];
    wq_dequantize_row(WQ_Q8_K, (const uint8_t[292]){0}, out, 32);
    CHECK(isnan(out[0]) && isnan(out[31]), "an unreadable type dequantizes to NaN");
    wq_dequantize_row(WQ_Q4_0, (const uint8_t[18]){0}, out, 17);
    CHECK(isnan(out[0]), "a row of partial blocks dequantizes to NaN");
}

/* ---- quantizing: each value within the format's rounding ------------------------------------------- */

/* the levels a block's sub-block j can take: value(q) = step * q + offset, q = lo .. hi */
typedef struct {
    double step, offset;
    int lo, hi;
} grid;

static grid block_grid(int t, const uint8_t *b, int e) {
    grid g = {0, 0, 0, 0};
    switch (t) {
    case WQ_Q4_0:
        g = (grid){get_f16(b), 0, -8, 7};
        break;
    case WQ_Q5_0:
        g = (grid){get_f16(b), 0, -16, 15};
        break;
    case WQ_Q8_0:
        g = (grid){get_f16(b), 0, -128, 127};
        break;
    case WQ_Q4_1:
        g = (grid){get_f16(b), get_f16(b + 2), 0, 15};
        break;
    case WQ_Q5_1:
        g = (grid){get_f16(b), get_f16(b + 2), 0, 31};
        break;
    case WQ_Q4_K:
    case WQ_Q5_K: {
        const int j = e / 32;
        const uint8_t *s = b + 4;
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        g = (grid){(double)get_f16(b) * sc, -(double)get_f16(b + 2) * m, 0, t == WQ_Q4_K ? 15 : 31};
        break;
    }
    case WQ_Q6_K:
        g = (grid){(double)get_f16(b + 208) * (int8_t)b[192 + e / 16], 0, -32, 31};
        break;
    }
    return g;
}

/* distance from x to the nearest level of g */
static double grid_distance(grid g, double x) {
    if (g.step == 0) return fabs(x - g.offset);
    double q = nearbyint((x - g.offset) / g.step);
    q = q < g.lo ? g.lo : q > g.hi ? g.hi : q;
    double best = INFINITY;
    for (double k = q - 1; k <= q + 1; k++)
        if (k >= g.lo && k <= g.hi && fabs(x - (g.step * k + g.offset)) < best)
            best = fabs(x - (g.step * k + g.offset));
    return best;
}

static void test_quantize(void) {
    enum { NB = 64 };
    for (int i = 0; i < NTYPES; i++) {
        const int t = all_types[i];
        if (!wq_can_quantize(t)) continue;
        const int n = NB * 256, be = wq_block_elems(t);
        const size_t bb = wq_block_bytes(t);
        float *x = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * n);
        uint8_t *q = malloc(wq_row_bytes(t, n));
        for (int k = 0; k < n; k++) x[k] = (float)rng_normal(&rng) * (k % 613 == 0 ? 6.0f : 1.0f);
        /* edge blocks: zeros, a constant, one spike, the largest magnitude negative and positive twins */
        for (int k = 0; k < 256; k++) x[k] = 0, x[256 + k] = 3.0f, x[512 + k] = k == 77 ? 5.0f : 0.001f * (k % 7);
        for (int k = 0; k < 256; k++) x[768 + k] = k % 2 ? 1.0f : -1.0f;
        CHECK(wq_quantize_row(t, x, q, n) == 0, "%s quantize", wq_name(t));
        wq_dequantize_row(t, q, w, n);
        double err2 = 0, x2 = 0, worst_excess = 0, worst_bound = 0;
        int64_t at = -1;
        for (int k = 0; k < n; k++) {
            const double e = fabs((double)x[k] - w[k]);
            err2 += e * e, x2 += (double)x[k] * x[k];
            if (t == WQ_F32 || t == WQ_F16 || t == WQ_BF16) {
                /* round to nearest: half a unit in the last place (f16: 11 bits, normal range) */
                const double rel = t == WQ_F32 ? 0 : t == WQ_F16 ? ldexp(1, -11) : ldexp(1, -8);
                if (fabs(x[k]) >= ldexp(1, -14) || t != WQ_F16) {
                    const double excess = e - rel * fabs(x[k]);
                    if (excess > worst_excess) worst_excess = excess, at = k;
                }
                continue;
            }
            /* the nearest level of the block's grid, the grid as stored: the scales were rounded to
             * f16 after the levels were chosen (Q4_0 .. Q8_0), which moves a level by at most
             * (|q| step + |offset|) 2^-11, and the K formats divide by the scale in f32 */
            const uint8_t *b = q + (size_t)(k / be) * bb;
            const grid g = block_grid(t, b, k % be);
            const double level_max = fmax(fabs((double)g.lo), fabs((double)g.hi));
            const double slack = (level_max * fabs(g.step) + fabs(g.offset)) * ldexp(1, -10) + 1e-30;
            const double excess = e - grid_distance(g, x[k]) - slack;
            if (excess > worst_excess) worst_excess = excess, at = k;
            /* and the plain bound of the symmetric formats: half a step, a whole one where the
             * level twin of the largest magnitude is past the grid's end (Q4_0, Q5_0) */
            const double half = t == WQ_Q8_0                   ? 0.5
                                : t == WQ_Q4_0 || t == WQ_Q5_0 ? 1.0
                                : t == WQ_Q4_1 || t == WQ_Q5_1 ? 0.5
                                                               : -1;
            if (half > 0) {
                const double b_excess = e - fabs(g.step) * half - slack;
                if (b_excess > worst_bound) worst_bound = b_excess;
            }
        }
        CHECK(worst_excess <= 0, "%s: element %lld (%g -> %g) %.3g past its grid's nearest level", wq_name(t),
              (long long)at, at >= 0 ? x[at] : 0, at >= 0 ? w[at] : 0, worst_excess);
        CHECK(worst_bound <= 0, "%s: an error %.3g past the format's step bound", wq_name(t), worst_bound);
        /* the fit of the scales: relative rms error on this data (ggml's quantizers give 0.0917,
         * 0.0806, 0.0454, 0.0393, 0.0057, 0.0742, 0.0375, 0.0187 on data like it) */
        const double rel_rms = sqrt(err2 / x2);
        const double limit = t == WQ_Q4_0   ? 0.11
                             : t == WQ_Q4_1 ? 0.10
                             : t == WQ_Q5_0 ? 0.055
                             : t == WQ_Q5_1 ? 0.048
                             : t == WQ_Q8_0 ? 0.007
                             : t == WQ_Q4_K ? 0.09
                             : t == WQ_Q5_K ? 0.045
                             : t == WQ_Q6_K ? 0.023
                             : t == WQ_F16  ? 3e-4
                             : t == WQ_BF16 ? 3e-3
                                            : 0;
        CHECK(rel_rms <= limit, "%s: relative rms error %.4g > %.4g", wq_name(t), rel_rms, limit);
        printf("%-5s quantize: relative rms error %.4f\n", wq_name(t), rel_rms);
        /* the zero block is all zeros, the constant block within its step */
        int zeros = 1;
        for (int k = 0; k < 256; k++) zeros &= w[k] == 0;
        CHECK(zeros, "%s: a zero block dequantizes to zeros", wq_name(t));
        free(x), free(w), free(q);
    }
    float x[256] = {0};
    uint8_t q[256 * 4];
    CHECK(wq_quantize_row(WQ_Q2_K, x, q, 256) == -1 && strstr(tlm_last_error(), "Q2_K"), "Q2_K is not written");
    CHECK(wq_quantize_row(WQ_Q4_K, x, q, 255) == -1 && strstr(tlm_last_error(), "255"), "partial block refused");
    x[5] = NAN;
    CHECK(wq_quantize_row(WQ_Q8_0, x, q, 32) == -1 && strstr(tlm_last_error(), "element 5"), "NaN refused");
    CHECK(wq_quantize_row(WQ_F16, x, q, 32) == 0, "F16 takes a NaN");
}

/* ---- products --------------------------------------------------------------------------------------- */

typedef struct {
    int exact_fail, tol_fail, part_fail, thread_fail;
    double worst; /* |y - ref| / bound */
} product_stats;

/* y [N, OC] against the float64 reference on the dequantized weights; exact: must be equal */
static void check_products(const float *y, const float *x, const float *w, const float *bias, int N, int IC, int OC,
                           int exact, double grid_step, product_stats *st) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double ref = bias ? bias[o] : 0, mag = bias ? fabs(bias[o]) : 0;
            for (int k = 0; k < IC; k++) {
                const double p = (double)x[(size_t)n * IC + k] * w[(size_t)o * IC + k];
                ref += p, mag += fabs(p);
            }
            const double got = y[(size_t)n * OC + o];
            if (exact) {
                /* every partial sum is a multiple of grid_step below 2^24 of them: no rounding */
                if (!(mag / grid_step < 16777216.0)) premise_failures++;
                if (!(got == ref)) st->exact_fail++;
            } else {
                const double bound = (IC + 2) * ldexp(1, -24) * mag * 1.001 + 1e-37;
                const double r = fabs(got - ref) / bound;
                if (!(r <= 1)) st->tol_fail++;
                if (r > st->worst) st->worst = r;
            }
        }
}

static void test_products(void) {
    const int OCs[] = {1, 17, 33, 257};
    const int NMAX = 5;
    for (int i = 0; i < NTYPES; i++) {
        const int t = all_types[i], be = wq_block_elems(t);
        /* one block and several; the block-of-1 types at widths no multiple of the vectors too */
        const int ICs32[] = {32, 96, 512}, ICsK[] = {256, 512, 1024}, ICs1[] = {1, 19, 96, 300};
        const int *ICs = be == 32 ? ICs32 : be == 256 ? ICsK : ICs1;
        const int nIC = be == 1 ? 4 : 3;
        product_stats st = {0, 0, 0, 0, 0};
        int cases = 0;
        for (int a = 0; a < nIC; a++)
            for (int c = 0; c < 4; c++)
                for (int exact = 0; exact < 2; exact++) {
                    const int IC = ICs[a], OC = OCs[c];
                    if (exact && IC > 512) continue; /* (the exact sums need IC * |level| * 2 < 2^24) */
                    const size_t row_bytes = wq_row_bytes(t, IC);
                    uint8_t *W = malloc(row_bytes * OC);
                    float *w = malloc(sizeof(float) * OC * IC), *x = malloc(sizeof(float) * NMAX * IC);
                    float *bias = malloc(sizeof(float) * OC), *y = malloc(sizeof(float) * NMAX * OC);
                    float *yp = malloc(sizeof(float) * OC), *y1 = malloc(sizeof(float) * NMAX * OC);
                    const float pow2 = ldexpf(1.0f, -between(6, 8));
                    for (int o = 0; o < OC; o++) random_row(t, IC, W + o * row_bytes, w + (size_t)o * IC, exact, pow2);
                    for (int k = 0; k < NMAX * IC; k++) x[k] = exact ? between(-2, 2) * 0.5f : (float)rng_normal(&rng);
                    for (int o = 0; o < OC; o++) bias[o] = exact ? between(-64, 64) / 128.0f : (float)rng_normal(&rng);
                    /* the finest step of any partial sum: x in halves times the weights' step */
                    const double step = be == 1 ? ldexp(1, -7) : pow2 * 0.5;
                    for (int N = 1; N <= NMAX; N++)
                        for (int with_bias = 0; with_bias < 2; with_bias++) {
                            const float *b = with_bias ? bias : NULL;
                            matvec_quant(y, x, W, t, b, N, IC, OC);
                            check_products(y, x, w, b, N, IC, OC, exact, step, &st);
                            cases++;
                            /* each row alone, over a split of the outputs into uneven parts, bit for bit */
                            for (int n = 0; n < N; n++) {
                                memset(yp, 0xff, sizeof(float) * OC);
                                for (int o0 = 0; o0 < OC;) {
                                    const int len = 1 + below(20), o1 = o0 + len < OC ? o0 + len : OC;
                                    matvec_quant_part(yp, x + (size_t)n * IC, W, t, b, IC, o0, o1);
                                    o0 = o1;
                                }
                                if (memcmp(yp, y + (size_t)n * OC, sizeof(float) * OC)) st.part_fail++;
                            }
                            /* and the same under 1 and 3 threads (3 split 257 outputs as 96 + 96 + 65;
                             * only there: 3 threads on a 2-core machine wait on each other) */
                            if (N == NMAX && OC == 257) {
                                for (int nt = 1; nt <= 3; nt += 2) {
                                    omp_set_num_threads(nt);
                                    matvec_quant(y1, x, W, t, b, N, IC, OC);
                                    if (memcmp(y1, y, sizeof(float) * N * OC)) st.thread_fail++;
                                }
                                omp_set_num_threads(2);
                            }
                        }
                    free(W), free(w), free(x), free(bias), free(y), free(yp), free(y1);
                }
        CHECK(st.exact_fail == 0, "%s: %d outputs differ from the exact result", wq_name(t), st.exact_fail);
        CHECK(st.tol_fail == 0, "%s: %d outputs past the f32 summation bound (worst %.3g of it)", wq_name(t),
              st.tol_fail, st.worst);
        CHECK(st.part_fail == 0, "%s: matvec_quant_part differs from matvec_quant in %d rows", wq_name(t),
              st.part_fail);
        CHECK(st.thread_fail == 0, "%s: %d results changed with the thread count", wq_name(t), st.thread_fail);
        printf("%-5s products: %d cases, worst error %.3f of the f32 summation bound\n", wq_name(t), cases, st.worst);
    }
    float y[4];
    matvec_quant(y, (const float[32]){0}, (const uint8_t[36]){0}, WQ_Q8_1, NULL, 1, 32, 1);
    CHECK(isnan(y[0]), "an unreadable type's product is NaN");
}

int main(void) {
    const char *cap = getenv("TLM_ISA");
    const tlm_isa isa = tlm_cpu_isa();
    printf("kernels: %s (TLM_ISA=%s)\n", tlm_isa_name(isa), cap ? cap : "unset");
    CHECK(!(cap && !strcmp(cap, "scalar")) || isa == TLM_ISA_SCALAR, "TLM_ISA=scalar ignored");
    CHECK(!(cap && !strcmp(cap, "avx2")) || isa == TLM_ISA_AVX2 || tlm_cpu_isa_detected() == TLM_ISA_SCALAR,
          "TLM_ISA=avx2 ignored");
    rng_seed(&rng, 20240611);
    test_table();
    test_dequantize();
    test_quantize();
    test_products();
    CHECK(premise_failures == 0, "test: %ld values or sums not exact in f32 where the test needs them exact",
          premise_failures);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}

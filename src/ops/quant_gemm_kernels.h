/* quant_gemm_kernels.h — the vector bodies of quant_gemm.c, one source for every kernel set.
 * quant_gemm.c includes this file once per set, with
 *   GT, GS(name)    the target attribute string, the set's suffix on each name
 *   GW, GOV, GNR    32-bit lanes per vector, vectors of weight rows per tile, rows of x per tile
 *   VI, VF          the integer and float vector types, and their operations V_* / F_*
 *   V_DOT(a,u,s)    a + the sums of 4 adjacent u8 * s8 products in each 32-bit lane (vpdpbusd;
 *                   AVX2: vpmaddubsw + vpmaddwd with ones, exact for levels <= 128)
 *   V_DOTW(a,u,v)   a + the sums of 2 adjacent s16 * s16 products (vpdpwssd; AVX2: vpmaddwd)
 * A tile is GOV * GW weight rows of the panel (one lane each) x GNR rows of x: per k step of 4
 * elements one load of the weight rows' 4 levels each per vector, one broadcast of each row of
 * x's 4 levels, GNR * GOV dot products; per sub-block the offset and scale applied to the
 * integer sums; per block the float steps of quant_gemm.c in its order. */

#define GFN static inline __attribute__((always_inline, target(GT)))
#define GPASS (GOV * GW)

GFN int32_t GS(ld_i32)(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* block i's I1 = sum_j sc_j (S_j - off A_j) for rows xq/xa [GNR] of x and the panel's weight rows
 * [po, po + GPASS) */
GFN void GS(ints)(const int bk, const int sl, const int off, const int has_sc, const gpanel *P, int i,
                  const int8_t *const *xq, const int32_t *const *xa, int po, VI I1[GNR][GOV]) {
    const int ns = bk / sl, g4 = bk / 4;
#pragma GCC unroll 16
    for (int r = 0; r < GNR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < GOV; v++) I1[r][v] = V_ZERO();
    const uint8_t *u = P->u + ((size_t)i * g4 * PW + po) * 4;
    for (int j = 0; j < ns; j++) {
        /* (S starts at -off A_j: the offset's term, exact, before the products) */
        VI S[GNR][GOV];
#pragma GCC unroll 16
        for (int r = 0; r < GNR; r++) {
            const VI s0 = off ? V_SET1(-off * xa[r][i * ns + j]) : V_ZERO();
#pragma GCC unroll 4
            for (int v = 0; v < GOV; v++) S[r][v] = s0;
        }
#pragma GCC unroll 8
        for (int s = 0; s < sl / 4; s++) {
            const int k4 = j * (sl / 4) + s;
            VI w[GOV];
#pragma GCC unroll 4
            for (int v = 0; v < GOV; v++) w[v] = V_LD(u + ((size_t)k4 * PW + v * GW) * 4);
#pragma GCC unroll 16
            for (int r = 0; r < GNR; r++) {
                const VI a = V_SET1(GS(ld_i32)(xq[r] + (size_t)i * bk + 4 * k4));
#pragma GCC unroll 4
                for (int v = 0; v < GOV; v++) S[r][v] = V_DOT(S[r][v], w[v], a);
            }
        }
#pragma GCC unroll 4
        for (int v = 0; v < GOV; v++) {
            const VI c = has_sc ? V_LD(P->sc + ((size_t)(i * ns + j) * PW + po + v * GW)) : V_ZERO();
#pragma GCC unroll 16
            for (int r = 0; r < GNR; r++) I1[r][v] = V_ADD(I1[r][v], has_sc ? V_MUL(S[r][v], c) : S[r][v]);
        }
    }
}

/* block i's I2 = sum_j mm_j A_j for one row of x (xa, xa2: its A and A pairs) and the panel's
 * weight rows [po, po + GPASS) (unset without a minimums term) */
GFN void GS(mins)(const int bk, const int sl, const int has_mm, const gpanel *P, int i, const int32_t *xa,
                  const int32_t *xa2, int po, VI I2[GOV]) {
    const int ns = bk / sl, nh = (ns + 1) / 2;
    if (has_mm && ns == 1) { /* (Q4_1 / Q5_1: the minimum multiplies the block's A itself) */
#pragma GCC unroll 4
        for (int v = 0; v < GOV; v++) I2[v] = V_SET1(xa[i]);
    } else if (has_mm) {
#pragma GCC unroll 4
        for (int v = 0; v < GOV; v++) I2[v] = V_ZERO();
#pragma GCC unroll 8
        for (int h = 0; h < nh; h++) {
            const VI a = V_SET1(xa2[i * nh + h]);
#pragma GCC unroll 4
            for (int v = 0; v < GOV; v++)
                I2[v] = V_DOTW(I2[v], V_LD(P->mm + ((size_t)(i * nh + h) * PW + po + v * GW)), a);
        }
    }
}

/* rows xq/xd/xa [GNR] of x with the panel's weight rows [po, po + GPASS): row r's GPASS outputs to
 * out[r] */
GFN void GS(tile)(const int bk, const int sl, const int off, const int has_sc, const int has_mm, const gpanel *P,
                  int nb, const int8_t *const *xq, const float *const *xd, const int32_t *const *xa,
                  const int32_t *const *xa2, int po, float *lanes, float *const *out) {
    for (int i = 0; i < nb; i++) {
        VI I1[GNR][GOV];
        GS(ints)(bk, sl, off, has_sc, P, i, xq, xa, po, I1);
        float *L = lanes + (size_t)(i % 8) * GNR * GPASS;
#pragma GCC unroll 16
        for (int r = 0; r < GNR; r++) {
            const VF da = F_SET1(xd[r][i]);
            VI I2[GOV];
            GS(mins)(bk, sl, has_mm, P, i, xa[r], xa2[r], po, I2);
#pragma GCC unroll 4
            for (int v = 0; v < GOV; v++) {
                float *l = L + (r * GOV + v) * GW;
                const size_t at = (size_t)i * PW + po + v * GW;
                /* (a lane's first block starts it: fmaf(I1, s, +0), as the reference's zeroed lanes) */
                VF acc = F_FMA(F_CVT(I1[r][v]), F_MUL(F_LD(P->dw + at), da), i < 8 ? F_ZERO() : F_LD(l));
                if (has_mm) acc = F_FMA(F_CVT(I2[v]), F_MUL(F_LD(P->m2 + at), da), acc);
                F_ST(l, acc);
            }
        }
    }
    for (int k = 0; k < GNR * GOV; k++) {
        VF l[8];
        for (int m = 0; m < 8; m++) l[m] = m < nb ? F_LD(lanes + ((size_t)m * GNR * GOV + k) * GW) : F_ZERO();
        F_STU(out[k / GOV] + (k % GOV) * GW, F_ADD(F_ADD(F_ADD(l[0], l[1]), F_ADD(l[2], l[3])), F_ADD(F_ADD(l[4], l[5]), F_ADD(l[6], l[7]))));
    }
}

/* GS(tile) for the 256-element types with a minimums term (Q4_K, Q5_K, Q2_K): the integers of 8
 * blocks at a time (ib, ib2), then their float steps with the 8 lanes in registers (lane m +=
 * block i0 + m's, the reference's lane i % 8, in the blocks' order), so that the float steps'
 * dependent chains run apart from the products: measured faster for those three, no faster for
 * Q6_K and Q3_K, slower for the 32-element types, whose blocks are too short for it */
GFN void GS(tile_k)(const int bk, const int sl, const int off, const int has_sc, const int has_mm, const gpanel *P,
                  int nb, const int8_t *const *xq, const float *const *xd, const int32_t *const *xa,
                  const int32_t *const *xa2, int po, float *lanes, float *const *out) {
    VI ib[8][GNR][GOV], ib2[8][GNR][GOV];
    for (int i0 = 0; i0 < nb; i0 += 8) {
        const int ng = nb - i0 < 8 ? nb - i0 : 8;
        for (int m = 0; m < ng; m++) {
            const int i = i0 + m;
            VI I1[GNR][GOV];
            GS(ints)(bk, sl, off, has_sc, P, i, xq, xa, po, I1);
#pragma GCC unroll 16
            for (int r = 0; r < GNR; r++) {
                VI I2[GOV];
                GS(mins)(bk, sl, has_mm, P, i, xa[r], xa2[r], po, I2);
#pragma GCC unroll 4
                for (int v = 0; v < GOV; v++) {
                    ib[m][r][v] = I1[r][v];
                    if (has_mm) ib2[m][r][v] = I2[v];
                }
            }
        }
        for (int r = 0; r < GNR; r++) {
            for (int v = 0; v < GOV; v++) {
                const int k = r * GOV + v;
                VF l[8];
#pragma GCC unroll 8
                for (int m = 0; m < 8; m++) l[m] = i0 == 0 ? F_ZERO() : F_LD(lanes + ((size_t)m * GNR * GOV + k) * GW);
#pragma GCC unroll 8
                for (int m = 0; m < 8; m++)
                    if (m < ng) {
                        const int i = i0 + m;
                        const VF da = F_SET1(xd[r][i]);
                        const size_t at = (size_t)i * PW + po + v * GW;
                        l[m] = F_FMA(F_CVT(ib[m][r][v]), F_MUL(F_LD(P->dw + at), da), l[m]);
                        if (has_mm) l[m] = F_FMA(F_CVT(ib2[m][r][v]), F_MUL(F_LD(P->m2 + at), da), l[m]);
                    }
                if (i0 + 8 < nb) {
#pragma GCC unroll 8
                    for (int m = 0; m < 8; m++) F_ST(lanes + ((size_t)m * GNR * GOV + k) * GW, l[m]);
                } else
                    F_STU(out[r] + v * GW, F_ADD(F_ADD(F_ADD(l[0], l[1]), F_ADD(l[2], l[3])), F_ADD(F_ADD(l[4], l[5]), F_ADD(l[6], l[7]))));
            }
        }
    }
}

/* the panel's weight rows [0, rows) with every row of x, into y's columns o0.. */
GFN void GS(body)(const int bk, const int sl, const int off, const int has_sc, const int has_mm, const gpanel *P,
                  int nb, const gacts *X, int N, float *y, int OC, int o0, int rows, const uint8_t *pf, size_t pfn) {
    float lanes[8 * GNR * GPASS] __attribute__((aligned(64)));
    float out[GNR * GPASS] __attribute__((aligned(64)));
    const int ns = bk / sl;
    const size_t lines = pf ? (pfn + 63) / 64 : 0, tiles = (size_t)(N + GNR - 1) / GNR;
    for (int n0 = 0; n0 < N; n0 += GNR) {
        /* (this tile's share of the next panel's weights) */
        for (size_t c = lines * (size_t)(n0 / GNR) / tiles; c < lines * (size_t)(n0 / GNR + 1) / tiles; c++)
            _mm_prefetch((const char *)(pf + 64 * c), _MM_HINT_T1);
        const int8_t *xq[GNR];
        const float *xd[GNR];
        const int32_t *xa[GNR], *xa2[GNR];
        for (int r = 0; r < GNR; r++) { /* (a short last tile repeats its last row, not stored) */
            const int n = n0 + r < N ? n0 + r : N - 1;
            xq[r] = X->q + (size_t)n * X->IC, xd[r] = X->d + (size_t)n * nb, xa[r] = X->A + (size_t)n * nb * ns;
            xa2[r] = X->A2 + (size_t)n * nb * X->nh;
        }
        for (int po = 0; po < rows; po += GPASS) {
            /* (straight into y, but for a short tile's rows or columns, which go through out) */
            const int cols = rows - po < GPASS ? rows - po : GPASS;
            float *dst[GNR];
            for (int r = 0; r < GNR; r++)
                dst[r] = n0 + r < N && cols == GPASS ? y + (size_t)(n0 + r) * OC + o0 + po : out + r * GPASS;
            if (bk == QK_K && has_mm)
                GS(tile_k)(bk, sl, off, has_sc, has_mm, P, nb, xq, xd, xa, xa2, po, lanes, dst);
            else
                GS(tile)(bk, sl, off, has_sc, has_mm, P, nb, xq, xd, xa, xa2, po, lanes, dst);
            if (cols < GPASS)
                for (int r = 0; r < GNR && n0 + r < N; r++)
                    memcpy(y + (size_t)(n0 + r) * OC + o0 + po, out + r * GPASS, sizeof(float) * cols);
        }
    }
}

/* (one function per type: each type's shape folded into its own body, and each body's code laid
 * out on its own, its loops aligned to 64 bytes under GCC: without that, the layout alone moved
 * some types' times by 2-4% either way between builds) */
#if defined(__GNUC__) && !defined(__clang__)
#define GALIGN , optimize("align-loops=64")
#else
#define GALIGN
#endif
#define GTYPE(T, NAME)                                                                                                 \
    static __attribute__((target(GT), noinline GALIGN)) void GS(NAME)(const gpanel *P, int nb, const gacts *X, int N, \
                                                               float *y, int OC, int o0, int rows, const uint8_t *pf,  \
                                                               size_t pfn) {                                           \
        gfmt f = {0};                                                                                                  \
        gfmt_of(T, &f);                                                                                                \
        GS(body)(f.bk, f.sl, f.off, f.has_sc, f.has_mm, P, nb, X, N, y, OC, o0, rows, pf, pfn);                       \
    }
GTYPE(WQ_Q8_0, q8_0)
GTYPE(WQ_Q4_0, q4_0)
GTYPE(WQ_Q4_1, q4_1)
GTYPE(WQ_Q5_0, q5_0)
GTYPE(WQ_Q5_1, q5_1)
GTYPE(WQ_Q2_K, q2_k)
GTYPE(WQ_Q3_K, q3_k)
GTYPE(WQ_Q4_K, q4_k)
GTYPE(WQ_Q5_K, q5_k)
GTYPE(WQ_Q6_K, q6_k)
#undef GTYPE
#undef GALIGN

static __attribute__((target(GT))) void GS(run)(int t, const gpanel *P, int nb, const gacts *X, int N, float *y,
                                                int OC, int o0, int rows, const uint8_t *pf, size_t pfn) {
#define GCASE(T, NAME)                                                                                                 \
    case T: GS(NAME)(P, nb, X, N, y, OC, o0, rows, pf, pfn); break;
    switch (t) {
        GCASE(WQ_Q8_0, q8_0)
        GCASE(WQ_Q4_0, q4_0)
        GCASE(WQ_Q4_1, q4_1)
        GCASE(WQ_Q5_0, q5_0)
        GCASE(WQ_Q5_1, q5_1)
        GCASE(WQ_Q2_K, q2_k)
        GCASE(WQ_Q3_K, q3_k)
        GCASE(WQ_Q4_K, q4_k)
        GCASE(WQ_Q5_K, q5_k)
        GCASE(WQ_Q6_K, q6_k)
    default: break;
    }
}

#undef GCASE
#undef GFN
#undef GPASS

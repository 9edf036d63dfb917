/* test_cpu_amx.c — what util/cpu.c says about AMX is true: where tlm_cpu_features_get reports the
 * tile data permitted, this process really runs the tile instructions (without the Linux grant the
 * first ldtilecfg raises SIGILL), and one TDPBF16PS (16 x 32 bf16 times 32 x 16 bf16, small
 * integers: exact in fp32) equals the product computed in C. The permission implies the XCR0 bits
 * and the AMX-TILE bit; tlm_cpu_has_amx_bf16 follows the bits. Skipped (77) where AMX-BF16 is not
 * usable (the CPU, the OS or the build lacks it); tests/cli/test_info_system.py checks the bits
 * themselves against /proc/cpuinfo. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_count.h"
#include "util/cpu.h"

#if (defined(__x86_64__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AMX_TEST 1

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

enum { M = 16, K = 32, N = 16 };

/* C[M][N] = A[M][K] B[K][N] on the tiles: A row-major bf16, B packed in pairs along K
 * (B_pairs[k / 2][n][k % 2]), C fp32 */
__attribute__((target("amx-tile,amx-bf16"))) static void amx_product(const uint16_t *a, const uint16_t *b_pairs,
                                                                      float *c) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.colsb[0] = N * 4, cfg.rows[0] = M;  /* C */
    cfg.colsb[1] = K * 2, cfg.rows[1] = M;  /* A */
    cfg.colsb[2] = N * 4, cfg.rows[2] = K / 2; /* B */
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_loadd(1, a, K * 2);
    _tile_loadd(2, b_pairs, N * 4);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, c, N * 4);
    _tile_release();
}
#endif

int main(void) {
    const tlm_cpu_features *f = tlm_cpu_features_get();
    CHECK(!f->amx_permitted || (f->amx_tile && f->amx_os), "the tile data permitted only with AMX-TILE and XCR0 17/18");
    CHECK(!f->amx_os || f->amx_tile, "XCR0's tile state counted only with AMX-TILE");
    CHECK(tlm_cpu_has_amx_bf16() == (tlm_cpu_isa() == TLM_ISA_AVX512 && f->amx_bf16 && f->amx_permitted),
          "tlm_cpu_has_amx_bf16 = AMX-BF16 present and permitted (AVX-512 kernels)");
    CHECK(tlm_cpu_features_get() == f, "the features are read once");
#ifdef HAVE_AMX_TEST
    if (!(f->amx_bf16 && f->amx_permitted)) {
        printf("AMX-BF16 not usable here (tile %d, bf16 %d, OS %d, permitted %d): the tile product skipped\n",
               f->amx_tile, f->amx_bf16, f->amx_os, f->amx_permitted);
        return failures ? 1 : 77;
    }
    static uint16_t a[M * K], b_pairs[K / 2 * N * 2];
    static float c[M * N], want[M * N];
    float av[M][K], bv[K][N];
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) av[m][k] = (float)((m * 7 + k * 3) % 9 - 4), a[m * K + k] = bf16_of(av[m][k]);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            bv[k][n] = (float)((k * 5 + n * 11) % 7 - 3), b_pairs[(k / 2) * N * 2 + n * 2 + k % 2] = bf16_of(bv[k][n]);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += av[m][k] * bv[k][n];
            want[m * N + n] = s;
            c[m * N + n] = -12345.0f;
        }
    amx_product(a, b_pairs, c);
    int bad = 0;
    for (int i = 0; i < M * N; i++) bad += c[i] != want[i];
    CHECK(bad == 0, "TDPBF16PS 16x32x16 on the tiles = the product in C (exact: small integers)");
    printf("  C[0][0..3] = %g %g %g %g (want %g %g %g %g)\n", c[0], c[1], c[2], c[3], want[0], want[1], want[2],
           want[3]);
#else
    printf("not x86-64 with GCC/clang: the tile product skipped\n");
    return failures ? 1 : 77;
#endif
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}

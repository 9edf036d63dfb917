/* test_f16.c — the 16-bit float conversions in util/f16.h against independent
 * references computed here in double precision:
 *   - F16 -> F32 for all 65536 bit patterns, against the value formula of IEEE binary16
 *     (subnormal: m * 2^-24, normal: (1024 + m) * 2^(e-25), e = 31: inf / NaN);
 *   - F32 -> F16 and F32 -> BF16 against "nearest representable value, ties to the even
 *     code", found by binary search over the table of all finite values of the format,
 *     on every 16-bit value, every midpoint between neighbours, one f32 step either side
 *     of each midpoint, and 2 million pseudo-random f32 bit patterns.
 * (test_formats.py also compares with numpy's float16 and torch's bfloat16.) */
#include "check.h"

#include "util/f16.h"

#include <math.h>
#include <stdint.h>

/* IEEE binary16 value of h, from the definition. */
static double f16_ref_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_ref_value(uint16_t h) {
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

/* Sorted non-negative finite values of a 16-bit format: codes 0 .. max_code. */
typedef struct {
    double value[0x8000];
    int count;
    double overflow; /* |x| >= this rounds to infinity (the tie goes to the even inf code) */
} table;

static void build_table(table *t, double (*value)(uint16_t), uint16_t max_code) {
    t->count = max_code + 1;
    for (int c = 0; c <= max_code; c++)
        t->value[c] = value((uint16_t)c);
    /* half a unit in the last place above the largest finite value */
    t->overflow = t->value[max_code] + (t->value[max_code] - t->value[max_code - 1]) / 2;
}

/* Round-to-nearest-even reference for a finite or infinite non-NaN float. */
static uint16_t ref_round(const table *t, float x, uint16_t inf_code) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= t->overflow)
        return sign | inf_code;
    int lo = 0, hi = t->count - 1; /* find the last value <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->value[mid] <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    int code = lo;
    if (code + 1 < t->count) {
        double below = a - t->value[code], above = t->value[code + 1] - a;
        if (above < below || (above == below && (code & 1)))
            code++;
    }
    return sign | (uint16_t)code;
}

static table f16_table, bf16_table;
static long n_compared;

static void check_one(float x) {
    n_compared++;
    uint16_t h = tlm_f32_to_f16(x), b = tlm_f32_to_bf16(x);
    if (isnan(x)) {
        CHECK(isnan(tlm_f16_to_f32(h)));
        CHECK(isnan(tlm_bf16_to_f32(b)));
        return;
    }
    uint16_t want_h = ref_round(&f16_table, x, 0x7c00), want_b = ref_round(&bf16_table, x, 0x7f80);
    if (h != want_h || b != want_b) {
        fprintf(stderr, "f32 %a (0x%08x): f16 0x%04x want 0x%04x, bf16 0x%04x want 0x%04x\n", (double)x,
                (unsigned)tlm_f32_bits(x), h, want_h, b, want_b);
        check_failures++;
    }
}

int main(void) {
    /* F16 -> F32, all bit patterns */
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint32_t got = tlm_f16_bits_to_f32_bits((uint16_t)h);
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31) {
            /* inf or NaN: all-ones exponent, sign kept, payload in the top mantissa bits */
            uint32_t want = ((h & 0x8000u) << 16) | 0x7f800000u | ((uint32_t)m << 13);
            if (got != want)
                fprintf(stderr, "f16 0x%04x: got 0x%08x want 0x%08x\n", (unsigned)h, (unsigned)got, (unsigned)want),
                    check_failures++;
        } else {
            float want = (float)f16_ref_value((uint16_t)h); /* exact: f16 values are f32 values */
            if (got != tlm_f32_bits(want))
                fprintf(stderr, "f16 0x%04x: got 0x%08x want 0x%08x\n", (unsigned)h, (unsigned)got,
                        (unsigned)tlm_f32_bits(want)),
                    check_failures++;
        }
        /* BF16 -> F32 likewise */
        float bv = tlm_bf16_to_f32((uint16_t)h);
        if (((h >> 7) & 255) != 255)
            CHECK(tlm_f32_bits(bv) == tlm_f32_bits((float)bf16_ref_value((uint16_t)h)));
    }

    build_table(&f16_table, f16_ref_value, 0x7bff);
    build_table(&bf16_table, bf16_ref_value, 0x7f7f);
    CHECK(f16_table.overflow == 65520.0);

    /* F32 -> 16 bits: every 16-bit value, midpoints and their neighbours, both formats */
    for (uint32_t c = 0; c < 0x10000; c++) {
        float v16 = tlm_f16_to_f32((uint16_t)c), vb = tlm_bf16_to_f32((uint16_t)c);
        check_one(v16);
        check_one(vb);
        for (int f = 0; f < 2; f++) {
            const table *t = f ? &bf16_table : &f16_table;
            uint32_t code = c & 0x7fff;
            if ((int)code + 1 >= t->count)
                continue;
            double mid = (t->value[code] + t->value[code + 1]) / 2; /* exact in f32 for both formats */
            float m = (float)mid;
            if ((double)m != mid)
                continue; /* only for f16/bf16 subnormal pairs far below f32 range: none expected */
            float s = (c & 0x8000) ? -m : m;
            check_one(s);
            check_one(nextafterf(s, INFINITY));
            check_one(nextafterf(s, -INFINITY));
        }
    }
    /* pseudo-random f32 bit patterns (xorshift; covers NaN, inf, subnormals, huge) */
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2000000; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        check_one(tlm_f32_from_bits((uint32_t)(state >> 32)));
    }
    /* a few named cases whose answers are well known */
    CHECK(tlm_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(tlm_f32_to_f16(65519.996f) == 0x7bff);
    CHECK(tlm_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(tlm_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001);
    CHECK(tlm_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000); /* tie between 0 and 2^-24: even is 0 */
    CHECK(tlm_f32_to_f16(-0.0f) == 0x8000);
    CHECK(tlm_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(tlm_f32_to_bf16(tlm_f32_from_bits(0x3f808000u)) == 0x3f80); /* tie, even stays */
    CHECK(tlm_f32_to_bf16(tlm_f32_from_bits(0x3f818000u)) == 0x3f82); /* tie, odd rounds up */
    CHECK(tlm_f32_to_bf16(INFINITY) == 0x7f80);
    printf("compared %ld float32 inputs\n", n_compared);
    return check_report("test_f16");
}

/* test_file_float.c — tlm_float_from_file (util/finite.h), the one conversion every reader puts a
 * float from a file through: NaN, +-Inf and values beyond float32's range are refused, a double
 * that rounds to FLT_MAX is not; each range's edges, checked after the rounding to float32;
 * every refusal names the file and the key, and a refusal leaves *out as it was. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_count.h"
#include "util/finite.h"

typedef struct {
    double v;
    tlm_float_range range;
    int ok;
    const char *says; /* in the refusal */
} row;

int main(void) {
    const double just_over = 3.4028235677973366e38; /* (the first double that rounds to +Inf in float32) */
    const row rows[] = {
        {NAN, TLM_FLOAT_ANY, 0, "is NaN"},
        {INFINITY, TLM_FLOAT_ANY, 0, "is +Inf"},
        {-INFINITY, TLM_FLOAT_NONNEG, 0, "is -Inf"},
        {1e39, TLM_FLOAT_ANY, 0, "beyond the range of a float32"},
        {-1e39, TLM_FLOAT_ANY, 0, "it would be -Inf"},
        {just_over, TLM_FLOAT_ANY, 0, "beyond the range"},
        {(double)FLT_MAX, TLM_FLOAT_ANY, 1, ""},
        {3.4028235e38, TLM_FLOAT_ANY, 1, ""}, /* (above FLT_MAX as a double, rounds down to it) */
        {-(double)FLT_MAX, TLM_FLOAT_ANY, 1, ""},
        {1e-50, TLM_FLOAT_ANY, 1, ""}, /* (0 in float32: fine where any value is) */
        {0.0, TLM_FLOAT_EPS, 0, "in (0, 1]"},
        {1e-50, TLM_FLOAT_EPS, 0, "is 0 as a float32"},
        {1e-45, TLM_FLOAT_EPS, 1, ""}, /* (the smallest subnormal: > 0) */
        {1.0, TLM_FLOAT_EPS, 1, ""},
        {1.0000001, TLM_FLOAT_EPS, 0, "in (0, 1]"},
        {1.00000001, TLM_FLOAT_EPS, 1, ""}, /* (rounds to 1 in float32) */
        {0.0, TLM_FLOAT_POSITIVE, 0, "> 0"},
        {-1e-30, TLM_FLOAT_POSITIVE, 0, "> 0"},
        {1e-30, TLM_FLOAT_POSITIVE, 1, ""},
        {-0.0, TLM_FLOAT_NONNEG, 1, ""},
        {-1e-30, TLM_FLOAT_NONNEG, 0, ">= 0"},
        {1e38, TLM_FLOAT_NONNEG, 1, ""},
        {0.99999, TLM_FLOAT_FACTOR, 0, ">= 1"},
        {1.0, TLM_FLOAT_FACTOR, 1, ""},
        {0.999999999, TLM_FLOAT_FACTOR, 1, ""}, /* (rounds to 1) */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        float out = 42.0f;
        tlm_clear_error();
        const int rc = tlm_float_from_file(r->v, r->range, "f.json", "some.key", &out);
        if (r->ok)
            CHECK(rc == 0 && out == (float)r->v && isfinite(out), "row %zu (%g, range \"%s\"): accepted as %g", i, r->v,
                  tlm_float_range_rule(r->range), (double)(float)r->v);
        else
            CHECK(rc == -1 && out == 42.0f && strstr(tlm_last_error(), "f.json: key \"some.key\"") &&
                      strstr(tlm_last_error(), r->says),
                  "row %zu (%g, range \"%s\"): refused saying \"%s\"", i, r->v, tlm_float_range_rule(r->range),
                  r->says);
    }
    printf("test_file_float: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}

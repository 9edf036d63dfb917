#include "finite.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

static int allow_nonfinite = 0;

void tlm_set_allow_nonfinite(int allow) { allow_nonfinite = allow != 0; }
int tlm_get_allow_nonfinite(void) { return allow_nonfinite; }

#define EXP_MASK 0x7f800000u /* all exponent bits set: Inf or NaN */

static int bad_bits(const float *p) {
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return (u & EXP_MASK) == EXP_MASK;
}

size_t tlm_first_nonfinite(const float *x, size_t n, size_t *count) {
    if (count) *count = 0;
    int any = 0;
    /* a plain loop the compiler vectorizes: bit tests, an OR, no branch; threads only when
     * the buffer is large enough to pay for them */
#pragma omp parallel for schedule(static) reduction(| : any) if (n >= (1u << 18))
    for (size_t i = 0; i < n; i++) any |= bad_bits(x + i);
    if (!any) return n;
    size_t first = n, k = 0;
    for (size_t i = 0; i < n; i++)
        if (bad_bits(x + i)) {
            if (first == n) first = i;
            k++;
        }
    if (count) *count = k;
    return first;
}

int tlm_check_finite(const float *x, size_t n, size_t base, const char *file, const char *tensor) {
    size_t count;
    size_t i = tlm_first_nonfinite(x, n, &count);
    if (i == n) return 0;
    const char *what = x[i] != x[i] ? "NaN" : x[i] > 0 ? "+Inf" : "-Inf";
    if (allow_nonfinite) {
        fprintf(stderr,
                "tinylm: warning: %s: tensor '%s' holds %zu non-finite value%s (the first, at flat index %zu, is %s); "
                "used anyway (non-finite weights are allowed: --allow-nonfinite, or allow_nonfinite=True in Python)\n",
                file, tensor, count, count == 1 ? "" : "s", base + i, what);
        return 1;
    }
    return tlm_error("%s: tensor '%s' holds %zu non-finite value%s (the first, at flat index %zu, is %s); "
                     "refused (--allow-nonfinite accepts it)",
                     file, tensor, count, count == 1 ? "" : "s", base + i, what);
}

const char *tlm_float_range_rule(tlm_float_range range) {
    switch (range) {
    case TLM_FLOAT_POSITIVE: return "> 0";
    case TLM_FLOAT_NONNEG: return ">= 0";
    case TLM_FLOAT_EPS: return "in (0, 1]";
    case TLM_FLOAT_FACTOR: return ">= 1";
    case TLM_FLOAT_ANY: break;
    }
    return "";
}

static int in_range(float f, tlm_float_range range) {
    switch (range) {
    case TLM_FLOAT_POSITIVE: return f > 0.0f;
    case TLM_FLOAT_NONNEG: return f >= 0.0f;
    case TLM_FLOAT_EPS: return f > 0.0f && f <= 1.0f;
    case TLM_FLOAT_FACTOR: return f >= 1.0f;
    case TLM_FLOAT_ANY: break;
    }
    return 1;
}

int tlm_float_from_file(double v, tlm_float_range range, const char *file, const char *key, float *out) {
    if (v != v) return tlm_error("%s: key \"%s\" is NaN: a number is needed", file, key);
    if (isinf(v)) return tlm_error("%s: key \"%s\" is %s: a finite number is needed", file, key, v > 0 ? "+Inf" : "-Inf");
    /* (the test on the double: a value just above FLT_MAX that rounds down to it is a float32) */
    if (isinf((float)v))
        return tlm_error("%s: key \"%s\" = %g is beyond the range of a float32 (+-%g): it would be %s", file, key, v,
                         (double)FLT_MAX, v > 0 ? "+Inf" : "-Inf");
    const float f = (float)v;
    if (!in_range(f, range)) {
        if ((double)f != v && f == 0.0f)
            return tlm_error("%s: key \"%s\" = %g is 0 as a float32: it must be %s", file, key, v,
                             tlm_float_range_rule(range));
        return tlm_error("%s: key \"%s\" = %g must be %s", file, key, v, tlm_float_range_rule(range));
    }
    *out = f;
    return 0;
}

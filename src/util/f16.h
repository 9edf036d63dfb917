/* f16.h — exact conversions between float32 and the two 16-bit float formats used in
 * checkpoints: IEEE binary16 ("F16") and bfloat16 ("BF16").
 *
 * Widening (16 -> 32 bits) is exact for every input, including subnormals, infinities
 * and NaN payloads. Narrowing (32 -> 16 bits) rounds to nearest, ties to even, the
 * same as numpy's astype(float16) and torch's .to(torch.bfloat16) for non-NaN values;
 * a NaN stays a (quiet) NaN.
 * The functions work on bit patterns (uint16_t / uint32_t) so they never depend on the
 * alignment of the data they come from; the float wrappers use memcpy to reinterpret. */
#ifndef TLM_F16_H
#define TLM_F16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tlm_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tlm_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bfloat16 is the top half of a float32, so widening is a shift. */
static inline float tlm_bf16_to_f32(uint16_t h) { return tlm_f32_from_bits((uint32_t)h << 16); }

static inline uint16_t tlm_f32_to_bf16(float f) {
    uint32_t u = tlm_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff (+1 when the kept part is odd) carries into the kept bits exactly
     * when the dropped half is above one half, or equal to it with an odd kept part. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline uint32_t tlm_f16_bits_to_f32_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN: payload moves to the top of the f32 mantissa */
        return sign | 0x7f800000u | (man << 13);
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return sign | ((exp + 112u) << 23) | (man << 13);
    if (man == 0)
        return sign;
    /* subnormal man * 2^-24: shift until the leading 1 reaches bit 10, which makes it
     * the implicit bit of a normal f32 with exponent 2^(-14 - shift). */
    uint32_t shift = 0;
    while (!(man & 0x400u)) {
        man <<= 1;
        shift++;
    }
    return sign | ((113u - shift) << 23) | ((man & 0x3ffu) << 13);
}

static inline float tlm_f16_to_f32(uint16_t h) { return tlm_f32_from_bits(tlm_f16_bits_to_f32_bits(h)); }

static inline uint16_t tlm_f32_to_f16(float f) {
    uint32_t u = tlm_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) /* inf stays inf; NaN stays a quiet NaN with the top payload bits */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    if (exp >= 143) /* >= 2^16: beyond the largest finite f16 (65504) even before rounding */
        return (uint16_t)(sign | 0x7c00u);
    if (exp >= 113) { /* normal f16 range: keep 10 mantissa bits, round the other 13 */
        uint32_t h = ((exp - 112u) << 10) | (man >> 13);
        uint32_t rest = man & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++; /* may carry into the exponent, up to inf: that is the right answer */
        return (uint16_t)(sign | h);
    }
    if (exp < 102) /* below 2^-25: rounds to (signed) zero */
        return sign;
    /* f16 subnormal: result = round(value / 2^-24) = round(full_mantissa >> shift) */
    uint32_t full = man | 0x800000u;
    uint32_t shift = 126u - exp; /* 14 .. 24 */
    uint32_t h = full >> shift;
    uint32_t rest = full & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u)))
        h++; /* 0x3ff + 1 = 0x400 is the smallest normal: still the right encoding */
    return (uint16_t)(sign | h);
}

#endif

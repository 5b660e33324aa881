/* Data types: names, sizes, and the binary16 / bfloat16 conversions (round to nearest even). */
#include <math.h>
#include <string.h>

#include "cvfuse.h"

size_t cvf_dtype_size(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return 4;
    case CVF_F16: return 2;
    case CVF_BF16: return 2;
    case CVF_F64: return 8;
    }
    return 0;
}

const char *cvf_dtype_name(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return "f32";
    case CVF_F16: return "f16";
    case CVF_BF16: return "bf16";
    case CVF_F64: return "f64";
    }
    return "unknown";
}

/* Returns the bits of a binary32 value. */
static uint32_t f32_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* Returns the binary32 value of bits. */
static float f32_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

uint16_t cvf_f32_to_f16(float value)
{
    uint32_t x = f32_bits(value);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) { /* Inf or NaN: keep the top payload bits, force NaN to stay NaN */
        if (abs == 0x7F800000u)
            return (uint16_t)(sign | 0x7C00u);
        return (uint16_t)(sign | 0x7E00u | ((abs >> 13) & 0x03FFu));
    }
    if (abs >= 0x477FF000u) /* >= 65520: rounds to Inf */
        return (uint16_t)(sign | 0x7C00u);
    if (abs >= 0x38800000u) {                 /* normal binary16 range: rebias and round the 13 dropped bits */
        uint32_t rebased = abs - 0x38000000u; /* exponent bias 127 -> 15 */
        uint32_t half = rebased >> 13;
        uint32_t rest = rebased & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
            half++; /* may carry into the exponent: still correct, up to Inf */
        return (uint16_t)(sign | half);
    }
    if (abs < 0x33000000u) /* below half the smallest subnormal (2^-25): rounds to zero */
        return sign;
    /* subnormal result: shift the full significand into place and round */
    uint32_t exponent = abs >> 23;
    uint32_t significand = (abs & 0x007FFFFFu) | 0x00800000u;
    uint32_t shift = 126u - exponent; /* 14 .. 24 */
    uint32_t half = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t midpoint = 1u << (shift - 1u);
    if (rest > midpoint || (rest == midpoint && (half & 1u)))
        half++;
    return (uint16_t)(sign | half);
}

float cvf_f16_to_f32(uint16_t bits)
{
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1Fu;
    uint32_t mantissa = bits & 0x03FFu;
    if (exponent == 0x1Fu) /* Inf / NaN */
        return f32_from_bits(sign | 0x7F800000u | (mantissa << 13));
    if (exponent != 0)
        return f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0)
        return f32_from_bits(sign);
    /* subnormal: normalise */
    uint32_t e = 113u;
    while (!(mantissa & 0x0400u)) {
        mantissa <<= 1;
        e--;
    }
    return f32_from_bits(sign | (e << 23) | ((mantissa & 0x03FFu) << 13));
}

uint16_t cvf_f32_to_bf16(float value)
{
    uint32_t x = f32_bits(value);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: truncate, keep it a (quiet) NaN */
        return (uint16_t)((x >> 16) | 0x0040u);
    uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

float cvf_bf16_to_f32(uint16_t bits)
{
    return f32_from_bits((uint32_t)bits << 16);
}

/*
 * Rounds a double to binary32 "to odd": exact values stay, inexact ones become the neighbour
 * (of the two binary32 values around value) whose last significand bit is 1. binary32 keeps
 * more than two bits beyond a 16-bit format's significand, so rounding this result to nearest
 * even gives the correctly rounded 16-bit value: no double rounding.
 */
static float round_to_odd_f32(double value)
{
    float nearest = (float)value;
    if (isnan(value) || (double)nearest == value)
        return nearest;
    float other = nextafterf(nearest, value > (double)nearest ? INFINITY : -INFINITY);
    return (f32_bits(nearest) & 1u) ? nearest : other;
}

uint16_t cvf_f64_to_f16(double value)
{
    return cvf_f32_to_f16(round_to_odd_f32(value));
}

uint16_t cvf_f64_to_bf16(double value)
{
    return cvf_f32_to_bf16(round_to_odd_f32(value));
}

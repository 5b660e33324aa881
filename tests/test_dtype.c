/*
 * The binary16 / bfloat16 conversions of cvfuse.h, checked against an independent model written
 * here: 16-bit values are decoded with ldexp, and rounding a binary32 value is done by a binary
 * search over the (monotonic) positive bit patterns followed by an exact comparison with the
 * midpoint of the two neighbours, ties going to the even pattern. Covers every 16-bit pattern,
 * every tie, overflow, subnormals, signed zeros, NaN payloads and a few million random binary32
 * patterns. Also checks the dtype names/sizes and the harness's double -> 16-bit rounding.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "support.h"

/* Mismatches printed per category before only counting. */
#define MAX_EXAMPLES 5

/* Number of random binary32 patterns checked per 16-bit format. */
#define RANDOM_PATTERNS 3000000

/* Description of one 16-bit format, for the independent model. */
typedef struct format16 {
    const char *name;
    int mantissa_bits; /* stored significand bits: 10 (f16), 7 (bf16) */
    int exponent_bits; /* 5 (f16), 8 (bf16) */
    uint16_t (*from_f32)(float);
    float (*to_f32)(uint16_t);
} format16;

static const format16 f16_format = {"f16", 10, 5, cvf_f32_to_f16, cvf_f16_to_f32};
static const format16 bf16_format = {"bf16", 7, 8, cvf_f32_to_bf16, cvf_bf16_to_f32};

/* Returns the bits of a binary32 value. */
static uint32_t bits_of(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* Returns the binary32 value with the given bits. */
static float float_of(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Returns the exponent field's all-ones value (Inf/NaN) of fmt. */
static unsigned exponent_max(const format16 *fmt)
{
    return (1u << fmt->exponent_bits) - 1u;
}

/* Returns the bits of +Inf in fmt. */
static uint16_t inf_bits(const format16 *fmt)
{
    return (uint16_t)(exponent_max(fmt) << fmt->mantissa_bits);
}

/* Returns whether bits is a NaN in fmt. */
static bool is_nan16(const format16 *fmt, uint16_t bits)
{
    return (bits & 0x7FFFu) > inf_bits(fmt);
}

/* Returns whether a NaN's quiet bit (the top stored significand bit) is set. */
static bool is_quiet16(const format16 *fmt, uint16_t bits)
{
    return (bits >> (fmt->mantissa_bits - 1)) & 1u;
}

/* Returns the largest finite positive pattern of fmt. */
static uint16_t max_finite16(const format16 *fmt)
{
    return (uint16_t)(inf_bits(fmt) - 1u);
}

/* Decodes a finite non-negative pattern of fmt with ldexp: (2^p + m) 2^(e - bias - p) for
 * normal numbers, m 2^(1 - bias - p) for subnormals. Also decodes the pattern just above the
 * largest finite one as the value it would have with an unbounded exponent (the overflow
 * threshold needs it). */
static double decode_positive(const format16 *fmt, unsigned bits)
{
    int p = fmt->mantissa_bits;
    int bias = (1 << (fmt->exponent_bits - 1)) - 1;
    unsigned e = bits >> p, m = bits & ((1u << p) - 1u);
    if (e == 0)
        return ldexp((double)m, 1 - bias - p);
    return ldexp((double)((1u << p) + m), (int)e - bias - p);
}

/* Decodes any non-NaN pattern of fmt (infinities included) as a double. */
static double decode16(const format16 *fmt, uint16_t bits)
{
    double magnitude = (bits & 0x7FFFu) == inf_bits(fmt) ? INFINITY : decode_positive(fmt, bits & 0x7FFFu);
    return (bits & 0x8000u) ? -magnitude : magnitude;
}

/* The independent rounding of a non-NaN binary32 value to fmt, to nearest, ties to even. */
static uint16_t model_round(const format16 *fmt, float value)
{
    uint16_t sign = signbit(value) ? 0x8000u : 0u;
    double a = fabs((double)value);
    unsigned top = max_finite16(fmt);
    if (isinf(a) || a >= decode_positive(fmt, top + 1u))
        return (uint16_t)(sign | inf_bits(fmt));
    unsigned lo = 0, hi = top; /* largest pattern whose value is <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1u) / 2u;
        if (decode_positive(fmt, mid) <= a)
            lo = mid;
        else
            hi = mid - 1u;
    }
    double below = decode_positive(fmt, lo), above = decode_positive(fmt, lo + 1u);
    double midpoint = (below + above) / 2.0; /* exact: one bit more than the format */
    unsigned chosen = a < midpoint ? lo : a > midpoint ? lo + 1u : ((lo & 1u) ? lo + 1u : lo);
    return (uint16_t)(sign | chosen);
}

/* Counts one mismatch of a category and prints the first few. */
static void note_mismatch(int64_t *count, const char *what, uint32_t input, unsigned got, unsigned want)
{
    if (++*count <= MAX_EXAMPLES)
        fprintf(stderr, "  %s: input %#x: got %#x, expected %#x\n", what, (unsigned)input, got, want);
}

/* Checks the conversion of one binary32 value: NaN must stay NaN with its sign, quieted; any
 * other value must give the model's bits. Returns false (and counts) on a mismatch. */
static bool check_from_f32(const format16 *fmt, uint32_t input, int64_t *mismatches, const char *what)
{
    float value = float_of(input);
    uint16_t got = fmt->from_f32(value);
    if (isnan(value)) {
        bool ok = is_nan16(fmt, got) && ((got >> 15) == (input >> 31)) && is_quiet16(fmt, got);
        if (!ok)
            note_mismatch(mismatches, what, input, got, (unsigned)((input >> 16) & 0x8000u) | inf_bits(fmt) | 1u);
        return ok;
    }
    uint16_t want = model_round(fmt, value);
    if (got != want)
        note_mismatch(mismatches, what, input, got, want);
    return got == want;
}

/* Every 16-bit pattern: the binary32 value equals the ldexp decoding (NaN stays NaN, sign kept),
 * and converting back gives the same pattern (a NaN gives a NaN of the same sign). */
static void test_all_patterns_round_trip(const format16 *fmt)
{
    int64_t decode_errors = 0, trip_errors = 0;
    for (uint32_t p = 0; p <= 0xFFFFu; p++) {
        uint16_t bits = (uint16_t)p;
        float value = fmt->to_f32(bits);
        uint16_t back = fmt->from_f32(value);
        if (is_nan16(fmt, bits)) {
            if (!isnan(value) || (bits_of(value) >> 31) != (p >> 15u))
                note_mismatch(&decode_errors, "to_f32 of a NaN (binary32 bits)", p, bits_of(value), p);
            if (!is_nan16(fmt, back) || (back & 0x8000u) != (p & 0x8000u))
                note_mismatch(&trip_errors, "NaN round trip", p, back, p);
            continue;
        }
        double want = decode16(fmt, bits);
        if ((double)value != want || !signbit(value) != !signbit(want))
            note_mismatch(&decode_errors, "to_f32 (binary32 bits; expected: the pattern)", p, bits_of(value), p);
        if (back != bits)
            note_mismatch(&trip_errors, "round trip", p, back, p);
    }
    CHECK(decode_errors == 0, "%s -> f32: %lld of 65536 patterns decoded wrongly", fmt->name, (long long)decode_errors);
    CHECK(trip_errors == 0, "%s -> f32 -> %s: %lld of 65536 patterns changed", fmt->name, fmt->name,
          (long long)trip_errors);
}

/* Every tie: the binary32 midpoint of two neighbouring finite patterns (of either sign, the top
 * one including the overflow threshold) rounds to the even one; one binary32 ulp below and above
 * the midpoint round to the nearer neighbour. */
static void test_all_ties(const format16 *fmt)
{
    int64_t tie_errors = 0, near_errors = 0, inexact = 0;
    for (unsigned p = 0; p <= max_finite16(fmt); p++) {
        double midpoint = (decode_positive(fmt, p) + decode_positive(fmt, p + 1u)) / 2.0;
        float mid = (float)midpoint;
        if ((double)mid != midpoint) {
            inexact++;
            continue;
        }
        for (uint32_t sign = 0; sign <= 1; sign++) {
            uint32_t s = sign << 31;
            uint32_t m = bits_of(mid) | s;
            uint16_t s16 = (uint16_t)(sign << 15);
            uint16_t even = (uint16_t)(s16 | ((p & 1u) ? p + 1u : p));
            uint16_t got = fmt->from_f32(float_of(m));
            if (got != even)
                note_mismatch(&tie_errors, "tie", m, got, even);
            got = fmt->from_f32(float_of(m - 1u)); /* magnitude one ulp below the tie */
            if (got != (uint16_t)(s16 | p))
                note_mismatch(&near_errors, "below tie", m - 1u, got, (unsigned)(s16 | p));
            got = fmt->from_f32(float_of(m + 1u)); /* one ulp above */
            if (got != (uint16_t)(s16 | (p + 1u)))
                note_mismatch(&near_errors, "above tie", m + 1u, got, (unsigned)(s16 | (p + 1u)));
        }
    }
    CHECK(inexact == 0, "%s: %lld midpoints not representable in binary32 (model bug)", fmt->name, (long long)inexact);
    CHECK(tie_errors == 0, "%s: %lld exact ties not rounded to even", fmt->name, (long long)tie_errors);
    CHECK(near_errors == 0, "%s: %lld values next to a tie rounded to the farther neighbour", fmt->name,
          (long long)near_errors);
}

/* A few million random binary32 patterns (all classes: NaN, Inf, subnormal, normal) against the
 * model. */
static void test_random_patterns(const format16 *fmt, uint64_t seed)
{
    cvft_rng rng = cvft_rng_make(seed);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < RANDOM_PATTERNS; i++) {
        uint32_t input = (uint32_t)(cvft_rng_next(&rng) >> 32);
        check_from_f32(fmt, input, &mismatches, "random");
    }
    CHECK(mismatches == 0, "%s: %lld of %d random binary32 patterns rounded differently from the model", fmt->name,
          (long long)mismatches, RANDOM_PATTERNS);
}

/* Every binary32 pattern near the subnormal range of fmt (small exponents), exhaustively over
 * the top significand bits, against the model. */
static void test_small_magnitudes(const format16 *fmt)
{
    int64_t mismatches = 0;
    /* binary32 exponent fields from a few binades below the smallest subnormal of fmt to two
     * above its smallest normal, significands sampled with a stride that varies the low bits */
    int bias = (1 << (fmt->exponent_bits - 1)) - 1;
    int first = 127 - bias - fmt->mantissa_bits - 3, last = 127 - bias + 2;
    if (first < 0)
        first = 0;
    for (int e = first; e <= last; e++)
        for (uint32_t m = 0; m < (1u << 23); m += 0x101u) {
            uint32_t input = ((uint32_t)e << 23) | m;
            check_from_f32(fmt, input, &mismatches, "small");
            check_from_f32(fmt, input | 0x80000000u, &mismatches, "small negative");
        }
    CHECK(mismatches == 0, "%s: %lld small-magnitude (subnormal range) values rounded differently from the model",
          fmt->name, (long long)mismatches);
}

/* Checks one f32 -> f16 conversion against an expected pattern, by value. */
static void expect_f16(float value, uint16_t want, const char *why)
{
    uint16_t got = cvf_f32_to_f16(value);
    CHECK(got == want, "f32 -> f16 of %.9g (0x%08X), %s: got 0x%04X, expected 0x%04X", (double)value,
          (unsigned)bits_of(value), why, got, want);
}

/* Checks one f32 -> bf16 conversion (input given as bits) against an expected pattern. */
static void expect_bf16(uint32_t input, uint16_t want, const char *why)
{
    uint16_t got = cvf_f32_to_bf16(float_of(input));
    CHECK(got == want, "f32 -> bf16 of 0x%08X, %s: got 0x%04X, expected 0x%04X", (unsigned)input, why, got, want);
}

/* Checks that a NaN input (given as bits) converts to a quiet NaN of the same sign. */
static void expect_nan(const format16 *fmt, uint32_t input)
{
    uint16_t got = fmt->from_f32(float_of(input));
    CHECK(is_nan16(fmt, got) && (got >> 15) == (input >> 31) && is_quiet16(fmt, got),
          "f32 -> %s of NaN 0x%08X: got 0x%04X, expected a quiet NaN with sign %u", fmt->name, (unsigned)input, got,
          (unsigned)(input >> 31));
}

/* Hand-picked f16 cases: the largest finite, the overflow threshold, zeros, subnormals. */
static void test_f16_landmarks(void)
{
    expect_f16(65504.0f, 0x7BFF, "largest finite");
    expect_f16(65519.99f, 0x7BFF, "just below the overflow threshold");
    expect_f16(65520.0f, 0x7C00, "overflow threshold (tie to even: Inf)");
    expect_f16(-65520.0f, 0xFC00, "negative overflow threshold");
    expect_f16(65536.0f, 0x7C00, "overflow");
    expect_f16(1e9f, 0x7C00, "overflow");
    expect_f16(3.4028235e38f, 0x7C00, "FLT_MAX");
    expect_f16(INFINITY, 0x7C00, "+Inf");
    expect_f16(-INFINITY, 0xFC00, "-Inf");
    expect_f16(0.0f, 0x0000, "+0");
    expect_f16(-0.0f, 0x8000, "-0 keeps its sign");
    expect_f16(1.0f, 0x3C00, "one");
    expect_f16(-2.0f, 0xC000, "minus two");
    expect_f16(1.0f + 0x1p-11f, 0x3C00, "tie between 1 and 1+2^-10 goes to even (1)");
    expect_f16(1.0f + 0x3p-11f, 0x3C02, "tie between 1+2^-10 and 1+2^-9 goes to even");
    expect_f16(0x1p-14f, 0x0400, "smallest normal");
    expect_f16(0x1p-24f, 0x0001, "smallest subnormal");
    expect_f16(0x1p-25f, 0x0000, "half the smallest subnormal: tie to even (0)");
    expect_f16(0x1.000002p-25f, 0x0001, "just above half the smallest subnormal");
    expect_f16(0x3p-25f, 0x0002, "tie between subnormals 1 and 2 goes to 2");
    expect_f16(-0x1p-26f, 0x8000, "tiny negative gives -0");
    expect_f16(0x1p-149f, 0x0000, "binary32 subnormal gives +0");
    expect_f16(-0x1p-149f, 0x8000, "negative binary32 subnormal gives -0");
    expect_f16(0x1.ff8p-15f, 0x03FF, "largest subnormal");
    expect_f16(0x1.ffcp-15f, 0x0400, "largest subnormal + half ulp: tie to even, the smallest normal");
    static const uint32_t nans[] = {0x7F800001u, 0xFF800001u, 0x7FC00000u, 0xFFC00000u,
                                    0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F802000u, 0x7FA5A5A5u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
        expect_nan(&f16_format, nans[i]);
}

/* Hand-picked bf16 cases: ties, overflow by rounding, NaNs that a naive rounding turns into Inf
 * or zero. */
static void test_bf16_landmarks(void)
{
    expect_bf16(0x3F800000u, 0x3F80, "one");
    expect_bf16(0x3F808000u, 0x3F80, "tie between 0x3F80 and 0x3F81 goes to even");
    expect_bf16(0x3F818000u, 0x3F82, "tie between 0x3F81 and 0x3F82 goes to even");
    expect_bf16(0x3F808001u, 0x3F81, "just above a tie");
    expect_bf16(0x3F807FFFu, 0x3F80, "just below a tie");
    expect_bf16(0x7F7F7FFFu, 0x7F7F, "largest finite, below the overflow threshold");
    expect_bf16(0x7F7F8000u, 0x7F80, "overflow threshold (tie to even: Inf)");
    expect_bf16(0x7F7FFFFFu, 0x7F80, "FLT_MAX rounds to Inf");
    expect_bf16(0xFF7FFFFFu, 0xFF80, "-FLT_MAX rounds to -Inf");
    expect_bf16(0x7F800000u, 0x7F80, "+Inf");
    expect_bf16(0xFF800000u, 0xFF80, "-Inf");
    expect_bf16(0x00000000u, 0x0000, "+0");
    expect_bf16(0x80000000u, 0x8000, "-0 keeps its sign");
    expect_bf16(0x00008000u, 0x0000, "subnormal tie goes to even (0)");
    expect_bf16(0x00018000u, 0x0002, "subnormal tie goes to even (2)");
    expect_bf16(0x007FFFFFu, 0x0080, "largest binary32 subnormal rounds up to the smallest normal");
    expect_bf16(0x80000001u, 0x8000, "tiny negative gives -0");
    static const uint32_t nans[] = {0x7F800001u, 0xFF800001u, 0x7FC00000u, 0xFFC00000u, 0x7FFFFFFFu,
                                    0xFFFFFFFFu, 0x7F80FFFFu, 0x7FFF8000u, 0x7FA5A5A5u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
        expect_nan(&bf16_format, nans[i]);
}

/* Names and sizes of the dtypes, and the harness's parser. */
static void test_dtype_names(void)
{
    static const struct {
        cvf_dtype dtype;
        const char *name;
        size_t size;
    } all[] = {{CVF_F32, "f32", 4}, {CVF_F16, "f16", 2}, {CVF_BF16, "bf16", 2}, {CVF_F64, "f64", 8}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        cvf_dtype parsed = (cvf_dtype)-1;
        CHECK(cvf_dtype_size(all[i].dtype) == all[i].size, "cvf_dtype_size(%s) = %zu, expected %zu", all[i].name,
              cvf_dtype_size(all[i].dtype), all[i].size);
        CHECK(strcmp(cvf_dtype_name(all[i].dtype), all[i].name) == 0, "cvf_dtype_name(%d) = \"%s\", expected \"%s\"",
              (int)all[i].dtype, cvf_dtype_name(all[i].dtype), all[i].name);
        CHECK(cvft_dtype_parse(all[i].name, &parsed) == 0 && parsed == all[i].dtype, "cvft_dtype_parse(\"%s\")",
              all[i].name);
    }
    cvf_dtype unused;
    CHECK(cvf_dtype_size((cvf_dtype)17) == 0, "cvf_dtype_size of an unknown dtype is not 0");
    CHECK(strcmp(cvf_dtype_name((cvf_dtype)17), "unknown") == 0, "cvf_dtype_name of an unknown dtype");
    CHECK(cvft_dtype_parse("f8", &unused) == -1, "cvft_dtype_parse accepted \"f8\"");
}

/* The harness writes doubles into 16-bit elements with one correct rounding (no double rounding
 * through binary32): 1 + 2^-11 + 2^-40 is just above a f16 tie and must round up, although its
 * nearest binary32 value is the tie itself. */
static void test_harness_rounding(void)
{
    uint16_t h = 0, b = 0;
    cvf_matrix mh = cvf_matrix_row_major(&h, CVF_F16, 1, 1);
    cvf_matrix mb = cvf_matrix_row_major(&b, CVF_BF16, 1, 1);
    cvft_matrix_set(&mh, 0, 0, 1.0 + 0x1p-11 + 0x1p-40);
    CHECK(h == 0x3C01, "harness f16 store of 1 + 2^-11 + 2^-40: got 0x%04X, expected 0x3C01", h);
    cvft_matrix_set(&mh, 0, 0, 1.0 + 0x1p-11);
    CHECK(h == 0x3C00, "harness f16 store of the tie 1 + 2^-11: got 0x%04X, expected 0x3C00", h);
    cvft_matrix_set(&mh, 0, 0, -(1.0 + 0x1p-11 + 0x1p-40));
    CHECK(h == 0xBC01, "harness f16 store of -(1 + 2^-11 + 2^-40): got 0x%04X, expected 0xBC01", h);
    cvft_matrix_set(&mb, 0, 0, 1.0 + 0x1p-8 + 0x1p-40);
    CHECK(b == 0x3F81, "harness bf16 store of 1 + 2^-8 + 2^-40: got 0x%04X, expected 0x3F81", b);
    cvft_matrix_set(&mb, 0, 0, 1.0 + 0x1p-8);
    CHECK(b == 0x3F80, "harness bf16 store of the tie 1 + 2^-8: got 0x%04X, expected 0x3F80", b);
    cvft_matrix_set(&mh, 0, 0, 1e300);
    CHECK(h == 0x7C00, "harness f16 store of 1e300: got 0x%04X, expected Inf", h);
    cvft_matrix_set(&mb, 0, 0, -1e300);
    CHECK(b == 0xFF80, "harness bf16 store of -1e300: got 0x%04X, expected -Inf", b);
    CHECK(cvft_matrix_get(&mh, 0, 0) == INFINITY, "harness f16 read of Inf");
}

/* Returns the 16-bit pattern nearest to value among candidates near guess (ties to the even
 * pattern), decoded with to_f32: an independent statement of "correctly rounded". Finite
 * candidates only; the caller keeps value inside the finite range. */
static uint16_t nearest_pattern(double value, uint16_t guess, float (*to_f32)(uint16_t))
{
    uint16_t best = guess;
    double best_error = INFINITY;
    for (int delta = -2; delta <= 2; delta++) {
        uint16_t candidate = (uint16_t)(guess + delta);
        if ((candidate ^ guess) & 0x8000u) /* stay on the same sign */
            continue;
        double decoded = to_f32(candidate), error = fabs(decoded - value);
        if (!isfinite(decoded))
            continue;
        if (error < best_error || (error == best_error && !(candidate & 1u))) {
            best = candidate;
            best_error = error;
        }
    }
    return best;
}

/* cvf_f64_to_f16 / cvf_f64_to_bf16 round once: checked against nearest_pattern on doubles just
 * off the ties of each format (where rounding through binary32 first goes wrong), and random
 * doubles. */
static void test_f64_rounding(void)
{
    uint64_t state = 0x9E3779B97F4A7C15u;
    long long f16_bad = 0, bf16_bad = 0;
    for (int n = 0; n < 1000000; n++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        uint16_t base = (uint16_t)((state >> 33) % 0x7BFFu); /* a finite f16 below the largest */
        double lo = cvf_f16_to_f32(base), hi = cvf_f16_to_f32((uint16_t)(base + 1));
        double tie = 0.5 * (lo + hi), nudge = (hi - lo) * 0x1p-30 * (double)((state >> 8) % 64);
        double value = (state & 1u) ? tie + nudge : tie - nudge;
        if (cvf_f64_to_f16(value) != nearest_pattern(value, cvf_f32_to_f16((float)value), cvf_f16_to_f32))
            f16_bad++;
        uint16_t bbase = (uint16_t)((state >> 17) & 0x7F7Eu);
        double blo = cvf_bf16_to_f32(bbase), bhi = cvf_bf16_to_f32((uint16_t)(bbase + 1));
        double btie = 0.5 * (blo + bhi), bnudge = (bhi - blo) * 0x1p-40 * (double)((state >> 8) % 64);
        double bvalue = (state & 2u) ? btie + bnudge : btie - bnudge;
        if (cvf_f64_to_bf16(bvalue) != nearest_pattern(bvalue, cvf_f32_to_bf16((float)bvalue), cvf_bf16_to_f32))
            bf16_bad++;
    }
    CHECK(f16_bad == 0, "cvf_f64_to_f16: %lld of 1e6 doubles near ties not correctly rounded", f16_bad);
    CHECK(bf16_bad == 0, "cvf_f64_to_bf16: %lld of 1e6 doubles near ties not correctly rounded", bf16_bad);
    CHECK(cvf_f64_to_f16(NAN) != cvf_f64_to_f16(INFINITY) && (cvf_f64_to_f16(NAN) & 0x7C00u) == 0x7C00u &&
              (cvf_f64_to_f16(NAN) & 0x03FFu) != 0,
          "cvf_f64_to_f16(NaN) is not a NaN");
    CHECK(cvf_f64_to_bf16(-1e300) == 0xFF80u, "cvf_f64_to_bf16(-1e300) is not -Inf");
}

int main(void)
{
    const format16 *formats[] = {&f16_format, &bf16_format};
    for (int i = 0; i < 2; i++) {
        test_all_patterns_round_trip(formats[i]);
        test_all_ties(formats[i]);
        test_small_magnitudes(formats[i]);
        test_random_patterns(formats[i], 0xD7E5u + (uint64_t)i);
    }
    test_f16_landmarks();
    test_bf16_landmarks();
    test_dtype_names();
    test_harness_rounding();
    test_f64_rounding();
    return test_report("test_dtype");
}

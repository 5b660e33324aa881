/*
 * The math and loops shared by the SIMD levels of the vector operations (vec_avx2.c,
 * vec_avx512.c). Not a public header: it is included once by each of those files, after they
 * define, for their vector width VEC_WIDTH:
 *   vf, vi, vmask                          float vector, int32 vector, lane mask
 *   vf_set, vf_add, vf_sub, vf_mul, vf_div, vf_fma (a * b + c), vf_abs, vf_or_sign (|a| with the
 *   sign of b), vf_min, vf_max (the hardware's: the second operand when either is NaN),
 *   vf_round (to nearest integral value), vf_pow2i (2^n for an int vector n in [-126, 127]),
 *   vf_to_vi (of integral values), vf_lt, vf_isnan (lane masks), vf_select (mask ? a : b),
 *   vf_load_n, vf_store_n (count lanes, count in 1..VEC_WIDTH; never touching lanes beyond)
 *   vd (VEC_WIDTH / 2 doubles), vd_set, vd_fma, vd_div, vf_widen_lo / vf_widen_hi (half of the
 *   float lanes, exactly, as doubles), vd_narrow (two halves back to floats, rounded once)
 * Everything here is static inline, so each including file gets its own instruction set.
 */
#ifndef CVF_CPU_VEC_SIMD_H
#define CVF_CPU_VEC_SIMD_H

#include "core/internal.h"

/* ln 2 split for the range reduction: n * LN2_HI is exact for |n| < 2^9. */
#define VEC_LN2_HI 0.693359375f
#define VEC_LN2_LO (-2.12194440e-4f)
#define VEC_LOG2E 1.44269504088896341f

/* e^r - 1 for |r| <= ln 2 / 2: Taylor series to degree 8 (truncation below 2^-30 relative). */
static inline vf vec_expm1_reduced(vf r)
{
    vf q = vf_set(1.0f / 40320.0f);
    q = vf_fma(q, r, vf_set(1.0f / 5040.0f));
    q = vf_fma(q, r, vf_set(1.0f / 720.0f));
    q = vf_fma(q, r, vf_set(1.0f / 120.0f));
    q = vf_fma(q, r, vf_set(1.0f / 24.0f));
    q = vf_fma(q, r, vf_set(1.0f / 6.0f));
    q = vf_fma(q, r, vf_set(0.5f));
    return vf_fma(q, vf_mul(r, r), r);
}

/* Splits finite x (|x| <= 128) as x = n ln 2 + r with n integral and |r| <= ln 2 / 2; returns r. */
static inline vf vec_reduce(vf x, vf *n)
{
    *n = vf_round(vf_mul(x, vf_set(VEC_LOG2E)));
    vf r = vf_fma(*n, vf_set(-VEC_LN2_HI), x);
    return vf_fma(*n, vf_set(-VEC_LN2_LO), r);
}

/* 2^a for a <= 0, NaN staying NaN: a = n + f with n integral and |f| <= 1/2; 2^f by a degree-6
 * polynomial (interpolating at Chebyshev nodes: 2^-27 relative, 1.4 units of 2^-24 after fp32's
 * Horner steps); p 2^n as (p 2^(n + 64)) 2^-64, the first product exact and the second rounding once,
 * into the subnormals too (n >= -151: below that every result rounds to 0). Half the operations
 * of a general e^x: the GELUs' exponentials (exp(-|2u|)) never overflow, and the epilogue's
 * GELU' is bound by its operation count (docs/PERF.md, "GELU in half the operations"). */
static inline vf vec_exp2_nonpositive(vf a)
{
    vf x = vf_max(vf_set(-151.0f), a); /* the second operand when either is NaN: NaN stays */
    vf n = vf_round(x);
    vf f = vf_sub(x, n); /* exact */
    vf p = vf_set(1.546144470e-04f);
    p = vf_fma(p, f, vf_set(1.340042818e-03f));
    p = vf_fma(p, f, vf_set(9.618056679e-03f));
    p = vf_fma(p, f, vf_set(5.550327227e-02f));
    p = vf_fma(p, f, vf_set(2.402265092e-01f));
    p = vf_fma(p, f, vf_set(6.931472067e-01f));
    p = vf_fma(p, f, vf_set(1.0f));
    vf scale = vf_pow2i(vf_to_vi(vf_add(n, vf_set(64.0f)))); /* 2^-87 .. 2^64 */
    return vf_mul(vf_mul(p, scale), vf_set(0x1p-64f));
}

/* -|2u| log2(e) from x and x2 = x^2: |x| (a x^2 + b) with a = -2 log2(e) k c, b = -2 log2(e) k (u
 * has the sign of x), so that e = exp(-|2u|) = 2^result. */
static inline vf vec_gelu_exponent(vf x, vf x2)
{
    const double minus_2_log2e = -2.8853900817779268;
    return vf_mul(vf_abs(x), vf_fma(vf_set((float)(minus_2_log2e * CVF_GELU_K * CVF_GELU_C)), x2,
                                    vf_set((float)(minus_2_log2e * CVF_GELU_K))));
}

/* tanh(x) = sign(x) e / (e + 2) with e = expm1(2|x|): no cancellation anywhere; tiny x gives x. */
static inline vf vec_tanh(vf x)
{
    vf y = vf_min(vf_add(vf_abs(x), vf_abs(x)), vf_set(20.0f)); /* tanh(10) rounds to 1; NaN -> 20 */
    vf n;
    vf p = vec_expm1_reduced(vec_reduce(y, &n));
    vf scale = vf_pow2i(vf_to_vi(n)); /* 2^0 .. 2^29 */
    vf e = vf_fma(scale, p, vf_sub(scale, vf_set(1.0f)));
    vf t = vf_or_sign(vf_div(e, vf_add(e, vf_set(2.0f))), x);
    return vf_select(vf_isnan(x), vf_add(x, x), t);
}

/* gelu_tanh(x) = x sigmoid(2u), from e = exp(-2|u|) <= 1: x / (1 + e) or x e / (1 + e). */
static inline vf vec_gelu(vf x)
{
    vf e = vec_exp2_nonpositive(vec_gelu_exponent(x, vf_mul(x, x)));
    vf num = vf_select(vf_lt(x, vf_set(0.0f)), vf_mul(x, e), x);
    return vf_div(num, vf_add(e, vf_set(1.0f)));
}

/* gelu_tanh'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2), s = sigmoid(2u), from e = exp(-2|u|): with
 * r = 1 / (1 + e), s is r (x >= 0) or e r, and s (1 - s) = e r^2 either way. x is clamped to
 * +-1e10 first: there e = 0, so the limits 1 and 0 come out exactly and x^2 cannot overflow;
 * NaN stays NaN (the clamp keeps it). */
static inline vf vec_gelu_derivative(vf x)
{
    vf xc = vf_max(vf_set(-1e10f), vf_min(vf_set(1e10f), x)); /* second operands: NaN stays */
    vf x2 = vf_mul(xc, xc);
    vf e = vec_exp2_nonpositive(vec_gelu_exponent(xc, x2));
    vf r = vf_div(vf_set(1.0f), vf_add(e, vf_set(1.0f)));
    vf er = vf_mul(e, r);
    vf s = vf_select(vf_lt(xc, vf_set(0.0f)), er, r);
    vf slope = vf_fma(vf_set((float)(6.0 * CVF_GELU_K * CVF_GELU_C)), x2, vf_set((float)(2.0 * CVF_GELU_K)));
    return vf_fma(vf_mul(xc, slope), vf_mul(er, r), s);
}

/*
 * The exact GELU, x Phi(x), and its derivative Phi(x) + x phi(x), in two ranges of a = |x|:
 *  - a < 0.75: Phi(x) = 1/2 + x P(x^2) and gelu_erf'(x) = 1/2 + x D(x^2), degree-5 polynomials
 *    (no cancellation: Phi >= 0.22 there), gelu = x Phi;
 *  - a >= 0.75 (clamped at 15): Phi(-a) = E(a) M(a) with E(a) = exp(-a^2 / 2) and
 *    M(a) = Phi(-a) exp(a^2 / 2), 1 / sqrt(2 pi) times Mills' ratio (Abramowitz & Stegun ch. 26): smooth,
 *    ~ 1 / (a sqrt(2 pi)) for large a, and free of the exponential, so Phi(-a) keeps its relative
 *    accuracy however small, while Phi(a) = 1 - E M has no cancellation (E M <= Phi(-0.75) =
 *    0.23). Then gelu(-a) = -(a M) E, gelu(a) = a (1 - E M), and gelu'(x) = s or 1 - s (x < 0 or
 *    not) with s = E (M - a / sqrt(2 pi)).
 * M is a rational function P5(a) / Q6(a) with positive coefficients (the form of W. J. Cody's erfc
 * approximations, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969)
 * 631-637; the coefficients are not his), evaluated in double and rounded once: in fp32 its
 * Horner steps and division alone cost up to ~6 ulp. E is exp of the exact a^2 (a^2 = hi + lo, lo
 * from an fma), as exp(-hi / 2) (1 - lo / 2), and scaled by 2^64 until the end so that it is never
 * subnormal (an fp32 a^2 alone would be off by up to ~100 ulp relative in E at a = 14). Beyond
 * a = 15 every lower tail is 0 in fp32 (Phi(-15) ~ 4e-51) and every upper one exactly 1; the clamp
 * keeps E and M finite.
 * P, D and M were fitted for this library (not copied from any table): relative least squares on
 * Chebyshev nodes, reweighted towards minimax (Lawson; for M the linearised Loeb iteration),
 * against mpmath's ncdf / npdf / erfc at 40 digits. Relative errors of the coefficients as written:
 * P 2.8e-8 and D 3.8e-8 on [0, 0.75] (fp32), M 8.1e-12 on [0.75, 15] (double).
 */
#define VEC_ERF_CORE 0.75f
#define VEC_ERF_AMAX 15.0f
#define VEC_INV_SQRT_2PI 0.398942280401432678f

/* P(w) = (Phi(x) - 1/2) / x with w = x^2, for |x| < 0.75. */
static inline vf vec_phi_core(vf w)
{
    vf p = vf_set(-8.38858705e-06f);
    p = vf_fma(p, w, vf_set(0.000114778617f));
    p = vf_fma(p, w, vf_set(-0.00118713814f));
    p = vf_fma(p, w, vf_set(0.00997353159f));
    p = vf_fma(p, w, vf_set(-0.066490382f));
    return vf_fma(p, w, vf_set(0.398942292f));
}

/* D(w) = (gelu_erf'(x) - 1/2) / x with w = x^2, for |x| < 0.75. */
static inline vf vec_dgelu_erf_core(vf w)
{
    vf d = vf_set(-9.8636192e-05f);
    d = vf_fma(d, w, vf_set(0.00114520406f));
    d = vf_fma(d, w, vf_set(-0.00949596614f));
    d = vf_fma(d, w, vf_set(0.0598409884f));
    d = vf_fma(d, w, vf_set(-0.265961498f));
    return vf_fma(d, w, vf_set(0.797884583f));
}

/* M(a) = Phi(-a) exp(a^2 / 2) = P5(a) / Q6(a) in double lanes, for a in [0.75, 15]. */
static inline vd vec_mills_f64(vd a)
{
    vd p = vd_set(0.0012482752807807143);
    p = vd_fma(p, a, vd_set(0.014657264511409623));
    p = vd_fma(p, a, vd_set(0.083728641704176501));
    p = vd_fma(p, a, vd_set(0.27814586922390999));
    p = vd_fma(p, a, vd_set(0.53649235360706138));
    p = vd_fma(p, a, vd_set(0.49999962898473044));
    vd q = vd_set(0.0031289630173600889);
    q = vd_fma(q, a, vd_set(0.036740245175899536));
    q = vd_fma(q, a, vd_set(0.21300786754290724));
    q = vd_fma(q, a, vd_set(0.73390150885826944));
    q = vd_fma(q, a, vd_set(1.5490451715222346));
    q = vd_fma(q, a, vd_set(1.8708635620032801));
    q = vd_fma(q, a, vd_set(1.0));
    return vd_div(p, q);
}

/* M(a) for a in [0.75, 15], rounded once to float. */
static inline vf vec_mills(vf a)
{
    return vd_narrow(vec_mills_f64(vf_widen_lo(a)), vec_mills_f64(vf_widen_hi(a)));
}

/* 2^64 E(a) = 2^64 exp(-a^2 / 2) for a in [0, 15] (>= 2^-98: never subnormal), from the exact square
 * a^2 = hi + lo. */
static inline vf vec_exp_half_square_2p64(vf a)
{
    vf hi = vf_mul(a, a);
    vf lo = vf_fma(a, a, vf_sub(vf_set(0.0f), hi));
    vf n;
    vf p = vec_expm1_reduced(vec_reduce(vf_mul(hi, vf_set(-0.5f)), &n)); /* n in [-163, 0] */
    vf e = vf_mul(vf_add(p, vf_set(1.0f)), vf_pow2i(vf_to_vi(vf_add(n, vf_set(64.0f)))));
    return vf_fma(e, vf_mul(lo, vf_set(-0.5f)), e);
}

/* gelu_erf(x) = x Phi(x); gelu_erf(+Inf) = +Inf, gelu_erf(-Inf) = -0, NaN stays NaN. */
static inline vf vec_gelu_erf(vf x)
{
    const vf two_m64 = vf_set(5.42101086e-20f);     /* 2^-64 */
    vf a = vf_min(vf_abs(x), vf_set(VEC_ERF_AMAX)); /* NaN becomes 15 here, restored below */
    vf m = vec_mills(vf_max(a, vf_set(VEC_ERF_CORE)));
    vf e = vec_exp_half_square_2p64(a);
    vf lower = vf_or_sign(vf_mul(vf_mul(vf_mul(a, m), e), two_m64), x);
    vf upper = vf_mul(x, vf_sub(vf_set(1.0f), vf_mul(vf_mul(e, m), two_m64)));
    vf tail = vf_select(vf_lt(x, vf_set(0.0f)), lower, upper);
    vf core = vf_mul(x, vf_fma(x, vec_phi_core(vf_mul(x, x)), vf_set(0.5f))); /* keeps -0 */
    vf y = vf_select(vf_lt(a, vf_set(VEC_ERF_CORE)), core, tail);
    return vf_select(vf_isnan(x), vf_add(x, x), y);
}

/* gelu_erf'(x) = Phi(x) + x phi(x); 1 at +Inf, 0 at -Inf, NaN stays NaN. */
static inline vf vec_gelu_erf_derivative(vf x)
{
    vf a = vf_min(vf_abs(x), vf_set(VEC_ERF_AMAX));
    vf m = vec_mills(vf_max(a, vf_set(VEC_ERF_CORE)));
    vf e = vec_exp_half_square_2p64(a);
    vf s = vf_mul(vf_mul(e, vf_fma(a, vf_set(-VEC_INV_SQRT_2PI), m)), vf_set(5.42101086e-20f));
    vf tail = vf_select(vf_lt(x, vf_set(0.0f)), s, vf_sub(vf_set(1.0f), s));
    vf core = vf_fma(x, vec_dgelu_erf_core(vf_mul(x, x)), vf_set(0.5f));
    vf d = vf_select(vf_lt(a, vf_set(VEC_ERF_CORE)), core, tail);
    return vf_select(vf_isnan(x), vf_add(x, x), d);
}

/* Lanes in the block of x starting at i: VEC_WIDTH, or what is left of n. */
static inline int vec_lanes(int64_t i, int64_t n)
{
    return n - i < VEC_WIDTH ? (int)(n - i) : VEC_WIDTH;
}

/* x = relu(x) as x < 0 ? 0 : x: the hardware max with x second keeps NaN and -0. */
static void vec_relu_run(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf_store_n(x + i, vf_max(vf_set(0.0f), vf_load_n(x + i, m)), m);
    }
}

/* x = gelu(x). */
static void vec_gelu_run(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf_store_n(x + i, vec_gelu(vf_load_n(x + i, m)), m);
    }
}

/* x *= gelu'(aux). */
static void vec_dgelu_run(float *x, const float *aux, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf d = vec_gelu_derivative(vf_load_n(aux + i, m));
        vf_store_n(x + i, vf_mul(vf_load_n(x + i, m), d), m);
    }
}

/* x = gelu_erf(x). */
static void vec_gelu_erf_run(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf_store_n(x + i, vec_gelu_erf(vf_load_n(x + i, m)), m);
    }
}

/* x *= gelu_erf'(aux). */
static void vec_dgelu_erf_run(float *x, const float *aux, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf d = vec_gelu_erf_derivative(vf_load_n(aux + i, m));
        vf_store_n(x + i, vf_mul(vf_load_n(x + i, m), d), m);
    }
}

/* The activations; see vec.h. */
static void vec_activate(cvf_activation activation, float *x, const float *aux, int64_t n)
{
    switch (activation) {
    case CVF_ACTIVATION_NONE: break;
    case CVF_ACTIVATION_RELU: vec_relu_run(x, n); break;
    case CVF_ACTIVATION_GELU_TANH: vec_gelu_run(x, n); break;
    case CVF_ACTIVATION_DGELU_TANH: vec_dgelu_run(x, aux, n); break;
    case CVF_ACTIVATION_GELU_ERF: vec_gelu_erf_run(x, n); break;
    case CVF_ACTIVATION_DGELU_ERF: vec_dgelu_erf_run(x, aux, n); break;
    }
}

/* x[i] += bias[i]. */
static void vec_add(float *x, const float *bias, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf_store_n(x + i, vf_add(vf_load_n(x + i, m), vf_load_n(bias + i, m)), m);
    }
}

/* sums[i] += x[i]. */
static void vec_accumulate(float *sums, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf_store_n(sums + i, vf_add(vf_load_n(sums + i, m), vf_load_n(x + i, m)), m);
    }
}

/* y[i] = tanh(x[i]). */
static void vec_tanh_run(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += VEC_WIDTH) {
        int m = vec_lanes(i, n);
        vf_store_n(y + i, vec_tanh(vf_load_n(x + i, m)), m);
    }
}

#endif /* CVF_CPU_VEC_SIMD_H */

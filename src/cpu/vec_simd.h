/*
 * The math and loops shared by the SIMD levels of the vector operations (vec_avx2.c,
 * vec_avx512.c). Not a public header: it is included once by each of those files, after they
 * define, for their vector width VEC_WIDTH:
 *   vf, vi, vmask                          float vector, int32 vector, lane mask
 *   vf_set, vf_add, vf_sub, vf_mul, vf_div, vf_fma (a * b + c), vf_abs, vf_or_sign (|a| with the
 *   sign of b), vf_min, vf_max (the hardware's: the second operand when either is NaN),
 *   vf_round (to nearest integral value), vf_pow2i (2^n for an int vector n in [-126, 127]),
 *   vf_to_vi (of integral values), vi_halve (arithmetic n >> 1), vi_sub,
 *   vf_lt, vf_ge, vf_gt, vf_isnan (lane masks), vf_select (mask ? a : b),
 *   vf_load_n, vf_store_n (count lanes, count in 1..VEC_WIDTH; never touching lanes beyond)
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

/* e^x for every x: overflow to +Inf, gradual underflow to 0, NaN stays NaN. */
static inline vf vec_exp(vf x)
{
    vf xc = vf_min(vf_max(x, vf_set(-104.0f)), vf_set(89.0f)); /* NaN becomes 89 here, restored below */
    vf n;
    vf p = vec_expm1_reduced(vec_reduce(xc, &n));
    vi ni = vf_to_vi(n); /* -150 .. 129: two factors keep 2^n normal, the last product rounds once */
    vi n1 = vi_halve(ni);
    vf y = vf_mul(vf_mul(vf_add(p, vf_set(1.0f)), vf_pow2i(n1)), vf_pow2i(vi_sub(ni, n1)));
    return vf_select(vf_isnan(x), x, y);
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

/* 2u = 2 k x (1 + c x^2), the sigmoid's argument in GELU. */
static inline vf vec_gelu_2u(vf x)
{
    vf inner = vf_fma(vf_set((float)CVF_GELU_C), vf_mul(x, x), vf_set(1.0f));
    return vf_mul(vf_mul(vf_set((float)(2.0 * CVF_GELU_K)), x), inner);
}

/* gelu_tanh(x) = x sigmoid(2u), from e = exp(-2|u|) <= 1: x / (1 + e) or x e / (1 + e). */
static inline vf vec_gelu(vf x)
{
    vf t = vec_gelu_2u(x);
    vf e = vec_exp(vf_sub(vf_set(0.0f), vf_abs(t)));
    vf num = vf_select(vf_ge(t, vf_set(0.0f)), x, vf_mul(x, e));
    return vf_div(num, vf_add(e, vf_set(1.0f)));
}

/* gelu_tanh'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2), s and 1 - s from e = exp(-2|u|); beyond
 * |x| = 1e10 its limit (1 for x > 0, else 0); NaN stays NaN. */
static inline vf vec_gelu_derivative(vf x)
{
    vf t = vec_gelu_2u(x);
    vf e = vec_exp(vf_sub(vf_set(0.0f), vf_abs(t)));
    vf r = vf_div(vf_set(1.0f), vf_add(e, vf_set(1.0f)));
    vf er = vf_mul(e, r);
    vmask positive = vf_ge(t, vf_set(0.0f));
    vf s = vf_select(positive, r, er);
    vf one_minus_s = vf_select(positive, er, r);
    vf slope = vf_mul(vf_set((float)(2.0 * CVF_GELU_K)),
                      vf_fma(vf_set((float)(3.0 * CVF_GELU_C)), vf_mul(x, x), vf_set(1.0f)));
    vf d = vf_fma(vf_mul(vf_mul(x, s), one_minus_s), slope, s);
    vf limit = vf_select(vf_gt(x, vf_set(0.0f)), vf_set(1.0f), vf_set(0.0f));
    return vf_select(vf_gt(vf_abs(x), vf_set(1e10f)), limit, d);
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

/* The activations; see vec.h. */
static void vec_activate(cvf_activation activation, float *x, const float *aux, int64_t n)
{
    switch (activation) {
    case CVF_ACTIVATION_NONE: break;
    case CVF_ACTIVATION_RELU: vec_relu_run(x, n); break;
    case CVF_ACTIVATION_GELU_TANH: vec_gelu_run(x, n); break;
    case CVF_ACTIVATION_DGELU_TANH: vec_dgelu_run(x, aux, n); break;
    case CVF_ACTIVATION_GELU_ERF: cvf_scalar_gelu_erf_run(x, n); break;
    case CVF_ACTIVATION_DGELU_ERF: cvf_scalar_dgelu_erf_run(x, aux, n); break;
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

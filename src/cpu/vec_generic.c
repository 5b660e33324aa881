/* The portable level of the vector operations (see vec.h): plain C loops over libm. */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "cpu/vec.h"

/* dst[i] = (float)src[i]: the scalar conversions of cvfuse.h. */
static void generic_load(const void *src, cvf_dtype dtype, int64_t count, float *dst)
{
    const uint16_t *half = (const uint16_t *)src;
    switch (dtype) {
    case CVF_F32:
        if (count > 0)
            memcpy(dst, src, (size_t)count * sizeof(float));
        break;
    case CVF_F16:
        for (int64_t i = 0; i < count; i++)
            dst[i] = cvf_f16_to_f32(half[i]);
        break;
    case CVF_BF16:
        for (int64_t i = 0; i < count; i++)
            dst[i] = cvf_bf16_to_f32(half[i]);
        break;
    case CVF_F64: break; /* not a CPU storage dtype */
    }
}

/* dst[i] = src[i] rounded to dtype: the scalar conversions of cvfuse.h. */
static void generic_store(void *dst, cvf_dtype dtype, int64_t count, const float *src)
{
    uint16_t *half = (uint16_t *)dst;
    switch (dtype) {
    case CVF_F32:
        if (count > 0)
            memcpy(dst, src, (size_t)count * sizeof(float));
        break;
    case CVF_F16:
        for (int64_t i = 0; i < count; i++)
            half[i] = cvf_f32_to_f16(src[i]);
        break;
    case CVF_BF16:
        for (int64_t i = 0; i < count; i++)
            half[i] = cvf_f32_to_bf16(src[i]);
        break;
    case CVF_F64: break;
    }
}

/* 2u = 2 k (x + c x^3), the argument of the sigmoid, in the vector levels' order of operations. */
static float gelu_2u(float x)
{
    const float two_k = (float)(2.0 * CVF_GELU_K), c = (float)CVF_GELU_C;
    return (two_k * x) * (1.0f + c * (x * x));
}

/* gelu_tanh(x) = x sigmoid(2u), with e = exp(-2|u|) so that no tail cancels or overflows. */
static float generic_gelu(float x)
{
    float t = gelu_2u(x);
    float e = expf(-fabsf(t));
    return (t >= 0.0f ? x : x * e) / (1.0f + e);
}

/* gelu_tanh'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2); beyond |x| = 1e10 its limit, 1 or 0. */
static float generic_gelu_derivative(float x)
{
    const float two_k = (float)(2.0 * CVF_GELU_K), three_c = (float)(3.0 * CVF_GELU_C);
    if (fabsf(x) > 1e10f)
        return x > 0.0f ? 1.0f : 0.0f;
    float t = gelu_2u(x);
    float e = expf(-fabsf(t));
    float r = 1.0f / (1.0f + e);
    float s = t >= 0.0f ? r : e * r;
    float one_minus_s = t >= 0.0f ? e * r : r;
    return s + (x * s * one_minus_s) * (two_k * (1.0f + three_c * (x * x)));
}

/* gelu_erf(x) = x Phi(x) = 0.5 x erfc(-x / sqrt 2), in double and rounded once: the double
 * argument's rounding moves erfc by at most 2 z^2 2^-53 relative (z = x / sqrt 2 <= 10 where the
 * result is not 0), so the fp32 result is within one rounding of the true value. gelu(-Inf) is
 * -0, gelu(+Inf) = +Inf, NaN stays NaN. */
static float generic_gelu_erf(float x)
{
    if (x == -INFINITY)
        return -0.0f;
    return (float)((double)x * 0.5 * erfc((double)x * -0.70710678118654752));
}

/* gelu_erf'(x) = Phi(x) + x phi(x), in double and rounded once; beyond |x| = 40 (phi(40) ~ 1e-348
 * underflows in double) its limit, 1 for x > 0, else 0. NaN stays NaN. */
static float generic_gelu_erf_derivative(float x)
{
    double z = (double)x;
    if (fabs(z) > 40.0)
        return z > 0.0 ? 1.0f : 0.0f;
    return (float)(0.5 * erfc(z * -0.70710678118654752) + z * exp(-0.5 * z * z) * 0.39894228040143268);
}

/* The activations; see vec.h. */
static void generic_activate(cvf_activation activation, float *x, const float *aux, int64_t n)
{
    switch (activation) {
    case CVF_ACTIVATION_NONE: break;
    case CVF_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case CVF_ACTIVATION_GELU_TANH:
        for (int64_t i = 0; i < n; i++)
            x[i] = generic_gelu(x[i]);
        break;
    case CVF_ACTIVATION_DGELU_TANH:
        for (int64_t i = 0; i < n; i++)
            x[i] *= generic_gelu_derivative(aux[i]);
        break;
    case CVF_ACTIVATION_GELU_ERF:
        for (int64_t i = 0; i < n; i++)
            x[i] = generic_gelu_erf(x[i]);
        break;
    case CVF_ACTIVATION_DGELU_ERF:
        for (int64_t i = 0; i < n; i++)
            x[i] *= generic_gelu_erf_derivative(aux[i]);
        break;
    }
}

/* x[i] += bias[i]. */
static void generic_add(float *x, const float *bias, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += bias[i];
}

/* sums[i] += x[i]. */
static void generic_accumulate(float *sums, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        sums[i] += x[i];
}

/* y[i] = tanhf(x[i]). */
static void generic_tanh(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
}

#define VEC_LOAD generic_load
#define VEC_STORE generic_store
#define VEC_ACTIVATE generic_activate
#define VEC_ADD generic_add
#define VEC_ACCUMULATE generic_accumulate
#include "cpu/vec_finish.h"

static const cvf_cpu_vec_ops generic_ops = {
    "generic",   generic_load,       generic_store, generic_activate,
    generic_add, generic_accumulate, generic_tanh,  vec_finish_tile,
};

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_generic(void)
{
    return &generic_ops;
}

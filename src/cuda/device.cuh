/*
 * Device-side helpers shared by the CUDA kernels: strided operands of any dtype, the epilogue's
 * arithmetic (the same functions as the CPU's gemm.c), and the kernel-argument structs.
 */
#ifndef CVF_CUDA_DEVICE_CUH
#define CVF_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/cuda.h"

/* A strided matrix operand as kernels see it (data NULL when absent). */
typedef struct dev_mat {
    void *data;
    int32_t dtype; /* cvf_dtype */
    int64_t rs, cs;
} dev_mat;

/* A strided vector operand (data NULL when absent). */
typedef struct dev_vec {
    void *data;
    int32_t dtype;
    int64_t stride;
} dev_vec;

/* The epilogue of one GEMM, as kernels see it. */
typedef struct dev_epilogue {
    int32_t activation; /* cvf_activation */
    dev_vec bias;
    dev_mat aux_in, aux_out;
    float *partials; /* bias-gradient partial sums: [slab][n], one row per slab of rows, or NULL */
} dev_epilogue;

static inline dev_mat dev_mat_of(const cvf_matrix *m)
{
    dev_mat d;
    d.data = m ? m->data : NULL;
    d.dtype = m ? (int32_t)m->dtype : 0;
    d.rs = m ? m->row_stride : 0;
    d.cs = m ? m->col_stride : 0;
    return d;
}

static inline dev_vec dev_vec_of(const cvf_vector *v)
{
    dev_vec d;
    d.data = v ? v->data : NULL;
    d.dtype = v ? (int32_t)v->dtype : 0;
    d.stride = v ? v->stride : 0;
    return d;
}

/* Loads element index of an array of dtype as fp32. */
__device__ __forceinline__ float dev_load(const void *data, int32_t dtype, int64_t index)
{
    if (dtype == CVF_F32)
        return ((const float *)data)[index];
    unsigned short bits = ((const unsigned short *)data)[index];
    if (dtype == CVF_F16)
        return __half2float(__ushort_as_half(bits));
    return __uint_as_float((unsigned)bits << 16);
}

/* Rounds an fp32 value to a 16-bit dtype (nearest even), returning the bits. */
__device__ __forceinline__ unsigned short dev_round16(float value, int32_t dtype)
{
    if (dtype == CVF_F16)
        return __half_as_ushort(__float2half_rn(value));
    return __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

/* Stores value, rounded once, as element index of an array of dtype. */
__device__ __forceinline__ void dev_store(void *data, int32_t dtype, int64_t index, float value)
{
    if (dtype == CVF_F32)
        ((float *)data)[index] = value;
    else
        ((unsigned short *)data)[index] = dev_round16(value, dtype);
}

/* 2^x and 1/x with the hardware's approximations (MUFU: about 2 ulp; subnormal results flush to
 * zero): no range reduction, no slow path, no branch, so the epilogue's elements interleave. */
__device__ __forceinline__ float dev_exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float dev_rcp_approx(float x)
{
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* GELU in the tail-safe sigmoid form of the CPU backend (gemm.c): with u = k (x + c x^3),
 * gelu(x) = x sigmoid(2u), gelu'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2). Both s = sigmoid(2u) and
 * 1 - s come from one exponential t = exp(-2 |u|) in (0, 1]: r = 1 / (1 + t) and t r are s and
 * 1 - s in one order or the other (s = r where u >= 0), so neither tail cancels and no infinity
 * meets a zero. u has the sign of x (k > 0, 1 + c x^2 > 0), so the order is chosen on x. */

/* t = exp(-2 |u|) from x and x2 = x^2: -2 log2(e) |u| = |x| (a x^2 + b), one fma and one multiply
 * (the |x| is the multiply's operand modifier) before the 2^x; the epilogue warps are bound by
 * their instruction count (docs/PERF.md issue 12 part 8). */
__device__ __forceinline__ float dev_gelu_t(float x, float x2)
{
    const double minus_2_log2e = -2.8853900817779268;
    const float a = (float)(minus_2_log2e * CVF_GELU_K * CVF_GELU_C), b = (float)(minus_2_log2e * CVF_GELU_K);
    return dev_exp2_approx(fabsf(x) * fmaf(a, x2, b));
}

__device__ __forceinline__ float dev_gelu(float x)
{
    const float t = dev_gelu_t(x, x * x);
    const float r = dev_rcp_approx(1.0f + t);
    return x * (x >= 0.0f ? r : t * r); /* x s */
}

/* max / min that return NaN when either input is NaN (fmaxf/fminf would drop it). */
__device__ __forceinline__ float dev_clamp_nan(float x, float lo, float hi)
{
    float y;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(x), "f"(lo));
    asm("min.NaN.f32 %0, %0, %1;" : "+f"(y) : "f"(hi));
    return y;
}

/* Branch-free, 15 operations: with r = 1 / (1 + t), s (1 - s) = t r^2 in both orders. x is
 * clamped to +-1e10 first: there s (1 - s) is exactly 0 and the limits 1 and 0 come out, and
 * x^2 cannot overflow into an inf * 0. NaN stays NaN. W values at once, step by step across them
 * (the same operations per value, so the same bits): written value by value, ptxas kept each
 * value's ~15-deep chain of dependent FMA / MUFU operations whole, one after another, and a warp
 * that is alone on its scheduler (the sm90 kernel's epilogue warps) waited out every latency
 * (docs/PERF.md issue 12 part 6: K1 0.40 -> 0.32 ms at 16448 x 4096 x 1024). The consumers' lean
 * epilogue, two warps a scheduler, gained nothing from 8 at once and takes one (dev_gelu_derivative). */
template <int W>
__device__ __forceinline__ void dev_gelu_derivative_n(const float (&x)[W], float (&g)[W])
{
    const float k = (float)CVF_GELU_K, c = (float)CVF_GELU_C;
    float xc[W], x2[W], t[W], r[W];
#pragma unroll
    for (int i = 0; i < W; i++)
        xc[i] = dev_clamp_nan(x[i], -1e10f, 1e10f);
#pragma unroll
    for (int i = 0; i < W; i++)
        x2[i] = xc[i] * xc[i];
#pragma unroll
    for (int i = 0; i < W; i++)
        t[i] = dev_gelu_t(xc[i], x2[i]);
#pragma unroll
    for (int i = 0; i < W; i++)
        r[i] = dev_rcp_approx(1.0f + t[i]);
#pragma unroll
    for (int i = 0; i < W; i++) {
        const float tr = t[i] * r[i], s = xc[i] >= 0.0f ? r[i] : tr;
        const float q = fmaf(6.0f * k * c, x2[i], 2.0f * k); /* 2 k (1 + 3 c x^2) */
        g[i] = fmaf(xc[i] * q, tr * r[i], s);
    }
}

/* gelu_tanh'(x) of one value (dev_gelu_derivative_n with W = 1, the same bits). */
__device__ __forceinline__ float dev_gelu_derivative(float x)
{
    const float in[1] = {x};
    float g[1];
    dev_gelu_derivative_n(in, g);
    return g[0];
}

/* The exact GELU x Phi(x), Phi(x) = normcdf(x) (CUDA's, accurate in both tails). */
__device__ __forceinline__ float dev_gelu_erf(float x)
{
    return x * normcdff(x);
}

/* Its derivative Phi(x) + x phi(x); x clamped to +-1e10 first (limits 1 and 0, no inf * 0), NaN
 * stays NaN. */
__device__ __forceinline__ float dev_gelu_erf_derivative(float x)
{
    const float xc = dev_clamp_nan(x, -1e10f, 1e10f);
    return fmaf(xc * 0.3989422804014327f, __expf(-0.5f * xc * xc), normcdff(xc));
}

/* The activation of the epilogue; aux is aux_in[i, j] (read only for DGELU). */
__device__ __forceinline__ float dev_activate(int32_t activation, float x, float aux)
{
    switch (activation) {
    case CVF_ACTIVATION_RELU: return x < 0.0f ? 0.0f : x; /* NaN stays NaN */
    case CVF_ACTIVATION_GELU_TANH: return dev_gelu(x);
    case CVF_ACTIVATION_DGELU_TANH: return x * dev_gelu_derivative(aux);
    case CVF_ACTIVATION_GELU_ERF: return dev_gelu_erf(x);
    case CVF_ACTIVATION_DGELU_ERF: return x * dev_gelu_erf_derivative(aux);
    default: return x;
    }
}

/* The epilogue sequence of one element, shared by the simple GEMM and the epilogue pass: x = acc +
 * bias, aux_out = x, y = activation(x) (aux_in read for GELU'), C = y, one rounding each; returns y
 * for the column sums. (The sm90 kernel runs the same arithmetic on 32-column chunks of its
 * accumulator registers, with vector loads and TMA stores: epilogue_chunk in gemm_sm90.cuh.) */
__device__ __forceinline__ float dev_finish_element(const dev_epilogue &ep, const dev_mat &c, int64_t i, int64_t j,
                                                   float acc, float bias)
{
    float x = acc + bias;
    if (ep.aux_out.data)
        dev_store(ep.aux_out.data, ep.aux_out.dtype, i * ep.aux_out.rs + j * ep.aux_out.cs, x);
    float aux = ep.aux_in.data ? dev_load(ep.aux_in.data, ep.aux_in.dtype, i * ep.aux_in.rs + j * ep.aux_in.cs) : 0.0f;
    float y = dev_activate(ep.activation, x, aux);
    dev_store(c.data, c.dtype, i * c.rs + j * c.cs, y);
    return y;
}

/* The kernel-side epilogue of a call's descriptor. */
static inline dev_epilogue dev_epilogue_of(const cvf_epilogue *ep, float *partials)
{
    dev_epilogue d;
    d.activation = (int32_t)ep->activation;
    d.bias = dev_vec_of(ep->bias);
    d.aux_in = dev_mat_of(ep->aux_in);
    d.aux_out = dev_mat_of(ep->aux_out);
    d.partials = partials;
    return d;
}

/* Host: records a CUDA error on ctx as INTERNAL_ERROR naming what failed; SUCCESS for no error. */
cvf_status cvf_cuda_check(cvf_context *ctx, int error, const char *what);

/* Host: the bias-gradient combine: out[j] = sum over s < slabs, in order, of partials[s][j]. */
cvf_status cvf_cuda_combine_partials(cvf_context *ctx, cvf_cuda_launch launch, const float *partials, int64_t slabs,
                                     int64_t n, const cvf_vector *out);

/* Host: the simple GEMM (any dtypes and strides). Partials, when asked, are per 64-row slab. */
cvf_status cvf_cuda_simple_matmul(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                                  const cvf_matrix *c, const cvf_epilogue *ep, float *partials);
#define CVF_CUDA_SIMPLE_SLAB 64

/* Host: the epilogue pass over C, which holds the product (pass.cu): bias, aux_out, activation,
 * C, and bias-gradient partials per 64-row slab, then their combine. A no-op for a plain
 * epilogue. */
cvf_status cvf_cuda_epilogue_pass(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *c,
                                  const cvf_epilogue *ep, float *partials);

/* True when the epilogue does anything the pass would run. */
static inline bool cvf_cuda_epilogue_needed(const cvf_epilogue *ep)
{
    return ep->activation != CVF_ACTIVATION_NONE || ep->bias || ep->aux_out || ep->bias_grad;
}

/* Host: true when the Hopper kernel can run this call on ctx (dtypes, layouts, alignment, sizes). */
bool cvf_cuda_sm90_eligible(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c);

/* Host: the Hopper kernel (the caller checked cvf_cuda_sm90_eligible). Partials are per slab of
 * CVF_CUDA_SM90_SLAB rows (64 in the epilogue warpgroup's kernel: fewer rows of the same buffer). */
cvf_status cvf_cuda_sm90_matmul(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                                const cvf_matrix *c, const cvf_epilogue *ep, float *partials, float *split_partial);
#define CVF_CUDA_SM90_SLAB 16

/* (cvf_cuda_sm90_schedule, the Hopper kernel's schedule, is declared in cuda.h: a pure host function,
 * tested without a GPU.) */

/* Host: the cuBLASLt engine (lt.cu). A plan for one GEMM key: made once, reused. */
typedef struct cvf_lt_plan cvf_lt_plan;

/* True when cuBLASLt can take the product (dtypes, layouts, alignment); with_bias also asks
 * that its BIAS epilogue can add ep's bias. */
bool cvf_lt_eligible(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                     const cvf_epilogue *ep, bool with_bias);

/* True when cuBLASLt can run the whole epilogue bias + tanh GELU (+ aux_out), no more. */
bool cvf_lt_fuses_gelu(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                       const cvf_epilogue *ep);

/* Makes a plan for c = a @ b (+ ep's bias when with_bias; + bias, GELU and aux_out when
 * with_gelu); NULL when cuBLASLt finds no algorithm. */
cvf_lt_plan *cvf_lt_plan_create(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                const cvf_epilogue *ep, bool with_bias, bool with_gelu);

/* Frees a plan; NULL is a no-op. */
void cvf_lt_plan_destroy(cvf_lt_plan *plan);

/* The algorithms cuBLASLt's heuristic offered for the plan (at most CVF_LT_MAX_ALGOS), and the
 * choice of the one its runs use (measured by the engine choice; the heuristic's first until). */
#define CVF_LT_MAX_ALGOS 6
int cvf_lt_plan_algo_count(const cvf_lt_plan *plan);
void cvf_lt_plan_use(cvf_lt_plan *plan, int algo);

/* True when the plan adds the bias itself (its BIAS epilogue). */
bool cvf_lt_plan_adds_bias(const cvf_lt_plan *plan);

/* Runs a plan on launch with its workspace (CVF_LT_WORKSPACE bytes). */
cvf_status cvf_lt_run(cvf_context *ctx, cvf_cuda_launch launch, const cvf_lt_plan *plan, const cvf_matrix *a,
                      const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep, void *workspace);

/* Bytes of workspace every cuBLASLt call gets. */
#define CVF_LT_WORKSPACE ((size_t)8 << 20)

/* Stream-K runs in at most this many units (the sync block's size). */
#define CVF_CUDA_MAX_UNITS 1024
/* Ints of one lane's sync block (two scheduler counters, then four words per unit), and the
 * lanes: the context's stream (0) and the MLP's side streams (1, 2). */
#define CVF_CUDA_SYNC_INTS (32 + 4 * CVF_CUDA_MAX_UNITS)
#define CVF_CUDA_LANES 3

/* Host: the tile of the Hopper kernel (for plans). */
#define CVF_CUDA_SM90_TILE_M 128
#define CVF_CUDA_SM90_TILE_K 64

/* Host: a context's table of encoded tensor maps (gemm_sm90.cu); free() releases it. */
#define CVF_CUDA_TMAP_CACHE 32
void *cvf_cuda_tmap_cache_create(void);

#endif /* CVF_CUDA_DEVICE_CUH */

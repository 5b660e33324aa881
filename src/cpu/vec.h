/*
 * The vector side of the CPU backend: unit-stride conversions between fp32 and the storage dtypes,
 * the activations of the epilogue, and the small element-wise helpers around them, with one
 * implementation per instruction-set level (see isa.h), chosen at run time.
 *
 * Every level computes the same functions:
 *  - load / store are bit-exact with the scalar conversions of cvfuse.h (cvf_f16_to_f32,
 *    cvf_f32_to_f16, ...: round to nearest even, overflow to Inf, NaN kept and made quiet);
 *  - the activations use the non-cancelling sigmoid form of GELU (see gemm.c): with
 *    u = k (x + c x^3), s = sigmoid(2u) and 1 - s = sigmoid(-2u) both come from one
 *    e = exp(-2|u|) <= 1, so gelu(x) = x s and gelu'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2) keep
 *    their relative accuracy in both tails; gelu'(x) is its limit (1 or 0) beyond |x| = 1e10;
 *    gelu(+Inf) = +Inf, gelu(-Inf) = NaN (as x / (1 + exp(-2u)) gives), NaN stays NaN;
 *  - the exact GELU's gelu_erf(x) = x Phi(x) and gelu_erf'(x) = Phi(x) + x phi(x) keep their
 *    relative accuracy in both tails too: the vector levels from Phi(-|x|) = exp(-x^2 / 2) M(|x|)
 *    with a fitted M (vec_simd.h), the generic level from libm's erfc in double;
 *    gelu_erf(+Inf) = +Inf, gelu_erf(-Inf) = -0, gelu_erf'(+-Inf) = 1 / 0, NaN stays NaN;
 *  - no function reads or writes past element n - 1 of any array.
 * The vector levels agree with the generic level to within the accuracy bounds stated in
 * tests/test_vec.c, not bit for bit (their exp and tanh are their own polynomials).
 */
#ifndef CVF_CPU_VEC_H
#define CVF_CPU_VEC_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/isa.h"
#include "cvfuse.h"

/* One output tile's epilogue for cvf_cpu_vec_ops.finish_tile. The tile's rows start at c, aux_out,
 * aux_in (unit column stride, rows *_ld elements apart, *_size bytes per element). */
typedef struct cvf_cpu_tile_epilogue {
    cvf_activation activation;
    const float *bias; /* n values added to every row, or NULL */
    void *aux_out;     /* the pre-activation is stored here (dtype aux_out_dtype), or NULL */
    cvf_dtype aux_out_dtype;
    int64_t aux_out_ld, aux_out_size;
    const void *aux_in; /* GELU' reads its input row here, or NULL */
    cvf_dtype aux_in_dtype;
    int64_t aux_in_ld, aux_in_size;
    void *c; /* the output */
    cvf_dtype c_dtype;
    int64_t c_ld, c_size;
    float *sums;        /* n column sums of the finished rows, summed in row order, or NULL */
    bool sums_continue; /* sums already hold earlier rows of the tile: row 0 is added, not stored */
    float *scratch;     /* room for one row of n floats (the aux_in row) */
} cvf_cpu_tile_epilogue;

/* The vector operations of one instruction-set level. */
typedef struct cvf_cpu_vec_ops {
    const char *name; /* the level's name, as cvf_cpu_isa_name gives it */
    /* dst[i] = (float)src[i] for i < count; src has unit stride and dtype f32, f16 or bf16. */
    void (*load)(const void *src, cvf_dtype dtype, int64_t count, float *dst);
    /* dst[i] = src[i] rounded to dtype (f32, f16, bf16) for i < count; dst has unit stride. */
    void (*store)(void *dst, cvf_dtype dtype, int64_t count, const float *src);
    /* x[i] = activation(x[i]) for i < n; for CVF_ACTIVATION_DGELU_TANH / DGELU_ERF
     * x[i] *= gelu_tanh'(aux[i]) / gelu_erf'(aux[i]) (aux is only read then). NONE does nothing;
     * RELU is x < 0 ? 0 : x (NaN and -0 stay). */
    void (*activate)(cvf_activation activation, float *x, const float *aux, int64_t n);
    /* x[i] += bias[i] for i < n. */
    void (*add)(float *x, const float *bias, int64_t n);
    /* sums[i] += x[i] for i < n. */
    void (*accumulate)(float *sums, const float *x, int64_t n);
    /* y[i] = tanh(x[i]) for i < n (a few ulp; tanh(+-Inf) = +-1, NaN stays NaN); x may equal y. */
    void (*tanh)(const float *x, float *y, int64_t n);
    /* For each of the m rows of x (ldx floats apart, n values each), in order: add bias, store
     * aux_out, load aux_in, activate, store c, then sums = row 0 + row 1 + ... (fp32, in row
     * order; sums_continue: sums + row 0 + ...). The same arithmetic as the single-row members, one call
     * per tile (or per run of its rows: one tile finished in pieces sums as in one call). */
    void (*finish_tile)(const cvf_cpu_tile_epilogue *epilogue, float *x, int64_t ldx, int64_t m, int64_t n);
} cvf_cpu_vec_ops;

/* The operations of the given level. The caller checks cvf_cpu_isa_supported first; a level this
 * build has no code for (any vector level off x86) gives the generic operations. */
const cvf_cpu_vec_ops *cvf_cpu_vec_ops_for(cvf_cpu_isa isa);

/* The operations of cvf_cpu_isa_active(): what the backend uses. */
const cvf_cpu_vec_ops *cvf_cpu_vec_ops_active(void);

/* The tables of each level (defined by vec_generic.c, vec_avx2.c, vec_avx512.c). The AVX2 and
 * AVX-512 ones return NULL off x86; use cvf_cpu_vec_ops_for. */
const cvf_cpu_vec_ops *cvf_cpu_vec_ops_generic(void);
const cvf_cpu_vec_ops *cvf_cpu_vec_ops_avx2(void);
const cvf_cpu_vec_ops *cvf_cpu_vec_ops_avx512(void);

#endif /* CVF_CPU_VEC_H */

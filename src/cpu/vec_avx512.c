/*
 * The AVX-512 level of the vector operations (see vec.h): 16 lanes, F/BW/DQ/VL + FMA + F16C,
 * masked loads and stores for partial blocks. Built with the matching -m flags (CMakeLists.txt)
 * and only called when the CPU has them. bf16 is rounded with integer ops, so the same code
 * serves the AVX512 and AVX512_BF16 levels.
 */
#include "cpu/vec.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define VEC_WIDTH 16

typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vmask;
typedef __m512d vd;

/* Broadcasts a. */
static inline vf vf_set(float a)
{
    return _mm512_set1_ps(a);
}

/* a + b. */
static inline vf vf_add(vf a, vf b)
{
    return _mm512_add_ps(a, b);
}

/* a - b. */
static inline vf vf_sub(vf a, vf b)
{
    return _mm512_sub_ps(a, b);
}

/* a * b. */
static inline vf vf_mul(vf a, vf b)
{
    return _mm512_mul_ps(a, b);
}

/* a / b. */
static inline vf vf_div(vf a, vf b)
{
    return _mm512_div_ps(a, b);
}

/* a * b + c, rounded once. */
static inline vf vf_fma(vf a, vf b, vf c)
{
    return _mm512_fmadd_ps(a, b, c);
}

/* |a|. */
static inline vf vf_abs(vf a)
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7FFFFFFF)));
}

/* a (non-negative) with the sign of b. */
static inline vf vf_or_sign(vf a, vf b)
{
    vi sign = _mm512_and_si512(_mm512_castps_si512(b), _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), sign));
}

/* min(a, b); b when either is NaN. */
static inline vf vf_min(vf a, vf b)
{
    return _mm512_min_ps(a, b);
}

/* max(a, b); b when either is NaN. */
static inline vf vf_max(vf a, vf b)
{
    return _mm512_max_ps(a, b);
}

/* a rounded to the nearest integral value (ties even). */
static inline vf vf_round(vf a)
{
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* Integral a as int32. */
static inline vi vf_to_vi(vf a)
{
    return _mm512_cvtps_epi32(a);
}

/* 2^n for n in [-126, 127]. */
static inline vf vf_pow2i(vi n)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

/* a < b (false for NaN). */
static inline vmask vf_lt(vf a, vf b)
{
    return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ);
}

/* a is NaN. */
static inline vmask vf_isnan(vf a)
{
    return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
}

/* m ? a : b, lane by lane. */
static inline vf vf_select(vmask m, vf a, vf b)
{
    return _mm512_mask_blend_ps(m, b, a);
}

/* Mask of the first count lanes (count in 0..16). */
static inline __mmask16 lane_mask(int count)
{
    return (__mmask16)((1u << count) - 1u);
}

/* The first count floats at p (count in 1..16), zeros after; reads nothing beyond. */
static inline vf vf_load_n(const float *p, int count)
{
    if (count == VEC_WIDTH)
        return _mm512_loadu_ps(p);
    return _mm512_maskz_loadu_ps(lane_mask(count), p);
}

/* Writes the first count lanes of v to p (count in 1..16); writes nothing beyond. */
static inline void vf_store_n(float *p, vf v, int count)
{
    if (count == VEC_WIDTH)
        _mm512_storeu_ps(p, v);
    else
        _mm512_mask_storeu_ps(p, lane_mask(count), v);
}

/* Broadcasts a (double lanes). */
static inline vd vd_set(double a)
{
    return _mm512_set1_pd(a);
}

/* a * b + c, rounded once (double lanes). */
static inline vd vd_fma(vd a, vd b, vd c)
{
    return _mm512_fmadd_pd(a, b, c);
}

/* a / b (double lanes). */
static inline vd vd_div(vd a, vd b)
{
    return _mm512_div_pd(a, b);
}

/* The low half of a's lanes, exactly, as doubles. */
static inline vd vf_widen_lo(vf a)
{
    return _mm512_cvtps_pd(_mm512_castps512_ps256(a));
}

/* The high half of a's lanes, exactly, as doubles. */
static inline vd vf_widen_hi(vf a)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

/* The lanes of lo then hi, each rounded to float. */
static inline vf vd_narrow(vd lo, vd hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm512_cvtpd_ps(lo))),
                                               _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
}

#include "cpu/kernels/store_avx512.h"
#include "cpu/vec_simd.h"

/* The first count 16-bit values at p (count in 1..16), zeros after; reads nothing beyond. */
static inline __m256i load_u16_n(const uint16_t *p, int count)
{
    return _mm256_maskz_loadu_epi16(lane_mask(count), p);
}

/* binary16 -> binary32 as cvf_f16_to_f32: F16C, except that NaN lanes keep their payload as is
 * (the hardware would set the quiet bit of a signalling NaN). */
static inline vf f16_to_f32(__m256i h)
{
    vf converted = _mm512_cvtph_ps(h);
    vi wide = _mm512_cvtepu16_epi32(h);
    __mmask16 special =
        _mm512_cmpeq_epi32_mask(_mm512_and_si512(wide, _mm512_set1_epi32(0x7C00)), _mm512_set1_epi32(0x7C00));
    vi sign = _mm512_slli_epi32(_mm512_and_si512(wide, _mm512_set1_epi32(0x8000)), 16);
    vi payload = _mm512_slli_epi32(_mm512_and_si512(wide, _mm512_set1_epi32(0x03FF)), 13);
    vi bits = _mm512_or_si512(_mm512_or_si512(sign, payload), _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_blend_ps(special, converted, _mm512_castsi512_ps(bits));
}

/* bfloat16 -> binary32: the bits shifted up. */
static inline vf bf16_to_f32(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* binary32 -> bfloat16 as cvf_f32_to_bf16, in the low 16 bits of the 32-bit lanes: the same
 * rounding as the kernels' fused store (one definition, store_avx512.h). */
static inline vi f32_to_bf16_lanes(vf x)
{
    return cvf_cpu_avx512_bf16_bits(x);
}

/* dst[i] = src[i] for i < count: plain full-vector moves, a masked one for the tail (a library
 * memcpy per tile row costs more than the copy; masked moves of whole vectors are slow on some
 * cores). */
static inline void copy_f32(float *dst, const float *src, int64_t count)
{
    int64_t i = 0;
    for (; i + VEC_WIDTH <= count; i += VEC_WIDTH)
        _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    if (i < count) {
        __mmask16 tail = lane_mask((int)(count - i));
        _mm512_mask_storeu_ps(dst + i, tail, _mm512_maskz_loadu_ps(tail, src + i));
    }
}

/* dst[i] = (float)src[i]; see vec.h. */
static void avx512_load(const void *src, cvf_dtype dtype, int64_t count, float *dst)
{
    const uint16_t *half = (const uint16_t *)src;
    switch (dtype) {
    case CVF_F32: copy_f32(dst, (const float *)src, count); break;
    case CVF_F16:
        for (int64_t i = 0; i < count; i += VEC_WIDTH) {
            int m = vec_lanes(i, count);
            vf_store_n(dst + i, f16_to_f32(load_u16_n(half + i, m)), m);
        }
        break;
    case CVF_BF16:
        for (int64_t i = 0; i < count; i += VEC_WIDTH) {
            int m = vec_lanes(i, count);
            vf_store_n(dst + i, bf16_to_f32(load_u16_n(half + i, m)), m);
        }
        break;
    case CVF_F64: break;
    }
}

/* dst[i] = src[i] rounded to dtype; see vec.h. F16C's conversion rounds to nearest even,
 * overflows to Inf and keeps NaN payloads (top bits) with the quiet bit set, as the scalar code. */
static void avx512_store(void *dst, cvf_dtype dtype, int64_t count, const float *src)
{
    uint16_t *half = (uint16_t *)dst;
    switch (dtype) {
    case CVF_F32: /* memcpy measured ~5% faster than copy_f32 for output rows (2048^2 x 256) */
        if (count > 0)
            memcpy(dst, src, (size_t)count * sizeof(float));
        break;
    case CVF_F16:
        for (int64_t i = 0; i < count; i += VEC_WIDTH) {
            int m = vec_lanes(i, count);
            __m256i h = _mm512_cvtps_ph(vf_load_n(src + i, m), _MM_FROUND_TO_NEAREST_INT);
            if (m == VEC_WIDTH) /* masked stores are slow on some cores: only for the tail */
                _mm256_storeu_si256((__m256i *)(half + i), h);
            else
                _mm256_mask_storeu_epi16(half + i, lane_mask(m), h);
        }
        break;
    case CVF_BF16:
        for (int64_t i = 0; i < count; i += VEC_WIDTH) {
            int m = vec_lanes(i, count);
            __m512i bits = f32_to_bf16_lanes(vf_load_n(src + i, m));
            if (m == VEC_WIDTH)
                _mm256_storeu_si256((__m256i *)(half + i), _mm512_cvtepi32_epi16(bits));
            else
                _mm512_mask_cvtepi32_storeu_epi16(half + i, lane_mask(m), bits);
        }
        break;
    case CVF_F64: break;
    }
}

#define VEC_LOAD avx512_load
#define VEC_STORE avx512_store
#define VEC_ACTIVATE vec_activate
#define VEC_ADD vec_add
#define VEC_ACCUMULATE vec_accumulate
#include "cpu/vec_finish.h"

/* count (1..16) values of a row of dtype at element i, as fp32 lanes (zeros after): avx512_load's
 * conversion of one block. */
static inline vf load_lanes(const void *row, cvf_dtype dtype, int64_t i, int count)
{
    if (dtype == CVF_F32)
        return vf_load_n((const float *)row + i, count);
    __m256i h = load_u16_n((const uint16_t *)row + i, count);
    return dtype == CVF_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

/* Stores count (1..16) lanes of y at element i of a row of dtype: avx512_store's conversion of one
 * block (masked stores for a tail only). */
static inline void store_lanes(void *row, cvf_dtype dtype, int64_t i, vf y, int count)
{
    uint16_t *half = (uint16_t *)row + i;
    if (dtype == CVF_F32) {
        vf_store_n((float *)row + i, y, count);
    } else if (dtype == CVF_F16) {
        __m256i h = _mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT);
        if (count == VEC_WIDTH)
            _mm256_storeu_si256((__m256i *)half, h);
        else
            _mm256_mask_storeu_epi16(half, lane_mask(count), h);
    } else {
        __m512i bits = f32_to_bf16_lanes(y);
        if (count == VEC_WIDTH)
            _mm256_storeu_si256((__m256i *)half, _mm512_cvtepi32_epi16(bits));
        else
            _mm512_mask_cvtepi32_storeu_epi16(half, lane_mask(count), bits);
    }
}

#include "cpu/vec_sweep.h"

static const cvf_cpu_vec_ops avx512_ops = {
    "avx512", avx512_load, avx512_store, vec_activate, vec_add, vec_accumulate, vec_tanh_run, vec_sweep_finish_tile,
};

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_avx512(void)
{
    return &avx512_ops;
}

#else /* not x86: no AVX-512 code */

#include <stddef.h>

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_avx512(void)
{
    return NULL;
}

#endif

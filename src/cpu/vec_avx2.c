/*
 * The AVX2 level of the vector operations (see vec.h): 8 lanes, FMA, F16C. Built with
 * -mavx2 -mfma -mf16c (CMakeLists.txt) and only called when the CPU has them. Partial blocks use
 * the AVX masked loads and stores (32-bit lanes) or a small stack copy (16-bit lanes).
 */
#include "cpu/vec.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define VEC_WIDTH 8

typedef __m256 vf;
typedef __m256i vi;
typedef __m256 vmask;
typedef __m256d vd;

/* Broadcasts a. */
static inline vf vf_set(float a)
{
    return _mm256_set1_ps(a);
}

/* a + b. */
static inline vf vf_add(vf a, vf b)
{
    return _mm256_add_ps(a, b);
}

/* a - b. */
static inline vf vf_sub(vf a, vf b)
{
    return _mm256_sub_ps(a, b);
}

/* a * b. */
static inline vf vf_mul(vf a, vf b)
{
    return _mm256_mul_ps(a, b);
}

/* a / b. */
static inline vf vf_div(vf a, vf b)
{
    return _mm256_div_ps(a, b);
}

/* a * b + c, rounded once. */
static inline vf vf_fma(vf a, vf b, vf c)
{
    return _mm256_fmadd_ps(a, b, c);
}

/* |a|. */
static inline vf vf_abs(vf a)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}

/* a (non-negative) with the sign of b. */
static inline vf vf_or_sign(vf a, vf b)
{
    return _mm256_or_ps(a, _mm256_and_ps(_mm256_set1_ps(-0.0f), b));
}

/* min(a, b); b when either is NaN. */
static inline vf vf_min(vf a, vf b)
{
    return _mm256_min_ps(a, b);
}

/* max(a, b); b when either is NaN. */
static inline vf vf_max(vf a, vf b)
{
    return _mm256_max_ps(a, b);
}

/* a rounded to the nearest integral value (ties even). */
static inline vf vf_round(vf a)
{
    return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* Integral a as int32. */
static inline vi vf_to_vi(vf a)
{
    return _mm256_cvtps_epi32(a);
}

/* 2^n for n in [-126, 127]. */
static inline vf vf_pow2i(vi n)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

/* a < b (false for NaN). */
static inline vmask vf_lt(vf a, vf b)
{
    return _mm256_cmp_ps(a, b, _CMP_LT_OQ);
}

/* a is NaN. */
static inline vmask vf_isnan(vf a)
{
    return _mm256_cmp_ps(a, a, _CMP_UNORD_Q);
}

/* m ? a : b, lane by lane. */
static inline vf vf_select(vmask m, vf a, vf b)
{
    return _mm256_blendv_ps(b, a, m);
}

/* Mask of the first count lanes (count in 0..8). */
static inline vi lane_mask(int count)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The first count floats at p (count in 1..8), zeros after; reads nothing beyond. */
static inline vf vf_load_n(const float *p, int count)
{
    if (count == VEC_WIDTH)
        return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, lane_mask(count));
}

/* Writes the first count lanes of v to p (count in 1..8); writes nothing beyond. */
static inline void vf_store_n(float *p, vf v, int count)
{
    if (count == VEC_WIDTH)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, lane_mask(count), v);
}

/* Broadcasts a (double lanes). */
static inline vd vd_set(double a)
{
    return _mm256_set1_pd(a);
}

/* a * b + c, rounded once (double lanes). */
static inline vd vd_fma(vd a, vd b, vd c)
{
    return _mm256_fmadd_pd(a, b, c);
}

/* a / b (double lanes). */
static inline vd vd_div(vd a, vd b)
{
    return _mm256_div_pd(a, b);
}

/* The low half of a's lanes, exactly, as doubles. */
static inline vd vf_widen_lo(vf a)
{
    return _mm256_cvtps_pd(_mm256_castps256_ps128(a));
}

/* The high half of a's lanes, exactly, as doubles. */
static inline vd vf_widen_hi(vf a)
{
    return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
}

/* The lanes of lo then hi, each rounded to float. */
static inline vf vd_narrow(vd lo, vd hi)
{
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

#include "cpu/vec_simd.h"

/* The first count 16-bit values at p (count in 1..8), zeros after; reads nothing beyond. */
static inline __m128i load_u16_n(const uint16_t *p, int count)
{
    if (count == VEC_WIDTH)
        return _mm_loadu_si128((const __m128i *)p);
    uint16_t buf[VEC_WIDTH] = {0};
    memcpy(buf, p, (size_t)count * sizeof(uint16_t));
    return _mm_loadu_si128((const __m128i *)buf);
}

/* Writes the first count 16-bit lanes of v to p (count in 1..8); writes nothing beyond. */
static inline void store_u16_n(uint16_t *p, __m128i v, int count)
{
    if (count == VEC_WIDTH) {
        _mm_storeu_si128((__m128i *)p, v);
        return;
    }
    uint16_t buf[VEC_WIDTH];
    _mm_storeu_si128((__m128i *)buf, v);
    memcpy(p, buf, (size_t)count * sizeof(uint16_t));
}

/* binary16 -> binary32 as cvf_f16_to_f32: F16C, except that NaN lanes keep their payload as is
 * (the hardware would set the quiet bit of a signalling NaN). */
static inline vf f16_to_f32(__m128i h)
{
    vf converted = _mm256_cvtph_ps(h);
    vi wide = _mm256_cvtepu16_epi32(h);
    vi exponent = _mm256_and_si256(wide, _mm256_set1_epi32(0x7C00));
    vi special = _mm256_cmpeq_epi32(exponent, _mm256_set1_epi32(0x7C00));
    vi sign = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x8000)), 16);
    vi payload = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x03FF)), 13);
    vi bits = _mm256_or_si256(_mm256_or_si256(sign, payload), _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_ps(converted, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(special));
}

/* binary32 -> binary16 as cvf_f32_to_f16: F16C rounds to nearest even, overflows to Inf and
 * keeps NaN payloads (top bits) with the quiet bit set, as the scalar code does. */
static inline __m128i f32_to_f16(vf x)
{
    return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
}

/* bfloat16 -> binary32: the bits shifted up. */
static inline vf bf16_to_f32(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* binary32 -> bfloat16 as cvf_f32_to_bf16: add 0x7FFF plus the kept lsb and truncate; NaN is
 * truncated with the quiet bit set. Returns the 8 results in the low 16 bits of each 32-bit lane. */
static inline vi f32_to_bf16_lanes(vf x)
{
    vi b = _mm256_castps_si256(x);
    vi lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    vi rounded = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    vi quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x0040));
    vi is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

/* The 8 low halves of the 32-bit lanes of v (each below 2^16), packed in order. */
static inline __m128i pack_u16(vi v)
{
    return _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

/* dst[i] = (float)src[i]; see vec.h. */
static void avx2_load(const void *src, cvf_dtype dtype, int64_t count, float *dst)
{
    const uint16_t *half = (const uint16_t *)src;
    switch (dtype) {
    case CVF_F32:
        if (count > 0)
            memcpy(dst, src, (size_t)count * sizeof(float));
        break;
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

/* dst[i] = src[i] rounded to dtype; see vec.h. */
static void avx2_store(void *dst, cvf_dtype dtype, int64_t count, const float *src)
{
    uint16_t *half = (uint16_t *)dst;
    switch (dtype) {
    case CVF_F32:
        if (count > 0)
            memcpy(dst, src, (size_t)count * sizeof(float));
        break;
    case CVF_F16:
        for (int64_t i = 0; i < count; i += VEC_WIDTH) {
            int m = vec_lanes(i, count);
            store_u16_n(half + i, f32_to_f16(vf_load_n(src + i, m)), m);
        }
        break;
    case CVF_BF16:
        for (int64_t i = 0; i < count; i += VEC_WIDTH) {
            int m = vec_lanes(i, count);
            store_u16_n(half + i, pack_u16(f32_to_bf16_lanes(vf_load_n(src + i, m))), m);
        }
        break;
    case CVF_F64: break;
    }
}

#define VEC_LOAD avx2_load
#define VEC_STORE avx2_store
#define VEC_ACTIVATE vec_activate
#define VEC_ADD vec_add
#define VEC_ACCUMULATE vec_accumulate
#include "cpu/vec_finish.h"

/* count (1..8) values of a row of dtype at element i, as fp32 lanes (zeros after): avx2_load's
 * conversion of one block, without the copy through memory. */
static inline vf load_lanes(const void *row, cvf_dtype dtype, int64_t i, int count)
{
    if (dtype == CVF_F32)
        return vf_load_n((const float *)row + i, count);
    __m128i h = load_u16_n((const uint16_t *)row + i, count);
    return dtype == CVF_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

/* Stores count (1..8) lanes of y at element i of a row of dtype: avx2_store's conversion of one block. */
static inline void store_lanes(void *row, cvf_dtype dtype, int64_t i, vf y, int count)
{
    if (dtype == CVF_F32)
        vf_store_n((float *)row + i, y, count);
    else if (dtype == CVF_F16)
        store_u16_n((uint16_t *)row + i, f32_to_f16(y), count);
    else
        store_u16_n((uint16_t *)row + i, pack_u16(f32_to_bf16_lanes(y)), count);
}

#include "cpu/vec_sweep.h"

static const cvf_cpu_vec_ops avx2_ops = {
    "avx2", avx2_load, avx2_store, vec_activate, vec_add, vec_accumulate, vec_tanh_run, vec_sweep_finish_tile,
};

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_avx2(void)
{
    return &avx2_ops;
}

#else /* not x86: no AVX2 code */

#include <stddef.h>

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_avx2(void)
{
    return NULL;
}

#endif

/*
 * Stores of finished fp32 vectors of a tile row to an f32, f16 or bf16 output, for the AVX-512
 * kernels' fused stores (compiled with the AVX512 level's flags only). Rounding as the scalar
 * conversions of cvfuse.h: to nearest even, NaN kept quiet, overflow to Inf.
 */
#ifndef CVF_CPU_KERNELS_STORE_AVX512_H
#define CVF_CPU_KERNELS_STORE_AVX512_H

#include <immintrin.h>

#include "cpu/kernels/kernels.h"

/* bf16 bits of x in the low half of each 32-bit lane: round to nearest even, NaN made quiet. */
static inline __m512i cvf_cpu_avx512_bf16_bits(__m512 x)
{
    __m512i b = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x0040));
    __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

/* Stores x as columns 16 v .. 16 v + 15 of row i of out (only the lanes of mask). */
static inline __attribute__((always_inline)) void cvf_cpu_avx512_store_row(const cvf_cpu_fused_store *out, int i, int v,
                                                                           __m512 x, __mmask16 mask)
{
    int64_t offset = (int64_t)i * out->ldc + 16 * v;
    switch (out->dtype) {
    case CVF_F16: {
        __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
        uint16_t *dst = (uint16_t *)out->c + offset;
        if (mask == 0xFFFF)
            _mm256_storeu_si256((__m256i *)dst, h);
        else
            _mm256_mask_storeu_epi16(dst, mask, h);
        break;
    }
    case CVF_BF16: {
        __m256i h = _mm512_cvtepi32_epi16(cvf_cpu_avx512_bf16_bits(x));
        uint16_t *dst = (uint16_t *)out->c + offset;
        if (mask == 0xFFFF)
            _mm256_storeu_si256((__m256i *)dst, h);
        else
            _mm256_mask_storeu_epi16(dst, mask, h);
        break;
    }
    default: {
        float *dst = (float *)out->c + offset;
        if (mask == 0xFFFF)
            _mm512_storeu_ps(dst, x);
        else
            _mm512_mask_storeu_ps(dst, mask, x);
        break;
    }
    }
}

#endif /* CVF_CPU_KERNELS_STORE_AVX512_H */

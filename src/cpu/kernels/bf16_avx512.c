/*
 * AVX-512 BF16 micro-kernel, 14 x 32 (see kernels.h for the contract and the BF16 packed layout).
 * Compiled with the AVX512_BF16 level's flags; runs only where
 * cvf_cpu_isa_supported(CVF_CPU_ISA_AVX512_BF16) holds.
 *
 * Same register plan as the fp32 AVX-512 kernel (28 zmm fp32 accumulators, 14 rows x 32 columns),
 * but each step consumes a pair of k values: B is loaded as 2 zmm of 16 bf16 pairs, the bf16 pair
 * of each A row is broadcast as one 32-bit lane, and vdpbf16ps adds both products of the pair to
 * the fp32 accumulator. The products of two bf16 values are exact in fp32, so the result differs
 * from an fp32 computation only by accumulation rounding (vdpbf16ps flushes bf16 subnormal inputs
 * and fp32 subnormal results to zero). The pair loop is unrolled by 4; edge tiles use masked
 * loads and stores, inlined so that the tile stays in registers (as in the fp32 kernel).
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define MR CVF_CPU_BF16_AVX512_MR
#define NR CVF_CPU_BF16_AVX512_NR

/* How far ahead (in pair steps) the A micro-panel is prefetched. */
#define PREFETCH_A_STEPS 16

/* Broadcasts the bf16 pair at a (two uint16_t) to all 16 lanes. */
static inline __attribute__((always_inline)) __m512bh broadcast_pair(const uint16_t *a)
{
    uint32_t pair;
    memcpy(&pair, a, sizeof pair);
    return (__m512bh)_mm512_set1_epi32((int)pair);
}

/* c[i][v] += A[i, 2q..2q+1] B[2q..2q+1, 16 v .. 16 v + 15] for one pair step q (ap, bp point at
 * the step's MR and NR pairs). */
#define PAIR_UPDATE(ap, bp)                                                                                            \
    do {                                                                                                               \
        __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)(bp));                                                 \
        __m512bh b1 = (__m512bh)_mm512_load_si512((const void *)((bp) + 32));                                          \
        _Pragma("GCC unroll 14") for (int i = 0; i < MR; i++)                                                          \
        {                                                                                                              \
            __m512bh ai = broadcast_pair((ap) + 2 * i);                                                                \
            c[i][0] = _mm512_dpbf16_ps(c[i][0], ai, b0);                                                               \
            c[i][1] = _mm512_dpbf16_ps(c[i][1], ai, b1);                                                               \
        }                                                                                                              \
    } while (0)

void cvf_cpu_kernel_bf16_avx512(int64_t kc, const void *a_panel, const void *b_panel, float *cp, int64_t ldc, int64_t m,
                                int64_t n, int accumulate)
{
    const uint16_t *a = a_panel, *b = b_panel;
    const int64_t a_step = 2 * MR, b_step = 2 * NR;
    __m512 c[MR][2]; /* row i, columns 0..15 in c[i][0] and 16..31 in c[i][1]: registers only */
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++)
        c[i][0] = c[i][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < m; i++) { /* the rows of the C corner that the store will touch */
        _mm_prefetch((const char *)(cp + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(cp + i * ldc + 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(cp + i * ldc + NR - 1), _MM_HINT_T0);
    }
    int64_t q = (kc + 1) / 2;
    for (; q >= 4; q -= 4) {
        const char *ahead = (const char *)(a + PREFETCH_A_STEPS * a_step);
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
        _mm_prefetch(ahead + 192, _MM_HINT_T0);
        PAIR_UPDATE(a, b);
        PAIR_UPDATE(a + a_step, b + b_step);
        PAIR_UPDATE(a + 2 * a_step, b + 2 * b_step);
        PAIR_UPDATE(a + 3 * a_step, b + 3 * b_step);
        a += 4 * a_step;
        b += 4 * b_step;
    }
    for (; q > 0; q--) {
        PAIR_UPDATE(a, b);
        a += a_step;
        b += b_step;
    }
    if (m == MR && n == NR) { /* the full tile: unmasked unaligned accesses */
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            float *row = cp + i * ldc;
            __m512 lo = c[i][0], hi = c[i][1];
            if (accumulate) {
                lo = _mm512_add_ps(lo, _mm512_loadu_ps(row));
                hi = _mm512_add_ps(hi, _mm512_loadu_ps(row + 16));
            }
            _mm512_storeu_ps(row, lo);
            _mm512_storeu_ps(row + 16, hi);
        }
    } else { /* the m x n corner: masked accesses (no byte outside the corner is read or written) */
        __mmask16 mask_lo = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
        __mmask16 mask_hi = (__mmask16)(n >= 32 ? 0xFFFFu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            if (i < m) {
                float *row = cp + i * ldc;
                __m512 lo = c[i][0], hi = c[i][1];
                if (accumulate) {
                    lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(mask_lo, row));
                    hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(mask_hi, row + 16));
                }
                _mm512_mask_storeu_ps(row, mask_lo, lo);
                _mm512_mask_storeu_ps(row + 16, mask_hi, hi);
            }
        }
    }
}

#else
typedef int cvf_cpu_bf16_avx512_unavailable; /* not an x86 target: nothing to compile */
#endif

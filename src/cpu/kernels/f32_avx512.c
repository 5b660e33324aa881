/*
 * AVX-512 fp32 micro-kernel, 14 x 32 (see kernels.h for the contract). Compiled with the AVX512
 * level's flags; runs only where cvf_cpu_isa_supported(CVF_CPU_ISA_AVX512) holds.
 *
 * Shape: 28 zmm accumulators (14 rows x 2 vectors of 16 columns), B loaded as 2 zmm per k and
 * each A element broadcast once per k: 28 FMAs against 2 vector loads and 14 scalar broadcasts,
 * enough independent chains to cover the FMA latency of two 512-bit pipes (Zen 4/5, Skylake-X).
 * A KC x 32 B micro-panel (32 KB at kc = 256) stays in L1 while 14-row A micro-panels stream from
 * L2. The k loop is unrolled by 4; edge tiles (m < 14 or n < 32) use masked loads and stores, the
 * full tile plain ones.
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define MR CVF_CPU_F32_AVX512_MR
#define NR CVF_CPU_F32_AVX512_NR

/* How far ahead (in k steps) the A micro-panel is prefetched. */
#define PREFETCH_A_STEPS 16

/* The accumulator tile: row i, columns 0..15 in v[i][0] and 16..31 in v[i][1]. */
typedef struct tile {
    __m512 v[MR][2];
} tile;

/* acc += A[:, p] B[p, :] for one k step p (a, b point at the step's MR and NR values). */
static inline __attribute__((always_inline)) void rank1_update(tile *acc, const float *a, const float *b)
{
    __m512 b0 = _mm512_load_ps(b);
    __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        __m512 ai = _mm512_set1_ps(a[i]);
        acc->v[i][0] = _mm512_fmadd_ps(ai, b0, acc->v[i][0]);
        acc->v[i][1] = _mm512_fmadd_ps(ai, b1, acc->v[i][1]);
    }
}

/* Stores (or adds) the full 14 x 32 tile with unmasked unaligned accesses. */
static inline __attribute__((always_inline)) void store_full(const tile *acc, float *c, int64_t ldc, int accumulate)
{
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        float *row = c + i * ldc;
        __m512 lo = acc->v[i][0], hi = acc->v[i][1];
        if (accumulate) {
            lo = _mm512_add_ps(lo, _mm512_loadu_ps(row));
            hi = _mm512_add_ps(hi, _mm512_loadu_ps(row + 16));
        }
        _mm512_storeu_ps(row, lo);
        _mm512_storeu_ps(row + 16, hi);
    }
}

/* Stores (or adds) the m x n corner of the tile with masked accesses (no byte outside the corner
 * is read or written). */
static void store_edge(const tile *acc, float *c, int64_t ldc, int64_t m, int64_t n, int accumulate)
{
    __mmask16 mask_lo = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    __mmask16 mask_hi = (__mmask16)(n >= 32 ? 0xFFFFu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        __m512 lo = acc->v[i][0], hi = acc->v[i][1];
        if (accumulate) {
            lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(mask_lo, row));
            hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(mask_hi, row + 16));
        }
        _mm512_mask_storeu_ps(row, mask_lo, lo);
        _mm512_mask_storeu_ps(row + 16, mask_hi, hi);
    }
}

/* Prefetches the rows of the C corner that the store will touch. */
static inline void prefetch_c(const float *c, int64_t ldc, int64_t m)
{
    for (int64_t i = 0; i < m; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
}

void cvf_cpu_kernel_f32_avx512(int64_t kc, const void *a_panel, const void *b_panel, float *c, int64_t ldc, int64_t m,
                               int64_t n, int accumulate)
{
    const float *a = a_panel, *b = b_panel;
    tile acc;
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++)
        acc.v[i][0] = acc.v[i][1] = _mm512_setzero_ps();
    prefetch_c(c, ldc, m);
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        _mm_prefetch((const char *)(a + (p + PREFETCH_A_STEPS) * MR), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + (p + PREFETCH_A_STEPS) * MR + 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + (p + PREFETCH_A_STEPS) * MR + 32), _MM_HINT_T0);
        _mm_prefetch((const char *)(a + (p + PREFETCH_A_STEPS) * MR + 48), _MM_HINT_T0);
        rank1_update(&acc, a + (p + 0) * MR, b + (p + 0) * NR);
        rank1_update(&acc, a + (p + 1) * MR, b + (p + 1) * NR);
        rank1_update(&acc, a + (p + 2) * MR, b + (p + 2) * NR);
        rank1_update(&acc, a + (p + 3) * MR, b + (p + 3) * NR);
    }
    for (; p < kc; p++)
        rank1_update(&acc, a + p * MR, b + p * NR);
    if (m == MR && n == NR)
        store_full(&acc, c, ldc, accumulate);
    else
        store_edge(&acc, c, ldc, m, n, accumulate);
}

#else
typedef int cvf_cpu_f32_avx512_unavailable; /* not an x86 target: nothing to compile */
#endif

/*
 * AVX2 + FMA fp32 micro-kernel, 6 x 16 (see kernels.h for the contract). Compiled with the AVX2
 * level's flags; runs only where cvf_cpu_isa_supported(CVF_CPU_ISA_AVX2) holds.
 *
 * Shape: 12 ymm accumulators (6 rows x 2 vectors of 8 columns), 2 B vectors and one broadcast
 * A element: 15 of the 16 ymm registers, 12 FMAs per k against 2 loads and 6 broadcasts (two FMA
 * pipes with latency 4-5 need at least 8-10 independent chains). The k loop is unrolled by 4.
 * Edge tiles go through a local copy of the tile and scalar stores of the m x n corner.
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define MR CVF_CPU_F32_AVX2_MR
#define NR CVF_CPU_F32_AVX2_NR

/* The accumulator tile: row i, columns 0..7 in v[i][0] and 8..15 in v[i][1]. */
typedef struct tile {
    __m256 v[MR][2];
} tile;

/* acc += A[:, p] B[p, :] for one k step (a, b point at the step's MR and NR values). */
static inline __attribute__((always_inline)) void rank1_update(tile *acc, const float *a, const float *b)
{
    __m256 b0 = _mm256_load_ps(b);
    __m256 b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        __m256 ai = _mm256_broadcast_ss(a + i);
        acc->v[i][0] = _mm256_fmadd_ps(ai, b0, acc->v[i][0]);
        acc->v[i][1] = _mm256_fmadd_ps(ai, b1, acc->v[i][1]);
    }
}

/* Stores (or adds) the full 6 x 16 tile with unaligned vector accesses. */
static inline __attribute__((always_inline)) void store_full(const tile *acc, float *c, int64_t ldc, int accumulate)
{
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *row = c + i * ldc;
        __m256 lo = acc->v[i][0], hi = acc->v[i][1];
        if (accumulate) {
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(row));
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(row + 8));
        }
        _mm256_storeu_ps(row, lo);
        _mm256_storeu_ps(row + 8, hi);
    }
}

/* Stores (or adds) the m x n corner of the tile through a local copy (no access outside it). */
static void store_edge(const tile *acc, float *c, int64_t ldc, int64_t m, int64_t n, int accumulate)
{
    float buf[MR][NR];
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(buf[i], acc->v[i][0]);
        _mm256_storeu_ps(buf[i] + 8, acc->v[i][1]);
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + buf[i][j] : buf[i][j];
}

void cvf_cpu_kernel_f32_avx2(int64_t kc, const void *a_panel, const void *b_panel, float *c, int64_t ldc, int64_t m,
                             int64_t n, int accumulate)
{
    const float *a = a_panel, *b = b_panel;
    tile acc;
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
        acc.v[i][0] = acc.v[i][1] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4) {
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
typedef int cvf_cpu_f32_avx2_unavailable; /* not an x86 target: nothing to compile */
#endif

/*
 * Portable C fp32 micro-kernel, 4 x 8 (see kernels.h for the contract): the GENERIC level.
 *
 * No intrinsics: the tile is a local array whose rows of 8 floats the compiler maps onto vector
 * registers of the baseline ISA. With SSE2 (no FMA, two-operand mul/add) each row takes two xmm
 * registers: 8 accumulators, 2 B vectors, a broadcast and the product temporaries fit in the 16
 * xmm registers, where 6 x 8 spills (measured: 4 x 8 ~35 GFLOP/s, 6 x 8 ~26, 8 x 8 ~14 at
 * 3.4 GHz). The full tile is written with fixed-size loops, the m x n corner of an edge tile with
 * variable ones.
 */
#include "cpu/kernels/kernels.h"

#define MR CVF_CPU_F32_GENERIC_MR
#define NR CVF_CPU_F32_GENERIC_NR

/* acc += A[:, p] B[p, :] for one k step (a, b point at the step's MR and NR values). */
static inline void rank1_update(float acc[MR][NR], const float *restrict a, const float *restrict b)
{
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            acc[i][j] += a[i] * b[j];
}

/* Stores (or adds) the m x n corner of the tile. */
static void store_tile(float acc[MR][NR], float *c, int64_t ldc, int64_t m, int64_t n, int accumulate)
{
    if (m == MR && n == NR) {
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++)
                c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
        return;
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

void cvf_cpu_kernel_f32_generic(int64_t kc, const void *a_panel, const void *b_panel, float *c, int64_t ldc, int64_t m,
                                int64_t n, int accumulate)
{
    const float *a = a_panel, *b = b_panel;
    float acc[MR][NR] = {{0}};
    for (int64_t p = 0; p < kc; p++)
        rank1_update(acc, a + p * MR, b + p * NR);
    store_tile(acc, c, ldc, m, n, accumulate);
}

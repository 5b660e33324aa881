/*
 * The CPU micro-kernel contract (as in BLIS): one MR x NR tile of fp32 accumulators.
 *
 *     c[i * ldc + j] += sum over p < kc of a[p * MR + i] * b[p * NR + j]    (i < MR, j < NR)
 *
 * a is an MR-row micro-panel of packed A (column by column), b an NR-column micro-panel of packed
 * B (row by row); both are zero-padded by the packing, so the kernel always computes a full tile.
 * c is the thread's fp32 accumulator tile, which the epilogue reads after the last K panel.
 */
#ifndef CVF_CPU_KERNELS_H
#define CVF_CPU_KERNELS_H

#include <stdint.h>

#define CVF_CPU_MR 4
#define CVF_CPU_NR 8

/* Portable C micro-kernel, written so that compilers vectorise it. */
void cvf_cpu_kernel_generic(int64_t kc, const float *a, const float *b, float *c, int64_t ldc);

#endif /* CVF_CPU_KERNELS_H */

/* Portable micro-kernel; see kernels.h for the contract. */
#include "cpu/kernels/kernels.h"

void cvf_cpu_kernel_generic(int64_t kc, const float *a, const float *b, float *c, int64_t ldc)
{
    float tile[CVF_CPU_MR][CVF_CPU_NR] = {{0}};
    for (int64_t p = 0; p < kc; p++) {
        const float *ap = a + p * CVF_CPU_MR;
        const float *bp = b + p * CVF_CPU_NR;
        for (int i = 0; i < CVF_CPU_MR; i++)
            for (int j = 0; j < CVF_CPU_NR; j++)
                tile[i][j] += ap[i] * bp[j];
    }
    for (int i = 0; i < CVF_CPU_MR; i++)
        for (int j = 0; j < CVF_CPU_NR; j++)
            c[i * ldc + j] += tile[i][j];
}

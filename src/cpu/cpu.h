/* The CPU backend's internal entry points (the backend table is in cpu_backend.c). */
#ifndef CVF_CPU_CPU_H
#define CVF_CPU_CPU_H

#include "core/internal.h"

/* Bytes of workspace cvf_cpu_matmul needs for this output and epilogue; see gemm.c. */
size_t cvf_cpu_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                const cvf_epilogue *ep);

/* C = epilogue(A @ B) on validated views, with cvf_cpu_matmul_workspace bytes of workspace. */
cvf_status cvf_cpu_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                          const cvf_epilogue *ep, void *workspace);

/* Bytes of workspace cvf_cpu_column_sum needs; see reduce.c. */
size_t cvf_cpu_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x);

/* out = column sums of x on validated views, with cvf_cpu_column_sum_workspace bytes of workspace. */
cvf_status cvf_cpu_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace);

#endif /* CVF_CPU_CPU_H */

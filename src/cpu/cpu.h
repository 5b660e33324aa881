/* The CPU backend's internal entry points (the backend table is in cpu_backend.c). */
#ifndef CVF_CPU_CPU_H
#define CVF_CPU_CPU_H

#include "core/internal.h"

/* C = epilogue(A @ B) on validated views; see gemm.c. */
cvf_status cvf_cpu_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                          const cvf_epilogue *ep);

/* out = column sums of x on validated views; see reduce.c. */
cvf_status cvf_cpu_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out);

#endif /* CVF_CPU_CPU_H */

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

/* The path a product takes through gemm.c (cvf_cpu_matmul's order: the first that applies). */
typedef enum cvf_cpu_path {
    CVF_CPU_PATH_DIRECT,  /* tiny product: A and B read in place by the direct kernel */
    CVF_CPU_PATH_STREAM,  /* 1-4 rows through a row-major B: K slices x column chunks, then their sum */
    CVF_CPU_PATH_DOT,     /* a few rows through a transposed B: the dot tiles */
    CVF_CPU_PATH_ROWS,    /* a few rows through a row-major B: the row tiles */
    CVF_CPU_PATH_SPLIT_K, /* small output, long K: K slices in parallel, summed in order */
    CVF_CPU_PATH_BLOCKED, /* the five BLIS loops over packed blocks */
    CVF_CPU_PATH_NONE     /* M or N is 0: nothing is computed (a bias gradient is zeroed) */
} cvf_cpu_path;

/* What the planner chose for a product (for white-box tests): its path and, for the blocked path,
 * the blocking. The dot and row tiles fall back to the blocked path at run time when A holds
 * subnormals where they would cost assists (gemm.c, scan_a); the plan says what is tried first. */
typedef struct cvf_cpu_plan_info {
    cvf_cpu_path path;
    int32_t threads;             /* threads the call runs on (0 for CVF_CPU_PATH_NONE) */
    int64_t mr, nr;              /* the kernel's tile */
    int64_t kc, mc, nc;          /* block sizes (mc: the largest MC block) */
    int64_t mc_max;              /* the tallest MC block allowed (0: not blocked) */
    int64_t balance_mc;          /* the tallest one the split of few panels among threads may take */
    int64_t ic_blocks;           /* MC blocks of M */
    int64_t jr_chunks;           /* column chunks of an NC block */
    int64_t splits;              /* K slices (split-K path), else 1 */
    int64_t stream_slices;       /* K slices (stream path), else 0 */
    int64_t stream_chunks;       /* column chunks (stream path), else 0 */
    int64_t stream_cols;         /* columns of a chunk (stream path), else 0 */
} cvf_cpu_plan_info;

/* The plan cvf_cpu_matmul would make for these validated views on ctx (nothing is run). */
cvf_cpu_plan_info cvf_cpu_plan_describe(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                        const cvf_matrix *c, const cvf_epilogue *ep);

/* Bytes of workspace cvf_cpu_column_sum needs; see reduce.c. */
size_t cvf_cpu_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x);

/* out = column sums of x on validated views, with cvf_cpu_column_sum_workspace bytes of workspace. */
cvf_status cvf_cpu_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace);

#endif /* CVF_CPU_CPU_H */

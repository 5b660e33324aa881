/*
 * The CUDA backend's host interface (C): the entry points the backend table (cuda_backend.c)
 * calls, implemented in the .cu files of this folder. Every entry point receives validated views
 * whose data are device pointers of the context's GPU, enqueues its kernels on the context's
 * stream and returns without waiting for them.
 *
 *   context.cu     device probe, context set-up, workspace (cudaMalloc), error messages
 *   simple.cu      the portable kernels: the "simple" GEMM (any dtype mix, any strides, the
 *                  debugging oracle for the fast kernel), column sums, the bias-gradient combine
 *   gemm_sm90.cu   the Hopper kernel: TMA ring + mbarriers, producer warpgroup, two consumer
 *                  warpgroups issuing wgmma, persistent grid, fused epilogue on the accumulators
 *   matmul.cu      dispatch: which kernel runs a call, workspace sizes
 *   mlp.cu         the MLP backward: the core's steps on three lanes (streams) joined into one
 */
#ifndef CVF_CUDA_CUDA_H
#define CVF_CUDA_CUDA_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

void *cvf_cuda_workspace_alloc(size_t bytes);
void cvf_cuda_workspace_free(void *memory);

size_t cvf_cuda_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                 const cvf_epilogue *epilogue);
cvf_status cvf_cuda_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                           const cvf_epilogue *epilogue, void *workspace);
size_t cvf_cuda_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x);
cvf_status cvf_cuda_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace);

/* The MLP backward on three lanes (mlp.cu), the dtype it keeps grad_fc1_output in, and the
 * schedule the plan reports for its steps. */
cvf_status cvf_cuda_mlp_backward(cvf_context *ctx, const cvf_mlp_backward_args *args);
cvf_dtype cvf_cuda_mlp_intermediate_dtype(cvf_dtype storage);
void cvf_cuda_mlp_schedule(const cvf_context *ctx, cvf_mlp_step *steps, int count);

/* For white-box tests: the name of the kernel the last matmul on ctx ran ("sm90", "simple",
 * "none" for an empty output), or "" before the first. */
const char *cvf_cuda_last_kernel(const cvf_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CVF_CUDA_CUDA_H */

/* The single-op entry points on the CUDA device: a GEMM or a column sum on the context's stream
 * (lane 0), the GEMM on the engine the context chooses for it (engines.cu). */
#include <cuda_runtime.h>

#include "cuda/device.cuh"

extern "C" size_t cvf_cuda_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                             const cvf_matrix *c, const cvf_epilogue *ep)
{
    return cvf_cuda_gemm_workspace(ctx, a, b, c, ep);
}

extern "C" cvf_status cvf_cuda_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                      const cvf_matrix *c, const cvf_epilogue *ep, void *workspace)
{
    return cvf_cuda_gemm(ctx, cvf_cuda_main_launch(ctx), a, b, c, ep, workspace, true);
}

extern "C" cvf_status cvf_cuda_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out,
                                          void *workspace)
{
    return cvf_cuda_column_sum_on(ctx, cvf_cuda_main_launch(ctx), x, out, workspace);
}

/* CUDA matmul dispatch: the Hopper kernel when it can take the call, else the simple kernel. */
#include <cuda_runtime.h>

#include "cuda/device.cuh"

/* Bias-gradient partials: one fp32 row of C's width per slab of rows. The smaller slab (the
 * Hopper kernel's, 16 rows) bounds both kernels, so the size does not depend on A and B. */
extern "C" size_t cvf_cuda_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                             const cvf_matrix *c, const cvf_epilogue *ep)
{
    (void)a, (void)b;
    (void)ctx;
    if (!ep->bias_grad)
        return 0;
    size_t slabs = (size_t)((c->rows + CVF_CUDA_SM90_SLAB - 1) / CVF_CUDA_SM90_SLAB);
    return cvf_round_up_64(sizeof(float) * slabs * (size_t)c->cols);
}

extern "C" cvf_status cvf_cuda_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                      const cvf_matrix *c, const cvf_epilogue *ep, void *workspace)
{
    float *partials = ep->bias_grad ? (float *)workspace : NULL;
    if (c->cols == 0) {
        ctx->cuda.last_kernel = "none";
        return CVF_STATUS_SUCCESS;
    }
    if (c->rows == 0) { /* sums over no rows: bias_grad = 0 */
        ctx->cuda.last_kernel = "none";
        return ep->bias_grad ? cvf_cuda_combine_partials(ctx, partials, 0, c->cols, ep->bias_grad)
                             : CVF_STATUS_SUCCESS;
    }
    if (ctx->cuda.fast) {
        cvf_status status = cvf_cuda_sm90_matmul(ctx, a, b, c, ep, partials);
        if (status != CVF_STATUS_UNSUPPORTED)
            return status;
    }
    return cvf_cuda_simple_matmul(ctx, a, b, c, ep, partials);
}

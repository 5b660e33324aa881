/* CUDA matmul dispatch: the Hopper kernel when it can take the call, else the simple kernel. */
#include <cuda_runtime.h>

#include "cuda/device.cuh"

/* Bytes of bias-gradient partials: one fp32 row of C's width per slab of rows. The smaller slab
 * (the Hopper kernel's, 16 rows) bounds both kernels, so the size does not depend on A and B. */
static size_t bias_partial_bytes(const cvf_matrix *c, const cvf_epilogue *ep)
{
    if (!ep->bias_grad)
        return 0;
    size_t slabs = (size_t)((c->rows + CVF_CUDA_SM90_SLAB - 1) / CVF_CUDA_SM90_SLAB);
    return cvf_round_up_64(sizeof(float) * slabs * (size_t)c->cols);
}

/* Bytes of the Hopper kernel's split-K exchange, when it may run this product in two K slices
 * (an upper bound: the layout checks come later and may send the call to the simple kernel). */
static size_t split_bytes(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c)
{
    if (!ctx->cuda.fast || a->dtype != b->dtype || (a->dtype != CVF_F16 && a->dtype != CVF_BF16))
        return 0;
    int splits = cvf_cuda_sm90_splits(ctx, c->rows, c->cols, a->cols);
    return cvf_round_up_64(cvf_cuda_sm90_split_bytes(c->rows, c->cols, splits));
}

/* Workspace: the bias-gradient partials, then the split-K exchange. */
extern "C" size_t cvf_cuda_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                             const cvf_matrix *c, const cvf_epilogue *ep)
{
    return bias_partial_bytes(c, ep) + split_bytes(ctx, a, b, c);
}

extern "C" cvf_status cvf_cuda_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                      const cvf_matrix *c, const cvf_epilogue *ep, void *workspace)
{
    float *partials = ep->bias_grad ? (float *)workspace : NULL;
    float *split_partial = split_bytes(ctx, a, b, c) ? (float *)((char *)workspace + bias_partial_bytes(c, ep)) : NULL;
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
        cvf_status status = cvf_cuda_sm90_matmul(ctx, a, b, c, ep, partials, split_partial);
        if (status != CVF_STATUS_UNSUPPORTED)
            return status;
    }
    return cvf_cuda_simple_matmul(ctx, a, b, c, ep, partials);
}

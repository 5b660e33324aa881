/* GEMM-family entry points: validate, reserve the workspace, then dispatch to the backend. */
#include "core/internal.h"

cvf_status cvf_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                      const cvf_epilogue *epilogue)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    cvf_status status = cvf_validate_matmul(ctx, a, b, c, epilogue);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    static const cvf_epilogue plain = {CVF_ACTIVATION_NONE, NULL, NULL, NULL, NULL};
    const cvf_epilogue *ep = epilogue ? epilogue : &plain;
    void *workspace;
    status = cvf_workspace_reserve(ctx, ctx->backend->matmul_workspace(ctx, a, b, c, ep), "matmul", &workspace);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    return ctx->backend->matmul(ctx, a, b, c, ep, workspace);
}

cvf_status cvf_matmul_relu(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c)
{
    const cvf_epilogue relu = {CVF_ACTIVATION_RELU, NULL, NULL, NULL, NULL};
    return cvf_matmul(ctx, a, b, c, &relu);
}

cvf_status cvf_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    cvf_operand operands[2] = {{"x", {0, 0}, false}, {"out", {0, 0}, true}};
    cvf_status status;
    if ((status = cvf_check_matrix(ctx, "x", x, false, &operands[0].span)) ||
        (status = cvf_check_vector(ctx, "out", out, true, &operands[1].span)) ||
        (status = cvf_check_vector_length(ctx, "out", out, x->cols, "x.cols")) ||
        (status = cvf_check_aliasing(ctx, operands, 2)))
        return status;
    void *workspace;
    status = cvf_workspace_reserve(ctx, ctx->backend->column_sum_workspace(ctx, x), "column sum", &workspace);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    return ctx->backend->column_sum(ctx, x, out, workspace);
}

cvf_status cvf_matmul_workspace_size(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                     const cvf_epilogue *epilogue, size_t *bytes)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if (!bytes)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "bytes: the size_t * is NULL");
    cvf_status status = cvf_validate_matmul(ctx, a, b, c, epilogue);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    static const cvf_epilogue plain = {CVF_ACTIVATION_NONE, NULL, NULL, NULL, NULL};
    *bytes = ctx->backend->matmul_workspace(ctx, a, b, c, epilogue ? epilogue : &plain);
    return CVF_STATUS_SUCCESS;
}

/*
 * Vision-MLP forward and backward: validation of the named tensors, then either the backend's
 * own implementation or the core's composition of fused GEMMs (the plan of mlp_plan.c).
 */
#include <stdio.h>

#include "core/internal.h"

/* The three sizes of an MLP: tokens S, hidden H, intermediate I. */
typedef enum mlp_dim { DIM_S = 0, DIM_H = 1, DIM_I = 2, DIM_NONE = 3 } mlp_dim;

static const char *const dim_names[] = {"S", "H", "I", "1"};

/* One named tensor of an MLP call and the shape it must have. Exactly one of matrix/vector. */
typedef struct mlp_tensor {
    const char *name;
    const cvf_matrix *matrix;
    const cvf_vector *vector;
    mlp_dim rows; /* a vector's length */
    mlp_dim cols;
    bool is_output;
} mlp_tensor;

#define MLP_MAX_TENSORS 11

/* Checks every view of the table on its own (pointers, values, dtypes, extents, layouts). */
static cvf_status check_views(cvf_context *ctx, const mlp_tensor *tensors, int count, cvf_operand *operands)
{
    for (int i = 0; i < count; i++) {
        const mlp_tensor *t = &tensors[i];
        operands[i] = (cvf_operand){t->name, {0, 0}, t->is_output};
        cvf_status status = t->matrix ? cvf_check_matrix(ctx, t->name, t->matrix, t->is_output, &operands[i].span)
                                      : cvf_check_vector(ctx, t->name, t->vector, t->is_output, &operands[i].span);
        if (status != CVF_STATUS_SUCCESS)
            return status;
    }
    return CVF_STATUS_SUCCESS;
}

/* Checks that every tensor has the shape its rule names, given dims[S, H, I]. */
static cvf_status check_shapes(cvf_context *ctx, const mlp_tensor *tensors, int count, const int64_t dims[4])
{
    char expected[16];
    for (int i = 0; i < count; i++) {
        const mlp_tensor *t = &tensors[i];
        cvf_status status;
        if (t->matrix) {
            snprintf(expected, sizeof expected, "(%s x %s)", dim_names[t->rows], dim_names[t->cols]);
            status = cvf_check_matrix_shape(ctx, t->name, t->matrix, dims[t->rows], dims[t->cols], expected);
        } else {
            status = cvf_check_vector_length(ctx, t->name, t->vector, dims[t->rows], dim_names[t->rows]);
        }
        if (status != CVF_STATUS_SUCCESS)
            return status;
    }
    return CVF_STATUS_SUCCESS;
}

/* Validates a table whose tensor 0 is (S x H) and whose tensor i_source has I rows. */
static cvf_status validate_mlp(cvf_context *ctx, const mlp_tensor *tensors, int count, int i_source, int64_t dims[4])
{
    cvf_operand operands[MLP_MAX_TENSORS];
    cvf_status status = check_views(ctx, tensors, count, operands);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    dims[DIM_S] = tensors[0].matrix->rows;
    dims[DIM_H] = tensors[0].matrix->cols;
    dims[DIM_I] = tensors[i_source].matrix->rows;
    if ((status = check_shapes(ctx, tensors, count, dims)))
        return status;
    return cvf_check_aliasing(ctx, operands, count);
}

size_t cvf_mlp_step_workspace(const cvf_context *ctx, const cvf_mlp_step *step)
{
    if (step->info.kind == CVF_KERNEL_REDUCTION)
        return ctx->backend->column_sum_workspace(ctx, &step->a);
    return ctx->backend->matmul_workspace(ctx, &step->a, &step->b, &step->c, &step->epilogue);
}

cvf_status cvf_mlp_run_step(cvf_context *ctx, const cvf_mlp_step *step, void *workspace)
{
    const cvf_backend *be = ctx->backend;
    cvf_status status = step->info.kind == CVF_KERNEL_REDUCTION
                            ? be->column_sum(ctx, &step->a, &step->out, workspace)
                            : be->matmul(ctx, &step->a, &step->b, &step->c, &step->epilogue, workspace);
    if (status != CVF_STATUS_SUCCESS) {
        char reason[CVF_MESSAGE_SIZE];
        snprintf(reason, sizeof reason, "%s", ctx->message);
        cvf_fail(ctx, status, "%s (%s): %s", step->info.name, step->info.computes, reason);
    }
    return status;
}

/* Runs steps in order, each with the same scratch workspace (reserved before the first step,
 * so no step can fail for lack of memory after an earlier one stored its output). */
static cvf_status run_steps(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *workspace)
{
    for (int i = 0; i < count; i++) {
        cvf_status status = cvf_mlp_run_step(ctx, &steps[i], workspace);
        if (status != CVF_STATUS_SUCCESS)
            return status;
    }
    return CVF_STATUS_SUCCESS;
}

/* The largest workspace any of the steps needs. */
static size_t steps_workspace(const cvf_context *ctx, const cvf_mlp_step *steps, int count)
{
    size_t most = 0;
    for (int i = 0; i < count; i++) {
        size_t bytes = cvf_mlp_step_workspace(ctx, &steps[i]);
        most = bytes > most ? bytes : most;
    }
    return most;
}

/* The core's forward: fc1 with bias + GELU storing both tensors, then fc2 with bias. */
static cvf_status compose_forward(cvf_context *ctx, const cvf_mlp_forward_args *args)
{
    cvf_mlp_step steps[2] = {{.info = {.name = "fc1",
                                       .computes = "gelu_output = gelu_tanh(fc1_output = "
                                                   "hidden_state @ fc1_weight^T + fc1_bias)"}},
                             {.info = {.name = "fc2", .computes = "output = gelu_output @ fc2_weight^T + fc2_bias"}}};
    steps[0].a = args->hidden_state;
    steps[0].b = cvf_matrix_transpose(args->fc1_weight);
    steps[0].c = args->gelu_output;
    steps[0].epilogue = (cvf_epilogue){CVF_ACTIVATION_GELU_TANH, &args->fc1_bias, NULL, &args->fc1_output, NULL};
    steps[1].a = args->gelu_output;
    steps[1].b = cvf_matrix_transpose(args->fc2_weight);
    steps[1].c = args->output;
    steps[1].epilogue = (cvf_epilogue){CVF_ACTIVATION_NONE, &args->fc2_bias, NULL, NULL, NULL};
    void *workspace;
    cvf_status status = cvf_workspace_reserve(ctx, steps_workspace(ctx, steps, 2), "mlp forward", &workspace);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    return run_steps(ctx, steps, 2, workspace);
}

/* The core's backward: the steps of cvf_mlp_backward_steps (K1 fused, K2-1..3, K3), with
 * grad_fc1_output at the start of the workspace and the kernels' scratch after it. */
static cvf_status compose_backward(cvf_context *ctx, const cvf_mlp_backward_args *args, const int64_t dims[4])
{
    cvf_dtype keep = cvf_mlp_intermediate_dtype(ctx, args->grad_output.dtype);
    int64_t elements;
    size_t bytes;
    if (__builtin_mul_overflow(dims[DIM_S], dims[DIM_I], &elements) ||
        __builtin_mul_overflow((size_t)elements, cvf_dtype_size(keep), &bytes) || bytes > SIZE_MAX / 2)
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "grad_fc1_output workspace: S x I = %lld x %lld overflows",
                        (long long)dims[DIM_S], (long long)dims[DIM_I]);
    cvf_matrix grad_fc1_output = cvf_matrix_row_major(NULL, keep, dims[DIM_S], dims[DIM_I]);
    cvf_mlp_step steps[CVF_PLAN_MAX_KERNELS];
    int count = cvf_mlp_backward_steps(args, &grad_fc1_output, steps);
    size_t held = cvf_round_up_64(bytes), scratch = steps_workspace(ctx, steps, count);
    if (scratch > SIZE_MAX - held)
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "mlp backward: workspace size overflows");
    void *workspace;
    cvf_status status =
        cvf_workspace_reserve(ctx, held + scratch, "mlp backward (grad_fc1_output + scratch)", &workspace);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    grad_fc1_output.data = workspace;
    count = cvf_mlp_backward_steps(args, &grad_fc1_output, steps);
    return run_steps(ctx, steps, count, workspace ? (char *)workspace + held : NULL);
}

cvf_dtype cvf_mlp_intermediate_dtype(const cvf_context *ctx, cvf_dtype storage)
{
    const cvf_backend *be = ctx->backend;
    return be->mlp_intermediate_dtype ? be->mlp_intermediate_dtype(storage) : be->accumulate_dtype;
}

cvf_status cvf_mlp_forward(cvf_context *ctx, const cvf_mlp_forward_args *args)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if (!args)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "args: the cvf_mlp_forward_args pointer is NULL");
    const mlp_tensor tensors[] = {
        {"hidden_state", &args->hidden_state, NULL, DIM_S, DIM_H, false},
        {"fc1_weight", &args->fc1_weight, NULL, DIM_I, DIM_H, false},
        {"fc1_bias", NULL, &args->fc1_bias, DIM_I, DIM_NONE, false},
        {"fc2_weight", &args->fc2_weight, NULL, DIM_H, DIM_I, false},
        {"fc2_bias", NULL, &args->fc2_bias, DIM_H, DIM_NONE, false},
        {"fc1_output", &args->fc1_output, NULL, DIM_S, DIM_I, true},
        {"gelu_output", &args->gelu_output, NULL, DIM_S, DIM_I, true},
        {"output", &args->output, NULL, DIM_S, DIM_H, true},
    };
    int64_t dims[4] = {0, 0, 0, 1};
    cvf_status status = validate_mlp(ctx, tensors, (int)(sizeof tensors / sizeof tensors[0]), 1, dims);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (ctx->backend->mlp_forward)
        return ctx->backend->mlp_forward(ctx, args);
    return compose_forward(ctx, args);
}

cvf_status cvf_mlp_backward(cvf_context *ctx, const cvf_mlp_backward_args *args)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if (!args)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "args: the cvf_mlp_backward_args pointer is NULL");
    const mlp_tensor tensors[] = {
        {"grad_output", &args->grad_output, NULL, DIM_S, DIM_H, false},
        {"hidden_state", &args->hidden_state, NULL, DIM_S, DIM_H, false},
        {"fc1_weight", &args->fc1_weight, NULL, DIM_I, DIM_H, false},
        {"fc2_weight", &args->fc2_weight, NULL, DIM_H, DIM_I, false},
        {"fc1_output", &args->fc1_output, NULL, DIM_S, DIM_I, false},
        {"gelu_output", &args->gelu_output, NULL, DIM_S, DIM_I, false},
        {"grad_hidden_state", &args->grad_hidden_state, NULL, DIM_S, DIM_H, true},
        {"grad_fc1_weight", &args->grad_fc1_weight, NULL, DIM_I, DIM_H, true},
        {"grad_fc1_bias", NULL, &args->grad_fc1_bias, DIM_I, DIM_NONE, true},
        {"grad_fc2_weight", &args->grad_fc2_weight, NULL, DIM_H, DIM_I, true},
        {"grad_fc2_bias", NULL, &args->grad_fc2_bias, DIM_H, DIM_NONE, true},
    };
    int64_t dims[4] = {0, 0, 0, 1};
    cvf_status status = validate_mlp(ctx, tensors, (int)(sizeof tensors / sizeof tensors[0]), 2, dims);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (ctx->backend->mlp_backward)
        return ctx->backend->mlp_backward(ctx, args);
    return compose_backward(ctx, args, dims);
}

/* TODO(issue 10): replaced by the step layout below. */
cvf_status cvf_mlp_forward_workspace_size(cvf_context *ctx, const cvf_mlp_forward_args *args, size_t *bytes)
{
    (void)args;
    (void)bytes;
    return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "not yet");
}

cvf_status cvf_mlp_backward_workspace_size(cvf_context *ctx, const cvf_mlp_backward_args *args, size_t *bytes)
{
    (void)args;
    (void)bytes;
    return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "not yet");
}

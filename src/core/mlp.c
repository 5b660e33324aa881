/*
 * Vision-MLP forward and backward: validation of the named tensors, then either the backend's
 * own implementation or the core's composition of fused GEMMs (the plan of mlp_plan.c).
 */
#include <stdio.h>
#include <string.h>

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
    bool optional; /* may be absent: an all-zero view */
} mlp_tensor;

#define MLP_MAX_TENSORS 11

/* True for an absent optional matrix: the all-zero view {0}. */
static bool matrix_absent(const cvf_matrix *m)
{
    return m->data == NULL && m->rows == 0 && m->cols == 0 && m->row_stride == 0 && m->col_stride == 0 &&
           m->dtype == CVF_F32;
}

/* Drops the absent optional tensors from the table; returns how many are left. */
static int present_tensors(mlp_tensor *tensors, int count)
{
    int kept = 0;
    for (int i = 0; i < count; i++)
        if (!(tensors[i].optional && tensors[i].matrix && matrix_absent(tensors[i].matrix)))
            tensors[kept++] = tensors[i];
    return kept;
}

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

/* Checks the GELU kind of an MLP call. */
static cvf_status check_gelu(cvf_context *ctx, cvf_gelu gelu)
{
    if (gelu != CVF_GELU_TANH && gelu != CVF_GELU_ERF)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "args.gelu: %d is not a cvf_gelu value (0 tanh, 1 erf)",
                        (int)gelu);
    return CVF_STATUS_SUCCESS;
}

/* ---- tensor parallelism ---------------------------------------------------------------- */

cvf_status cvf_tensor_parallel_slice(int64_t intermediate, int32_t size, int32_t rank, int64_t *offset,
                                     int64_t *length)
{
    if (!offset || !length || size < 1 || rank < 0 || rank >= size || intermediate < 0)
        return CVF_STATUS_INVALID_VALUE;
    int64_t base = intermediate / size, extra = intermediate % size;
    *length = base + (rank < extra ? 1 : 0);
    *offset = rank * base + (rank < extra ? rank : extra);
    return CVF_STATUS_SUCCESS;
}

/* How a dense matrix orders its elements: 1 row-major, 2 column-major (1 when both hold: a single
 * row or column), 0 not dense (padding, broadcast, or another order). */
static int dense_order(const cvf_matrix *m)
{
    if ((m->rows <= 1 || m->row_stride == m->cols) && (m->cols <= 1 || m->col_stride == 1))
        return 1;
    if ((m->rows <= 1 || m->row_stride == 1) && (m->cols <= 1 || m->col_stride == m->rows))
        return 2;
    return 0;
}

/* Checks args.tp's own fields and its communicator (before the views). *agree is set when the
 * ranks will run the agreement: a communicator is given, the backend can use it and the caller did
 * not skip it. The agreement runs even after a failed check, so that a rank that rejects its call
 * still tells the others (and they do not wait in a collective it never joins). */
static cvf_status check_tp(cvf_context *ctx, const cvf_tensor_parallel *tp, bool *agree)
{
    *agree = false;
    cvf_status status = CVF_STATUS_SUCCESS;
    if (tp->size < 0)
        status = cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "args.tp.size: %d, expected >= 0 (0: not split)",
                          (int)tp->size);
    else if (!cvf_tp_split(tp) && (tp->rank || tp->intermediate || tp->nccl_comm || tp->flags))
        status = cvf_fail(ctx, CVF_STATUS_INVALID_VALUE,
                          "args.tp: size 0 (not split) with rank %d, intermediate %lld, nccl_comm %p, flags %u "
                          "(all must be 0 when size is 0)",
                          (int)tp->rank, (long long)tp->intermediate, tp->nccl_comm, (unsigned)tp->flags);
    else if (cvf_tp_split(tp) && (tp->rank < 0 || tp->rank >= tp->size))
        status = cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "args.tp.rank: %d, expected 0 <= rank < size = %d",
                          (int)tp->rank, (int)tp->size);
    else if (tp->intermediate < 0)
        status = cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "args.tp.intermediate: %lld, expected >= 0",
                          (long long)tp->intermediate);
    else if (tp->flags & ~CVF_TP_SKIP_AGREEMENT)
        status = cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "args.tp.flags: 0x%x has bits no CVF_TP_* flag names",
                          (unsigned)tp->flags);
    if (!tp->nccl_comm)
        return status;
    if (!ctx->backend->tp_check_comm) {
        if (status != CVF_STATUS_SUCCESS)
            return status;
        if (ctx->device == CVF_DEVICE_CUDA)
            return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED,
                            "args.tp.nccl_comm: this cvfuse was built without NCCL (CVF_NCCL): leave nccl_comm NULL "
                            "(partial mode) and sum output / grad_hidden_state over the ranks yourself");
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED,
                        "args.tp.nccl_comm: the %s device cannot communicate (NCCL is for CUDA contexts): leave "
                        "nccl_comm NULL (partial mode) and sum output / grad_hidden_state over the ranks yourself",
                        cvf_device_name(ctx->device));
    }
    *agree = !(tp->flags & CVF_TP_SKIP_AGREEMENT);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    status = ctx->backend->tp_check_comm(ctx, tp);
    if (status == CVF_STATUS_COMMUNICATION_FAILED)
        *agree = false; /* a broken communicator cannot carry the agreement */
    return status;
}

/* Checks the rank's slice against tp (I is the call's intermediate size) and that the matrix the
 * call all-reduces (when it has a communicator) is dense. */
static cvf_status check_tp_shapes(cvf_context *ctx, const cvf_tensor_parallel *tp, int64_t I,
                                  const cvf_matrix *reduced, const char *reduced_name)
{
    int64_t offset = 0, length = 0;
    if (!cvf_tp_split(tp) || cvf_tensor_parallel_slice(tp->intermediate, tp->size, tp->rank, &offset, &length))
        return CVF_STATUS_SUCCESS;
    if (I != length)
        return cvf_fail(ctx, CVF_STATUS_SHAPE_MISMATCH,
                        "args.tp: this rank (%d of %d) holds I = %lld rows of the intermediate dimension, expected its "
                        "slice of tp.intermediate = %lld: %lld (rows %lld..%lld; torch.tensor_split's rule, see "
                        "cvf_tensor_parallel_slice)",
                        (int)tp->rank, (int)tp->size, (long long)I, (long long)tp->intermediate, (long long)length,
                        (long long)offset, (long long)(offset + length - 1));
    if (tp->nccl_comm && dense_order(reduced) == 0)
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED,
                        "%s: the all-reduce over the ranks needs a dense view (row- or column-major without padding), "
                        "got strides (row %lld, col %lld) for (%lld x %lld)",
                        reduced_name, (long long)reduced->row_stride, (long long)reduced->col_stride,
                        (long long)reduced->rows, (long long)reduced->cols);
    return CVF_STATUS_SUCCESS;
}

/* What the ranks of a call must agree on (besides every rank's arguments being valid). */
enum { TP_FACT_OP, TP_FACT_S, TP_FACT_H, TP_FACT_I, TP_FACT_SIZE, TP_FACT_DTYPE, TP_FACT_ORDER, TP_FACT_GELU,
       TP_FACT_COUNT };
static const char *const tp_fact_names[TP_FACT_COUNT] = {
    "the operation (1 forward, 2 backward)", "S (tokens)", "H (hidden)", "tp.intermediate", "tp.size",
    "the dtype of the all-reduced output", "the layout of the all-reduced output (1 row-, 2 column-major)",
    "the GELU"};

/* The agreement of the ranks of tp.nccl_comm on this call: local is this rank's status so far.
 * Returns local when it failed (its message kept), COMMUNICATION_FAILED when the exchange fails,
 * PEER_FAILED when another rank failed or the ranks' facts differ, else SUCCESS. */
static cvf_status agree_ranks(cvf_context *ctx, const cvf_tensor_parallel *tp, cvf_status local,
                              const int64_t facts[TP_FACT_COUNT])
{
    int64_t v[1 + 2 * TP_FACT_COUNT];
    v[0] = local != CVF_STATUS_SUCCESS;
    for (int i = 0; i < TP_FACT_COUNT; i++) {
        v[1 + 2 * i] = v[0] ? 0 : facts[i];
        v[2 + 2 * i] = -v[1 + 2 * i];
    }
    char saved[CVF_MESSAGE_SIZE];
    memcpy(saved, ctx->message, sizeof saved);
    cvf_status status = ctx->backend->tp_agree(ctx, tp->nccl_comm, v, 1 + 2 * TP_FACT_COUNT);
    if (local != CVF_STATUS_SUCCESS) {
        memcpy(ctx->message, saved, sizeof saved);
        return local;
    }
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (v[0])
        return cvf_fail(ctx, CVF_STATUS_PEER_FAILED,
                        "args.tp: another rank of the communicator rejected its arguments (its own status and message "
                        "say why); nothing was written on any rank");
    for (int i = 0; i < TP_FACT_COUNT; i++)
        if (v[1 + 2 * i] != -v[2 + 2 * i])
            return cvf_fail(ctx, CVF_STATUS_PEER_FAILED,
                            "args.tp: the ranks disagree on %s: %lld here, from %lld to %lld over the ranks; nothing "
                            "was written on any rank",
                            tp_fact_names[i], (long long)facts[i], (long long)-v[2 + 2 * i], (long long)v[1 + 2 * i]);
    return CVF_STATUS_SUCCESS;
}

/* The facts of a validated call (op 1 forward, 2 backward) whose all-reduced matrix is reduced. */
static void tp_facts(int64_t op, const int64_t dims[4], const cvf_tensor_parallel *tp, const cvf_matrix *reduced,
                     cvf_gelu gelu, int64_t facts[TP_FACT_COUNT])
{
    facts[TP_FACT_OP] = op;
    facts[TP_FACT_S] = dims[DIM_S];
    facts[TP_FACT_H] = dims[DIM_H];
    facts[TP_FACT_I] = tp->intermediate;
    facts[TP_FACT_SIZE] = tp->size;
    facts[TP_FACT_DTYPE] = (int64_t)reduced->dtype;
    facts[TP_FACT_ORDER] = dense_order(reduced);
    facts[TP_FACT_GELU] = (int64_t)gelu;
}

/* ---- validation -------------------------------------------------------------------------- */

/* Validates the views of a forward call (absent optional outputs skipped); dims gets S, H, I.
 * args.tp's own fields are checked by check_tp. */
static cvf_status validate_forward(cvf_context *ctx, const cvf_mlp_forward_args *args, int64_t dims[4])
{
    mlp_tensor tensors[] = {
        {"hidden_state", &args->hidden_state, NULL, DIM_S, DIM_H, false, false},
        {"fc1_weight", &args->fc1_weight, NULL, DIM_I, DIM_H, false, false},
        {"fc1_bias", NULL, &args->fc1_bias, DIM_I, DIM_NONE, false, false},
        {"fc2_weight", &args->fc2_weight, NULL, DIM_H, DIM_I, false, false},
        {"fc2_bias", NULL, &args->fc2_bias, DIM_H, DIM_NONE, false, false},
        {"fc1_output", &args->fc1_output, NULL, DIM_S, DIM_I, true, true},
        {"gelu_output", &args->gelu_output, NULL, DIM_S, DIM_I, true, true},
        {"output", &args->output, NULL, DIM_S, DIM_H, true, false},
    };
    int count = present_tensors(tensors, (int)(sizeof tensors / sizeof tensors[0]));
    cvf_status status = validate_mlp(ctx, tensors, count, 1, dims);
    if (status == CVF_STATUS_SUCCESS)
        status = check_gelu(ctx, args->gelu);
    return status != CVF_STATUS_SUCCESS ? status : check_tp_shapes(ctx, &args->tp, dims[DIM_I], &args->output, "output");
}

/* Validates the views of a backward call; dims gets S, H, I. */
static cvf_status validate_backward(cvf_context *ctx, const cvf_mlp_backward_args *args, int64_t dims[4])
{
    mlp_tensor tensors[] = {
        {"grad_output", &args->grad_output, NULL, DIM_S, DIM_H, false, false},
        {"hidden_state", &args->hidden_state, NULL, DIM_S, DIM_H, false, false},
        {"fc1_weight", &args->fc1_weight, NULL, DIM_I, DIM_H, false, false},
        {"fc2_weight", &args->fc2_weight, NULL, DIM_H, DIM_I, false, false},
        {"fc1_output", &args->fc1_output, NULL, DIM_S, DIM_I, false, false},
        {"gelu_output", &args->gelu_output, NULL, DIM_S, DIM_I, false, false},
        {"grad_hidden_state", &args->grad_hidden_state, NULL, DIM_S, DIM_H, true, false},
        {"grad_fc1_weight", &args->grad_fc1_weight, NULL, DIM_I, DIM_H, true, false},
        {"grad_fc1_bias", NULL, &args->grad_fc1_bias, DIM_I, DIM_NONE, true, false},
        {"grad_fc2_weight", &args->grad_fc2_weight, NULL, DIM_H, DIM_I, true, false},
        {"grad_fc2_bias", NULL, &args->grad_fc2_bias, DIM_H, DIM_NONE, true, false},
    };
    cvf_status status = validate_mlp(ctx, tensors, (int)(sizeof tensors / sizeof tensors[0]), 2, dims);
    if (status == CVF_STATUS_SUCCESS)
        status = check_gelu(ctx, args->gelu);
    return status != CVF_STATUS_SUCCESS ? status
                                        : check_tp_shapes(ctx, &args->tp, dims[DIM_I], &args->grad_hidden_state,
                                                          "grad_hidden_state");
}

/* Every check of a forward call that needs no backend work, for the call and its size query alike:
 * args present, args.tp's own fields (*agree: whether the ranks will run the agreement), the views;
 * dims gets S, H, I. */
static cvf_status check_forward(cvf_context *ctx, const cvf_mlp_forward_args *args, int64_t dims[4], bool *agree)
{
    *agree = false;
    if (!args)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "args: the cvf_mlp_forward_args pointer is NULL");
    cvf_status status = check_tp(ctx, &args->tp, agree);
    return status == CVF_STATUS_SUCCESS ? validate_forward(ctx, args, dims) : status;
}

/* The same for a backward call. */
static cvf_status check_backward(cvf_context *ctx, const cvf_mlp_backward_args *args, int64_t dims[4], bool *agree)
{
    *agree = false;
    if (!args)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "args: the cvf_mlp_backward_args pointer is NULL");
    cvf_status status = check_tp(ctx, &args->tp, agree);
    return status == CVF_STATUS_SUCCESS ? validate_backward(ctx, args, dims) : status;
}

size_t cvf_mlp_step_workspace(const cvf_context *ctx, const cvf_mlp_step *step)
{
    if (step->info.kind == CVF_KERNEL_ALL_REDUCE)
        return 0;
    if (step->info.kind == CVF_KERNEL_REDUCTION)
        return ctx->backend->column_sum_workspace(ctx, &step->a);
    return ctx->backend->matmul_workspace(ctx, &step->a, &step->b, &step->c, &step->epilogue);
}

void cvf_mlp_step_failed(cvf_context *ctx, const cvf_mlp_step *step)
{
    char reason[CVF_MESSAGE_SIZE];
    snprintf(reason, sizeof reason, "%s", ctx->message);
    cvf_fail(ctx, CVF_STATUS_SUCCESS, "%s (%s): %s", step->info.name, step->info.computes, reason);
}

cvf_status cvf_mlp_run_step(cvf_context *ctx, const cvf_mlp_step *step, void *workspace)
{
    const cvf_backend *be = ctx->backend;
    if (step->info.kind == CVF_KERNEL_ALL_REDUCE) /* validation admits a communicator only where run_steps runs it */
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "%s: an all-reduce step on the %s backend", step->info.name,
                        be->name);
    cvf_status status = step->info.kind == CVF_KERNEL_REDUCTION
                            ? be->column_sum(ctx, &step->a, &step->out, workspace)
                            : be->matmul(ctx, &step->a, &step->b, &step->c, &step->epilogue, workspace);
    if (status != CVF_STATUS_SUCCESS)
        cvf_mlp_step_failed(ctx, step);
    return status;
}

/*
 * The memory of one MLP call: the intermediate the core keeps (grad_fc1_output in the backward,
 * gelu_output of an inference forward), then the steps' scratch — one piece per step when the
 * backend runs the steps itself (they may run at the same time), else one piece they share.
 */
typedef struct mlp_layout {
    cvf_mlp_step steps[CVF_PLAN_MAX_KERNELS];
    int count;
    bool has_intermediate;
    cvf_matrix intermediate; /* data NULL until bound */
    size_t held;             /* bytes of the intermediate, rounded to 256 */
    size_t scratch[CVF_PLAN_MAX_KERNELS]; /* offset of each step's scratch */
    size_t total;
} mlp_layout;

/* Composes the steps (with the intermediate at data, NULL while sizing). */
typedef int (*compose_fn)(const void *args, mlp_layout *layout);

/* The backward's steps over the layout's grad_fc1_output. */
static int compose_backward(const void *args, mlp_layout *l)
{
    return cvf_mlp_backward_steps((const cvf_mlp_backward_args *)args, &l->intermediate, l->steps);
}

/* The forward's steps: fc1 stores into the caller's gelu_output, or the layout's intermediate. */
static int compose_forward(const void *args, mlp_layout *l)
{
    const cvf_mlp_forward_args *a = (const cvf_mlp_forward_args *)args;
    const cvf_matrix *gelu = l->has_intermediate ? &l->intermediate : &a->gelu_output;
    const cvf_matrix *fc1 = matrix_absent(&a->fc1_output) ? NULL : &a->fc1_output;
    return cvf_mlp_forward_steps(a, gelu, fc1, l->steps);
}

/* Sizes the scratch of l's steps after the intermediate; SIZE_OVERFLOW when it cannot be. */
static cvf_status size_layout(cvf_context *ctx, mlp_layout *l)
{
    const bool separate = ctx->backend->run_steps != NULL;
    size_t total = l->held, shared = 0;
    for (int i = 0; i < l->count; i++) {
        size_t bytes = cvf_round_up_256(cvf_mlp_step_workspace(ctx, &l->steps[i]));
        if (bytes > SIZE_MAX / 4 - total)
            return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "mlp: workspace size overflows");
        l->scratch[i] = separate ? total : l->held;
        if (separate)
            total += bytes;
        else
            shared = bytes > shared ? bytes : shared;
    }
    l->total = total + shared;
    return CVF_STATUS_SUCCESS;
}

/* Lays out a call whose intermediate (if any) is rows x cols of dtype. */
static cvf_status plan_layout(cvf_context *ctx, const void *args, compose_fn compose, bool has_intermediate,
                              int64_t rows, int64_t cols, cvf_dtype dtype, mlp_layout *l)
{
    *l = (mlp_layout){.has_intermediate = has_intermediate};
    if (has_intermediate && !cvf_intermediate_view(rows, cols, dtype, &l->intermediate, &l->held))
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "mlp intermediate: %lld x %lld overflows", (long long)rows,
                        (long long)cols);
    l->count = compose(args, l);
    return size_layout(ctx, l);
}

/* Binds the layout to workspace and runs its steps (the backend's own runner, else in order). */
static cvf_status run_layout(cvf_context *ctx, const void *args, compose_fn compose, mlp_layout *l, void *workspace)
{
    if (l->has_intermediate)
        l->intermediate.data = workspace;
    l->count = compose(args, l);
    void *pieces[CVF_PLAN_MAX_KERNELS];
    for (int i = 0; i < l->count; i++)
        pieces[i] = workspace ? (char *)workspace + l->scratch[i] : NULL;
    if (ctx->backend->run_steps)
        return ctx->backend->run_steps(ctx, l->steps, l->count, pieces);
    for (int i = 0; i < l->count; i++) {
        cvf_status status = cvf_mlp_run_step(ctx, &l->steps[i], pieces[i]);
        if (status != CVF_STATUS_SUCCESS)
            return status;
    }
    return CVF_STATUS_SUCCESS;
}

/* The forward's layout: an inference call without gelu_output keeps it in the workspace. */
static cvf_status forward_layout(cvf_context *ctx, const cvf_mlp_forward_args *args, const int64_t dims[4],
                                 mlp_layout *l)
{
    bool keep = matrix_absent(&args->gelu_output);
    return plan_layout(ctx, args, compose_forward, keep, dims[DIM_S], dims[DIM_I], args->output.dtype, l);
}

/* The backward's layout: grad_fc1_output in the backend's intermediate dtype. */
static cvf_status backward_layout(cvf_context *ctx, const cvf_mlp_backward_args *args, const int64_t dims[4],
                                  mlp_layout *l)
{
    /* a mix of dtypes among the operands of the GEMMs that read grad_fc1_output keeps it in fp32:
     * a 16-bit copy would lose precision without making those GEMMs 16-bit ones */
    cvf_dtype storage = args->grad_output.dtype;
    if (args->hidden_state.dtype != storage || args->fc1_weight.dtype != storage)
        storage = CVF_F32;
    cvf_dtype keep = cvf_mlp_intermediate_dtype(ctx, storage);
    return plan_layout(ctx, args, compose_backward, true, dims[DIM_S], dims[DIM_I], keep, l);
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
    bool agree;
    int64_t dims[4] = {0, 0, 0, 1};
    cvf_status status = check_forward(ctx, args, dims, &agree);
    /* everything that can fail before the first store, on every rank, comes before the agreement */
    mlp_layout layout;
    void *workspace = NULL;
    const bool oracle = ctx->backend->mlp_forward_oracle != NULL;
    if (status == CVF_STATUS_SUCCESS && !oracle &&
        (status = forward_layout(ctx, args, dims, &layout)) == CVF_STATUS_SUCCESS)
        status = cvf_workspace_reserve(ctx, layout.total, "mlp forward", &workspace);
    if (agree) {
        int64_t facts[TP_FACT_COUNT];
        tp_facts(1, dims, &args->tp, &args->output, args->gelu, facts);
        status = agree_ranks(ctx, &args->tp, status, facts);
    }
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (oracle)
        return ctx->backend->mlp_forward_oracle(ctx, args);
    return run_layout(ctx, args, compose_forward, &layout, workspace);
}

/* The start of a size query: ctx and bytes present, error cleared. */
static cvf_status begin_size_query(cvf_context *ctx, size_t *bytes)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if (!bytes)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "bytes: the size_t * is NULL");
    return CVF_STATUS_SUCCESS;
}

/* Stores a layout's size in *bytes, or passes on the status of laying it out. */
static cvf_status layout_size(cvf_status status, const mlp_layout *layout, size_t *bytes)
{
    if (status == CVF_STATUS_SUCCESS)
        *bytes = layout->total;
    return status;
}

cvf_status cvf_mlp_forward_workspace_size(cvf_context *ctx, const cvf_mlp_forward_args *args, size_t *bytes)
{
    int64_t dims[4] = {0, 0, 0, 1};
    bool agree;
    cvf_status status = begin_size_query(ctx, bytes);
    if (status == CVF_STATUS_SUCCESS)
        status = check_forward(ctx, args, dims, &agree);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    *bytes = 0; /* written only by a valid query */
    if (ctx->backend->mlp_forward_oracle) /* the oracle needs none */
        return CVF_STATUS_SUCCESS;
    mlp_layout layout;
    return layout_size(forward_layout(ctx, args, dims, &layout), &layout, bytes);
}

cvf_status cvf_mlp_backward(cvf_context *ctx, const cvf_mlp_backward_args *args)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    bool agree;
    int64_t dims[4] = {0, 0, 0, 1};
    cvf_status status = check_backward(ctx, args, dims, &agree);
    /* everything that can fail before the first store, on every rank, comes before the agreement */
    mlp_layout layout;
    void *workspace = NULL;
    const bool oracle = ctx->backend->mlp_backward_oracle != NULL;
    if (status == CVF_STATUS_SUCCESS && !oracle &&
        (status = backward_layout(ctx, args, dims, &layout)) == CVF_STATUS_SUCCESS)
        status = cvf_workspace_reserve(ctx, layout.total, "mlp backward (grad_fc1_output + scratch)", &workspace);
    if (agree) {
        int64_t facts[TP_FACT_COUNT];
        tp_facts(2, dims, &args->tp, &args->grad_hidden_state, args->gelu, facts);
        status = agree_ranks(ctx, &args->tp, status, facts);
    }
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (oracle)
        return ctx->backend->mlp_backward_oracle(ctx, args);
    return run_layout(ctx, args, compose_backward, &layout, workspace);
}

cvf_status cvf_mlp_backward_workspace_size(cvf_context *ctx, const cvf_mlp_backward_args *args, size_t *bytes)
{
    int64_t dims[4] = {0, 0, 0, 1};
    bool agree;
    cvf_status status = begin_size_query(ctx, bytes);
    if (status == CVF_STATUS_SUCCESS)
        status = check_backward(ctx, args, dims, &agree);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    *bytes = 0; /* written only by a valid query */
    if (ctx->backend->mlp_backward_oracle) /* the oracle needs none */
        return CVF_STATUS_SUCCESS;
    mlp_layout layout;
    return layout_size(backward_layout(ctx, args, dims, &layout), &layout, bytes);
}

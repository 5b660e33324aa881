/*
 * The MLP backward plan: which kernels run, what rides in their epilogues, how many bytes each
 * moves and what the fusion saves against an unfused run. The steps come from one function,
 * cvf_mlp_backward_steps, which also gives cvf_mlp_backward (mlp.c) the operands it runs: what
 * the plan says is what runs.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"

/* Bytes of the elements of a matrix view. */
static uint64_t matrix_bytes(const cvf_matrix *m)
{
    return (uint64_t)m->rows * (uint64_t)m->cols * cvf_dtype_size(m->dtype);
}

/* Bytes of the elements of a vector view (0 for a NULL view). */
static uint64_t vector_bytes(const cvf_vector *v)
{
    return v ? (uint64_t)v->length * cvf_dtype_size(v->dtype) : 0;
}

/* Fills a step's shape, FLOPs and minimum bytes moved from its operands. */
static void measure_step(cvf_mlp_step *step)
{
    cvf_kernel_info *info = &step->info;
    const cvf_epilogue *ep = &step->epilogue;
    if (info->kind == CVF_KERNEL_ALL_REDUCE) { /* in place: the local read and write (the wire not counted) */
        info->m = step->c.rows;
        info->n = step->c.cols;
        info->k = 0;
        info->flops = 0;
        info->bytes = 2 * matrix_bytes(&step->c);
        return;
    }
    if (info->kind == CVF_KERNEL_REDUCTION) {
        info->m = step->a.rows;
        info->n = step->a.cols;
        info->k = 0;
        info->flops = (uint64_t)step->a.rows * (uint64_t)step->a.cols;
        info->bytes = matrix_bytes(&step->a) + vector_bytes(&step->out);
        return;
    }
    info->m = step->c.rows;
    info->n = step->c.cols;
    info->k = step->a.cols;
    info->flops = 2 * (uint64_t)info->m * (uint64_t)info->n * (uint64_t)info->k;
    info->bytes = matrix_bytes(&step->a) + matrix_bytes(&step->b) + matrix_bytes(&step->c) + vector_bytes(ep->bias) +
                  (ep->aux_in ? matrix_bytes(ep->aux_in) : 0) + (ep->aux_out ? matrix_bytes(ep->aux_out) : 0) +
                  vector_bytes(ep->bias_grad);
}

/* A GEMM step c = epilogue(a @ b). */
static cvf_mlp_step gemm_step(cvf_step_id id, const char *name, const char *computes, const char *fused,
                              cvf_matrix a, cvf_matrix b, cvf_matrix c, cvf_epilogue epilogue)
{
    cvf_mlp_step step = {.id = id,
                         .info = {.name = name,
                                  .computes = computes,
                                  .fused = fused,
                                  .kind = fused[0] ? CVF_KERNEL_FUSED_GEMM : CVF_KERNEL_GEMM,
                                  .engine = "",
                                  .choice = ""},
                         .a = a,
                         .b = b,
                         .c = c,
                         .epilogue = epilogue};
    measure_step(&step);
    return step;
}

/* The bit of step index i in a step's needs. */
static uint32_t step_bit(int i)
{
    return (uint32_t)1 << i;
}

/* A tensor-parallel all-reduce: c summed over the ranks of comm, in place. */
static cvf_mlp_step all_reduce_step(cvf_step_id id, const char *name, const char *computes, cvf_matrix c, void *comm)
{
    cvf_mlp_step step = {.id = id,
                         .info = {.name = name,
                                  .computes = computes,
                                  .fused = "",
                                  .kind = CVF_KERNEL_ALL_REDUCE,
                                  .engine = "",
                                  .choice = ""},
                         .c = c,
                         .comm = comm};
    measure_step(&step);
    return step;
}

int cvf_mlp_backward_steps(const cvf_mlp_backward_args *args, const cvf_matrix *grad_fc1_output, cvf_mlp_step *steps)
{
    const bool erf = args->gelu == CVF_GELU_ERF;
    const cvf_epilogue plain = {.activation = CVF_ACTIVATION_NONE};
    const cvf_epilogue k1 = {.activation = erf ? CVF_ACTIVATION_DGELU_ERF : CVF_ACTIVATION_DGELU_TANH,
                             .aux_in = &args->fc1_output,
                             .bias_grad = &args->grad_fc1_bias};
    steps[0] = gemm_step(CVF_STEP_K1, "K1",
                         erf ? "grad_fc1_output = (grad_output @ fc2_weight) * gelu_erf'(fc1_output)"
                             : "grad_fc1_output = (grad_output @ fc2_weight) * gelu_tanh'(fc1_output)",
                         erf ? "x gelu_erf'(fc1_output) on the fp32 tile; grad_fc1_bias column sums"
                             : "x gelu_tanh'(fc1_output) on the fp32 tile; grad_fc1_bias column sums",
                         args->grad_output, args->fc2_weight, *grad_fc1_output, k1);
    steps[1] = gemm_step(CVF_STEP_K2_1, "K2-1", "grad_fc2_weight = grad_output^T @ gelu_output", "",
                         cvf_matrix_transpose(args->grad_output), args->gelu_output, args->grad_fc2_weight, plain);
    steps[2] = gemm_step(CVF_STEP_K2_2, "K2-2", "grad_fc1_weight = grad_fc1_output^T @ hidden_state", "",
                         cvf_matrix_transpose(*grad_fc1_output), args->hidden_state, args->grad_fc1_weight, plain);
    steps[2].needs = step_bit(0);
    steps[3] = gemm_step(CVF_STEP_K2_3, "K2-3", "grad_hidden_state = grad_fc1_output @ fc1_weight", "",
                         *grad_fc1_output, args->fc1_weight, args->grad_hidden_state, plain);
    steps[3].needs = step_bit(0);
    steps[4] = (cvf_mlp_step){.id = CVF_STEP_K3,
                              .info = {.name = "K3",
                                       .computes = "grad_fc2_bias = grad_output.sum(0)",
                                       .fused = "",
                                       .kind = CVF_KERNEL_REDUCTION,
                                       .engine = "",
                                       .choice = ""},
                              .a = args->grad_output,
                              .out = args->grad_fc2_bias};
    measure_step(&steps[4]);
    if (!args->tp.nccl_comm)
        return 5;
    /* Tensor parallel over NCCL: grad_hidden_state is this rank's partial until all-reduced. K2-3
     * runs right after K1 and its all-reduce starts as soon as it is done, on its own lane, while
     * the weight gradients K2-1 and K2-2 (which do not feed it) compute: they are ordered after
     * K2-3 so that the communication hides under them. */
    const cvf_mlp_step k2_1 = steps[1], k2_2 = steps[2], k2_3 = steps[3], k3 = steps[4];
    steps[1] = k2_3;
    steps[1].needs = step_bit(0);
    steps[2] = all_reduce_step(CVF_STEP_AR_GRAD_HIDDEN, "AR",
                               "grad_hidden_state = sum over the ranks of K2-3's partial (NCCL)",
                               args->grad_hidden_state, args->tp.nccl_comm);
    steps[2].needs = step_bit(1);
    steps[3] = k2_1;
    steps[3].needs = step_bit(1); /* ordering only: start after K2-3, under the all-reduce */
    steps[4] = k2_2;
    steps[4].needs = step_bit(0) | step_bit(1);
    steps[5] = k3;
    return 6;
}

int cvf_mlp_forward_steps(const cvf_mlp_forward_args *args, const cvf_matrix *gelu_output,
                          const cvf_matrix *fc1_output, cvf_mlp_step *steps)
{
    const bool erf = args->gelu == CVF_GELU_ERF;
    const cvf_epilogue fc1 = {.activation = erf ? CVF_ACTIVATION_GELU_ERF : CVF_ACTIVATION_GELU_TANH,
                              .bias = &args->fc1_bias,
                              .aux_out = fc1_output};
    /* split over ranks, fc2_bias is added once: by rank 0, to its partial */
    const bool bias2 = cvf_tp_adds_fc2_bias(&args->tp);
    const cvf_epilogue fc2 = {.activation = CVF_ACTIVATION_NONE, .bias = bias2 ? &args->fc2_bias : NULL};
    steps[0] = gemm_step(CVF_STEP_FC1, "fc1",
                         erf ? "gelu_output = gelu_erf(fc1_output = hidden_state @ fc1_weight^T + fc1_bias)"
                             : "gelu_output = gelu_tanh(fc1_output = hidden_state @ fc1_weight^T + fc1_bias)",
                         fc1_output ? "+ fc1_bias, fc1_output stored, GELU on the fp32 tile"
                                    : "+ fc1_bias, GELU on the fp32 tile",
                         args->hidden_state, cvf_matrix_transpose(args->fc1_weight), *gelu_output, fc1);
    steps[1] = gemm_step(CVF_STEP_FC2, "fc2",
                         bias2 ? "output = gelu_output @ fc2_weight^T + fc2_bias" : "output = gelu_output @ fc2_weight^T",
                         bias2 ? "+ fc2_bias" : "", *gelu_output, cvf_matrix_transpose(args->fc2_weight), args->output,
                         fc2);
    steps[1].needs = step_bit(0);
    if (!args->tp.nccl_comm)
        return 2;
    steps[2] = all_reduce_step(CVF_STEP_AR_OUTPUT, "AR", "output = sum over the ranks of fc2's partial (NCCL)",
                               args->output, args->tp.nccl_comm);
    steps[2].needs = step_bit(1);
    return 3;
}

bool cvf_intermediate_view(int64_t rows, int64_t cols, cvf_dtype dtype, cvf_matrix *view, size_t *bytes)
{
    int64_t per_16 = (int64_t)(16 / cvf_dtype_size(dtype));
    int64_t ld = cols > 0 ? (cols + per_16 - 1) / per_16 * per_16 : 1, elements;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, ld, &elements) ||
        __builtin_mul_overflow((size_t)elements, cvf_dtype_size(dtype), bytes) || *bytes > SIZE_MAX / 4)
        return false;
    *view = cvf_matrix_row_major(NULL, dtype, rows, cols);
    view->row_stride = ld;
    *bytes = cvf_round_up_256(*bytes);
    return true;
}

/* Views of the shape's tensors with no data: what the plan measures. */
static cvf_mlp_backward_args shape_only_args(const cvf_mlp_shape *shape)
{
    int64_t S = shape->tokens, H = shape->hidden, I = shape->intermediate;
    cvf_dtype e = shape->dtype;
    cvf_mlp_backward_args args = {
        .grad_output = cvf_matrix_row_major(NULL, e, S, H),
        .hidden_state = cvf_matrix_row_major(NULL, e, S, H),
        .fc1_weight = cvf_matrix_row_major(NULL, e, I, H),
        .fc2_weight = cvf_matrix_row_major(NULL, e, H, I),
        .fc1_output = cvf_matrix_row_major(NULL, e, S, I),
        .gelu_output = cvf_matrix_row_major(NULL, e, S, I),
        .grad_hidden_state = cvf_matrix_row_major(NULL, e, S, H),
        .grad_fc1_weight = cvf_matrix_row_major(NULL, e, I, H),
        .grad_fc1_bias = cvf_vector_dense(NULL, e, I),
        .grad_fc2_weight = cvf_matrix_row_major(NULL, e, H, I),
        .grad_fc2_bias = cvf_vector_dense(NULL, e, H),
        .gelu = shape->gelu,
    };
    return args;
}

/* Appends a saving (or, when negative, a cost) to the plan. */
static void add_saving(cvf_mlp_plan *plan, const char *what, int64_t bytes)
{
    plan->savings[plan->saving_count++] = (cvf_plan_saving){what, bytes};
    plan->bytes_saved += bytes;
}

/*
 * What the fused plan saves against an unfused execution of the same seven operations with
 * every tensor in the storage dtype: grad_gelu_output stored by its GEMM and read back by a
 * separate GELU' pass, a separate pass over grad_fc1_output for its bias gradient, and the
 * transposed copies the seed makes. The wider workspace is a cost.
 */
static void add_savings(cvf_mlp_plan *plan)
{
    int64_t S = plan->shape.tokens, H = plan->shape.hidden, I = plan->shape.intermediate;
    int64_t e = (int64_t)cvf_dtype_size(plan->shape.dtype), w = (int64_t)cvf_dtype_size(plan->workspace_dtype);
    add_saving(plan, "grad_gelu_output (S x I) never stored and read back: GELU' runs in K1's epilogue", 2 * S * I * e);
    add_saving(plan, "grad_fc1_bias summed in K1's epilogue: no separate pass over grad_fc1_output", S * I * e);
    add_saving(plan, "grad_output^T and grad_fc1_output^T read in place: no transposed copies",
               2 * S * H * e + 2 * S * I * e);
    if (w != e)
        add_saving(plan, "cost: grad_fc1_output kept in the wider accumulation dtype (written once, read twice)",
                   -3 * S * I * (w - e));
}

/* Views of a forward's tensors with no data: what its plan measures. */
static cvf_mlp_forward_args shape_only_forward(const cvf_mlp_shape *shape)
{
    int64_t S = shape->tokens, H = shape->hidden, I = shape->intermediate;
    cvf_dtype e = shape->dtype;
    cvf_mlp_forward_args args = {
        .hidden_state = cvf_matrix_row_major(NULL, e, S, H),
        .fc1_weight = cvf_matrix_row_major(NULL, e, I, H),
        .fc1_bias = cvf_vector_dense(NULL, e, I),
        .fc2_weight = cvf_matrix_row_major(NULL, e, H, I),
        .fc2_bias = cvf_vector_dense(NULL, e, H),
        .fc1_output = cvf_matrix_row_major(NULL, e, S, I),
        .gelu_output = cvf_matrix_row_major(NULL, e, S, I),
        .output = cvf_matrix_row_major(NULL, e, S, H),
        .gelu = shape->gelu,
    };
    return args;
}

/* What the fused forward saves against an unfused run (GEMM, then separate bias and GELU passes
 * over the stored product, in the storage dtype). */
static void add_forward_savings(cvf_mlp_plan *plan)
{
    int64_t S = plan->shape.tokens, H = plan->shape.hidden, I = plan->shape.intermediate;
    int64_t e = (int64_t)cvf_dtype_size(plan->shape.dtype);
    add_saving(plan, "fc1: bias and GELU on the fp32 tile: the product is not stored and read back by a separate pass",
               2 * S * I * e);
    add_saving(plan, "fc2: bias on the fp32 tile: no separate bias pass over output", 2 * S * H * e);
}

/* The reference device's plan: its own float64 formulas, unfused. */
static void reference_plan(const cvf_mlp_shape *shape, bool forward, cvf_mlp_plan *plan)
{
    uint64_t S = (uint64_t)shape->tokens, H = (uint64_t)shape->hidden, I = (uint64_t)shape->intermediate;
    plan->kernel_count = 1;
    plan->kernels[0] = (cvf_kernel_info){
        .name = "REF",
        .computes = forward ? "the forward in float64, unfused: the test oracle"
                            : "all seven operations in float64, unfused: the test oracle",
        .fused = "",
        .kind = CVF_KERNEL_GEMM,
        .m = shape->tokens,
        .n = shape->hidden + shape->intermediate,
        .k = forward ? shape->hidden : shape->intermediate,
        .flops = (forward ? 4 : 8) * S * H * I,
        .engine = "",
        .choice = ""};
}

void cvf_mlp_plan_build(const cvf_context *ctx, const cvf_mlp_shape *shape, bool forward, cvf_mlp_plan *plan)
{
    *plan = (cvf_mlp_plan){0};
    plan->shape = *shape;
    plan->forward = forward;
    plan->device = ctx->device;
    plan->workspace_dtype = forward ? shape->dtype : cvf_mlp_intermediate_dtype(ctx, shape->dtype);
    if (ctx->backend->mlp_backward_oracle) { /* the backend's own path: the float64 oracle, unfused */
        reference_plan(shape, forward, plan);
        return;
    }
    cvf_mlp_step steps[CVF_PLAN_MAX_KERNELS];
    if (forward) {
        cvf_mlp_forward_args args = shape_only_forward(shape);
        plan->kernel_count = cvf_mlp_forward_steps(&args, &args.gelu_output, &args.fc1_output, steps);
    } else {
        cvf_mlp_backward_args args = shape_only_args(shape);
        cvf_matrix grad_fc1_output;
        size_t bytes;
        if (!cvf_intermediate_view(shape->tokens, shape->intermediate, plan->workspace_dtype, &grad_fc1_output, &bytes))
            grad_fc1_output = cvf_matrix_row_major(NULL, plan->workspace_dtype, shape->tokens, shape->intermediate);
        plan->kernel_count = cvf_mlp_backward_steps(&args, &grad_fc1_output, steps);
    }
    if (ctx->backend->plan_steps)
        ctx->backend->plan_steps(ctx, steps, plan->kernel_count);
    for (int32_t i = 0; i < plan->kernel_count; i++) {
        plan->kernels[i] = steps[i].info;
        plan->bytes_total += steps[i].info.bytes;
    }
    if (forward)
        add_forward_savings(plan);
    else
        add_savings(plan);
}

/* True when the plan's counters cannot overflow: every byte count it forms is at most
 * 64 (S H + S I + H I + S + H + I) (a few tensors of 8-byte elements each), and the FLOPs
 * 8 S H I; both must fit in 63 bits. */
static bool plan_counters_fit(const cvf_mlp_shape *shape)
{
    int64_t S = shape->tokens, H = shape->hidden, I = shape->intermediate, sh, si, hi, sum, t;
    return !(__builtin_mul_overflow(S, H, &sh) || __builtin_mul_overflow(S, I, &si) ||
             __builtin_mul_overflow(H, I, &hi) || __builtin_add_overflow(sh, si, &sum) ||
             __builtin_add_overflow(sum, hi, &sum) || __builtin_add_overflow(sum, S, &sum) ||
             __builtin_add_overflow(sum, H, &sum) || __builtin_add_overflow(sum, I, &sum) ||
             __builtin_mul_overflow(sum, 64, &t) || __builtin_mul_overflow(sh, I, &t) ||
             __builtin_mul_overflow(t, 8, &t));
}

/* Validates a plan request and builds the plan. */
static cvf_status build_plan(cvf_context *ctx, const cvf_mlp_shape *shape, bool forward, cvf_mlp_plan *plan)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if (!shape || !plan)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "%s: pointer is NULL", shape ? "plan" : "shape");
    if (shape->tokens < 0 || shape->hidden < 0 || shape->intermediate < 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "shape: S=%lld H=%lld I=%lld, expected all >= 0",
                        (long long)shape->tokens, (long long)shape->hidden, (long long)shape->intermediate);
    if (cvf_dtype_size(shape->dtype) == 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "shape.dtype: %d is not a cvf_dtype value", (int)shape->dtype);
    if (shape->gelu != CVF_GELU_TANH && shape->gelu != CVF_GELU_ERF)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "shape.gelu: %d is not a cvf_gelu value", (int)shape->gelu);
    if (!ctx->backend->supports_dtype(shape->dtype))
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "shape.dtype: %s is not supported on the %s device",
                        cvf_dtype_name(shape->dtype), cvf_device_name(ctx->device));
    if (!plan_counters_fit(shape))
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW,
                        "shape: S=%lld H=%lld I=%lld: the plan's FLOP or byte counts do not fit in 63 bits",
                        (long long)shape->tokens, (long long)shape->hidden, (long long)shape->intermediate);
    cvf_mlp_plan_build(ctx, shape, forward, plan);
    return CVF_STATUS_SUCCESS;
}

cvf_status cvf_mlp_backward_plan(cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan)
{
    return build_plan(ctx, shape, false, plan);
}

cvf_status cvf_mlp_forward_plan(cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan)
{
    return build_plan(ctx, shape, true, plan);
}

/* A bounded appender over a caller's buffer that still counts the full length. */
typedef struct text_sink {
    char *buf;
    size_t size;
    size_t length;
} text_sink;

/* Appends formatted text to the sink, truncating what does not fit. */
static void sink_printf(text_sink *sink, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void sink_printf(text_sink *sink, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *at = sink->length < sink->size ? sink->buf + sink->length : NULL;
    size_t room = sink->length < sink->size ? sink->size - sink->length : 0;
    int n = vsnprintf(at, room, format, args);
    va_end(args);
    if (n > 0)
        sink->length += (size_t)n;
}

/* Returns count limited to [0, most]: a caller's plan may hold anything. */
static int32_t clamp_count(int32_t count, int32_t most)
{
    return count < 0 ? 0 : count > most ? most : count;
}

/* Returns text, or "-" for NULL. */
static const char *text_or_dash(const char *text)
{
    return text ? text : "-";
}

/* Returns a short name of a kernel kind. */
static const char *kind_name(cvf_kernel_kind kind)
{
    switch (kind) {
    case CVF_KERNEL_FUSED_GEMM: return "fused GEMM";
    case CVF_KERNEL_GEMM: return "GEMM";
    case CVF_KERNEL_REDUCTION: return "reduction";
    case CVF_KERNEL_ALL_REDUCE: return "all-reduce";
    }
    return "unknown";
}

/* Appends the line saying how a planned kernel runs: engine, tiles, K slices, stream. */
static void describe_schedule(text_sink *sink, const cvf_kernel_info *k)
{
    sink_printf(sink, "  %-5s %-10s %24s %9s %10s  runs on: %s", "", "", "", "", "", k->engine);
    if (k->tile_m > 0)
        sink_printf(sink, ", tiles %dx%dx%d, %lld tile%s", (int)k->tile_m, (int)k->tile_n, (int)k->tile_k,
                    (long long)(k->splits > 1 ? k->units / k->splits : k->units),
                    (k->splits > 1 ? k->units / k->splits : k->units) == 1 ? "" : "s");
    if (k->splits > 1)
        sink_printf(sink, " x %d K slices = %lld units", (int)k->splits, (long long)k->units);
    sink_printf(sink, ", stream %d%s\n", (int)k->stream, k->stream ? " (side stream, joined before return)" : "");
    if (k->choice && k->choice[0]) {
        sink_printf(sink, "  %-5s %-10s %24s %9s %10s  engine chosen: %s", "", "", "", "", "", k->choice);
        int32_t n = clamp_count(k->candidate_count, CVF_PLAN_MAX_CANDIDATES);
        for (int32_t i = 0; i < n; i++) {
            const cvf_engine_time *c = &k->candidates[i];
            if (c->ms >= 0.0f)
                sink_printf(sink, "%s %s %.4f ms", i ? "," : ";", text_or_dash(c->engine), (double)c->ms);
            else
                sink_printf(sink, "%s %s n/a", i ? "," : ";", text_or_dash(c->engine));
        }
        sink_printf(sink, "\n");
    }
}

size_t cvf_mlp_plan_describe(const cvf_mlp_plan *plan, char *buf, size_t size)
{
    text_sink sink = {buf, buf ? size : 0, 0};
    if (sink.size > 0)
        buf[0] = '\0';
    if (!plan) {
        sink_printf(&sink, "(no plan)\n");
        return sink.length;
    }
    const cvf_mlp_shape *s = &plan->shape;
    const char *gelu = s->gelu == CVF_GELU_ERF ? "erf" : "tanh";
    if (plan->forward)
        sink_printf(&sink, "MLP forward (GELU %s) on the %s device: S=%lld H=%lld I=%lld, %s tensors\n", gelu,
                    cvf_device_name(plan->device), (long long)s->tokens, (long long)s->hidden,
                    (long long)s->intermediate, cvf_dtype_name(s->dtype));
    else
        sink_printf(&sink,
                    "MLP GELU (%s) backward on the %s device: S=%lld H=%lld I=%lld, %s tensors, %s grad_fc1_output\n",
                    gelu, cvf_device_name(plan->device), (long long)s->tokens, (long long)s->hidden,
                    (long long)s->intermediate, cvf_dtype_name(s->dtype), cvf_dtype_name(plan->workspace_dtype));
    sink_printf(&sink, "  %-5s %-10s %24s %9s %10s  %s\n", "", "kind", "m x n x k (rows x cols)", "GFLOP", "MB moved",
                "computes");
    int32_t kernels = clamp_count(plan->kernel_count, CVF_PLAN_MAX_KERNELS);
    for (int32_t i = 0; i < kernels; i++) {
        const cvf_kernel_info *k = &plan->kernels[i];
        char shape[64];
        if (k->kind == CVF_KERNEL_REDUCTION)
            snprintf(shape, sizeof shape, "%lld x %lld", (long long)k->m, (long long)k->n);
        else
            snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)k->m, (long long)k->n, (long long)k->k);
        sink_printf(&sink, "  %-5s %-10s %24s %9.3f %10.2f  %s\n", text_or_dash(k->name), kind_name(k->kind), shape,
                    (double)k->flops * 1e-9, (double)k->bytes * 1e-6, text_or_dash(k->computes));
        if (k->fused && k->fused[0])
            sink_printf(&sink, "  %-5s %-10s %24s %9s %10s  fused epilogue: %s\n", "", "", "", "", "", k->fused);
        if (k->engine && k->engine[0])
            describe_schedule(&sink, k);
    }
    sink_printf(&sink, "  total: %.2f MB moved", (double)plan->bytes_total * 1e-6);
    int32_t savings = clamp_count(plan->saving_count, CVF_PLAN_MAX_SAVINGS);
    if (savings == 0) {
        sink_printf(&sink, "; nothing fused\n");
        return sink.length;
    }
    sink_printf(&sink, "; %.2f MB saved (net) against an unfused run of the seven operations:\n",
                (double)plan->bytes_saved * 1e-6);
    for (int32_t i = 0; i < savings; i++)
        sink_printf(&sink, "    %+10.2f MB  %s\n", (double)plan->savings[i].bytes * 1e-6,
                    text_or_dash(plan->savings[i].what));
    return sink.length;
}


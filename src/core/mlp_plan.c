/*
 * The MLP backward plan: which kernels run, what rides in their epilogues, how many bytes each
 * moves and what the fusion saves against the seed's unfused plan. The plan describes exactly
 * what cvf_mlp_backward runs on the same context (compose_backward in mlp.c, or the backend's
 * own path).
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"

/* Appends a kernel to the plan. */
static void add_kernel(cvf_mlp_plan *plan, cvf_kernel_info kernel)
{
    plan->kernels[plan->kernel_count++] = kernel;
    plan->bytes_total += kernel.bytes;
}

/* Appends a saving to the plan. */
static void add_saving(cvf_mlp_plan *plan, const char *what, uint64_t bytes)
{
    plan->savings[plan->saving_count++] = (cvf_plan_saving){what, bytes};
    plan->bytes_saved += bytes;
}

/* A GEMM kernel of shape m x n x k reading A and B and writing C with the given element sizes. */
static cvf_kernel_info gemm_kernel(const char *name, cvf_kernel_kind kind, const char *computes, const char *fused,
                                   int64_t m, int64_t n, int64_t k, uint64_t extra_bytes, size_t a_size, size_t b_size,
                                   size_t c_size)
{
    uint64_t um = (uint64_t)m, un = (uint64_t)n, uk = (uint64_t)k;
    cvf_kernel_info info = {name,
                            computes,
                            fused,
                            kind,
                            m,
                            n,
                            k,
                            2 * um * un * uk,
                            um * uk * a_size + uk * un * b_size + um * un * c_size + extra_bytes};
    return info;
}

/* The plan of the core's composition: K1 fused, three plain GEMMs, one reduction. */
static void build_fused_plan(cvf_mlp_plan *plan)
{
    uint64_t S = (uint64_t)plan->shape.tokens, H = (uint64_t)plan->shape.hidden, I = (uint64_t)plan->shape.intermediate;
    size_t e = cvf_dtype_size(plan->shape.dtype), w = cvf_dtype_size(plan->workspace_dtype);
    const size_t f32 = 4;
    add_kernel(plan, gemm_kernel("K1", CVF_KERNEL_FUSED_GEMM,
                                 "grad_fc1_output = (grad_output @ fc2_weight) * gelu_tanh'(fc1_output)",
                                 "x gelu_tanh'(fc1_output) on the fp32 tile; grad_fc1_bias column sums", (int64_t)S,
                                 (int64_t)I, (int64_t)H, S * I * e + I * f32, e, e, w));
    add_kernel(plan, gemm_kernel("K2-1", CVF_KERNEL_GEMM, "grad_fc2_weight = grad_output^T @ gelu_output", "",
                                 (int64_t)H, (int64_t)I, (int64_t)S, 0, e, e, e));
    add_kernel(plan, gemm_kernel("K2-2", CVF_KERNEL_GEMM, "grad_fc1_weight = grad_fc1_output^T @ hidden_state", "",
                                 (int64_t)I, (int64_t)H, (int64_t)S, 0, w, e, e));
    add_kernel(plan, gemm_kernel("K2-3", CVF_KERNEL_GEMM, "grad_hidden_state = grad_fc1_output @ fc1_weight", "",
                                 (int64_t)S, (int64_t)H, (int64_t)I, 0, w, e, e));
    cvf_kernel_info k3 = {"K3",
                          "grad_fc2_bias = grad_output.sum(0)",
                          "",
                          CVF_KERNEL_REDUCTION,
                          (int64_t)S,
                          (int64_t)H,
                          0,
                          S * H,
                          S * H * e + H * e};
    add_kernel(plan, k3);

    add_saving(plan, "grad_gelu_output (S x I) never written to memory and read back (K1 fusion)", 2 * S * I * e);
    add_saving(plan, "grad_fc1_bias summed in K1's epilogue: no separate pass over grad_fc1_output", S * I * w);
    add_saving(plan, "grad_output^T and grad_fc1_output^T read in place: no transposed copies",
               2 * S * H * e + 2 * S * I * w);
}

/* The plan of a backend that runs the whole backward itself, unfused (the float64 oracle). */
static void build_reference_plan(cvf_mlp_plan *plan)
{
    uint64_t S = (uint64_t)plan->shape.tokens, H = (uint64_t)plan->shape.hidden, I = (uint64_t)plan->shape.intermediate;
    cvf_kernel_info all = {"REF",      "all seven operations in float64, unfused: the test oracle",
                           "",         CVF_KERNEL_GEMM,
                           (int64_t)S, (int64_t)(H + I),
                           (int64_t)I, 8 * S * H * I,
                           0};
    add_kernel(plan, all);
}

void cvf_mlp_plan_build(const cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan)
{
    *plan = (cvf_mlp_plan){0};
    plan->shape = *shape;
    plan->device = ctx->device;
    plan->workspace_dtype = ctx->backend->accumulate_dtype;
    if (ctx->backend->mlp_backward)
        build_reference_plan(plan);
    else
        build_fused_plan(plan);
}

cvf_status cvf_mlp_backward_plan(cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan)
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
    if (!ctx->backend->supports_dtype(shape->dtype))
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "shape.dtype: %s is not supported on the %s device",
                        cvf_dtype_name(shape->dtype), cvf_device_name(ctx->device));
    /* 8 S H I must fit the 64-bit FLOP counter */
    uint64_t flops;
    if (__builtin_mul_overflow((uint64_t)shape->tokens, (uint64_t)shape->hidden, &flops) ||
        __builtin_mul_overflow(flops, (uint64_t)shape->intermediate, &flops) ||
        __builtin_mul_overflow(flops, (uint64_t)8, &flops))
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "shape: 8 S H I does not fit in 64 bits");
    cvf_mlp_plan_build(ctx, shape, plan);
    return CVF_STATUS_SUCCESS;
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

/* Returns a short name of a kernel kind. */
static const char *kind_name(cvf_kernel_kind kind)
{
    switch (kind) {
    case CVF_KERNEL_FUSED_GEMM: return "fused GEMM";
    case CVF_KERNEL_GEMM: return "GEMM";
    case CVF_KERNEL_REDUCTION: return "reduction";
    }
    return "unknown";
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
    sink_printf(&sink, "MLP GELU backward on the %s device: S=%lld H=%lld I=%lld, %s tensors, %s grad_fc1_output\n",
                cvf_device_name(plan->device), (long long)s->tokens, (long long)s->hidden, (long long)s->intermediate,
                cvf_dtype_name(s->dtype), cvf_dtype_name(plan->workspace_dtype));
    sink_printf(&sink, "  %-5s %-10s %24s %9s %10s  %s\n", "", "kind", "m x n x k (rows x cols)", "GFLOP", "MB moved",
                "computes");
    for (int32_t i = 0; i < plan->kernel_count; i++) {
        const cvf_kernel_info *k = &plan->kernels[i];
        char shape[64];
        if (k->kind == CVF_KERNEL_REDUCTION)
            snprintf(shape, sizeof shape, "%lld x %lld", (long long)k->m, (long long)k->n);
        else
            snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)k->m, (long long)k->n, (long long)k->k);
        sink_printf(&sink, "  %-5s %-10s %24s %9.3f %10.2f  %s\n", k->name, kind_name(k->kind), shape,
                    (double)k->flops * 1e-9, (double)k->bytes * 1e-6, k->computes);
        if (k->fused[0])
            sink_printf(&sink, "  %-5s %-10s %24s %9s %10s  fused epilogue: %s\n", "", "", "", "", "", k->fused);
    }
    sink_printf(&sink, "  total: %.2f MB moved", (double)plan->bytes_total * 1e-6);
    if (plan->saving_count == 0) {
        sink_printf(&sink, "; nothing fused\n");
        return sink.length;
    }
    sink_printf(&sink, ", %.2f MB saved against the seed's unfused plan:\n", (double)plan->bytes_saved * 1e-6);
    for (int32_t i = 0; i < plan->saving_count; i++)
        sink_printf(&sink, "    %10.2f MB  %s\n", (double)plan->savings[i].bytes * 1e-6, plan->savings[i].what);
    return sink.length;
}

/*
 * The explain subcommand: the plan the library would run for an MLP GELU backward of a shape on a
 * device (cvf_mlp_backward_plan), as the library's own description (cvf_mlp_plan_describe) or as
 * one JSON object: kernels with what each computes and fuses, FLOPs, bytes, how each is scheduled
 * (on CUDA: engine, tiles, K slices, work units, stream), and the bytes saved. --device cuda needs
 * a GPU (the plan depends on it); without one explain fails with exit 1 and the reason.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "cli.h"

#define EXPLAIN_OPTIONS                                                                                                \
    (CLI_BIT(CLI_OPT_S) | CLI_BIT(CLI_OPT_H) | CLI_BIT(CLI_OPT_I) | CLI_BIT(CLI_OPT_DTYPE) | CLI_BIT(CLI_OPT_DEVICE) | \
     CLI_BIT(CLI_OPT_THREADS) | CLI_BIT(CLI_OPT_JSON) | CLI_BIT(CLI_OPT_HELP))

/* Prints the help of explain; op is the MLP backward (its defaults). */
static void print_explain_help(FILE *out, const cli_op *op)
{
    fprintf(out, "usage: cvfuse explain [--S S] [--H H] [--I I] [--dtype T] [--device D] [--threads N] [--json]\n\n"
                 "Prints the plan of the MLP GELU backward (cvf_mlp_backward_plan): which kernels run (K1 fused\n"
                 "GEMM + GELU' epilogue, K2 plain GEMMs, K3 reductions), what rides in each epilogue, the FLOPs\n"
                 "and bytes each moves, and the bytes saved against an unfused run. Nothing is run.\n\n");
    fprintf(out, "options:\n");
    cli_print_options(out, EXPLAIN_OPTIONS);
    fprintf(out, "defaults: --S %lld --H %lld --I %lld --dtype %s --device cpu\n", (long long)op->dim_defaults[0],
            (long long)op->dim_defaults[1], (long long)op->dim_defaults[2], cvf_dtype_name(op->default_dtype));
    fprintf(out, "--device cuda: the plan of the CUDA backend on GPU 0, with a 'runs on:' line per kernel: its\n"
                 "  engine (e.g. sm90 TMA+wgmma, simple, column sums), output tile and K step, tiles x K slices\n"
                 "  (added in a fixed order), and stream (0 the caller's; 1, 2 side streams joined before the call\n"
                 "  returns). It first runs one backward of the shape on zero-filled GPU tensors, so that each\n"
                 "  step shows the engine the context chose by measurement and the times of the candidates.\n"
                 "  It needs a build with CUDA and a GPU: otherwise exit 1 and the reason on stderr.\n");
    fprintf(out, "--json: one object with op, device, dtype, workspace_dtype, shape, kernels (name, kind,\n"
                 "  computes, fused, m, n, k, flops, bytes, engine, tile_m, tile_n, tile_k, splits, units, stream,\n"
                 "  choice, candidates (engine, ms); engine \"\", zeros and no candidates where the device does not\n"
                 "  schedule its kernels: cpu, reference),\n"
                 "  bytes_total, savings (what, bytes), bytes_saved.\n");
}

/* Prints the library's description of plan. Returns a CLI_EXIT_* code. */
static int explain_text(const cvf_mlp_plan *plan)
{
    size_t length = cvf_mlp_plan_describe(plan, NULL, 0);
    char *text = malloc(length + 1);
    if (!text)
        return cli_runtime_error("explain", "out of memory");
    cvf_mlp_plan_describe(plan, text, length + 1);
    fputs(text, stdout);
    free(text);
    return CLI_EXIT_OK;
}

/* Returns the JSON name of a kernel kind. */
static const char *kind_json_name(cvf_kernel_kind kind)
{
    switch (kind) {
    case CVF_KERNEL_FUSED_GEMM: return "fused_gemm";
    case CVF_KERNEL_GEMM: return "gemm";
    case CVF_KERNEL_REDUCTION: return "reduction";
    case CVF_KERNEL_ALL_REDUCE: return "all_reduce";
    }
    return "unknown";
}

/* Prints "key":"value" preceded by a comma when not first. */
static void json_text_field(FILE *out, int first, const char *key, const char *value)
{
    fprintf(out, "%s\"%s\":", first ? "" : ",", key);
    cli_json_string(out, value ? value : "");
}

/* Prints one kernel of a plan as a JSON object. */
static void json_kernel(FILE *out, const cvf_kernel_info *k)
{
    fputc('{', out);
    json_text_field(out, 1, "name", k->name);
    json_text_field(out, 0, "kind", kind_json_name(k->kind));
    json_text_field(out, 0, "computes", k->computes);
    json_text_field(out, 0, "fused", k->fused);
    fprintf(out, ",\"m\":%" PRId64 ",\"n\":%" PRId64 ",\"k\":%" PRId64 ",\"flops\":%" PRIu64 ",\"bytes\":%" PRIu64,
            k->m, k->n, k->k, k->flops, k->bytes);
    json_text_field(out, 0, "engine", k->engine);
    fprintf(out, ",\"tile_m\":%d,\"tile_n\":%d,\"tile_k\":%d,\"splits\":%d,\"units\":%" PRId64 ",\"stream\":%d",
            (int)k->tile_m, (int)k->tile_n, (int)k->tile_k, (int)k->splits, k->units, (int)k->stream);
    json_text_field(out, 0, "choice", k->choice);
    fputs(",\"candidates\":[", out);
    for (int32_t i = 0; i < k->candidate_count && i < CVF_PLAN_MAX_CANDIDATES; i++) {
        fputs(i ? ",{" : "{", out);
        json_text_field(out, 1, "engine", k->candidates[i].engine);
        if (k->candidates[i].ms >= 0.0f)
            fprintf(out, ",\"ms\":%.4f}", (double)k->candidates[i].ms);
        else
            fputs(",\"ms\":null}", out);
    }
    fputs("]}", out);
}

/* Prints plan as one JSON object on one line. */
static void explain_json(const cvf_mlp_plan *plan)
{
    FILE *out = stdout;
    const cvf_mlp_shape *s = &plan->shape;
    fprintf(out, "{\"op\":\"mlp-backward\",\"device\":\"%s\",\"dtype\":\"%s\",\"workspace_dtype\":\"%s\"",
            cvf_device_name(plan->device), cvf_dtype_name(s->dtype), cvf_dtype_name(plan->workspace_dtype));
    fprintf(out, ",\"shape\":{\"S\":%" PRId64 ",\"H\":%" PRId64 ",\"I\":%" PRId64 "},\"kernels\":[", s->tokens,
            s->hidden, s->intermediate);
    for (int32_t i = 0; i < plan->kernel_count; i++) {
        if (i)
            fputc(',', out);
        json_kernel(out, &plan->kernels[i]);
    }
    fprintf(out, "],\"bytes_total\":%" PRIu64 ",\"savings\":[", plan->bytes_total);
    for (int32_t i = 0; i < plan->saving_count; i++) {
        fputs(i ? ",{" : "{", out);
        json_text_field(out, 1, "what", plan->savings[i].what);
        fprintf(out, ",\"bytes\":%" PRId64 "}", plan->savings[i].bytes);
    }
    fprintf(out, "],\"bytes_saved\":%" PRId64 "}\n", plan->bytes_saved);
}

/* On a GPU: runs one backward of shape on ctx (zero-filled device tensors, dense) so that the plan
 * shows the engines as the context chose them by measurement, with the times. Returns NULL or
 * what failed. */
static const char *measure_on_device(cvf_context *ctx, const cvf_mlp_shape *shape)
{
    const int64_t S = shape->tokens, H = shape->hidden, I = shape->intermediate;
    const size_t e = cvf_dtype_size(shape->dtype);
    /* grad_output, x, fc1_weight, fc2_weight, fc1_output, gelu_output, grad_x, grad_w1, grad_b1,
     * grad_w2, grad_b2, each rounded up to 256 bytes */
    const int64_t sizes[11] = {S * H, S * H, I * H, H * I, S * I, S * I, S * H, I * H, I, H * I, H};
    size_t offsets[11], total = 0;
    for (int i = 0; i < 11; i++) {
        offsets[i] = total;
        total += ((size_t)sizes[i] * e + 255) / 256 * 256;
    }
    void *memory = NULL, *zeros = calloc(total ? total : 1, 1);
    const char *why = zeros ? cli_cuda_alloc(&memory, total) : "out of host memory";
    if (!why)
        why = cli_cuda_copy_in(memory, zeros, total, cvf_context_stream(ctx));
    if (!why) {
        char *m = memory;
        cvf_mlp_backward_args a = {
            .grad_output = cvf_matrix_row_major(m + offsets[0], shape->dtype, S, H),
            .hidden_state = cvf_matrix_row_major(m + offsets[1], shape->dtype, S, H),
            .fc1_weight = cvf_matrix_row_major(m + offsets[2], shape->dtype, I, H),
            .fc2_weight = cvf_matrix_row_major(m + offsets[3], shape->dtype, H, I),
            .fc1_output = cvf_matrix_row_major(m + offsets[4], shape->dtype, S, I),
            .gelu_output = cvf_matrix_row_major(m + offsets[5], shape->dtype, S, I),
            .grad_hidden_state = cvf_matrix_row_major(m + offsets[6], shape->dtype, S, H),
            .grad_fc1_weight = cvf_matrix_row_major(m + offsets[7], shape->dtype, I, H),
            .grad_fc1_bias = cvf_vector_dense(m + offsets[8], shape->dtype, I),
            .grad_fc2_weight = cvf_matrix_row_major(m + offsets[9], shape->dtype, H, I),
            .grad_fc2_bias = cvf_vector_dense(m + offsets[10], shape->dtype, H),
            .gelu = shape->gelu,
        };
        if (cvf_mlp_backward(ctx, &a) != CVF_STATUS_SUCCESS)
            why = cvf_context_last_error(ctx);
        else
            why = cli_cuda_sync(cvf_context_stream(ctx));
    }
    cli_cuda_free(memory);
    free(zeros);
    return why;
}

int cli_cmd_explain(int argc, char **argv)
{
    const cli_op *op = cli_op_find("mlp-backward");
    cli_args args;
    int rc = cli_parse("explain", EXPLAIN_OPTIONS, argc, argv, &args);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_given(&args, CLI_OPT_HELP)) {
        print_explain_help(stdout, op);
        return CLI_EXIT_OK;
    }
    int64_t dims[CLI_DIMS];
    cli_op_dims(op, &args, dims);
    cvf_mlp_shape shape = {dims[0], dims[1], dims[2], cli_given(&args, CLI_OPT_DTYPE) ? args.dtype : op->default_dtype,
                           CVF_GELU_TANH};
    cvf_context *ctx = NULL;
    rc = cli_context_create("explain", args.device, cli_num(&args, CLI_OPT_THREADS, 0), &ctx);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (args.device == CVF_DEVICE_CUDA && shape.tokens * shape.hidden * shape.intermediate > 0) {
        const char *why = measure_on_device(ctx, &shape);
        if (why) /* the plan still prints, with the heuristic's choice */
            fprintf(stderr, "cvfuse explain: measuring the engines on the GPU failed: %s\n", why);
    }
    cvf_mlp_plan plan;
    cvf_status status = cvf_mlp_backward_plan(ctx, &shape, &plan);
    if (status != CVF_STATUS_SUCCESS)
        rc = cli_library_error("explain", "cvf_mlp_backward_plan", status, ctx);
    else if (cli_given(&args, CLI_OPT_JSON))
        explain_json(&plan);
    else
        rc = explain_text(&plan);
    cvf_context_destroy(ctx);
    return rc;
}

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
                 "  returns). It needs a build with CUDA and a GPU: otherwise exit 1 and the reason on stderr.\n");
    fprintf(out, "--json: one object with op, device, dtype, workspace_dtype, shape, kernels (name, kind,\n"
                 "  computes, fused, m, n, k, flops, bytes, engine, tile_m, tile_n, tile_k, splits, units, stream;\n"
                 "  engine \"\" and zeros where the device does not schedule its kernels: cpu, reference),\n"
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
    fprintf(out, ",\"tile_m\":%d,\"tile_n\":%d,\"tile_k\":%d,\"splits\":%d,\"units\":%" PRId64 ",\"stream\":%d}",
            (int)k->tile_m, (int)k->tile_n, (int)k->tile_k, (int)k->splits, k->units, (int)k->stream);
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

/*
 * The op subcommands of the cvfuse CLI (gemm, matmul-relu, mlp-forward, mlp-backward): one runner
 * driven by the op table. Inputs come from --inputs DIR or from the seeded generator; the call is
 * timed once (no warm-up: that is bench's job); outputs go to --outputs DIR; --check compares
 * every output with the float64 reference device. --device cuda runs the call on GPU 0 through
 * device copies of the host tensors (cli_set_run), timing the call alone.
 */
#include <errno.h>
#include <string.h>

#include "cli.h"

/* The options every op subcommand accepts besides its dimension options. */
#define OP_OPTIONS                                                                                                     \
    (CLI_BIT(CLI_OPT_DTYPE) | CLI_BIT(CLI_OPT_DEVICE) | CLI_BIT(CLI_OPT_THREADS) | CLI_BIT(CLI_OPT_SEED) |             \
     CLI_BIT(CLI_OPT_INPUTS) | CLI_BIT(CLI_OPT_OUTPUTS) | CLI_BIT(CLI_OPT_CHECK) | CLI_BIT(CLI_OPT_JSON) |             \
     CLI_BIT(CLI_OPT_HELP))

/* Prints the help of an op subcommand. */
static void print_op_help(FILE *out, const cli_op *op, uint32_t allowed)
{
    fprintf(out, "usage: cvfuse %s [OPTIONS]\n\n", op->name);
    fprintf(out, "%s.\nCalls %s once, timed; %g %s %s %s FLOPs per run.\n\n", op->summary, op->call, op->flops_per_mnk,
            op->dim_names[0], op->dim_names[1], op->dim_names[2]);
    fprintf(out, "options:\n");
    cli_print_options(out, allowed);
    fprintf(out, "defaults: %s %lld %s %lld %s %lld --dtype %s --device cpu --threads 0 --seed %d\n\n",
            cli_opt_name(op->dim_opts[0]), (long long)op->dim_defaults[0], cli_opt_name(op->dim_opts[1]),
            (long long)op->dim_defaults[1], cli_opt_name(op->dim_opts[2]), (long long)op->dim_defaults[2],
            cvf_dtype_name(op->default_dtype), CLI_DEFAULT_SEED);
    fprintf(out, "files (--inputs DIR, --outputs DIR) are named after the parameters:\n");
    cli_op_print_files(out, op);
    fprintf(out, "\nrandom inputs (without --inputs), deterministic from --seed:\n  %s.\n", op->inputs_help);
    fprintf(out, "--inputs: the shape comes from the files (dimension options, when given, must agree), and\n"
                 "  so does the dtype without --dtype: all '<f2' files run in f16, all '<f4' files in f32\n"
                 "  ('<f8' or mixed files need --dtype). With --dtype, '<f2', '<f4' and '<f8' files are\n"
                 "  converted to it. A file already of the run's dtype is used in place, a Fortran-order\n"
                 "  file as a transposed (strided) view.\n"
                 "--outputs: writes the outputs, and the random inputs when they were generated, so that\n"
                 "  '--inputs DIR' reruns the same case. numpy has no bfloat16: bf16 tensors are written\n"
                 "  as '<f4' (an exact widening), so a bf16 run is rerun with '--inputs DIR --dtype bf16'.\n"
                 "--check: relative Frobenius error of each output against the float64 reference device;\n");
    fprintf(out,
            "  tolerance by dtype: f32 %g, f16 %g, bf16 %g; exit status 3 when one is above.\n"
            "  With --device reference it compares the reference with itself (a note says so).\n",
            cvft_tolerance(CVF_F32), cvft_tolerance(CVF_F16), cvft_tolerance(CVF_BF16));
    fprintf(out, "--json: one JSON object per line with keys op, device, dtype, shape, threads, ms, gflops\n"
                 "  (and rel_err, ok with --check); messages go to stderr.\n");
    fprintf(out, "--device cuda: the inputs (files or random) and the NaN-filled outputs are copied to GPU 0\n"
                 "  (a strided file view keeps its strides), the call runs on a stream of its own, the outputs\n"
                 "  are copied back; ms is the call alone (CUDA events), not the copies. --check, --outputs and\n"
                 "  --json then work as on the cpu. It needs a build with CUDA and a GPU: otherwise exit 1 and\n"
                 "  the reason on one line.\n");
}

/* Fills set with the inputs of this run: from --inputs (the files' dtype unless --dtype is given),
 * or random from --seed. Returns a CLI_EXIT_* code. */
static int prepare_inputs(const cli_op *op, const cli_args *args, cvf_context *ctx, cli_tensor_set *set)
{
    cvf_dtype dtype = cli_given(args, CLI_OPT_DTYPE) ? args->dtype : op->default_dtype;
    if (cli_given(args, CLI_OPT_INPUTS)) {
        cli_set_init(set, op, op->name, dtype, NULL);
        return cli_set_load(set, args->text[CLI_OPT_INPUTS], args);
    }
    int64_t dims[CLI_DIMS];
    cli_op_dims(op, args, dims);
    cli_set_init(set, op, op->name, dtype, dims);
    return cli_set_random(set, ctx, (uint64_t)cli_num(args, CLI_OPT_SEED, CLI_DEFAULT_SEED));
}

/* Prints to stderr which outputs of a failed check are out of tolerance. */
static void report_check_failure(const char *command, const cli_check *check)
{
    fprintf(stderr, "cvfuse %s: check failed, out of tolerance (%.1e):", command, check->tolerance);
    for (int i = 0; i < check->count; i++)
        if (!(check->rel_err[i] <= check->tolerance))
            fprintf(stderr, " %s (%.3e)", check->names[i], check->rel_err[i]);
    fputc('\n', stderr);
}

/* Prints the result (table or JSON). Returns CLI_EXIT_CHECK when the check failed. */
static int report(const cli_args *args, const cli_result *result)
{
    if (cli_given(args, CLI_OPT_JSON)) {
        cli_report_json(stdout, result);
    } else {
        char from[4200];
        if (cli_given(args, CLI_OPT_INPUTS))
            snprintf(from, sizeof from, "inputs from %s", args->text[CLI_OPT_INPUTS]);
        else
            snprintf(from, sizeof from, "random inputs, seed %lld; ms = one cold call (cvfuse bench: warm medians)",
                     (long long)cli_num(args, CLI_OPT_SEED, CLI_DEFAULT_SEED));
        cli_report_table(stdout, result, from);
    }
    if (fflush(stdout) != 0)
        return cli_runtime_error(args->command, "cannot write the results: %s", strerror(errno));
    if (result->check && !result->check->ok) {
        report_check_failure(args->command, result->check);
        return CLI_EXIT_CHECK;
    }
    return CLI_EXIT_OK;
}

/* With --check on the reference device, says on stderr that the check compares the float64
 * oracle with itself: only the rounding of its outputs to the storage dtype is checked. */
static void note_self_check(const cli_args *args, const cli_tensor_set *set)
{
    if (cli_given(args, CLI_OPT_CHECK) && args->device == CVF_DEVICE_REFERENCE)
        fprintf(stderr,
                "cvfuse %s: note: --check with --device reference compares the float64 reference with itself:\n"
                "  it checks only the rounding of the outputs to %s; use --device cpu to check the library\n",
                args->command, cvf_dtype_name(set->dtype));
}

/* Runs the op once (timed; on CUDA through device copies), writes the outputs, checks them when
 * asked and reports. Returns a CLI_EXIT_* code. */
static int run_once(const cli_op *op, const cli_args *args, cvf_context *ctx, cli_tensor_set *set)
{
    double ms = 0.0;
    int rc = cli_set_run(ctx, set, op->call, &ms);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_given(args, CLI_OPT_OUTPUTS))
        rc = cli_set_save(set, args->text[CLI_OPT_OUTPUTS], cli_given(args, CLI_OPT_INPUTS) ? CLI_OUTPUTS : CLI_ALL);
    cli_check check;
    if (rc == CLI_EXIT_OK && cli_given(args, CLI_OPT_CHECK)) {
        note_self_check(args, set);
        rc = cli_set_check(set, &check);
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    cli_result result;
    cli_result_init(&result, op, ctx, set);
    result.ms = ms;
    result.gflops = cli_gflops(op, set->dims, ms);
    result.check = cli_given(args, CLI_OPT_CHECK) ? &check : NULL;
    return report(args, &result);
}

int cli_cmd_op(const cli_op *op, int argc, char **argv)
{
    uint32_t allowed = OP_OPTIONS | cli_op_dim_mask(op);
    cli_args args;
    int rc = cli_parse(op->name, allowed, argc, argv, &args);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_given(&args, CLI_OPT_HELP)) {
        print_op_help(stdout, op, allowed);
        return CLI_EXIT_OK;
    }
    cvf_context *ctx = NULL;
    rc = cli_op_context_create(op->name, args.device, cli_num(&args, CLI_OPT_THREADS, 0), &ctx);
    if (rc != CLI_EXIT_OK)
        return rc;
    cli_tensor_set set;
    rc = prepare_inputs(op, &args, ctx, &set);
    if (rc == CLI_EXIT_OK)
        rc = run_once(op, &args, ctx, &set);
    cli_set_free(&set);
    cli_op_context_destroy(ctx);
    return rc;
}

/*
 * The bench subcommand: times the ops on seeded random inputs, warm-up runs excluded, and reports
 * the median and the minimum of the timed runs with GFLOP/s from the median, one table row or
 * JSON object per op. A side-by-side baseline library (same inputs, same process) is planned; no
 * baseline number is reported until one is measured for real.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DIM_OPTIONS                                                                                                    \
    (CLI_BIT(CLI_OPT_M) | CLI_BIT(CLI_OPT_N) | CLI_BIT(CLI_OPT_K) | CLI_BIT(CLI_OPT_S) | CLI_BIT(CLI_OPT_H) |          \
     CLI_BIT(CLI_OPT_I))
#define BENCH_OPTIONS                                                                                                  \
    (DIM_OPTIONS | CLI_BIT(CLI_OPT_OP) | CLI_BIT(CLI_OPT_DTYPE) | CLI_BIT(CLI_OPT_DEVICE) | CLI_BIT(CLI_OPT_THREADS) | \
     CLI_BIT(CLI_OPT_SEED) | CLI_BIT(CLI_OPT_REPEAT) | CLI_BIT(CLI_OPT_WARMUP) | CLI_BIT(CLI_OPT_JSON) |               \
     CLI_BIT(CLI_OPT_HELP))
#define DEFAULT_REPEAT 10
#define DEFAULT_WARMUP 2

/* Prints the help of bench. */
static void print_bench_help(FILE *out)
{
    fprintf(out, "usage: cvfuse bench [--op OP] [shape options] [--dtype T] [--threads N] [--repeat N]\n"
                 "                    [--warmup N] [--json]\n\n"
                 "Times the ops on random inputs (deterministic from --seed): --warmup untimed runs, then\n"
                 "--repeat timed runs; reports the median and the minimum time, and GFLOP/s from the median.\n\n");
    fprintf(out, "options:\n");
    cli_print_options(out, BENCH_OPTIONS);
    fprintf(out, "defaults: --op all --repeat %d --warmup %d --device cpu --threads 0 --seed %d;\n", DEFAULT_REPEAT,
            DEFAULT_WARMUP, CLI_DEFAULT_SEED);
    for (int i = 0; i < cli_op_count(); i++) {
        const cli_op *op = cli_op_at(i);
        char shape[96];
        cli_op_shape_text(op, op->dim_defaults, shape, sizeof shape);
        fprintf(out, "  %-13s %s, %s\n", op->name, shape, cvf_dtype_name(op->default_dtype));
    }
    fprintf(out, "--m/--n/--k apply to matmul-relu, --S/--H/--I to the MLP ops; --dtype to every op run.\n"
                 "--json: one object per op with op, device, dtype, shape, threads, ms (the median), gflops,\n"
                 "  min_ms, repeat, warmup. No baseline library is compared yet.\n");
}

/* Rejects dimension options that apply to none of the ops benchmarked (only, or all when NULL).
 * Returns a CLI_EXIT_* code. */
static int check_dim_options(const cli_args *args, const cli_op *only)
{
    if (!only)
        return CLI_EXIT_OK;
    uint32_t stray = args->given & DIM_OPTIONS & ~cli_op_dim_mask(only);
    for (int opt = 0; opt < CLI_OPT_COUNT; opt++)
        if (stray & CLI_BIT(opt))
            return cli_usage_error(args->command, "%s does not apply to --op %s", cli_opt_name((cli_opt)opt),
                                   only->name);
    return CLI_EXIT_OK;
}

/* qsort comparison of doubles, ascending. */
static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Returns the median of n sorted values. */
static double median_sorted(const double *values, int64_t n)
{
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Runs op on set warmup times untimed, then repeat times timed into ms[]. Returns a CLI_EXIT_*
 * code. */
static int time_runs(const cli_op *op, cvf_context *ctx, const cli_tensor_set *set, int64_t warmup, int64_t repeat,
                     double *ms)
{
    for (int64_t i = 0; i < warmup + repeat; i++) {
        double start = cvft_now_seconds();
        cvf_status status = op->run(ctx, set);
        double elapsed = (cvft_now_seconds() - start) * 1e3;
        if (status != CVF_STATUS_SUCCESS)
            return cli_library_error("bench", op->call, status, ctx);
        if (i >= warmup)
            ms[i - warmup] = elapsed;
    }
    return CLI_EXIT_OK;
}

/* Benchmarks one op and fills result. Returns a CLI_EXIT_* code. */
static int bench_op(const cli_op *op, const cli_args *args, cvf_context *ctx, cli_result *result)
{
    int64_t dims[CLI_DIMS];
    cli_op_dims(op, args, dims);
    cli_tensor_set set;
    cli_set_init(&set, op, "bench", cli_given(args, CLI_OPT_DTYPE) ? args->dtype : op->default_dtype, dims);
    int64_t repeat = cli_num(args, CLI_OPT_REPEAT, DEFAULT_REPEAT);
    int64_t warmup = cli_num(args, CLI_OPT_WARMUP, DEFAULT_WARMUP);
    double *ms = malloc((size_t)repeat * sizeof *ms);
    int rc = ms ? cli_set_random(&set, ctx, (uint64_t)cli_num(args, CLI_OPT_SEED, CLI_DEFAULT_SEED))
                : cli_runtime_error("bench", "out of memory");
    if (rc == CLI_EXIT_OK)
        rc = time_runs(op, ctx, &set, warmup, repeat, ms);
    if (rc == CLI_EXIT_OK) {
        qsort(ms, (size_t)repeat, sizeof *ms, compare_doubles);
        cli_result_init(result, op, ctx, &set);
        result->is_bench = 1;
        result->ms = median_sorted(ms, repeat);
        result->min_ms = ms[0];
        result->gflops = cli_gflops(op, dims, result->ms);
        result->repeat = repeat;
        result->warmup = warmup;
    }
    free(ms);
    cli_set_free(&set);
    return rc;
}

/* Benchmarks the selected ops on ctx, printing each as it finishes. Returns a CLI_EXIT_* code. */
static int bench_all(const cli_args *args, const cli_op *only, cvf_context *ctx)
{
    int printed = 0;
    for (int i = 0; i < cli_op_count(); i++) {
        const cli_op *op = cli_op_at(i);
        if (only && op != only)
            continue;
        cli_result result;
        int rc = bench_op(op, args, ctx, &result);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (cli_given(args, CLI_OPT_JSON)) {
            cli_report_json(stdout, &result);
        } else {
            if (!printed++)
                cli_report_bench_header(stdout, &result);
            cli_report_bench_row(stdout, &result);
        }
        fflush(stdout);
    }
    return CLI_EXIT_OK;
}

int cli_cmd_bench(int argc, char **argv)
{
    cli_args args;
    int rc = cli_parse("bench", BENCH_OPTIONS, argc, argv, &args);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_given(&args, CLI_OPT_HELP)) {
        print_bench_help(stdout);
        return CLI_EXIT_OK;
    }
    const cli_op *only = NULL;
    const char *name = args.text[CLI_OPT_OP];
    if (name && strcmp(name, "all") != 0 && !(only = cli_op_find(name)))
        return cli_usage_error("bench", "--op: '%s' is not one of matmul-relu, mlp-forward, mlp-backward, all", name);
    rc = check_dim_options(&args, only);
    if (rc != CLI_EXIT_OK)
        return rc;
    cvf_context *ctx = NULL;
    rc = cli_context_create("bench", args.device, cli_num(&args, CLI_OPT_THREADS, 0), &ctx);
    if (rc == CLI_EXIT_OK)
        rc = bench_all(&args, only, ctx);
    cvf_context_destroy(ctx);
    return rc;
}

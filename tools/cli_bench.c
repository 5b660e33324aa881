/*
 * The bench subcommand: times our ops and an unfused baseline (OpenBLAS + vectorised loops, see
 * cli_baseline.h) side by side, in this process, on the same seeded random inputs: warm-up runs
 * of both, then timed runs alternating ours, baseline, ours, baseline, ... Reports the medians
 * and minima, GFLOP/s from our median, the ratio ours / baseline, how far the baseline's outputs
 * are from ours (so that a wrong baseline cannot flatter us), and the fraction of the peak
 * measured by the probe (cli_peak.c) on the same number of threads. Cases come from --op and the
 * shape options, or from a fixed suite (--suite cpu: the CPU target shapes of docs/PERF.md).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_baseline.h"

#define DIM_OPTIONS                                                                                                    \
    (CLI_BIT(CLI_OPT_M) | CLI_BIT(CLI_OPT_N) | CLI_BIT(CLI_OPT_K) | CLI_BIT(CLI_OPT_S) | CLI_BIT(CLI_OPT_H) |          \
     CLI_BIT(CLI_OPT_I))
#define BENCH_OPTIONS                                                                                                  \
    (DIM_OPTIONS | CLI_BIT(CLI_OPT_OP) | CLI_BIT(CLI_OPT_DTYPE) | CLI_BIT(CLI_OPT_DEVICE) | CLI_BIT(CLI_OPT_THREADS) | \
     CLI_BIT(CLI_OPT_SEED) | CLI_BIT(CLI_OPT_REPEAT) | CLI_BIT(CLI_OPT_WARMUP) | CLI_BIT(CLI_OPT_SUITE) |              \
     CLI_BIT(CLI_OPT_JSON) | CLI_BIT(CLI_OPT_JSON_OUT) | CLI_BIT(CLI_OPT_HELP))
#define DEFAULT_REPEAT 10
#define DEFAULT_WARMUP 2
#define MAX_CASES 16

/* One case of a suite: an op by name, a dtype and the op's three dimensions. */
typedef struct suite_case {
    const char *op;
    cvf_dtype dtype;
    int64_t dims[CLI_DIMS];
} suite_case;

/* --suite cpu: the CPU target workloads (docs/PERF.md records them and their targets). */
static const suite_case SUITE_CPU[] = {
    {"gemm", CVF_F32, {2048, 2048, 2048}},        {"matmul-relu", CVF_F16, {2048, 2048, 2048}},
    {"matmul-relu", CVF_F16, {4096, 4096, 256}},  {"matmul-relu", CVF_F16, {8192, 1024, 64}},
    {"mlp-backward", CVF_F32, {2048, 768, 3072}}, {"matmul-relu", CVF_BF16, {2048, 2048, 2048}},
};

#define SUITE_CPU_COUNT ((int)(sizeof SUITE_CPU / sizeof SUITE_CPU[0]))

/* One case to time: an op, a dtype and its dimensions. */
typedef struct bench_case {
    const cli_op *op;
    cvf_dtype dtype;
    int64_t dims[CLI_DIMS];
} bench_case;

/* What every case of one bench invocation shares. */
typedef struct bench_run {
    const cli_args *args;
    cli_blas *blas;     /* the baseline library, or NULL */
    char blas_why[256]; /* why there is none */
    cvf_context *ctx;
    int64_t repeat, warmup;
    cli_peak peak;
    FILE *json_out; /* --json-out FILE, or NULL */
} bench_run;

/* Prints the help of bench. */
static void print_bench_help(FILE *out)
{
    fprintf(out,
            "usage: cvfuse bench [--op OP] [shape options] [--dtype T] [--threads N] [--repeat N]\n"
            "                    [--warmup N] [--json] [--json-out FILE]\n"
            "       cvfuse bench --suite cpu [--threads N] [--repeat N] [--warmup N] [--json] [--json-out FILE]\n\n"
            "Times each op and an unfused baseline on the same random inputs (deterministic from --seed),\n"
            "in this process: --warmup untimed runs of each, then --repeat timed runs alternating ours and\n"
            "the baseline. Reports medians and minima, GFLOP/s, the ratio ours / baseline and the fraction\n"
            "of the measured peak. A peak probe runs first on the same number of threads.\n\n");
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
    fprintf(out, "--m/--n/--k apply to gemm and matmul-relu, --S/--H/--I to the MLP ops; --dtype to every op run.\n"
                 "--suite cpu: gemm f32 2048^3; matmul-relu f16 2048^3, 4096x4096x256, 8192x1024x64;\n"
                 "  mlp-backward f32 S=2048 H=768 I=3072; matmul-relu bf16 2048^3 (`make bench` runs it on\n"
                 "  2 threads with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset).\n"
                 "--device cuda: the CUDA bench (builds with CUDA only).\n");
    fprintf(out,
            "baselines (OpenBLAS, found at build time and loaded by bench; same thread count; its\n"
            "OPENBLAS_THREAD_TIMEOUT set to %s unless given, so idle OpenBLAS threads do not spin\n"
            "into the next timed run):\n"
            "  gemm, matmul-relu  f32: cblas_sgemm (+ a ReLU pass); f16/bf16: convert A and B to f32,\n"
            "                     cblas_sgemm, one ReLU + convert pass (conversions timed)\n"
            "  mlp-forward (f32)  2 cblas_sgemm + a bias + GELU pass + a bias pass\n"
            "  mlp-backward (f32) 4 cblas_sgemm (transposes read in place) + a GELU' pass + 2 column sums\n"
            "  other cases: baseline \"none\". baseline_check: the largest relative Frobenius error of the\n"
            "  baseline's outputs against ours, computed once per case.\n",
            CLI_OPENBLAS_THREAD_TIMEOUT);
    fprintf(out, "--json: one object per case with op, device, dtype, shape, threads, ms (our median), gflops,\n"
                 "  min_ms, repeat, warmup, baseline (\"openblas\" or \"none\"), baseline_ms, baseline_min_ms,\n"
                 "  ratio (ms / baseline_ms), baseline_check, peak_gflops (fp32 FMA peak; the bf16 dot-product\n"
                 "  peak for bf16 cases) and peak_fraction (gflops / peak_gflops); null where unknown.\n");
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

/* Fills cases from --suite NAME. Returns a CLI_EXIT_* code. */
static int cases_from_suite(const cli_args *args, bench_case *cases, int *count)
{
    const char *name = args->text[CLI_OPT_SUITE];
    if (strcmp(name, "cpu") != 0)
        return cli_usage_error("bench", "--suite: '%s' is not one of cpu", name);
    uint32_t fixed = DIM_OPTIONS | CLI_BIT(CLI_OPT_OP) | CLI_BIT(CLI_OPT_DTYPE);
    for (int opt = 0; opt < CLI_OPT_COUNT; opt++)
        if (args->given & fixed & CLI_BIT(opt))
            return cli_usage_error("bench", "%s does not apply to --suite (it fixes the ops, shapes and dtypes)",
                                   cli_opt_name((cli_opt)opt));
    *count = 0;
    for (int i = 0; i < SUITE_CPU_COUNT; i++) {
        bench_case *c = &cases[(*count)++];
        c->op = cli_op_find(SUITE_CPU[i].op);
        c->dtype = SUITE_CPU[i].dtype;
        memcpy(c->dims, SUITE_CPU[i].dims, sizeof c->dims);
    }
    return CLI_EXIT_OK;
}

/* Fills cases from --op (one op, or all) with the shape options and --dtype. Returns a CLI_EXIT_*
 * code. */
static int cases_from_options(const cli_args *args, bench_case *cases, int *count)
{
    const cli_op *only = NULL;
    const char *name = args->text[CLI_OPT_OP];
    if (name && strcmp(name, "all") != 0 && !(only = cli_op_find(name)))
        return cli_usage_error("bench", "--op: '%s' is not one of gemm, matmul-relu, mlp-forward, mlp-backward, all",
                               name);
    int rc = check_dim_options(args, only);
    if (rc != CLI_EXIT_OK)
        return rc;
    *count = 0;
    for (int i = 0; i < cli_op_count(); i++) {
        const cli_op *op = cli_op_at(i);
        if (only && op != only)
            continue;
        bench_case *c = &cases[(*count)++];
        c->op = op;
        c->dtype = cli_given(args, CLI_OPT_DTYPE) ? args->dtype : op->default_dtype;
        cli_op_dims(op, args, c->dims);
    }
    return CLI_EXIT_OK;
}

/* qsort comparison of doubles, ascending. */
static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts n values and returns their median. */
static double median(double *values, int64_t n)
{
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Runs our op once on set; stores its time in *ms. Returns a CLI_EXIT_* code. */
static int time_ours(const cli_op *op, cvf_context *ctx, const cli_tensor_set *set, double *ms)
{
    double start = cvft_now_seconds();
    cvf_status status = op->run(ctx, set);
    *ms = (cvft_now_seconds() - start) * 1e3;
    if (status != CVF_STATUS_SUCCESS)
        return cli_library_error("bench", op->call, status, ctx);
    return CLI_EXIT_OK;
}

/* Runs the baseline once; returns its time in ms. */
static double time_baseline(cli_baseline *baseline)
{
    double start = cvft_now_seconds();
    cli_baseline_run(baseline);
    return (cvft_now_seconds() - start) * 1e3;
}

/* Runs warmup + repeat rounds of ours then the baseline (when there is one) on set, keeping the
 * times of the last repeat rounds in ours[] and base[]. Each of our runs therefore starts with its
 * workers asleep (woken by the call), as after other work. Returns a CLI_EXIT_* code. */
static int alternate(const bench_run *run, const cli_tensor_set *set, cli_baseline *baseline, double *ours,
                     double *base)
{
    for (int64_t i = 0; i < run->warmup + run->repeat; i++) {
        double ms;
        int rc = time_ours(set->op, run->ctx, set, &ms);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (i >= run->warmup)
            ours[i - run->warmup] = ms;
        if (baseline) {
            /* our workers stop spinning before the baseline runs, as OpenBLAS's are made to
             * (OPENBLAS_THREAD_TIMEOUT): neither side's idle threads take the other's cores */
            cvf_context_park_threads(run->ctx);
            ms = time_baseline(baseline);
            if (i >= run->warmup)
                base[i - run->warmup] = ms;
        }
    }
    return CLI_EXIT_OK;
}

/* Returns the peak a case of dtype is held against: the peak of the unit bf16 products run on for
 * bf16, else the fp32 FMA peak. */
static double peak_for(const cli_peak *peak, cvf_dtype dtype)
{
    return dtype == CVF_BF16 ? peak->bf16_gflops : peak->fp32_gflops;
}

/* Fills the timing fields of result from the sorted-in-place times. */
static void fill_times(const bench_run *run, const bench_case *c, double *ours, double *base, int have_base,
                       cli_result *result)
{
    result->is_bench = 1;
    result->repeat = run->repeat;
    result->warmup = run->warmup;
    result->ms = median(ours, run->repeat);
    result->min_ms = ours[0];
    result->gflops = cli_gflops(c->op, c->dims, result->ms);
    result->peak_gflops = peak_for(&run->peak, c->dtype);
    result->baseline = have_base ? CLI_BASELINE_LIBRARY : "none";
    result->baseline_ms = have_base ? median(base, run->repeat) : NAN;
    result->baseline_min_ms = have_base ? base[0] : NAN;
    result->baseline_check = NAN;
}

/* Benchmarks one case (ours and its baseline) and fills result. Returns a CLI_EXIT_* code. */
static int bench_case_run(const bench_run *run, const bench_case *c, cli_result *result)
{
    cli_tensor_set set;
    cli_set_init(&set, c->op, "bench", c->dtype, c->dims);
    double *ours = malloc((size_t)run->repeat * sizeof *ours);
    double *base = malloc((size_t)run->repeat * sizeof *base);
    int rc = ours && base ? cli_set_random(&set, run->ctx, (uint64_t)cli_num(run->args, CLI_OPT_SEED, CLI_DEFAULT_SEED))
                          : cli_runtime_error("bench", "out of memory");
    cli_baseline *baseline = NULL;
    if (rc == CLI_EXIT_OK && !cli_baseline_unsupported(run->blas, &set))
        rc = cli_baseline_create(run->blas, &set, (int)cvf_context_threads(run->ctx), &baseline);
    if (rc == CLI_EXIT_OK)
        rc = alternate(run, &set, baseline, ours, base);
    if (rc == CLI_EXIT_OK) {
        cli_result_init(result, c->op, run->ctx, &set);
        fill_times(run, c, ours, base, baseline != NULL, result);
        if (baseline)
            result->baseline_check = cli_baseline_check(baseline, &set);
    }
    cli_baseline_destroy(baseline);
    free(ours);
    free(base);
    cli_set_free(&set);
    return rc;
}

/* Writes the note lines of the table header (peak and baseline) into buf. */
static void header_notes(const bench_run *run, char *buf, size_t size)
{
    const cli_peak *peak = &run->peak;
    char baseline[640];
    cli_baseline_describe(run->blas, run->blas_why, baseline, sizeof baseline);
    char bf16[64] = "none";
    if (!isnan(peak->bf16_gflops))
        snprintf(bf16, sizeof bf16, "%.1f GFLOP/s (%s)", peak->bf16_gflops, peak->bf16_isa);
    snprintf(buf, size, "peak on %d thread(s): fp32 FMA %.1f GFLOP/s (%s), bf16 %s\nbaseline: %s\n", peak->threads,
             peak->fp32_gflops, peak->fp32_isa, bf16, baseline);
}

/* Prints one case's result: JSON or a table row (the header before the first), and to --json-out.
 * Returns a CLI_EXIT_* code. */
static int print_case(const bench_run *run, const cli_result *result, int index)
{
    if (cli_given(run->args, CLI_OPT_JSON)) {
        cli_report_json(stdout, result);
    } else {
        if (index == 0) {
            char notes[1024];
            header_notes(run, notes, sizeof notes);
            cli_report_bench_header(stdout, result->device, (int)result->threads, run->repeat, run->warmup, notes);
        }
        cli_report_bench_row(stdout, result);
    }
    fflush(stdout);
    if (run->json_out) {
        cli_report_json(run->json_out, result);
        if (fflush(run->json_out) != 0)
            return cli_runtime_error("bench", "cannot write %s: %s", run->args->text[CLI_OPT_JSON_OUT],
                                     strerror(errno));
    }
    return CLI_EXIT_OK;
}

/* Measures the peak, then benchmarks every case, printing each as it finishes. Returns a
 * CLI_EXIT_* code. */
static int bench_cases(bench_run *run, const bench_case *cases, int count)
{
    cli_peak_measure((int)cvf_context_threads(run->ctx), &run->peak);
    for (int i = 0; i < count; i++) {
        cli_result result;
        int rc = bench_case_run(run, &cases[i], &result);
        if (rc == CLI_EXIT_OK)
            rc = print_case(run, &result, i);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

/* Opens --json-out FILE (when given) into run->json_out. Returns a CLI_EXIT_* code. */
static int open_json_out(bench_run *run)
{
    const char *path = run->args->text[CLI_OPT_JSON_OUT];
    if (!path)
        return CLI_EXIT_OK;
    run->json_out = fopen(path, "w");
    if (!run->json_out)
        return cli_runtime_error("bench", "cannot open %s: %s", path, strerror(errno));
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
    if (args.cuda)
        return cli_bench_cuda(&args);
    bench_case cases[MAX_CASES];
    int count = 0;
    rc = cli_given(&args, CLI_OPT_SUITE) ? cases_from_suite(&args, cases, &count)
                                         : cases_from_options(&args, cases, &count);
    if (rc != CLI_EXIT_OK)
        return rc;
    bench_run run = {0};
    run.args = &args;
    run.repeat = cli_num(&args, CLI_OPT_REPEAT, DEFAULT_REPEAT);
    run.warmup = cli_num(&args, CLI_OPT_WARMUP, DEFAULT_WARMUP);
    run.blas = cli_baseline_open(run.blas_why, sizeof run.blas_why); /* before any thread starts */
    rc = cli_context_create("bench", args.device, cli_num(&args, CLI_OPT_THREADS, 0), &run.ctx);
    if (rc == CLI_EXIT_OK)
        rc = open_json_out(&run);
    if (rc == CLI_EXIT_OK)
        rc = bench_cases(&run, cases, count);
    if (run.json_out && fclose(run.json_out) != 0 && rc == CLI_EXIT_OK)
        rc = cli_runtime_error("bench", "cannot write %s: %s", args.text[CLI_OPT_JSON_OUT], strerror(errno));
    cvf_context_destroy(run.ctx);
    cli_baseline_close(run.blas);
    return rc;
}

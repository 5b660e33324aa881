/*
 * bench --device cuda: ours against cuBLASLt on the GPU, through the CUDA bench of
 * bench/cuda_bench.c (compiled into the CLI in CUDA builds, with cuBLASLt linked into the CLI only).
 * Without --op (or with --op all) the suite runs: --suite all (the default: the MatMul+ReLU targets
 * and the MLP backward/forward targets of docs/PERF.md), matmul or mlp. --op matmul-relu|gemm
 * with --m/--n/--k (default 4096) and --dtype (default f16) runs one matmul case; --op
 * mlp-backward|mlp-forward with --S/--H/--I (default 12608, 768, 3072) and --dtype (default bf16)
 * runs one MLP case. --repeat, --warmup, --json and --json-out pass through.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef CVF_HAVE_CUDA

int cli_bench_cuda(const cli_args *args)
{
    (void)args;
    fprintf(stderr, "cvfuse bench: built without CUDA\n");
    return CLI_EXIT_USAGE;
}

#else

int cvf_cuda_bench_main(int argc, char **argv); /* bench/cuda_bench.c */

/* The dimension options and defaults of one kind of case. */
typedef struct cuda_case_kind {
    const char *ops[2];
    cli_opt dims[3];
    long long defaults[3];
    const char *dtype; /* default */
} cuda_case_kind;

static const cuda_case_kind KIND_MATMUL = {
    {"matmul-relu", "gemm"}, {CLI_OPT_M, CLI_OPT_N, CLI_OPT_K}, {4096, 4096, 4096}, "f16"};
static const cuda_case_kind KIND_MLP = {
    {"mlp-backward", "mlp-forward"}, {CLI_OPT_S, CLI_OPT_H, CLI_OPT_I}, {12608, 768, 3072}, "bf16"};

/* Returns whether op is one of kind's ops. */
static int kind_has(const cuda_case_kind *kind, const char *op)
{
    return strcmp(op, kind->ops[0]) == 0 || strcmp(op, kind->ops[1]) == 0;
}

/* Rejects a dimension option of the other kind (--S with gemm, --m with mlp-backward). Returns a
 * CLI_EXIT_* code. */
static int check_dims(const cli_args *args, const cuda_case_kind *other, const char *op)
{
    for (int i = 0; i < 3; i++)
        if (cli_given(args, other->dims[i]))
            return cli_usage_error(args->command, "%s does not apply to --op %s", cli_opt_name(other->dims[i]), op);
    return CLI_EXIT_OK;
}

/* Writes the one case of --op (op,dtype,d0,d1,d2) into text. Returns a CLI_EXIT_* code. */
static int one_case(const cli_args *args, const char *op, char *text, size_t size)
{
    const cuda_case_kind *kind = kind_has(&KIND_MATMUL, op) ? &KIND_MATMUL : kind_has(&KIND_MLP, op) ? &KIND_MLP : NULL;
    if (!kind)
        return cli_usage_error(
            args->command, "--device cuda benchmarks --op matmul-relu, gemm, mlp-backward, mlp-forward or all, not %s",
            op);
    int rc = check_dims(args, kind == &KIND_MATMUL ? &KIND_MLP : &KIND_MATMUL, op);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *dtype = cli_given(args, CLI_OPT_DTYPE) ? cvf_dtype_name(args->dtype) : kind->dtype;
    if (strcmp(dtype, "f16") != 0 && strcmp(dtype, "bf16") != 0)
        return cli_usage_error(args->command, "--device cuda benchmarks f16 or bf16, not %s", dtype);
    snprintf(text, size, "%s,%s,%lld,%lld,%lld", op, dtype, (long long)cli_num(args, kind->dims[0], kind->defaults[0]),
             (long long)cli_num(args, kind->dims[1], kind->defaults[1]),
             (long long)cli_num(args, kind->dims[2], kind->defaults[2]));
    return CLI_EXIT_OK;
}

/* Checks --suite (all, matmul or mlp; not with an --op other than all). Returns a CLI_EXIT_* code. */
static int check_suite(const cli_args *args, const char *op)
{
    const char *suite = args->text[CLI_OPT_SUITE];
    if (strcmp(suite, "all") != 0 && strcmp(suite, "matmul") != 0 && strcmp(suite, "mlp") != 0)
        return cli_usage_error(args->command, "--device cuda: --suite is all, matmul or mlp, not %s", suite);
    if (op && strcmp(op, "all") != 0)
        return cli_usage_error(args->command, "--suite does not apply to --op %s", op);
    return CLI_EXIT_OK;
}

int cli_bench_cuda(const cli_args *args)
{
    char repeat[32], warmup[32], case_text[160];
    char *argv[12] = {"cvfuse bench --device cuda"};
    int argc = 1, rc = CLI_EXIT_OK;
    const char *op = cli_given(args, CLI_OPT_OP) ? args->text[CLI_OPT_OP] : NULL;
    if (cli_given(args, CLI_OPT_REPEAT)) {
        snprintf(repeat, sizeof repeat, "%lld", (long long)cli_num(args, CLI_OPT_REPEAT, 50));
        argv[argc++] = "--repeat";
        argv[argc++] = repeat;
    }
    if (cli_given(args, CLI_OPT_WARMUP)) {
        snprintf(warmup, sizeof warmup, "%lld", (long long)cli_num(args, CLI_OPT_WARMUP, 10));
        argv[argc++] = "--warmup";
        argv[argc++] = warmup;
    }
    const char *json = cli_given(args, CLI_OPT_JSON_OUT) ? args->text[CLI_OPT_JSON_OUT]
                       : cli_given(args, CLI_OPT_JSON)   ? "/dev/stdout"
                                                         : NULL;
    if (json) {
        argv[argc++] = "--json";
        argv[argc++] = (char *)json;
    }
    if (cli_given(args, CLI_OPT_SUITE)) {
        if ((rc = check_suite(args, op)) != CLI_EXIT_OK)
            return rc;
        argv[argc++] = "--suite";
        argv[argc++] = (char *)args->text[CLI_OPT_SUITE];
    }
    if (op && strcmp(op, "all") != 0) {
        if ((rc = one_case(args, op, case_text, sizeof case_text)) != CLI_EXIT_OK)
            return rc;
        argv[argc++] = case_text;
    }
    rc = cvf_cuda_bench_main(argc, argv);
    return rc == 0 ? CLI_EXIT_OK : rc == 2 ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
}

#endif

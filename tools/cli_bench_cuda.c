/*
 * bench --device cuda: ours against cuBLASLt on the GPU, through the CUDA bench of
 * bench/cuda_bench.c (compiled into the CLI in CUDA builds, with cuBLASLt linked into the CLI only).
 * Without --op the target cases run; --op matmul-relu|gemm with --m/--n/--k/--dtype runs one.
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

int cli_bench_cuda(const cli_args *args)
{
    char repeat[32], one_case[128];
    char *argv[8] = {"cvfuse bench --device cuda"};
    int argc = 1;
    if (cli_given(args, CLI_OPT_REPEAT)) {
        snprintf(repeat, sizeof repeat, "%lld", (long long)cli_num(args, CLI_OPT_REPEAT, 50));
        argv[argc++] = "--repeat";
        argv[argc++] = repeat;
    }
    const char *json = cli_given(args, CLI_OPT_JSON_OUT) ? args->text[CLI_OPT_JSON_OUT]
                       : cli_given(args, CLI_OPT_JSON)   ? "/dev/stdout"
                                                         : NULL;
    if (json) {
        argv[argc++] = "--json";
        argv[argc++] = (char *)json;
    }
    if (cli_given(args, CLI_OPT_OP)) {
        const char *op = args->text[CLI_OPT_OP];
        if (strcmp(op, "matmul-relu") != 0 && strcmp(op, "gemm") != 0)
            return cli_usage_error(args->command, "--device cuda benchmarks --op matmul-relu or gemm, not %s", op);
        const char *dtype = cli_given(args, CLI_OPT_DTYPE) ? cvf_dtype_name(args->dtype) : "f16";
        if (strcmp(dtype, "f16") != 0 && strcmp(dtype, "bf16") != 0)
            return cli_usage_error(args->command, "--device cuda benchmarks f16 or bf16, not %s", dtype);
        snprintf(one_case, sizeof one_case, "%s,%s,%lld,%lld,%lld", op, dtype,
                 (long long)cli_num(args, CLI_OPT_M, 4096), (long long)cli_num(args, CLI_OPT_N, 4096),
                 (long long)cli_num(args, CLI_OPT_K, 4096));
        argv[argc++] = one_case;
    }
    int rc = cvf_cuda_bench_main(argc, argv);
    return rc == 0 ? CLI_EXIT_OK : rc == 2 ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
}

#endif

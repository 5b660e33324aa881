/*
 * bench --device cuda. This file holds only the stub of builds without CUDA (CVF_HAVE_CUDA
 * undefined); a CUDA build provides the real cli_bench_cuda elsewhere.
 */
#include "cli.h"

#ifndef CVF_HAVE_CUDA

int cli_bench_cuda(const cli_args *args)
{
    (void)args;
    fprintf(stderr, "cvfuse bench: built without CUDA\n");
    return CLI_EXIT_USAGE;
}

#else

/* Keeps the translation unit non-empty in CUDA builds. */
typedef int cli_bench_cuda_elsewhere;

#endif

/*
 * cvf_column_sum alone on the CPU (K3 of the MLP backward: grad_fc2_bias = grad_output.sum(0)):
 * wall time of 21 calls on one context, median and minimum. Not part of the build:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Ibench bench/cpu_column_sum.c build/libcvfuse.a -lpthread -lm \
 *       -o build/column_sum
 *   build/column_sum [threads] [rows] [cols] [bf16|f32]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cvf.h"
#include "bench_time.h"

int main(int argc, char **argv)
{
    enum { REPEAT = 21 };
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const int64_t rows = argc > 2 ? atoll(argv[2]) : 2048, cols = argc > 3 ? atoll(argv[3]) : 768;
    const cvf_dtype dtype = argc > 4 && strcmp(argv[4], "f32") == 0 ? CVF_F32 : CVF_BF16;
    if (threads < 1 || rows < 1 || cols < 1) {
        fprintf(stderr, "usage: %s [threads >= 1] [rows >= 1] [cols >= 1] [bf16|f32]\n", argv[0]);
        return 2;
    }
    cvf_context *ctx = bench_cpu_context(threads);
    const cvf_matrix x = bench_matrix(dtype, rows, cols);
    float *sums = malloc(sizeof(float) * (size_t)cols);
    if (!sums)
        return 1;
    const cvf_vector out = cvf_vector_dense(sums, CVF_F32, cols);
    double t[REPEAT];
    for (int r = 0; r < REPEAT; r++) {
        const double start = bench_seconds(CLOCK_MONOTONIC);
        if (cvf_column_sum(ctx, &x, &out) != CVF_STATUS_SUCCESS) {
            fprintf(stderr, "cvf_column_sum: %s\n", cvf_context_last_error(ctx));
            return 1;
        }
        t[r] = bench_seconds(CLOCK_MONOTONIC) - start;
    }
    bench_sort(t, REPEAT);
    printf("column_sum %s %lld x %lld, %d threads: median %.3f ms, min %.3f\n", dtype == CVF_F32 ? "f32" : "bf16",
           (long long)rows, (long long)cols, threads, t[REPEAT / 2] * 1e3, t[0] * 1e3);
    free(sums);
    cvf_context_destroy(ctx);
    return 0;
}

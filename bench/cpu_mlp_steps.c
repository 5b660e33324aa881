/*
 * The four GEMMs of the bf16 (or f32) MLP backward timed one by one (PERF.md, issue 15, steps 7-11), each
 * with its own layout and epilogue as cvf_mlp_backward runs them at the amx level (weights in PyTorch's
 * (out, in) layout: fc1_weight I x H, fc2_weight H x I):
 *   K1    grad_fc1_output = (grad_output @ fc2_weight) * gelu_tanh'(fc1_output), grad_fc1_bias sums
 *   K2-1  grad_fc2_weight = grad_output^T @ gelu_output          (A transposed, read in place)
 *   K2-2  grad_fc1_weight = grad_fc1_output^T @ hidden_state     (A transposed, read in place)
 *   K2-3  grad_hidden_state = grad_fc1_output @ fc1_weight
 * on a one-thread CPU context, by thread CPU time (or on `threads` threads, by wall time): one
 * untimed call, then the median, minimum, quartiles and maximum of `repeat` calls (the quartiles
 * show a multi-threaded run's call-to-call spread). Not part of the build; on a CPU
 * with AMX:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/cpu_mlp_steps.c build/libcvfuse.a -lpthread -lm \
 *       -o build/mlp_steps
 *   CVF_CPU_ISA=amx build/mlp_steps [repeat] [step] [k1_epilogue] [bf16|f32] [threads] [S]
 *
 * step: 0 (K1) .. 3 (K2-3), or -1 for all (default); k1_epilogue: full (default), plain (K1
 * without GELU' and sums: its epilogue's share), sums (column sums only); S: tokens (2048).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cvf.h"
#include "bench_time.h"

int main(int argc, char **argv)
{
    const int64_t H = 768, I = 3072, S = argc > 6 ? atoll(argv[6]) : 2048;
    int repeat = argc > 1 ? atoi(argv[1]) : 7, only = argc > 2 ? atoi(argv[2]) : -1;
    const char *k1_epilogue = argc > 3 ? argv[3] : "full";
    const cvf_dtype dtype = argc > 4 && strcmp(argv[4], "f32") == 0 ? CVF_F32 : CVF_BF16;
    const int threads = argc > 5 ? atoi(argv[5]) : 1;
    if (repeat < 1 || repeat > 100 || threads < 1 || S < 1) {
        fprintf(stderr, "usage: %s [repeat 1..100] [step 0..3 | -1] [full|plain|sums] [bf16|f32] [threads] [S]\n",
                argv[0]);
        return 2;
    }
    cvf_context *ctx = bench_cpu_context(threads);
    static bench_mlp m; /* the epilogues point into it */
    bench_mlp_make(&m, dtype, S, H, I);
    if (strcmp(k1_epilogue, "plain") == 0)
        m.k1 = m.none;
    else if (strcmp(k1_epilogue, "sums") == 0)
        m.k1 = (cvf_epilogue){.bias_grad = &m.grad_fc1_bias};
    double total = 0;
    for (int s = 0; s < 4; s++) {
        if (only >= 0 && s != only)
            continue;
        const bench_mlp_gemm g = bench_mlp_step(&m, s);
        double t[101];
        for (int r = 0; r <= repeat; r++) {
            double start = threads > 1 ? bench_seconds(CLOCK_MONOTONIC) : bench_thread_seconds();
            if (cvf_matmul(ctx, g.a, g.b, g.c, g.ep) != CVF_STATUS_SUCCESS) {
                fprintf(stderr, "%s: %s\n", g.name, cvf_context_last_error(ctx));
                return 1;
            }
            t[r] = (threads > 1 ? bench_seconds(CLOCK_MONOTONIC) : bench_thread_seconds()) - start;
        }
        bench_sort(t + 1, repeat); /* t[0]: the untimed first call */
        double median = t[1 + repeat / 2];
        total += median;
        printf("%-24s %8.2f ms  min %8.2f  q1 %8.2f  q3 %8.2f  max %8.2f  %6.0f GFLOP/s\n", g.name,
               median * 1e3, t[1] * 1e3, t[1 + repeat / 4] * 1e3, t[1 + 3 * repeat / 4] * 1e3, t[repeat] * 1e3,
               2.0 * (double)S * (double)H * (double)I / median * 1e-9);
    }
    printf("sum of medians %.2f ms\n", total * 1e3);
    cvf_context_destroy(ctx);
    return 0;
}

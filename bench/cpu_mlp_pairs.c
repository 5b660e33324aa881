/*
 * Does the CPU MLP backward gain from running its independent GEMMs at the same time, each on part
 * of the threads? (issue 15: at 16 threads each step's parallel efficiency is well under one.) The
 * four GEMMs of bench/cpu_mlp_steps.c, S x 768 x 3072, in four ways, in one process, on the same
 * tensors, the ways taking turns call by call:
 *   library  cvf_mlp_backward on one context of `threads` threads (also K3's column sums), its steps
 *            one after another on all the threads (the default)
 *   serial   K1, K2-1, K2-2, K2-3 one after another on that context
 *   pairs    K1 beside K2-1, then K2-2 beside K2-3 (both need K1's grad_fc1_output), each pair on
 *            two contexts of `first` and threads - first threads, the second GEMM of a pair on a
 *            helper thread
 *   serial+K3  the serial way, then K3's column sums (cvf_column_sum): the library's work through the
 *            public calls, so that library - serial+K3 is what the library adds around its steps
 * Wall time per whole backward: median, minimum, quartiles of `repeat` calls after one untimed;
 * every context's workers are parked after each call, so each way starts from sleeping workers.
 * (The library ran such pairs itself under CVF_CPU_LANES=1 until they were measured no faster on
 * the 16-core host, docs/PERF.md 2026-12-07.)
 * Not part of the build:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/cpu_mlp_pairs.c build/libcvfuse.a -lpthread -lm \
 *       -o build/mlp_pairs
 *   build/mlp_pairs [repeat] [bf16|f32] [threads] [S] [first]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cvf.h"
#include "bench_time.h"

/* One GEMM of the backward on a context. */
typedef struct gemm_call {
    cvf_context *ctx;
    const cvf_matrix *a, *b, *c;
    const cvf_epilogue *ep;
    cvf_status status;
} gemm_call;

static void *run_gemm(void *arg)
{
    gemm_call *g = arg;
    g->status = cvf_matmul(g->ctx, g->a, g->b, g->c, g->ep);
    return NULL;
}

/* Runs x on this thread and y on a helper thread; returns whether both succeeded. */
static int run_pair(gemm_call *x, gemm_call *y)
{
    pthread_t helper;
    if (pthread_create(&helper, NULL, run_gemm, y) != 0)
        return 0;
    run_gemm(x);
    pthread_join(helper, NULL);
    return x->status == CVF_STATUS_SUCCESS && y->status == CVF_STATUS_SUCCESS;
}

static void report(const char *name, double *t, int repeat)
{
    bench_sort(t, repeat);
    printf("%-9s %8.2f ms  min %8.2f  q1 %8.2f  q3 %8.2f  max %8.2f\n", name, t[repeat / 2] * 1e3, t[0] * 1e3,
           t[repeat / 4] * 1e3, t[3 * repeat / 4] * 1e3, t[repeat - 1] * 1e3);
}

int main(int argc, char **argv)
{
    const int repeat = argc > 1 ? atoi(argv[1]) : 15;
    const cvf_dtype dtype = argc > 2 && strcmp(argv[2], "f32") == 0 ? CVF_F32 : CVF_BF16;
    const int threads = argc > 3 ? atoi(argv[3]) : 16;
    const int64_t H = 768, I = 3072, S = argc > 4 ? atoll(argv[4]) : 2048;
    const int first = argc > 5 ? atoi(argv[5]) : threads / 2;
    if (repeat < 1 || repeat > 200 || threads < 2 || S < 1 || first < 1 || first >= threads) {
        fprintf(stderr, "usage: %s [repeat 1..200] [bf16|f32] [threads >= 2] [S] [first 1..threads-1]\n", argv[0]);
        return 2;
    }
    cvf_context *whole = bench_cpu_context(threads), *part_a = bench_cpu_context(first),
                *part_b = bench_cpu_context(threads - first);
    static bench_mlp m; /* the epilogues point into it */
    bench_mlp_make(&m, dtype, S, H, I);
    gemm_call steps[4];
    for (int s = 0; s < 4; s++) {
        const bench_mlp_gemm g = bench_mlp_step(&m, s);
        steps[s] = (gemm_call){NULL, g.a, g.b, g.c, g.ep, CVF_STATUS_SUCCESS};
    }
    cvf_mlp_backward_args args = {0};
    args.grad_output = m.grad_output;
    args.hidden_state = m.hidden;
    args.fc1_weight = m.fc1_weight;
    args.fc2_weight = m.fc2_weight;
    args.fc1_output = m.fc1_output;
    args.gelu_output = m.gelu_output;
    args.grad_hidden_state = m.grad_hidden;
    args.grad_fc1_weight = m.grad_fc1_weight;
    args.grad_fc1_bias = m.grad_fc1_bias;
    args.grad_fc2_weight = m.grad_fc2_weight;
    args.grad_fc2_bias = m.grad_fc2_bias;
    enum { WAYS = 4 };
    double *times[WAYS];
    for (int w = 0; w < WAYS; w++)
        times[w] = calloc((size_t)repeat, sizeof(double));
    for (int r = -1; r < repeat; r++) {
        for (int i = 0; i < WAYS; i++) {
            const int way = (i + (r < 0 ? 0 : r)) % WAYS; /* each way goes first in turn */
            const double start = bench_seconds(CLOCK_MONOTONIC);
            int ok = 1;
            if (way == 0) {
                ok = cvf_mlp_backward(whole, &args) == CVF_STATUS_SUCCESS;
            } else if (way == 1 || way == 3) {
                for (int s = 0; s < 4 && ok; s++) {
                    steps[s].ctx = whole;
                    run_gemm(&steps[s]);
                    ok = steps[s].status == CVF_STATUS_SUCCESS;
                }
                if (ok && way == 3)
                    ok = cvf_column_sum(whole, &m.grad_output, &m.grad_fc2_bias) == CVF_STATUS_SUCCESS;
            } else {
                steps[0].ctx = steps[2].ctx = part_a;
                steps[1].ctx = steps[3].ctx = part_b;
                ok = run_pair(&steps[0], &steps[1]) && run_pair(&steps[2], &steps[3]);
            }
            const double t = bench_seconds(CLOCK_MONOTONIC) - start;
            if (!ok) {
                fprintf(stderr, "way %d failed: %s / %s / %s\n", way, cvf_context_last_error(whole),
                        cvf_context_last_error(part_a), cvf_context_last_error(part_b));
                return 1;
            }
            if (r >= 0)
                times[way][r] = t;
            /* no way starts beside another context's workers still spinning from the last one */
            cvf_context *all[] = {whole, part_a, part_b};
            for (int c = 0; c < 3; c++)
                cvf_context_park_threads(all[c]);
        }
    }
    printf("%s S=%lld threads %d (pairs on %d + %d)\n", dtype == CVF_F32 ? "f32" : "bf16", (long long)S,
           threads, first, threads - first);
    report("library", times[0], repeat);
    report("serial", times[1], repeat);
    report("pairs", times[2], repeat);
    report("serial+K3", times[3], repeat);
    cvf_context_destroy(whole);
    cvf_context_destroy(part_a);
    cvf_context_destroy(part_b);
    return 0;
}

/*
 * The first cvf_matmul after a pause against the call right after it (PERF.md, 2026-12-07 sixteenth
 * session): on one context, `rounds` rounds of each pause (0, 1, 5, 20, 50 ms of sleep), 15 pairs
 * of calls each, the medians of the first and of the second call (wall time). After the pool's
 * spin (CVF_CPU_SPIN_US, 2 ms) the workers sleep and the first call wakes them; on one thread
 * there are no workers, so what remains there is the CPU's own state after idling (caches,
 * clocks, a virtual machine's halted vCPU). Not part of the build:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/cpu_pause_probe.c build/libcvfuse.a -lpthread -lm \
 *       -o build/pause_probe
 *   build/pause_probe [threads] [n] [rounds] [f32|bf16]      (defaults 2 512 2 f32: n x n x n products)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_cvf.h"
#include "bench_time.h"

#define PAIRS 15

/* Sleeps ms milliseconds (none for 0). */
static void pause_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec t = {(time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L};
    nanosleep(&t, NULL);
}

/* Milliseconds one cvf_matmul takes; exits with the library's message if it fails. */
static double timed_call(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c)
{
    const cvf_epilogue none = {0};
    double start = bench_seconds(CLOCK_MONOTONIC);
    if (cvf_matmul(ctx, a, b, c, &none) != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "cvf_matmul: %s\n", cvf_context_last_error(ctx));
        exit(1);
    }
    return (bench_seconds(CLOCK_MONOTONIC) - start) * 1e3;
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 2;
    const int64_t n = argc > 2 ? atoll(argv[2]) : 512;
    const cvf_dtype dtype = argc > 4 && strcmp(argv[4], "bf16") == 0 ? CVF_BF16 : CVF_F32;
    if (threads < 1 || n < 1 || rounds < 1) {
        fprintf(stderr, "usage: %s [threads] [n] [rounds] [f32|bf16]\n", argv[0]);
        return 2;
    }
    static const double pauses[] = {0, 1, 5, 20, 50};
    cvf_context *ctx = bench_cpu_context(threads);
    const cvf_matrix a = bench_matrix(dtype, n, n), b = bench_matrix(dtype, n, n), c = bench_matrix(dtype, n, n);
    for (int i = 0; i < 10; i++) /* warm: packed buffers, pages, the pool */
        timed_call(ctx, &a, &b, &c);
    for (int r = 0; r < rounds; r++)
        for (size_t p = 0; p < sizeof pauses / sizeof pauses[0]; p++) {
            double first[PAIRS], second[PAIRS];
            for (int k = 0; k < PAIRS; k++) {
                pause_ms(pauses[p]);
                first[k] = timed_call(ctx, &a, &b, &c);
                second[k] = timed_call(ctx, &a, &b, &c);
            }
            printf("round %d threads %d n %lld pause %2.0f ms: first call %.3f ms, second %.3f (medians of %d)\n", r,
                   threads, (long long)n, pauses[p], bench_median(first, PAIRS), bench_median(second, PAIRS), PAIRS);
        }
    free(a.data), free(b.data), free(c.data);
    cvf_context_destroy(ctx);
    return 0;
}

/*
 * Side-by-side timing of cvfuse's CPU GEMM (f32, no epilogue) against
 * OpenBLAS's cblas_sgemm, in one process, interleaved call by call, medians over many calls.
 * Reports both wall time and CPU time (CLOCK_PROCESS_CPUTIME_ID): on a shared, loaded machine the
 * wall time of a call swings with other processes' load, while the CPU time of a single-threaded
 * call does not (with more threads OpenBLAS's waiting threads spin and count CPU time; ours sleep).
 * (`cvfuse bench` times the fused ops; this is for tuning the GEMM itself.) Not part of the build (issue 16's tuning
 * tool); build it by hand:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/cpu_side_by_side.c build/libcvfuse.a \
 *       -lopenblas -lpthread -lm -o build/side_by_side
 *   CVF_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell build/side_by_side M N K [threads] [calls] [a|b|ab]
 *
 * a: A is stored (K x M) and read transposed; b: B is stored (N x K) and read transposed (a
 * PyTorch Linear weight). FLUSH_MB=n
 * writes n MiB before each call (caches cold). SUBNORMAL=p makes a fraction p of A's values
 * subnormal (+-1e-39, evenly spread): a GELU output of the MLP forward holds ~2% of them where the
 * pre-activation reaches -10 (Intel cores send an FMA with a subnormal input to a microcode assist).
 * Where the system has no cblas.h (OpenBLAS's runtime package alone), link -l:libopenblas.so.0.
 */
#if defined(__has_include)
#if __has_include(<cblas.h>)
#include <cblas.h>
#define CVF_HAVE_CBLAS_H 1
#endif
#endif
#ifndef CVF_HAVE_CBLAS_H /* the two enums and the one function used, as the CBLAS interface has them */
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "cvfuse.h"

void openblas_set_num_threads(int threads);

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s M N K [threads] [calls] [a|b|ab]\n", argv[0]);
        return 2;
    }
    int64_t m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
    int threads = argc > 4 ? atoi(argv[4]) : 2, calls = argc > 5 ? atoi(argv[5]) : 21;
    int bt = argc > 6 && strchr(argv[6], 'b') != NULL, at = argc > 6 && strchr(argv[6], 'a') != NULL;
    size_t flush_bytes = (size_t)(getenv("FLUSH_MB") ? atoll(getenv("FLUSH_MB")) : 0) << 20;
    char *flush = flush_bytes ? malloc(flush_bytes) : NULL;
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n)), *c2 = malloc(sizeof(float) * (size_t)(m * n));
    double *wall[2], *cpu[2];
    for (int s = 0; s < 2; s++)
        wall[s] = malloc(sizeof(double) * (size_t)calls), cpu[s] = malloc(sizeof(double) * (size_t)calls);
    srand(1);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = (float)((double)rand() / RAND_MAX - 0.5);
    for (int64_t i = 0; i < k * n; i++)
        b[i] = (float)((double)rand() / RAND_MAX - 0.5);
    double subnormal = getenv("SUBNORMAL") ? atof(getenv("SUBNORMAL")) : 0.0;
    if (subnormal > 0.0) {
        int64_t every = (int64_t)(1.0 / subnormal + 0.5), made = 0;
        for (int64_t i = every / 2; every > 0 && i < m * k; i += every, made++)
            a[i] = i % 2 ? 1e-39f : -1e-39f;
        printf("A: %lld of %lld values subnormal\n", (long long)made, (long long)(m * k));
    }
    cvf_context_options options = {CVF_DEVICE_CPU, threads, 0, NULL};
    cvf_context *ctx = NULL;
    if (cvf_context_create(&options, &ctx) != CVF_STATUS_SUCCESS)
        return 1;
    openblas_set_num_threads(threads);
    cvf_matrix va = {a, CVF_F32, m, k, at ? 1 : k, at ? m : 1}, vb = {b, CVF_F32, k, n, bt ? 1 : n, bt ? k : 1},
               vc = {c, CVF_F32, m, n, n, 1};
    for (int call = -2; call < calls; call++) {
        for (int side = 0; side < 2; side++) {
            if (flush) /* cold caches: the weights come from memory, as in an MLP's steady state */
                memset(flush, call + side, flush_bytes);
            double w = bench_seconds(CLOCK_MONOTONIC), t = bench_seconds(CLOCK_PROCESS_CPUTIME_ID);
            if (side == 0) {
                if (cvf_matmul(ctx, &va, &vb, &vc, NULL) != CVF_STATUS_SUCCESS)
                    return 1;
            } else {
                cblas_sgemm(CblasRowMajor, at ? CblasTrans : CblasNoTrans, bt ? CblasTrans : CblasNoTrans, (int)m,
                            (int)n, (int)k, 1.0f, a, at ? (int)m : (int)k, b, bt ? (int)k : (int)n, 0.0f, c2, (int)n);
            }
            if (call >= 0) {
                wall[side][call] = bench_seconds(CLOCK_MONOTONIC) - w;
                cpu[side][call] = bench_seconds(CLOCK_PROCESS_CPUTIME_ID) - t;
            }
            if (side == 0) /* our idle workers sleep rather than spin into OpenBLAS's call (and CPU time) */
                cvf_context_park_threads(ctx);
        }
    }
    double ours_w = bench_median(wall[0], calls), base_w = bench_median(wall[1], calls);
    double ours_c = bench_median(cpu[0], calls), base_c = bench_median(cpu[1], calls);
    printf(
        "f32%s%s %lldx%lldx%lld threads=%d calls=%d: wall ours %.4f ms openblas %.4f ms ratio %.3f | cpu ours %.4f ms "
        "openblas %.4f ms ratio %.3f\n",
        at ? " A^T" : "", bt ? " B^T" : "", (long long)m, (long long)n, (long long)k, threads, calls, 1e3 * ours_w,
        1e3 * base_w, ours_w / base_w, 1e3 * ours_c, 1e3 * base_c, ours_c / base_c);
    cvf_context_destroy(ctx);
    return 0;
}

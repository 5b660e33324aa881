/*
 * The AVX-512 fp32 micro-kernel alone against a register-only FMA loop, both timed by thread
 * CPU time (PERF.md, "AVX-512 fp32 kernel at BLAS speed"): `panels` A micro-panels (kc deep,
 * in L1 or L2 by their number) against one B micro-panel, full MR x NR tiles stored to a
 * contiguous C. Not part of the build; build it by hand on an AVX-512 machine:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/cpu_kernel_probe.c build/libcvfuse.a \
 *       -lpthread -lm -o build/kernel_probe
 *   build/kernel_probe [kc] [panels] [repeats]        (defaults 192 37 2000)
 *   build/kernel_probe direct M N K [calls]           (the direct kernel on one M x N tile, M <= 12,
 *                                                      N <= 32, A and B in place, 1,000,000 calls)
 *
 * The direct mode prints the time per call (thread CPU time, best of 5 rounds), for the tiny
 * products' per-tile cost (PERF.md, 2026-12-05 fifth session, tiny products); A and B hold a full
 * 12 x K and K x 32 so that a kernel built before it read only the corner runs too.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "cpu/kernels/kernels.h"

#define FMA(r) "vfmadd231ps %%zmm0, %%zmm1, %%zmm" #r "\n\t"

/* Seconds for iters x 20 independent 512-bit FMAs on registers only. */
__attribute__((target("avx512f"))) static double fma_loop(long iters)
{
    double t0 = bench_thread_seconds();
    __asm__ volatile("vxorps %%zmm0, %%zmm0, %%zmm0\n\t"
                     "vxorps %%zmm1, %%zmm1, %%zmm1\n"
                     "1:\n\t" FMA(4) FMA(5) FMA(6) FMA(7) FMA(8) FMA(9) FMA(10) FMA(11) FMA(12) FMA(13) FMA(14)
                         FMA(15) FMA(16) FMA(17) FMA(18) FMA(19) FMA(20) FMA(21) FMA(22) FMA(23)
                     "dec %0\n\t"
                     "jnz 1b\n\t"
                     : "+r"(iters)
                     :
                     : "cc", "xmm0", "xmm1", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
                       "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                       "xmm23");
    return bench_thread_seconds() - t0;
}

/* The direct kernel on one m x n tile of k steps, `calls` times: the best of 5 rounds, per call. */
static int direct_mode(int m, int n, int k, long calls)
{
    const int mr = CVF_CPU_F32_AVX512_MR, nr = CVF_CPU_F32_AVX512_NR;
    if (m < 1 || m > mr || n < 1 || n > nr || k < 0 || calls < 1) {
        fprintf(stderr, "direct: M 1..%d, N 1..%d, K >= 0, calls >= 1\n", mr, nr);
        return 2;
    }
    size_t kk = (size_t)(k > 0 ? k : 1);
    float *a = aligned_alloc(64, (mr * kk * 4 + 63) / 64 * 64), *b = aligned_alloc(64, (kk * nr * 4 + 63) / 64 * 64);
    float *c = aligned_alloc(64, (size_t)mr * nr * 4);
    if (!a || !b || !c)
        return 1;
    for (size_t i = 0; i < mr * kk; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < kk * nr; i++)
        b[i] = (float)(i % 5) * 0.1f;
    cvf_cpu_fused_store out = {c, nr, CVF_F32, NULL, 0};
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = bench_thread_seconds();
        for (long r = 0; r < calls; r++)
            cvf_cpu_direct_f32_avx512(k, a, k, b, nr, &out, m, n);
        double t = bench_thread_seconds() - t0;
        best = t < best ? t : best;
    }
    double ns = best / (double)calls * 1e9;
    printf("direct %dx%dx%d: %.1f ns a call, %.1f GFLOP/s\n", m, n, k, ns, 2.0 * m * n * k / ns);
    free(a), free(b), free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 4 && strcmp(argv[1], "direct") == 0)
        return direct_mode(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc > 5 ? atol(argv[5]) : 1000000);
    int kc = argc > 1 ? atoi(argv[1]) : 192, panels = argc > 2 ? atoi(argv[2]) : 37;
    int repeats = argc > 3 ? atoi(argv[3]) : 2000;
    const int mr = CVF_CPU_F32_AVX512_MR, nr = CVF_CPU_F32_AVX512_NR;
    size_t a_count = (size_t)panels * mr * kc, b_count = (size_t)nr * kc, c_count = (size_t)panels * mr * nr;
    float *a = aligned_alloc(64, (a_count * 4 + 63) / 64 * 64), *b = aligned_alloc(64, (b_count * 4 + 63) / 64 * 64);
    float *c = aligned_alloc(64, c_count * 4);
    if (!a || !b || !c)
        return 1;
    for (size_t i = 0; i < a_count; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < b_count; i++)
        b[i] = (float)(i % 5) * 0.1f;
    long iters = 10000000;
    double peak = (double)iters * 20 * 32 / fma_loop(iters) / 1e9, best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = bench_thread_seconds();
        for (int r = 0; r < repeats; r++)
            for (int p = 0; p < panels; p++)
                cvf_cpu_kernel_f32_avx512(kc, a + (size_t)p * mr * kc, b, c + (size_t)p * mr * nr, nr, mr, nr, 0);
        double t = bench_thread_seconds() - t0;
        best = t < best ? t : best;
    }
    double gflops = 2.0 * mr * nr * kc * panels * (double)repeats / best / 1e9;
    printf("kernel %dx%d kc=%d panels=%d: %.1f GFLOP/s, register-only FMA loop %.1f GFLOP/s: %.1f%%\n", mr, nr, kc,
           panels, gflops, peak, 100.0 * gflops / peak);
    free(a), free(b), free(c);
    return 0;
}

/*
 * The AMX micro-kernel alone (PERF.md, issue 15, step 1): full 32 x 32 tiles over `a_panels` A
 * micro-panels and `b_panels` B micro-panels, kc deep, timed by thread CPU time — one of each
 * keeps both in L1 for kc <= 256; more of them, or a deeper kc, streams them from L2. Not part of
 * the build; on a CPU with AMX:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/cpu_amx_kernel_probe.c build/libcvfuse.a \
 *       -lpthread -lm -o build/amx_probe
 *   build/amx_probe kc [b_panels] [a_panels]        (e.g. 256 1 1; 2048 1 8; 2048 8 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/isa.h"
#include "bench_time.h"
#include "cpu/kernels/kernels.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s kc [b_panels] [a_panels]\n", argv[0]);
        return 2;
    }
    long kc = atol(argv[1]), b_panels = argc > 2 ? atol(argv[2]) : 1, a_panels = argc > 3 ? atol(argv[3]) : 1;
    if (!cvf_cpu_isa_supported(CVF_CPU_ISA_AMX)) {
        fprintf(stderr, "no usable AMX here\n");
        return 77;
    }
    const cvf_cpu_kernel *k = cvf_cpu_kernel_for(CVF_CPU_ISA_AMX, CVF_BF16, CVF_BF16);
    long depth = cvf_cpu_pack_depth(k->format, kc);
    size_t a_bytes = (size_t)(k->mr * depth) * 2, b_bytes = (size_t)(k->nr * depth) * 2;
    char *a = aligned_alloc(64, a_bytes * (size_t)a_panels), *b = aligned_alloc(64, b_bytes * (size_t)b_panels);
    float *c = aligned_alloc(64, sizeof(float) * (size_t)(k->mr * k->nr * a_panels * b_panels));
    if (!a || !b || !c)
        return 1;
    memset(a, 0x3c, a_bytes * (size_t)a_panels); /* bf16 values near 0.01: no subnormals */
    memset(b, 0x3c, b_bytes * (size_t)b_panels);
    /* ~20 GFLOP (~10 ms at the kernel's speed): 0.4 GFLOP, as before, timed a few hundred
     * microseconds, where the first touches of c and the timer's own cost skewed the rate */
    long calls = 10000000000L / (kc * k->mr * k->nr * a_panels * b_panels) + 1;
    k->begin();
    double t = bench_thread_seconds();
    for (long r = 0; r < calls; r++)
        for (long j = 0; j < b_panels; j++)
            for (long i = 0; i < a_panels; i++)
                k->run(kc, a + (size_t)i * a_bytes, b + (size_t)j * b_bytes, c + (j * a_panels + i) * k->mr * k->nr,
                       k->nr, k->mr, k->nr, 0);
    t = bench_thread_seconds() - t;
    k->end();
    double flops = 2.0 * k->mr * k->nr * (double)kc * (double)(a_panels * b_panels) * (double)calls;
    printf("kc=%ld b_panels=%ld a_panels=%ld: %.1f GFLOP/s (thread CPU time)\n", kc, b_panels, a_panels,
           flops / t * 1e-9);
    free(a), free(b), free(c);
    return 0;
}

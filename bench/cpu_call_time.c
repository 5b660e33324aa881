/*
 * Repeated cvf_matmul_relu calls on one context, for timing by CPU time from outside (PERF.md,
 * issue 15: the AMX blocking and packing steps were measured this way, one thread, with perf stat's
 * task-clock divided by the calls):
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/cpu_call_time.c build/libcvfuse.a -lpthread -lm \
 *       -o build/call_time
 *   CVF_CPU_ISA=amx [CVF_CPU_BLOCKS=kc,mc,nc] perf stat -e task-clock build/call_time M N K threads calls [dtype]
 *
 * dtype: bf16 (default), f16 or f32; A, B and C all of it, row-major, deterministic inputs. The
 * setup (allocation, filling) is included in the task-clock: use enough calls (20 at 2048^3 is
 * ~0.1% of it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cvf.h"

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s M N K threads calls [bf16|f16|f32]\n", argv[0]);
        return 2;
    }
    int64_t m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
    int threads = atoi(argv[4]), calls = atoi(argv[5]);
    const char *name = argc > 6 ? argv[6] : "bf16";
    cvf_dtype dtype = strcmp(name, "f32") == 0 ? CVF_F32 : strcmp(name, "f16") == 0 ? CVF_F16 : CVF_BF16;
    size_t size = cvf_dtype_size(dtype);
    cvf_context *ctx = bench_cpu_context(threads);
    char *a = malloc(size * (size_t)(m * k)), *b = malloc(size * (size_t)(k * n)), *c = malloc(size * (size_t)(m * n));
    if (!a || !b || !c)
        return 1;
    for (int64_t i = 0; i < m * k; i++) { /* small values of both signs, no subnormals */
        float v = 0.25f + (float)(i % 7) * 0.125f;
        if (dtype == CVF_F32) {
            memcpy(a + 4 * i, &v, 4);
        } else {
            uint16_t h = dtype == CVF_F16 ? cvf_f32_to_f16(v) : cvf_f32_to_bf16(v);
            memcpy(a + 2 * i, &h, 2);
        }
    }
    for (int64_t i = 0; i < k * n; i++) {
        float w = -0.5f + (float)(i % 5) * 0.25f;
        if (dtype == CVF_F32) {
            memcpy(b + 4 * i, &w, 4);
        } else {
            uint16_t h = dtype == CVF_F16 ? cvf_f32_to_f16(w) : cvf_f32_to_bf16(w);
            memcpy(b + 2 * i, &h, 2);
        }
    }
    cvf_matrix A = {a, dtype, m, k, k, 1}, B = {b, dtype, k, n, n, 1}, C = {c, dtype, m, n, n, 1};
    for (int r = 0; r < calls; r++)
        if (cvf_matmul_relu(ctx, &A, &B, &C) != CVF_STATUS_SUCCESS) {
            fprintf(stderr, "cvf_matmul_relu: %s\n", cvf_context_last_error(ctx));
            return 1;
        }
    free(a), free(b), free(c);
    cvf_context_destroy(ctx);
    return 0;
}

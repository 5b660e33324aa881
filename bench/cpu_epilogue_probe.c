/*
 * The CPU tile epilogue alone: the level's finish_tile on one m x n fp32 tile that stays in L1,
 * GELU' with an fp32 aux_in (the MLP backward's K1 epilogue) and the bias-gradient sums (unless
 * the fourth argument is 0), nanoseconds per element (the best of 7 rounds of `reps` calls after
 * 100 untimed ones). Not part of the build; from the repository root, after a CPU build in build/:
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/cpu_epilogue_probe.c \
 *       build/libcvfuse_internal.a build/libcvfuse.a -lpthread -lm -o build/epilogue_probe
 *   CVF_CPU_ISA=avx2 build/epilogue_probe 6 64 20000 [sums]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/vec.h"

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s m n reps [sums: 1 (default) or 0]\n", argv[0]);
        return 2;
    }
    const int m = atoi(argv[1]), n = atoi(argv[2]);
    const long reps = atol(argv[3]);
    const int sums = argc > 4 ? atoi(argv[4]) : 1;
    if (m < 1 || n < 1 || reps < 1) {
        fprintf(stderr, "m, n and reps must be positive\n");
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)(m * n)), *aux = malloc(sizeof(float) * (size_t)(m * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n)), *s = malloc(sizeof(float) * (size_t)n);
    float *scratch = malloc(sizeof(float) * (size_t)n);
    if (!x || !aux || !c || !s || !scratch) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 0; i < m * n; i++) { /* both signs, both tails of gelu' touched */
        x[i] = (float)(i % 13 - 6) * 0.1f;
        aux[i] = (float)(i % 29 - 14) * 0.2f;
    }
    cvf_cpu_tile_epilogue e = {0};
    e.activation = CVF_ACTIVATION_DGELU_TANH;
    e.aux_in = aux;
    e.aux_in_dtype = CVF_F32;
    e.aux_in_ld = n;
    e.aux_in_size = sizeof(float);
    e.c = c;
    e.c_dtype = CVF_F32;
    e.c_ld = n;
    e.c_size = sizeof(float);
    e.sums = sums ? s : NULL;
    e.scratch = scratch;
    const cvf_cpu_vec_ops *vec = cvf_cpu_vec_ops_active();
    for (int w = 0; w < 100; w++)
        vec->finish_tile(&e, x, n, m, n);
    double best = 1e30;
    for (int round = 0; round < 7; round++) {
        double t0 = seconds();
        for (long r = 0; r < reps; r++)
            vec->finish_tile(&e, x, n, m, n);
        double dt = seconds() - t0;
        best = dt < best ? dt : best;
    }
    printf("%s m=%d n=%d sums=%d: %.3f ns/element (c[0] %g)\n", vec->name, m, n, sums, best / (double)reps / (m * n) * 1e9,
           (double)c[0]);
    free(x), free(aux), free(c), free(s), free(scratch);
    return 0;
}

/*
 * The CPU planner's blocked plans over a grid of products, one line each, for diffing two builds
 * of a planner change (which plans it moves, at which thread counts): M = 1-1200, N in {256, 768,
 * 1024, 3072, 4096}, K in {256, 768, 3072}, f32 / bf16 / f16, contexts of 2-32 threads, at the
 * level CVF_CPU_ISA picks (the plans depend on this machine's caches too). Not part of the build;
 * from the repository root, after a CPU build in build/ (and one of the other tree in OTHER/build/):
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/cpu_plan_dump.c build/libcvfuse.a \
 *       -lpthread -lm -o build/plan_dump
 *   CVF_CPU_ISA=avx512 build/plan_dump > new.txt   (the same for the other build: old.txt)
 *   diff old.txt new.txt | grep -c '^>'            (plans moved; `awk '{print $2}'` of them: threads)
 *   CVF_CPU_ISA=amx build/plan_dump steps          (instead of the grid: the plans of the f32 / bf16 / f16
 *                                                   MLP backward's four GEMMs at S = 2048, H = 768, I = 3072,
 *                                                   K2-1 and K2-2 with A transposed as the backward reads
 *                                                   it, and of 2048^3 and 4096^3, on 8 and 16 threads)
 */
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cvfuse.h"

/* A context of `threads` CPU threads, or NULL (the reason printed). */
static cvf_context *cpu_context(int32_t threads)
{
    cvf_context_options options = {.device = CVF_DEVICE_CPU, .threads = threads};
    cvf_context *ctx;
    if (cvf_context_create(&options, &ctx) != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "context of %d threads: %s\n", threads, cvf_context_create_error());
        return NULL;
    }
    return ctx;
}

/* The plan of C (m x n) = A @ B on ctx, A read transposed in place if a_transposed (the plans read
 * no data). */
static cvf_cpu_plan_info describe(const cvf_context *ctx, cvf_dtype dtype, int64_t m, int64_t n, int64_t k,
                                  bool a_transposed, cvf_activation act)
{
    static char dummy[64];
    cvf_matrix a = a_transposed ? cvf_matrix_transpose(cvf_matrix_row_major(dummy, dtype, k, m))
                                : cvf_matrix_row_major(dummy, dtype, m, k);
    cvf_matrix b = cvf_matrix_row_major(dummy, dtype, k, n);
    cvf_matrix c = cvf_matrix_row_major(dummy, dtype, m, n);
    cvf_epilogue ep = {.activation = act};
    return cvf_cpu_plan_describe(ctx, &a, &b, &c, &ep);
}

/* One plan's line: the context's thread count, the dtype, a name and the product's shape. */
static void print_plan(int32_t threads, cvf_dtype dtype, const char *name, int64_t m, int64_t n, int64_t k,
                       const cvf_cpu_plan_info *i)
{
    printf("t%d %s %s%lldx%lldx%lld: %d thr mr%lld nc%lld blocks %lld chunks %lld mc %lld\n", threads,
           cvf_dtype_name(dtype), name, (long long)m, (long long)n, (long long)k, i->threads, (long long)i->mr,
           (long long)i->nc, (long long)i->ic_blocks, (long long)i->jr_chunks, (long long)i->mc);
}

static const cvf_dtype dtypes[] = {CVF_F32, CVF_BF16, CVF_F16};

/* The `steps` mode: the MLP backward's GEMMs (weights as the backward reads them) and two squares. */
static int dump_steps(void)
{
    static const int32_t threads[] = {8, 16};
    static const struct {
        const char *name;
        int64_t m, n, k;
        bool a_transposed;
    } steps[] = {{"K1 ", 2048, 3072, 768, false},      {"K2-1 ", 768, 3072, 2048, true},
                 {"K2-2 ", 3072, 768, 2048, true},     {"K2-3 ", 2048, 768, 3072, false},
                 {"square ", 2048, 2048, 2048, false}, {"square ", 4096, 4096, 4096, false}};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        cvf_context *ctx = cpu_context(threads[t]);
        if (!ctx)
            return 1;
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
                cvf_cpu_plan_info i = describe(ctx, dtypes[d], steps[s].m, steps[s].n, steps[s].k,
                                               steps[s].a_transposed, CVF_ACTIVATION_NONE);
                print_plan(threads[t], dtypes[d], steps[s].name, steps[s].m, steps[s].n, steps[s].k, &i);
            }
        cvf_context_destroy(ctx);
    }
    return 0;
}

/* The grid: every blocked plan of a ReLU product, A row-major. */
static int dump_grid(void)
{
    static const int32_t threads[] = {2, 3, 4, 6, 8, 12, 16, 32};
    static const int64_t ns[] = {256, 768, 1024, 3072, 4096};
    static const int64_t ks[] = {256, 768, 3072};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        cvf_context *ctx = cpu_context(threads[t]);
        if (!ctx)
            return 1;
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (int64_t m = 1; m <= 1200; m += m < 100 ? 1 : 7)
                for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                        cvf_cpu_plan_info i = describe(ctx, dtypes[d], m, ns[ni], ks[ki], false, CVF_ACTIVATION_RELU);
                        if (i.path == CVF_CPU_PATH_BLOCKED)
                            print_plan(threads[t], dtypes[d], "", m, ns[ni], ks[ki], &i);
                    }
        cvf_context_destroy(ctx);
    }
    return 0;
}

int main(int argc, char **argv)
{
    return argc > 1 && strcmp(argv[1], "steps") == 0 ? dump_steps() : dump_grid();
}

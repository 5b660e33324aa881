/*
 * Which logical CPUs share a core, and what every core gives when all run (issue 16's scaling):
 * an FMA-bound loop (AVX2 + FMA, 12 independent chains) pinned to CPU 0 alone, then beside one
 * copy pinned to each other CPU j in turn (CPU 0's rate falls to about half when j is its
 * hyperthread sibling, which a virtual machine's lscpu may not show), then one copy on every CPU
 * at once (the per-CPU rate with all busy: turbo and shared cores together); then, where the CPU
 * has AVX-512F, the same alone / all-at-once pair with 16-wide zmm FMAs (an all-core AVX-512 clock
 * below the AVX2 one shows as a smaller all-core factor). Prints GFLOP/s.
 *   gcc -O2 -std=c11 -D_GNU_SOURCE bench/cpu_core_probe.c -lpthread -o /tmp/cpu_core_probe
 *   /tmp/cpu_core_probe [SECONDS_PER_RUN]
 */
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int cpu;
    int zmm; /* 1: the AVX-512 loop */
    double seconds;
    double gflops;
    pthread_barrier_t *start;
} probe_arg;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An FMA-bound loop on the vector type VEC of LANES floats (target TARGET): 12 independent chains,
 * 1000 iterations per clock check, 2 x LANES x 12 x 1000 FLOP a round; returns GFLOP/s. */
#define FMA_RATE(name, TARGET, VEC, LANES, SET1, FMADD, FIRST)                                                         \
    __attribute__((target(TARGET))) static double name(double seconds)                                                 \
    {                                                                                                                  \
        VEC acc[12];                                                                                                   \
        for (int i = 0; i < 12; i++)                                                                                   \
            acc[i] = SET1(0.001f * (float)i);                                                                          \
        const VEC a = SET1(0.999999f), b = SET1(1e-7f);                                                                \
        long rounds = 0;                                                                                               \
        const double t0 = now();                                                                                       \
        double t = t0;                                                                                                 \
        while (t - t0 < seconds) {                                                                                     \
            for (int it = 0; it < 1000; it++) {                                                                        \
                _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) /* the chains stay in registers */               \
                    acc[i] = FMADD(acc[i], a, b);                                                                      \
            }                                                                                                          \
            rounds++;                                                                                                  \
            t = now();                                                                                                 \
        }                                                                                                              \
        float sink = 0.0f;                                                                                             \
        for (int i = 0; i < 12; i++)                                                                                   \
            sink += FIRST(acc[i]);                                                                                     \
        if (sink == 12345.0f)                                                                                          \
            printf(" ");                                                                                               \
        return 2.0 * LANES * 12 * 1000 * (double)rounds / (t - t0) * 1e-9;                                            \
    }

FMA_RATE(fma_rate, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
FMA_RATE(fma_rate_zmm, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)

static void *probe_thread(void *p)
{
    probe_arg *arg = p;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(arg->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        arg->gflops = -1.0;
        return NULL;
    }
    pthread_barrier_wait(arg->start);
    arg->gflops = arg->zmm ? fma_rate_zmm(arg->seconds) : fma_rate(arg->seconds);
    return NULL;
}

/* Runs one pinned copy (zmm: the AVX-512 loop) on each of the count CPUs at once; their rates in
 * args. */
static int run_together(const int *cpus, int count, int zmm, double seconds, probe_arg *args)
{
    pthread_t th[1024];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)count);
    for (int i = 0; i < count; i++) {
        args[i] = (probe_arg){cpus[i], zmm, seconds, 0.0, &start};
        if (pthread_create(&th[i], NULL, probe_thread, &args[i]) != 0)
            return -1;
    }
    for (int i = 0; i < count; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    return 0;
}

/* One copy on every CPU at once: prints the total, per-CPU and slowest rates against one alone. */
static void all_at_once(const int *cpus, int n, int zmm, double seconds, double alone, probe_arg *args)
{
    run_together(cpus, n, zmm, seconds, args);
    double total = 0.0, lo = 1e30;
    for (int i = 0; i < n; i++) {
        total += args[i].gflops;
        lo = args[i].gflops < lo ? args[i].gflops : lo;
    }
    printf("all %d at once (%s): %.1f GFLOP/s in total, %.1f per CPU (slowest %.1f): %.2fx one CPU alone\n", n,
           zmm ? "AVX-512" : "AVX2", total, total / n, lo, total / alone);
}

int main(int argc, char **argv)
{
    const double seconds = argc > 1 ? atof(argv[1]) : 0.3;
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    int cpus[1024], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 1024; c++)
        if (CPU_ISSET(c, &mine))
            cpus[n++] = c;
    if (n < 1)
        return 1;
    probe_arg args[1024];
    run_together(cpus, 1, 0, seconds, args);
    const double alone = args[0].gflops;
    printf("cpu %d alone: %.1f GFLOP/s (AVX2 FMA)\n", cpus[0], alone);
    printf("cpu %d beside cpu j (its rate / alone; ~0.5: the same core):\n", cpus[0]);
    int shared = 0;
    for (int j = 1; j < n; j++) {
        int pair[2] = {cpus[0], cpus[j]};
        run_together(pair, 2, 0, seconds, args);
        const double r = args[0].gflops / alone;
        shared += r < 0.75;
        printf("  j=%-3d %.2f  (cpu %d: %.2f)\n", cpus[j], r, cpus[j], args[1].gflops / alone);
    }
    all_at_once(cpus, n, 0, seconds, alone, args);
    printf("logical CPUs sharing CPU %d's core: %d\n", cpus[0], shared);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        run_together(cpus, 1, 1, seconds, args);
        const double zmm_alone = args[0].gflops;
        printf("cpu %d alone: %.1f GFLOP/s (AVX-512 FMA)\n", cpus[0], zmm_alone);
        all_at_once(cpus, n, 1, seconds, zmm_alone, args);
    }
    return 0;
}

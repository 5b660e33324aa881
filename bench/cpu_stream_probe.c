/*
 * How fast this machine's cores read a buffer straight through: `threads` threads each sum one
 * contiguous share of `mib` MiB of floats with AVX2 loads, best of 50 rounds (the first touches
 * the pages), GB/s. The ceiling that the stream tiles' one-token products are measured against
 * (PERF.md, issue 16; a buffer under the L3 size is partly read from L3). Not part of the build:
 *
 *   gcc -O2 -mavx2 -std=c11 -D_GNU_SOURCE bench/cpu_stream_probe.c -lpthread -o build/stream_probe
 *   build/stream_probe 9 2
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 64

typedef struct share {
    const float *data;
    long begin, end; /* floats, multiples of 32 */
    float sum;
} share;

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sums the share's floats, 32 at a time in four independent vectors. */
static void *sum_share(void *arg)
{
    share *s = arg;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (long i = s->begin; i < s->end; i += 32)
        for (int v = 0; v < 4; v++)
            acc[v] = _mm256_add_ps(acc[v], _mm256_loadu_ps(s->data + i + 8 * v));
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    s->sum = 0.0f;
    for (int l = 0; l < 8; l++)
        s->sum += lanes[l];
    return NULL;
}

int main(int argc, char **argv)
{
    double mib = argc > 1 ? atof(argv[1]) : 9.0;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    long count = (long)(mib * 1048576.0 / sizeof(float)) / (32L * MAX_THREADS) * (32L * MAX_THREADS);
    if (count <= 0 || threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "usage: %s [MiB > 0] [threads 1..%d]\n", argv[0], MAX_THREADS);
        return 2;
    }
    float *data = aligned_alloc(64, (size_t)count * sizeof(float));
    if (!data) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (long i = 0; i < count; i++)
        data[i] = 1.0f;
    share shares[MAX_THREADS];
    double best = 1e30, total = 0.0;
    for (int round = 0; round < 51; round++) {
        pthread_t ids[MAX_THREADS];
        double start = seconds();
        for (int t = 0; t < threads; t++) {
            shares[t] = (share){data, count / threads / 32 * 32 * t,
                                t + 1 == threads ? count : count / threads / 32 * 32 * (t + 1), 0.0f};
            pthread_create(&ids[t], NULL, sum_share, &shares[t]);
        }
        total = 0.0;
        for (int t = 0; t < threads; t++) {
            pthread_join(ids[t], NULL);
            total += shares[t].sum;
        }
        double elapsed = seconds() - start;
        if (round > 0 && elapsed < best)
            best = elapsed;
    }
    printf("%.1f MiB, %d thread(s): best %.3f ms, %.1f GB/s (sum %.0f, want %ld)\n", (double)count * 4 / 1048576.0,
           threads, best * 1e3, (double)count * 4 / best / 1e9, total, count);
    free(data);
    return total == (double)count ? 0 : 1;
}

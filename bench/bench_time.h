/*
 * The clocks and the sorting shared by the stand-alone CPU probes in bench/ (cpu_kernel_probe.c,
 * cpu_amx_kernel_probe.c, cpu_mlp_steps.c, cpu_side_by_side.c), which are compiled by hand, each
 * on its own: everything here is static inline.
 */
#ifndef CVF_BENCH_TIME_H
#define CVF_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

/* Seconds on clock id (CLOCK_MONOTONIC: wall time; CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID:
 * CPU time, which other processes' load barely moves). */
static inline double bench_seconds(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds of this thread's CPU time. */
static inline double bench_thread_seconds(void)
{
    return bench_seconds(CLOCK_THREAD_CPUTIME_ID);
}

/* qsort order of doubles. */
static inline int bench_by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Sorts n values in place, smallest first. */
static inline void bench_sort(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_by_value);
}

/* The median of n values (sorts them). */
static inline double bench_median(double *v, int n)
{
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* CVF_BENCH_TIME_H */

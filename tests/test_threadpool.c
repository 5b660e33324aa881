/*
 * The thread pool's hand-off (src/core/threadpool.c): many back-to-back jobs of varying task counts
 * and thread limits — so that workers spin, sleep, take part or sit out in every order — must each
 * run every task exactly once, on a thread index inside the job's limit, and be complete when
 * cvf_threadpool_run_on returns. Jobs with pauses between them make the workers fall asleep, and
 * the next job must wake them. Run under ThreadSanitizer by `make test-thread`.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "core/threadpool.h"
#include "support.h"

#define POOL_THREADS 6
#define MAX_TASKS 64
#define JOBS 20000

/* One job's record: how often each task ran and the largest thread index seen. */
typedef struct job_record {
    atomic_int runs[MAX_TASKS];
    atomic_int max_thread;
    atomic_int spin; /* a little work per task, so that tasks overlap */
} job_record;

static void count_task(void *arg, int64_t task, int32_t thread)
{
    job_record *r = arg;
    atomic_fetch_add(&r->runs[task], 1);
    int seen = atomic_load(&r->max_thread);
    while (thread > seen && !atomic_compare_exchange_weak(&r->max_thread, &seen, thread)) {
    }
    for (int i = 0; i < (int)(task % 7) * 50; i++)
        atomic_fetch_add_explicit(&r->spin, 1, memory_order_relaxed);
}

/* Runs one job of count tasks on at most limit threads and checks its record. */
static bool run_job(cvf_threadpool *pool, int64_t count, int32_t limit, int index)
{
    static job_record r;
    for (int t = 0; t < MAX_TASKS; t++)
        atomic_store(&r.runs[t], 0);
    atomic_store(&r.max_thread, 0);
    cvf_threadpool_run_on(pool, limit, count, count_task, &r);
    bool ok = true;
    for (int64_t t = 0; t < MAX_TASKS; t++) {
        int want = t < count ? 1 : 0, got = atomic_load(&r.runs[t]);
        if (got != want) {
            ok = CHECK(false, "job %d (count %lld, limit %d): task %lld ran %d times, want %d", index, (long long)count,
                       (int)limit, (long long)t, got, want);
            break;
        }
    }
    /* the bound from the contract (at most the limit, at least one thread; no more threads than
     * tasks or than the pool has), not from the pool's own formula */
    int64_t active = limit > 1 ? limit : 1;
    if (count < active)
        active = count;
    if (POOL_THREADS < active)
        active = POOL_THREADS;
    if (ok && atomic_load(&r.max_thread) >= active)
        ok = CHECK(false, "job %d (count %lld, limit %d): thread %d ran a task, only 0..%d take part", index,
                   (long long)count, (int)limit, atomic_load(&r.max_thread), (int)active - 1);
    return ok;
}

int main(void)
{
    cvf_threadpool *pool = cvf_threadpool_create(POOL_THREADS);
    if (!CHECK(pool != NULL, "cvf_threadpool_create(%d) failed", POOL_THREADS))
        return test_report("test_threadpool");
    int failures = 0;
    for (int j = 0; j < JOBS && failures < 5; j++) {
        int64_t count = 1 + (j * 7919) % MAX_TASKS;
        int32_t limit = 1 + (j * 31) % (POOL_THREADS + 2);
        if (!run_job(pool, count, limit, j))
            failures++;
        if (j % 200 == 199) { /* long enough for every worker to stop spinning and sleep (100 times) */
            struct timespec pause = {0, 2 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    CHECK(failures == 0, "%d jobs wrong", failures);
    printf("  %d jobs of 1..%d tasks on %d threads with limits 1..%d\n", JOBS, MAX_TASKS, POOL_THREADS,
           POOL_THREADS + 1);
    cvf_threadpool_destroy(pool);
    return test_report("test_threadpool");
}

/*
 * The thread pool's hand-off (src/core/threadpool.c): many back-to-back jobs of varying task counts
 * and thread limits — so that workers spin, sleep, take part or sit out in every order — must each
 * run every task exactly once, on a thread index inside the job's limit, and be complete when
 * cvf_threadpool_run_on returns. Jobs with pauses between them make the workers fall asleep, and
 * the next job must wake them; so must a job after a park request, and with no spin at all. Then
 * the spin time itself: idle workers spin (none asleep) within it, sleep once it is over, and sleep
 * at once when parked; and the same through a context (CVF_CPU_SPIN_US, cvf_context_park_threads).
 * Run under ThreadSanitizer by `make test-thread`.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/internal.h" /* the context's pool; includes core/threadpool.h */
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

/* Runs JOBS jobs of varying counts and limits on pool, sleeping now and then (long enough for every
 * worker to stop spinning and sleep) and, with park, sending the workers to sleep between some. */
static void run_jobs(cvf_threadpool *pool, const char *name, bool park)
{
    int failures = 0;
    for (int j = 0; j < JOBS && failures < 5; j++) {
        int64_t count = 1 + (j * 7919) % MAX_TASKS;
        int32_t limit = 1 + (j * 31) % (POOL_THREADS + 2);
        if (!run_job(pool, count, limit, j))
            failures++;
        if (park && j % 3 == 1)
            cvf_threadpool_park(pool);
        if (j % 200 == 199) { /* longer than the pools' spin (100 times) */
            struct timespec pause = {0, 2 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    CHECK(failures == 0, "%s: %d jobs wrong", name, failures);
    printf("  %s: %d jobs of 1..%d tasks on %d threads with limits 1..%d\n", name, JOBS, MAX_TASKS, POOL_THREADS,
           POOL_THREADS + 1);
}

/* Polls until want workers of pool sleep, for up to seconds; returns whether they did. */
static bool sleepers_reach(cvf_threadpool *pool, int32_t want, double seconds)
{
    struct timespec step = {0, 1000 * 1000};
    for (double waited = 0; waited < seconds; waited += 1e-3) {
        if (cvf_threadpool_sleepers(pool) == want)
            return true;
        nanosleep(&step, NULL);
    }
    return cvf_threadpool_sleepers(pool) == want;
}

/* The spin time and park requests: with a long spin the idle workers still spin (none asleep) well
 * into it; a park request puts them all to sleep, also right after a job on two threads, when the
 * others are still waking from its broadcast and the last one is still reporting its end (20
 * times); the next job wakes them, and after it they spin again. A short spin ends by itself; with
 * none they sleep at once. */
static void check_spin_and_park(void)
{
    const int32_t workers = POOL_THREADS - 1;
    cvf_threadpool *spinning = cvf_threadpool_create(POOL_THREADS, (int64_t)30 * 1000 * 1000 * 1000);
    if (!CHECK(spinning != NULL, "cvf_threadpool_create(%d, 30 s) failed", POOL_THREADS))
        return;
    run_job(spinning, MAX_TASKS, POOL_THREADS, 0);
    struct timespec while_spinning = {0, 50 * 1000 * 1000};
    nanosleep(&while_spinning, NULL);
    CHECK(cvf_threadpool_sleepers(spinning) == 0, "spin 30 s: %d workers asleep 50 ms after a job, want 0",
          (int)cvf_threadpool_sleepers(spinning));
    cvf_threadpool_park(spinning);
    CHECK(sleepers_reach(spinning, workers, 5.0), "spin 30 s, parked: %d of %d workers asleep after 5 s",
          (int)cvf_threadpool_sleepers(spinning), (int)workers);
    for (int trial = 0; trial < 20; trial++) {
        if (!run_job(spinning, 2, 2, 1 + trial))
            break;
        cvf_threadpool_park(spinning);
        if (!CHECK(sleepers_reach(spinning, workers, 5.0),
                   "spin 30 s, parked right after a job on 2 threads (trial %d): %d of %d workers asleep after 5 s",
                   trial, (int)cvf_threadpool_sleepers(spinning), (int)workers))
            break;
    }
    CHECK(run_job(spinning, MAX_TASKS, POOL_THREADS, 21), "the job after a park");
    nanosleep(&while_spinning, NULL);
    CHECK(cvf_threadpool_sleepers(spinning) == 0, "spin 30 s: %d workers asleep 50 ms after the job after a park",
          (int)cvf_threadpool_sleepers(spinning));
    cvf_threadpool_destroy(spinning);

    const struct {
        const char *name;
        int64_t spin_ns;
    } ending[] = {{"spin 20 ms", 20 * 1000 * 1000}, {"spin 0", 0}};
    for (size_t e = 0; e < sizeof ending / sizeof ending[0]; e++) {
        cvf_threadpool *pool = cvf_threadpool_create(POOL_THREADS, ending[e].spin_ns);
        if (!CHECK(pool != NULL, "cvf_threadpool_create(%d, %s) failed", POOL_THREADS, ending[e].name))
            continue;
        run_job(pool, MAX_TASKS, POOL_THREADS, 0);
        CHECK(sleepers_reach(pool, workers, 5.0), "%s: %d of %d workers asleep after 5 s", ending[e].name,
              (int)cvf_threadpool_sleepers(pool), (int)workers);
        cvf_threadpool_destroy(pool);
    }
    printf("  spin 30 s: workers spin after a job and sleep when parked (also right after a job);\n"
           "  spin 20 ms: they sleep when it ends; spin 0: at once\n");
}

/* A CPU context of all CPUs under CVF_CPU_SPIN_US=value, with a product run on it (the next call
 * after a park wakes the workers); NULL when it could not be made. */
static cvf_context *spin_context(const char *value)
{
    setenv("CVF_CPU_SPIN_US", value, 1);
    cvf_context *ctx = NULL;
    cvf_status status = cvf_context_create(NULL, &ctx);
    unsetenv("CVF_CPU_SPIN_US");
    CHECK(status == CVF_STATUS_SUCCESS, "CVF_CPU_SPIN_US=%s: %s", value, cvf_context_create_error());
    return status == CVF_STATUS_SUCCESS ? ctx : NULL;
}

/* The setting's path from the environment to a context's pool, and cvf_context_park_threads:
 * under CVF_CPU_SPIN_US=1000000 the workers still spin 50 ms after the context's creation and
 * after a product, and sleep once parked; under 0 they sleep at once. Needs 2 CPUs (a context
 * with more threads than CPUs does not spin): skipped, and said, on one. */
static void check_context_spin(void)
{
    cvf_context *spinning = spin_context("1000000");
    if (!spinning)
        return;
    const int32_t workers = cvf_context_threads(spinning) - 1;
    if (workers < 1) {
        printf("  context spin: SKIP, one CPU (a context of one thread has no workers)\n");
        cvf_context_destroy(spinning);
        return;
    }
    static float a[192 * 192], c[192 * 192];
    cvf_matrix va = cvf_matrix_row_major(a, CVF_F32, 192, 192), vc = cvf_matrix_row_major(c, CVF_F32, 192, 192);
    struct timespec while_spinning = {0, 50 * 1000 * 1000};
    for (int call = 0; call < 2; call++) {
        CHECK(cvf_matmul(spinning, &va, &va, &vc, NULL) == CVF_STATUS_SUCCESS, "matmul: %s",
              cvf_context_last_error(spinning));
        nanosleep(&while_spinning, NULL);
        CHECK(cvf_threadpool_sleepers(spinning->pool) == 0,
              "CVF_CPU_SPIN_US=1000000, call %d: %d workers asleep 50 ms after it, want 0", call,
              (int)cvf_threadpool_sleepers(spinning->pool));
        cvf_context_park_threads(spinning); /* well before the 1 s spin would end by itself */
        CHECK(sleepers_reach(spinning->pool, workers, 0.5),
              "CVF_CPU_SPIN_US=1000000, call %d, parked: %d of %d workers asleep after 0.5 s", call,
              (int)cvf_threadpool_sleepers(spinning->pool), (int)workers);
    }
    cvf_context_destroy(spinning);

    cvf_context *sleeping = spin_context("0");
    if (!sleeping)
        return;
    CHECK(sleepers_reach(sleeping->pool, workers, 5.0), "CVF_CPU_SPIN_US=0: %d of %d workers asleep after 5 s",
          (int)cvf_threadpool_sleepers(sleeping->pool), (int)workers);
    cvf_context_destroy(sleeping);
    printf("  context spin: CVF_CPU_SPIN_US=1000000 keeps %d workers spinning until parked; 0 lets them sleep\n",
           (int)workers);
}

int main(void)
{
    const struct {
        const char *name;
        int64_t spin_ns;
        bool park;
    } pools[] = {{"spin 20 us", 20 * 1000, false}, {"spin 20 us, parked", 20 * 1000, true}, {"spin 0", 0, false}};
    for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
        cvf_threadpool *pool = cvf_threadpool_create(POOL_THREADS, pools[p].spin_ns);
        if (!CHECK(pool != NULL, "cvf_threadpool_create(%d) failed", POOL_THREADS))
            return test_report("test_threadpool");
        run_jobs(pool, pools[p].name, pools[p].park);
        cvf_threadpool_destroy(pool);
    }
    check_spin_and_park();
    check_context_spin();
    return test_report("test_threadpool");
}

/* Fixed-size thread pool with a shared task counter; see threadpool.h.
 *
 * Hand-off: the caller publishes a job by bumping `generation` (release) and broadcasting under the
 * lock; a worker that has just finished a job first spins on `generation` for up to the pool's spin
 * time before it sleeps on the condition variable, so back-to-back jobs (the pack and compute runs
 * of a GEMM, the steps of an MLP, a loop of calls) start without a futex wake-up each: in a virtual
 * machine a sleeping worker's vCPU halts and wakes slowly (the measurements behind the default
 * spin: DEFAULT_SPIN_US in context.c). Likewise the caller spins on `busy` for up to the same time
 * before sleeping on work_done. A park request (`parked` set, cleared by the next job before it is
 * published) ends the workers' spinning at once, including that of workers which reach their wait
 * only after the request. Only the workers a job uses (index < active) take part in it and report
 * its end; the others just note the generation. The generation word carries the job's active count
 * with it (one atomic read tells a worker both), so a slow non-participant can never mistake itself
 * for a participant of a later job. A sleeper re-checks the generation under the lock, and the
 * caller broadcasts under the lock after bumping it, so no wake-up is lost (nor an end-of-job
 * signal: `busy` reaching zero is signalled under the lock, and the caller checks it under the lock
 * before waiting).
 */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Pauses between two readings of the clock while spinning (a pause takes ~15 ns on recent Intel
 * cores, a few ns on older ones and on Zen; a vDSO clock read ~20 ns). */
#define PAUSES_PER_CLOCK 64

/* The first part of a spin runs on pauses alone; the rest yields the core at every step
 * (sched_yield), so that where more threads are runnable than there are cores (two processes
 * sharing the CPUs, a framework's own pool) the spinning workers let the working ones run, while a
 * lone spinner's CPU stays busy and does not halt. Spinning on pauses alone for 2 ms slowed `ctest
 * -j 2` of two 2-thread test processes on 2 cores 15x. */
#define PAUSE_SPIN_NS 20000

/* The longest spin a pool takes (a minute: no overflow of the deadline). */
#define MAX_SPIN_NS (INT64_C(60) * 1000 * 1000 * 1000)

/* Low bits of the generation word: the job's active thread count. */
#define ACTIVE_BITS 24
#define ACTIVE_MASK ((UINT64_C(1) << ACTIVE_BITS) - 1)

typedef struct cvf_worker {
    cvf_threadpool *pool;
    int32_t index;
    pthread_t thread;
} cvf_worker;

struct cvf_threadpool {
    int32_t size;    /* threads including the caller */
    int32_t started; /* workers actually started */
    cvf_worker *workers;
    pthread_mutex_t lock;
    pthread_cond_t work_ready; /* a new generation of work, or shutdown */
    pthread_cond_t work_done;  /* the last busy worker finished */
    atomic_uint_fast64_t generation; /* (job number << ACTIVE_BITS) | threads taking part (0 .. active-1) */
    atomic_int_fast32_t busy;        /* workers still inside the current job */
    atomic_int shutdown;
    int64_t spin_ns;              /* how long an idle worker (or the waiting caller) spins */
    atomic_int parked;            /* set by cvf_threadpool_park, cleared by the next job: no spinning */
    atomic_int_fast32_t sleepers; /* workers asleep on work_ready (cvf_threadpool_sleepers) */
    /* the current job (written before generation is bumped) */
    cvf_task_fn fn;
    void *arg;
    int64_t count;
    atomic_int_fast64_t next;
};

/* A polite busy-wait step (the x86 pause: lets the sibling hyper-thread run, saves power). */
static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Claims and runs tasks of the current job until none are left. */
static void run_tasks(cvf_threadpool *pool, int32_t thread)
{
    for (;;) {
        int64_t task = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (task >= pool->count)
            return;
        pool->fn(pool->arg, task, thread);
    }
}

/* Nanoseconds on the monotonic clock. */
static int64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The spin of one wait: its clock read at the first step, on pauses until pause_until, then
 * yielding; over at the deadline (the pool's spin time) or while the pool is parked. */
typedef struct spin_budget {
    int64_t pause_until, deadline; /* monotonic_ns, set at the first step */
    uint32_t steps;
    bool started, yielding;
} spin_budget;

/* One step of a spin: false when it is over (time to sleep), else pauses (or yields) and returns
 * true. */
static bool spin_on(cvf_threadpool *pool, spin_budget *spin)
{
    if (spin->yielding || spin->steps++ % PAUSES_PER_CLOCK == 0) {
        if (pool->spin_ns <= 0 || atomic_load_explicit(&pool->parked, memory_order_relaxed))
            return false;
        int64_t now = monotonic_ns();
        if (!spin->started) {
            spin->started = true;
            spin->deadline = now + pool->spin_ns;
            spin->pause_until = now + (pool->spin_ns < PAUSE_SPIN_NS ? pool->spin_ns : PAUSE_SPIN_NS);
        } else if (now >= spin->deadline) {
            return false;
        } else if (now >= spin->pause_until) {
            spin->yielding = true;
        }
    }
    if (spin->yielding)
        sched_yield();
    else
        spin_pause();
    return true;
}

/* Waits until the generation differs from seen (or shutdown), spinning first; returns it. */
static uint64_t wait_generation(cvf_threadpool *pool, uint64_t seen)
{
    spin_budget spin = {0};
    do {
        uint64_t now = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (now != seen || atomic_load_explicit(&pool->shutdown, memory_order_relaxed))
            return now;
    } while (spin_on(pool, &spin));
    pthread_mutex_lock(&pool->lock);
    uint64_t now;
    atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_relaxed);
    while ((now = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&pool->shutdown, memory_order_relaxed))
        pthread_cond_wait(&pool->work_ready, &pool->lock);
    atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pool->lock);
    return now;
}

/* Worker body: waits for a new generation, runs its tasks when it takes part, reports done. */
static void *worker_main(void *opaque)
{
    cvf_worker *self = opaque;
    cvf_threadpool *pool = self->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_generation(pool, seen);
        if (atomic_load_explicit(&pool->shutdown, memory_order_relaxed))
            break;
        if ((uint64_t)self->index >= (seen & ACTIVE_MASK))
            continue; /* not in this job: nothing to run or report */
        run_tasks(pool, self->index);
        if (atomic_fetch_sub_explicit(&pool->busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->lock); /* the last one: wake a caller that went to sleep */
            pthread_cond_signal(&pool->work_done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

cvf_threadpool *cvf_threadpool_create(int32_t threads, int64_t spin_ns)
{
    if (threads < 1)
        return NULL;
    cvf_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->size = threads;
    pool->spin_ns = spin_ns < 0 ? 0 : spin_ns < MAX_SPIN_NS ? spin_ns : MAX_SPIN_NS;
    atomic_init(&pool->parked, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->next, 0);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->busy, 0);
    atomic_init(&pool->shutdown, 0);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work_ready, NULL);
    pthread_cond_init(&pool->work_done, NULL);
    if (threads > 1) {
        pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            cvf_threadpool_destroy(pool);
            return NULL;
        }
    }
    for (int32_t i = 1; i < threads; i++) {
        cvf_worker *w = &pool->workers[i - 1];
        w->pool = pool;
        w->index = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            cvf_threadpool_destroy(pool);
            return NULL;
        }
        pool->started++;
    }
    return pool;
}

void cvf_threadpool_destroy(cvf_threadpool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_store_explicit(&pool->shutdown, 1, memory_order_relaxed);
    pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);
    for (int32_t i = 0; i < pool->started; i++)
        pthread_join(pool->workers[i].thread, NULL);
    pthread_cond_destroy(&pool->work_done);
    pthread_cond_destroy(&pool->work_ready);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}

int32_t cvf_threadpool_size(const cvf_threadpool *pool)
{
    return pool->size;
}

void cvf_threadpool_park(cvf_threadpool *pool)
{
    atomic_store_explicit(&pool->parked, 1, memory_order_relaxed);
}

int32_t cvf_threadpool_sleepers(const cvf_threadpool *pool)
{
    return (int32_t)atomic_load_explicit(&pool->sleepers, memory_order_relaxed);
}

int32_t cvf_threadpool_threads_for(const cvf_threadpool *pool, int64_t count)
{
    int32_t usable = pool->started + 1; /* the caller, and the workers that did start */
    if (count <= 0)
        return 0;
    return count < usable ? (int32_t)count : usable;
}

void cvf_threadpool_run(cvf_threadpool *pool, int64_t count, cvf_task_fn fn, void *arg)
{
    cvf_threadpool_run_on(pool, pool->size, count, fn, arg);
}

void cvf_threadpool_run_on(cvf_threadpool *pool, int32_t max_threads, int64_t count, cvf_task_fn fn, void *arg)
{
    int32_t active = cvf_threadpool_threads_for(pool, count);
    if (active > max_threads)
        active = max_threads > 1 ? max_threads : 1;
    if (active == 0)
        return;
    pool->fn = fn;
    pool->arg = arg;
    pool->count = count;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    if (active == 1) { /* one task, or no workers: no reason to wake anybody */
        run_tasks(pool, 0);
        return;
    }
    atomic_store_explicit(&pool->busy, active - 1, memory_order_relaxed);
    /* the workers spin again after this job; a worker that sees the job (acquire, below) sees this
     * store or a later park, never the park before it */
    atomic_store_explicit(&pool->parked, 0, memory_order_relaxed);
    pthread_mutex_lock(&pool->lock);
    uint64_t job = (atomic_load_explicit(&pool->generation, memory_order_relaxed) >> ACTIVE_BITS) + 1;
    atomic_store_explicit(&pool->generation, (job << ACTIVE_BITS) | (uint64_t)active,
                          memory_order_release); /* publishes the job */
    pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);

    run_tasks(pool, 0);

    spin_budget spin = {0};
    while (atomic_load_explicit(&pool->busy, memory_order_acquire) > 0 && spin_on(pool, &spin)) {
    }
    if (atomic_load_explicit(&pool->busy, memory_order_acquire) > 0) {
        pthread_mutex_lock(&pool->lock);
        while (atomic_load_explicit(&pool->busy, memory_order_acquire) > 0)
            pthread_cond_wait(&pool->work_done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
}

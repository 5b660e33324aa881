/* Fixed-size thread pool with a shared task counter; see threadpool.h. */
#include "core/threadpool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>

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
    uint64_t generation;
    int32_t busy;   /* workers still inside the current generation */
    int32_t active; /* threads 0 .. active-1 take part in the current job */
    int shutdown;
    /* the current job */
    cvf_task_fn fn;
    void *arg;
    int64_t count;
    atomic_int_fast64_t next;
};

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

/* Worker body: sleeps until a new generation starts, runs tasks, reports done. */
static void *worker_main(void *opaque)
{
    cvf_worker *self = opaque;
    cvf_threadpool *pool = self->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->shutdown && pool->generation == seen)
            pthread_cond_wait(&pool->work_ready, &pool->lock);
        if (pool->shutdown)
            break;
        seen = pool->generation;
        bool takes_part = self->index < pool->active;
        pthread_mutex_unlock(&pool->lock);
        if (takes_part)
            run_tasks(pool, self->index);
        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->work_done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

cvf_threadpool *cvf_threadpool_create(int32_t threads)
{
    if (threads < 1)
        return NULL;
    cvf_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->size = threads;
    atomic_init(&pool->next, 0);
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
    pool->shutdown = 1;
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
    pthread_mutex_lock(&pool->lock);
    pool->active = active;
    pool->busy = pool->started;
    pool->generation++;
    pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);

    run_tasks(pool, 0);

    pthread_mutex_lock(&pool->lock);
    while (pool->busy > 0)
        pthread_cond_wait(&pool->work_done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
}

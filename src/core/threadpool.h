/*
 * A small fixed thread pool: run(n, fn) calls fn(arg, task, thread) for task = 0 .. n-1, spread
 * over the pool's threads (the calling thread is thread 0), and returns when all have finished.
 * After a job, workers spin for the next one for up to the pool's spin time, then sleep on a
 * condition variable; cvf_threadpool_park sends them to sleep at once.
 */
#ifndef CVF_CORE_THREADPOOL_H
#define CVF_CORE_THREADPOOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cvf_threadpool cvf_threadpool;

/* A task: arg is shared by all tasks, task is in [0, n), thread in [0, pool size). */
typedef void (*cvf_task_fn)(void *arg, int64_t task, int32_t thread);

/* Creates a pool of threads threads in total (threads - 1 workers plus the caller) whose idle
 * workers, and whose caller waiting for them, spin for up to spin_ns nanoseconds (at most a minute)
 * before they sleep (0: sleep at once); returns NULL when a thread or the memory could not be had. */
cvf_threadpool *cvf_threadpool_create(int32_t threads, int64_t spin_ns);

/* Stops and joins the workers. NULL is a no-op. */
void cvf_threadpool_destroy(cvf_threadpool *pool);

/* Returns the number of threads, the caller included. */
int32_t cvf_threadpool_size(const cvf_threadpool *pool);

/* Ends the spinning of the idle workers: they sleep until the next job of two or more threads
 * (which wakes them), those still finishing the last job as soon as they are done. Call between
 * jobs, never during one: from the thread that runs them, or from another one ordered after the
 * last job. */
void cvf_threadpool_park(cvf_threadpool *pool);

/* Returns how many workers are asleep waiting for a job right now (a snapshot, for tests). */
int32_t cvf_threadpool_sleepers(const cvf_threadpool *pool);

/* Returns how many threads a run of count tasks uses: min(pool size, count). Every thread index
 * passed to the tasks is below it, so per-thread scratch needs this many slots. */
int32_t cvf_threadpool_threads_for(const cvf_threadpool *pool, int64_t count);

/* Runs tasks 0 .. count-1 on cvf_threadpool_threads_for(pool, count) threads and waits for all
 * of them. Not reentrant: call from one thread. */
void cvf_threadpool_run(cvf_threadpool *pool, int64_t count, cvf_task_fn fn, void *arg);

/* The same on at most max_threads threads (>= 1): small jobs that would spend more time waking
 * workers than computing stay on fewer threads. */
void cvf_threadpool_run_on(cvf_threadpool *pool, int32_t max_threads, int64_t count, cvf_task_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* CVF_CORE_THREADPOOL_H */

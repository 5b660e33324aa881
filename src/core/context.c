/* Contexts: the device, its backend table and the worker threads. */
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/internal.h"

/* Upper bound on worker threads, far above any machine this runs on; guards absurd requests. */
#define CVF_MAX_THREADS 1024

/* Returns the number of CPUs this process may run on (affinity mask), at least 1. */
static int32_t online_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int count = CPU_COUNT(&set);
        if (count > 0)
            return count;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)n : 1;
}

/* How long idle workers spin for the next job before they sleep, unless CVF_CPU_SPIN_US says: long
 * enough to span the gaps inside a call and between back-to-back calls (on the 16-core host ~2.4 ms
 * of spin instead of ~15 us cut the bf16 MLP backward's steps by 5-29%; docs/PERF.md, seventh
 * session), short beside GNU OpenMP's default (300,000 pauses, ~5 ms there) and OpenBLAS's (~0.1 s). */
#define DEFAULT_SPIN_US 2000
#define MAX_SPIN_US 1000000

/* The pool's spin time in nanoseconds: CVF_CPU_SPIN_US (microseconds, 0 to MAX_SPIN_US) or the
 * default; a value that is not such a number is reported on stderr and the default used. */
static int64_t spin_ns_from_env(void)
{
    const char *text = getenv("CVF_CPU_SPIN_US");
    if (!text || !*text)
        return (int64_t)DEFAULT_SPIN_US * 1000;
    char *end = NULL;
    long long us = strtoll(text, &end, 10);
    if (*end != '\0' || us < 0 || us > MAX_SPIN_US) {
        fprintf(stderr, "cvfuse: CVF_CPU_SPIN_US=%s: expected microseconds from 0 to %d; using %d\n", text, MAX_SPIN_US,
                DEFAULT_SPIN_US);
        return (int64_t)DEFAULT_SPIN_US * 1000;
    }
    return (int64_t)us * 1000;
}

/* Returns the backend table of a device, or NULL for an unknown device. */
static const cvf_backend *backend_for(cvf_device device)
{
    switch (device) {
    case CVF_DEVICE_CPU: return &cvf_cpu_backend;
    case CVF_DEVICE_REFERENCE: return &cvf_reference_backend;
    case CVF_DEVICE_CUDA:
#ifdef CVF_HAVE_CUDA
        return &cvf_cuda_backend;
#else
        return NULL;
#endif
    }
    return NULL;
}

/* Why the last cvf_context_create on this thread failed; "" after a success. */
static _Thread_local char create_error[CVF_MESSAGE_SIZE];

/* Records why cvf_context_create failed (and prints it under CVF_DEBUG) and returns status. */
static cvf_status create_failed(cvf_status status, const char *format, ...) __attribute__((format(printf, 2, 3)));
static cvf_status create_failed(cvf_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(create_error, sizeof create_error, format, args);
    va_end(args);
    if (getenv("CVF_DEBUG"))
        fprintf(stderr, "cvfuse: cvf_context_create: %s\n", create_error);
    return status;
}

const char *cvf_context_create_error(void)
{
    return create_error;
}

cvf_status cvf_context_create(const cvf_context_options *options, cvf_context **out)
{
    create_error[0] = '\0';
    if (!out)
        return create_failed(CVF_STATUS_NULL_POINTER, "out: the cvf_context ** is NULL");
    *out = NULL;
    cvf_context_options defaults = {CVF_DEVICE_CPU, 0, 0, NULL};
    if (!options)
        options = &defaults;
    const cvf_backend *backend = backend_for(options->device);
    if (!backend && options->device == CVF_DEVICE_CUDA)
        return create_failed(CVF_STATUS_UNSUPPORTED, "cuda device %d: cvfuse was built without CUDA (nvcc not found "
                                                     "at configure time, or CVF_CUDA=OFF)",
                             (int)options->device_index);
    if (!backend)
        return create_failed(CVF_STATUS_INVALID_VALUE, "options.device: %d is not a cvf_device value",
                             (int)options->device);
    if (options->threads < 0 || options->threads > CVF_MAX_THREADS)
        return create_failed(CVF_STATUS_INVALID_VALUE, "options.threads: %d, expected 0 (all CPUs) to %d",
                             (int)options->threads, CVF_MAX_THREADS);

    cvf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return create_failed(CVF_STATUS_OUT_OF_MEMORY, "could not allocate the context");
    ctx->device = options->device;
    ctx->backend = backend;
    ctx->stream = backend->has_streams && backend->has_streams() ? options->stream : NULL;
    if (backend->init) {
        char why[256] = "";
        cvf_status status = backend->init(ctx, options, why, sizeof why);
        if (status != CVF_STATUS_SUCCESS) {
            if (backend->release)
                backend->release(ctx);
            free(ctx);
            return create_failed(status, "%s device %d: %s", backend->name, (int)options->device_index, why);
        }
    }
    /* The reference device computes on the calling thread alone (simple, obviously correct); the
     * CUDA device only enqueues work from the caller's thread. */
    const int32_t cpus = online_cpus();
    ctx->threads = options->device == CVF_DEVICE_REFERENCE || options->device == CVF_DEVICE_CUDA ? 1
                   : options->threads > 0                                                        ? options->threads
                                                                                                 : cpus;
    /* no spinning where the threads outnumber the CPUs: a spinning worker would hold a core that a
     * working one needs (GNU OpenMP shortens its spin likewise) */
    const int64_t spin_ns = spin_ns_from_env(); /* read (and a bad value reported) whatever the threads */
    ctx->pool = cvf_threadpool_create(ctx->threads, ctx->threads > 1 && ctx->threads <= cpus ? spin_ns : 0);
    if (!ctx->pool) {
        int32_t workers = ctx->threads - 1;
        if (backend->release)
            backend->release(ctx);
        free(ctx);
        return create_failed(CVF_STATUS_OUT_OF_MEMORY, "could not start %d worker threads", (int)workers);
    }
    *out = ctx;
    return CVF_STATUS_SUCCESS;
}

void cvf_context_destroy(cvf_context *ctx)
{
    if (!ctx)
        return;
    if (!ctx->workspace_is_callers)
        ctx->backend->workspace_free(ctx->workspace);
    if (ctx->backend->release)
        ctx->backend->release(ctx);
    cvf_threadpool_destroy(ctx->pool);
    free(ctx);
}

cvf_status cvf_workspace_reserve(cvf_context *ctx, size_t bytes, const char *what, void **workspace)
{
    if (bytes > ctx->workspace_size && ctx->workspace_is_callers)
        return cvf_fail(ctx, CVF_STATUS_WORKSPACE_TOO_SMALL,
                        "%s: needs %zu bytes of workspace, the caller's (cvf_context_set_workspace) has %zu "
                        "(nothing was written)",
                        what, bytes, ctx->workspace_size);
    if (bytes > ctx->workspace_size) {
        void *grown = ctx->backend->workspace_alloc(bytes);
        if (!grown)
            return cvf_fail(ctx, CVF_STATUS_OUT_OF_MEMORY,
                            "%s: could not allocate %zu bytes of workspace on the %s device (nothing was written)",
                            what, bytes, cvf_device_name(ctx->device));
        ctx->backend->workspace_free(ctx->workspace);
        ctx->workspace = grown;
        ctx->workspace_size = bytes;
    }
    *workspace = ctx->workspace;
    return CVF_STATUS_SUCCESS;
}

cvf_status cvf_context_set_workspace(cvf_context *ctx, void *memory, size_t bytes)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if ((memory == NULL) != (bytes == 0))
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE,
                        "memory %p with bytes %zu: give both (the caller's workspace) or neither (the context's own)",
                        memory, bytes);
    if ((uintptr_t)memory % 256 != 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "memory %p: the workspace must be 256-byte aligned", memory);
    if (!ctx->workspace_is_callers)
        ctx->backend->workspace_free(ctx->workspace);
    ctx->workspace = memory;
    ctx->workspace_size = bytes;
    ctx->workspace_is_callers = memory != NULL;
    return CVF_STATUS_SUCCESS;
}

cvf_status cvf_context_set_stream(cvf_context *ctx, void *stream)
{
    if (!ctx)
        return CVF_STATUS_NULL_POINTER;
    cvf_clear_error(ctx);
    if (stream && !(ctx->backend->has_streams && ctx->backend->has_streams()))
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "stream: the %s device has no streams (only NULL is accepted)",
                        cvf_device_name(ctx->device));
    ctx->stream = stream;
    return CVF_STATUS_SUCCESS;
}

void *cvf_context_stream(const cvf_context *ctx)
{
    return ctx ? ctx->stream : NULL;
}

const char *cvf_context_last_error(const cvf_context *ctx)
{
    return ctx ? ctx->message : "no context (ctx is NULL)";
}

cvf_device cvf_context_device(const cvf_context *ctx)
{
    return ctx ? ctx->device : CVF_DEVICE_CPU;
}

int32_t cvf_context_threads(const cvf_context *ctx)
{
    return ctx ? ctx->threads : 0;
}

void cvf_context_park_threads(cvf_context *ctx)
{
    if (ctx && ctx->pool)
        cvf_threadpool_park(ctx->pool);
}

void *cvf_host_workspace_alloc(size_t bytes)
{
    return aligned_alloc(256, cvf_round_up_256(bytes ? bytes : 1));
}

void cvf_host_workspace_free(void *memory)
{
    free(memory);
}

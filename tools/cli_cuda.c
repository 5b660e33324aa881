/*
 * The CLI's only use of the CUDA runtime: streams, device memory, stream-ordered copies and event
 * timing for the op subcommands' --device cuda (tools/cli_device.c drives them). Each function
 * returns NULL on success or a static reason (cudaGetErrorString's text). In builds without CUDA
 * every function that could succeed fails with "built without CUDA"; nothing here holds state.
 */
#include <stddef.h>

#include "cli.h"

#ifndef CVF_HAVE_CUDA

/* The reason every CUDA step fails in a build without CUDA. */
static const char NO_CUDA[] = "cvfuse was built without CUDA (nvcc not found at configure time, or CVF_CUDA=OFF)";

const char *cli_cuda_stream_create(void **stream)
{
    *stream = NULL;
    return NO_CUDA;
}

void cli_cuda_stream_destroy(void *stream)
{
    (void)stream;
}

const char *cli_cuda_alloc(void **memory, size_t bytes)
{
    (void)bytes;
    *memory = NULL;
    return NO_CUDA;
}

void cli_cuda_free(void *memory)
{
    (void)memory;
}

const char *cli_cuda_copy_in(void *device, const void *host, size_t bytes, void *stream)
{
    (void)device;
    (void)host;
    (void)bytes;
    (void)stream;
    return NO_CUDA;
}

const char *cli_cuda_copy_out(void *host, const void *device, size_t bytes, void *stream)
{
    (void)host;
    (void)device;
    (void)bytes;
    (void)stream;
    return NO_CUDA;
}

const char *cli_cuda_sync(void *stream)
{
    (void)stream;
    return NO_CUDA;
}

const char *cli_cuda_event_create(void **event)
{
    *event = NULL;
    return NO_CUDA;
}

const char *cli_cuda_event_record(void *event, void *stream)
{
    (void)event;
    (void)stream;
    return NO_CUDA;
}

const char *cli_cuda_event_elapsed(void *start, void *stop, double *ms)
{
    (void)start;
    (void)stop;
    *ms = 0.0;
    return NO_CUDA;
}

void cli_cuda_event_destroy(void *event)
{
    (void)event;
}

#else

#include <cuda_runtime.h>

/* Returns NULL for cudaSuccess, else the error's text. */
static const char *reason(cudaError_t err)
{
    return err == cudaSuccess ? NULL : cudaGetErrorString(err);
}

const char *cli_cuda_stream_create(void **stream)
{
    cudaStream_t s = NULL;
    cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    *stream = err == cudaSuccess ? (void *)s : NULL;
    return reason(err);
}

void cli_cuda_stream_destroy(void *stream)
{
    if (stream)
        cudaStreamDestroy((cudaStream_t)stream);
}

const char *cli_cuda_alloc(void **memory, size_t bytes)
{
    *memory = NULL;
    return reason(cudaMalloc(memory, bytes));
}

void cli_cuda_free(void *memory)
{
    if (memory)
        cudaFree(memory);
}

const char *cli_cuda_copy_in(void *device, const void *host, size_t bytes, void *stream)
{
    return reason(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream));
}

const char *cli_cuda_copy_out(void *host, const void *device, size_t bytes, void *stream)
{
    return reason(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream));
}

const char *cli_cuda_sync(void *stream)
{
    return reason(cudaStreamSynchronize((cudaStream_t)stream));
}

const char *cli_cuda_event_create(void **event)
{
    cudaEvent_t e = NULL;
    cudaError_t err = cudaEventCreate(&e);
    *event = err == cudaSuccess ? (void *)e : NULL;
    return reason(err);
}

const char *cli_cuda_event_record(void *event, void *stream)
{
    return reason(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

const char *cli_cuda_event_elapsed(void *start, void *stop, double *ms)
{
    float elapsed = 0.0f;
    cudaError_t err = cudaEventSynchronize((cudaEvent_t)stop);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&elapsed, (cudaEvent_t)start, (cudaEvent_t)stop);
    *ms = (double)elapsed;
    return reason(err);
}

void cli_cuda_event_destroy(void *event)
{
    if (event)
        cudaEventDestroy((cudaEvent_t)event);
}

#endif

/* CUDA contexts: the device probe, properties, workspace memory and error messages. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.cuh"

extern "C" cvf_status cvf_cuda_context_init(cvf_context *ctx, const cvf_context_options *options, char *why,
                                            size_t size)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        snprintf(why, size, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(err));
        cudaGetLastError(); /* clear the sticky-free error state for later calls */
        return CVF_STATUS_UNSUPPORTED;
    }
    if (options->device_index < 0 || options->device_index >= count) {
        snprintf(why, size, "device_index %d: this machine has %d CUDA device(s)", (int)options->device_index, count);
        return CVF_STATUS_UNSUPPORTED;
    }
    cudaDeviceProp prop;
    if ((err = cudaSetDevice(options->device_index)) != cudaSuccess ||
        (err = cudaGetDeviceProperties(&prop, options->device_index)) != cudaSuccess) {
        snprintf(why, size, "CUDA device %d unusable: %s", (int)options->device_index, cudaGetErrorString(err));
        cudaGetLastError();
        return CVF_STATUS_UNSUPPORTED;
    }
    cvf_cuda_info *info = &ctx->cuda;
    info->device_index = options->device_index;
    info->stream = options->stream;
    info->sm_count = prop.multiProcessorCount;
    info->major = prop.major;
    info->minor = prop.minor;
    info->max_smem_optin = (int32_t)prop.sharedMemPerBlockOptin;
    const char *kernel = getenv("CVF_CUDA_KERNEL"); /* "simple": every call on the oracle kernel */
    info->fast = prop.major == 9 && !(kernel && strcmp(kernel, "simple") == 0);
    info->last_kernel = "";
    info->tmap_cache = cvf_cuda_tmap_cache_create(); /* NULL only disables the reuse */
    /* The fast kernel's scheduler counters and split-K words: cleared once here, left cleared by
     * every launch. cudaMemset runs on the legacy default stream, which a non-blocking context
     * stream does not wait for: synchronise so that the first launch sees zeros. Without the
     * block the fast kernel is not used. */
    size_t sync_bytes = sizeof(int32_t) * CVF_CUDA_SYNC_INTS * CVF_CUDA_LANES;
    if (cudaMalloc((void **)&info->sync, sync_bytes) != cudaSuccess ||
        cudaMemset(info->sync, 0, sync_bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        if (info->sync)
            cudaFree(info->sync);
        info->sync = NULL;
    }
    if (getenv("CVF_DEBUG"))
        fprintf(stderr, "cvfuse: cuda device %d: %s, sm_%d%d, %d SMs, %d KB smem opt-in, fast kernel %s\n",
                (int)info->device_index, prop.name, prop.major, prop.minor, info->sm_count,
                info->max_smem_optin / 1024, info->fast ? "on" : "off");
    return CVF_STATUS_SUCCESS;
}

extern "C" void cvf_cuda_context_release(cvf_context *ctx)
{
    cvf_cuda_info *info = &ctx->cuda;
    for (int i = 0; i < 2; i++)
        if (info->side_streams[i])
            cudaStreamDestroy((cudaStream_t)info->side_streams[i]);
    for (int i = 0; i < 4; i++)
        if (info->events[i])
            cudaEventDestroy((cudaEvent_t)info->events[i]);
    if (info->sync)
        cudaFree(info->sync); /* waits for the work that may still use it */
    free(info->tmap_cache);
    memset(info->side_streams, 0, sizeof info->side_streams);
    memset(info->events, 0, sizeof info->events);
    info->sync = NULL;
    info->tmap_cache = NULL;
}

extern "C" void *cvf_cuda_workspace_alloc(size_t bytes)
{
    void *memory = NULL;
    if (cudaMalloc(&memory, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return memory;
}

extern "C" void cvf_cuda_workspace_free(void *memory)
{
    if (memory)
        cudaFree(memory); /* waits for the work that may still use it */
}

cvf_status cvf_cuda_check(cvf_context *ctx, int error, const char *what)
{
    if (error == cudaSuccess)
        return CVF_STATUS_SUCCESS;
    return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "%s: CUDA error %d (%s)", what, error,
                    cudaGetErrorString((cudaError_t)error));
}

extern "C" const char *cvf_cuda_last_kernel(const cvf_context *ctx)
{
    return ctx && ctx->cuda.last_kernel ? ctx->cuda.last_kernel : "";
}

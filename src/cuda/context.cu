/* CUDA contexts: the device probe, the per-context state (streams, events, the cuBLASLt handle,
 * the engine cache), workspace memory and error messages. Everything a call needs is made here,
 * at context creation, so that no call creates streams or allocates device memory. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.cuh"

namespace {

/* The policy CVF_CUDA_ENGINE names (auto when unset or unknown, with a warning for the latter). */
cvf_cuda_engine_policy read_policy(void)
{
    const char *e = getenv("CVF_CUDA_ENGINE");
    if (!e || !*e || strcmp(e, "auto") == 0)
        return CVF_CUDA_POLICY_AUTO;
    if (strcmp(e, "own") == 0)
        return CVF_CUDA_POLICY_OWN;
    if (strcmp(e, "cublaslt") == 0)
        return CVF_CUDA_POLICY_CUBLASLT;
    if (strcmp(e, "unfused") == 0)
        return CVF_CUDA_POLICY_UNFUSED;
    fprintf(stderr, "cvfuse: CVF_CUDA_ENGINE=%s is not one of auto, own, cublaslt, unfused; using auto\n", e);
    return CVF_CUDA_POLICY_AUTO;
}

/* True when the environment variable is set to "0". */
bool env_off(const char *name)
{
    const char *e = getenv(name);
    return e && strcmp(e, "0") == 0;
}

/* Reads the device's properties into st; false with the reason in why. */
bool probe(cvf_cuda_state *st, int32_t index, char *why, size_t size)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        snprintf(why, size, "no usable CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(err));
        cudaGetLastError();
        return false;
    }
    if (index < 0 || index >= count) {
        snprintf(why, size, "device_index %d: this machine has %d CUDA device(s)", (int)index, count);
        return false;
    }
    cudaDeviceProp prop;
    if ((err = cudaSetDevice(index)) != cudaSuccess || (err = cudaGetDeviceProperties(&prop, index)) != cudaSuccess) {
        snprintf(why, size, "CUDA device %d unusable: %s", (int)index, cudaGetErrorString(err));
        cudaGetLastError();
        return false;
    }
    st->device_index = index;
    st->sm_count = prop.multiProcessorCount;
    st->major = prop.major;
    st->minor = prop.minor;
    st->max_smem_optin = (int32_t)prop.sharedMemPerBlockOptin;
    const char *kernel = getenv("CVF_CUDA_KERNEL"); /* "simple": every call on the oracle kernel */
    st->simple_only = kernel && strcmp(kernel, "simple") == 0;
    st->fast = prop.major == 9 && !st->simple_only;
    if (getenv("CVF_DEBUG"))
        fprintf(stderr, "cvfuse: cuda device %d: %s, sm_%d%d, %d SMs, %d KB smem opt-in, fast kernel %s\n", (int)index,
                prop.name, prop.major, prop.minor, st->sm_count, st->max_smem_optin / 1024, st->fast ? "on" : "off");
    return true;
}

/* The fast kernel's scheduler counters and split-K words: cleared once here, left cleared by
 * every launch. cudaMemset runs on the legacy default stream, which a non-blocking context
 * stream does not wait for: synchronise so that the first launch sees zeros. Without the block
 * the fast kernel is not used. */
void make_sync_block(cvf_cuda_state *st)
{
    size_t bytes = sizeof(int32_t) * CVF_CUDA_SYNC_INTS * CVF_CUDA_LANES;
    if (cudaMalloc((void **)&st->sync, bytes) != cudaSuccess || cudaMemset(st->sync, 0, bytes) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        if (st->sync)
            cudaFree(st->sync);
        st->sync = NULL;
    }
}

/* An event without timing (ordering only). */
bool make_event(void **event, unsigned flags)
{
    cudaEvent_t e;
    if (cudaEventCreateWithFlags(&e, flags) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    *event = e;
    return true;
}

/* The MLP's side streams (highest priority) and every event a call uses. */
bool make_lanes(cvf_cuda_state *st)
{
    int least = 0, greatest = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess)
        greatest = 0;
    for (int i = 0; i < 3; i++) {
        cudaStream_t s;
        if (cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        st->side_streams[i] = s;
    }
    bool ok = make_event(&st->fork_event, cudaEventDisableTiming);
    for (int i = 0; i < CVF_CUDA_STEP_EVENTS; i++)
        ok = ok && make_event(&st->step_events[i], cudaEventDisableTiming);
    for (int i = 0; i < 3; i++)
        ok = ok && make_event(&st->join_events[i], cudaEventDisableTiming);
    for (int i = 0; i < 2; i++)
        ok = ok && make_event(&st->timing_events[i], cudaEventDefault);
    return ok;
}

} /* namespace */

extern "C" cvf_status cvf_cuda_init(cvf_context *ctx, const cvf_context_options *options, char *why, size_t size)
{
    cvf_cuda_state *st = (cvf_cuda_state *)calloc(1, sizeof *st);
    if (!st) {
        snprintf(why, size, "out of memory for the context's state");
        return CVF_STATUS_OUT_OF_MEMORY;
    }
    ctx->backend_state = st;
    if (!probe(st, options->device_index, why, size))
        return CVF_STATUS_UNSUPPORTED;
    st->policy = read_policy();
    st->autotune = !env_off("CVF_CUDA_AUTOTUNE");
    const char *serial = getenv("CVF_CUDA_MLP_SERIAL");
    st->serial = serial && serial[0] == '1';
    st->last_kernel = "";
    st->last_lean = -1;
    st->tmap_cache = cvf_cuda_tmap_cache_create(); /* NULL only disables the reuse */
    st->engine_cache = cvf_cuda_engine_cache_create(); /* NULL: the heuristic decides every call */
    make_sync_block(st);
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS)
        st->lt = lt; /* else cuBLASLt is not a candidate */
    if (!make_lanes(st)) {
        snprintf(why, size, "could not create the context's streams and events");
        return CVF_STATUS_OUT_OF_MEMORY;
    }
    return CVF_STATUS_SUCCESS;
}

extern "C" void cvf_cuda_release(cvf_context *ctx)
{
    cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    if (!st)
        return;
    cvf_cuda_tp_release(st);
    for (int i = 0; i < 3; i++)
        if (st->side_streams[i])
            cudaStreamDestroy((cudaStream_t)st->side_streams[i]);
    void *events[] = {st->fork_event,       st->join_events[0],   st->join_events[1], st->join_events[2],
                      st->timing_events[0], st->timing_events[1]};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (events[i])
            cudaEventDestroy((cudaEvent_t)events[i]);
    for (int i = 0; i < CVF_CUDA_STEP_EVENTS; i++)
        if (st->step_events[i])
            cudaEventDestroy((cudaEvent_t)st->step_events[i]);
    if (st->sync)
        cudaFree(st->sync); /* waits for the work that may still use it */
    cvf_cuda_engine_cache_destroy(st->engine_cache);
    if (st->lt)
        cublasLtDestroy((cublasLtHandle_t)st->lt);
    free(st->tmap_cache);
    free(st);
    ctx->backend_state = NULL;
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

/* ctx's CUDA state, or NULL when ctx is not a CUDA context (the white-box getters below). */
static const cvf_cuda_state *cuda_state_if(const cvf_context *ctx)
{
    return ctx && ctx->device == CVF_DEVICE_CUDA ? cvf_cuda_state_of(ctx) : NULL;
}

extern "C" const char *cvf_cuda_last_kernel(const cvf_context *ctx)
{
    const cvf_cuda_state *st = cuda_state_if(ctx);
    return st && st->last_kernel ? st->last_kernel : "";
}

extern "C" int32_t cvf_cuda_last_lean(const cvf_context *ctx)
{
    const cvf_cuda_state *st = cuda_state_if(ctx);
    return st ? st->last_lean : -1;
}

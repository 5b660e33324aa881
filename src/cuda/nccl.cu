/*
 * The tensor-parallel MLP's communication over NCCL (issue 14): the checks of a caller's
 * communicator, the ranks' agreement before a call's collectives, and the all-reduce steps.
 * Compiled in full only with CVF_HAVE_NCCL (CMake found NCCL and CVF_NCCL is ON); otherwise the
 * all-reduce is a stub the core never reaches (validation refuses a communicator first).
 *
 * NCCL's errors become CVF_STATUS_COMMUNICATION_FAILED with ncclGetErrorString (and, where NCCL has
 * one, ncclGetLastError) in the context's message. A wait for the ranks (the agreement) polls the
 * stream and ncclCommGetAsyncError, and gives up after CVF_NCCL_TIMEOUT_S seconds (default 300):
 * a peer that never calls, or a broken link, is reported instead of hanging the caller.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/device.cuh"

#ifdef CVF_HAVE_NCCL
#include <nccl.h>

namespace {

/* Records an NCCL failure of what on ctx. */
cvf_status nccl_fail(cvf_context *ctx, ncclComm_t comm, ncclResult_t result, const char *what)
{
    const char *detail = "";
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    if (comm)
        detail = ncclGetLastError(comm);
#else
    (void)comm;
#endif
    return cvf_fail(ctx, CVF_STATUS_COMMUNICATION_FAILED, "%s: NCCL error %d (%s)%s%s", what, (int)result,
                    ncclGetErrorString(result), detail && detail[0] ? ": " : "", detail ? detail : "");
}

/* The NCCL type of a storage dtype. */
bool nccl_type(cvf_dtype dtype, ncclDataType_t *type)
{
    switch (dtype) {
    case CVF_F32: *type = ncclFloat32; return true;
    case CVF_F16: *type = ncclFloat16; return true;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case CVF_BF16: *type = ncclBfloat16; return true;
#endif
    default: return false;
    }
}

/* Seconds the host waits for the ranks: CVF_NCCL_TIMEOUT_S, default 300. */
double timeout_seconds(void)
{
    const char *text = getenv("CVF_NCCL_TIMEOUT_S");
    double t = text ? atof(text) : 0.0;
    return t > 0.0 ? t : 300.0;
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The agreement's buffers, made on first use (a context that never communicates allocates none). */
cvf_status agree_buffers(cvf_context *ctx, cvf_cuda_state *st)
{
    if (st->agree_device && st->agree_host && st->agree_event)
        return CVF_STATUS_SUCCESS;
    cudaError_t err = cudaSuccess;
    if (!st->agree_device)
        err = cudaMalloc((void **)&st->agree_device, sizeof(int64_t) * CVF_TP_AGREE_MAX);
    if (err == cudaSuccess && !st->agree_host)
        err = cudaMallocHost((void **)&st->agree_host, sizeof(int64_t) * CVF_TP_AGREE_MAX);
    if (err == cudaSuccess && !st->agree_event) {
        cudaEvent_t e;
        err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        if (err == cudaSuccess)
            st->agree_event = e;
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        return cvf_fail(ctx, CVF_STATUS_OUT_OF_MEMORY, "args.tp: the ranks' agreement buffers: CUDA error %d (%s)",
                        (int)err, cudaGetErrorString(err));
    }
    return CVF_STATUS_SUCCESS;
}

} /* namespace */

extern "C" cvf_status cvf_cuda_tp_check_comm(cvf_context *ctx, const cvf_tensor_parallel *tp)
{
    ncclComm_t comm = (ncclComm_t)tp->nccl_comm;
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess)
        return nccl_fail(ctx, comm, r, "args.tp.nccl_comm: ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
        return nccl_fail(ctx, comm, async, "args.tp.nccl_comm: the communicator has failed");
    int count = 0, rank = 0, device = 0;
    if ((r = ncclCommCount(comm, &count)) != ncclSuccess)
        return nccl_fail(ctx, comm, r, "args.tp.nccl_comm: ncclCommCount");
    if ((r = ncclCommUserRank(comm, &rank)) != ncclSuccess)
        return nccl_fail(ctx, comm, r, "args.tp.nccl_comm: ncclCommUserRank");
    if ((r = ncclCommCuDevice(comm, &device)) != ncclSuccess)
        return nccl_fail(ctx, comm, r, "args.tp.nccl_comm: ncclCommCuDevice");
    if (count != tp->size || rank != tp->rank)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE,
                        "args.tp: size %d, rank %d, but the communicator has %d ranks and this is its rank %d",
                        (int)tp->size, (int)tp->rank, count, rank);
    const int32_t ours = cvf_cuda_state_of(ctx)->device_index;
    if (device != ours)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE,
                        "args.tp.nccl_comm: the communicator's rank is on GPU %d, the context on GPU %d", device,
                        (int)ours);
    return CVF_STATUS_SUCCESS;
}

extern "C" cvf_status cvf_cuda_tp_agree(cvf_context *ctx, void *comm_handle, int64_t *values, int count)
{
    cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    ncclComm_t comm = (ncclComm_t)comm_handle;
    if (count < 1 || count > CVF_TP_AGREE_MAX)
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "args.tp: agreement of %d values", count);
    cvf_status status = agree_buffers(ctx, st);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    const size_t bytes = sizeof(int64_t) * (size_t)count;
    memcpy(st->agree_host, values, bytes); /* pinned: the copy in is truly asynchronous; the copy out,
                                               later on the same stream, overwrites it only after */
    cudaError_t err = cudaMemcpyAsync(st->agree_device, st->agree_host, bytes, cudaMemcpyHostToDevice, stream);
    if (err != cudaSuccess)
        return cvf_cuda_check(ctx, err, "args.tp: the ranks' agreement (copy in)");
    ncclResult_t r = ncclAllReduce(st->agree_device, st->agree_device, (size_t)count, ncclInt64, ncclMax, comm, stream);
    if (r != ncclSuccess)
        return nccl_fail(ctx, comm, r, "args.tp: the ranks' agreement (ncclAllReduce)");
    err = cudaMemcpyAsync(st->agree_host, st->agree_device, bytes, cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
        err = cudaEventRecord((cudaEvent_t)st->agree_event, stream);
    if (err != cudaSuccess)
        return cvf_cuda_check(ctx, err, "args.tp: the ranks' agreement (copy out)");
    const double limit = timeout_seconds(), start = now_seconds();
    for (long polls = 0;; polls++) {
        err = cudaEventQuery((cudaEvent_t)st->agree_event);
        if (err == cudaSuccess)
            break;
        if (err != cudaErrorNotReady)
            return cvf_cuda_check(ctx, err, "args.tp: waiting for the ranks' agreement");
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
            return nccl_fail(ctx, comm, async, "args.tp: waiting for the ranks' agreement");
        if (now_seconds() - start > limit)
            return cvf_fail(ctx, CVF_STATUS_COMMUNICATION_FAILED,
                            "args.tp: the ranks did not agree within %.0f s (CVF_NCCL_TIMEOUT_S): a rank never made "
                            "this call, or failed before its collective; the communicator still holds the pending "
                            "collective: abort it (ncclCommAbort)",
                            limit);
        if (polls > 1000) { /* after the first few ms, poll every 100 us */
            struct timespec pause = {0, 100000};
            nanosleep(&pause, NULL);
        }
    }
    memcpy(values, st->agree_host, bytes);
    return CVF_STATUS_SUCCESS;
}

extern "C" cvf_status cvf_cuda_all_reduce(cvf_context *ctx, cvf_cuda_launch launch, const cvf_mlp_step *step)
{
    const cvf_matrix *c = &step->c;
    ncclDataType_t type;
    if (!nccl_type(c->dtype, &type))
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "%s: NCCL has no %s type", step->info.name,
                        cvf_dtype_name(c->dtype));
    const size_t count = (size_t)c->rows * (size_t)c->cols; /* dense: validated */
    ncclComm_t comm = (ncclComm_t)step->comm;
    ncclResult_t r = ncclAllReduce(c->data, c->data, count, type, ncclSum, comm, (cudaStream_t)launch.stream);
    if (r != ncclSuccess)
        return nccl_fail(ctx, comm, r, "ncclAllReduce");
    return CVF_STATUS_SUCCESS;
}

#else /* no NCCL: the core refuses a communicator before any step is made */

extern "C" cvf_status cvf_cuda_all_reduce(cvf_context *ctx, cvf_cuda_launch launch, const cvf_mlp_step *step)
{
    (void)launch;
    return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "%s: this cvfuse was built without NCCL", step->info.name);
}

#endif

extern "C" void cvf_cuda_tp_release(cvf_cuda_state *st)
{
    if (st->agree_event)
        cudaEventDestroy((cudaEvent_t)st->agree_event);
    if (st->agree_device)
        cudaFree(st->agree_device);
    if (st->agree_host)
        cudaFreeHost(st->agree_host);
    st->agree_event = NULL;
    st->agree_device = st->agree_host = NULL;
}

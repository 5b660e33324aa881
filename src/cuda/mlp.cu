/*
 * The vision-MLP backward on the GPU: the core's steps (cvf_mlp_backward_steps: K1 fused with
 * GELU' and grad_fc1_bias, K2-1, K2-2, K2-3, K3), run on three lanes so that independent
 * kernels overlap, all ordered on the caller's stream:
 *
 *   side lane 1 (high priority):  ┌─ K2-1 ─ K3 ───────────────────────┐
 *   context stream (lane 0):    fork ─ K1 ─ K1 done ─ K2-3 ──────── join(lane 1, lane 2)
 *   side lane 2 (high priority):               └─ K2-2 ─────────────┘
 *
 * K2-1 and K3 read only inputs, so they start with K1; K2-2 and K2-3 both read K1's
 * grad_fc1_output. The weight gradients K2-1 and K2-2 have few output tiles with a long K (S):
 * each of their CTAs runs for the whole kernel. They are enqueued first and on high-priority
 * streams, so that their CTAs take SMs first and the many short tiles of K1 and K2-3 (whose
 * CTAs take tiles from a shared counter, so late CTAs take fewer) fill the other SMs around
 * them; the total then approaches the sum of the work over all SMs.
 *
 * Every lane forks from an event recorded on the context's stream and the context's stream
 * waits for every lane before the call returns: to the caller, the whole backward is one
 * ordered piece of work on its stream, like a single kernel.
 *
 * grad_fc1_output lives in the context's workspace, in the storage dtype for 16-bit tensors
 * (as PyTorch keeps it; K2-2 and K2-3 then run on the fast kernel), rows padded to 16 bytes for
 * the TMA. Each step gets its own piece of the workspace, since steps run at the same time.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.cuh"

namespace {

enum { STEP_K1, STEP_K2_1, STEP_K2_2, STEP_K2_3, STEP_K3, STEP_COUNT };
enum { EVENT_FORK, EVENT_K1, EVENT_LANE1, EVENT_LANE2 };

/* The lane of each step of cvf_mlp_backward_steps (see the diagram above). */
const int32_t step_lane[STEP_COUNT] = {0, 1, 2, 0, 1};

/* CVF_CUDA_MLP_SERIAL=1: every step on the context's stream, one after the other (to measure
 * what the overlap buys). */
bool serial_requested(void)
{
    const char *e = getenv("CVF_CUDA_MLP_SERIAL");
    return e && e[0] == '1';
}

/* The lane a step runs on. */
int32_t lane_of(int step, bool serial)
{
    return serial || step >= STEP_COUNT ? 0 : step_lane[step];
}

/* The body of ensure_lanes, on the context's device. */
bool create_lanes(cvf_cuda_info *info)
{
    for (int i = 0; i < 2; i++)
        if (!info->side_streams[i]) {
            cudaStream_t s;
            int least = 0, greatest = 0;
            if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess)
                greatest = 0;
            if (cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest) != cudaSuccess) {
                cudaGetLastError();
                return false;
            }
            info->side_streams[i] = s;
        }
    for (int i = 0; i < 4; i++)
        if (!info->events[i]) {
            cudaEvent_t e;
            if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
                cudaGetLastError();
                return false;
            }
            info->events[i] = e;
        }
    return true;
}

/* Creates the side streams and events of ctx, once, on the context's GPU (whatever device is
 * current is restored). False when CUDA refuses (the backward then runs serially on the
 * context's stream). */
bool ensure_lanes(cvf_context *ctx)
{
    cvf_cuda_info *info = &ctx->cuda;
    if (info->side_streams[0] && info->side_streams[1] && info->events[3])
        return true;
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || cudaSetDevice(info->device_index) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    bool made = create_lanes(info);
    cudaSetDevice(current);
    return made;
}

/* The stream of lane (0: the context's own). */
cudaStream_t lane_stream(const cvf_context *ctx, void *main_stream, int32_t lane)
{
    return (cudaStream_t)(lane == 0 ? main_stream : ctx->cuda.side_streams[lane - 1]);
}

/* Runs one step on its lane: the backend's entry points enqueue on ctx->cuda.stream, which is
 * pointed at the lane's stream for the step. */
cvf_status run_step(cvf_context *ctx, const cvf_mlp_step *step, void *main_stream, int32_t lane, void *workspace)
{
    ctx->cuda.stream = lane_stream(ctx, main_stream, lane);
    ctx->cuda.lane = lane;
    cvf_status status = cvf_mlp_run_step(ctx, step, workspace);
    ctx->cuda.stream = main_stream;
    ctx->cuda.lane = 0;
    return status;
}

/* Records event on the stream of lane `from` and makes lane `to` wait for it. */
cvf_status link_lanes(cvf_context *ctx, void *main_stream, int event, int32_t from, int32_t to)
{
    cudaEvent_t e = (cudaEvent_t)ctx->cuda.events[event];
    cudaError_t err = cudaEventRecord(e, lane_stream(ctx, main_stream, from));
    if (err == cudaSuccess)
        err = cudaStreamWaitEvent(lane_stream(ctx, main_stream, to), e, 0);
    return cvf_cuda_check(ctx, err, "mlp backward: ordering the side streams");
}

/* Enqueues the steps in dependency order (see the diagram); with serial, all on lane 0. The
 * joins into the context's stream are enqueued even after a failed step, so that nothing a
 * side lane has queued is left unordered with the caller's later work. */
cvf_status run_lanes(cvf_context *ctx, const cvf_mlp_step *steps, void *const *workspaces, bool serial)
{
    void *main_stream = ctx->cuda.stream;
    if (serial) {
        for (int i = 0; i < STEP_COUNT; i++) {
            cvf_status status = run_step(ctx, &steps[i], main_stream, 0, workspaces[i]);
            if (status != CVF_STATUS_SUCCESS)
                return status;
        }
        return CVF_STATUS_SUCCESS;
    }
    cvf_status status = link_lanes(ctx, main_stream, EVENT_FORK, 0, 1);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    status = run_step(ctx, &steps[STEP_K2_1], main_stream, 1, workspaces[STEP_K2_1]);
    if (status == CVF_STATUS_SUCCESS)
        status = run_step(ctx, &steps[STEP_K3], main_stream, 1, workspaces[STEP_K3]);
    if (status == CVF_STATUS_SUCCESS)
        status = run_step(ctx, &steps[STEP_K1], main_stream, 0, workspaces[STEP_K1]);
    cvf_status linked = link_lanes(ctx, main_stream, EVENT_K1, 0, 2);
    if (status == CVF_STATUS_SUCCESS && linked == CVF_STATUS_SUCCESS)
        status = run_step(ctx, &steps[STEP_K2_2], main_stream, 2, workspaces[STEP_K2_2]);
    if (status == CVF_STATUS_SUCCESS && linked == CVF_STATUS_SUCCESS)
        status = run_step(ctx, &steps[STEP_K2_3], main_stream, 0, workspaces[STEP_K2_3]);
    cvf_status joined = link_lanes(ctx, main_stream, EVENT_LANE1, 1, 0);
    cvf_status joined2 = link_lanes(ctx, main_stream, EVENT_LANE2, 2, 0); /* even if the first failed */
    if (joined == CVF_STATUS_SUCCESS)
        joined = joined2;
    if (status == CVF_STATUS_SUCCESS)
        status = linked != CVF_STATUS_SUCCESS ? linked : joined;
    return status;
}

/* grad_fc1_output's view (data NULL): S x I of dtype, rows padded to 16 bytes. */
bool intermediate_view(int64_t s, int64_t i, cvf_dtype dtype, cvf_matrix *view, size_t *bytes)
{
    int64_t per_16 = (int64_t)(16 / cvf_dtype_size(dtype));
    int64_t ld = i > 0 ? (i + per_16 - 1) / per_16 * per_16 : 1;
    int64_t elements;
    if (__builtin_mul_overflow(s, ld, &elements) ||
        __builtin_mul_overflow((size_t)elements, cvf_dtype_size(dtype), bytes) || *bytes > SIZE_MAX / 4)
        return false;
    *view = cvf_matrix_row_major(NULL, dtype, s, i);
    view->row_stride = ld;
    *bytes = cvf_round_up_64(*bytes);
    return true;
}

} /* namespace */

extern "C" cvf_dtype cvf_cuda_mlp_intermediate_dtype(cvf_dtype storage)
{
    return storage == CVF_F16 || storage == CVF_BF16 ? storage : CVF_F32;
}

extern "C" void cvf_cuda_mlp_schedule(const cvf_context *ctx, cvf_mlp_step *steps, int count)
{
    const bool serial = serial_requested();
    for (int i = 0; i < count; i++) {
        cvf_kernel_info *k = &steps[i].info;
        const cvf_mlp_step *s = &steps[i];
        k->stream = lane_of(i, serial);
        if (k->kind == CVF_KERNEL_REDUCTION) {
            k->engine = "column sums (64-row slabs, then the slabs added in a fixed order)";
            k->splits = 1;
            continue;
        }
        bool fast = ctx->cuda.fast && ctx->cuda.sync && s->a.dtype == s->b.dtype &&
                    (s->a.dtype == CVF_F16 || s->a.dtype == CVF_BF16);
        int64_t m = s->c.rows, n = s->c.cols;
        if (fast) {
            k->engine = "sm90 TMA + wgmma, warp-specialised, persistent with dynamic tiles";
            k->tile_m = CVF_CUDA_SM90_TILE_M;
            k->tile_n = CVF_CUDA_SM90_TILE_N;
            k->tile_k = CVF_CUDA_SM90_TILE_K;
            k->splits = cvf_cuda_sm90_splits(ctx, m, n, s->a.cols);
        } else {
            k->engine = "simple (any dtype and strides)";
            k->tile_m = CVF_CUDA_SIMPLE_SLAB;
            k->tile_n = 32;
            k->tile_k = 1;
            k->splits = 1;
        }
        int64_t tiles = ((m + k->tile_m - 1) / k->tile_m) * ((n + k->tile_n - 1) / k->tile_n);
        k->units = tiles * k->splits;
    }
}

extern "C" cvf_status cvf_cuda_mlp_backward(cvf_context *ctx, const cvf_mlp_backward_args *args)
{
    const int64_t s = args->grad_output.rows, i = args->fc1_weight.rows;
    cvf_matrix grad_fc1_output;
    size_t held;
    if (!intermediate_view(s, i, cvf_cuda_mlp_intermediate_dtype(args->grad_output.dtype), &grad_fc1_output, &held))
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "grad_fc1_output workspace: S x I = %lld x %lld overflows",
                        (long long)s, (long long)i);
    cvf_mlp_step steps[CVF_PLAN_MAX_KERNELS];
    int count = cvf_mlp_backward_steps(args, &grad_fc1_output, steps);
    if (count != STEP_COUNT)
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "mlp backward: the core planned %d steps, expected %d", count,
                        (int)STEP_COUNT);
    size_t offsets[STEP_COUNT], total = held;
    for (int k = 0; k < STEP_COUNT; k++) {
        size_t bytes = cvf_round_up_64(cvf_mlp_step_workspace(ctx, &steps[k]));
        if (bytes > SIZE_MAX / 4 - total)
            return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW, "mlp backward: workspace size overflows");
        offsets[k] = total;
        total += bytes;
    }
    void *workspace;
    cvf_status status =
        cvf_workspace_reserve(ctx, total, "mlp backward (grad_fc1_output + per-kernel scratch)", &workspace);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    grad_fc1_output.data = workspace;
    cvf_mlp_backward_steps(args, &grad_fc1_output, steps);
    void *workspaces[STEP_COUNT];
    for (int k = 0; k < STEP_COUNT; k++)
        workspaces[k] = (char *)workspace + offsets[k];
    const bool serial = serial_requested() || !ensure_lanes(ctx);
    return run_lanes(ctx, steps, workspaces, serial);
}

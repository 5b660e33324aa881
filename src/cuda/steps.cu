/*
 * The MLP's steps on the GPU: the core composes them (cvf_mlp_forward_steps /
 * cvf_mlp_backward_steps); this file gives each its lane and runs the list.
 *
 * Lanes (the backward; the forward's two steps depend on each other and stay on lane 0):
 *
 *   side lane 1 (high priority):  ┌─ K2-1 ─ K3 ───────────────────────┐
 *   context stream (lane 0):    fork ─ K1 ──────── K2-3 ───────── join(lane 1, lane 2)
 *   side lane 2 (high priority):        └(K1 done)─ K2-2 ───────────┘
 *
 * A tensor-parallel backward over NCCL (args.tp.nccl_comm) orders K2-3 first and all-reduces its
 * grad_hidden_state on lane 3 while the weight gradients, which do not feed it, compute:
 *
 *   side lane 1:             ┌─ K3 ──────────(K2-3 done)─ K2-1 ──────┐
 *   lane 0:                fork ─ K1 ─ K2-3 ─────────────────────── join(lanes 1, 2, 3)
 *   side lane 2:                          └(K2-3 done)─ K2-2 ──────┤
 *   side lane 3 (NCCL):                   └(K2-3 done)─ all-reduce ┘
 *
 * The all-reduce is enqueued first of the three it releases (its few CTAs start before the GEMMs
 * take the SMs); the forward's all-reduce of output follows fc2 on lane 0. The measuring runs of a
 * first call leave the all-reduces out: every rank communicates exactly once per call, in the last
 * run, whatever each rank measured.
 *
 * K2-1 and K3 read only inputs, so they start with K1; K2-2 and K2-3 read K1's grad_fc1_output
 * (their needs). The weight gradients K2-1 and K2-2 have few output tiles with a long K (S): each
 * of their CTAs runs for the whole kernel. Among the steps whose needs are met, side-lane steps
 * are enqueued first (and the side streams have the highest priority), so their CTAs take SMs
 * first and the many short tiles of K1 and K2-3 fill the others.
 *
 * Every lane forks from an event recorded on the context's stream and the context's stream waits
 * for every lane before the call returns: to the caller the whole call is one ordered piece of
 * work on its stream, like a single kernel (it can be captured into a CUDA graph).
 *
 * The first call with a GEMM whose engine is not decided yet runs its steps one after another
 * on the context's stream, measuring each undecided GEMM's candidates (engines.cu) without the
 * other lanes' kernels in the timings.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.cuh"

namespace {

/* The lane a step runs on (see the diagram). */
int32_t lane_of(const cvf_cuda_state *st, cvf_step_id id)
{
    if (st->serial)
        return 0;
    switch (id) {
    case CVF_STEP_K2_1:
    case CVF_STEP_K3: return 1;
    case CVF_STEP_K2_2: return 2;
    case CVF_STEP_AR_GRAD_HIDDEN: return 3;
    default: return 0;
    }
}

/* The stream of lane (0: the context's own). */
cudaStream_t lane_stream(const cvf_context *ctx, int32_t lane)
{
    return (cudaStream_t)(lane == 0 ? ctx->stream : cvf_cuda_state_of(ctx)->side_streams[lane - 1]);
}

/* Runs one step on a launch; a failure's message names the step. */
cvf_status run_step(cvf_context *ctx, const cvf_mlp_step *step, cvf_cuda_launch launch, void *workspace,
                    bool may_time)
{
    cvf_status status = step->info.kind == CVF_KERNEL_ALL_REDUCE ? cvf_cuda_all_reduce(ctx, launch, step)
                        : step->info.kind == CVF_KERNEL_REDUCTION
                            ? cvf_cuda_column_sum_on(ctx, launch, &step->a, &step->out, workspace)
                            : cvf_cuda_gemm(ctx, launch, &step->a, &step->b, &step->c, &step->epilogue, workspace,
                                            may_time);
    if (status != CVF_STATUS_SUCCESS)
        cvf_mlp_step_failed(ctx, step);
    return status;
}

/* True for a GEMM step (one whose engine is chosen). */
bool is_gemm(const cvf_mlp_step *step)
{
    return step->info.kind == CVF_KERNEL_GEMM || step->info.kind == CVF_KERNEL_FUSED_GEMM;
}

/* True for a tensor-parallel all-reduce step. */
bool is_comm(const cvf_mlp_step *step)
{
    return step->info.kind == CVF_KERNEL_ALL_REDUCE;
}

/* True when every GEMM of the list has its engine decided (a run would measure nothing). */
bool all_decided(const cvf_context *ctx, const cvf_mlp_step *steps, int count)
{
    for (int i = 0; i < count; i++)
        if (is_gemm(&steps[i]) &&
            !cvf_cuda_gemm_decided(ctx, &steps[i].a, &steps[i].b, &steps[i].c, &steps[i].epilogue))
            return false;
    return true;
}

/* The next step to enqueue: the first whose needs are done, an all-reduce first, then side lanes;
 * -1 when none. */
int next_step(const cvf_cuda_state *st, const cvf_mlp_step *steps, int count, uint32_t done)
{
    int pick = -1, side = -1;
    for (int i = 0; i < count; i++) {
        if (done & (1u << i) || (steps[i].needs & ~done))
            continue;
        if (is_comm(&steps[i]))
            return i;
        if (lane_of(st, steps[i].id) != 0 && side < 0)
            side = i;
        if (pick < 0)
            pick = i;
    }
    return side >= 0 ? side : pick;
}

/* True when a step on another lane than step i's needs it. */
bool needed_elsewhere(const cvf_cuda_state *st, const cvf_mlp_step *steps, int count, int i)
{
    for (int j = 0; j < count; j++)
        if ((steps[j].needs & (1u << i)) && lane_of(st, steps[j].id) != lane_of(st, steps[i].id))
            return true;
    return false;
}

/* True when some step of the list runs on a side lane (the backward on lanes, not the forward nor
 * a serial context): its GEMMs then keep whole tiles (cvf_cuda_launch.beside). */
bool uses_side_lanes(const cvf_cuda_state *st, const cvf_mlp_step *steps, int count)
{
    for (int i = 0; i < count; i++)
        if (lane_of(st, steps[i].id) != 0)
            return true;
    return false;
}

/* Orders step i after its needs on other lanes (their done events) and, on a side lane used
 * for the first time, after the fork. */
cudaError_t order_step(const cvf_context *ctx, const cvf_mlp_step *steps, int i, bool forked[4])
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    const int32_t lane = lane_of(st, steps[i].id);
    cudaStream_t stream = lane_stream(ctx, lane);
    cudaError_t err = cudaSuccess;
    if (!forked[lane]) {
        err = cudaStreamWaitEvent(stream, (cudaEvent_t)st->fork_event, 0);
        forked[lane] = true;
    }
    for (int d = 0; d < CVF_CUDA_STEP_EVENTS && err == cudaSuccess; d++)
        if ((steps[i].needs & (1u << d)) && lane_of(st, steps[d].id) != lane)
            err = cudaStreamWaitEvent(stream, (cudaEvent_t)st->step_events[d], 0);
    return err;
}

/* Enqueues the steps on their lanes (see the diagram); the all-reduces only when communicate
 * (else they count as done: a measuring run). The joins into the context's stream are enqueued
 * even after a failed step, so that nothing a side lane has queued is left unordered with the
 * caller's later work. */
cvf_status run_lanes(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *const *workspaces,
                     bool communicate)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    bool forked[4] = {true, false, false, false};
    const int32_t beside = uses_side_lanes(st, steps, count);
    cudaError_t err = cudaEventRecord((cudaEvent_t)st->fork_event, lane_stream(ctx, 0));
    cvf_status status = cvf_cuda_check(ctx, err, "mlp: forking the side streams");
    uint32_t done = 0;
    while (status == CVF_STATUS_SUCCESS) {
        int i = next_step(st, steps, count, done);
        if (i < 0)
            break;
        if (is_comm(&steps[i]) && !communicate) {
            done |= 1u << i;
            continue;
        }
        cvf_cuda_launch launch = {lane_stream(ctx, lane_of(st, steps[i].id)), lane_of(st, steps[i].id), beside};
        status = cvf_cuda_check(ctx, order_step(ctx, steps, i, forked), "mlp: ordering the side streams");
        if (status == CVF_STATUS_SUCCESS)
            status = run_step(ctx, &steps[i], launch, workspaces[i], false);
        if (status == CVF_STATUS_SUCCESS && needed_elsewhere(st, steps, count, i))
            status = cvf_cuda_check(ctx, cudaEventRecord((cudaEvent_t)st->step_events[i], (cudaStream_t)launch.stream),
                                    "mlp: recording a step's completion");
        done |= 1u << i;
    }
    for (int lane = 1; lane < 4; lane++) {
        if (!forked[lane])
            continue;
        cudaEvent_t joined = (cudaEvent_t)st->join_events[lane - 1];
        err = cudaEventRecord(joined, lane_stream(ctx, lane));
        if (err == cudaSuccess)
            err = cudaStreamWaitEvent(lane_stream(ctx, 0), joined, 0);
        cvf_status join = cvf_cuda_check(ctx, err, "mlp: joining the side streams");
        if (status == CVF_STATUS_SUCCESS)
            status = join;
    }
    return status;
}

/* Makes every GEMM step use its fastest engine of family (its fastest of all when the family has
 * none for it); engines[i] gets step i's engine. */
void prefer_family(cvf_context *ctx, const cvf_mlp_step *steps, int count, cvf_cuda_family family,
                   cvf_cuda_engine *engines)
{
    for (int i = 0; i < count; i++) {
        const cvf_mlp_step *s = &steps[i];
        engines[i] = CVF_CUDA_ENGINE_NONE;
        if (!is_gemm(s))
            continue;
        cvf_cuda_gemm_prefer(ctx, &s->a, &s->b, &s->c, &s->epilogue, CVF_CUDA_FAMILY_MEASURED, &engines[i]);
        cvf_cuda_gemm_prefer(ctx, &s->a, &s->b, &s->c, &s->epilogue, family, &engines[i]);
    }
}

/* The median time of three runs of the whole list on its lanes (after a warm-up), in ms; < 0
 * when a run fails. */
float time_lanes(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *const *workspaces)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    cudaEvent_t start = (cudaEvent_t)st->timing_events[0], stop = (cudaEvent_t)st->timing_events[1];
    if (run_lanes(ctx, steps, count, workspaces, false) != CVF_STATUS_SUCCESS)
        return -1.0f;
    float t[3];
    for (int r = 0; r < 3; r++) {
        cudaEventRecord(start, lane_stream(ctx, 0));
        cvf_status status = run_lanes(ctx, steps, count, workspaces, false);
        cudaEventRecord(stop, lane_stream(ctx, 0));
        if (status != CVF_STATUS_SUCCESS || cudaEventSynchronize(stop) != cudaSuccess ||
            cudaEventElapsedTime(&t[r], start, stop) != cudaSuccess) {
            cudaGetLastError();
            return -1.0f;
        }
    }
    float lo = fminf(t[0], fminf(t[1], t[2])), hi = fmaxf(t[0], fmaxf(t[1], t[2]));
    return t[0] + t[1] + t[2] - lo - hi;
}

/* After each GEMM of the list was measured on its own: the steps overlap on their lanes, where
 * the fastest engine of each alone is not always the fastest together (cuBLASLt's kernels hold
 * all SMs; ours take tiles dynamically). Times the whole list with each family (each GEMM's
 * fastest; ours only; cuBLASLt only) and keeps the fastest set. */
void choose_together(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *const *workspaces)
{
    static const cvf_cuda_family families[] = {CVF_CUDA_FAMILY_MEASURED, CVF_CUDA_FAMILY_OWN,
                                               CVF_CUDA_FAMILY_CUBLASLT};
    static const char *const choices[] = {"measured", "measured (the whole call: our kernels together)",
                                          "measured (the whole call: cuBLASLt together)"};
    cvf_cuda_engine engines[CVF_PLAN_MAX_KERNELS], best_engines[CVF_PLAN_MAX_KERNELS];
    float best = -1.0f;
    int best_family = 0;
    for (int f = 0; f < 3; f++) {
        prefer_family(ctx, steps, count, families[f], engines);
        float ms = time_lanes(ctx, steps, count, workspaces);
        if (getenv("CVF_DEBUG"))
            fprintf(stderr, "cvfuse: mlp steps together, engine family %d: %.4f ms\n", f, (double)ms);
        if (ms >= 0.0f && (best < 0.0f || ms < best * 0.98f)) { /* a clear win over the per-step choice */
            best = ms;
            best_family = f;
            memcpy(best_engines, engines, sizeof engines);
        }
    }
    if (best < 0.0f)
        return;
    for (int i = 0; i < count; i++)
        if (is_gemm(&steps[i]) && best_engines[i] != CVF_CUDA_ENGINE_NONE)
            cvf_cuda_gemm_set_engine(ctx, &steps[i].a, &steps[i].b, &steps[i].c, &steps[i].epilogue, best_engines[i],
                                     choices[best_family]);
}

} /* namespace */

extern "C" cvf_dtype cvf_cuda_mlp_intermediate_dtype(cvf_dtype storage)
{
    return storage == CVF_F16 || storage == CVF_BF16 ? storage : CVF_F32;
}

extern "C" void cvf_cuda_plan_steps(const cvf_context *ctx, cvf_mlp_step *steps, int count)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    for (int i = 0; i < count; i++) {
        cvf_mlp_step *s = &steps[i];
        cvf_kernel_info *k = &s->info;
        k->stream = lane_of(st, s->id);
        if (k->kind == CVF_KERNEL_ALL_REDUCE) {
            k->engine = "NCCL all-reduce (sum, in place)";
            continue;
        }
        if (k->kind == CVF_KERNEL_REDUCTION) {
            k->engine = "column sums (64-row slabs, then the slabs added in a fixed order)";
            k->splits = 1;
            continue;
        }
        cvf_cuda_gemm_describe(ctx, uses_side_lanes(st, steps, count), &s->a, &s->b, &s->c, &s->epilogue, k);
    }
}

extern "C" cvf_status cvf_cuda_run_steps(cvf_context *ctx, const cvf_mlp_step *steps, int count,
                                         void *const *workspaces)
{
    if (count > CVF_CUDA_STEP_EVENTS)
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "mlp: %d steps, at most %d expected", count,
                        CVF_CUDA_STEP_EVENTS);
    if (all_decided(ctx, steps, count))
        return run_lanes(ctx, steps, count, workspaces, true);
    /* The first call of these keys: one after another on the context's stream, measuring each
     * GEMM; then the engine sets are compared on the lanes, and the last of those runs leaves the
     * outputs (every run writes all of them). */
    for (int i = 0; i < count; i++) {
        if (is_comm(&steps[i]))
            continue;
        cvf_status status = run_step(ctx, &steps[i], cvf_cuda_main_launch(ctx), workspaces[i], true);
        if (status != CVF_STATUS_SUCCESS)
            return status;
    }
    if (all_decided(ctx, steps, count) && !cvf_cuda_state_of(ctx)->serial)
        choose_together(ctx, steps, count, workspaces);
    return run_lanes(ctx, steps, count, workspaces, true);
}

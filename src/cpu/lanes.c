/*
 * The CPU's MLP step runner: independent GEMMs at the same time, each on part of the threads.
 *
 * At 16 threads one GEMM of the MLP backward (S = 2048) keeps its threads busy well under all of
 * the time (its B-block barriers, the balance of few panels, the pool's hand-offs), so two that do
 * not depend on each other — K1 and K2-1, then K2-2 and K2-3, which both read K1's grad_fc1_output
 * — may run side by side on two lanes: pools of their own of t - t/2 and t/2 threads, the heavier
 * step (by FLOPs; on a tie the one listed first, K1) on the first, whose caller is the calling
 * thread, the other driven by a helper thread. Whatever is left (K3's column sums, the forward's
 * chain) runs on the context's pool. Each step plans for its lane's thread count, its scratch sized
 * for any lane (cvf_cpu_step_workspace), and the results the contract pins do not depend on the
 * thread count (the bias-gradient sums are bit-identical across threads; test_ops checks them on
 * lanes too).
 *
 * Off unless CVF_CPU_LANES=1 when the context is created (and it has 2 threads or more): on the
 * 16-core Xeon host the pairs took as long as the steps one after another (bench/cpu_mlp_pairs.c,
 * PERF.md 2026-12-07, tenth session), so it stays an option. The lane pools are made at the first
 * pair and kept with the context; if they cannot be made, or the helper thread cannot start, the
 * steps run one after another. Without lanes the core runs the steps itself (cvf_cpu_steps_overlap
 * says no). A context with lanes lays out scratch per step, for the whole pool and both lanes (the
 * backward's workspace at S = 2048, H = 768, I = 3072: f32 1.2-1.4x, bf16 2.2-2.3x; PERF.md
 * 2026-12-07), and a weight gradient planned for a lane's threads may differ in its last bits from
 * the same call without lanes (within the contract; the bias-gradient sums do not).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "cpu/cpu.h"

/* The lanes of one context (ctx->backend_state). */
typedef struct cpu_lanes {
    bool enabled;            /* CVF_CPU_LANES=1 when the context was made */
    bool tried;              /* made (or tried to make) the pools */
    cvf_threadpool *pool[2]; /* NULL until the first pair, or where they could not be made */
    int64_t pairs;           /* pairs run (cvf_cpu_lanes_pairs, for the tests) */
} cpu_lanes;

/* The threads of lane i of a context of threads threads: t - t/2, then t/2. */
static int32_t lane_threads(int32_t threads, int i)
{
    return i == 0 ? threads - threads / 2 : threads / 2;
}

bool cvf_cpu_steps_overlap(const cvf_context *ctx)
{
    const cpu_lanes *l = ctx->backend_state;
    return l && l->enabled && ctx->threads >= 2;
}

int64_t cvf_cpu_lanes_pairs(const cvf_context *ctx)
{
    const cpu_lanes *l = ctx->backend_state;
    return l ? l->pairs : 0;
}

cvf_status cvf_cpu_init(cvf_context *ctx, const cvf_context_options *options, char *why, size_t size)
{
    (void)options;
    cpu_lanes *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(why, size, "could not allocate the CPU backend's state");
        return CVF_STATUS_OUT_OF_MEMORY;
    }
    const char *v = getenv("CVF_CPU_LANES"); /* read once, like every CVF_CPU_* switch */
    l->enabled = v && strcmp(v, "1") == 0;
    ctx->backend_state = l;
    return CVF_STATUS_SUCCESS;
}

void cvf_cpu_release(cvf_context *ctx)
{
    cpu_lanes *l = ctx->backend_state;
    if (!l)
        return;
    cvf_threadpool_destroy(l->pool[0]);
    cvf_threadpool_destroy(l->pool[1]);
    free(l);
    ctx->backend_state = NULL;
}

/* A context that plans and runs on lane i of ctx: ctx's backend and settings with the lane's thread
 * count and pool (NULL while only planning) and a message buffer of its own. */
static cvf_context lane_context(const cvf_context *ctx, int i, cvf_threadpool *pool)
{
    cvf_context lane = *ctx;
    lane.backend_state = NULL;
    lane.threads = lane_threads(ctx->threads, i);
    lane.pool = pool;
    lane.workspace = NULL;
    lane.workspace_size = 0;
    lane.message[0] = '\0';
    return lane;
}

/* Whether a step is a GEMM (what the lanes pair), not a reduction or an all-reduce. */
static bool is_gemm(const cvf_mlp_step *step)
{
    return step->info.kind == CVF_KERNEL_FUSED_GEMM || step->info.kind == CVF_KERNEL_GEMM;
}

size_t cvf_cpu_step_workspace(const cvf_context *ctx, const cvf_mlp_step *step)
{
    size_t bytes = 0; /* what a GEMM step needs on either lane (the core adds the whole pool's) */
    if (is_gemm(step))
        for (int i = 0; i < 2; i++) {
            cvf_context lane = lane_context(ctx, i, NULL);
            size_t need = cvf_cpu_matmul_workspace(&lane, &step->a, &step->b, &step->c, &step->epilogue);
            bytes = need > bytes ? need : bytes;
        }
    return bytes;
}

/* Makes the lane pools at the first pair; returns whether both exist. */
static bool lanes_ready(cvf_context *ctx)
{
    cpu_lanes *l = ctx->backend_state;
    if (!l)
        return false;
    if (!l->tried) {
        l->tried = true;
        /* the lanes spin between their jobs like the context's pool (the same CPUs, fewer threads each) */
        const int64_t spin_ns = cvf_threadpool_spin_ns(ctx->pool);
        for (int i = 0; i < 2; i++)
            l->pool[i] = cvf_threadpool_create(lane_threads(ctx->threads, i), spin_ns);
        if (!l->pool[0] || !l->pool[1]) {
            cvf_threadpool_destroy(l->pool[0]);
            cvf_threadpool_destroy(l->pool[1]);
            l->pool[0] = l->pool[1] = NULL;
        }
    }
    return l->pool[0] != NULL;
}

/* One step on a lane, for the helper thread. */
typedef struct lane_job {
    cvf_context *lane;
    const cvf_mlp_step *step;
    void *workspace;
    cvf_status status;
} lane_job;

static void *run_lane_job(void *arg)
{
    lane_job *job = arg;
    job->status = cvf_mlp_run_step(job->lane, job->step, job->workspace);
    return NULL;
}

/* Runs steps x (the heavier) and y side by side on the two lanes (the context's pool parked first);
 * a failure's status, with its message in ctx. Where the helper thread cannot start, one after
 * another on the lanes. The lanes' workers go on spinning for the next pair: lanes_park. */
static cvf_status run_pair(cvf_context *ctx, const cvf_mlp_step *x, void *wx, const cvf_mlp_step *y, void *wy)
{
    cpu_lanes *l = ctx->backend_state;
    cvf_context lane0 = lane_context(ctx, 0, l->pool[0]), lane1 = lane_context(ctx, 1, l->pool[1]);
    cvf_threadpool_park(ctx->pool); /* its workers may still spin from the last job: free their CPUs */
    lane_job jx = {&lane0, x, wx, CVF_STATUS_SUCCESS}, jy = {&lane1, y, wy, CVF_STATUS_SUCCESS};
    pthread_t helper;
    const bool beside = pthread_create(&helper, NULL, run_lane_job, &jy) == 0;
    run_lane_job(&jx);
    if (beside)
        pthread_join(helper, NULL);
    else
        run_lane_job(&jy);
    const lane_job *failed = jx.status != CVF_STATUS_SUCCESS ? &jx : jy.status != CVF_STATUS_SUCCESS ? &jy : NULL;
    return failed ? cvf_fail(ctx, failed->status, "%s", failed->lane->message) : CVF_STATUS_SUCCESS;
}

/* Ends the lanes' spinning (before the context's pool runs again, and at the end of the steps, so
 * that they do not hold CPUs that the caller's next work needs). */
static void lanes_park(cvf_context *ctx)
{
    cpu_lanes *l = ctx->backend_state;
    cvf_threadpool_park(l->pool[0]);
    cvf_threadpool_park(l->pool[1]);
}

cvf_status cvf_cpu_run_steps(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *const *workspaces)
{
    bool lanes_spinning = false;
    cvf_status status = CVF_STATUS_SUCCESS;
    uint32_t done = 0;
    const uint32_t all = count >= 32 ? UINT32_MAX : (UINT32_C(1) << count) - 1;
    while (done != all) {
        /* the first two ready GEMM steps, and the first ready step of any kind */
        int ready = -1, gemm[2] = {-1, -1};
        for (int i = 0; i < count; i++) {
            if (done & (UINT32_C(1) << i) || (steps[i].needs & ~done) != 0)
                continue;
            if (ready < 0)
                ready = i;
            if (is_gemm(&steps[i])) {
                if (gemm[0] < 0)
                    gemm[0] = i;
                else if (gemm[1] < 0)
                    gemm[1] = i;
            }
        }
        if (ready < 0) { /* needs that no step can meet: a composition error */
            status = cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "mlp: steps whose needs are never met");
            break;
        }
        /* distinct scratch (a step of no scratch, an empty product, shares its offset: not paired) */
        if (gemm[1] >= 0 && workspaces[gemm[0]] != workspaces[gemm[1]] && lanes_ready(ctx)) {
            int x = gemm[0], y = gemm[1];
            if (steps[y].info.flops > steps[x].info.flops) {
                x = gemm[1];
                y = gemm[0];
            }
            lanes_spinning = true;
            ((cpu_lanes *)ctx->backend_state)->pairs++;
            status = run_pair(ctx, &steps[x], workspaces[x], &steps[y], workspaces[y]);
            done |= (UINT32_C(1) << x) | (UINT32_C(1) << y);
        } else {
            if (lanes_spinning)
                lanes_park(ctx);
            lanes_spinning = false;
            status = cvf_mlp_run_step(ctx, &steps[ready], workspaces[ready]);
            done |= UINT32_C(1) << ready;
        }
        if (status != CVF_STATUS_SUCCESS)
            break;
    }
    if (lanes_spinning)
        lanes_park(ctx);
    return status;
}

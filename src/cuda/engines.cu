/*
 * Which engine runs a GEMM on the GPU: the seed's rule "fuse only where it pays", decided by
 * measurement.
 *
 * Candidates for c = epilogue(a @ b):
 *   sm90            our Hopper kernel, every epilogue fused on the accumulator registers;
 *   cublaslt        cuBLASLt, when the epilogue is plain or only a bias its BIAS epilogue adds;
 *   cublaslt+pass   cuBLASLt's plain product stored in C's dtype, then our epilogue pass over C
 *                   (bias, aux_out, activation, column sums): the unfused form;
 *   simple          the portable kernel, only when no other engine can take the call.
 *
 * The choice is made per key (shapes, dtypes, layouts, alignment, epilogue; never the data
 * pointers themselves) the first time a key is seen on a context: every eligible engine runs a
 * few times on the call's own buffers on its stream (the outputs are written again by the real
 * run), the fastest median wins, and the result is cached in the context. Later calls do no
 * timing, no allocation and no synchronisation. While the stream is being captured into a CUDA
 * graph, or with CVF_CUDA_AUTOTUNE=0, a fixed heuristic decides (and nothing is cached from a
 * capture). CVF_CUDA_ENGINE=own|cublaslt|unfused forces a family. A given engine's results are
 * bit-identical run to run.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.cuh"

namespace {

constexpr int CACHE_ENTRIES = 64;
constexpr int TIMED_RUNS = 5;

/* What decides the engine of a GEMM: everything about the call but the data pointers. */
struct gemm_key {
    int64_t m, n, k;
    int64_t strides[10]; /* a, b, c, aux_in, aux_out: row, col */
    int64_t bias_stride;
    int32_t dtypes[6]; /* a, b, c, aux_in, aux_out, bias (-1 absent) */
    int32_t activation;
    int32_t bias_grad;
    int32_t aligned; /* bit per pointer: 16-byte aligned */
};

struct cache_entry {
    bool used;
    bool decided; /* engine is final (measured, forced, only one): no more timing for this key */
    gemm_key key;
    cvf_cuda_engine engine;
    const char *choice;
    int candidate_count;
    cvf_engine_time candidates[CVF_PLAN_MAX_CANDIDATES]; /* name and time, for plans */
    cvf_cuda_engine candidate_engines[CVF_PLAN_MAX_CANDIDATES];
    cvf_lt_plan *lt; /* made at the first cuBLASLt run of this key */
    bool lt_failed;
};

struct engine_cache {
    cache_entry entries[CACHE_ENTRIES];
    int next;
};

/* Adds a matrix's dtype, strides and alignment to the key. */
void key_matrix(gemm_key *key, int slot, const cvf_matrix *m)
{
    key->dtypes[slot] = m ? (int32_t)m->dtype : -1;
    key->strides[2 * slot] = m ? m->row_stride : 0;
    key->strides[2 * slot + 1] = m ? m->col_stride : 0;
    if (m && (uintptr_t)m->data % 16 == 0)
        key->aligned |= 1 << slot;
}

gemm_key make_key(const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep)
{
    gemm_key key;
    memset(&key, 0, sizeof key); /* padding too: keys are compared with memcmp */
    key.m = c->rows;
    key.n = c->cols;
    key.k = a->cols;
    key_matrix(&key, 0, a);
    key_matrix(&key, 1, b);
    key_matrix(&key, 2, c);
    key_matrix(&key, 3, ep->aux_in);
    key_matrix(&key, 4, ep->aux_out);
    key.dtypes[5] = ep->bias ? (int32_t)ep->bias->dtype : -1;
    key.bias_stride = ep->bias ? ep->bias->stride : 0;
    if (ep->bias && (uintptr_t)ep->bias->data % 16 == 0)
        key.aligned |= 1 << 5;
    key.activation = (int32_t)ep->activation;
    key.bias_grad = ep->bias_grad != NULL;
    return key;
}

engine_cache *cache_of(const cvf_context *ctx)
{
    return (engine_cache *)cvf_cuda_state_of(ctx)->engine_cache;
}

cache_entry *cache_find(const cvf_context *ctx, const gemm_key &key)
{
    engine_cache *cache = cache_of(ctx);
    if (!cache)
        return NULL;
    for (int i = 0; i < CACHE_ENTRIES; i++)
        if (cache->entries[i].used && memcmp(&cache->entries[i].key, &key, sizeof key) == 0)
            return &cache->entries[i];
    return NULL;
}

/* A fresh entry for key (the oldest is evicted when the cache is full); NULL without a cache. */
cache_entry *cache_add(const cvf_context *ctx, const gemm_key &key)
{
    engine_cache *cache = cache_of(ctx);
    if (!cache)
        return NULL;
    cache_entry *e = &cache->entries[cache->next];
    cache->next = (cache->next + 1) % CACHE_ENTRIES;
    cvf_lt_plan_destroy(e->lt);
    memset(e, 0, sizeof *e);
    e->used = true;
    e->key = key;
    e->choice = "";
    return e;
}

/* True when cuBLASLt's product rounded to C's dtype, with the rest of the epilogue in our pass,
 * keeps the contract's error bound: the bias must be added by cuBLASLt before that rounding
 * (else a small x = acc + bias would carry acc's rounding error), and after it only what does
 * not amplify a relative error: ReLU, x * gelu'(aux_in), stores of x itself in C's dtype, sums.
 * A GELU of the rounded x (its slope at negative x) would not: that runs fused, unless C is f32. */
bool pass_keeps_contract(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                         const cvf_epilogue *ep)
{
    if (c->dtype == CVF_F32) /* the product is kept in fp32: the pass is the fused arithmetic */
        return true;
    if (ep->bias && !cvf_lt_eligible(ctx, a, b, c, ep, true))
        return false;
    if (ep->aux_out && ep->aux_out->dtype != c->dtype)
        return false;
    return ep->activation == CVF_ACTIVATION_NONE || ep->activation == CVF_ACTIVATION_RELU ||
           ep->activation == CVF_ACTIVATION_DGELU_TANH || ep->activation == CVF_ACTIVATION_DGELU_ERF;
}

/* The engines that can run the call, best first by the heuristic's order. */
int eligible_engines(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                     const cvf_epilogue *ep, cvf_cuda_engine *out)
{
    int count = 0;
    if (cvf_cuda_state_of(ctx)->simple_only) {
        out[count++] = CVF_CUDA_ENGINE_SIMPLE;
        return count;
    }
    const bool plain = !cvf_cuda_epilogue_needed(ep);
    const bool bias_only = ep->activation == CVF_ACTIVATION_NONE && !ep->aux_out && !ep->bias_grad && !ep->aux_in;
    if (plain ? cvf_lt_eligible(ctx, a, b, c, ep, false)
              : (bias_only && cvf_lt_eligible(ctx, a, b, c, ep, true)) || cvf_lt_fuses_gelu(ctx, a, b, c, ep))
        out[count++] = CVF_CUDA_ENGINE_LT;
    else if (cvf_lt_eligible(ctx, a, b, c, ep, false) && pass_keeps_contract(ctx, a, b, c, ep))
        out[count++] = CVF_CUDA_ENGINE_LT_PASS;
    if (cvf_cuda_sm90_eligible(ctx, a, b, c))
        out[count++] = CVF_CUDA_ENGINE_SM90;
    if (count == 0)
        out[count++] = CVF_CUDA_ENGINE_SIMPLE;
    return count;
}

/* The candidates the context's policy lets it choose from (at least one: simple is always
 * eligible when nothing else is). */
int allowed_engines(const cvf_context *ctx, const cvf_cuda_engine *eligible, int count, cvf_cuda_engine *out)
{
    const cvf_cuda_engine_policy policy = cvf_cuda_state_of(ctx)->policy;
    int kept = 0;
    for (int i = 0; i < count; i++) {
        const cvf_cuda_engine e = eligible[i];
        const bool lt = e == CVF_CUDA_ENGINE_LT || e == CVF_CUDA_ENGINE_LT_PASS;
        if (policy == CVF_CUDA_POLICY_AUTO || (policy == CVF_CUDA_POLICY_OWN && !lt) ||
            (policy == CVF_CUDA_POLICY_CUBLASLT && lt) || (policy == CVF_CUDA_POLICY_UNFUSED && lt))
            out[kept++] = e;
    }
    if (kept == 0) /* the policy's family cannot take it: our own kernels */
        for (int i = 0; i < count; i++)
            if (eligible[i] == CVF_CUDA_ENGINE_SM90 || eligible[i] == CVF_CUDA_ENGINE_SIMPLE)
                out[kept++] = eligible[i];
    if (kept == 0)
        out[kept++] = CVF_CUDA_ENGINE_SIMPLE;
    return kept;
}

/* Bytes of bias-gradient partials: one fp32 row of C's width per 16-row slab (the smallest slab
 * of any engine, so the size bounds them all). */
size_t partial_bytes(const cvf_matrix *c, const cvf_epilogue *ep)
{
    if (!ep->bias_grad)
        return 0;
    size_t slabs = (size_t)((c->rows + CVF_CUDA_SM90_SLAB - 1) / CVF_CUDA_SM90_SLAB);
    return cvf_round_up_256(sizeof(float) * slabs * (size_t)c->cols);
}

/* Bytes of the Hopper kernel's exchange of pieces for this product alone on its stream (0 when it
 * runs whole tiles; beside other lanes it runs whole tiles and needs none). */
size_t split_bytes(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *c)
{
    if (!cvf_cuda_state_of(ctx)->fast)
        return 0;
    return cvf_round_up_256(
        cvf_cuda_sm90_schedule(cvf_cuda_state_of(ctx)->sm_count, c->rows, c->cols, a->cols, false).split_bytes);
}

/* The cuBLASLt plan of the entry (made once; the plain product for the unfused engine). */
const cvf_lt_plan *entry_lt(const cvf_context *ctx, cache_entry *e, cvf_cuda_engine engine, const cvf_matrix *a,
                            const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep)
{
    if (e && e->lt)
        return e->lt;
    if (e && e->lt_failed)
        return NULL;
    /* The bias rides in cuBLASLt's epilogue whenever it can (for the pass too: added before the
     * product's one rounding). */
    const bool with_bias = ep->bias && cvf_lt_eligible(ctx, a, b, c, ep, true);
    const bool with_gelu = engine == CVF_CUDA_ENGINE_LT && cvf_lt_fuses_gelu(ctx, a, b, c, ep);
    cvf_lt_plan *plan = cvf_lt_plan_create(ctx, a, b, c, ep, with_bias, with_gelu);
    if (e) {
        e->lt = plan;
        e->lt_failed = plan == NULL;
    }
    return plan;
}

/* Runs the GEMM on one engine. The workspace holds the bias-gradient partials, then the split-K
 * exchange or cuBLASLt's workspace. */
cvf_status run_engine(cvf_context *ctx, cvf_cuda_launch launch, cache_entry *e, cvf_cuda_engine engine,
                      const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep,
                      void *workspace)
{
    float *partials = ep->bias_grad ? (float *)workspace : NULL;
    char *rest = (char *)workspace + partial_bytes(c, ep);
    switch (engine) {
    case CVF_CUDA_ENGINE_SM90:
        return cvf_cuda_sm90_matmul(ctx, launch, a, b, c, ep, partials, (float *)rest);
    case CVF_CUDA_ENGINE_LT:
    case CVF_CUDA_ENGINE_LT_PASS: {
        const cvf_lt_plan *plan = entry_lt(ctx, e, engine, a, b, c, ep);
        if (!plan)
            return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "cuBLASLt found no algorithm for this product");
        cvf_status status = cvf_lt_run(ctx, launch, plan, a, b, c, ep, rest);
        cvf_epilogue rest = *ep; /* what the pass still has to do */
        if (cvf_lt_plan_adds_bias(plan))
            rest.bias = NULL;
        if (!e) /* no cache to keep it in (the descriptors are read when the call is enqueued) */
            cvf_lt_plan_destroy(const_cast<cvf_lt_plan *>(plan));
        if (status == CVF_STATUS_SUCCESS && engine == CVF_CUDA_ENGINE_LT_PASS)
            status = cvf_cuda_epilogue_pass(ctx, launch, c, &rest, partials);
        return status;
    }
    default: return cvf_cuda_simple_matmul(ctx, launch, a, b, c, ep, partials);
    }
}

/* The median of TIMED_RUNS runs of one engine after a warm-up run, in ms; < 0 when it fails. */
float time_engine(cvf_context *ctx, cvf_cuda_launch launch, cache_entry *e, cvf_cuda_engine engine,
                  const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep,
                  void *workspace)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    cudaEvent_t start = (cudaEvent_t)st->timing_events[0], stop = (cudaEvent_t)st->timing_events[1];
    cudaStream_t stream = (cudaStream_t)launch.stream;
    if (run_engine(ctx, launch, e, engine, a, b, c, ep, workspace) != CVF_STATUS_SUCCESS)
        return -1.0f;
    float times[TIMED_RUNS];
    for (int r = 0; r < TIMED_RUNS; r++) {
        cudaEventRecord(start, stream);
        cvf_status status = run_engine(ctx, launch, e, engine, a, b, c, ep, workspace);
        cudaEventRecord(stop, stream);
        if (status != CVF_STATUS_SUCCESS || cudaEventSynchronize(stop) != cudaSuccess ||
            cudaEventElapsedTime(&times[r], start, stop) != cudaSuccess) {
            cudaGetLastError();
            return -1.0f;
        }
    }
    for (int i = 1; i < TIMED_RUNS; i++) /* insertion sort: five values */
        for (int j = i; j > 0 && times[j] < times[j - 1]; j--) {
            float t = times[j];
            times[j] = times[j - 1];
            times[j - 1] = t;
        }
    return times[TIMED_RUNS / 2];
}

/* True when work on the launch's stream is being captured into a graph (no timing then). */
bool capturing(cvf_cuda_launch launch)
{
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)launch.stream, &status) != cudaSuccess) {
        cudaGetLastError();
        return true; /* unknown: do not synchronise */
    }
    return status != cudaStreamCaptureStatusNone;
}

/* Times a cuBLASLt engine with each algorithm its heuristic offered, keeps the fastest in the
 * entry's plan and returns its time. */
float time_lt(cvf_context *ctx, cvf_cuda_launch launch, cache_entry *e, cvf_cuda_engine engine, const cvf_matrix *a,
              const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep, void *workspace)
{
    cvf_lt_plan *plan = const_cast<cvf_lt_plan *>(entry_lt(ctx, e, engine, a, b, c, ep));
    if (!plan)
        return -1.0f;
    float best = -1.0f;
    int best_algo = 0;
    for (int i = 0; i < cvf_lt_plan_algo_count(plan); i++) {
        cvf_lt_plan_use(plan, i);
        float ms = time_engine(ctx, launch, e, engine, a, b, c, ep, workspace);
        if (ms >= 0.0f && (best < 0.0f || ms < best)) {
            best = ms;
            best_algo = i;
        }
    }
    cvf_lt_plan_use(plan, best_algo);
    return best;
}

/* Times every candidate on the call's buffers and keeps the fastest in e. */
void measure(cvf_context *ctx, cvf_cuda_launch launch, cache_entry *e, const cvf_cuda_engine *cands, int count,
             const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep, void *workspace)
{
    float best = -1.0f;
    e->candidate_count = count < CVF_PLAN_MAX_CANDIDATES ? count : CVF_PLAN_MAX_CANDIDATES;
    for (int i = 0; i < e->candidate_count; i++) {
        const bool lt = cands[i] == CVF_CUDA_ENGINE_LT || cands[i] == CVF_CUDA_ENGINE_LT_PASS;
        float ms = lt ? time_lt(ctx, launch, e, cands[i], a, b, c, ep, workspace)
                      : time_engine(ctx, launch, e, cands[i], a, b, c, ep, workspace);
        e->candidates[i].engine = cvf_cuda_engine_name(cands[i]);
        e->candidates[i].ms = ms;
        e->candidate_engines[i] = cands[i];
        if (ms >= 0.0f && (best < 0.0f || ms < best)) {
            best = ms;
            e->engine = cands[i];
        }
    }
    e->choice = "measured";
    e->decided = best >= 0.0f;
    if (!e->decided) /* every candidate failed: keep the first and report its error on the run */
        e->engine = cands[0];
}

/* The entry of the call's key, with its engine decided as far as this call allows. */
cache_entry *choose(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                    const cvf_matrix *c, const cvf_epilogue *ep, void *workspace, bool may_time,
                    cvf_cuda_engine *engine)
{
    const gemm_key key = make_key(a, b, c, ep);
    cache_entry *e = cache_find(ctx, key);
    if (e && e->decided) {
        *engine = e->engine;
        return e;
    }
    cvf_cuda_engine eligible[CVF_CUDA_ENGINE_COUNT], cands[CVF_CUDA_ENGINE_COUNT];
    int count = allowed_engines(ctx, eligible, eligible_engines(ctx, a, b, c, ep, eligible), cands);
    if (!e)
        e = cache_add(ctx, key);
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    if (!e) { /* no cache: the heuristic, every time */
        *engine = cands[0];
        return NULL;
    }
    e->engine = cands[0];
    if (count == 1 || st->policy != CVF_CUDA_POLICY_AUTO || !st->autotune) {
        e->choice = count == 1 ? "only" : st->policy != CVF_CUDA_POLICY_AUTO ? "forced" : "heuristic";
        e->decided = true;
    } else if (may_time && !capturing(launch)) {
        measure(ctx, launch, e, cands, count, a, b, c, ep, workspace);
    } else {
        e->choice = "heuristic";
    }
    *engine = e->engine;
    return e;
}

} /* namespace */

const char *cvf_cuda_engine_name(cvf_cuda_engine engine)
{
    switch (engine) {
    case CVF_CUDA_ENGINE_SM90: return "sm90";
    case CVF_CUDA_ENGINE_LT: return "cublaslt";
    case CVF_CUDA_ENGINE_LT_PASS: return "cublaslt+pass";
    case CVF_CUDA_ENGINE_SIMPLE: return "simple";
    default: return "none";
    }
}

bool cvf_cuda_gemm_prefer(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                          const cvf_epilogue *ep, cvf_cuda_family family, cvf_cuda_engine *chosen)
{
    cache_entry *e = cache_find(ctx, make_key(a, b, c, ep));
    if (!e || !e->decided)
        return false;
    float best = -1.0f;
    for (int i = 0; i < e->candidate_count; i++) {
        const cvf_cuda_engine engine = e->candidate_engines[i];
        const bool lt = engine == CVF_CUDA_ENGINE_LT || engine == CVF_CUDA_ENGINE_LT_PASS;
        const bool in_family = family == CVF_CUDA_FAMILY_MEASURED || (family == CVF_CUDA_FAMILY_OWN && !lt) ||
                               (family == CVF_CUDA_FAMILY_CUBLASLT && lt);
        const float ms = e->candidates[i].ms;
        if (in_family && ms >= 0.0f && (best < 0.0f || ms < best)) {
            best = ms;
            e->engine = engine;
        }
    }
    *chosen = e->engine;
    return best >= 0.0f;
}

void cvf_cuda_gemm_set_engine(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                              const cvf_epilogue *ep, cvf_cuda_engine engine, const char *choice)
{
    cache_entry *e = cache_find(ctx, make_key(a, b, c, ep));
    if (!e)
        return;
    e->engine = engine;
    if (choice)
        e->choice = choice;
}

void *cvf_cuda_engine_cache_create(void)
{
    return calloc(1, sizeof(engine_cache));
}

void cvf_cuda_engine_cache_destroy(void *cache)
{
    engine_cache *c = (engine_cache *)cache;
    if (!c)
        return;
    for (int i = 0; i < CACHE_ENTRIES; i++)
        cvf_lt_plan_destroy(c->entries[i].lt);
    free(c);
}

size_t cvf_cuda_gemm_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                               const cvf_epilogue *ep)
{
    size_t rest = split_bytes(ctx, a, c);
    if (cvf_lt_eligible(ctx, a, b, c, ep, false) && rest < CVF_LT_WORKSPACE)
        rest = CVF_LT_WORKSPACE;
    return partial_bytes(c, ep) + rest;
}

cvf_status cvf_cuda_gemm(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                         const cvf_matrix *c, const cvf_epilogue *ep, void *workspace, bool may_time)
{
    cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    st->last_lean = -1; /* until an sm90 launch of this call sets it */
    if (c->cols == 0) {
        st->last_kernel = "none";
        return CVF_STATUS_SUCCESS;
    }
    if (c->rows == 0) { /* sums over no rows: bias_grad = 0 */
        st->last_kernel = "none";
        return ep->bias_grad ? cvf_cuda_combine_partials(ctx, launch, (const float *)workspace, 0, c->cols,
                                                         ep->bias_grad)
                             : CVF_STATUS_SUCCESS;
    }
    cvf_cuda_engine engine;
    cache_entry *e = choose(ctx, launch, a, b, c, ep, workspace, may_time, &engine);
    st->last_kernel = cvf_cuda_engine_name(engine);
    st->last_lean = -1; /* choose's timing runs may have launched sm90: only the run below counts */
    return run_engine(ctx, launch, e, engine, a, b, c, ep, workspace);
}

bool cvf_cuda_gemm_decided(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                           const cvf_epilogue *ep)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    if (c->rows == 0 || c->cols == 0 || st->policy != CVF_CUDA_POLICY_AUTO || !st->autotune)
        return true;
    const cache_entry *e = cache_find(ctx, make_key(a, b, c, ep));
    if (e)
        return e->decided;
    cvf_cuda_engine eligible[CVF_CUDA_ENGINE_COUNT], cands[CVF_CUDA_ENGINE_COUNT];
    return allowed_engines(ctx, eligible, eligible_engines(ctx, a, b, c, ep, eligible), cands) == 1;
}

void cvf_cuda_gemm_describe(const cvf_context *ctx, bool beside, const cvf_matrix *a, const cvf_matrix *b,
                            const cvf_matrix *c, const cvf_epilogue *ep, cvf_kernel_info *info)
{
    const cache_entry *e = cache_find(ctx, make_key(a, b, c, ep));
    cvf_cuda_engine eligible[CVF_CUDA_ENGINE_COUNT], cands[CVF_CUDA_ENGINE_COUNT];
    int count = allowed_engines(ctx, eligible, eligible_engines(ctx, a, b, c, ep, eligible), cands);
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    cvf_cuda_engine engine = e ? e->engine : cands[0];
    if (e) {
        info->choice = e->choice;
        info->candidate_count = e->candidate_count;
        for (int i = 0; i < e->candidate_count; i++)
            info->candidates[i] = e->candidates[i];
    } else {
        info->choice = count == 1                             ? "only"
                       : st->policy != CVF_CUDA_POLICY_AUTO  ? "forced"
                       : st->autotune                         ? "heuristic (not measured yet)"
                                                              : "heuristic";
        info->candidate_count = count < CVF_PLAN_MAX_CANDIDATES ? count : CVF_PLAN_MAX_CANDIDATES;
        for (int i = 0; i < info->candidate_count; i++)
            info->candidates[i] = (cvf_engine_time){cvf_cuda_engine_name(cands[i]), -1.0f};
    }
    const int64_t m = c->rows, n = c->cols;
    info->splits = 1;
    switch (engine) {
    case CVF_CUDA_ENGINE_SM90: {
        const cvf_sm90_schedule sched = cvf_cuda_sm90_schedule(cvf_cuda_state_of(ctx)->sm_count, m, n, a->cols, beside);
        info->engine = sched.cluster == 2 ? "sm90: TMA + wgmma, warp-specialised, persistent with dynamic tiles, "
                                            "epilogue fused; 2-CTA clusters sharing B by TMA multicast"
                                          : "sm90: TMA + wgmma, warp-specialised, persistent with dynamic tiles, "
                                            "epilogue fused";
        info->tile_m = CVF_CUDA_SM90_TILE_M;
        info->tile_n = sched.tile_n;
        info->tile_k = CVF_CUDA_SM90_TILE_K;
        /* in the public sense: tiles, K parts of tiles or stream-K runs (not pairs of tiles) */
        info->units = sched.mode == CVF_SM90_WHOLE_TILES ? sched.tiles
                      : sched.mode == CVF_SM90_SPLIT_K   ? sched.tiles * sched.splits
                                                         : sched.units;
        info->splits = sched.splits;
        break;
    }
    case CVF_CUDA_ENGINE_LT:
        info->engine = ep->activation == CVF_ACTIVATION_GELU_TANH ? "cublaslt (+ its GELU_AUX_BIAS epilogue)"
                       : ep->bias                                  ? "cublaslt (+ its BIAS epilogue)"
                                                                   : "cublaslt";
        break;
    case CVF_CUDA_ENGINE_LT_PASS:
        info->engine = "cublaslt+pass: cuBLASLt product in C's dtype, then our epilogue pass over C";
        break;
    default:
        info->engine = "simple (any dtype and strides)";
        info->tile_m = CVF_CUDA_SIMPLE_SLAB;
        info->tile_n = 32;
        info->tile_k = 1;
        break;
    }
    if (info->tile_m > 0 && engine != CVF_CUDA_ENGINE_SM90)
        info->units = ((m + info->tile_m - 1) / info->tile_m) * ((n + info->tile_n - 1) / info->tile_n);
}

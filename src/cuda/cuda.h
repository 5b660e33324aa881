/*
 * The CUDA backend's host interface (C): its per-context state and the entry points the backend
 * table (cuda_backend.c) calls, implemented in the .cu files of this folder. Every entry point
 * receives validated views whose data are device pointers of the context's GPU, enqueues its
 * kernels on a stream and returns without waiting for them.
 *
 *   context.cu     device probe, per-context state (streams, events, cuBLASLt handle), workspace
 *   engines.cu     which engine runs a GEMM: eligibility, the measured choice and its cache
 *   lt.cu          the cuBLASLt engine (plain GEMM, + bias)
 *   pass.cu        the epilogue pass of the unfused engine (bias, aux_out, activation, sums)
 *   simple.cu      the portable kernels: the "simple" GEMM (any dtype mix, any strides, the
 *                  debugging oracle for the fast kernel), column sums, the bias-gradient combine
 *   gemm_sm90.cu   the Hopper kernel: TMA ring + mbarriers, producer warpgroup, two consumer
 *                  warpgroups issuing wgmma, persistent grid, fused epilogue on the accumulators
 *   matmul.cu      the single-op entry points: cvf_matmul and cvf_column_sum on the context's stream
 *   steps.cu       the MLP's steps: their schedule (plan) and their run on up to four lanes
 *   nccl.cu        the tensor-parallel MLP's communication (CVF_HAVE_NCCL): the communicator's
 *                  checks, the ranks' agreement, the all-reduce steps
 */
#ifndef CVF_CUDA_CUDA_H
#define CVF_CUDA_CUDA_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a kernel is enqueued: a stream and the lane it belongs to (0: the context's stream, 1, 2:
 * the MLP's side streams), which picks the lane's scheduler block of the fast kernel; beside:
 * other lanes' kernels may run at the same time (the fast kernel then keeps whole tiles, whose
 * last wave leaves SMs to them, instead of cutting tiles to fill every SM itself). */
typedef struct cvf_cuda_launch {
    void *stream; /* cudaStream_t */
    int32_t lane;
    int32_t beside;
} cvf_cuda_launch;

/* How a GEMM may be run. */
typedef enum cvf_cuda_engine {
    CVF_CUDA_ENGINE_NONE = 0, /* nothing to run (an empty output) */
    CVF_CUDA_ENGINE_SM90,     /* our Hopper kernel, every epilogue fused */
    CVF_CUDA_ENGINE_LT,       /* cuBLASLt, plain or + bias (its own epilogue) */
    CVF_CUDA_ENGINE_LT_PASS,  /* cuBLASLt plain GEMM into C, then our epilogue pass over C */
    CVF_CUDA_ENGINE_SIMPLE,   /* the portable kernel: any dtype mix and stride */
    CVF_CUDA_ENGINE_COUNT
} cvf_cuda_engine;

/* CVF_CUDA_ENGINE: which engines a context may choose from. */
typedef enum cvf_cuda_engine_policy {
    CVF_CUDA_POLICY_AUTO = 0, /* the fastest eligible engine, measured (or the heuristic) */
    CVF_CUDA_POLICY_OWN,      /* our kernels only: sm90 where it can, else simple */
    CVF_CUDA_POLICY_CUBLASLT, /* cuBLASLt (fused or + our pass) where it can, else our kernels */
    CVF_CUDA_POLICY_UNFUSED   /* cuBLASLt plain GEMM + our pass where it can, else our kernels */
} cvf_cuda_engine_policy;

#define CVF_CUDA_STEP_EVENTS 8 /* one "done" event per step of a list (CVF_PLAN_MAX_KERNELS) */

/* What a CUDA context knows and owns (ctx->backend_state). */
typedef struct cvf_cuda_state {
    int32_t device_index;
    int32_t sm_count;        /* multiprocessors: the persistent grid's size */
    int32_t major, minor;    /* compute capability */
    int32_t max_smem_optin;  /* dynamic shared memory a block may opt in to, bytes */
    bool fast;               /* sm_90 and CVF_CUDA_KERNEL != simple: the TMA/wgmma kernel may run */
    bool simple_only;        /* CVF_CUDA_KERNEL=simple: every GEMM on the simple kernel (the oracle) */
    cvf_cuda_engine_policy policy; /* CVF_CUDA_ENGINE, read at context creation */
    bool autotune;           /* CVF_CUDA_AUTOTUNE != 0: time the candidates of a new GEMM key */
    bool serial;             /* CVF_CUDA_MLP_SERIAL=1: every MLP step on the context's stream */
    const char *last_kernel; /* the engine the last GEMM ran ("sm90", "cublaslt", ...): for tests */
    int32_t last_lean;       /* the lean epilogue recipe of the last GEMM's sm90 launch (0: the
                                general epilogue; -1: it did not run sm90): for tests */
    void *tmap_cache;        /* encoded TMA descriptors, reused across calls (malloc'd) */
    int32_t *sync;           /* device: per lane, the fast kernel's scheduler and split-K words (zero
                                between launches; allocated and cleared once, at context creation) */
    void *side_streams[3];   /* cudaStream_t of lanes 1, 2 and 3 (3: a tensor-parallel all-reduce) */
    void *fork_event;        /* cudaEvent_t: the context's stream, where a step list starts */
    void *step_events[CVF_CUDA_STEP_EVENTS]; /* cudaEvent_t: step i done (for steps on other lanes) */
    void *join_events[3];    /* cudaEvent_t: lane 1, 2, 3 done */
    void *agree_event;       /* cudaEvent_t: the ranks' agreement has reached the host (nccl.cu) */
    int64_t *agree_device;   /* device: CVF_TP_AGREE_MAX values the agreement all-reduces (NULL until
                                a tensor-parallel call first needs it) */
    int64_t *agree_host;     /* pinned host copy of them */
    void *timing_events[2];  /* cudaEvent_t with timing: the engine measurements */
    void *lt;                /* cublasLtHandle_t, NULL when cuBLASLt could not start */
    void *engine_cache;      /* the measured choices (engines.cu) */
} cvf_cuda_state;

/* The CUDA state of ctx. */
static inline cvf_cuda_state *cvf_cuda_state_of(const cvf_context *ctx)
{
    return (cvf_cuda_state *)ctx->backend_state;
}

/* The context's own stream, as a launch on lane 0. */
static inline cvf_cuda_launch cvf_cuda_main_launch(const cvf_context *ctx)
{
    cvf_cuda_launch launch = {ctx->stream, 0, 0};
    return launch;
}

/* Backend table members (context.cu). */
cvf_status cvf_cuda_init(cvf_context *ctx, const cvf_context_options *options, char *why, size_t size);
void cvf_cuda_release(cvf_context *ctx);
void *cvf_cuda_workspace_alloc(size_t bytes);
void cvf_cuda_workspace_free(void *memory);

/* Backend table members (matmul.cu): the single ops on the context's stream. */
size_t cvf_cuda_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                 const cvf_epilogue *epilogue);
cvf_status cvf_cuda_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                           const cvf_epilogue *epilogue, void *workspace);
size_t cvf_cuda_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x);
cvf_status cvf_cuda_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace);

/* Backend table members (steps.cu): the MLP's intermediate dtype, schedule and run. */
cvf_dtype cvf_cuda_mlp_intermediate_dtype(cvf_dtype storage);
void cvf_cuda_plan_steps(const cvf_context *ctx, cvf_mlp_step *steps, int count);
cvf_status cvf_cuda_run_steps(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *const *workspaces);

/* A GEMM on launch, on the engine the context chooses for its key (engines.cu): measured the first
 * time a key is seen when may_time (and neither timing is off nor the stream capturing), else the
 * cached or heuristic choice. workspace has cvf_cuda_gemm_workspace bytes. */
cvf_status cvf_cuda_gemm(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                         const cvf_matrix *c, const cvf_epilogue *ep, void *workspace, bool may_time);

/* Bytes of workspace a GEMM needs on any engine it may run on. */
size_t cvf_cuda_gemm_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                               const cvf_epilogue *ep);

/* True when the GEMM's key has a cached choice (or needs none: one eligible engine, a forced or
 * timing-off policy): a run would not measure. */
bool cvf_cuda_gemm_decided(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                           const cvf_epilogue *ep);

/* A family of engines, for choosing a whole step list's engines together. */
typedef enum cvf_cuda_family {
    CVF_CUDA_FAMILY_MEASURED = 0, /* each GEMM's fastest on its own */
    CVF_CUDA_FAMILY_OWN,          /* each GEMM's fastest of our kernels */
    CVF_CUDA_FAMILY_CUBLASLT      /* each GEMM's fastest cuBLASLt engine */
} cvf_cuda_family;

/* Makes the GEMM's decided key use its fastest measured engine of family; *chosen gets the engine
 * it uses after. False (nothing changed) when the key is not measured or has no engine of the
 * family. */
bool cvf_cuda_gemm_prefer(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                          const cvf_epilogue *ep, cvf_cuda_family family, cvf_cuda_engine *chosen);

/* Sets the engine of the GEMM's cached key (and, when choice is not NULL, how it was chosen). */
void cvf_cuda_gemm_set_engine(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                              const cvf_epilogue *ep, cvf_cuda_engine engine, const char *choice);

/* Fills info's engine, tiles, units, choice and measured candidates for the GEMM as it would run
 * (beside: on a lane with others beside it, see cvf_cuda_launch). */
void cvf_cuda_gemm_describe(const cvf_context *ctx, bool beside, const cvf_matrix *a, const cvf_matrix *b,
                            const cvf_matrix *c, const cvf_epilogue *ep, cvf_kernel_info *info);

/* Backend table members (nccl.cu, CVF_HAVE_NCCL builds): see cvf_backend.tp_check_comm / tp_agree. */
cvf_status cvf_cuda_tp_check_comm(cvf_context *ctx, const cvf_tensor_parallel *tp);
cvf_status cvf_cuda_tp_agree(cvf_context *ctx, void *comm, int64_t *values, int count);

/* The all-reduce step (sum of step->c over the ranks of step->comm, in place) on launch (nccl.cu;
 * UNSUPPORTED in a build without NCCL). */
cvf_status cvf_cuda_all_reduce(cvf_context *ctx, cvf_cuda_launch launch, const cvf_mlp_step *step);

/* Frees what nccl.cu added to the state (context release). */
void cvf_cuda_tp_release(cvf_cuda_state *st);

/* Column sums of x into out on launch (simple.cu). */
cvf_status cvf_cuda_column_sum_on(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *x,
                                  const cvf_vector *out, void *workspace);

/* For white-box tests: the name of the engine the last GEMM on ctx ran ("sm90", "simple",
 * "cublaslt", "cublaslt+pass", "none" for an empty output), or "" before the first. */
const char *cvf_cuda_last_kernel(const cvf_context *ctx);

/* For white-box tests: the epilogue the last GEMM on ctx ran in the sm90 kernel, a lean recipe
 * (> 0, a lean_kind of gemm_sm90.cuh, with CVF_CUDA_LEAN_WARPS set when it ran in the epilogue
 * warpgroup's kernel) or the general epilogue (0); -1 when it did not run sm90. */
int32_t cvf_cuda_last_lean(const cvf_context *ctx);
#define CVF_CUDA_LEAN_WARPS 64
/* Set instead when the recipe (plain or ReLU) ran in the relay kernel: the consumers hand C to a
 * spare warp of the producer's warpgroup, which stores it. */
#define CVF_CUDA_LEAN_RELAY 128

/* The context's cache of engine choices (engines.cu): made at context creation, freed with it. */
void *cvf_cuda_engine_cache_create(void);
void cvf_cuda_engine_cache_destroy(void *cache);

/* A short name of an engine ("sm90", "cublaslt", "cublaslt+pass", "simple", "none"). */
const char *cvf_cuda_engine_name(cvf_cuda_engine engine);

/* Host: how the Hopper kernel runs an m x n x k product on a GPU of sm_count SMs: the tile width
 * (256, 192 or 128 columns: the one whose waves the model finds fastest, a narrower one only when
 * 3% faster; CVF_CUDA_TILE_N forces one), and mode and units: whole tiles (a unit each); split-K:
 * `splits` equal K parts of every tile, the tiles' first parts first (when all tiles fit in one
 * wave); stream-K: sm_count equal runs of the tiles' K-slices (K up to 96 slices); chosen by a
 * model of their time when they fill the SMs clearly better than whole tiles, and only when no
 * other lane's kernels run beside it (beside: whole tiles, whose last wave leaves SMs to them;
 * H200 ViT-B backward 0.556 ms with cut tiles, 0.474 with every tile whole under
 * CVF_CUDA_SPLITK=1, docs/PERF.md issue 12 step 4). CVF_CUDA_SPLITK=1 | kN | N forces whole
 * tiles, N K parts, N stream-K units (tests). The units are dealt to single CTAs or, under
 * CVF_CUDA_CLUSTER=2, to 2-CTA clusters that load each B slice once for two row tiles (whole
 * tiles or split-K; stream-K runs on single CTAs). splits: the most pieces a tile is cut into (1:
 * whole tiles); split_bytes: the workspace of the exchange of pieces. A pure function of its
 * arguments and the environment (no CUDA call). */
typedef enum { CVF_SM90_WHOLE_TILES, CVF_SM90_STREAM_K, CVF_SM90_SPLIT_K } cvf_sm90_mode;
typedef struct cvf_sm90_schedule {
    cvf_sm90_mode mode;
    int64_t tiles, units; /* units: of the cluster (pairs of tiles when cluster is 2) */
    int64_t unit_tiles;   /* the tiles as the units number them: tiles, or with pairs 2 x the pairs
                             (an odd row-tile count adds a tile past M to the last pair) */
    int splits;
    int cluster;          /* 1, or 2: CTA pairs sharing B by TMA multicast (whole tiles or split-K) */
    int tile_n;           /* the tile's width: 256, 192 or 128 (CVF_CUDA_TILE_N forces one) */
    size_t split_bytes;
} cvf_sm90_schedule;
cvf_sm90_schedule cvf_cuda_sm90_schedule(int32_t sm_count, int64_t m, int64_t n, int64_t k, bool beside);


#ifdef __cplusplus
}
#endif

#endif /* CVF_CUDA_CUDA_H */

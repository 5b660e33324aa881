/*
 * Internal contract between the core (validation, plans, dispatch) and the backends.
 *
 * The public entry points validate every argument, then call the context's backend through the
 * table below. Backends receive only validated views: dimensions agree, strides are in range,
 * outputs neither self-overlap nor alias anything, and every dtype is one the backend accepts.
 */
#ifndef CVF_CORE_INTERNAL_H
#define CVF_CORE_INTERNAL_H

#include <stdbool.h>

#include "core/threadpool.h"
#include "cvfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CVF_MESSAGE_SIZE 512

typedef struct cvf_mlp_step cvf_mlp_step;

/*
 * A backend: a plain table of function pointers, one per device. Optional members may be NULL.
 *
 * The core validates every call, composes the MLP forward and backward into steps (each a fused
 * GEMM or a reduction, cvf_mlp_*_steps in mlp_plan.c: the only composers), reserves all the
 * workspace a call needs at once (so it fails for lack of memory before its first store, never
 * half-way) and hands the backend validated views. A backend runs single GEMMs and reductions,
 * and may run a whole step list itself (run_steps: its own streams, its own engine per step).
 */
typedef struct cvf_backend {
    const char *name;
    /* dtype of intermediates the core keeps for this backend (the MLP's grad_fc1_output). */
    cvf_dtype accumulate_dtype;
    /* Returns true when the backend reads and writes tensors of dtype. Required. */
    bool (*supports_dtype)(cvf_dtype dtype);
    /* Sets up the backend's per-context state in ctx->backend_state for options (a GPU, its
     * streams, handles). Optional. On failure: a status and the reason in why. */
    cvf_status (*init)(cvf_context *ctx, const cvf_context_options *options, char *why, size_t size);
    /* Releases what init (and later calls) made; called once, also after a failed init. Optional. */
    void (*release)(cvf_context *ctx);
    /* True when the backend queues work on a caller's stream (ctx->stream). Optional: NULL means
     * the backend computes synchronously and accepts only the NULL stream. */
    bool (*has_streams)(void);
    /* Allocates workspace memory the backend's kernels can use (256-byte aligned); NULL on failure. */
    void *(*workspace_alloc)(size_t bytes);
    /* Frees what workspace_alloc returned; NULL is a no-op. */
    void (*workspace_free)(void *memory);
    /* Bytes of workspace matmul needs for this product (shapes, dtypes, layouts of the validated
     * views; their data is not read) with this epilogue, whichever engine runs it. Required. */
    size_t (*matmul_workspace)(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                               const cvf_epilogue *epilogue);
    /* C = epilogue(A @ B) on validated views; epilogue is never NULL; workspace has at least
     * matmul_workspace bytes. Required. */
    cvf_status (*matmul)(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                         const cvf_epilogue *epilogue, void *workspace);
    /* Bytes of workspace column_sum needs for x. Required. */
    size_t (*column_sum_workspace)(const cvf_context *ctx, const cvf_matrix *x);
    /* out[j] = sum over i of x[i, j], deterministic. Required. */
    cvf_status (*column_sum)(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace);
    /* The oracle's own MLP forward / backward, straight from the formulas, so that a mistake in
     * the core's composition cannot hide in the oracle too. Only the reference device sets them;
     * every other backend runs the core's steps. */
    cvf_status (*mlp_forward_oracle)(cvf_context *ctx, const cvf_mlp_forward_args *args);
    cvf_status (*mlp_backward_oracle)(cvf_context *ctx, const cvf_mlp_backward_args *args);
    /* The dtype the backend keeps the MLP's grad_fc1_output in, for tensors of storage dtype
     * (grad_output's). Optional: NULL keeps accumulate_dtype. */
    cvf_dtype (*mlp_intermediate_dtype)(cvf_dtype storage);
    /* Fills the schedule of each step's info as the backend would run it on ctx: engine, tiles,
     * splits, the lane (info.stream), how the engine was chosen and the times measured. Optional:
     * NULL leaves them zero (one lane, no schedule shown). */
    void (*plan_steps)(const cvf_context *ctx, cvf_mlp_step *steps, int count);
    /* Runs a whole step list in an order that respects each step's needs, on the lanes plan_steps
     * gives; workspaces[i] is step i's own scratch (step_workspace bytes; the steps may run at the
     * same time). Optional: NULL runs the steps one after another through matmul / column_sum
     * with one shared scratch. */
    cvf_status (*run_steps)(cvf_context *ctx, const cvf_mlp_step *steps, int count, void *const *workspaces);
    /* Tensor parallelism over NCCL (args.tp.nccl_comm). All three NULL: the backend has no
     * communicator (a tensor-parallel call then runs in partial mode only). */
    /* Checks a caller's communicator without communicating: its size and rank are tp's, its GPU
     * is ctx's. INVALID_VALUE for a mismatch, COMMUNICATION_FAILED for an NCCL error. */
    cvf_status (*tp_check_comm)(cvf_context *ctx, const cvf_tensor_parallel *tp);
    /* Replaces values[0..count) (count <= CVF_TP_AGREE_MAX) by their element-wise maximum over the
     * ranks of comm, waiting on the host for the result (with a timeout; COMMUNICATION_FAILED when
     * it fails or times out). Every rank of comm must call it with the same count. */
    cvf_status (*tp_agree)(cvf_context *ctx, void *comm, int64_t *values, int count);
    /* The all-reduce steps (CVF_KERNEL_ALL_REDUCE) run only through run_steps. */
} cvf_backend;

#define CVF_TP_AGREE_MAX 32 /* values one agreement exchanges */

extern const cvf_backend cvf_cpu_backend;
extern const cvf_backend cvf_reference_backend;
#ifdef CVF_HAVE_CUDA
extern const cvf_backend cvf_cuda_backend;
#endif

struct cvf_context {
    cvf_device device;
    const cvf_backend *backend;
    void *backend_state; /* the backend's own per-context state (init/release), opaque to the core */
    void *stream;        /* the caller's stream (cvf_context_set_stream); NULL: the default stream */
    int32_t threads;
    cvf_threadpool *pool;
    void *workspace; /* backend memory reserved by earlier calls, reused (or the caller's) */
    size_t workspace_size;
    bool workspace_is_callers;      /* cvf_context_set_workspace: never grown or freed by cvfuse */
    char message[CVF_MESSAGE_SIZE]; /* last error; "" after a success */
};

/* Makes ctx's workspace at least bytes long (growing it through the backend) and stores it in
 * *workspace; OUT_OF_MEMORY, with a message naming what, when it cannot. */
cvf_status cvf_workspace_reserve(cvf_context *ctx, size_t bytes, const char *what, void **workspace);

/* Host workspace memory for backends that compute on the CPU: 64-byte aligned (a cache line, what
 * packed panels and SIMD loads want). */
void *cvf_host_workspace_alloc(size_t bytes);

/* Frees cvf_host_workspace_alloc's memory; NULL is a no-op. */
void cvf_host_workspace_free(void *memory);

/* Rounds bytes up to a multiple of 64, so that pieces of one workspace stay aligned. */
static inline size_t cvf_round_up_64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Rounds bytes up to a multiple of 256: the alignment of every piece of a workspace. */
static inline size_t cvf_round_up_256(size_t bytes)
{
    return (bytes + 255) & ~(size_t)255;
}

/* Records a formatted message for the last error of ctx and returns status. */
cvf_status cvf_fail(cvf_context *ctx, cvf_status status, const char *format, ...) __attribute__((format(printf, 3, 4)));

/* Clears the last error of ctx (called at the start of every entry point). */
void cvf_clear_error(cvf_context *ctx);

/* ---- validation (validate.c) ---------------------------------------------------------- */

/* The memory a validated view covers: [begin, end) in bytes; begin == end for an empty view. */
typedef struct cvf_span {
    uintptr_t begin;
    uintptr_t end;
} cvf_span;

/* A named operand of one call, for the aliasing checks. */
typedef struct cvf_operand {
    const char *name;
    cvf_span span;
    bool is_output;
} cvf_operand;

/* Checks a matrix view: not NULL, known dtype the backend accepts, non-negative dimensions and
 * strides, data present when non-empty, byte extent representable; outputs must not map two
 * elements to one address. On success stores the covered bytes in *span. */
cvf_status cvf_check_matrix(cvf_context *ctx, const char *name, const cvf_matrix *m, bool is_output, cvf_span *span);

/* The same checks for a vector view. */
cvf_status cvf_check_vector(cvf_context *ctx, const char *name, const cvf_vector *v, bool is_output, cvf_span *span);

/* Checks that a matrix has the expected shape; names both dimensions in the message. */
cvf_status cvf_check_matrix_shape(cvf_context *ctx, const char *name, const cvf_matrix *m, int64_t rows, int64_t cols,
                                  const char *expected);

/* Checks that a vector has the expected length. */
cvf_status cvf_check_vector_length(cvf_context *ctx, const char *name, const cvf_vector *v, int64_t length,
                                   const char *expected);

/* Checks that no output's memory overlaps any other operand's. */
cvf_status cvf_check_aliasing(cvf_context *ctx, const cvf_operand *operands, int count);

/* Validates a whole matmul call (views, epilogue, shapes, aliasing). */
cvf_status cvf_validate_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                               const cvf_epilogue *epilogue);

/* ---- MLP plans (mlp_plan.c) ----------------------------------------------------------- */

/* What a step of an MLP computes: steps are identified by what they are, never by position. */
typedef enum cvf_step_id {
    CVF_STEP_FC1 = 0, /* forward: gelu_output = gelu(fc1_output = hidden_state @ fc1_weight^T + fc1_bias) */
    CVF_STEP_FC2,     /* forward: output = gelu_output @ fc2_weight^T + fc2_bias */
    CVF_STEP_K1,      /* backward: grad_fc1_output = (grad_output @ fc2_weight) * gelu'(fc1_output), + bias grad */
    CVF_STEP_K2_1,    /* backward: grad_fc2_weight = grad_output^T @ gelu_output */
    CVF_STEP_K2_2,    /* backward: grad_fc1_weight = grad_fc1_output^T @ hidden_state */
    CVF_STEP_K2_3,    /* backward: grad_hidden_state = grad_fc1_output @ fc1_weight */
    CVF_STEP_K3,      /* backward: grad_fc2_bias = grad_output.sum(0) */
    CVF_STEP_AR_OUTPUT,      /* tensor-parallel forward: output summed over the ranks (NCCL) */
    CVF_STEP_AR_GRAD_HIDDEN, /* tensor-parallel backward: grad_hidden_state summed over the ranks (NCCL) */
    CVF_STEP_COUNT
} cvf_step_id;

/*
 * One kernel of an MLP call: what it is, its description (name, formula, shape, bytes, and the
 * schedule a backend fills in) and the operands it runs on. A GEMM computes
 * c = epilogue(a @ b); a reduction sums the rows of a into out. needs has bit i set when the step
 * reads what step i of the same list writes. The same functions build the steps for the plan
 * (from the shape alone) and for the run (from the caller's views): what the plan says is what
 * runs.
 */
struct cvf_mlp_step {
    cvf_step_id id;
    uint32_t needs; /* also orders: K2-1 and K2-2 "need" K2-3 when its all-reduce should hide under them */
    cvf_kernel_info info;
    cvf_matrix a, b, c; /* an all-reduce (CVF_KERNEL_ALL_REDUCE) sums c over the ranks, in place */
    cvf_epilogue epilogue;
    cvf_vector out;
    void *comm; /* an all-reduce's ncclComm_t */
};

/* True for a call split over ranks (tp.size > 0). */
static inline bool cvf_tp_split(const cvf_tensor_parallel *tp)
{
    return tp->size > 0;
}

/* True when this rank adds fc2_bias in a forward (unsplit, or rank 0 of a split call). */
static inline bool cvf_tp_adds_fc2_bias(const cvf_tensor_parallel *tp)
{
    return tp->size <= 0 || tp->rank == 0;
}

/* Fills steps[] (at most CVF_PLAN_MAX_KERNELS) for a validated backward call whose
 * grad_fc1_output lives in *grad_fc1_output; returns how many. Pointers in the steps' epilogues
 * point into args. */
int cvf_mlp_backward_steps(const cvf_mlp_backward_args *args, const cvf_matrix *grad_fc1_output, cvf_mlp_step *steps);

/* Fills steps[] for a validated forward call; gelu_output is where fc1 stores its activation
 * (the caller's, or the workspace's for inference) and fc1_output NULL when it is not saved. */
int cvf_mlp_forward_steps(const cvf_mlp_forward_args *args, const cvf_matrix *gelu_output,
                          const cvf_matrix *fc1_output, cvf_mlp_step *steps);

/* Bytes of workspace one step needs from ctx's backend. */
size_t cvf_mlp_step_workspace(const cvf_context *ctx, const cvf_mlp_step *step);

/* Runs one step on ctx's backend (matmul or column_sum) with its workspace; a failure's message
 * is prefixed with the kernel's name and formula. */
cvf_status cvf_mlp_run_step(cvf_context *ctx, const cvf_mlp_step *step, void *workspace);

/* Prefixes ctx's message with the step's name and formula (for backends that run steps). */
void cvf_mlp_step_failed(cvf_context *ctx, const cvf_mlp_step *step);

/* The dtype ctx's backend keeps grad_fc1_output in for tensors of storage dtype. */
cvf_dtype cvf_mlp_intermediate_dtype(const cvf_context *ctx, cvf_dtype storage);

/* A dense row-major view (data NULL) of rows x cols of dtype whose rows start 16-byte aligned
 * (the intermediates the core keeps), and its bytes rounded up to 256; false on overflow. */
bool cvf_intermediate_view(int64_t rows, int64_t cols, cvf_dtype dtype, cvf_matrix *view, size_t *bytes);

/* Fills plan for a validated shape on ctx's device (forward or backward). */
void cvf_mlp_plan_build(const cvf_context *ctx, const cvf_mlp_shape *shape, bool forward, cvf_mlp_plan *plan);

/* ---- numerics shared by the fast backends -------------------------------------------- */

#define CVF_GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define CVF_GELU_C 0.044715

#ifdef __cplusplus
}
#endif

#endif /* CVF_CORE_INTERNAL_H */

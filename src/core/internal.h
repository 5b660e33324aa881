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
 * A backend: a plain table of function pointers, one per device. Optional members may be NULL;
 * the core then composes the operation from the required ones.
 *
 * Workspace: before an operation stores anything, the core asks the backend how much scratch
 * memory each of its calls needs, reserves all of it at once in the context (allocated with the
 * backend's alloc, kept and reused by later calls), and passes it down. So a call fails for lack
 * of memory before its first store, never half-way, and the hot path does not allocate.
 */
typedef struct cvf_backend {
    const char *name;
    /* dtype of intermediates the core keeps for this backend (the MLP's grad_fc1_output). */
    cvf_dtype accumulate_dtype;
    /* Returns true when the backend reads and writes tensors of dtype. Required. */
    bool (*supports_dtype)(cvf_dtype dtype);
    /* Allocates workspace memory the backend's kernels can use (64-byte aligned); NULL on failure. */
    void *(*workspace_alloc)(size_t bytes);
    /* Frees what workspace_alloc returned; NULL is a no-op. */
    void (*workspace_free)(void *memory);
    /* Bytes of workspace matmul needs for this product (shapes, dtypes, layouts of the validated
     * views; their data is not read) with this epilogue. Required. */
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
    /* Whole MLP forward on validated arguments. Optional: NULL runs the core's two fused GEMMs. */
    cvf_status (*mlp_forward)(cvf_context *ctx, const cvf_mlp_forward_args *args);
    /* Whole MLP backward on validated arguments. Optional: NULL runs the core's plan (K1, K2-*, K3). */
    cvf_status (*mlp_backward)(cvf_context *ctx, const cvf_mlp_backward_args *args);
    /* The dtype the backend keeps the MLP's grad_fc1_output in, for tensors of storage dtype
     * (grad_output's). Optional: NULL keeps accumulate_dtype. */
    cvf_dtype (*mlp_intermediate_dtype)(cvf_dtype storage);
    /* Fills the schedule fields of each step's info (engine, tiles, splits, stream) as the backend
     * would run them on ctx. Optional: NULL leaves them zero. */
    void (*mlp_schedule)(const cvf_context *ctx, cvf_mlp_step *steps, int count);
} cvf_backend;

extern const cvf_backend cvf_cpu_backend;
extern const cvf_backend cvf_reference_backend;
#ifdef CVF_HAVE_CUDA
extern const cvf_backend cvf_cuda_backend;
#endif

/* What a CUDA context knows about its GPU (zero on other devices). */
typedef struct cvf_cuda_info {
    int32_t device_index;
    void *stream;            /* cudaStream_t */
    int32_t sm_count;        /* multiprocessors: the persistent grid's size */
    int32_t major, minor;    /* compute capability */
    int32_t max_smem_optin;  /* dynamic shared memory a block may opt in to, bytes */
    bool fast;               /* sm_90 and CVF_CUDA_KERNEL != simple: the TMA/wgmma kernel may run */
    const char *last_kernel; /* the kernel the last matmul ran ("sm90", "simple", ...): for tests */
    void *tmap_cache;        /* encoded TMA descriptors, reused across calls (malloc'd) */
    int32_t *sync;           /* device: per lane, the fast kernel's scheduler and split-K words (zero
                                between launches; allocated and cleared once, at context creation) */
    int32_t lane;            /* the lane the next kernel is enqueued on: 0 the context's stream,
                                1, 2 the MLP's side streams (ctx->cuda.stream is that lane's stream) */
    void *side_streams[2];   /* cudaStream_t of lanes 1, 2: created at the first MLP backward */
    void *events[4];         /* cudaEvent_t: fork, K1 done, lane 1 done, lane 2 done */
} cvf_cuda_info;

struct cvf_context {
    cvf_device device;
    const cvf_backend *backend;
    int32_t threads;
    cvf_threadpool *pool;
    cvf_cuda_info cuda;
    void *workspace; /* backend memory reserved by earlier calls, reused (or the caller's) */
    size_t workspace_size;
    bool workspace_is_callers; /* cvf_context_set_workspace: never grown or freed by cvfuse */
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

/* Sets up ctx->cuda for options (device present, properties read, device made current).
 * Returns SUCCESS or UNSUPPORTED with the reason in why. Without CUDA in the build: UNSUPPORTED,
 * "built without CUDA". Defined in src/cuda (or the stub in context.c). */
cvf_status cvf_cuda_context_init(cvf_context *ctx, const cvf_context_options *options, char *why, size_t size);

/* Releases what cvf_cuda_context_init and later calls made for ctx (streams, events, device
 * memory, the tensor-map cache); a no-op on other devices and without CUDA. */
void cvf_cuda_context_release(cvf_context *ctx);

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

/*
 * One kernel of the MLP backward: its description (name, formula, shape, bytes) and the operands
 * it runs on. A GEMM computes c = epilogue(a @ b); a reduction sums the rows of a into out. The
 * same function builds the steps for the plan (from the shape alone) and for the run (from the
 * caller's views), so what the plan says is what runs.
 */
struct cvf_mlp_step {
    cvf_kernel_info info;
    cvf_matrix a, b, c;
    cvf_epilogue epilogue;
    cvf_vector out;
};

/* Fills steps[] (at most CVF_PLAN_MAX_KERNELS) for a validated backward call whose
 * grad_fc1_output lives in *grad_fc1_output; returns how many. Pointers in the steps' epilogues
 * point into args. */
int cvf_mlp_backward_steps(const cvf_mlp_backward_args *args, const cvf_matrix *grad_fc1_output, cvf_mlp_step *steps);

/* Bytes of workspace one step needs from ctx's backend. */
size_t cvf_mlp_step_workspace(const cvf_context *ctx, const cvf_mlp_step *step);

/* Runs one step on ctx's backend with its workspace; a failure's message is prefixed with the
 * kernel's name and formula. */
cvf_status cvf_mlp_run_step(cvf_context *ctx, const cvf_mlp_step *step, void *workspace);

/* The dtype ctx's backend keeps grad_fc1_output in for tensors of storage dtype. */
cvf_dtype cvf_mlp_intermediate_dtype(const cvf_context *ctx, cvf_dtype storage);

/* Fills plan for a validated shape on ctx's device. */
void cvf_mlp_plan_build(const cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan);

/* ---- numerics shared by the fast backends -------------------------------------------- */

#define CVF_GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define CVF_GELU_C 0.044715

#ifdef __cplusplus
}
#endif

#endif /* CVF_CORE_INTERNAL_H */

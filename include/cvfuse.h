/*
 * cvfuse — fused matrix-multiply + vector-epilogue operators.
 *
 * This header is the whole public API. Every operation has the shape
 *
 *     C = epilogue(A @ B)        (fp32 accumulation; float64 on the reference device)
 *
 * where A, B and C are strided matrix views (a transpose is a view with swapped strides, read in
 * place) and the epilogue is a descriptor shared by every backend: optional bias add, optional
 * store of the pre-activation, an activation (or the GELU backward), optional column sums.
 * Subnormal values (below 2^-126 in fp32) may be read as zero inside a product: bf16 inputs on AMX
 * and vdpbf16ps, and on Intel CPUs (where each FMA on a subnormal takes a microcode assist;
 * CVF_CPU_DAZ=0 keeps them there) fp32 and bf16 inputs, subnormal partial sums and, in the plain and
 * ReLU epilogues the kernels apply themselves, bias and accumulator values: at most K x 2^-126
 * absolute per output. The other epilogues keep their subnormal results (the GELU tails).
 *
 * Error handling: every call returns a cvf_status. When a call that takes a context fails, the
 * context keeps a human-readable message naming the argument, what was expected and what was
 * given (cvf_context_last_error). A failed call writes nothing to its outputs.
 *
 * Threading: a context may be used by one host thread at a time; create one context per thread
 * that issues calls. The context itself runs its work on its own thread pool.
 *
 * CUDA device (CVF_DEVICE_CUDA): views hold device pointers (cudaMalloc memory of the context's
 * GPU). Validation reads only the views, never the data. Calls are enqueued on the context's
 * stream and may return before the GPU has finished, as cuBLAS calls do: synchronize the stream
 * (or use a stream-ordered copy) before reading the outputs on the host. A launch failure is
 * reported by the call that launched; a fault during execution surfaces at the next CUDA
 * synchronization, as in any CUDA program.
 */
#ifndef CVFUSE_H
#define CVFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CVF_API marks the public functions: the only symbols a shared libcvfuse exports (the library is
 * built with hidden visibility). Defined empty where the compiler has no visibility attribute. */
#ifndef CVF_API
#if defined(__GNUC__) || defined(__clang__)
#define CVF_API __attribute__((visibility("default")))
#else
#define CVF_API
#endif
#endif

#define CVF_VERSION_MAJOR 0
#define CVF_VERSION_MINOR 2
#define CVF_VERSION_PATCH 0

/* Returns the version of the library linked at run time, "MAJOR.MINOR.PATCH" (compare with the
 * CVF_VERSION_* macros of the header compiled against). Never NULL. */
CVF_API const char *cvf_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Status codes                                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef enum cvf_status {
    CVF_STATUS_SUCCESS = 0,
    CVF_STATUS_NULL_POINTER = 1,       /* a required pointer (context, view, data) is NULL */
    CVF_STATUS_INVALID_VALUE = 2,      /* negative dimension or stride, unknown enum value */
    CVF_STATUS_SHAPE_MISMATCH = 3,     /* dimensions of the operands do not agree */
    CVF_STATUS_OVERLAPPING_OUTPUT = 4, /* an output view's strides make two elements share memory */
    CVF_STATUS_ALIASED_OUTPUT = 5,     /* an output's memory overlaps an input or another output */
    CVF_STATUS_SIZE_OVERFLOW = 6,      /* a view's byte extent does not fit in the address space */
    CVF_STATUS_UNSUPPORTED = 7,        /* valid request this device cannot run (e.g. dtype mix) */
    CVF_STATUS_OUT_OF_MEMORY = 8,      /* a workspace or thread could not be allocated */
    CVF_STATUS_INTERNAL_ERROR = 9,     /* a bug in cvfuse: please report it */
    CVF_STATUS_WORKSPACE_TOO_SMALL = 10, /* the caller's workspace (cvf_context_set_workspace) is smaller
                                           than the call needs; nothing was written */
    CVF_STATUS_COMMUNICATION_FAILED = 11, /* the NCCL communicator of a tensor-parallel call failed: an NCCL
                                             error (the message quotes ncclGetErrorString), an asynchronous
                                             error of the communicator, or the ranks' agreement timed out
                                             (a peer never made the call). Abort the communicator
                                             (ncclCommAbort), as after any NCCL error */
    CVF_STATUS_PEER_FAILED = 12 /* another rank of a tensor-parallel call rejected its arguments, or the
                                   ranks disagree on the shape, dtype, layout or GELU: this rank's own
                                   arguments were valid, nothing was written on any rank */
} cvf_status;

/* Returns a static, human-readable name for a status ("invalid value", ...). Never NULL. */
CVF_API const char *cvf_status_string(cvf_status status);

/* ------------------------------------------------------------------------------------------ */
/* Data types                                                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef enum cvf_dtype {
    CVF_F32 = 0,  /* IEEE binary32 */
    CVF_F16 = 1,  /* IEEE binary16 */
    CVF_BF16 = 2, /* bfloat16 (upper half of binary32) */
    CVF_F64 = 3   /* IEEE binary64: accepted only by the reference device (the test oracle) */
} cvf_dtype;

/* Returns the size in bytes of one element of dtype, or 0 for an unknown dtype. */
CVF_API size_t cvf_dtype_size(cvf_dtype dtype);

/* Returns a static lower-case name ("f32", "f16", "bf16", "f64"), or "unknown". */
CVF_API const char *cvf_dtype_name(cvf_dtype dtype);

/* Converts binary32 to binary16, rounding to nearest even; NaN stays NaN (sign kept, quieted),
 * overflow gives ±Inf, tiny values round to subnormals or ±0. */
CVF_API uint16_t cvf_f32_to_f16(float value);

/* Converts binary16 to binary32 exactly. */
CVF_API float cvf_f16_to_f32(uint16_t bits);

/* Converts binary32 to bfloat16, rounding to nearest even; NaN stays NaN (sign kept, quieted). */
CVF_API uint16_t cvf_f32_to_bf16(float value);

/* Converts bfloat16 to binary32 exactly. */
CVF_API float cvf_bf16_to_f32(uint16_t bits);

/* Converts binary64 to binary16 with one rounding (nearest even), as cvf_f32_to_f16 does. */
CVF_API uint16_t cvf_f64_to_f16(double value);

/* Converts binary64 to bfloat16 with one rounding (nearest even), as cvf_f32_to_bf16 does. */
CVF_API uint16_t cvf_f64_to_bf16(double value);

/* ------------------------------------------------------------------------------------------ */
/* Views                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * A matrix view: element (i, j) lives at data + (i * row_stride + j * col_stride) * dtype size.
 * Strides count elements and must be >= 0. A row-major (rows x cols) array has
 * row_stride = cols, col_stride = 1; its transpose is the same data with the strides (and the
 * dimensions) swapped. Input views may use any non-negative strides (0 broadcasts); output views
 * must not map two elements to the same memory. data may be NULL only when rows * cols == 0, and
 * must be aligned to the element size.
 */
typedef struct cvf_matrix {
    void *data;
    cvf_dtype dtype;
    int64_t rows;
    int64_t cols;
    int64_t row_stride; /* elements from (i, j) to (i + 1, j) */
    int64_t col_stride; /* elements from (i, j) to (i, j + 1) */
} cvf_matrix;

/* A vector view: element i lives at data + i * stride * dtype size. */
typedef struct cvf_vector {
    void *data;
    cvf_dtype dtype;
    int64_t length;
    int64_t stride; /* elements from i to i + 1, >= 0 */
} cvf_vector;

/* Returns a view of a dense row-major (rows x cols) array. */
static inline cvf_matrix cvf_matrix_row_major(void *data, cvf_dtype dtype, int64_t rows, int64_t cols)
{
    cvf_matrix m = {data, dtype, rows, cols, cols, 1};
    return m;
}

/* Returns the transpose of a view: same memory, dimensions and strides swapped. */
static inline cvf_matrix cvf_matrix_transpose(cvf_matrix m)
{
    cvf_matrix t = {m.data, m.dtype, m.cols, m.rows, m.col_stride, m.row_stride};
    return t;
}

/* Returns a view of a dense vector of length elements. */
static inline cvf_vector cvf_vector_dense(void *data, cvf_dtype dtype, int64_t length)
{
    cvf_vector v = {data, dtype, length, 1};
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Context                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum cvf_device {
    CVF_DEVICE_CPU = 0,       /* the CPU backend: fp32 accumulation, thread pool */
    CVF_DEVICE_REFERENCE = 1, /* float64 oracle: simple, slow, obviously correct; accepts f64 */
    CVF_DEVICE_CUDA = 2       /* an NVIDIA GPU: fp32 accumulation; the fast kernels need sm_90 (Hopper) */
} cvf_device;

typedef struct cvf_context_options {
    cvf_device device;
    int32_t threads; /* threads that compute, the caller's included; 0 means one per CPU this process
                        may run on. The reference device always computes on the caller alone; the
                        CUDA device ignores it (the caller's thread only enqueues work). */
    /* CUDA only (ignored elsewhere; zero-initialised options mean GPU 0, the default stream): */
    int32_t device_index; /* the CUDA device ordinal */
    void *stream;         /* a cudaStream_t that every call is ordered on; NULL is the default stream */
} cvf_context_options;

typedef struct cvf_context cvf_context;

/* Returns the reason the last cvf_context_create on this thread failed ("" when it succeeded or
 * none was made): which device, and what the driver or the system said. Thread-local; the pointer
 * stays valid until the next cvf_context_create on this thread. */
CVF_API const char *cvf_context_create_error(void);

/* Creates a context. options may be NULL (CPU device, all cores). On success *out holds the new
 * context; on failure *out is set to NULL. A CUDA context fails with CVF_STATUS_UNSUPPORTED when
 * the library was built without CUDA or device_index names no usable GPU (the reason is printed
 * to stderr when the environment variable CVF_DEBUG is set); on a GPU other than compute
 * capability 9.x it is created and runs every call on the portable (slow) kernel. A context keeps the largest workspace
 * its calls have needed (scratch and, for the MLP backward, grad_fc1_output) and reuses it until destroyed. */
CVF_API cvf_status cvf_context_create(const cvf_context_options *options, cvf_context **out);

/* Destroys a context and joins its threads. NULL is a no-op. */
CVF_API void cvf_context_destroy(cvf_context *ctx);

/* Returns the message of the last failed call on ctx ("" after a success; static text for a
 * NULL ctx). The pointer stays valid until the next call on ctx. */
CVF_API const char *cvf_context_last_error(const cvf_context *ctx);

/* Orders every later call on ctx after the work already queued on stream (a cudaStream_t of the
 * context's GPU; NULL is the legacy default stream), as a framework's "current stream" changes
 * between calls. Cheap: it stores the handle, so it may be called before every op. On the cpu and
 * reference devices only NULL is accepted (UNSUPPORTED otherwise). Work already queued on the
 * previous stream is not waited for: order the two streams yourself, as with cuBLAS. */
CVF_API cvf_status cvf_context_set_stream(cvf_context *ctx, void *stream);

/* Returns the stream calls on ctx are queued on (NULL: the default stream, or a non-CUDA ctx). */
CVF_API void *cvf_context_stream(const cvf_context *ctx);

/*
 * Gives ctx caller-owned workspace: bytes of memory at memory (device memory of the context's GPU
 * for a CUDA context, host memory otherwise; at least 256-byte aligned) that later calls use for
 * their scratch and intermediates instead of growing their own. With it set no call allocates
 * device memory (no cudaMalloc, no cudaFree), so a framework's allocator owns it. A call that
 * needs more than bytes fails with CVF_STATUS_WORKSPACE_TOO_SMALL, naming the size it needs,
 * before anything is written (the cvf_*_workspace_size queries tell it beforehand). The memory
 * must stay valid, and not be used by anything else, until the work queued by the calls that used
 * it has finished (on CUDA: stream order). memory NULL and bytes 0 return ctx to its own growing
 * workspace, the default. The context's own workspace is freed when a caller's is set.
 */
CVF_API cvf_status cvf_context_set_workspace(cvf_context *ctx, void *memory, size_t bytes);

/* Returns the device of ctx (CVF_DEVICE_CPU, the default device, for a NULL ctx). */
CVF_API cvf_device cvf_context_device(const cvf_context *ctx);

/* Returns the number of threads ctx computes on, the caller's included (0 for a NULL ctx). */
CVF_API int32_t cvf_context_threads(const cvf_context *ctx);

/* After a call, a CPU context's worker threads spin for the next one for up to CVF_CPU_SPIN_US
 * microseconds (default 2000; not at all when the context has more threads than the process has
 * CPUs) before they sleep, so that back-to-back calls, and the passes inside one, start without
 * waking them; after the first 20 us they yield their core to any other runnable thread. This ends
 * that spinning now: they sleep until the next call on ctx wakes them (tens of microseconds). Call
 * it before handing the cores to other threaded work (another library's parallel ops) right after
 * a cvfuse call. Not concurrently with a call on ctx; a no-op for other devices and for NULL. */
CVF_API void cvf_context_park_threads(cvf_context *ctx);

/* Returns a static name for a device ("cpu", "reference", "cuda"), or "unknown". */
CVF_API const char *cvf_device_name(cvf_device device);

/* ------------------------------------------------------------------------------------------ */
/* Epilogue: the vector work applied to each fp32 output tile before it is stored              */
/* ------------------------------------------------------------------------------------------ */

typedef enum cvf_activation {
    CVF_ACTIVATION_NONE = 0,
    CVF_ACTIVATION_RELU = 1,      /* max(x, 0); NaN stays NaN */
    CVF_ACTIVATION_GELU_TANH = 2,  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    CVF_ACTIVATION_DGELU_TANH = 3, /* x * gelu_tanh'(aux_in): the GELU backward; needs aux_in */
    CVF_ACTIVATION_GELU_ERF = 4,   /* the exact GELU: x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), as
                                      torch.nn.GELU() and timm's Mlp compute it by default */
    CVF_ACTIVATION_DGELU_ERF = 5   /* x * gelu_erf'(aux_in), gelu_erf'(z) = Phi(z) + z phi(z): the exact
                                      GELU's backward; needs aux_in */
} cvf_activation;

/* Returns a static name ("none", "relu", "gelu_tanh", "dgelu_tanh", "gelu_erf", "dgelu_erf"), or
 * "unknown". */
CVF_API const char *cvf_activation_name(cvf_activation activation);

/*
 * The epilogue descriptor. For each output element, with acc the fp32 dot product:
 *
 *     x = acc + bias[j]                    (when bias is set)
 *     aux_out[i, j] = x                    (when aux_out is set: the pre-activation, for training)
 *     y = activation(x)                    (DGELU_TANH: y = x * gelu_tanh'(aux_in[i, j]))
 *     C[i, j] = y                          (one rounding, to C's dtype)
 *     bias_grad[j] = sum over i of y       (when bias_grad is set: sums of the unrounded y, in a
 *                                           fixed order: bit-identical for any thread count)
 *
 * Unused members are NULL; a zero-initialised descriptor (or a NULL epilogue) is a plain GEMM.
 * bias and bias_grad have length C.cols; aux_in and aux_out have C's shape.
 */
typedef struct cvf_epilogue {
    cvf_activation activation;
    const cvf_vector *bias;      /* input, optional */
    const cvf_matrix *aux_in;    /* input, required by DGELU_TANH, else must be NULL */
    const cvf_matrix *aux_out;   /* output, optional */
    const cvf_vector *bias_grad; /* output, optional */
} cvf_epilogue;

/* ------------------------------------------------------------------------------------------ */
/* Operations                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* C = epilogue(A @ B). A is (M x K), B is (K x N), C is (M x N); epilogue may be NULL. K = 0 is a
 * zero product with the epilogue still applied; M = 0 or N = 0 is an empty result. On the CPU
 * device A, B and the epilogue inputs may be any of f32/f16/bf16 (mixed is fine); the outputs
 * likewise. */
CVF_API cvf_status cvf_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                      const cvf_epilogue *epilogue);

/* Stores in *bytes the workspace cvf_matmul would use for these arguments on ctx (validated as
 * cvf_matmul validates them; their data are not read). The other *_workspace_size queries do the
 * same for their operation. On CUDA the size covers every engine the call may choose. */
CVF_API cvf_status cvf_matmul_workspace_size(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                             const cvf_matrix *c, const cvf_epilogue *epilogue, size_t *bytes);

/* C = relu(A @ B): the first seed workload (fp16 in/out, fp32 accumulation). */
CVF_API cvf_status cvf_matmul_relu(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c);

/* Sums the rows of x: out[j] = sum over i of x[i, j] (the K3 "bias gradient" reduction). */
CVF_API cvf_status cvf_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out);

/* Which GELU an MLP uses: the tanh approximation (the seed's, the default of a zero-initialised
 * args struct) or the exact erf form (torch.nn.GELU()'s default, approximate="none"). */
typedef enum cvf_gelu {
    CVF_GELU_TANH = 0,
    CVF_GELU_ERF = 1
} cvf_gelu;

/*
 * Tensor parallelism (Megatron-style), for cvf_mlp_forward_args.tp and cvf_mlp_backward_args.tp.
 *
 * P ranks split the intermediate dimension I: rank r holds the slice of I_r = I / P rows (plus one
 * for the first I % P ranks: torch.tensor_split's rule, cvf_tensor_parallel_slice) — fc1 is
 * column-parallel (fc1_weight (I_r x H), fc1_bias (I_r)), fc2 row-parallel (fc2_weight (H x I_r)),
 * and fc1_output, gelu_output, grad_fc1_* and grad_fc2_weight are the rank's (S x I_r), (I_r x H),
 * (I_r), (H x I_r) slices. hidden_state, grad_output, fc2_bias and their gradients are replicated
 * (S x H) / (H) on every rank. The call checks that its I is rank's slice of intermediate
 * (SHAPE_MISMATCH otherwise). Uneven I (I % P != 0) is handled; a slice may be empty (I < P).
 *
 * What the outputs hold:
 *   forward  output            = sum over ranks of gelu_output_r @ fc2_weight_r^T, + fc2_bias once:
 *                                rank 0 adds fc2_bias to its partial, the others do not read it.
 *   backward grad_hidden_state = sum over ranks of grad_fc1_output_r @ fc1_weight_r
 *            grad_fc2_bias     = grad_output.sum(0) on every rank (grad_output is replicated; no
 *                                sum over ranks); the other gradients are the rank's own slices.
 * With nccl_comm NULL ("partial mode", any device) the call stores this rank's partial: the caller
 * sums output / grad_hidden_state over the ranks itself (e.g. torch.distributed.all_reduce, which is
 * how the Python layer works with any process group). With nccl_comm set (CUDA only, a library built
 * with NCCL) the call all-reduces them (sum, in the storage dtype, in place) on the device, so every
 * rank holds the full result; in the backward that all-reduce runs on its own stream as soon as K2-3
 * has produced the partial, while the weight gradients K2-1 and K2-2 still compute (docs/DESIGN.md).
 *
 * With nccl_comm set, the ranks first agree (a small all-reduce the host waits for) on the
 * validity of every rank's arguments and on S, H, intermediate, the dtype, the GELU and the
 * outputs' layouts: a rank that rejects its arguments returns its own status and the others
 * CVF_STATUS_PEER_FAILED, with nothing written anywhere, instead of hanging in a collective of
 * mismatched sizes. The wait ends after CVF_NCCL_TIMEOUT_S seconds (environment, default 300) or at
 * an asynchronous error of the communicator with CVF_STATUS_COMMUNICATION_FAILED. The agreement
 * makes the call wait for the work queued before it on the stream; flags CVF_TP_SKIP_AGREEMENT
 * skips it (the caller vouches for the ranks' arguments: no host wait, CUDA-graph capturable).
 * Every rank must call with the same arguments apart from its slices and rank, on a context of the
 * communicator's GPU, and the all-reduced output / grad_hidden_state must be dense (row- or
 * column-major without padding; UNSUPPORTED otherwise).
 *
 * A zero-initialised struct (size 0) is an ordinary, unsplit call; every other field must then be 0.
 */
#define CVF_TP_SKIP_AGREEMENT 1u /* cvf_tensor_parallel.flags: no agreement step before the all-reduce */

typedef struct cvf_tensor_parallel {
    int32_t size;         /* P, the ranks the MLP is split over; 0: not split (the default). P = 1 is
                             allowed (one rank holding everything; with nccl_comm, an identity
                             all-reduce) */
    int32_t rank;         /* this rank, 0 <= rank < size */
    int64_t intermediate; /* I of the whole MLP: the sum of every rank's slice (>= 0) */
    void *nccl_comm;      /* ncclComm_t of the P ranks (its rank and size must equal rank and size,
                             its GPU the context's), or NULL: partial mode (see above) */
    uint32_t flags;       /* CVF_TP_SKIP_AGREEMENT, or 0 */
} cvf_tensor_parallel;

/* Stores in *offset and *length the rows of the intermediate dimension rank holds when P = size
 * ranks split intermediate (torch.tensor_split's rule: the first intermediate % size ranks hold one
 * more). INVALID_VALUE (nothing stored) for size < 1, rank outside [0, size), intermediate < 0 or
 * a NULL pointer. */
CVF_API cvf_status cvf_tensor_parallel_slice(int64_t intermediate, int32_t size, int32_t rank, int64_t *offset,
                                             int64_t *length);

/*
 * Vision-MLP forward, PyTorch layout (Linear(in, out).weight is (out, in)). S tokens, hidden
 * size H, intermediate size I:
 *   fc1_output  = hidden_state @ fc1_weight^T + fc1_bias        (S, I)
 *   gelu_output = gelu(fc1_output)                                (S, I)
 *   output      = gelu_output @ fc2_weight^T + fc2_bias           (S, H)
 * fc1 runs as one fused kernel that stores both fc1_output and gelu_output. For inference, leave
 * fc1_output and/or gelu_output absent (an all-zero view, {0}): nothing is saved there, and a
 * gelu_output the caller does not take lives in the context's workspace.
 */
typedef struct cvf_mlp_forward_args {
    /* inputs */
    cvf_matrix hidden_state; /* (S, H) */
    cvf_matrix fc1_weight;   /* (I, H) */
    cvf_vector fc1_bias;     /* (I) */
    cvf_matrix fc2_weight;   /* (H, I) */
    cvf_vector fc2_bias;     /* (H) */
    /* outputs */
    cvf_matrix fc1_output;  /* (S, I), optional (absent: all zero) */
    cvf_matrix gelu_output; /* (S, I), optional (absent: all zero) */
    cvf_matrix output;      /* (S, H) */
    cvf_gelu gelu;          /* CVF_GELU_TANH (0, the default) or CVF_GELU_ERF */
    cvf_tensor_parallel tp; /* tensor parallelism (see above); zero: none */
} cvf_mlp_forward_args;

/* Runs the MLP forward described above. */
CVF_API cvf_status cvf_mlp_forward(cvf_context *ctx, const cvf_mlp_forward_args *args);

/* The workspace cvf_mlp_forward would use for args on ctx (see cvf_matmul_workspace_size). */
CVF_API cvf_status cvf_mlp_forward_workspace_size(cvf_context *ctx, const cvf_mlp_forward_args *args, size_t *bytes);

/*
 * Vision-MLP GELU backward: the seed's ModelNew.forward. Given grad_output = dL/d(output):
 *   grad_fc2_bias     = grad_output.sum(0)                          (H)
 *   grad_fc2_weight   = grad_output^T @ gelu_output                 (H, I)
 *   grad_fc1_output   = (grad_output @ fc2_weight) * gelu'(fc1_output)   (S, I), K1 fused
 *   grad_fc1_bias     = grad_fc1_output.sum(0)                      (I)
 *   grad_fc1_weight   = grad_fc1_output^T @ hidden_state            (I, H)
 *   grad_hidden_state = grad_fc1_output @ fc1_weight                (S, H)
 * grad_gelu_output = grad_output @ fc2_weight never reaches memory. grad_fc1_output is held in a
 * workspace: fp32 on the CPU, except bf16 when grad_output, hidden_state and fc1_weight are all bf16
 * and the CPU runs its AMX level (its two GEMMs then run on the tiles); the storage dtype for f16 /
 * bf16 on CUDA (cvf_mlp_backward_plan's workspace_dtype says which). gelu' is the derivative of the
 * forward's GELU (args.gelu).
 */
typedef struct cvf_mlp_backward_args {
    /* inputs */
    cvf_matrix grad_output;  /* (S, H) */
    cvf_matrix hidden_state; /* (S, H) */
    cvf_matrix fc1_weight;   /* (I, H) */
    cvf_matrix fc2_weight;   /* (H, I) */
    cvf_matrix fc1_output;   /* (S, I) */
    cvf_matrix gelu_output;  /* (S, I) */
    /* outputs */
    cvf_matrix grad_hidden_state; /* (S, H) */
    cvf_matrix grad_fc1_weight;   /* (I, H) */
    cvf_vector grad_fc1_bias;     /* (I) */
    cvf_matrix grad_fc2_weight;   /* (H, I) */
    cvf_vector grad_fc2_bias;     /* (H) */
    cvf_gelu gelu;                /* the forward's GELU: CVF_GELU_TANH (0, the default) or CVF_GELU_ERF */
    cvf_tensor_parallel tp;       /* tensor parallelism (see above); zero: none */
} cvf_mlp_backward_args;

/* Runs the MLP backward described above, following the plan cvf_mlp_backward_plan returns. */
CVF_API cvf_status cvf_mlp_backward(cvf_context *ctx, const cvf_mlp_backward_args *args);

/* The workspace cvf_mlp_backward would use for args on ctx (see cvf_matmul_workspace_size). */
CVF_API cvf_status cvf_mlp_backward_workspace_size(cvf_context *ctx, const cvf_mlp_backward_args *args,
                                                   size_t *bytes);

/* ------------------------------------------------------------------------------------------ */
/* Plans: what runs, what is fused, what it saves                                              */
/* ------------------------------------------------------------------------------------------ */

typedef enum cvf_kernel_kind {
    CVF_KERNEL_FUSED_GEMM = 0, /* GEMM with a vector epilogue on its accumulator tile ("cube+vector") */
    CVF_KERNEL_GEMM = 1,       /* plain GEMM, best path, no post-processing */
    CVF_KERNEL_REDUCTION = 2,  /* pure vector work (column sums) */
    CVF_KERNEL_ALL_REDUCE = 3  /* a sum over the ranks of a tensor-parallel call (NCCL), in place */
} cvf_kernel_kind;

#define CVF_PLAN_MAX_CANDIDATES 4

/* One engine a backend timed for a step, when it chose by measurement. */
typedef struct cvf_engine_time {
    const char *engine; /* e.g. "sm90", "cublaslt", "cublaslt+epilogue pass", "simple" */
    float ms;           /* median of the timed runs; < 0: not eligible for this step */
} cvf_engine_time;

typedef struct cvf_kernel_info {
    const char *name;     /* "K1", "K2-1", "K2-2", "K2-3", "K3"; "fc1", "fc2" in the forward */
    const char *computes; /* the formula, in the seed's tensor names */
    const char *fused;    /* what rides in the epilogue ("" when nothing) */
    cvf_kernel_kind kind;
    int64_t m, n, k; /* GEMM shape; for a reduction (rows, cols, 0) */
    uint64_t flops;  /* 2 m n k for a GEMM, rows * cols for a reduction */
    uint64_t bytes;  /* minimum bytes read + written by this kernel */
    /* How the kernel runs, where a backend plans it (the CUDA backend); zeros and "" otherwise. */
    const char *engine;             /* the kernel that runs it, e.g. "sm90 TMA+wgmma", "simple", "column sums" */
    int32_t tile_m, tile_n, tile_k; /* output tile and K step of one work unit */
    int32_t splits;                 /* at most this many K pieces per output tile, added in a fixed
                                       order (1: none) */
    int64_t units;                  /* work units: the output tiles when splits is 1; else (stream-K)
                                       equal runs of the tiles' K steps, which may cut tiles */
    int32_t stream;                 /* 0: the context's stream; 1, 2 (3: a tensor-parallel all-reduce):
                                       side streams forked from it and joined into it before the call
                                       returns */
    const char *choice;             /* how the engine was chosen: "measured", "heuristic", "forced"
                                       (CVF_CUDA_ENGINE), "only" (one eligible engine); "" when the
                                       backend does not choose */
    int32_t candidate_count;        /* engines timed for this step (0 when not measured yet) */
    cvf_engine_time candidates[CVF_PLAN_MAX_CANDIDATES];
} cvf_kernel_info;

/* Memory traffic the plan avoids (or, when negative, adds) compared with an unfused run of the
 * seven operations in the storage dtype: grad_gelu_output stored and read back by a separate
 * GELU' pass, a separate bias-gradient pass, transposed copies as the seed makes them. */
typedef struct cvf_plan_saving {
    const char *what; /* e.g. "grad_gelu_output (S x I) never stored and read back ..." */
    int64_t bytes;
} cvf_plan_saving;

#define CVF_PLAN_MAX_KERNELS 8
#define CVF_PLAN_MAX_SAVINGS 4

typedef struct cvf_mlp_shape {
    int64_t tokens;       /* S */
    int64_t hidden;       /* H */
    int64_t intermediate; /* I */
    cvf_dtype dtype;      /* storage dtype of the tensors */
    cvf_gelu gelu;        /* CVF_GELU_TANH (0) or CVF_GELU_ERF */
} cvf_mlp_shape;

typedef struct cvf_mlp_plan {
    cvf_mlp_shape shape;
    int32_t forward; /* 1: a forward plan (cvf_mlp_forward_plan), 0: the backward */
    cvf_device device;
    cvf_dtype workspace_dtype; /* dtype of the grad_fc1_output workspace */
    int32_t kernel_count;
    cvf_kernel_info kernels[CVF_PLAN_MAX_KERNELS];
    uint64_t bytes_total; /* sum of the kernels' bytes */
    int32_t saving_count;
    cvf_plan_saving savings[CVF_PLAN_MAX_SAVINGS];
    int64_t bytes_saved; /* net: the sum of the savings (costs counted negative) */
} cvf_mlp_plan;

/* Fills *plan with the kernels ctx would run for an MLP backward of this shape (dense row-major
 * tensors). On CUDA each kernel also says which engine runs it and, once a call of this shape has
 * run on ctx, the times measured for each candidate engine. */
CVF_API cvf_status cvf_mlp_backward_plan(cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan);

/* The same for the MLP forward (fc1 with bias + GELU saving fc1_output, then fc2 with bias). */
CVF_API cvf_status cvf_mlp_forward_plan(cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan);

/* Writes a readable description of plan into buf (snprintf semantics: at most size bytes, always
 * NUL-terminated when size > 0) and returns the length the whole text needs, without the NUL. */
CVF_API size_t cvf_mlp_plan_describe(const cvf_mlp_plan *plan, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* CVFUSE_H */

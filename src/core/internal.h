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

#define CVF_MESSAGE_SIZE 512

/*
 * A backend: a plain table of function pointers, one per device. Optional members may be NULL;
 * the core then composes the operation from the required ones.
 */
typedef struct cvf_backend {
    const char *name;
    /* dtype of intermediates the core allocates for this backend (the MLP workspace). */
    cvf_dtype accumulate_dtype;
    /* Returns true when the backend reads and writes tensors of dtype. Required. */
    bool (*supports_dtype)(cvf_dtype dtype);
    /* C = epilogue(A @ B) on validated views; epilogue is never NULL. Required. */
    cvf_status (*matmul)(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                         const cvf_epilogue *epilogue);
    /* out[j] = sum over i of x[i, j], deterministic. Required. */
    cvf_status (*column_sum)(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out);
    /* Whole MLP forward on validated arguments. Optional: NULL runs the core's two fused GEMMs. */
    cvf_status (*mlp_forward)(cvf_context *ctx, const cvf_mlp_forward_args *args);
    /* Whole MLP backward on validated arguments. Optional: NULL runs the core's plan (K1, K2-*, K3). */
    cvf_status (*mlp_backward)(cvf_context *ctx, const cvf_mlp_backward_args *args);
} cvf_backend;

extern const cvf_backend cvf_cpu_backend;
extern const cvf_backend cvf_reference_backend;

struct cvf_context {
    cvf_device device;
    const cvf_backend *backend;
    int32_t threads;
    cvf_threadpool *pool;
    char message[CVF_MESSAGE_SIZE]; /* last error; "" after a success */
};

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

/* Fills plan for a validated shape on ctx's device. */
void cvf_mlp_plan_build(const cvf_context *ctx, const cvf_mlp_shape *shape, cvf_mlp_plan *plan);

/* ---- numerics shared by the fast backends -------------------------------------------- */

#define CVF_GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define CVF_GELU_C 0.044715

#endif /* CVF_CORE_INTERNAL_H */

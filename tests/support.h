/*
 * Test utilities shared by every test program:
 *
 *  - checks and the final report: CHECK(cond, fmt, ...) counts a pass or a failure and prints
 *    file:line and the message on failure; test_report(name) prints "NAME: N passed, M failed"
 *    and returns the process exit code.
 *  - guarded buffers: a matrix or vector view placed inside a larger allocation whose every byte
 *    (guards before and after, gaps between rows, and the view itself until filled) holds a
 *    poison bit pattern: a signalling NaN with an unusual payload that no computation produces
 *    (computed NaNs are quiet). After a call, an output element still holding poison was not
 *    written, and a changed byte outside the view is an out-of-bounds write. Poison left in the
 *    gaps of an input also turns an out-of-view read into a NaN in the result.
 *  - a matmul case runner: builds the inputs of a described case, computes the float64 answer on
 *    a reference-device context (dense f64 copies of the inputs, f64 outputs), runs the case on
 *    any context and checks every output against the answer with the per-dtype tolerance.
 */
#ifndef CVF_TESTS_SUPPORT_H
#define CVF_TESTS_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cvfuse.h"
#include "harness.h"

/* ---- checks and report --------------------------------------------------------------------- */

/* Counts one check: a pass when ok, else a failure printed as "file:line: FAIL: message".
 * Returns ok. Use it through CHECK. */
bool support_check(bool ok, const char *file, int line, const char *format, ...) __attribute__((format(printf, 4, 5)));

/* CHECK(cond, fmt, ...): counts cond as a check; prints the formatted message when it fails.
 * Evaluates to cond as a bool. */
#define CHECK(cond, ...) support_check((cond) ? true : false, __FILE__, __LINE__, __VA_ARGS__)

/* Returns the number of checks that passed / failed so far. */
int64_t support_passed(void);
int64_t support_failed(void);

/* Prints "NAME: N passed, M failed" and returns the exit code: 0 only when M == 0 and N > 0. */
int test_report(const char *name);

/* ---- environment switches ------------------------------------------------------------------ */

/* Sets variable name to value and returns its value before (a copy; NULL where it was unset), for
 * support_env_give_back: a test that sets a CVF_* switch for one context or case leaves the caller's. */
char *support_env_override(const char *name, const char *value);

/* Unsets variable name and returns its value before, as support_env_override does. */
char *support_env_take(const char *name);

/* Gives variable name back the value support_env_override / support_env_take returned (unsets it
 * where that was NULL), and frees it. */
void support_env_give_back(const char *name, char *saved);

/* ---- poison -------------------------------------------------------------------------------- */

/* Poison bit patterns (signalling NaNs with unusual payloads). */
#define SUPPORT_POISON_F32 UINT32_C(0x7FA5A5A5)
#define SUPPORT_POISON_F16 UINT16_C(0x7D5A)
#define SUPPORT_POISON_BF16 UINT16_C(0x7FA5)
#define SUPPORT_POISON_F64 UINT64_C(0x7FF5A5A5A5A5A5A5)

/* Returns whether the element at element holds the poison pattern of dtype. */
bool support_is_poison(cvf_dtype dtype, const void *element);

/* ---- guarded buffers ----------------------------------------------------------------------- */

/* Bytes of guard before and after every view. */
#define SUPPORT_GUARD_BYTES 64

/* One allocation holding a view plus guards. */
typedef struct support_buffer {
    unsigned char *bytes; /* the whole allocation (64-byte aligned) */
    size_t size;          /* bytes in use: guard, the view's extent, guard */
    cvf_dtype dtype;      /* the dtype whose poison fills it */
    unsigned char *saved; /* a copy taken by support_buffer_save, or NULL */
} support_buffer;

/* How a matrix sits in its allocation. */
typedef struct support_layout {
    bool column_major; /* stored column by column (row_stride 1, col_stride rows + pad): the
                          transpose of a row-major (cols x rows) array, viewed in place */
    int64_t pad;       /* unused elements after each row (row-major) or column (column-major) */
    int64_t shift;     /* extra elements before the view: shift = 1 moves the view off the
                          allocation's 64-byte alignment by one element */
} support_layout;

typedef struct support_matrix {
    cvf_matrix view;
    support_buffer buffer;
} support_matrix;

typedef struct support_vector {
    cvf_vector view;
    support_buffer buffer;
} support_vector;

/* Creates a poisoned (rows x cols) matrix of dtype laid out as layout. Returns 0, or -1 when out
 * of memory or the sizes are invalid (then *m owns nothing). */
int support_matrix_create(support_matrix *m, cvf_dtype dtype, int64_t rows, int64_t cols, support_layout layout);

/* Creates a poisoned matrix with explicit strides (in elements) and shift (see support_layout). */
int support_matrix_create_strided(support_matrix *m, cvf_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride,
                                  int64_t col_stride, int64_t shift);

/* Creates a poisoned vector of length elements with the given stride and shift. */
int support_vector_create(support_vector *v, cvf_dtype dtype, int64_t length, int64_t stride, int64_t shift);

/* Frees a matrix or vector (a zeroed one is fine) and zeroes it. */
void support_matrix_destroy(support_matrix *m);
void support_vector_destroy(support_vector *v);

/* Fills the whole allocation (guards, gaps and view) with poison. */
void support_buffer_poison(support_buffer *b);

/* Fills the elements of the view with uniform values in [lo, hi) rounded to its dtype; the rest
 * of the allocation keeps its poison. */
void support_matrix_fill(support_matrix *m, cvft_rng *rng, double lo, double hi);
void support_vector_fill(support_vector *v, cvft_rng *rng, double lo, double hi);

/* Returns the number of elements of the view that still hold poison (were not written). */
int64_t support_count_poisoned_in_view(const support_matrix *m);
int64_t support_vector_count_poisoned(const support_vector *v);

/* Returns whether every byte of the allocation outside the view still holds poison. */
bool support_outside_view_intact(const support_matrix *m);
bool support_vector_outside_intact(const support_vector *v);

/* Saves a copy of the whole allocation (replacing an earlier copy). Returns 0 or -1. */
int support_buffer_save(support_buffer *b);

/* Returns whether the allocation equals the saved copy byte for byte (false without a copy). */
bool support_buffer_unchanged(const support_buffer *b);

/* ---- output checks ------------------------------------------------------------------------- */

/* Checks one output of a finished call against its float64 answer want: no element of the view
 * still poisoned, nothing outside the view changed, relative Frobenius error within
 * cvft_tolerance(dtype of got). Failures print label, name, the error and the tolerance.
 * Returns whether all checks passed. */
bool support_check_matrix_output(const char *label, const char *name, const support_matrix *got,
                                 const cvf_matrix *want);
bool support_check_vector_output(const char *label, const char *name, const support_vector *got,
                                 const cvf_vector *want);

/* The largest error / tolerance ratio any output check has seen, and the check's label. */
double support_worst_error_ratio(const char **where);

/* ---- matmul cases -------------------------------------------------------------------------- */

/* Which entry point a case calls. */
typedef enum support_matmul_op {
    SUPPORT_OP_MATMUL = 0,     /* cvf_matmul with the case's epilogue */
    SUPPORT_OP_MATMUL_RELU = 1 /* cvf_matmul_relu (activation must be RELU, no bias/aux/grad) */
} support_matmul_op;

/* Layout flags of a matmul case. */
enum {
    SUPPORT_A_TRANSPOSED = 1 << 0,   /* A stored column-major, read in place via cvf_matrix_transpose */
    SUPPORT_B_TRANSPOSED = 1 << 1,   /* B stored column-major */
    SUPPORT_INPUTS_PADDED = 1 << 2,  /* A, B, aux_in: padded leading strides, off-alignment start */
    SUPPORT_C_PADDED = 1 << 3,       /* C, aux_out: padded row stride, off-alignment start */
    SUPPORT_C_COLUMN_MAJOR = 1 << 4, /* C, aux_out and aux_in stored column-major */
    SUPPORT_VECTORS_STRIDED = 1 << 5, /* bias with stride 2, bias_grad with stride 3 */
    SUPPORT_ROWS_16B = 1 << 6         /* every matrix's contiguous lines padded to whole 16 bytes, the
                                         view 64-byte aligned (a view of a wider tensor: strides the
                                         TMA takes for any m, n, k) */
};

/* A matmul case: C = epilogue(A @ B) with A (m x k), B (k x n), C (m x n). */
typedef struct support_matmul_case {
    support_matmul_op op;
    int64_t m, n, k;
    cvf_dtype a_dtype, b_dtype, c_dtype;
    cvf_dtype epilogue_in_dtype;  /* bias and aux_in */
    cvf_dtype epilogue_out_dtype; /* aux_out and bias_grad */
    cvf_activation activation;
    bool bias, aux_out, bias_grad;
    unsigned layout;     /* SUPPORT_* layout flags */
    double a_range;      /* A uniform in [-a_range, a_range); 0 means 1 */
    double b_range;      /* B likewise; 0 means 1 */
    double bias_range;   /* bias likewise; 0 means 1 */
    double aux_in_range; /* aux_in likewise; 0 means 4 */
    uint64_t seed;
} support_matmul_case;

/* The dtypes of one matmul case: A, B, C, the epilogue inputs (bias, aux_in) and outputs
 * (aux_out, bias_grad). */
typedef struct support_dtype_combo {
    cvf_dtype a, b, c, epilogue_in, epilogue_out;
} support_dtype_combo;

/* Returns the range of A that gives pre-activations of standard deviation about 2 for a K-long
 * dot product with B uniform in [-1, 1): GELU cases then see values of both signs up to ~4
 * and beyond. */
double support_gelu_a_range(int64_t k);

/* Epilogue index bit 5: the exact (erf) GELU instead of the tanh one, i.e. activation GELU_TANH
 * becomes GELU_ERF and DGELU_TANH becomes DGELU_ERF (NONE and RELU are unchanged). */
#define SUPPORT_EPILOGUE_ERF 32

/* Whether the activation reads aux_in (DGELU_TANH, DGELU_ERF). */
bool support_activation_reads_aux_in(cvf_activation activation);

/* Whether the activation is one of the GELUs or their derivatives. */
bool support_activation_is_gelu(cvf_activation activation);

/* Builds a matmul case from a dtype combination, an epilogue index (bits 0-1 activation, 2 bias,
 * 3 aux_out, 4 bias_grad, 5 SUPPORT_EPILOGUE_ERF) and layout flags. */
support_matmul_case support_make_matmul_case(int64_t m, int64_t n, int64_t k, const support_dtype_combo *d,
                                             int epilogue, unsigned layout, uint64_t seed);

/* The buffers of one case and its float64 answer. Keep it in place once created: the epilogue
 * support_matmul_epilogue builds points into it. */
typedef struct support_matmul_fixture {
    support_matmul_case spec;
    support_matrix a, b, aux_in, c, aux_out;
    support_vector bias, bias_grad;
    cvf_matrix want_c, want_aux_out; /* dense f64 answers (data NULL when not used) */
    cvf_vector want_bias_grad;
    char label[320]; /* the case, for messages */
} support_matmul_fixture;

/* Writes a one-line description of a case ("matmul m=.. n=.. k=.. a=f16 ... layout=At|Cpad"). */
void support_matmul_describe(const support_matmul_case *c, char *buf, size_t size);

/* Allocates the buffers of case c: inputs filled with random values, outputs poisoned. Returns
 * CVF_STATUS_SUCCESS or CVF_STATUS_OUT_OF_MEMORY (then nothing is held). */
cvf_status support_matmul_create(support_matmul_fixture *f, const support_matmul_case *c);

/* Computes the answer on a reference-device context from dense f64 copies of the inputs (as they
 * are now: modify inputs between create and this call to inject special values), and saves a
 * copy of every input buffer for the inputs-unchanged check. Returns the reference's status. */
cvf_status support_matmul_reference(support_matmul_fixture *f, cvf_context *reference);

/* support_matmul_create followed by support_matmul_reference; releases everything on failure. */
cvf_status support_matmul_setup(support_matmul_fixture *f, const support_matmul_case *c, cvf_context *reference);

/* Fills *ep with the fixture's epilogue (pointers into f). */
void support_matmul_epilogue(const support_matmul_fixture *f, cvf_epilogue *ep);

/* Poisons every output buffer, then runs the case on ctx. Returns the call's status. */
cvf_status support_matmul_run(support_matmul_fixture *f, cvf_context *ctx);

/* Checks the outputs of the last run (see support_check_matrix_output) and that no input buffer
 * changed. run_label describes the run (e.g. "cpu threads=2"). Returns whether all passed. */
bool support_matmul_check(const support_matmul_fixture *f, const char *run_label);

/* Frees everything the fixture holds. */
void support_matmul_teardown(support_matmul_fixture *f);

/* One-shot: sets up case c, runs it on ctx, checks the status and every output against the
 * reference computed on reference, tears down. Returns whether every check passed. */
bool support_matmul_compare(const support_matmul_case *c, cvf_context *ctx, cvf_context *reference);

/* ---- per-element bounds -------------------------------------------------------------------- */

/* The unit roundoff of dtype (the largest relative error of one rounding to nearest):
 * 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16), 2^-53 (f64). */
double support_unit_roundoff(cvf_dtype dtype);

/* Half the smallest subnormal of dtype: the largest absolute error of rounding a value near zero
 * (f32 2^-150, f16 2^-25, bf16 2^-134, f64 2^-1075 as 0). */
double support_underflow_floor(cvf_dtype dtype);

/* A (1 x length) matrix view of a vector's elements (same memory). */
cvf_matrix support_vector_as_row(const cvf_vector *v);

/* Rows [offset, offset + length) of m, and columns [offset, offset + length), in place (any strides). */
cvf_matrix support_row_slice(const cvf_matrix *m, int64_t offset, int64_t length);
cvf_matrix support_col_slice(const cvf_matrix *m, int64_t offset, int64_t length);

/* The outcome of comparing an output with its float64 answer element by element. */
typedef struct support_bound_report {
    int64_t violations;       /* elements with |got - want| > bound (a NaN or infinite got where want
                                 is finite counts, as does poison: an unwritten element) */
    int64_t first_i, first_j; /* the first violation in row-major order (-1 when none) */
    int64_t worst_i, worst_j; /* the element with the largest |got - want| / bound (-1 for an empty view) */
    double worst_got, worst_want, worst_bound;
    double worst_ratio; /* |got - want| / bound there (+Inf for a non-finite got) */
} support_bound_report;

/* Compares every element of got (any dtype) with want and bound (same shape, any dtype: usually
 * dense f64) and fills *report. A NaN want accepts only a NaN got. */
void support_compare_bounded(const cvf_matrix *got, const cvf_matrix *want, const cvf_matrix *bound,
                             support_bound_report *report);

/* CHECKs that every element of got is within its bound (support_compare_bounded). The failure
 * message names label, the output's name, dtype and shape, the number of violations, the first one
 * and the worst one: index, got, want, |got - want| and the bound. Fills *report when not NULL.
 * Returns whether it passed. */
bool support_check_bounded(const char *label, const char *name, const cvf_matrix *got, const cvf_matrix *want,
                           const cvf_matrix *bound, support_bound_report *report);

#endif /* CVF_TESTS_SUPPORT_H */

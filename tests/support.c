/* Test utilities shared by every test program (see support.h). */
#include "support.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checks and report --------------------------------------------------------------------- */

/* Failures printed in full; later ones are only counted, so a broken loop cannot flood the log. */
#define SUPPORT_MAX_PRINTED_FAILURES 200

/* The counters of this test program. */
static int64_t checks_passed;
static int64_t checks_failed;

bool support_check(bool ok, const char *file, int line, const char *format, ...)
{
    if (ok) {
        checks_passed++;
        return true;
    }
    checks_failed++;
    if (checks_failed > SUPPORT_MAX_PRINTED_FAILURES) {
        if (checks_failed == SUPPORT_MAX_PRINTED_FAILURES + 1)
            fprintf(stderr, "(further failures are counted but not printed)\n");
        return false;
    }
    fprintf(stderr, "%s:%d: FAIL: ", file, line);
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    fflush(stderr);
    return false;
}

int64_t support_passed(void)
{
    return checks_passed;
}

int64_t support_failed(void)
{
    return checks_failed;
}

char *support_env_take(const char *name)
{
    const char *before = getenv(name);
    char *saved = before ? strdup(before) : NULL;
    unsetenv(name);
    return saved;
}

char *support_env_override(const char *name, const char *value)
{
    char *saved = support_env_take(name);
    setenv(name, value, 1);
    return saved;
}

void support_env_give_back(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

int test_report(const char *name)
{
    printf("%s: %lld passed, %lld failed\n", name, (long long)checks_passed, (long long)checks_failed);
    fflush(stdout);
    return (checks_failed == 0 && checks_passed > 0) ? 0 : 1;
}

/* ---- poison -------------------------------------------------------------------------------- */

/* Writes the poison pattern of dtype into out (cvf_dtype_size(dtype) bytes). */
static void poison_pattern(cvf_dtype dtype, unsigned char out[8])
{
    uint32_t f32 = SUPPORT_POISON_F32;
    uint16_t f16 = SUPPORT_POISON_F16, bf16 = SUPPORT_POISON_BF16;
    uint64_t f64 = SUPPORT_POISON_F64;
    memset(out, 0xA5, 8);
    switch (dtype) {
    case CVF_F32: memcpy(out, &f32, sizeof f32); break;
    case CVF_F16: memcpy(out, &f16, sizeof f16); break;
    case CVF_BF16: memcpy(out, &bf16, sizeof bf16); break;
    case CVF_F64: memcpy(out, &f64, sizeof f64); break;
    }
}

bool support_is_poison(cvf_dtype dtype, const void *element)
{
    unsigned char pattern[8];
    poison_pattern(dtype, pattern);
    return memcmp(element, pattern, cvf_dtype_size(dtype)) == 0;
}

/* ---- guarded buffers ----------------------------------------------------------------------- */

/* Largest view extent accepted, in elements: far above anything a test needs. */
#define SUPPORT_MAX_EXTENT (INT64_C(1) << 34)

/* Returns the number of elements from a view's first element to its last, plus one (0 for an
 * empty view), or -1 when a value is negative or the extent is unreasonably large. */
static int64_t matrix_extent(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride)
{
    if (rows < 0 || cols < 0 || row_stride < 0 || col_stride < 0)
        return -1;
    if (rows == 0 || cols == 0)
        return 0;
    if (rows > SUPPORT_MAX_EXTENT || cols > SUPPORT_MAX_EXTENT || row_stride > SUPPORT_MAX_EXTENT ||
        col_stride > SUPPORT_MAX_EXTENT)
        return -1;
    double extent = (double)(rows - 1) * (double)row_stride + (double)(cols - 1) * (double)col_stride + 1.0;
    if (extent > (double)SUPPORT_MAX_EXTENT)
        return -1;
    return (rows - 1) * row_stride + (cols - 1) * col_stride + 1;
}

/* Allocates a poisoned buffer with room for shift + extent elements of dtype between two guards.
 * Returns the address the view starts at, or NULL. */
static unsigned char *buffer_create(support_buffer *b, cvf_dtype dtype, int64_t extent, int64_t shift)
{
    size_t element = cvf_dtype_size(dtype);
    memset(b, 0, sizeof *b);
    if (element == 0 || extent < 0 || shift < 0 || shift > 1024)
        return NULL;
    size_t before = SUPPORT_GUARD_BYTES + (size_t)shift * element;
    size_t size = before + (size_t)extent * element + SUPPORT_GUARD_BYTES;
    size_t rounded = (size + 63) / 64 * 64;
    b->bytes = aligned_alloc(64, rounded);
    if (!b->bytes)
        return NULL;
    b->size = size;
    b->dtype = dtype;
    support_buffer_poison(b);
    return b->bytes + before;
}

/* Frees a buffer and zeroes it. */
static void buffer_destroy(support_buffer *b)
{
    free(b->bytes);
    free(b->saved);
    memset(b, 0, sizeof *b);
}

void support_buffer_poison(support_buffer *b)
{
    unsigned char pattern[8];
    size_t element = cvf_dtype_size(b->dtype);
    poison_pattern(b->dtype, pattern);
    for (size_t at = 0; element != 0 && at + element <= b->size; at += element)
        memcpy(b->bytes + at, pattern, element);
}

int support_buffer_save(support_buffer *b)
{
    free(b->saved);
    b->saved = malloc(b->size ? b->size : 1);
    if (!b->saved)
        return -1;
    memcpy(b->saved, b->bytes, b->size);
    return 0;
}

bool support_buffer_unchanged(const support_buffer *b)
{
    return b->saved != NULL && memcmp(b->saved, b->bytes, b->size) == 0;
}

int support_matrix_create_strided(support_matrix *m, cvf_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride,
                                  int64_t col_stride, int64_t shift)
{
    memset(m, 0, sizeof *m);
    int64_t extent = matrix_extent(rows, cols, row_stride, col_stride);
    unsigned char *start = extent < 0 ? NULL : buffer_create(&m->buffer, dtype, extent, shift);
    if (!start)
        return -1;
    cvf_matrix view = {start, dtype, rows, cols, row_stride, col_stride};
    m->view = view;
    return 0;
}

int support_matrix_create(support_matrix *m, cvf_dtype dtype, int64_t rows, int64_t cols, support_layout layout)
{
    if (layout.pad < 0)
        return -1;
    if (!layout.column_major)
        return support_matrix_create_strided(m, dtype, rows, cols, cols + layout.pad, 1, layout.shift);
    /* a row-major (cols x rows) array with padded rows, viewed through its transpose */
    if (support_matrix_create_strided(m, dtype, cols, rows, rows + layout.pad, 1, layout.shift) != 0)
        return -1;
    m->view = cvf_matrix_transpose(m->view);
    return 0;
}

int support_vector_create(support_vector *v, cvf_dtype dtype, int64_t length, int64_t stride, int64_t shift)
{
    memset(v, 0, sizeof *v);
    int64_t extent = matrix_extent(length, 1, stride, 1);
    unsigned char *start = extent < 0 ? NULL : buffer_create(&v->buffer, dtype, extent, shift);
    if (!start)
        return -1;
    cvf_vector view = {start, dtype, length, stride};
    v->view = view;
    return 0;
}

void support_matrix_destroy(support_matrix *m)
{
    buffer_destroy(&m->buffer);
    memset(m, 0, sizeof *m);
}

void support_vector_destroy(support_vector *v)
{
    buffer_destroy(&v->buffer);
    memset(v, 0, sizeof *v);
}

void support_matrix_fill(support_matrix *m, cvft_rng *rng, double lo, double hi)
{
    cvft_matrix_fill_uniform(&m->view, rng, lo, hi);
}

void support_vector_fill(support_vector *v, cvft_rng *rng, double lo, double hi)
{
    cvft_vector_fill_uniform(&v->view, rng, lo, hi);
}

/* Returns the byte offset of matrix element (i, j) from the start of its allocation. */
static size_t matrix_byte_offset(const support_matrix *m, int64_t i, int64_t j)
{
    size_t element = cvf_dtype_size(m->view.dtype);
    size_t start = (size_t)((unsigned char *)m->view.data - m->buffer.bytes);
    return start + (size_t)(i * m->view.row_stride + j * m->view.col_stride) * element;
}

/* Returns the byte offset of vector element i from the start of its allocation. */
static size_t vector_byte_offset(const support_vector *v, int64_t i)
{
    size_t element = cvf_dtype_size(v->view.dtype);
    size_t start = (size_t)((unsigned char *)v->view.data - v->buffer.bytes);
    return start + (size_t)(i * v->view.stride) * element;
}

int64_t support_count_poisoned_in_view(const support_matrix *m)
{
    int64_t count = 0;
    for (int64_t i = 0; i < m->view.rows; i++)
        for (int64_t j = 0; j < m->view.cols; j++)
            count += support_is_poison(m->view.dtype, m->buffer.bytes + matrix_byte_offset(m, i, j));
    return count;
}

int64_t support_vector_count_poisoned(const support_vector *v)
{
    int64_t count = 0;
    for (int64_t i = 0; i < v->view.length; i++)
        count += support_is_poison(v->view.dtype, v->buffer.bytes + vector_byte_offset(v, i));
    return count;
}

/* Returns whether every byte of b not marked in covered still holds poison. */
static bool unmarked_bytes_poisoned(const support_buffer *b, const unsigned char *covered)
{
    unsigned char pattern[8];
    size_t element = cvf_dtype_size(b->dtype);
    poison_pattern(b->dtype, pattern);
    for (size_t at = 0; at < b->size; at++)
        if (!covered[at] && b->bytes[at] != pattern[at % element])
            return false;
    return true;
}

bool support_outside_view_intact(const support_matrix *m)
{
    unsigned char *covered = calloc(m->buffer.size ? m->buffer.size : 1, 1);
    if (!covered)
        return false;
    size_t element = cvf_dtype_size(m->view.dtype);
    for (int64_t i = 0; i < m->view.rows; i++)
        for (int64_t j = 0; j < m->view.cols; j++)
            memset(covered + matrix_byte_offset(m, i, j), 1, element);
    bool intact = unmarked_bytes_poisoned(&m->buffer, covered);
    free(covered);
    return intact;
}

bool support_vector_outside_intact(const support_vector *v)
{
    unsigned char *covered = calloc(v->buffer.size ? v->buffer.size : 1, 1);
    if (!covered)
        return false;
    size_t element = cvf_dtype_size(v->view.dtype);
    for (int64_t i = 0; i < v->view.length; i++)
        memset(covered + vector_byte_offset(v, i), 1, element);
    bool intact = unmarked_bytes_poisoned(&v->buffer, covered);
    free(covered);
    return intact;
}

/* ---- output checks ------------------------------------------------------------------------- */

/* The worst error / tolerance ratio seen by the output checks, and where (statistics only). */
static double worst_ratio;
static char worst_where[400];

/* Records err / tol for the statistics. */
static void note_error(const char *label, const char *name, double err, double tol)
{
    double ratio = tol > 0.0 ? err / tol : 0.0;
    if (ratio > worst_ratio || isnan(ratio)) {
        worst_ratio = ratio;
        snprintf(worst_where, sizeof worst_where, "%s: %s", label, name);
    }
}

double support_worst_error_ratio(const char **where)
{
    if (where)
        *where = worst_where;
    return worst_ratio;
}

/* Checks the relative error of an output and notes it; got_dtype picks the tolerance. */
static bool check_error(const char *label, const char *name, cvf_dtype got_dtype, double err)
{
    double tol = cvft_tolerance(got_dtype);
    note_error(label, name, err, tol);
    return CHECK(err <= tol, "%s: output %s (%s): relative error %.4g > tolerance %.4g", label, name,
                 cvf_dtype_name(got_dtype), err, tol);
}

bool support_check_matrix_output(const char *label, const char *name, const support_matrix *got, const cvf_matrix *want)
{
    const cvf_matrix *v = &got->view;
    int64_t unwritten = support_count_poisoned_in_view(got);
    bool ok = CHECK(unwritten == 0, "%s: output %s (%s, %lld x %lld): %lld elements never written", label, name,
                    cvf_dtype_name(v->dtype), (long long)v->rows, (long long)v->cols, (long long)unwritten);
    ok &= CHECK(support_outside_view_intact(got),
                "%s: output %s (%s, %lld x %lld, strides %lld/%lld): bytes outside the view were modified", label, name,
                cvf_dtype_name(v->dtype), (long long)v->rows, (long long)v->cols, (long long)v->row_stride,
                (long long)v->col_stride);
    ok &= check_error(label, name, v->dtype, cvft_matrix_rel_error(v, want));
    return ok;
}

bool support_check_vector_output(const char *label, const char *name, const support_vector *got, const cvf_vector *want)
{
    const cvf_vector *v = &got->view;
    int64_t unwritten = support_vector_count_poisoned(got);
    bool ok = CHECK(unwritten == 0, "%s: output %s (%s, length %lld): %lld elements never written", label, name,
                    cvf_dtype_name(v->dtype), (long long)v->length, (long long)unwritten);
    ok &= CHECK(support_vector_outside_intact(got),
                "%s: output %s (%s, length %lld, stride %lld): bytes outside the view were modified", label, name,
                cvf_dtype_name(v->dtype), (long long)v->length, (long long)v->stride);
    ok &= check_error(label, name, v->dtype, cvft_vector_rel_error(v, want));
    return ok;
}

/* ---- matmul cases -------------------------------------------------------------------------- */

/* Returns range, or fallback when range is 0. */
static double range_or(double range, double fallback)
{
    return range > 0.0 ? range : fallback;
}

/* Writes the names of the layout flags, joined by '|' ("row" when none), into buf. */
static void layout_names(unsigned layout, char *buf, size_t size)
{
    static const struct {
        unsigned flag;
        const char *name;
    } names[] = {{SUPPORT_A_TRANSPOSED, "At"}, {SUPPORT_B_TRANSPOSED, "Bt"},     {SUPPORT_INPUTS_PADDED, "ABpad"},
                 {SUPPORT_C_PADDED, "Cpad"},   {SUPPORT_C_COLUMN_MAJOR, "Ccol"}, {SUPPORT_VECTORS_STRIDED, "vstride"},
                 {SUPPORT_ROWS_16B, "rows16"}};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (layout & names[i].flag) {
            int n = snprintf(buf + used, size - used, "%s%s", used ? "|" : "", names[i].name);
            if (n < 0 || (size_t)n >= size - used)
                return;
            used += (size_t)n;
        }
    if (used == 0)
        snprintf(buf, size, "row");
}

void support_matmul_describe(const support_matmul_case *c, char *buf, size_t size)
{
    char layout[64];
    layout_names(c->layout, layout, sizeof layout);
    snprintf(buf, size, "%s m=%lld n=%lld k=%lld a=%s b=%s c=%s epi_in=%s epi_out=%s act=%s%s%s%s layout=%s seed=%llu",
             c->op == SUPPORT_OP_MATMUL_RELU ? "matmul_relu" : "matmul", (long long)c->m, (long long)c->n,
             (long long)c->k, cvf_dtype_name(c->a_dtype), cvf_dtype_name(c->b_dtype), cvf_dtype_name(c->c_dtype),
             cvf_dtype_name(c->epilogue_in_dtype), cvf_dtype_name(c->epilogue_out_dtype),
             cvf_activation_name(c->activation), c->bias ? " +bias" : "", c->aux_out ? " +aux_out" : "",
             c->bias_grad ? " +bias_grad" : "", layout, (unsigned long long)c->seed);
}

/* Returns the layout of an operand: column-major when transposed, padding and a one-element
 * shift when padded. */
static support_layout operand_layout(bool column_major, bool padded, int64_t pad)
{
    support_layout layout = {column_major, padded ? pad : 0, padded ? 1 : 0};
    return layout;
}

/* The layout of a matrix of dtype whose contiguous lines are `line` elements long: rows16
 * (SUPPORT_ROWS_16B) pads them to whole 16 bytes with no shift, else operand_layout. */
static support_layout line_layout(bool rows16, cvf_dtype dtype, int64_t line, bool column_major, bool padded,
                                  int64_t pad)
{
    if (rows16) {
        const int64_t per16 = 16 / (int64_t)cvf_dtype_size(dtype);
        support_layout layout = {column_major, (per16 - line % per16) % per16, 0};
        return layout;
    }
    return operand_layout(column_major, padded, pad);
}

/* Releases the float64 answers of a fixture. */
static void free_answers(support_matmul_fixture *f)
{
    free(f->want_c.data);
    free(f->want_aux_out.data);
    free(f->want_bias_grad.data);
    f->want_c.data = f->want_aux_out.data = f->want_bias_grad.data = NULL;
}

/* Allocates the matrices and vectors of a case (all poisoned). Returns 0 or -1. */
static int create_buffers(support_matmul_fixture *f)
{
    const support_matmul_case *c = &f->spec;
    unsigned l = c->layout;
    bool in_pad = (l & SUPPORT_INPUTS_PADDED) != 0, c_pad = (l & SUPPORT_C_PADDED) != 0;
    bool c_col = (l & SUPPORT_C_COLUMN_MAJOR) != 0, rows16 = (l & SUPPORT_ROWS_16B) != 0;
    int64_t c_line = c_col ? c->m : c->n; /* the contiguous length of C, aux_out and aux_in */
    int64_t bias_stride = (l & SUPPORT_VECTORS_STRIDED) ? 2 : 1;
    int64_t grad_stride = (l & SUPPORT_VECTORS_STRIDED) ? 3 : 1;
    int64_t vector_shift = (l & SUPPORT_VECTORS_STRIDED) ? 1 : 0;
    const bool at = (l & SUPPORT_A_TRANSPOSED) != 0, bt = (l & SUPPORT_B_TRANSPOSED) != 0;
    int rc = support_matrix_create(&f->a, c->a_dtype, c->m, c->k,
                                   line_layout(rows16, c->a_dtype, at ? c->m : c->k, at, in_pad, 3));
    rc |= support_matrix_create(&f->b, c->b_dtype, c->k, c->n,
                                line_layout(rows16, c->b_dtype, bt ? c->k : c->n, bt, in_pad, 5));
    rc |= support_matrix_create(&f->c, c->c_dtype, c->m, c->n, line_layout(rows16, c->c_dtype, c_line, c_col, c_pad, 4));
    if (support_activation_reads_aux_in(c->activation))
        rc |= support_matrix_create(&f->aux_in, c->epilogue_in_dtype, c->m, c->n,
                                    line_layout(rows16, c->epilogue_in_dtype, c_line, c_col, in_pad, 2));
    if (c->aux_out)
        rc |= support_matrix_create(&f->aux_out, c->epilogue_out_dtype, c->m, c->n,
                                    line_layout(rows16, c->epilogue_out_dtype, c_line, c_col, c_pad, 6));
    if (c->bias)
        rc |= support_vector_create(&f->bias, c->epilogue_in_dtype, c->n, bias_stride, vector_shift);
    if (c->bias_grad)
        rc |= support_vector_create(&f->bias_grad, c->epilogue_out_dtype, c->n, grad_stride, vector_shift);
    if (cvft_matrix_alloc(CVF_F64, c->m, c->n, &f->want_c) != 0)
        rc = -1;
    if (c->aux_out && cvft_matrix_alloc(CVF_F64, c->m, c->n, &f->want_aux_out) != 0)
        rc = -1;
    if (c->bias_grad && cvft_vector_alloc(CVF_F64, c->n, &f->want_bias_grad) != 0)
        rc = -1;
    return rc;
}

cvf_status support_matmul_create(support_matmul_fixture *f, const support_matmul_case *c)
{
    memset(f, 0, sizeof *f);
    f->spec = *c;
    support_matmul_describe(c, f->label, sizeof f->label);
    if (create_buffers(f) != 0) {
        support_matmul_teardown(f);
        return CVF_STATUS_OUT_OF_MEMORY;
    }
    cvft_rng rng = cvft_rng_make(c->seed);
    double a = range_or(c->a_range, 1.0), b = range_or(c->b_range, 1.0);
    double bias = range_or(c->bias_range, 1.0), aux = range_or(c->aux_in_range, 4.0);
    support_matrix_fill(&f->a, &rng, -a, a);
    support_matrix_fill(&f->b, &rng, -b, b);
    if (c->bias)
        support_vector_fill(&f->bias, &rng, -bias, bias);
    if (support_activation_reads_aux_in(c->activation))
        support_matrix_fill(&f->aux_in, &rng, -aux, aux);
    return CVF_STATUS_SUCCESS;
}

/* Runs the case's entry point on ctx with the given operands. */
static cvf_status call_op(const support_matmul_case *c, cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                          const cvf_matrix *out, const cvf_epilogue *ep)
{
    if (c->op == SUPPORT_OP_MATMUL_RELU)
        return cvf_matmul_relu(ctx, a, b, out);
    return cvf_matmul(ctx, a, b, out, ep);
}

/* Saves a copy of every input buffer of the fixture. Returns 0 or -1. */
static int save_inputs(support_matmul_fixture *f)
{
    int rc = support_buffer_save(&f->a.buffer) | support_buffer_save(&f->b.buffer);
    if (f->spec.bias)
        rc |= support_buffer_save(&f->bias.buffer);
    if (support_activation_reads_aux_in(f->spec.activation))
        rc |= support_buffer_save(&f->aux_in.buffer);
    return rc;
}

cvf_status support_matmul_reference(support_matmul_fixture *f, cvf_context *reference)
{
    const support_matmul_case *c = &f->spec;
    bool dgelu = support_activation_reads_aux_in(c->activation);
    cvf_matrix a = {0}, b = {0}, aux_in = {0};
    cvf_vector bias = {0};
    cvf_status status = CVF_STATUS_OUT_OF_MEMORY;
    if (cvft_matrix_to_f64(&f->a.view, &a) == 0 && cvft_matrix_to_f64(&f->b.view, &b) == 0 &&
        (!dgelu || cvft_matrix_to_f64(&f->aux_in.view, &aux_in) == 0) &&
        (!c->bias || cvft_vector_to_f64(&f->bias.view, &bias) == 0) && save_inputs(f) == 0) {
        cvf_epilogue ep = {c->activation, c->bias ? &bias : NULL, dgelu ? &aux_in : NULL,
                           c->aux_out ? &f->want_aux_out : NULL, c->bias_grad ? &f->want_bias_grad : NULL};
        status = call_op(c, reference, &a, &b, &f->want_c, &ep);
    }
    free(a.data);
    free(b.data);
    free(aux_in.data);
    free(bias.data);
    return status;
}

cvf_status support_matmul_setup(support_matmul_fixture *f, const support_matmul_case *c, cvf_context *reference)
{
    cvf_status status = support_matmul_create(f, c);
    if (status == CVF_STATUS_SUCCESS)
        status = support_matmul_reference(f, reference);
    if (status != CVF_STATUS_SUCCESS)
        support_matmul_teardown(f);
    return status;
}

void support_matmul_epilogue(const support_matmul_fixture *f, cvf_epilogue *ep)
{
    const support_matmul_case *c = &f->spec;
    ep->activation = c->activation;
    ep->bias = c->bias ? &f->bias.view : NULL;
    ep->aux_in = support_activation_reads_aux_in(c->activation) ? &f->aux_in.view : NULL;
    ep->aux_out = c->aux_out ? &f->aux_out.view : NULL;
    ep->bias_grad = c->bias_grad ? &f->bias_grad.view : NULL;
}

cvf_status support_matmul_run(support_matmul_fixture *f, cvf_context *ctx)
{
    support_buffer_poison(&f->c.buffer);
    if (f->spec.aux_out)
        support_buffer_poison(&f->aux_out.buffer);
    if (f->spec.bias_grad)
        support_buffer_poison(&f->bias_grad.buffer);
    cvf_epilogue ep;
    support_matmul_epilogue(f, &ep);
    return call_op(&f->spec, ctx, &f->a.view, &f->b.view, &f->c.view, &ep);
}

/* Checks that an input buffer still equals its saved copy. */
static bool check_input(const char *label, const char *name, const support_buffer *b)
{
    return CHECK(support_buffer_unchanged(b), "%s: input %s was modified", label, name);
}

bool support_matmul_check(const support_matmul_fixture *f, const char *run_label)
{
    const support_matmul_case *c = &f->spec;
    char label[512];
    snprintf(label, sizeof label, "%s [%s]", f->label, run_label);
    bool ok = support_check_matrix_output(label, "C", &f->c, &f->want_c);
    if (c->aux_out)
        ok &= support_check_matrix_output(label, "aux_out", &f->aux_out, &f->want_aux_out);
    if (c->bias_grad)
        ok &= support_check_vector_output(label, "bias_grad", &f->bias_grad, &f->want_bias_grad);
    ok &= check_input(label, "A", &f->a.buffer);
    ok &= check_input(label, "B", &f->b.buffer);
    if (c->bias)
        ok &= check_input(label, "bias", &f->bias.buffer);
    if (support_activation_reads_aux_in(c->activation))
        ok &= check_input(label, "aux_in", &f->aux_in.buffer);
    return ok;
}

void support_matmul_teardown(support_matmul_fixture *f)
{
    support_matrix_destroy(&f->a);
    support_matrix_destroy(&f->b);
    support_matrix_destroy(&f->aux_in);
    support_matrix_destroy(&f->c);
    support_matrix_destroy(&f->aux_out);
    support_vector_destroy(&f->bias);
    support_vector_destroy(&f->bias_grad);
    free_answers(f);
}

bool support_matmul_compare(const support_matmul_case *c, cvf_context *ctx, cvf_context *reference)
{
    support_matmul_fixture *f = malloc(sizeof *f);
    if (!CHECK(f != NULL, "out of memory for a matmul fixture"))
        return false;
    cvf_status status = support_matmul_setup(f, c, reference);
    char label[320];
    support_matmul_describe(c, label, sizeof label);
    bool ok = CHECK(status == CVF_STATUS_SUCCESS, "%s: reference setup failed: %s (%s)", label,
                    cvf_status_string(status), cvf_context_last_error(reference));
    if (ok) {
        status = support_matmul_run(f, ctx);
        ok = CHECK(status == CVF_STATUS_SUCCESS, "%s: %s device returned %s: %s", label,
                   cvf_device_name(cvf_context_device(ctx)), cvf_status_string(status), cvf_context_last_error(ctx));
        if (ok)
            ok = support_matmul_check(f, cvf_device_name(cvf_context_device(ctx)));
        support_matmul_teardown(f);
    }
    free(f);
    return ok;
}

bool support_activation_reads_aux_in(cvf_activation activation)
{
    return activation == CVF_ACTIVATION_DGELU_TANH || activation == CVF_ACTIVATION_DGELU_ERF;
}

bool support_activation_is_gelu(cvf_activation activation)
{
    return activation == CVF_ACTIVATION_GELU_TANH || activation == CVF_ACTIVATION_DGELU_TANH ||
           activation == CVF_ACTIVATION_GELU_ERF || activation == CVF_ACTIVATION_DGELU_ERF;
}

double support_gelu_a_range(int64_t k)
{
    if (k <= 0)
        return 1.0;
    double range = 6.0 / sqrt((double)k);
    return range > 4.0 ? 4.0 : range;
}

support_matmul_case support_make_matmul_case(int64_t m, int64_t n, int64_t k, const support_dtype_combo *d,
                                             int epilogue, unsigned layout, uint64_t seed)
{
    support_matmul_case c;
    memset(&c, 0, sizeof c);
    c.op = SUPPORT_OP_MATMUL;
    c.m = m;
    c.n = n;
    c.k = k;
    c.a_dtype = d->a;
    c.b_dtype = d->b;
    c.c_dtype = d->c;
    c.epilogue_in_dtype = d->epilogue_in;
    c.epilogue_out_dtype = d->epilogue_out;
    c.activation = (cvf_activation)(epilogue & 3);
    if ((epilogue & SUPPORT_EPILOGUE_ERF) && c.activation == CVF_ACTIVATION_GELU_TANH)
        c.activation = CVF_ACTIVATION_GELU_ERF;
    if ((epilogue & SUPPORT_EPILOGUE_ERF) && c.activation == CVF_ACTIVATION_DGELU_TANH)
        c.activation = CVF_ACTIVATION_DGELU_ERF;
    c.bias = (epilogue >> 2) & 1;
    c.aux_out = (epilogue >> 3) & 1;
    c.bias_grad = (epilogue >> 4) & 1;
    c.layout = layout;
    if (support_activation_is_gelu(c.activation)) {
        c.a_range = support_gelu_a_range(k);
        c.bias_range = 2.0;
    }
    c.seed = seed;
    return c;
}

/* ---- per-element bounds -------------------------------------------------------------------- */

double support_unit_roundoff(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return ldexp(1.0, -24);
    case CVF_F16: return ldexp(1.0, -11);
    case CVF_BF16: return ldexp(1.0, -8);
    case CVF_F64: return ldexp(1.0, -53);
    }
    return 1.0;
}

double support_underflow_floor(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return ldexp(1.0, -150);
    case CVF_F16: return ldexp(1.0, -25);
    case CVF_BF16: return ldexp(1.0, -134);
    case CVF_F64: return 0.0;
    }
    return 0.0;
}

cvf_matrix support_vector_as_row(const cvf_vector *v)
{
    cvf_matrix m = {v->data, v->dtype, 1, v->length, v->length * v->stride, v->stride};
    return m;
}

cvf_matrix support_row_slice(const cvf_matrix *m, int64_t offset, int64_t length)
{
    cvf_matrix v = *m;
    v.data = (char *)m->data + (size_t)(offset * m->row_stride) * cvf_dtype_size(m->dtype);
    v.rows = length;
    return v;
}

cvf_matrix support_col_slice(const cvf_matrix *m, int64_t offset, int64_t length)
{
    cvf_matrix v = *m;
    v.data = (char *)m->data + (size_t)(offset * m->col_stride) * cvf_dtype_size(m->dtype);
    v.cols = length;
    return v;
}

/* Returns |got - want| / bound for one element: 0 when equal (NaN matching NaN, or equal
 * infinities), +Inf for a non-finite mismatch, and for any difference where the bound is 0. */
static double bounded_ratio(double got, double want, double bound)
{
    if (got == want || (isnan(got) && isnan(want)))
        return 0.0;
    if (!isfinite(got) || !isfinite(want))
        return INFINITY;
    double diff = fabs(got - want);
    return bound > 0.0 ? diff / bound : INFINITY;
}

void support_compare_bounded(const cvf_matrix *got, const cvf_matrix *want, const cvf_matrix *bound,
                             support_bound_report *report)
{
    support_bound_report r = {0, -1, -1, -1, -1, 0.0, 0.0, 0.0, -1.0};
    for (int64_t i = 0; i < got->rows; i++)
        for (int64_t j = 0; j < got->cols; j++) {
            double g = cvft_matrix_get(got, i, j), w = cvft_matrix_get(want, i, j), b = cvft_matrix_get(bound, i, j);
            double ratio = bounded_ratio(g, w, b);
            if (ratio > 1.0) {
                if (r.violations++ == 0) {
                    r.first_i = i;
                    r.first_j = j;
                }
            }
            if (ratio > r.worst_ratio) {
                r.worst_ratio = ratio;
                r.worst_i = i;
                r.worst_j = j;
                r.worst_got = g;
                r.worst_want = w;
                r.worst_bound = b;
            }
        }
    if (r.worst_ratio < 0.0)
        r.worst_ratio = 0.0;
    *report = r;
}

bool support_check_bounded(const char *label, const char *name, const cvf_matrix *got, const cvf_matrix *want,
                           const cvf_matrix *bound, support_bound_report *report)
{
    support_bound_report r;
    support_compare_bounded(got, want, bound, &r);
    if (report)
        *report = r;
    if (r.violations == 0)
        return CHECK(true, "%s", name);
    double first_got = cvft_matrix_get(got, r.first_i, r.first_j);
    double first_want = cvft_matrix_get(want, r.first_i, r.first_j);
    return CHECK(
        false,
        "%s: output %s (%s, %lld x %lld): %lld of %lld elements outside their error bound; first [%lld, %lld]: "
        "got %.9g, want %.9g, |diff| %.3g > bound %.3g; worst [%lld, %lld]: got %.9g, want %.9g, |diff| %.3g "
        "= %.3g x bound %.3g",
        label, name, cvf_dtype_name(got->dtype), (long long)got->rows, (long long)got->cols, (long long)r.violations,
        (long long)(got->rows * got->cols), (long long)r.first_i, (long long)r.first_j, first_got, first_want,
        fabs(first_got - first_want), cvft_matrix_get(bound, r.first_i, r.first_j), (long long)r.worst_i,
        (long long)r.worst_j, r.worst_got, r.worst_want, fabs(r.worst_got - r.worst_want), r.worst_ratio,
        r.worst_bound);
}

/*
 * Argument validation shared by every entry point. Each check names the argument, says what was
 * expected and what was given, and returns a specific status; nothing is touched before all
 * checks of a call have passed.
 */
#include <stdint.h>

#include "core/internal.h"

/* Returns true for a dtype value the library knows. */
static bool dtype_is_known(cvf_dtype dtype)
{
    return cvf_dtype_size(dtype) != 0;
}

/* Checks dtype: known, and accepted by the context's backend. */
static cvf_status check_dtype(cvf_context *ctx, const char *name, cvf_dtype dtype)
{
    if (!dtype_is_known(dtype))
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "%s: dtype %d is not a cvf_dtype value", name, (int)dtype);
    if (!ctx->backend->supports_dtype(dtype))
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "%s: dtype %s is not supported on the %s device%s", name,
                        cvf_dtype_name(dtype), cvf_device_name(ctx->device),
                        dtype == CVF_F64 ? " (f64 is for the reference device only)" : "");
    return CVF_STATUS_SUCCESS;
}

/* Checks that a non-empty view's data pointer is aligned to its element size (loads of
 * misaligned elements are undefined behaviour in C, and slow or faulting on some machines). */
static cvf_status check_alignment(cvf_context *ctx, const char *name, const void *data, cvf_dtype dtype)
{
    size_t size = cvf_dtype_size(dtype);
    if (data && (uintptr_t)data % size != 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "%s: data pointer %p is not aligned to the %zu-byte size of %s",
                        name, data, size, cvf_dtype_name(dtype));
    return CVF_STATUS_SUCCESS;
}

/*
 * Computes the byte span of a view with up to two dimensions (a vector passes count1 = 1).
 * Returns SIZE_OVERFLOW when the last element's offset, the byte count or the end address does
 * not fit. Dimensions and strides are already known to be non-negative.
 */
static cvf_status view_span(cvf_context *ctx, const char *name, const void *data, size_t element_size, int64_t count0,
                            int64_t stride0, int64_t count1, int64_t stride1, cvf_span *span)
{
    span->begin = span->end = (uintptr_t)data;
    if (count0 == 0 || count1 == 0)
        return CVF_STATUS_SUCCESS;
    int64_t last0, last1, last, elements, bytes;
    bool overflow = __builtin_mul_overflow(count0 - 1, stride0, &last0) ||
                    __builtin_mul_overflow(count1 - 1, stride1, &last1) ||
                    __builtin_add_overflow(last0, last1, &last) || __builtin_add_overflow(last, 1, &elements) ||
                    __builtin_mul_overflow(elements, (int64_t)element_size, &bytes);
    uintptr_t end;
    if (!overflow && (uint64_t)bytes > (uint64_t)PTRDIFF_MAX)
        overflow = true;
    if (!overflow && __builtin_add_overflow((uintptr_t)data, (uintptr_t)bytes, &end))
        overflow = true;
    if (overflow)
        return cvf_fail(ctx, CVF_STATUS_SIZE_OVERFLOW,
                        "%s: the view's byte extent (%lld x %lld elements, strides %lld and %lld, %zu bytes each) "
                        "does not fit in the address space",
                        name, (long long)count0, (long long)count1, (long long)stride0, (long long)stride1,
                        element_size);
    span->end = end;
    return CVF_STATUS_SUCCESS;
}

/* Greatest common divisor of two positive numbers. */
static int64_t gcd(int64_t x, int64_t y)
{
    while (y != 0) {
        int64_t r = x % y;
        x = y;
        y = r;
    }
    return x;
}

/*
 * True when a 2-D layout maps distinct indices to distinct elements (exact). Two elements
 * collide when di * stride0 = dj * stride1 for some |di| < count0, |dj| < count1, not both zero;
 * the smallest such steps are di = stride1 / g, dj = stride0 / g with g = gcd(stride0, stride1).
 */
static bool layout_is_one_to_one(int64_t count0, int64_t stride0, int64_t count1, int64_t stride1)
{
    if (count0 == 0 || count1 == 0)
        return true; /* no elements, nothing to share */
    if ((count0 > 1 && stride0 == 0) || (count1 > 1 && stride1 == 0))
        return false;
    if (count0 == 1 || count1 == 1)
        return true;
    int64_t g = gcd(stride0, stride1);
    return !(stride1 / g < count0 && stride0 / g < count1);
}

cvf_status cvf_check_matrix(cvf_context *ctx, const char *name, const cvf_matrix *m, bool is_output, cvf_span *span)
{
    if (!m)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "%s: the matrix view pointer is NULL", name);
    if (m->rows < 0 || m->cols < 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "%s: shape (%lld x %lld) has a negative dimension", name,
                        (long long)m->rows, (long long)m->cols);
    if (m->row_stride < 0 || m->col_stride < 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "%s: strides (row %lld, col %lld) must be >= 0", name,
                        (long long)m->row_stride, (long long)m->col_stride);
    cvf_status status = check_dtype(ctx, name, m->dtype);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    bool empty = m->rows == 0 || m->cols == 0;
    if (!empty && !m->data)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "%s: data is NULL for a non-empty (%lld x %lld) view", name,
                        (long long)m->rows, (long long)m->cols);
    if (!empty && (status = check_alignment(ctx, name, m->data, m->dtype)))
        return status;
    status =
        view_span(ctx, name, m->data, cvf_dtype_size(m->dtype), m->rows, m->row_stride, m->cols, m->col_stride, span);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (is_output && !layout_is_one_to_one(m->rows, m->row_stride, m->cols, m->col_stride))
        return cvf_fail(ctx, CVF_STATUS_OVERLAPPING_OUTPUT,
                        "%s: output strides (row %lld, col %lld) make two elements of the (%lld x %lld) view share "
                        "memory (e.g. row-major needs row stride >= cols with col stride 1)",
                        name, (long long)m->row_stride, (long long)m->col_stride, (long long)m->rows,
                        (long long)m->cols);
    return CVF_STATUS_SUCCESS;
}

cvf_status cvf_check_vector(cvf_context *ctx, const char *name, const cvf_vector *v, bool is_output, cvf_span *span)
{
    if (!v)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "%s: the vector view pointer is NULL", name);
    if (v->length < 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "%s: length %lld is negative", name, (long long)v->length);
    if (v->stride < 0)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "%s: stride %lld must be >= 0", name, (long long)v->stride);
    cvf_status status = check_dtype(ctx, name, v->dtype);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (v->length > 0 && !v->data)
        return cvf_fail(ctx, CVF_STATUS_NULL_POINTER, "%s: data is NULL for a vector of length %lld", name,
                        (long long)v->length);
    if (v->length > 0 && (status = check_alignment(ctx, name, v->data, v->dtype)))
        return status;
    status = view_span(ctx, name, v->data, cvf_dtype_size(v->dtype), v->length, v->stride, 1, 0, span);
    if (status != CVF_STATUS_SUCCESS)
        return status;
    if (is_output && v->length > 1 && v->stride < 1)
        return cvf_fail(ctx, CVF_STATUS_OVERLAPPING_OUTPUT,
                        "%s: output stride 0 makes all %lld elements share memory (expected >= 1)", name,
                        (long long)v->length);
    return CVF_STATUS_SUCCESS;
}

cvf_status cvf_check_matrix_shape(cvf_context *ctx, const char *name, const cvf_matrix *m, int64_t rows, int64_t cols,
                                  const char *expected)
{
    if (m->rows == rows && m->cols == cols)
        return CVF_STATUS_SUCCESS;
    return cvf_fail(ctx, CVF_STATUS_SHAPE_MISMATCH, "%s: shape (%lld x %lld) given, expected %s = (%lld x %lld)", name,
                    (long long)m->rows, (long long)m->cols, expected, (long long)rows, (long long)cols);
}

cvf_status cvf_check_vector_length(cvf_context *ctx, const char *name, const cvf_vector *v, int64_t length,
                                   const char *expected)
{
    if (v->length == length)
        return CVF_STATUS_SUCCESS;
    return cvf_fail(ctx, CVF_STATUS_SHAPE_MISMATCH, "%s: length %lld given, expected %s = %lld", name,
                    (long long)v->length, expected, (long long)length);
}

/* True when the byte ranges [first, last element] of two non-empty views intersect. This is
 * conservative for interleaved strided views (two outputs in alternate elements of one array are
 * rejected though they share no byte), and exact for everything else. */
static bool spans_overlap(cvf_span x, cvf_span y)
{
    return x.begin < x.end && y.begin < y.end && x.begin < y.end && y.begin < x.end;
}

cvf_status cvf_check_aliasing(cvf_context *ctx, const cvf_operand *operands, int count)
{
    for (int i = 0; i < count; i++) {
        if (!operands[i].is_output)
            continue;
        for (int j = 0; j < count; j++) {
            if (j == i || (operands[j].is_output && j < i))
                continue; /* each pair of outputs once */
            if (spans_overlap(operands[i].span, operands[j].span))
                return cvf_fail(ctx, CVF_STATUS_ALIASED_OUTPUT,
                                "%s: output memory overlaps %s %s (outputs must not share memory with any other "
                                "operand)",
                                operands[i].name, operands[j].is_output ? "output" : "input", operands[j].name);
        }
    }
    return CVF_STATUS_SUCCESS;
}

/* Validates the epilogue's members against C's shape and collects their spans. */
static cvf_status validate_epilogue(cvf_context *ctx, const cvf_epilogue *ep, const cvf_matrix *c,
                                    cvf_operand *operands, int *count)
{
    cvf_status status;
    if (ep->activation < CVF_ACTIVATION_NONE || ep->activation > CVF_ACTIVATION_DGELU_ERF)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "epilogue.activation: %d is not a cvf_activation value",
                        (int)ep->activation);
    bool needs_aux_in = ep->activation == CVF_ACTIVATION_DGELU_TANH || ep->activation == CVF_ACTIVATION_DGELU_ERF;
    if (needs_aux_in && !ep->aux_in)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE,
                        "epilogue.aux_in: activation %s needs aux_in (the saved pre-activation), got NULL",
                        cvf_activation_name(ep->activation));
    if (!needs_aux_in && ep->aux_in)
        return cvf_fail(ctx, CVF_STATUS_INVALID_VALUE, "epilogue.aux_in: given, but activation %s does not read it",
                        cvf_activation_name(ep->activation));
    if (ep->bias) {
        cvf_operand *op = &operands[(*count)++];
        *op = (cvf_operand){"epilogue.bias", {0, 0}, false};
        if ((status = cvf_check_vector(ctx, op->name, ep->bias, false, &op->span)) ||
            (status = cvf_check_vector_length(ctx, op->name, ep->bias, c->cols, "c.cols")))
            return status;
    }
    if (ep->aux_in) {
        cvf_operand *op = &operands[(*count)++];
        *op = (cvf_operand){"epilogue.aux_in", {0, 0}, false};
        if ((status = cvf_check_matrix(ctx, op->name, ep->aux_in, false, &op->span)) ||
            (status = cvf_check_matrix_shape(ctx, op->name, ep->aux_in, c->rows, c->cols, "c's shape")))
            return status;
    }
    if (ep->aux_out) {
        cvf_operand *op = &operands[(*count)++];
        *op = (cvf_operand){"epilogue.aux_out", {0, 0}, true};
        if ((status = cvf_check_matrix(ctx, op->name, ep->aux_out, true, &op->span)) ||
            (status = cvf_check_matrix_shape(ctx, op->name, ep->aux_out, c->rows, c->cols, "c's shape")))
            return status;
    }
    if (ep->bias_grad) {
        cvf_operand *op = &operands[(*count)++];
        *op = (cvf_operand){"epilogue.bias_grad", {0, 0}, true};
        if ((status = cvf_check_vector(ctx, op->name, ep->bias_grad, true, &op->span)) ||
            (status = cvf_check_vector_length(ctx, op->name, ep->bias_grad, c->cols, "c.cols")))
            return status;
    }
    return CVF_STATUS_SUCCESS;
}

cvf_status cvf_validate_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                               const cvf_epilogue *epilogue)
{
    cvf_operand operands[7] = {
        {"a", {0, 0}, false},
        {"b", {0, 0}, false},
        {"c", {0, 0}, true},
    };
    int count = 3;
    cvf_status status;
    if ((status = cvf_check_matrix(ctx, "a", a, false, &operands[0].span)) ||
        (status = cvf_check_matrix(ctx, "b", b, false, &operands[1].span)) ||
        (status = cvf_check_matrix(ctx, "c", c, true, &operands[2].span)))
        return status;
    if (a->cols != b->rows)
        return cvf_fail(ctx, CVF_STATUS_SHAPE_MISMATCH,
                        "b: shape (%lld x %lld) given, expected (a.cols = %lld) rows to multiply a (%lld x %lld)",
                        (long long)b->rows, (long long)b->cols, (long long)a->cols, (long long)a->rows,
                        (long long)a->cols);
    if ((status = cvf_check_matrix_shape(ctx, "c", c, a->rows, b->cols, "(a.rows x b.cols)")))
        return status;
    if (epilogue && (status = validate_epilogue(ctx, epilogue, c, operands, &count)))
        return status;
    return cvf_check_aliasing(ctx, operands, count);
}

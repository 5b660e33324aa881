/*
 * The float64 reference device: the test oracle. Every operation converts its inputs to dense
 * float64 arrays, computes in float64 with plain loops straight from the formulas (no blocking,
 * no fusion, no threads), and converts the results to the output dtypes. The MLP forward and
 * backward are written out operation by operation, independent of the core's fused plan, so a
 * mistake in that plan cannot hide in the oracle too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* A dense row-major float64 array. */
typedef struct dense {
    double *v;
    int64_t rows, cols;
} dense;

/* Returns whether the reference device reads and writes dtype: all of them. */
static bool reference_supports_dtype(cvf_dtype dtype)
{
    return cvf_dtype_size(dtype) != 0;
}

/* Reads element at offset (in elements) of data as a double. */
static double load(const void *data, cvf_dtype dtype, int64_t offset)
{
    switch (dtype) {
    case CVF_F32: return ((const float *)data)[offset];
    case CVF_F16: return cvf_f16_to_f32(((const uint16_t *)data)[offset]);
    case CVF_BF16: return cvf_bf16_to_f32(((const uint16_t *)data)[offset]);
    case CVF_F64: return ((const double *)data)[offset];
    }
    return NAN;
}

/* Writes value at offset of data, correctly rounded to dtype. */
static void store(void *data, cvf_dtype dtype, int64_t offset, double value)
{
    switch (dtype) {
    case CVF_F32: ((float *)data)[offset] = (float)value; break;
    case CVF_F16: ((uint16_t *)data)[offset] = cvf_f64_to_f16(value); break;
    case CVF_BF16: ((uint16_t *)data)[offset] = cvf_f64_to_bf16(value); break;
    case CVF_F64: ((double *)data)[offset] = value; break;
    }
}

/* Allocates a zeroed dense array; false when out of memory or rows * cols overflows (a view
 * with zero strides can be huge yet small in memory). */
static bool dense_alloc(dense *d, int64_t rows, int64_t cols)
{
    int64_t count;
    d->rows = rows;
    d->cols = cols;
    d->v = NULL;
    if (__builtin_mul_overflow(rows, cols, &count) || (uint64_t)count >= SIZE_MAX / sizeof(double))
        return false;
    d->v = calloc((size_t)count + 1, sizeof(double));
    return d->v != NULL;
}

/* Frees the arrays of a list. */
static void dense_free_all(dense *list, int count)
{
    for (int i = 0; i < count; i++)
        free(list[i].v);
}

/* Copies a matrix view into a new dense array. */
static bool dense_from_matrix(dense *d, const cvf_matrix *m)
{
    if (!dense_alloc(d, m->rows, m->cols))
        return false;
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++)
            d->v[i * m->cols + j] = load(m->data, m->dtype, i * m->row_stride + j * m->col_stride);
    return true;
}

/* Copies a vector view into a new dense (1 x length) array. */
static bool dense_from_vector(dense *d, const cvf_vector *v)
{
    if (!dense_alloc(d, 1, v->length))
        return false;
    for (int64_t i = 0; i < v->length; i++)
        d->v[i] = load(v->data, v->dtype, i * v->stride);
    return true;
}

/* Writes a dense array into a matrix view of the same shape. */
static void dense_to_matrix(const dense *d, const cvf_matrix *m)
{
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++)
            store(m->data, m->dtype, i * m->row_stride + j * m->col_stride, d->v[i * d->cols + j]);
}

/* Writes a dense (1 x length) array into a vector view. */
static void dense_to_vector(const dense *d, const cvf_vector *v)
{
    for (int64_t i = 0; i < v->length; i++)
        store(v->data, v->dtype, i * v->stride, d->v[i]);
}

/* Returns a new array holding the transpose of d. */
static bool transposed(dense *t, const dense *d)
{
    if (!dense_alloc(t, d->cols, d->rows))
        return false;
    for (int64_t i = 0; i < d->rows; i++)
        for (int64_t j = 0; j < d->cols; j++)
            t->v[j * d->rows + i] = d->v[i * d->cols + j];
    return true;
}

/* c = a @ b, the textbook sum over p of a[i, p] b[p, j]. c is allocated here. */
static bool plain_product(dense *c, const dense *a, const dense *b)
{
    if (!dense_alloc(c, a->rows, b->cols))
        return false;
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t p = 0; p < a->cols; p++) {
            double aip = a->v[i * a->cols + p];
            for (int64_t j = 0; j < b->cols; j++)
                c->v[i * b->cols + j] += aip * b->v[p * b->cols + j];
        }
    return true;
}

/* c = op(a) @ op(b), where op transposes (through a copy) when the flag is set. */
static bool product(dense *c, const dense *a, bool transpose_a, const dense *b, bool transpose_b)
{
    dense t[2] = {{0}};
    bool ok = (!transpose_a || transposed(&t[0], a)) && (!transpose_b || transposed(&t[1], b)) &&
              plain_product(c, transpose_a ? &t[0] : a, transpose_b ? &t[1] : b);
    dense_free_all(t, 2);
    return ok;
}

/* 2u = 2 sqrt(2/pi) (x + 0.044715 x^3), the argument of GELU-tanh's sigmoid. */
static double gelu_2u(double x)
{
    return 2.0 * CVF_GELU_K * (x + CVF_GELU_C * x * x * x);
}

/* gelu_tanh(x) = 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), computed as the equal
 * x / (1 + exp(-2u)): 1 + tanh u cancels to 0 in double below x ~ -9, where the true value is
 * still a normal fp32 number (about -1.6e-37 at x = -10); the sigmoid form keeps it. */
static double gelu(double x)
{
    return x / (1.0 + exp(-gelu_2u(x)));
}

/* d/dx gelu_tanh(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh u,
 * computed with s = 0.5 (1 + t) = 1 / (1 + exp(-2u)) and 1 - s = 1 / (1 + exp(2u)) (each without
 * cancellation in its tail) as s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2). Beyond
 * |x| = 1e10 it is its limit, 1 or 0, exactly (the formula would give inf * 0 there). */
static double gelu_derivative(double x)
{
    if (fabs(x) > 1e10)
        return x > 0.0 ? 1.0 : 0.0;
    double t = gelu_2u(x);
    double s = 1.0 / (1.0 + exp(-t)), one_minus_s = 1.0 / (1.0 + exp(t));
    return s + 2.0 * x * s * one_minus_s * CVF_GELU_K * (1.0 + 3.0 * CVF_GELU_C * x * x);
}

/* The exact GELU, x Phi(x), Phi(x) = erfc(-x / sqrt(2)) / 2 (erfc keeps the negative tail's
 * relative accuracy). */
static double gelu_erf(double x)
{
    return x * 0.5 * erfc(-x * M_SQRT1_2);
}

/* Its derivative Phi(x) + x phi(x); the limits 1 and 0 beyond |x| = 1e10 (no inf * 0). */
static double gelu_erf_derivative(double x)
{
    if (fabs(x) > 1e10)
        return x > 0.0 ? 1.0 : 0.0;
    return 0.5 * erfc(-x * M_SQRT1_2) + x * exp(-0.5 * x * x) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
}

/* Adds the rows of d into out, a (1 x d->cols) array. */
static void add_column_sums(dense *out, const dense *d)
{
    for (int64_t i = 0; i < d->rows; i++)
        for (int64_t j = 0; j < d->cols; j++)
            out->v[j] += d->v[i * d->cols + j];
}

/* Sums the rows of d into a new (1 x cols) array. */
static bool column_sums(dense *out, const dense *d)
{
    if (!dense_alloc(out, 1, d->cols))
        return false;
    add_column_sums(out, d);
    return true;
}

/* Returns the failure of an allocation. */
static cvf_status out_of_memory(cvf_context *ctx)
{
    return cvf_fail(ctx, CVF_STATUS_OUT_OF_MEMORY, "reference device: out of memory for float64 copies");
}

/* Applies bias, aux_out, activation and bias_grad to the float64 product, then stores C. */
static cvf_status apply_epilogue(cvf_context *ctx, dense *x, const cvf_matrix *c, const cvf_epilogue *ep)
{
    enum { BIAS, AUX_IN, SUMS, COUNT };
    dense t[COUNT] = {{0}};
    bool ok = (!ep->bias || dense_from_vector(&t[BIAS], ep->bias)) &&
              (!ep->aux_in || dense_from_matrix(&t[AUX_IN], ep->aux_in)) &&
              (!ep->bias_grad || dense_alloc(&t[SUMS], 1, x->cols)); /* all memory before any store */
    if (!ok) {
        dense_free_all(t, COUNT);
        return out_of_memory(ctx);
    }
    for (int64_t i = 0; i < x->rows; i++)
        for (int64_t j = 0; j < x->cols; j++) {
            double *v = &x->v[i * x->cols + j];
            if (ep->bias)
                *v += t[BIAS].v[j];
            if (ep->aux_out)
                store(ep->aux_out->data, ep->aux_out->dtype, i * ep->aux_out->row_stride + j * ep->aux_out->col_stride,
                      *v);
            switch (ep->activation) {
            case CVF_ACTIVATION_NONE: break;
            case CVF_ACTIVATION_RELU: *v = *v < 0.0 ? 0.0 : *v; break; /* NaN stays NaN */
            case CVF_ACTIVATION_GELU_TANH: *v = gelu(*v); break;
            case CVF_ACTIVATION_DGELU_TANH: *v *= gelu_derivative(t[AUX_IN].v[i * x->cols + j]); break;
            case CVF_ACTIVATION_GELU_ERF: *v = gelu_erf(*v); break;
            case CVF_ACTIVATION_DGELU_ERF: *v *= gelu_erf_derivative(t[AUX_IN].v[i * x->cols + j]); break;
            }
        }
    dense_to_matrix(x, c);
    if (ep->bias_grad) {
        add_column_sums(&t[SUMS], x);
        dense_to_vector(&t[SUMS], ep->bias_grad);
    }
    dense_free_all(t, COUNT);
    return CVF_STATUS_SUCCESS;
}

/* C = epilogue(A @ B) in float64. */
static cvf_status reference_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                   const cvf_epilogue *ep, void *workspace)
{
    (void)workspace; /* the oracle allocates its float64 copies itself */
    enum { A, B, C, COUNT };
    dense t[COUNT] = {{0}};
    if (!dense_from_matrix(&t[A], a) || !dense_from_matrix(&t[B], b) || !product(&t[C], &t[A], false, &t[B], false)) {
        dense_free_all(t, COUNT);
        return out_of_memory(ctx);
    }
    cvf_status status = apply_epilogue(ctx, &t[C], c, ep);
    dense_free_all(t, COUNT);
    return status;
}

/* out = column sums of x in float64. */
static cvf_status reference_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace)
{
    (void)workspace;
    dense t[2] = {{0}};
    if (!dense_from_matrix(&t[0], x) || !column_sums(&t[1], &t[0])) {
        dense_free_all(t, 2);
        return out_of_memory(ctx);
    }
    dense_to_vector(&t[1], out);
    dense_free_all(t, 2);
    return CVF_STATUS_SUCCESS;
}

/* The MLP forward, operation by operation, in float64. */
static cvf_status reference_mlp_forward(cvf_context *ctx, const cvf_mlp_forward_args *args)
{
    enum { X, W1, B1, W2, B2, FC1, GELU, Y, COUNT };
    dense t[COUNT] = {{0}};
    bool ok = dense_from_matrix(&t[X], &args->hidden_state) && dense_from_matrix(&t[W1], &args->fc1_weight) &&
              dense_from_vector(&t[B1], &args->fc1_bias) && dense_from_matrix(&t[W2], &args->fc2_weight) &&
              dense_from_vector(&t[B2], &args->fc2_bias) && product(&t[FC1], &t[X], false, &t[W1], true) &&
              dense_alloc(&t[GELU], t[FC1].rows, t[FC1].cols);
    if (ok) {
        for (int64_t i = 0; i < t[FC1].rows; i++)
            for (int64_t j = 0; j < t[FC1].cols; j++) {
                double *f = &t[FC1].v[i * t[FC1].cols + j];
                *f += t[B1].v[j];
                t[GELU].v[i * t[FC1].cols + j] = args->gelu == CVF_GELU_ERF ? gelu_erf(*f) : gelu(*f);
            }
        ok = product(&t[Y], &t[GELU], false, &t[W2], true);
    }
    if (ok) {
        if (cvf_tp_adds_fc2_bias(&args->tp)) /* split over ranks: rank 0's partial carries fc2_bias */
            for (int64_t i = 0; i < t[Y].rows; i++)
                for (int64_t j = 0; j < t[Y].cols; j++)
                    t[Y].v[i * t[Y].cols + j] += t[B2].v[j];
        if (args->fc1_output.data) /* optional (inference) */
            dense_to_matrix(&t[FC1], &args->fc1_output);
        if (args->gelu_output.data)
            dense_to_matrix(&t[GELU], &args->gelu_output);
        dense_to_matrix(&t[Y], &args->output);
    }
    dense_free_all(t, COUNT);
    return ok ? CVF_STATUS_SUCCESS : out_of_memory(ctx);
}

/* The seed's seven backward operations in float64, with grad_gelu_output materialised. */
static cvf_status reference_mlp_backward(cvf_context *ctx, const cvf_mlp_backward_args *args)
{
    enum { GO, X, W1, W2, FC1, GELU, GGELU, GW2, GB2, GB1, GW1, GX, COUNT };
    dense t[COUNT] = {{0}};
    bool ok = dense_from_matrix(&t[GO], &args->grad_output) && dense_from_matrix(&t[X], &args->hidden_state) &&
              dense_from_matrix(&t[W1], &args->fc1_weight) && dense_from_matrix(&t[W2], &args->fc2_weight) &&
              dense_from_matrix(&t[FC1], &args->fc1_output) && dense_from_matrix(&t[GELU], &args->gelu_output) &&
              column_sums(&t[GB2], &t[GO]) &&                    /* grad_fc2_bias */
              product(&t[GW2], &t[GO], true, &t[GELU], false) && /* grad_fc2_weight */
              product(&t[GGELU], &t[GO], false, &t[W2], false);  /* grad_gelu_output */
    if (ok) {
        for (int64_t i = 0; i < t[GGELU].rows * t[GGELU].cols; i++) /* grad_fc1_output, in place */
            t[GGELU].v[i] *=
                args->gelu == CVF_GELU_ERF ? gelu_erf_derivative(t[FC1].v[i]) : gelu_derivative(t[FC1].v[i]);
        ok = column_sums(&t[GB1], &t[GGELU]) &&                 /* grad_fc1_bias */
             product(&t[GW1], &t[GGELU], true, &t[X], false) && /* grad_fc1_weight */
             product(&t[GX], &t[GGELU], false, &t[W1], false);  /* grad_hidden_state */
    }
    if (ok) {
        dense_to_matrix(&t[GX], &args->grad_hidden_state);
        dense_to_matrix(&t[GW1], &args->grad_fc1_weight);
        dense_to_vector(&t[GB1], &args->grad_fc1_bias);
        dense_to_matrix(&t[GW2], &args->grad_fc2_weight);
        dense_to_vector(&t[GB2], &args->grad_fc2_bias);
    }
    dense_free_all(t, COUNT);
    return ok ? CVF_STATUS_SUCCESS : out_of_memory(ctx);
}

/* The oracle needs no workspace from the core. */
static size_t reference_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                         const cvf_matrix *c, const cvf_epilogue *ep)
{
    (void)ctx, (void)a, (void)b, (void)c, (void)ep;
    return 0;
}

/* The oracle needs no workspace from the core. */
static size_t reference_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x)
{
    (void)ctx, (void)x;
    return 0;
}

const cvf_backend cvf_reference_backend = {
    .name = "reference",
    .accumulate_dtype = CVF_F64,
    .supports_dtype = reference_supports_dtype,
    .workspace_alloc = cvf_host_workspace_alloc, /* never asked for: sizes are 0 */
    .workspace_free = cvf_host_workspace_free,
    .matmul_workspace = reference_matmul_workspace,
    .matmul = reference_matmul,
    .column_sum_workspace = reference_column_sum_workspace,
    .column_sum = reference_column_sum,
    .mlp_forward_oracle = reference_mlp_forward,
    .mlp_backward_oracle = reference_mlp_backward,
};

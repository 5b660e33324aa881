/*
 * Checking helpers shared by the CLI (--check) and the test suite (see harness.h).
 *
 * Element access goes through the library's own conversions (cvf_f16_to_f32, cvf_f32_to_f16,
 * cvf_bf16_to_f32, cvf_f32_to_bf16). Writing a double into a 16-bit element first rounds it to
 * binary32 "to odd" (truncate, then set the last bit when anything was dropped) and then to the
 * 16-bit type to nearest even: binary32 keeps at least two more bits than either 16-bit format, so
 * this pair of roundings equals one correct rounding of the double (no double-rounding error).
 */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- random numbers ------------------------------------------------------------------------ */

cvft_rng cvft_rng_make(uint64_t seed)
{
    cvft_rng rng = {seed};
    return rng;
}

uint64_t cvft_rng_next(cvft_rng *rng)
{
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double cvft_rng_uniform(cvft_rng *rng, double lo, double hi)
{
    double unit = (double)(cvft_rng_next(rng) >> 11) * 0x1.0p-53; /* [0, 1) with 53 random bits */
    double value = lo + (hi - lo) * unit;
    if (value >= hi && hi > lo) /* the multiply-add may round up onto hi */
        value = nextafter(hi, lo);
    return value;
}

/* ---- element access ------------------------------------------------------------------------ */

/* Reads the element at offset (in elements) of data, of dtype, as a double. */
static double element_load(const void *data, cvf_dtype dtype, int64_t offset)
{
    switch (dtype) {
    case CVF_F32: return ((const float *)data)[offset];
    case CVF_F16: return cvf_f16_to_f32(((const uint16_t *)data)[offset]);
    case CVF_BF16: return cvf_bf16_to_f32(((const uint16_t *)data)[offset]);
    case CVF_F64: return ((const double *)data)[offset];
    }
    return NAN;
}

/* Writes value into the element at offset of data, rounded once to dtype (nearest even). */
static void element_store(void *data, cvf_dtype dtype, int64_t offset, double value)
{
    switch (dtype) {
    case CVF_F32: ((float *)data)[offset] = (float)value; break;
    case CVF_F16: ((uint16_t *)data)[offset] = cvf_f64_to_f16(value); break;
    case CVF_BF16: ((uint16_t *)data)[offset] = cvf_f64_to_bf16(value); break;
    case CVF_F64: ((double *)data)[offset] = value; break;
    }
}

/* Returns the element offset of (i, j) in m. */
static int64_t matrix_offset(const cvf_matrix *m, int64_t i, int64_t j)
{
    return i * m->row_stride + j * m->col_stride;
}

double cvft_matrix_get(const cvf_matrix *m, int64_t i, int64_t j)
{
    return element_load(m->data, m->dtype, matrix_offset(m, i, j));
}

void cvft_matrix_set(const cvf_matrix *m, int64_t i, int64_t j, double value)
{
    element_store(m->data, m->dtype, matrix_offset(m, i, j), value);
}

double cvft_vector_get(const cvf_vector *v, int64_t i)
{
    return element_load(v->data, v->dtype, i * v->stride);
}

void cvft_vector_set(const cvf_vector *v, int64_t i, double value)
{
    element_store(v->data, v->dtype, i * v->stride, value);
}

void cvft_matrix_fill_uniform(const cvf_matrix *m, cvft_rng *rng, double lo, double hi)
{
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++)
            cvft_matrix_set(m, i, j, cvft_rng_uniform(rng, lo, hi));
}

void cvft_vector_fill_uniform(const cvf_vector *v, cvft_rng *rng, double lo, double hi)
{
    for (int64_t i = 0; i < v->length; i++)
        cvft_vector_set(v, i, cvft_rng_uniform(rng, lo, hi));
}

/* ---- allocation ---------------------------------------------------------------------------- */

/* Returns a zeroed, 64-byte aligned block of count elements of size bytes (at least one byte, so
 * that an empty view still gets a pointer), or NULL on overflow or out of memory. */
static void *aligned_zeroed(int64_t count, size_t size)
{
    if (count < 0 || size == 0 || (uint64_t)count > (SIZE_MAX - 64) / size)
        return NULL;
    size_t bytes = (size_t)count * size;
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0)
        rounded = 64;
    void *block = aligned_alloc(64, rounded);
    if (block)
        memset(block, 0, rounded);
    return block;
}

/* Returns rows * cols in *count, or false when negative or overflowing. */
static int element_count(int64_t rows, int64_t cols, int64_t *count)
{
    if (rows < 0 || cols < 0)
        return 0;
    if (rows != 0 && cols > INT64_MAX / rows)
        return 0;
    *count = rows * cols;
    return 1;
}

int cvft_matrix_alloc(cvf_dtype dtype, int64_t rows, int64_t cols, cvf_matrix *out)
{
    int64_t count;
    if (!element_count(rows, cols, &count))
        return -1;
    void *data = aligned_zeroed(count, cvf_dtype_size(dtype));
    if (!data)
        return -1;
    *out = cvf_matrix_row_major(data, dtype, rows, cols);
    return 0;
}

int cvft_vector_alloc(cvf_dtype dtype, int64_t length, cvf_vector *out)
{
    if (length < 0)
        return -1;
    void *data = aligned_zeroed(length, cvf_dtype_size(dtype));
    if (!data)
        return -1;
    *out = cvf_vector_dense(data, dtype, length);
    return 0;
}

int cvft_matrix_to_f64(const cvf_matrix *m, cvf_matrix *out)
{
    if (cvft_matrix_alloc(CVF_F64, m->rows, m->cols, out) != 0)
        return -1;
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++)
            cvft_matrix_set(out, i, j, cvft_matrix_get(m, i, j));
    return 0;
}

int cvft_vector_to_f64(const cvf_vector *v, cvf_vector *out)
{
    if (cvft_vector_alloc(CVF_F64, v->length, out) != 0)
        return -1;
    for (int64_t i = 0; i < v->length; i++)
        cvft_vector_set(out, i, cvft_vector_get(v, i));
    return 0;
}

/* ---- errors -------------------------------------------------------------------------------- */

/* Running sums of a relative Frobenius error. */
typedef struct error_sums {
    double diff2; /* sum of (got - want)^2 over elements where both are finite */
    double want2; /* sum of want^2 over finite want */
    int mismatch; /* a non-finite value on one side not matched on the other */
} error_sums;

/* Adds one element pair to the sums. NaN matches NaN (any sign or payload), an infinity matches
 * the same infinity; every other non-finite pair is a mismatch. */
static void error_add(error_sums *s, double got, double want)
{
    if (isfinite(got) && isfinite(want)) {
        double d = got - want;
        s->diff2 += d * d;
        s->want2 += want * want;
        return;
    }
    if (isnan(got) && isnan(want))
        return;
    if (isinf(got) && isinf(want) && got == want)
        return;
    s->mismatch = 1;
}

/* Returns the relative error of the sums (absolute when want is all zeros). */
static double error_finish(const error_sums *s)
{
    if (s->mismatch)
        return INFINITY;
    double diff = sqrt(s->diff2);
    double want = sqrt(s->want2);
    return want == 0.0 ? diff : diff / want;
}

double cvft_matrix_rel_error(const cvf_matrix *got, const cvf_matrix *want)
{
    if (got->rows != want->rows || got->cols != want->cols)
        return INFINITY;
    error_sums s = {0.0, 0.0, 0};
    for (int64_t i = 0; i < got->rows; i++)
        for (int64_t j = 0; j < got->cols; j++)
            error_add(&s, cvft_matrix_get(got, i, j), cvft_matrix_get(want, i, j));
    return error_finish(&s);
}

double cvft_vector_rel_error(const cvf_vector *got, const cvf_vector *want)
{
    if (got->length != want->length)
        return INFINITY;
    error_sums s = {0.0, 0.0, 0};
    for (int64_t i = 0; i < got->length; i++)
        error_add(&s, cvft_vector_get(got, i), cvft_vector_get(want, i));
    return error_finish(&s);
}

double cvft_tolerance(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return 1e-5;
    case CVF_F16: return 2e-3;
    case CVF_BF16: return 1e-2;
    case CVF_F64: return 1e-12;
    }
    return 0.0;
}

/* ---- misc ---------------------------------------------------------------------------------- */

int cvft_dtype_parse(const char *name, cvf_dtype *dtype)
{
    static const cvf_dtype all[] = {CVF_F32, CVF_F16, CVF_BF16, CVF_F64};
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, cvf_dtype_name(all[i])) == 0) {
            *dtype = all[i];
            return 0;
        }
    return -1;
}

double cvft_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Checking helpers shared by the CLI (--check) and the test suite: deterministic random inputs,
 * element access on any strided view, float64 copies for the reference device, and the
 * relative Frobenius error with the per-dtype tolerances. Not part of the library's API.
 */
#ifndef CVF_TOOLS_HARNESS_H
#define CVF_TOOLS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "cvfuse.h"

/* splitmix64: a small, fast, deterministic generator. */
typedef struct cvft_rng {
    uint64_t state;
} cvft_rng;

/* Returns a generator seeded with seed. */
cvft_rng cvft_rng_make(uint64_t seed);

/* Returns the next 64 random bits. */
uint64_t cvft_rng_next(cvft_rng *rng);

/* Returns a uniform double in [lo, hi). */
double cvft_rng_uniform(cvft_rng *rng, double lo, double hi);

/* Reads element (i, j) of m as a double (exact for every dtype). */
double cvft_matrix_get(const cvf_matrix *m, int64_t i, int64_t j);

/* Writes value into element (i, j) of m, rounded to m's dtype (nearest even, one correct rounding
 * of the double: 16-bit types go through binary32 rounded to odd, which cannot double-round). */
void cvft_matrix_set(const cvf_matrix *m, int64_t i, int64_t j, double value);

/* Reads element i of v as a double. */
double cvft_vector_get(const cvf_vector *v, int64_t i);

/* Writes value into element i of v, rounded to v's dtype. */
void cvft_vector_set(const cvf_vector *v, int64_t i, double value);

/* Fills every element of the view with uniform values in [lo, hi), rounded to its dtype. */
void cvft_matrix_fill_uniform(const cvf_matrix *m, cvft_rng *rng, double lo, double hi);
void cvft_vector_fill_uniform(const cvf_vector *v, cvft_rng *rng, double lo, double hi);

/* Makes a malloc'd dense row-major float64 copy of m, viewed as *out (dtype CVF_F64). Returns 0,
 * or -1 when out of memory. Free out->data with free() (never NULL after success, even when
 * empty). */
int cvft_matrix_to_f64(const cvf_matrix *m, cvf_matrix *out);
int cvft_vector_to_f64(const cvf_vector *v, cvf_vector *out);

/* Allocates a dense row-major matrix (64-byte aligned, zeroed) of dtype; free data with free().
 * Returns 0, or -1 when out of memory or the size overflows. */
int cvft_matrix_alloc(cvf_dtype dtype, int64_t rows, int64_t cols, cvf_matrix *out);
int cvft_vector_alloc(cvf_dtype dtype, int64_t length, cvf_vector *out);

/* Relative Frobenius error ||got - want|| / ||want|| over every element (want usually F64 from the
 * reference device). When ||want|| == 0 returns ||got - want||. NaN or Inf in got where want is
 * finite gives +Inf; NaN matching NaN (or equal infinities) counts as no error; any other
 * non-finite mismatch (e.g. finite got where want is NaN) and a shape mismatch give +Inf. */
double cvft_matrix_rel_error(const cvf_matrix *got, const cvf_matrix *want);
double cvft_vector_rel_error(const cvf_vector *got, const cvf_vector *want);

/* The relative Frobenius tolerance for outputs of dtype: f32 1e-5, f16 2e-3, bf16 1e-2, f64 1e-12. */
double cvft_tolerance(cvf_dtype dtype);

/* Parses "f32" / "f16" / "bf16" / "f64". Returns 0 and sets *dtype, or -1. */
int cvft_dtype_parse(const char *name, cvf_dtype *dtype);

/* Returns monotonic wall-clock time in seconds. */
double cvft_now_seconds(void);

#endif /* CVF_TOOLS_HARNESS_H */

/*
 * The baselines of `cvfuse bench`: for each op, an honest, fast, unfused way to compute the same
 * outputs from the same inputs, timed alternately with ours in the same process.
 *
 *   gemm, matmul-relu   f32: cblas_sgemm straight from the inputs into C (then a ReLU pass);
 *                       f16 / bf16: convert A and B to f32, cblas_sgemm, one ReLU + convert pass
 *                       (the conversions are part of the timed run)
 *   mlp-forward (f32)   two cblas_sgemm (weights read transposed in place), a bias + GELU pass and
 *                       a bias pass
 *   mlp-backward (f32)  four cblas_sgemm (transposes read in place), a GELU' multiply pass and two
 *                       column-sum passes
 *
 * The loops run on the same number of threads as the OpenBLAS calls (openblas_set_num_threads),
 * vectorised for AVX2 / F16C when the CPU has them (picked at run time).
 *
 * OpenBLAS is a tool-only dependency, found at build time (CVF_HAVE_OPENBLAS, its path in
 * CVF_OPENBLAS_LIBRARY) and loaded with dlopen when bench starts, not linked: linked, its
 * constructor would start its threads in every cvfuse command, and OPENBLAS_THREAD_TIMEOUT (read
 * once, at load) could not be set first. Without it at build time every op reports no baseline.
 */
#ifndef CVF_TOOLS_CLI_BASELINE_H
#define CVF_TOOLS_CLI_BASELINE_H

#include "cli.h"

/* The loaded baseline library (function pointers into OpenBLAS). */
typedef struct cli_blas cli_blas;

/* One op's baseline, ready to run. */
typedef struct cli_baseline cli_baseline;

/* The value bench gives OPENBLAS_THREAD_TIMEOUT when it is unset: OpenBLAS's idle threads then
 * sleep after 2^4 cycles instead of spinning about 0.1 s (2^28) into whatever runs next (our timed
 * run, or the baseline's own loops). A user's own value is kept. */
#define CLI_OPENBLAS_THREAD_TIMEOUT "4"

/* The baseline library's short name, as bench reports it. */
#define CLI_BASELINE_LIBRARY "openblas"

/* Loads the baseline library (call once, before starting threads: it may set
 * OPENBLAS_THREAD_TIMEOUT). Returns NULL when there is none, with the reason in why ("OpenBLAS not
 * found at build time", or the loader's message). */
cli_blas *cli_baseline_open(char *why, size_t size);

/* Frees what cli_baseline_open returned (NULL is a no-op). The library itself stays loaded: its
 * threads are not safe to unload. */
void cli_baseline_close(cli_blas *blas);

/* Writes a description of the baseline library (version, core, thread timeout; on a second line
 * a warning when OPENBLAS_CORETYPE is set), or "none (WHY)" when blas is NULL, into buf. */
void cli_baseline_describe(const cli_blas *blas, const char *why, char *buf, size_t size);

/* Returns NULL when the baseline can run set's op, or a static reason why not. */
const char *cli_baseline_unsupported(const cli_blas *blas, const cli_tensor_set *set);

/* Prepares a baseline for the op of set (supported) on threads threads: its own outputs (same
 * shapes and dtypes as set's) and workspaces. It reads set's inputs, which must outlive it.
 * Returns a CLI_EXIT_* code; *out is NULL on failure. */
int cli_baseline_create(const cli_blas *blas, const cli_tensor_set *set, int threads, cli_baseline **out);

/* Runs the baseline once. */
void cli_baseline_run(cli_baseline *baseline);

/* Returns the largest relative Frobenius error between the baseline's outputs and set's (ours,
 * after a run on the same inputs). */
double cli_baseline_check(const cli_baseline *baseline, const cli_tensor_set *set);

/* Frees a baseline (NULL is a no-op). */
void cli_baseline_destroy(cli_baseline *baseline);

#endif /* CVF_TOOLS_CLI_BASELINE_H */

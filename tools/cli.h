/*
 * The cvfuse command-line tool, shared between its source files (tools/cvfuse.c and tools/cli_*.c).
 *
 *   cli_options.c  the option table, strict parsing, usage / runtime / library error messages
 *   cli_ops.c      the op table: parameter names and shapes of gemm, matmul-relu, mlp-forward
 *                  and mlp-backward, and how each binds its tensors to a library call
 *   cli_tensors.c  tensor sets: named tensors of one op, loaded from .npy files, random, written
 *                  back, copied to float64 and compared with the reference device
 *   cli_report.c   results as an aligned table or as one JSON object per line
 *   cli_run.c      the op subcommands (one generic runner driven by the op table)
 *   cli_device.c   running a tensor set on a context: in place on the host devices, through device
 *                  copies on CUDA (--device cuda of the op subcommands)
 *   cli_cuda.c     the CLI's only use of the CUDA runtime (a stub in builds without CUDA)
 *   cli_bench.c    the bench subcommand: our op and a baseline timed side by side, the peak probe
 *   cli_baseline.c the unfused baselines of bench (OpenBLAS + vectorised loops; see cli_baseline.h)
 *   cli_peak.c     the FMA / bf16 dot-product peak probe of bench
 *   cli_bench_cuda.c  bench --device cuda (a stub in builds without CUDA)
 *   cli_explain.c  the explain subcommand
 *   cvfuse.c       main: the subcommand table and the top-level help
 *
 * Exit codes: 0 success, 1 runtime failure, 2 usage error, 3 --check out of tolerance.
 * Nothing here holds mutable global state.
 */
#ifndef CVF_TOOLS_CLI_H
#define CVF_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cvfuse.h"
#include "harness.h"
#include "npy.h"

/* ---- exit codes ----------------------------------------------------------------------------- */

enum {
    CLI_EXIT_OK = 0,      /* success; every --check output within tolerance */
    CLI_EXIT_RUNTIME = 1, /* a library call failed, out of memory, an I/O error */
    CLI_EXIT_USAGE = 2,   /* bad command line, or a missing / malformed / mismatched input file */
    CLI_EXIT_CHECK = 3    /* --check found an output outside its dtype's tolerance */
};

/* The seed of the random inputs when --seed is not given. */
#define CLI_DEFAULT_SEED 1

/* ---- options -------------------------------------------------------------------------------- */

/* Every option the tool knows; each subcommand accepts a subset (a mask of CLI_BIT values). */
typedef enum cli_opt {
    CLI_OPT_M,
    CLI_OPT_N,
    CLI_OPT_K,
    CLI_OPT_S,
    CLI_OPT_H,
    CLI_OPT_I,
    CLI_OPT_DTYPE,
    CLI_OPT_DEVICE,
    CLI_OPT_THREADS,
    CLI_OPT_SEED,
    CLI_OPT_INPUTS,
    CLI_OPT_OUTPUTS,
    CLI_OPT_CHECK,
    CLI_OPT_JSON,
    CLI_OPT_OP,
    CLI_OPT_REPEAT,
    CLI_OPT_WARMUP,
    CLI_OPT_SUITE,
    CLI_OPT_JSON_OUT,
    CLI_OPT_GELU,
    CLI_OPT_HELP,
    CLI_OPT_COUNT
} cli_opt;

#define CLI_BIT(opt) (UINT32_C(1) << (opt))

/* The parsed command line of one subcommand. */
typedef struct cli_args {
    const char *command;             /* the subcommand, for messages ("matmul-relu") */
    uint32_t given;                  /* CLI_BIT of every option that appeared */
    int64_t num[CLI_OPT_COUNT];      /* values of the integer options */
    const char *text[CLI_OPT_COUNT]; /* values of the text options (--inputs, --outputs, --op) */
    cvf_dtype dtype;                 /* --dtype, when given */
    cvf_device device;               /* --device, CPU unless given */
    cvf_gelu gelu;                   /* --gelu (the MLP ops), tanh unless given */
    int cuda;                        /* --device cuda (bench: device stays CPU, the CUDA bench runs;
                                        every other command: device is CVF_DEVICE_CUDA) */
} cli_args;

/* Parses argv[0..argc) (the words after the subcommand) accepting only the options in allowed.
 * Returns CLI_EXIT_OK, or prints a usage error and returns CLI_EXIT_USAGE. */
int cli_parse(const char *command, uint32_t allowed, int argc, char **argv, cli_args *args);

/* Returns whether opt appeared on the command line. */
int cli_given(const cli_args *args, cli_opt opt);

/* Returns the integer value of opt, or fallback when it did not appear. */
int64_t cli_num(const cli_args *args, cli_opt opt, int64_t fallback);

/* Returns the spelling of an option ("--m"). */
const char *cli_opt_name(cli_opt opt);

/* Prints one help line per option in allowed, in table order. */
void cli_print_options(FILE *out, uint32_t allowed);

/* Prints "cvfuse COMMAND: message" and "try 'cvfuse COMMAND --help'" to stderr; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Prints "cvfuse COMMAND: message" to stderr; returns CLI_EXIT_RUNTIME. */
int cli_runtime_error(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Reports a failed library call (its status string and the context's last error); returns
 * CLI_EXIT_RUNTIME. ctx may be NULL (a failed cvf_context_create). */
int cli_library_error(const char *command, const char *call, cvf_status status, const cvf_context *ctx);

/* Creates a context on device with threads workers (CUDA: GPU 0, the default stream); on failure
 * reports it on one line with the library's reason (cvf_context_create_error: built without CUDA,
 * no CUDA device, device 0 unusable, ...) and returns CLI_EXIT_RUNTIME with *ctx NULL. */
int cli_context_create(const char *command, cvf_device device, int64_t threads, cvf_context **ctx);

/* ---- ops ------------------------------------------------------------------------------------ */

#define CLI_MAX_TENSORS 11
#define CLI_DIMS 3

/* Whether a parameter is read or written by the op. */
enum { CLI_IN = 0, CLI_OUT = 1 };

/* One named parameter of an op: its file is NAME.npy. dims index the op's dimensions; a 1-D
 * tensor uses dims[0] only. */
typedef struct cli_tensor_spec {
    const char *name;
    int is_output; /* CLI_IN or CLI_OUT */
    int ndim;
    int dims[2];
} cli_tensor_spec;

typedef struct cli_tensor_set cli_tensor_set;

/* An op the tool runs: its dimensions, its parameters (inputs first) and its library call. */
typedef struct cli_op {
    const char *name;                /* the subcommand ("mlp-backward") */
    const char *summary;             /* one line for the help texts */
    const char *call;                /* the library function it runs, for messages */
    const char *inputs_help;         /* how the random inputs are made, for the help */
    const char *dim_names[CLI_DIMS]; /* "m", "n", "k" or "S", "H", "I" */
    cli_opt dim_opts[CLI_DIMS];      /* the options that set them */
    int64_t dim_defaults[CLI_DIMS];
    cvf_dtype default_dtype;
    double flops_per_mnk;           /* FLOPs = flops_per_mnk * d0 * d1 * d2 */
    int tensor_count;               /* at most CLI_MAX_TENSORS */
    const cli_tensor_spec *tensors; /* inputs first, then outputs */
    /* Runs the op on ctx with the tensors of set. */
    cvf_status (*run)(cvf_context *ctx, const cli_tensor_set *set);
    /* Optional: generates consistent random inputs (allocated already) on ctx. Without it every
     * input is uniform in [-1, 1). Returns a CLI_EXIT_* code. */
    int (*generate)(cvf_context *ctx, cli_tensor_set *set, cvft_rng *rng);
    int takes_gelu; /* 1: the op runs a GELU and takes --gelu (the MLP ops) */
} cli_op;

/* Returns the op named name, or NULL. */
const cli_op *cli_op_find(const char *name);

/* Returns the number of ops and the op at index (0 <= index < cli_op_count()). */
int cli_op_count(void);
const cli_op *cli_op_at(int index);

/* Returns the option mask of op's dimension options. */
uint32_t cli_op_dim_mask(const cli_op *op);

/* Returns the FLOPs of one run of op at dims. */
double cli_op_flops(const cli_op *op, const int64_t *dims);

/* Fills dims from the options of args, op's defaults where not given. */
void cli_op_dims(const cli_op *op, const cli_args *args, int64_t *dims);

/* Formats dims as "m=33 n=17 k=65" into buf. */
void cli_op_shape_text(const cli_op *op, const int64_t *dims, char *buf, size_t size);

/* Prints the parameter files of op with their shapes (for the help). */
void cli_op_print_files(FILE *out, const cli_op *op);

/* ---- tensor sets ---------------------------------------------------------------------------- */

/* One tensor of a set. A 1-D tensor is held as a (1 x n) matrix. Exactly one of owned and
 * file.data holds the storage (or neither, before allocation). */
typedef struct cli_tensor {
    cvf_matrix view;
    void *owned;    /* from cvft_matrix_alloc: free() */
    npy_array file; /* a file read in place */
} cli_tensor;

/* The tensors of one op at one shape and dtype. */
struct cli_tensor_set {
    const cli_op *op;
    const char *command; /* for messages */
    cvf_dtype dtype;
    int64_t dims[CLI_DIMS];
    cli_tensor tensors[CLI_MAX_TENSORS];
    cvf_gelu gelu; /* the MLP ops' GELU (--gelu); cli_set_init makes it tanh */
};

/* Which tensors an operation applies to. */
typedef enum cli_which { CLI_INPUTS = 1, CLI_OUTPUTS = 2, CLI_ALL = 3 } cli_which;

/* Makes an empty set (nothing allocated). dims may be NULL (to be read from files). */
void cli_set_init(cli_tensor_set *set, const cli_op *op, const char *command, cvf_dtype dtype, const int64_t *dims);

/* Allocates the tensors selected by which (outputs are filled with NaN, so an element the op
 * does not write shows up in --check). Returns a CLI_EXIT_* code, with a message on failure. */
int cli_set_alloc(cli_tensor_set *set, cli_which which);

/* Fills one tensor with values uniform in [lo, hi), rounded to its dtype. */
void cli_tensor_fill(cli_tensor *tensor, cvft_rng *rng, double lo, double hi);

/* Allocates every tensor and generates the inputs from seed (the op's generator, or uniform in
 * [-1, 1)). Returns a CLI_EXIT_* code. */
int cli_set_random(cli_tensor_set *set, cvf_context *ctx, uint64_t seed);

/* Reads every input from DIR/NAME.npy, derives the dimensions from the files (checked against
 * each other and against the dimension options given in args), converts to the set's dtype
 * (a file already of that dtype is used in place, Fortran order as a strided view), and
 * allocates the outputs. Without --dtype in args the set's dtype is the files' instead: they
 * must all be '<f2' or all '<f4'. Returns a CLI_EXIT_* code, with a message naming the file. */
int cli_set_load(cli_tensor_set *set, const char *dir, const cli_args *args);

/* Writes the tensors selected by which to DIR/NAME.npy (creating DIR when missing; bf16 is
 * written as '<f4'). Returns a CLI_EXIT_* code. */
int cli_set_save(const cli_tensor_set *set, const char *dir, cli_which which);

/* Returns the index of the tensor called name, or -1. */
int cli_set_index(const cli_tensor_set *set, const char *name);

/* Swaps the tensors called name between dst and src (same shape and dtype in both): dst gets
 * src's data, src gets dst's old storage (freed with src). */
void cli_set_take(cli_tensor_set *dst, cli_tensor_set *src, const char *name);

/* Returns the matrix view of tensor index of set. */
const cvf_matrix *cli_set_matrix(const cli_tensor_set *set, int index);

/* Returns the vector view of the 1-D tensor index of set. */
cvf_vector cli_set_vector(const cli_tensor_set *set, int index);

/* Frees every tensor of the set. */
void cli_set_free(cli_tensor_set *set);

/* Runs set's op on ctx (call names it in messages) and stores the op's time in *ms (ms may be
 * NULL). On the cpu and reference devices the op runs on set's host buffers, timed with the
 * clock. On a CUDA context every tensor's buffer (the whole of it, a strided view keeping its
 * strides) is copied to device memory on the context's stream, the op runs there, the outputs are
 * copied back into set and the device memory is freed; *ms times the op alone (CUDA events on the
 * stream), not the copies. Returns a CLI_EXIT_* code, with a message on failure. */
int cli_set_run(cvf_context *ctx, cli_tensor_set *set, const char *call, double *ms);

/* Creates the context of an op subcommand: cli_context_create, and on CUDA a non-blocking stream
 * of its own that the context's calls are queued on. Returns a CLI_EXIT_* code (*ctx NULL on
 * failure, reported). */
int cli_op_context_create(const char *command, cvf_device device, int64_t threads, cvf_context **ctx);

/* Destroys a context from cli_op_context_create, and its stream. NULL is a no-op. */
void cli_op_context_destroy(cvf_context *ctx);

/* The outcome of comparing a set's outputs with the float64 reference device. */
typedef struct cli_check {
    int count;                          /* outputs compared */
    const char *names[CLI_MAX_TENSORS]; /* their names */
    double rel_err[CLI_MAX_TENSORS];    /* relative Frobenius errors (NaN / Inf possible) */
    double tolerance;                   /* cvft_tolerance of the set's dtype */
    int ok;                             /* every rel_err <= tolerance */
} cli_check;

/* Runs the op on the float64 reference device with exact f64 copies of set's inputs and
 * compares every output of set with it. Returns a CLI_EXIT_* code (CLI_EXIT_OK even when a
 * comparison fails: see check->ok). */
int cli_set_check(const cli_tensor_set *set, cli_check *check);

/* ---- reports -------------------------------------------------------------------------------- */

/* One line of results: a run of an op subcommand, or one op of bench. */
typedef struct cli_result {
    const cli_op *op;
    cvf_device device;
    cvf_dtype dtype;
    int64_t dims[CLI_DIMS];
    int32_t threads;
    double ms;     /* the run's time (bench: the median) */
    double gflops; /* FLOPs / time (bench: from the median) */
    int is_bench;
    double min_ms;          /* bench: the fastest run */
    int64_t repeat;         /* bench: timed runs */
    int64_t warmup;         /* bench: untimed runs before them */
    const cli_check *check; /* NULL without --check */
    /* bench only: the baseline timed alternately with ours on the same inputs */
    const char *baseline;   /* "openblas" or "none" */
    double baseline_ms;     /* its median (NaN without a baseline) */
    double baseline_min_ms; /* its fastest run (NaN without a baseline) */
    double baseline_check;  /* largest relative Frobenius error, baseline vs our outputs (NaN: none) */
    double peak_gflops;     /* the measured peak the op is held against (NaN: unknown) */
} cli_result;

/* Fills the common fields of a result. */
void cli_result_init(cli_result *result, const cli_op *op, const cvf_context *ctx, const cli_tensor_set *set);

/* Returns GFLOP/s of op at dims for ms milliseconds (Inf for a zero time). */
double cli_gflops(const cli_op *op, const int64_t *dims, double ms);

/* Prints a result as one JSON object on one line. */
void cli_report_json(FILE *out, const cli_result *result);

/* Prints an op subcommand's result as a titled, aligned table (plus the check table). */
void cli_report_table(FILE *out, const cli_result *result, const char *inputs_from);

/* Prints the title, the notes lines (each ending in a newline, may be "") and the column header of
 * the bench table. */
void cli_report_bench_header(FILE *out, cvf_device device, int threads, int64_t repeat, int64_t warmup,
                             const char *notes);

/* Prints one row of the bench table. */
void cli_report_bench_row(FILE *out, const cli_result *result);

/* Prints s as a JSON string (quoted, escaped). */
void cli_json_string(FILE *out, const char *s);

/* Prints a JSON number with %.6g; NaN and infinities become null. */
void cli_json_number(FILE *out, double value);

/* ---- peak probe ----------------------------------------------------------------------------- */

/* The measured arithmetic peak of this CPU with a given number of threads running at once. */
typedef struct cli_peak {
    int threads;
    double fp32_gflops;   /* FMA loops on every thread at the library's active level (NaN below AVX2) */
    const char *fp32_isa; /* "avx512f", "avx2+fma" or "none" */
    double bf16_gflops;   /* the unit bf16 products run on at that level: AMX tdpbf16ps loops, vdpbf16ps
                             loops where that kernel is taken, else the fp32 FMA peak */
    const char *bf16_isa; /* "amx", "vdpbf16ps", or the fp32 one */
} cli_peak;

/* Measures the fp32 FMA and bf16 peaks of the library's active CPU level (cvf_cpu_isa_active) with
 * threads concurrent threads (~0.2 s). */
void cli_peak_measure(int threads, cli_peak *peak);

/* ---- the CUDA runtime (tools/cli_cuda.c) -------------------------------------------------------- */

/* Each returns NULL on success or a static reason; in builds without CUDA every one fails with
 * "cvfuse was built without CUDA (...)". Streams and events are cudaStream_t / cudaEvent_t. */

/* Creates a non-blocking stream on the current GPU into *stream (NULL on failure). */
const char *cli_cuda_stream_create(void **stream);

/* Destroys a stream from cli_cuda_stream_create. NULL is a no-op. */
void cli_cuda_stream_destroy(void *stream);

/* Allocates bytes of device memory into *memory (NULL on failure). */
const char *cli_cuda_alloc(void **memory, size_t bytes);

/* Frees device memory from cli_cuda_alloc (waits for the GPU as cudaFree does). NULL is a no-op. */
void cli_cuda_free(void *memory);

/* Queues a copy of bytes from host to device on stream. */
const char *cli_cuda_copy_in(void *device, const void *host, size_t bytes, void *stream);

/* Queues a copy of bytes from device to host on stream; read host only after cli_cuda_sync. */
const char *cli_cuda_copy_out(void *host, const void *device, size_t bytes, void *stream);

/* Waits until everything queued on stream has finished; reports an error of that work. */
const char *cli_cuda_sync(void *stream);

/* Creates a timing event into *event (NULL on failure). */
const char *cli_cuda_event_create(void **event);

/* Records event on stream. */
const char *cli_cuda_event_record(void *event, void *stream);

/* Waits for stop, then stores the milliseconds between start and stop in *ms. */
const char *cli_cuda_event_elapsed(void *start, void *stop, double *ms);

/* Destroys an event from cli_cuda_event_create. NULL is a no-op. */
void cli_cuda_event_destroy(void *event);

/* ---- subcommands ---------------------------------------------------------------------------- */

/* Each takes the words after the subcommand and returns the exit code. */
int cli_cmd_op(const cli_op *op, int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_explain(int argc, char **argv);

/* bench --device cuda, with the parsed arguments of bench. Returns the exit code (a usage error in
 * builds without CUDA). */
int cli_bench_cuda(const cli_args *args);

#endif /* CVF_TOOLS_CLI_H */

/*
 * Running an op's tensor set on a context. The cpu and reference devices read and write the set's
 * host buffers in place. A CUDA context takes device pointers only: the set is mirrored into
 * device memory (each tensor's whole buffer, a strided or transposed view keeping its strides),
 * the op runs on the context's stream between two CUDA events, and the outputs are copied back, so
 * that --check, --outputs and the reports work on host memory as for the cpu. The CUDA runtime is
 * reached only through tools/cli_cuda.c.
 */
#include <string.h>

#include "cli.h"

/* A tensor set whose views point into device memory, and that memory. */
typedef struct device_mirror {
    cli_tensor_set set;             /* same op, dims and strides; views on device memory */
    void *memory[CLI_MAX_TENSORS];  /* the device buffer of each tensor (NULL: none) */
    int64_t first[CLI_MAX_TENSORS]; /* offset, in elements, of each buffer's start from view.data */
    size_t bytes[CLI_MAX_TENSORS];  /* bytes of each buffer */
} device_mirror;

/* Stores the elements a view spans: *first, the offset of the lowest one from view->data (<= 0),
 * and *count, how many lie from there to the highest one. */
static void view_span(const cvf_matrix *view, int64_t *first, int64_t *count)
{
    int64_t down = (view->rows - 1) * view->row_stride, across = (view->cols - 1) * view->col_stride;
    int64_t lo = (down < 0 ? down : 0) + (across < 0 ? across : 0);
    int64_t hi = (down > 0 ? down : 0) + (across > 0 ? across : 0);
    *first = lo;
    *count = hi - lo + 1;
}

/* Returns the host address of the lowest element of tensor index of set. */
static char *host_start(const cli_tensor_set *set, int index, const device_mirror *mirror)
{
    const cvf_matrix *view = &set->tensors[index].view;
    return (char *)view->data + mirror->first[index] * (int64_t)cvf_dtype_size(view->dtype);
}

/* Reports a failed CUDA step of --device cuda. Returns CLI_EXIT_RUNTIME. */
static int cuda_error(const char *command, const char *step, const char *name, const char *why)
{
    return cli_runtime_error(command, "--device cuda: %s%s%s failed: %s", step, name ? " of " : "", name ? name : "",
                             why);
}

/* Allocates the device buffer of tensor index, makes the mirror's view of it (same strides) and
 * queues the copy of the host buffer into it. Returns a CLI_EXIT_* code. */
static int mirror_tensor(const cli_tensor_set *set, int index, void *stream, device_mirror *mirror)
{
    const cvf_matrix *view = &set->tensors[index].view;
    const char *name = set->op->tensors[index].name;
    int64_t count;
    view_span(view, &mirror->first[index], &count);
    size_t element = cvf_dtype_size(view->dtype);
    mirror->bytes[index] = (size_t)count * element;
    const char *why = cli_cuda_alloc(&mirror->memory[index], mirror->bytes[index]);
    if (why)
        return cuda_error(set->command, "cudaMalloc", name, why);
    cvf_matrix *device = &mirror->set.tensors[index].view;
    *device = *view;
    device->data = (char *)mirror->memory[index] - mirror->first[index] * (int64_t)element;
    why = cli_cuda_copy_in(mirror->memory[index], host_start(set, index, mirror), mirror->bytes[index], stream);
    return why ? cuda_error(set->command, "the copy to the GPU", name, why) : CLI_EXIT_OK;
}

/* Makes mirror a device copy of every tensor of set (outputs too: their NaN fill shows an element
 * the op leaves unwritten). Returns a CLI_EXIT_* code; free the mirror either way. */
static int mirror_create(const cli_tensor_set *set, void *stream, device_mirror *mirror)
{
    memset(mirror, 0, sizeof *mirror);
    cli_set_init(&mirror->set, set->op, set->command, set->dtype, set->dims);
    for (int i = 0; i < set->op->tensor_count; i++) {
        int rc = mirror_tensor(set, i, stream, mirror);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

/* Copies every output of mirror back into set's host buffers and waits for the copies. Returns a
 * CLI_EXIT_* code. */
static int mirror_copy_out(cli_tensor_set *set, const device_mirror *mirror, void *stream)
{
    for (int i = 0; i < set->op->tensor_count; i++) {
        if (!set->op->tensors[i].is_output)
            continue;
        const char *why = cli_cuda_copy_out(host_start(set, i, mirror), mirror->memory[i], mirror->bytes[i], stream);
        if (why)
            return cuda_error(set->command, "the copy from the GPU", set->op->tensors[i].name, why);
    }
    const char *why = cli_cuda_sync(stream);
    return why ? cuda_error(set->command, "cudaStreamSynchronize after the copies from the GPU", NULL, why)
               : CLI_EXIT_OK;
}

/* Waits for the work queued on stream (so that nothing still uses the buffers) and frees the
 * mirror's device memory. */
static void mirror_free(device_mirror *mirror, void *stream)
{
    (void)cli_cuda_sync(stream); /* an error here was reported already, or is by the caller's step */
    for (int i = 0; i < CLI_MAX_TENSORS; i++)
        cli_cuda_free(mirror->memory[i]);
    memset(mirror, 0, sizeof *mirror);
}

/* Runs the op of the mirror on ctx between two events recorded on stream and stores the time
 * between them in *ms. Returns a CLI_EXIT_* code. */
static int run_timed_on_stream(cvf_context *ctx, const cli_tensor_set *device_set, const char *call, void *stream,
                               double *ms)
{
    const char *command = device_set->command;
    void *start = NULL, *stop = NULL;
    const char *why = cli_cuda_event_create(&start);
    if (!why)
        why = cli_cuda_event_create(&stop);
    if (!why)
        why = cli_cuda_event_record(start, stream);
    int rc = why ? cuda_error(command, "the timing events", NULL, why) : CLI_EXIT_OK;
    if (rc == CLI_EXIT_OK) {
        cvf_status status = device_set->op->run(ctx, device_set);
        if (status != CVF_STATUS_SUCCESS)
            rc = cli_library_error(command, call, status, ctx);
    }
    if (rc == CLI_EXIT_OK) {
        why = cli_cuda_event_record(stop, stream);
        if (!why)
            why = cli_cuda_event_elapsed(start, stop, ms);
        if (why) /* a fault of the op's kernels surfaces here */
            rc = cuda_error(command, call, NULL, why);
    }
    cli_cuda_event_destroy(start);
    cli_cuda_event_destroy(stop);
    return rc;
}

/* cli_set_run on a CUDA context: mirror, run, copy back, free. */
static int run_on_cuda(cvf_context *ctx, cli_tensor_set *set, const char *call, double *ms)
{
    void *stream = cvf_context_stream(ctx);
    device_mirror mirror;
    int rc = mirror_create(set, stream, &mirror);
    if (rc == CLI_EXIT_OK)
        rc = run_timed_on_stream(ctx, &mirror.set, call, stream, ms);
    if (rc == CLI_EXIT_OK)
        rc = mirror_copy_out(set, &mirror, stream);
    mirror_free(&mirror, stream);
    return rc;
}

int cli_set_run(cvf_context *ctx, cli_tensor_set *set, const char *call, double *ms)
{
    double unused;
    if (!ms)
        ms = &unused;
    if (cvf_context_device(ctx) == CVF_DEVICE_CUDA)
        return run_on_cuda(ctx, set, call, ms);
    double start = cvft_now_seconds();
    cvf_status status = set->op->run(ctx, set);
    *ms = (cvft_now_seconds() - start) * 1e3;
    return status == CVF_STATUS_SUCCESS ? CLI_EXIT_OK : cli_library_error(set->command, call, status, ctx);
}

int cli_op_context_create(const char *command, cvf_device device, int64_t threads, cvf_context **ctx)
{
    int rc = cli_context_create(command, device, threads, ctx);
    if (rc != CLI_EXIT_OK || device != CVF_DEVICE_CUDA)
        return rc;
    void *stream = NULL;
    const char *why = cli_cuda_stream_create(&stream);
    cvf_status status = why ? CVF_STATUS_SUCCESS : cvf_context_set_stream(*ctx, stream);
    if (why)
        rc = cuda_error(command, "cudaStreamCreateWithFlags", NULL, why);
    else if (status != CVF_STATUS_SUCCESS)
        rc = cli_library_error(command, "cvf_context_set_stream", status, *ctx);
    if (rc != CLI_EXIT_OK) {
        cvf_context_destroy(*ctx);
        cli_cuda_stream_destroy(stream);
        *ctx = NULL;
    }
    return rc;
}

void cli_op_context_destroy(cvf_context *ctx)
{
    if (!ctx)
        return;
    void *stream = cvf_context_device(ctx) == CVF_DEVICE_CUDA ? cvf_context_stream(ctx) : NULL;
    cvf_context_destroy(ctx);
    cli_cuda_stream_destroy(stream);
}

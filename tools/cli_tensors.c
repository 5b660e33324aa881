/*
 * Tensor sets: the named tensors of one op, whatever their source. The op subcommands and
 * bench share this code: allocate, fill with random values, load from DIR/NAME.npy (shapes derived
 * from the files and cross-checked, dtypes converted, Fortran order read in place), write back,
 * and compare with the float64 reference device.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cli.h"

/* Longest path the tool builds for a .npy file. */
#define CLI_PATH_MAX 4096

/* Returns the spec of tensor index of set. */
static const cli_tensor_spec *spec_of(const cli_tensor_set *set, int index)
{
    return &set->op->tensors[index];
}

/* Returns whether tensor index of set is selected by which. */
static int selected(const cli_tensor_set *set, int index, cli_which which)
{
    return (which & (spec_of(set, index)->is_output ? CLI_OUTPUTS : CLI_INPUTS)) != 0;
}

/* Stores the (rows, cols) of tensor index at the set's dims: a 1-D tensor is one row. */
static void tensor_extent(const cli_tensor_set *set, int index, int64_t *rows, int64_t *cols)
{
    const cli_tensor_spec *spec = spec_of(set, index);
    *rows = spec->ndim == 1 ? 1 : set->dims[spec->dims[0]];
    *cols = spec->ndim == 1 ? set->dims[spec->dims[0]] : set->dims[spec->dims[1]];
}

/* Copies every element of src into dst (same shape), converting the dtype with one rounding. */
static void copy_matrix(const cvf_matrix *src, const cvf_matrix *dst)
{
    for (int64_t i = 0; i < src->rows; i++)
        for (int64_t j = 0; j < src->cols; j++)
            cvft_matrix_set(dst, i, j, cvft_matrix_get(src, i, j));
}

/* Allocates a dense (rows x cols) matrix of dtype owned by tensor. Returns a CLI_EXIT_* code. */
static int tensor_alloc(cli_tensor_set *set, int index, cvf_dtype dtype, int64_t rows, int64_t cols)
{
    cli_tensor *t = &set->tensors[index];
    if (cvft_matrix_alloc(dtype, rows, cols, &t->view) != 0)
        return cli_runtime_error(set->command, "out of memory allocating %s (%lld x %lld %s)",
                                 spec_of(set, index)->name, (long long)rows, (long long)cols, cvf_dtype_name(dtype));
    t->owned = t->view.data;
    return CLI_EXIT_OK;
}

void cli_set_init(cli_tensor_set *set, const cli_op *op, const char *command, cvf_dtype dtype, const int64_t *dims)
{
    *set = (cli_tensor_set){0};
    set->op = op;
    set->command = command;
    set->dtype = dtype;
    for (int d = 0; d < CLI_DIMS; d++)
        set->dims[d] = dims ? dims[d] : 0;
}

int cli_set_alloc(cli_tensor_set *set, cli_which which)
{
    for (int i = 0; i < set->op->tensor_count; i++) {
        if (!selected(set, i, which) || set->tensors[i].view.data)
            continue;
        int64_t rows, cols;
        tensor_extent(set, i, &rows, &cols);
        int rc = tensor_alloc(set, i, set->dtype, rows, cols);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (spec_of(set, i)->is_output) /* all-ones bytes are a NaN in every dtype */
            memset(set->tensors[i].owned, 0xFF, (size_t)(rows * cols) * cvf_dtype_size(set->dtype));
    }
    return CLI_EXIT_OK;
}

void cli_tensor_fill(cli_tensor *tensor, cvft_rng *rng, double lo, double hi)
{
    cvft_matrix_fill_uniform(&tensor->view, rng, lo, hi);
}

int cli_set_random(cli_tensor_set *set, cvf_context *ctx, uint64_t seed)
{
    int rc = cli_set_alloc(set, CLI_ALL);
    if (rc != CLI_EXIT_OK)
        return rc;
    cvft_rng rng = cvft_rng_make(seed);
    if (set->op->generate)
        return set->op->generate(ctx, set, &rng);
    for (int i = 0; i < set->op->tensor_count; i++)
        if (!spec_of(set, i)->is_output)
            cli_tensor_fill(&set->tensors[i], &rng, -1.0, 1.0);
    return CLI_EXIT_OK;
}

/* Writes DIR/NAME.npy into buf. Returns 0, or -1 when it does not fit. */
static int join_path(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s.npy", dir, name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Formats a shape as NumPy prints it: "(197, 768)" or "(3072,)". */
static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
    if (ndim == 1)
        snprintf(buf, size, "(%lld,)", (long long)shape[0]);
    else
        snprintf(buf, size, "(%lld, %lld)", (long long)shape[0], (long long)shape[1]);
}

/* What the files read so far fixed: which tensor set each dimension (and, without --dtype, the
 * dtype), and every file's shape. */
typedef struct shape_binding {
    int by[CLI_DIMS]; /* index of the tensor that fixed dimension d, or -1 */
    int dtype_by;     /* index of the tensor that fixed the dtype, or -1 */
    int ndim[CLI_MAX_TENSORS];
    int64_t shape[CLI_MAX_TENSORS][2];
} shape_binding;

/* Formats the shape tensor index must have: fixed dimensions as numbers, free ones by name. */
static void format_expected(const cli_tensor_set *set, int index, const shape_binding *b, char *buf, size_t size)
{
    const cli_tensor_spec *spec = spec_of(set, index);
    char part[2][32];
    for (int k = 0; k < spec->ndim && k < 2; k++) {
        int d = spec->dims[k];
        if (b->by[d] >= 0)
            snprintf(part[k], sizeof part[k], "%lld", (long long)set->dims[d]);
        else
            snprintf(part[k], sizeof part[k], "%s", set->op->dim_names[d]);
    }
    if (spec->ndim == 1)
        snprintf(buf, size, "(%s,)", part[0]);
    else
        snprintf(buf, size, "(%s, %s)", part[0], part[1]);
}

/* Checks the shape of the file read for tensor index against what earlier files fixed, and fixes
 * the dimensions it is the first to give. Returns a CLI_EXIT_* code. */
static int bind_shape(cli_tensor_set *set, int index, const char *path, const npy_array *file, shape_binding *b)
{
    const cli_tensor_spec *spec = spec_of(set, index);
    char got[64], expected[96], other[64];
    b->ndim[index] = file->ndim;
    memcpy(b->shape[index], file->shape, sizeof b->shape[index]);
    format_shape(got, sizeof got, file->ndim, file->shape);
    format_expected(set, index, b, expected, sizeof expected);
    if (file->ndim != spec->ndim)
        return cli_usage_error(set->command, "%s: expected %d dimension%s %s, file has shape %s", path, spec->ndim,
                               spec->ndim == 1 ? "" : "s", expected, got);
    for (int k = 0; k < spec->ndim; k++) {
        int d = spec->dims[k];
        if (file->shape[k] < 1)
            return cli_usage_error(set->command, "%s: shape %s has an empty dimension", path, got);
        if (b->by[d] < 0) {
            set->dims[d] = file->shape[k];
            b->by[d] = index;
        } else if (set->dims[d] != file->shape[k]) {
            int o = b->by[d];
            format_shape(other, sizeof other, b->ndim[o], b->shape[o]);
            return cli_usage_error(set->command, "%s: shape %s does not match %s.npy %s: expected %s", path, got,
                                   spec_of(set, o)->name, other, expected);
        }
    }
    return CLI_EXIT_OK;
}

/* Without --dtype, the first input file fixes the set's dtype ('<f2' f16, '<f4' f32) and every
 * other one must have it; a '<f8' file needs --dtype (float64 is no storage dtype of the ops).
 * Returns a CLI_EXIT_* code. */
static int bind_dtype(cli_tensor_set *set, int index, const char *path, const npy_array *file, const cli_args *args,
                      shape_binding *b)
{
    if (cli_given(args, CLI_OPT_DTYPE))
        return CLI_EXIT_OK;
    if (file->dtype == CVF_F64)
        return cli_usage_error(set->command, "%s: a '<f8' (float64) file needs --dtype f32, f16 or bf16 to run", path);
    if (b->dtype_by < 0) {
        set->dtype = file->dtype;
        b->dtype_by = index;
    } else if (file->dtype != set->dtype) {
        return cli_usage_error(set->command,
                               "%s: dtype '<f%zu' (%s) does not match %s.npy '<f%zu' (%s): give --dtype to convert "
                               "every file to one dtype",
                               path, cvf_dtype_size(file->dtype), cvf_dtype_name(file->dtype),
                               spec_of(set, b->dtype_by)->name, cvf_dtype_size(set->dtype), cvf_dtype_name(set->dtype));
    }
    return CLI_EXIT_OK;
}

/* Makes the loaded file the storage of tensor index: in place when it already has the set's
 * dtype (a Fortran-order file becomes a view with swapped strides), else converted into a dense
 * row-major copy. Takes ownership of *file. Returns a CLI_EXIT_* code. */
static int adopt_file(cli_tensor_set *set, int index, npy_array *file)
{
    cli_tensor *t = &set->tensors[index];
    if (file->dtype == set->dtype) {
        t->file = *file;
        t->view = npy_array_matrix(&t->file);
        return CLI_EXIT_OK;
    }
    cvf_matrix src = npy_array_matrix(file);
    int rc = tensor_alloc(set, index, set->dtype, src.rows, src.cols);
    if (rc == CLI_EXIT_OK)
        copy_matrix(&src, &t->view);
    npy_array_free(file);
    return rc;
}

/* Checks the dimensions derived from the files against the dimension options that were given.
 * Returns a CLI_EXIT_* code. */
static int check_given_dims(const cli_tensor_set *set, const cli_args *args, const shape_binding *b)
{
    for (int d = 0; d < CLI_DIMS; d++) {
        cli_opt opt = set->op->dim_opts[d];
        if (cli_given(args, opt) && args->num[opt] != set->dims[d])
            return cli_usage_error(set->command, "%s %lld does not match the input files: %s.npy gives %s = %lld",
                                   cli_opt_name(opt), (long long)args->num[opt], spec_of(set, b->by[d])->name,
                                   set->op->dim_names[d], (long long)set->dims[d]);
    }
    return CLI_EXIT_OK;
}

/* Reads input index of set from DIR/NAME.npy, checks its shape and dtype against the files read
 * before it and makes it the tensor's storage. Returns a CLI_EXIT_* code. */
static int load_input(cli_tensor_set *set, int index, const char *dir, const cli_args *args, shape_binding *b)
{
    char path[CLI_PATH_MAX], err[CLI_PATH_MAX + 256];
    if (join_path(path, sizeof path, dir, spec_of(set, index)->name) != 0)
        return cli_usage_error(set->command, "--inputs: directory name too long");
    npy_array file;
    if (npy_load(path, &file, err, sizeof err) != 0)
        return cli_usage_error(set->command, "%s", err);
    int rc = bind_shape(set, index, path, &file, b);
    if (rc == CLI_EXIT_OK)
        rc = bind_dtype(set, index, path, &file, args, b);
    if (rc != CLI_EXIT_OK) {
        npy_array_free(&file);
        return rc;
    }
    return adopt_file(set, index, &file);
}

int cli_set_load(cli_tensor_set *set, const char *dir, const cli_args *args)
{
    shape_binding binding;
    memset(&binding, 0, sizeof binding);
    for (int d = 0; d < CLI_DIMS; d++)
        binding.by[d] = -1;
    binding.dtype_by = -1;
    for (int i = 0; i < set->op->tensor_count; i++) {
        int rc = spec_of(set, i)->is_output ? CLI_EXIT_OK : load_input(set, i, dir, args, &binding);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    int rc = check_given_dims(set, args, &binding);
    return rc != CLI_EXIT_OK ? rc : cli_set_alloc(set, CLI_OUTPUTS);
}

/* Creates dir unless it exists. Returns a CLI_EXIT_* code. */
static int make_directory(const char *command, const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cli_runtime_error(command, "%s: cannot create directory: %s", dir, strerror(errno));
    return CLI_EXIT_OK;
}

/* Writes tensor index of set to path: C order, bf16 widened exactly to '<f4'. Returns a
 * CLI_EXIT_* code. */
static int save_tensor(const cli_tensor_set *set, int index, const char *path)
{
    const cli_tensor_spec *spec = spec_of(set, index);
    const cvf_matrix *v = &set->tensors[index].view;
    int64_t shape[2] = {spec->ndim == 1 ? v->cols : v->rows, v->cols};
    cvf_dtype file_dtype = v->dtype == CVF_BF16 ? CVF_F32 : v->dtype;
    int dense = v->col_stride == 1 && (v->rows <= 1 || v->row_stride == v->cols);
    cvf_matrix copy = {0};
    const void *data = v->data;
    if (file_dtype != v->dtype || !dense) {
        if (cvft_matrix_alloc(file_dtype, v->rows, v->cols, &copy) != 0)
            return cli_runtime_error(set->command, "out of memory writing %s", path);
        copy_matrix(v, &copy);
        data = copy.data;
    }
    char err[CLI_PATH_MAX + 256];
    int failed = npy_save(path, file_dtype, spec->ndim, shape, data, err, sizeof err) != 0;
    free(copy.data);
    return failed ? cli_runtime_error(set->command, "%s", err) : CLI_EXIT_OK;
}

int cli_set_save(const cli_tensor_set *set, const char *dir, cli_which which)
{
    int rc = make_directory(set->command, dir);
    for (int i = 0; i < set->op->tensor_count && rc == CLI_EXIT_OK; i++) {
        if (!selected(set, i, which))
            continue;
        char path[CLI_PATH_MAX];
        if (join_path(path, sizeof path, dir, spec_of(set, i)->name) != 0)
            return cli_usage_error(set->command, "--outputs: directory name too long");
        rc = save_tensor(set, i, path);
    }
    return rc;
}

int cli_set_index(const cli_tensor_set *set, const char *name)
{
    for (int i = 0; i < set->op->tensor_count; i++)
        if (strcmp(spec_of(set, i)->name, name) == 0)
            return i;
    return -1;
}

void cli_set_take(cli_tensor_set *dst, cli_tensor_set *src, const char *name)
{
    int d = cli_set_index(dst, name), s = cli_set_index(src, name);
    if (d < 0 || s < 0)
        return;
    cli_tensor swap = dst->tensors[d];
    dst->tensors[d] = src->tensors[s];
    src->tensors[s] = swap;
}

const cvf_matrix *cli_set_matrix(const cli_tensor_set *set, int index)
{
    return &set->tensors[index].view;
}

cvf_vector cli_set_vector(const cli_tensor_set *set, int index)
{
    const cvf_matrix *m = &set->tensors[index].view;
    cvf_vector v = {m->data, m->dtype, m->cols, m->col_stride};
    return v;
}

void cli_set_free(cli_tensor_set *set)
{
    for (int i = 0; i < CLI_MAX_TENSORS; i++) {
        free(set->tensors[i].owned);
        npy_array_free(&set->tensors[i].file);
        set->tensors[i] = (cli_tensor){0};
    }
}

/* Makes ref a float64 copy of set: exact copies of the inputs, NaN-filled outputs. Returns a
 * CLI_EXIT_* code. */
static int make_reference_set(const cli_tensor_set *set, cli_tensor_set *ref)
{
    cli_set_init(ref, set->op, set->command, CVF_F64, set->dims);
    for (int i = 0; i < set->op->tensor_count; i++) {
        if (spec_of(set, i)->is_output)
            continue;
        cli_tensor *t = &ref->tensors[i];
        if (cvft_matrix_to_f64(&set->tensors[i].view, &t->view) != 0)
            return cli_runtime_error(set->command, "out of memory copying %s to float64", spec_of(set, i)->name);
        t->owned = t->view.data;
    }
    return cli_set_alloc(ref, CLI_OUTPUTS);
}

/* Runs ref's op on a fresh reference-device context. Returns a CLI_EXIT_* code. */
static int run_reference(cli_tensor_set *ref)
{
    cvf_context *ctx = NULL;
    int rc = cli_context_create(ref->command, CVF_DEVICE_REFERENCE, 1, &ctx);
    if (rc != CLI_EXIT_OK)
        return rc;
    cvf_status status = ref->op->run(ctx, ref);
    if (status != CVF_STATUS_SUCCESS)
        rc = cli_library_error(ref->command, "the float64 reference run (--check)", status, ctx);
    cvf_context_destroy(ctx);
    return rc;
}

int cli_set_check(const cli_tensor_set *set, cli_check *check)
{
    *check = (cli_check){0};
    check->tolerance = cvft_tolerance(set->dtype);
    check->ok = 1;
    cli_tensor_set ref;
    int rc = make_reference_set(set, &ref);
    if (rc == CLI_EXIT_OK)
        rc = run_reference(&ref);
    for (int i = 0; rc == CLI_EXIT_OK && i < set->op->tensor_count; i++) {
        if (!spec_of(set, i)->is_output)
            continue;
        double err = cvft_matrix_rel_error(&set->tensors[i].view, &ref.tensors[i].view);
        check->names[check->count] = spec_of(set, i)->name;
        check->rel_err[check->count++] = err;
        if (!(err <= check->tolerance)) /* NaN fails too */
            check->ok = 0;
    }
    cli_set_free(&ref);
    return rc;
}

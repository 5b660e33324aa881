/*
 * test_errors: bad input to every public entry point of cvfuse.
 *
 * Each failing call must return its specific status, leave a non-empty message on the context
 * that names the offending argument, and write nothing: every byte of the operand arena (the
 * inputs with their values, the outputs and their surroundings with a byte pattern) is compared
 * with a snapshot taken just before the call. Zero-sized problems, broadcast inputs, f64 on the
 * reference device and NaN propagation are checked to succeed with the right values.
 *
 * Uses only the public header and libc. Prints `test_errors: N passed, M failed`.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h" /* white-box: a backend whose allocator fails */
#include "cvfuse.h"

/* ------------------------------------------------------------------------------------------ */
/* Check bookkeeping                                                                           */
/* ------------------------------------------------------------------------------------------ */

static int g_passed;
static int g_failed;

/* Records one check; prints the formatted description when it fails. Returns ok. */
static bool check(bool ok, const char *format, ...) __attribute__((format(printf, 2, 3)));
static bool check(bool ok, const char *format, ...)
{
    if (ok) {
        g_passed++;
        return true;
    }
    g_failed++;
    va_list args;
    va_start(args, format);
    fputs("FAIL: ", stdout);
    vprintf(format, args);
    fputc('\n', stdout);
    va_end(args);
    return false;
}

/* Returns the status's name for messages, tolerating out-of-range values. */
static const char *status_name(cvf_status status)
{
    return cvf_status_string(status);
}

/* True for characters that may continue an argument name ("epilogue.aux_in", "fc1_weight"). */
static bool is_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.';
}

/* True when message contains name as a whole token: "a" matches "a: shape", not "a.cols" or "grad". */
static bool message_names(const char *message, const char *name)
{
    size_t length = strlen(name);
    for (const char *at = strstr(message, name); at; at = strstr(at + 1, name)) {
        bool starts = at == message || !is_name_char(at[-1]);
        bool ends = !is_name_char(at[length]);
        if (starts && ends)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* The operand arena: input slots hold values, output slots hold a byte pattern                */
/* ------------------------------------------------------------------------------------------ */

#define SLOT_BYTES 256
#define SLOT_COUNT 16
#define FIRST_OUTPUT_SLOT 8
#define ARENA_BYTES (SLOT_BYTES * SLOT_COUNT)
#define PATTERN 0xA5

static _Alignas(64) unsigned char g_arena[ARENA_BYTES];
static unsigned char g_snapshot[ARENA_BYTES];

/* Returns the start of slot k of the arena (slots 0-7 inputs, 8-15 outputs). */
static void *slot(int k)
{
    return g_arena + (size_t)k * SLOT_BYTES;
}

/* The deterministic input value of element j of input slot k: small exact floats, some negative. */
static float input_value(int k, int j)
{
    return (float)(((k * 13 + j * 7) % 9) - 4) * 0.25f;
}

/* Fills the input slots with values and the output slots with the byte pattern. */
static void arena_reset(void)
{
    for (int k = 0; k < FIRST_OUTPUT_SLOT; k++) {
        float *values = slot(k);
        for (int j = 0; j < SLOT_BYTES / (int)sizeof(float); j++)
            values[j] = input_value(k, j);
    }
    memset(slot(FIRST_OUTPUT_SLOT), PATTERN, (size_t)(SLOT_COUNT - FIRST_OUTPUT_SLOT) * SLOT_BYTES);
}

/* Copies the arena so that a later call can be checked to have written nothing. */
static void arena_snapshot(void)
{
    memcpy(g_snapshot, g_arena, sizeof g_arena);
}

/* Returns the offset of the first arena byte outside [skip, skip + skip_len) that differs from
 * the snapshot, or -1 when there is none. */
static long arena_first_change_outside(const void *skip, size_t skip_len)
{
    uintptr_t lo = (uintptr_t)skip, hi = lo + skip_len;
    for (size_t i = 0; i < sizeof g_arena; i++) {
        uintptr_t at = (uintptr_t)&g_arena[i];
        if (at >= lo && at < hi)
            continue;
        if (g_arena[i] != g_snapshot[i])
            return (long)i;
    }
    return -1;
}

/* Returns the offset of the first arena byte that differs from the snapshot, or -1. */
static long arena_first_change(void)
{
    return arena_first_change_outside(NULL, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Fixtures: a valid call of each entry point, with its views findable by argument name        */
/* ------------------------------------------------------------------------------------------ */

/* The entry points the table drives. */
typedef enum op_kind { OP_MATMUL, OP_MATMUL_RELU, OP_COLUMN_SUM, OP_MLP_FORWARD, OP_MLP_BACKWARD } op_kind;

/* Problem sizes: GEMM (M x K) @ (K x N); MLP S tokens, hidden H, intermediate I. */
enum { M = 3, K = 4, N = 5, S = 3, H = 4, I = 5 };

typedef struct named_matrix {
    const char *name;
    cvf_matrix *view;
} named_matrix;

typedef struct named_vector {
    const char *name;
    cvf_vector *view;
} named_vector;

/* Every argument of one call; the p* pointers are what is passed (a case may set one to NULL). */
typedef struct fixture {
    op_kind op;
    cvf_context *ctx;
    cvf_matrix a, b, c, aux_in, aux_out, x;
    cvf_vector bias, bias_grad, out;
    cvf_epilogue epilogue;
    const cvf_matrix *pa, *pb, *pc, *px;
    const cvf_vector *pout;
    const cvf_epilogue *pepilogue;
    cvf_mlp_forward_args forward;
    cvf_mlp_backward_args backward;
    const cvf_mlp_forward_args *pforward;
    const cvf_mlp_backward_args *pbackward;
    named_matrix matrices[12];
    int matrix_count;
    named_vector vectors[6];
    int vector_count;
} fixture;

/* Registers a matrix view under its argument name. */
static void add_matrix(fixture *f, const char *name, cvf_matrix *view)
{
    f->matrices[f->matrix_count++] = (named_matrix){name, view};
}

/* Registers a vector view under its argument name. */
static void add_vector(fixture *f, const char *name, cvf_vector *view)
{
    f->vectors[f->vector_count++] = (named_vector){name, view};
}

/* Returns the matrix view called name, or NULL. */
static cvf_matrix *find_matrix(fixture *f, const char *name)
{
    for (int i = 0; i < f->matrix_count; i++)
        if (strcmp(f->matrices[i].name, name) == 0)
            return f->matrices[i].view;
    return NULL;
}

/* Returns the vector view called name, or NULL. */
static cvf_vector *find_vector(fixture *f, const char *name)
{
    for (int i = 0; i < f->vector_count; i++)
        if (strcmp(f->vectors[i].name, name) == 0)
            return f->vectors[i].view;
    return NULL;
}

/* Sets up C = relu(A @ B + bias) with aux_out and bias_grad (aux_in prepared but not attached). */
static void setup_matmul(fixture *f)
{
    f->a = cvf_matrix_row_major(slot(0), CVF_F32, M, K);
    f->b = cvf_matrix_row_major(slot(1), CVF_F32, K, N);
    f->bias = cvf_vector_dense(slot(2), CVF_F32, N);
    f->aux_in = cvf_matrix_row_major(slot(3), CVF_F32, M, N);
    f->c = cvf_matrix_row_major(slot(8), CVF_F32, M, N);
    f->aux_out = cvf_matrix_row_major(slot(9), CVF_F32, M, N);
    f->bias_grad = cvf_vector_dense(slot(10), CVF_F32, N);
    f->epilogue = (cvf_epilogue){CVF_ACTIVATION_RELU, &f->bias, NULL, &f->aux_out, &f->bias_grad};
    f->pa = &f->a;
    f->pb = &f->b;
    f->pc = &f->c;
    f->pepilogue = f->op == OP_MATMUL ? &f->epilogue : NULL;
    add_matrix(f, "a", &f->a);
    add_matrix(f, "b", &f->b);
    add_matrix(f, "c", &f->c);
    if (f->op == OP_MATMUL) {
        add_matrix(f, "epilogue.aux_in", &f->aux_in);
        add_matrix(f, "epilogue.aux_out", &f->aux_out);
        add_vector(f, "epilogue.bias", &f->bias);
        add_vector(f, "epilogue.bias_grad", &f->bias_grad);
    }
}

/* Sets up out = column sums of x (M x N). */
static void setup_column_sum(fixture *f)
{
    f->x = cvf_matrix_row_major(slot(0), CVF_F32, M, N);
    f->out = cvf_vector_dense(slot(8), CVF_F32, N);
    f->px = &f->x;
    f->pout = &f->out;
    add_matrix(f, "x", &f->x);
    add_vector(f, "out", &f->out);
}

/* Sets up a valid MLP forward of S x H x I. */
static void setup_mlp_forward(fixture *f)
{
    cvf_mlp_forward_args *a = &f->forward;
    a->hidden_state = cvf_matrix_row_major(slot(0), CVF_F32, S, H);
    a->fc1_weight = cvf_matrix_row_major(slot(1), CVF_F32, I, H);
    a->fc1_bias = cvf_vector_dense(slot(2), CVF_F32, I);
    a->fc2_weight = cvf_matrix_row_major(slot(3), CVF_F32, H, I);
    a->fc2_bias = cvf_vector_dense(slot(4), CVF_F32, H);
    a->fc1_output = cvf_matrix_row_major(slot(8), CVF_F32, S, I);
    a->gelu_output = cvf_matrix_row_major(slot(9), CVF_F32, S, I);
    a->output = cvf_matrix_row_major(slot(10), CVF_F32, S, H);
    f->pforward = a;
    add_matrix(f, "hidden_state", &a->hidden_state);
    add_matrix(f, "fc1_weight", &a->fc1_weight);
    add_vector(f, "fc1_bias", &a->fc1_bias);
    add_matrix(f, "fc2_weight", &a->fc2_weight);
    add_vector(f, "fc2_bias", &a->fc2_bias);
    add_matrix(f, "fc1_output", &a->fc1_output);
    add_matrix(f, "gelu_output", &a->gelu_output);
    add_matrix(f, "output", &a->output);
}

/* Sets up a valid MLP backward of S x H x I. */
static void setup_mlp_backward(fixture *f)
{
    cvf_mlp_backward_args *a = &f->backward;
    a->grad_output = cvf_matrix_row_major(slot(0), CVF_F32, S, H);
    a->hidden_state = cvf_matrix_row_major(slot(1), CVF_F32, S, H);
    a->fc1_weight = cvf_matrix_row_major(slot(2), CVF_F32, I, H);
    a->fc2_weight = cvf_matrix_row_major(slot(3), CVF_F32, H, I);
    a->fc1_output = cvf_matrix_row_major(slot(4), CVF_F32, S, I);
    a->gelu_output = cvf_matrix_row_major(slot(5), CVF_F32, S, I);
    a->grad_hidden_state = cvf_matrix_row_major(slot(8), CVF_F32, S, H);
    a->grad_fc1_weight = cvf_matrix_row_major(slot(9), CVF_F32, I, H);
    a->grad_fc1_bias = cvf_vector_dense(slot(10), CVF_F32, I);
    a->grad_fc2_weight = cvf_matrix_row_major(slot(11), CVF_F32, H, I);
    a->grad_fc2_bias = cvf_vector_dense(slot(12), CVF_F32, H);
    f->pbackward = a;
    add_matrix(f, "grad_output", &a->grad_output);
    add_matrix(f, "hidden_state", &a->hidden_state);
    add_matrix(f, "fc1_weight", &a->fc1_weight);
    add_matrix(f, "fc2_weight", &a->fc2_weight);
    add_matrix(f, "fc1_output", &a->fc1_output);
    add_matrix(f, "gelu_output", &a->gelu_output);
    add_matrix(f, "grad_hidden_state", &a->grad_hidden_state);
    add_matrix(f, "grad_fc1_weight", &a->grad_fc1_weight);
    add_vector(f, "grad_fc1_bias", &a->grad_fc1_bias);
    add_matrix(f, "grad_fc2_weight", &a->grad_fc2_weight);
    add_vector(f, "grad_fc2_bias", &a->grad_fc2_bias);
}

/* Resets the arena and builds a valid call of op on ctx. */
static void fixture_init(fixture *f, op_kind op, cvf_context *ctx)
{
    memset(f, 0, sizeof *f);
    f->op = op;
    f->ctx = ctx;
    arena_reset();
    switch (op) {
    case OP_MATMUL:
    case OP_MATMUL_RELU: setup_matmul(f); break;
    case OP_COLUMN_SUM: setup_column_sum(f); break;
    case OP_MLP_FORWARD: setup_mlp_forward(f); break;
    case OP_MLP_BACKWARD: setup_mlp_backward(f); break;
    }
}

/* Calls the fixture's entry point with its (possibly mutated) arguments. */
static cvf_status fixture_call(const fixture *f)
{
    switch (f->op) {
    case OP_MATMUL: return cvf_matmul(f->ctx, f->pa, f->pb, f->pc, f->pepilogue);
    case OP_MATMUL_RELU: return cvf_matmul_relu(f->ctx, f->pa, f->pb, f->pc);
    case OP_COLUMN_SUM: return cvf_column_sum(f->ctx, f->px, f->pout);
    case OP_MLP_FORWARD: return cvf_mlp_forward(f->ctx, f->pforward);
    case OP_MLP_BACKWARD: return cvf_mlp_backward(f->ctx, f->pbackward);
    }
    return CVF_STATUS_INTERNAL_ERROR;
}

/* Returns the entry point's name for failure messages. */
static const char *op_name(op_kind op)
{
    switch (op) {
    case OP_MATMUL: return "cvf_matmul";
    case OP_MATMUL_RELU: return "cvf_matmul_relu";
    case OP_COLUMN_SUM: return "cvf_column_sum";
    case OP_MLP_FORWARD: return "cvf_mlp_forward";
    case OP_MLP_BACKWARD: return "cvf_mlp_backward";
    }
    return "?";
}

/* ------------------------------------------------------------------------------------------ */
/* Field overrides and mutations                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Which member of a view an override sets. */
typedef enum view_field {
    SET_NONE = 0,
    SET_ROWS,       /* matrix */
    SET_COLS,       /* matrix */
    SET_ROW_STRIDE, /* matrix */
    SET_COL_STRIDE, /* matrix */
    SET_LENGTH,     /* vector */
    SET_STRIDE,     /* vector */
    SET_DTYPE,      /* either: value is the dtype enum value */
    SET_DATA_NULL,  /* either: data = NULL */
    SET_DATA_WRAP,  /* either: data = UINTPTR_MAX - 127 (8-byte aligned), so a larger extent wraps the address space */
    SET_DATA_ALIAS  /* either: data = source's data + value bytes */
} view_field;

/* One override: target.field = value (source names the view SET_DATA_ALIAS points into). */
typedef struct view_override {
    const char *target;
    view_field field;
    int64_t value;
    const char *source;
} view_override;

/* A huge row count whose byte extent (with row stride 4) overflows int64. */
#define HUGE_ROWS (INT64_MAX / 2)

/* Returns the data pointer of the view called name (matrix or vector), or NULL. */
static void *view_data(fixture *f, const char *name)
{
    cvf_matrix *m = find_matrix(f, name);
    if (m)
        return m->data;
    cvf_vector *v = find_vector(f, name);
    return v ? v->data : NULL;
}

/* Returns the data pointer an override's SET_DATA_* field asks for. */
static void *override_data(fixture *f, const view_override *o)
{
    if (o->field == SET_DATA_WRAP)
        return (void *)(UINTPTR_MAX - 127);
    if (o->field == SET_DATA_ALIAS)
        return (unsigned char *)view_data(f, o->source) + o->value;
    return NULL;
}

/* Applies one override to the fixture; returns false (a test bug) when it names no such view. */
static bool apply_override(fixture *f, const view_override *o)
{
    if (o->field == SET_NONE)
        return true;
    bool is_data = o->field == SET_DATA_NULL || o->field == SET_DATA_WRAP || o->field == SET_DATA_ALIAS;
    if (o->field == SET_DATA_ALIAS && !view_data(f, o->source))
        return false;
    cvf_matrix *m = find_matrix(f, o->target);
    cvf_vector *v = find_vector(f, o->target);
    if (m) {
        switch (o->field) {
        case SET_ROWS: m->rows = o->value; return true;
        case SET_COLS: m->cols = o->value; return true;
        case SET_ROW_STRIDE: m->row_stride = o->value; return true;
        case SET_COL_STRIDE: m->col_stride = o->value; return true;
        case SET_DTYPE: m->dtype = (cvf_dtype)o->value; return true;
        default:
            if (!is_data)
                return false;
            m->data = override_data(f, o);
            return true;
        }
    }
    if (v) {
        switch (o->field) {
        case SET_LENGTH: v->length = o->value; return true;
        case SET_STRIDE: v->stride = o->value; return true;
        case SET_DTYPE: v->dtype = (cvf_dtype)o->value; return true;
        default:
            if (!is_data)
                return false;
            v->data = override_data(f, o);
            return true;
        }
    }
    return false;
}

/* Passes a NULL context. */
static void null_ctx(fixture *f)
{
    f->ctx = NULL;
}

/* Passes a NULL a view pointer. */
static void null_a_view(fixture *f)
{
    f->pa = NULL;
}

/* Passes a NULL b view pointer. */
static void null_b_view(fixture *f)
{
    f->pb = NULL;
}

/* Passes a NULL c view pointer. */
static void null_c_view(fixture *f)
{
    f->pc = NULL;
}

/* Passes a NULL x view pointer. */
static void null_x_view(fixture *f)
{
    f->px = NULL;
}

/* Passes a NULL out view pointer. */
static void null_out_view(fixture *f)
{
    f->pout = NULL;
}

/* Passes NULL MLP argument structs. */
static void null_mlp_args(fixture *f)
{
    f->pforward = NULL;
    f->pbackward = NULL;
}

/* Passes no epilogue at all (a plain GEMM). */
static void no_epilogue(fixture *f)
{
    f->pepilogue = NULL;
}

/* Switches the epilogue to the GELU backward with aux_in attached (a valid call). */
static void dgelu_with_aux_in(fixture *f)
{
    f->epilogue.activation = CVF_ACTIVATION_DGELU_TANH;
    f->epilogue.aux_in = &f->aux_in;
}

/* Switches the epilogue to the GELU backward but leaves aux_in NULL. */
static void dgelu_without_aux_in(fixture *f)
{
    f->epilogue.activation = CVF_ACTIVATION_DGELU_TANH;
}

/* Attaches aux_in to the (RELU) epilogue, which does not read it. */
static void relu_with_aux_in(fixture *f)
{
    f->epilogue.aux_in = &f->aux_in;
}

/* Attaches aux_in to an epilogue with no activation. */
static void none_with_aux_in(fixture *f)
{
    f->epilogue.activation = CVF_ACTIVATION_NONE;
    f->epilogue.aux_in = &f->aux_in;
}

/* Makes the problem a single row whose outputs use row stride 0 (valid: no two elements). */
static void single_row_stride_zero(fixture *f)
{
    f->a.rows = 1;
    f->c.rows = 1;
    f->c.row_stride = 0;
    f->aux_out.rows = 1;
    f->aux_out.row_stride = 0;
}

/* Makes the problem one row by one step of K, every stride that only one row or column uses
 * INT64_MAX (valid: it is never stepped; the kernels must not multiply it out). */
static void single_row_single_k_huge_strides(fixture *f)
{
    f->a.rows = 1;
    f->a.cols = 1;
    f->a.row_stride = INT64_MAX;
    f->b.rows = 1;
    f->b.row_stride = INT64_MAX;
    f->b.dtype = CVF_F16; /* past the direct kernel (f32 only): the row tiles on the CPU */
    f->c.rows = 1;
    f->c.row_stride = INT64_MAX;
    f->aux_out.rows = 1;
    f->aux_out.row_stride = INT64_MAX;
}

/* Makes the problem a single column whose vector output uses stride 0 (valid: one element). */
static void single_column_stride_zero(fixture *f)
{
    f->b.cols = 1;
    f->c.cols = 1;
    f->aux_out.cols = 1;
    f->bias.length = 1;
    f->bias_grad.length = 1;
    f->bias_grad.stride = 0;
}

/* Makes every output dtype a 16-bit one (f16 C, bf16 aux_out and bias_grad). */
static void half_outputs(fixture *f)
{
    f->c.dtype = CVF_F16;
    f->aux_out.dtype = CVF_BF16;
    f->bias_grad.dtype = CVF_BF16;
}

/* Sets an activation value past the last enumerator. */
static void activation_too_big(fixture *f)
{
    f->epilogue.activation = (cvf_activation)6;
}

/* Sets a negative activation value. */
static void activation_negative(fixture *f)
{
    f->epilogue.activation = (cvf_activation)-1;
}

/* ------------------------------------------------------------------------------------------ */
/* The table                                                                                   */
/* ------------------------------------------------------------------------------------------ */

enum { DEV_CPU = 1, DEV_REF = 2, DEV_BOTH = 3 };

/* One case: build op's valid call, apply the overrides and the mutation, expect a status and a
 * message naming arg (and arg2 when set). arg NULL: no message check (the NULL-context cases). */
typedef struct error_case {
    const char *name;
    op_kind op;
    view_override set[2];
    void (*mutate)(fixture *f);
    cvf_status expected;
    const char *arg;
    const char *arg2;
    int devices; /* DEV_* mask; 0 means both devices */
} error_case;

#define OK CVF_STATUS_SUCCESS
#define E_NULL CVF_STATUS_NULL_POINTER
#define E_VALUE CVF_STATUS_INVALID_VALUE
#define E_SHAPE CVF_STATUS_SHAPE_MISMATCH
#define E_OVERLAP CVF_STATUS_OVERLAPPING_OUTPUT
#define E_ALIAS CVF_STATUS_ALIASED_OUTPUT
#define E_OVERFLOW CVF_STATUS_SIZE_OVERFLOW
#define E_UNSUPPORTED CVF_STATUS_UNSUPPORTED

/* Byte size of one f32 element, for alias offsets. */
#define F4 4

/* clang-format off */
static const error_case g_cases[] = {
    /* ---- cvf_matmul: the valid baselines ---- */
    {"baseline relu+bias+aux_out+bias_grad", OP_MATMUL, {{0}}, NULL, OK, NULL, NULL, 0},
    {"baseline without epilogue", OP_MATMUL, {{0}}, no_epilogue, OK, NULL, NULL, 0},
    {"baseline dgelu with aux_in", OP_MATMUL, {{0}}, dgelu_with_aux_in, OK, NULL, NULL, 0},
    {"c column-major (row stride 1, col stride M)", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 1, NULL}, {"c", SET_COL_STRIDE, M, NULL}}, NULL, OK, NULL, NULL, 0},
    {"c padded rows (row stride N + 3)", OP_MATMUL, {{"c", SET_ROW_STRIDE, N + 3, NULL}}, NULL, OK, NULL, NULL, 0},
    {"c right after a's last byte (touching, not overlapping)", OP_MATMUL,
     {{"c", SET_DATA_ALIAS, M * K * F4, "a"}}, NULL, OK, NULL, NULL, 0},
    {"c one-to-one interleaved layout (row stride 2, col stride 3)", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 2, NULL}, {"c", SET_COL_STRIDE, 3, NULL}}, NULL, OK, NULL, NULL, 0},
    {"c one-to-one layout (row stride 5, col stride 3)", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 5, NULL}, {"c", SET_COL_STRIDE, 3, NULL}}, NULL, OK, NULL, NULL, 0},
    {"c one-to-one layout (row stride 4, col stride 6)", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 4, NULL}, {"c", SET_COL_STRIDE, 6, NULL}}, NULL, OK, NULL, NULL, 0},
    {"single row with output row stride 0", OP_MATMUL, {{0}}, single_row_stride_zero, OK, NULL, NULL, 0},
    {"one row, K = 1, one-row strides INT64_MAX", OP_MATMUL, {{0}}, single_row_single_k_huge_strides, OK, NULL, NULL,
     0},
    {"f16/bf16 outputs", OP_MATMUL, {{0}}, half_outputs, OK, NULL, NULL, 0},
    {"single column with vector output stride 0", OP_MATMUL, {{0}}, single_column_stride_zero, OK, NULL, NULL, 0},
    {"a broadcast rows (row stride 0)", OP_MATMUL, {{"a", SET_ROW_STRIDE, 0, NULL}}, NULL, OK, NULL, NULL, 0},
    {"bias broadcast (stride 0)", OP_MATMUL, {{"epilogue.bias", SET_STRIDE, 0, NULL}}, NULL, OK, NULL, NULL, 0},

    /* ---- cvf_matmul: data not aligned to the element size ---- */
    {"a data misaligned by 2 bytes", OP_MATMUL, {{"a", SET_DATA_ALIAS, 2, "a"}}, NULL, E_VALUE, "a", NULL, 0},
    {"c data misaligned by 1 byte", OP_MATMUL, {{"c", SET_DATA_ALIAS, 1, "c"}}, NULL, E_VALUE, "c", NULL, 0},
    {"bias data misaligned by 1 byte", OP_MATMUL, {{"epilogue.bias", SET_DATA_ALIAS, 1, "epilogue.bias"}}, NULL,
     E_VALUE, "epilogue.bias", NULL, 0},

    /* ---- cvf_matmul: NULL pointers ---- */
    {"NULL ctx", OP_MATMUL, {{0}}, null_ctx, E_NULL, NULL, NULL, 0},
    {"NULL a view", OP_MATMUL, {{0}}, null_a_view, E_NULL, "a", NULL, 0},
    {"NULL b view", OP_MATMUL, {{0}}, null_b_view, E_NULL, "b", NULL, 0},
    {"NULL c view", OP_MATMUL, {{0}}, null_c_view, E_NULL, "c", NULL, 0},
    {"NULL a data", OP_MATMUL, {{"a", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "a", NULL, 0},
    {"NULL b data", OP_MATMUL, {{"b", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "b", NULL, 0},
    {"NULL c data", OP_MATMUL, {{"c", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "c", NULL, 0},
    {"NULL bias data", OP_MATMUL, {{"epilogue.bias", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "epilogue.bias", NULL,
     0},
    {"NULL aux_out data", OP_MATMUL, {{"epilogue.aux_out", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL,
     "epilogue.aux_out", NULL, 0},
    {"NULL bias_grad data", OP_MATMUL, {{"epilogue.bias_grad", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL,
     "epilogue.bias_grad", NULL, 0},
    {"NULL aux_in data", OP_MATMUL, {{"epilogue.aux_in", SET_DATA_NULL, 0, NULL}}, dgelu_with_aux_in, E_NULL,
     "epilogue.aux_in", NULL, 0},

    /* ---- cvf_matmul: invalid values ---- */
    {"a rows -1", OP_MATMUL, {{"a", SET_ROWS, -1, NULL}}, NULL, E_VALUE, "a", NULL, 0},
    {"a cols -1", OP_MATMUL, {{"a", SET_COLS, -1, NULL}}, NULL, E_VALUE, "a", NULL, 0},
    {"b row stride -1", OP_MATMUL, {{"b", SET_ROW_STRIDE, -1, NULL}}, NULL, E_VALUE, "b", NULL, 0},
    {"b col stride -5", OP_MATMUL, {{"b", SET_COL_STRIDE, -5, NULL}}, NULL, E_VALUE, "b", NULL, 0},
    {"c rows -3", OP_MATMUL, {{"c", SET_ROWS, -3, NULL}}, NULL, E_VALUE, "c", NULL, 0},
    {"c col stride INT64_MIN", OP_MATMUL, {{"c", SET_COL_STRIDE, INT64_MIN, NULL}}, NULL, E_VALUE, "c", NULL, 0},
    {"bias length -1", OP_MATMUL, {{"epilogue.bias", SET_LENGTH, -1, NULL}}, NULL, E_VALUE, "epilogue.bias", NULL,
     0},
    {"bias stride -1", OP_MATMUL, {{"epilogue.bias", SET_STRIDE, -1, NULL}}, NULL, E_VALUE, "epilogue.bias", NULL,
     0},
    {"aux_out cols -1", OP_MATMUL, {{"epilogue.aux_out", SET_COLS, -1, NULL}}, NULL, E_VALUE, "epilogue.aux_out",
     NULL, 0},
    {"bias_grad stride -2", OP_MATMUL, {{"epilogue.bias_grad", SET_STRIDE, -2, NULL}}, NULL, E_VALUE,
     "epilogue.bias_grad", NULL, 0},
    {"aux_in row stride -1", OP_MATMUL, {{"epilogue.aux_in", SET_ROW_STRIDE, -1, NULL}}, dgelu_with_aux_in, E_VALUE,
     "epilogue.aux_in", NULL, 0},
    {"a dtype 42", OP_MATMUL, {{"a", SET_DTYPE, 42, NULL}}, NULL, E_VALUE, "a", NULL, 0},
    {"b dtype 4", OP_MATMUL, {{"b", SET_DTYPE, 4, NULL}}, NULL, E_VALUE, "b", NULL, 0},
    {"c dtype -1", OP_MATMUL, {{"c", SET_DTYPE, -1, NULL}}, NULL, E_VALUE, "c", NULL, 0},
    {"bias dtype 99", OP_MATMUL, {{"epilogue.bias", SET_DTYPE, 99, NULL}}, NULL, E_VALUE, "epilogue.bias", NULL, 0},
    {"bias_grad dtype 7", OP_MATMUL, {{"epilogue.bias_grad", SET_DTYPE, 7, NULL}}, NULL, E_VALUE,
     "epilogue.bias_grad", NULL, 0},
    {"activation 6", OP_MATMUL, {{0}}, activation_too_big, E_VALUE, "epilogue.activation", NULL, 0},
    {"activation -1", OP_MATMUL, {{0}}, activation_negative, E_VALUE, "epilogue.activation", NULL, 0},
    {"dgelu without aux_in", OP_MATMUL, {{0}}, dgelu_without_aux_in, E_VALUE, "epilogue.aux_in", NULL, 0},
    {"aux_in with relu", OP_MATMUL, {{0}}, relu_with_aux_in, E_VALUE, "epilogue.aux_in", NULL, 0},
    {"aux_in with no activation", OP_MATMUL, {{0}}, none_with_aux_in, E_VALUE, "epilogue.aux_in", NULL, 0},

    /* ---- cvf_matmul: shape mismatches ---- */
    {"b rows != a.cols", OP_MATMUL, {{"b", SET_ROWS, K - 1, NULL}}, NULL, E_SHAPE, "b", NULL, 0},
    {"a cols != b.rows", OP_MATMUL, {{"a", SET_COLS, K + 1, NULL}}, NULL, E_SHAPE, "b", "a", 0},
    {"c rows != a.rows", OP_MATMUL, {{"c", SET_ROWS, M + 1, NULL}}, NULL, E_SHAPE, "c", NULL, 0},
    {"c cols != b.cols", OP_MATMUL, {{"c", SET_COLS, N - 1, NULL}}, NULL, E_SHAPE, "c", NULL, 0},
    {"c transposed shape", OP_MATMUL,
     {{"c", SET_ROWS, N, NULL}, {"c", SET_COLS, M, NULL}}, NULL, E_SHAPE, "c", NULL, 0},
    {"bias length N - 1", OP_MATMUL, {{"epilogue.bias", SET_LENGTH, N - 1, NULL}}, NULL, E_SHAPE, "epilogue.bias",
     NULL, 0},
    {"bias length N + 1", OP_MATMUL, {{"epilogue.bias", SET_LENGTH, N + 1, NULL}}, NULL, E_SHAPE, "epilogue.bias",
     NULL, 0},
    {"bias_grad length M", OP_MATMUL, {{"epilogue.bias_grad", SET_LENGTH, M, NULL}}, NULL, E_SHAPE,
     "epilogue.bias_grad", NULL, 0},
    {"aux_out rows M + 1", OP_MATMUL, {{"epilogue.aux_out", SET_ROWS, M + 1, NULL}}, NULL, E_SHAPE,
     "epilogue.aux_out", NULL, 0},
    {"aux_out transposed shape", OP_MATMUL,
     {{"epilogue.aux_out", SET_ROWS, N, NULL}, {"epilogue.aux_out", SET_COLS, M, NULL}}, NULL, E_SHAPE,
     "epilogue.aux_out", NULL, 0},
    {"aux_out cols N - 1", OP_MATMUL, {{"epilogue.aux_out", SET_COLS, N - 1, NULL}}, NULL, E_SHAPE,
     "epilogue.aux_out", NULL, 0},
    {"aux_in cols N + 1", OP_MATMUL, {{"epilogue.aux_in", SET_COLS, N + 1, NULL}}, dgelu_with_aux_in, E_SHAPE,
     "epilogue.aux_in", NULL, 0},
    {"aux_in rows 1", OP_MATMUL, {{"epilogue.aux_in", SET_ROWS, 1, NULL}}, dgelu_with_aux_in, E_SHAPE,
     "epilogue.aux_in", NULL, 0},

    /* ---- cvf_matmul: outputs whose strides map two elements to one address ---- */
    {"c row stride 0", OP_MATMUL, {{"c", SET_ROW_STRIDE, 0, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"c col stride 0", OP_MATMUL, {{"c", SET_COL_STRIDE, 0, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"c row stride 1 and col stride 1", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 1, NULL}, {"c", SET_COL_STRIDE, 1, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"c column-major with col stride < rows", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 1, NULL}, {"c", SET_COL_STRIDE, M - 1, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"c row-major with row stride < cols", OP_MATMUL, {{"c", SET_ROW_STRIDE, N - 1, NULL}}, NULL, E_OVERLAP, "c",
     NULL, 0},
    {"c strides 3 and 2 (elements (0,3) and (2,0) collide)", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 3, NULL}, {"c", SET_COL_STRIDE, 2, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"c strides 6 and 4 (gcd 2: (2,0) and (0,3) collide)", OP_MATMUL,
     {{"c", SET_ROW_STRIDE, 6, NULL}, {"c", SET_COL_STRIDE, 4, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"aux_out row stride 0", OP_MATMUL, {{"epilogue.aux_out", SET_ROW_STRIDE, 0, NULL}}, NULL, E_OVERLAP,
     "epilogue.aux_out", NULL, 0},
    {"bias_grad stride 0", OP_MATMUL, {{"epilogue.bias_grad", SET_STRIDE, 0, NULL}}, NULL, E_OVERLAP,
     "epilogue.bias_grad", NULL, 0},

    /* ---- cvf_matmul: byte extents that do not fit ---- */
    {"a rows INT64_MAX/2, row stride 4", OP_MATMUL,
     {{"a", SET_ROWS, HUGE_ROWS, NULL}, {"a", SET_ROW_STRIDE, 4, NULL}}, NULL, E_OVERFLOW, "a", NULL, 0},
    {"b rows INT64_MAX/2, row stride 4", OP_MATMUL,
     {{"b", SET_ROWS, HUGE_ROWS, NULL}, {"b", SET_ROW_STRIDE, 4, NULL}}, NULL, E_OVERFLOW, "b", NULL, 0},
    {"c rows INT64_MAX/2, row stride 4", OP_MATMUL,
     {{"c", SET_ROWS, HUGE_ROWS, NULL}, {"c", SET_ROW_STRIDE, 4, NULL}}, NULL, E_OVERFLOW, "c", NULL, 0},
    {"bias length INT64_MAX/2, stride 4", OP_MATMUL,
     {{"epilogue.bias", SET_LENGTH, HUGE_ROWS, NULL}, {"epilogue.bias", SET_STRIDE, 4, NULL}}, NULL, E_OVERFLOW,
     "epilogue.bias", NULL, 0},
    {"aux_out rows INT64_MAX/2, row stride 4", OP_MATMUL,
     {{"epilogue.aux_out", SET_ROWS, HUGE_ROWS, NULL}, {"epilogue.aux_out", SET_ROW_STRIDE, 4, NULL}}, NULL,
     E_OVERFLOW, "epilogue.aux_out", NULL, 0},
    {"aux_in wrapping the address space", OP_MATMUL,
     {{"epilogue.aux_in", SET_DATA_WRAP, 0, NULL}, {"epilogue.aux_in", SET_ROW_STRIDE, 300, NULL}},
     dgelu_with_aux_in, E_OVERFLOW, "epilogue.aux_in", NULL, 0},
    {"a col stride INT64_MAX", OP_MATMUL, {{"a", SET_COL_STRIDE, INT64_MAX, NULL}}, NULL, E_OVERFLOW, "a", NULL, 0},
    {"a of 1000 elements wrapping the address space", OP_MATMUL,
     {{"a", SET_DATA_WRAP, 0, NULL}, {"a", SET_ROWS, 250, NULL}}, NULL, E_OVERFLOW, "a", NULL, 0},
    {"c of 1000 elements wrapping the address space", OP_MATMUL,
     {{"c", SET_DATA_WRAP, 0, NULL}, {"c", SET_ROW_STRIDE, 200, NULL}}, NULL, E_OVERFLOW, "c", NULL, 0},
    {"bias_grad of 1000 elements wrapping the address space", OP_MATMUL,
     {{"epilogue.bias_grad", SET_DATA_WRAP, 0, NULL}, {"epilogue.bias_grad", SET_STRIDE, 250, NULL}}, NULL,
     E_OVERFLOW, "epilogue.bias_grad", NULL, 0},

    /* ---- cvf_matmul: outputs sharing memory with other operands ---- */
    {"c is a's buffer", OP_MATMUL, {{"c", SET_DATA_ALIAS, 0, "a"}}, NULL, E_ALIAS, "c", "a", 0},
    {"c overlaps the tail of b", OP_MATMUL, {{"c", SET_DATA_ALIAS, (K * N - 2) * F4, "b"}}, NULL, E_ALIAS, "c", "b",
     0},
    {"c starts 4 bytes before b", OP_MATMUL, {{"c", SET_DATA_ALIAS, -F4, "b"}}, NULL, E_ALIAS, "c", "b", 0},
    {"c overlaps bias", OP_MATMUL, {{"c", SET_DATA_ALIAS, 2 * F4, "epilogue.bias"}}, NULL, E_ALIAS, "c",
     "epilogue.bias", 0},
    {"aux_out overlaps c", OP_MATMUL, {{"epilogue.aux_out", SET_DATA_ALIAS, 2 * F4, "c"}}, NULL, E_ALIAS, "c",
     "epilogue.aux_out", 0},
    {"bias_grad inside c's buffer", OP_MATMUL, {{"epilogue.bias_grad", SET_DATA_ALIAS, 5 * F4, "c"}}, NULL, E_ALIAS,
     "epilogue.bias_grad", "c", 0},
    {"bias_grad inside aux_out's buffer", OP_MATMUL,
     {{"epilogue.bias_grad", SET_DATA_ALIAS, 0, "epilogue.aux_out"}}, NULL, E_ALIAS, "epilogue.bias_grad",
     "epilogue.aux_out", 0},
    {"aux_out over aux_in", OP_MATMUL, {{"epilogue.aux_out", SET_DATA_ALIAS, 0, "epilogue.aux_in"}},
     dgelu_with_aux_in, E_ALIAS, "epilogue.aux_out", "epilogue.aux_in", 0},
    {"bias_grad over bias", OP_MATMUL, {{"epilogue.bias_grad", SET_DATA_ALIAS, 0, "epilogue.bias"}}, NULL, E_ALIAS,
     "epilogue.bias_grad", "epilogue.bias", 0},

    /* ---- cvf_matmul: dtypes the device cannot run ---- */
    {"a f64 on the CPU", OP_MATMUL, {{"a", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED, "a", "f64", DEV_CPU},
    {"c f64 on the CPU", OP_MATMUL, {{"c", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED, "c", "f64", DEV_CPU},
    {"bias f64 on the CPU", OP_MATMUL, {{"epilogue.bias", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED,
     "epilogue.bias", "f64", DEV_CPU},
    {"bias_grad f64 on the CPU", OP_MATMUL, {{"epilogue.bias_grad", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED,
     "epilogue.bias_grad", "f64", DEV_CPU},
    {"aux_out f64 on the CPU", OP_MATMUL, {{"epilogue.aux_out", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED,
     "epilogue.aux_out", "f64", DEV_CPU},
    {"aux_in f64 on the CPU", OP_MATMUL, {{"epilogue.aux_in", SET_DTYPE, CVF_F64, NULL}}, dgelu_with_aux_in,
     E_UNSUPPORTED, "epilogue.aux_in", "f64", DEV_CPU},
    {"a f64 on the reference device", OP_MATMUL, {{"a", SET_DTYPE, CVF_F64, NULL}}, NULL, OK, NULL, NULL, DEV_REF},
    {"mixed f16 a, bf16 b, f32 c", OP_MATMUL,
     {{"a", SET_DTYPE, CVF_F16, NULL}, {"b", SET_DTYPE, CVF_BF16, NULL}}, NULL, OK, NULL, NULL, 0},

    /* ---- cvf_matmul_relu ---- */
    {"relu baseline", OP_MATMUL_RELU, {{0}}, NULL, OK, NULL, NULL, 0},
    {"relu NULL ctx", OP_MATMUL_RELU, {{0}}, null_ctx, E_NULL, NULL, NULL, 0},
    {"relu NULL a view", OP_MATMUL_RELU, {{0}}, null_a_view, E_NULL, "a", NULL, 0},
    {"relu NULL c view", OP_MATMUL_RELU, {{0}}, null_c_view, E_NULL, "c", NULL, 0},
    {"relu NULL b data", OP_MATMUL_RELU, {{"b", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "b", NULL, 0},
    {"relu a rows -1", OP_MATMUL_RELU, {{"a", SET_ROWS, -1, NULL}}, NULL, E_VALUE, "a", NULL, 0},
    {"relu c dtype 5", OP_MATMUL_RELU, {{"c", SET_DTYPE, 5, NULL}}, NULL, E_VALUE, "c", NULL, 0},
    {"relu b rows != a.cols", OP_MATMUL_RELU, {{"b", SET_ROWS, K + 2, NULL}}, NULL, E_SHAPE, "b", NULL, 0},
    {"relu c cols != b.cols", OP_MATMUL_RELU, {{"c", SET_COLS, N + 1, NULL}, {"c", SET_ROW_STRIDE, N + 1, NULL}},
     NULL, E_SHAPE, "c", NULL, 0},
    {"relu c row stride 0", OP_MATMUL_RELU, {{"c", SET_ROW_STRIDE, 0, NULL}}, NULL, E_OVERLAP, "c", NULL, 0},
    {"relu c rows INT64_MAX/2", OP_MATMUL_RELU,
     {{"c", SET_ROWS, HUGE_ROWS, NULL}, {"c", SET_ROW_STRIDE, 4, NULL}}, NULL, E_OVERFLOW, "c", NULL, 0},
    {"relu c over b", OP_MATMUL_RELU, {{"c", SET_DATA_ALIAS, 0, "b"}}, NULL, E_ALIAS, "c", "b", 0},
    {"relu b f64 on the CPU", OP_MATMUL_RELU, {{"b", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED, "b", "f64",
     DEV_CPU},

    /* ---- cvf_column_sum ---- */
    {"column_sum baseline", OP_COLUMN_SUM, {{0}}, NULL, OK, NULL, NULL, 0},
    {"column_sum x broadcast rows", OP_COLUMN_SUM, {{"x", SET_ROW_STRIDE, 0, NULL}}, NULL, OK, NULL, NULL, 0},
    {"column_sum NULL ctx", OP_COLUMN_SUM, {{0}}, null_ctx, E_NULL, NULL, NULL, 0},
    {"column_sum NULL x view", OP_COLUMN_SUM, {{0}}, null_x_view, E_NULL, "x", NULL, 0},
    {"column_sum NULL out view", OP_COLUMN_SUM, {{0}}, null_out_view, E_NULL, "out", NULL, 0},
    {"column_sum NULL x data", OP_COLUMN_SUM, {{"x", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "x", NULL, 0},
    {"column_sum NULL out data", OP_COLUMN_SUM, {{"out", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "out", NULL, 0},
    {"column_sum x rows -1", OP_COLUMN_SUM, {{"x", SET_ROWS, -1, NULL}}, NULL, E_VALUE, "x", NULL, 0},
    {"column_sum x col stride -1", OP_COLUMN_SUM, {{"x", SET_COL_STRIDE, -1, NULL}}, NULL, E_VALUE, "x", NULL, 0},
    {"column_sum out length -1", OP_COLUMN_SUM, {{"out", SET_LENGTH, -1, NULL}}, NULL, E_VALUE, "out", NULL, 0},
    {"column_sum out stride -1", OP_COLUMN_SUM, {{"out", SET_STRIDE, -1, NULL}}, NULL, E_VALUE, "out", NULL, 0},
    {"column_sum x dtype 9", OP_COLUMN_SUM, {{"x", SET_DTYPE, 9, NULL}}, NULL, E_VALUE, "x", NULL, 0},
    {"column_sum out dtype 9", OP_COLUMN_SUM, {{"out", SET_DTYPE, 9, NULL}}, NULL, E_VALUE, "out", NULL, 0},
    {"column_sum out length N - 1", OP_COLUMN_SUM, {{"out", SET_LENGTH, N - 1, NULL}}, NULL, E_SHAPE, "out", NULL,
     0},
    {"column_sum out stride 0", OP_COLUMN_SUM, {{"out", SET_STRIDE, 0, NULL}}, NULL, E_OVERLAP, "out", NULL, 0},
    {"column_sum x rows INT64_MAX/2", OP_COLUMN_SUM,
     {{"x", SET_ROWS, HUGE_ROWS, NULL}, {"x", SET_ROW_STRIDE, 4, NULL}}, NULL, E_OVERFLOW, "x", NULL, 0},
    {"column_sum out wrapping the address space", OP_COLUMN_SUM,
     {{"out", SET_DATA_WRAP, 0, NULL}, {"out", SET_STRIDE, 200, NULL}}, NULL, E_OVERFLOW, "out", NULL, 0},
    {"column_sum out inside x", OP_COLUMN_SUM, {{"out", SET_DATA_ALIAS, 3 * F4, "x"}}, NULL, E_ALIAS, "out", "x",
     0},
    {"column_sum x f64 on the CPU", OP_COLUMN_SUM, {{"x", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED, "x",
     "f64", DEV_CPU},
    {"column_sum out f64 on the CPU", OP_COLUMN_SUM, {{"out", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED,
     "out", "f64", DEV_CPU},

    /* ---- cvf_mlp_forward ---- */
    {"forward baseline", OP_MLP_FORWARD, {{0}}, NULL, OK, NULL, NULL, 0},
    {"forward NULL ctx", OP_MLP_FORWARD, {{0}}, null_ctx, E_NULL, NULL, NULL, 0},
    {"forward NULL args", OP_MLP_FORWARD, {{0}}, null_mlp_args, E_NULL, "args", NULL, 0},
    {"forward NULL hidden_state data", OP_MLP_FORWARD, {{"hidden_state", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL,
     "hidden_state", NULL, 0},
    {"forward NULL fc1_bias data", OP_MLP_FORWARD, {{"fc1_bias", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "fc1_bias",
     NULL, 0},
    {"forward NULL output data", OP_MLP_FORWARD, {{"output", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL, "output", NULL,
     0},
    {"forward fc2_weight row stride -1", OP_MLP_FORWARD, {{"fc2_weight", SET_ROW_STRIDE, -1, NULL}}, NULL, E_VALUE,
     "fc2_weight", NULL, 0},
    {"forward fc2_bias length -1", OP_MLP_FORWARD, {{"fc2_bias", SET_LENGTH, -1, NULL}}, NULL, E_VALUE, "fc2_bias",
     NULL, 0},
    {"forward gelu_output dtype 12", OP_MLP_FORWARD, {{"gelu_output", SET_DTYPE, 12, NULL}}, NULL, E_VALUE,
     "gelu_output", NULL, 0},
    {"forward fc1_weight (I, H+1)", OP_MLP_FORWARD, {{"fc1_weight", SET_COLS, H + 1, NULL}}, NULL, E_SHAPE,
     "fc1_weight", NULL, 0},
    {"forward fc2_weight (H, I-1)", OP_MLP_FORWARD, {{"fc2_weight", SET_COLS, I - 1, NULL}}, NULL, E_SHAPE,
     "fc2_weight", NULL, 0},
    {"forward fc2_bias length H+1", OP_MLP_FORWARD, {{"fc2_bias", SET_LENGTH, H + 1, NULL}}, NULL, E_SHAPE,
     "fc2_bias", NULL, 0},
    {"forward fc1_bias length I-1", OP_MLP_FORWARD, {{"fc1_bias", SET_LENGTH, I - 1, NULL}}, NULL, E_SHAPE,
     "fc1_bias", NULL, 0},
    {"forward fc1_output (S+1, I)", OP_MLP_FORWARD, {{"fc1_output", SET_ROWS, S + 1, NULL}}, NULL, E_SHAPE,
     "fc1_output", NULL, 0},
    {"forward output (S, I)", OP_MLP_FORWARD, {{"output", SET_COLS, I, NULL}, {"output", SET_ROW_STRIDE, I, NULL}},
     NULL, E_SHAPE, "output", NULL, 0},
    {"forward output row stride 0", OP_MLP_FORWARD, {{"output", SET_ROW_STRIDE, 0, NULL}}, NULL, E_OVERLAP,
     "output", NULL, 0},
    {"forward gelu_output row/col stride 1", OP_MLP_FORWARD,
     {{"gelu_output", SET_ROW_STRIDE, 1, NULL}, {"gelu_output", SET_COL_STRIDE, 1, NULL}}, NULL, E_OVERLAP,
     "gelu_output", NULL, 0},
    {"forward fc1_weight rows INT64_MAX/2", OP_MLP_FORWARD,
     {{"fc1_weight", SET_ROWS, HUGE_ROWS, NULL}, {"fc1_weight", SET_ROW_STRIDE, 4, NULL}}, NULL, E_OVERFLOW,
     "fc1_weight", NULL, 0},
    {"forward output aliases hidden_state", OP_MLP_FORWARD, {{"output", SET_DATA_ALIAS, 0, "hidden_state"}}, NULL,
     E_ALIAS, "output", "hidden_state", 0},
    {"forward gelu_output shares fc1_output", OP_MLP_FORWARD, {{"gelu_output", SET_DATA_ALIAS, 4 * F4, "fc1_output"}},
     NULL, E_ALIAS, "gelu_output", "fc1_output", 0},
    {"forward fc1_output over fc2_weight", OP_MLP_FORWARD, {{"fc1_output", SET_DATA_ALIAS, 0, "fc2_weight"}}, NULL,
     E_ALIAS, "fc1_output", "fc2_weight", 0},
    {"forward hidden_state f64 on the CPU", OP_MLP_FORWARD, {{"hidden_state", SET_DTYPE, CVF_F64, NULL}}, NULL,
     E_UNSUPPORTED, "hidden_state", "f64", DEV_CPU},
    {"forward output f64 on the CPU", OP_MLP_FORWARD, {{"output", SET_DTYPE, CVF_F64, NULL}}, NULL, E_UNSUPPORTED,
     "output", "f64", DEV_CPU},

    /* ---- cvf_mlp_backward ---- */
    {"backward baseline", OP_MLP_BACKWARD, {{0}}, NULL, OK, NULL, NULL, 0},
    {"backward NULL ctx", OP_MLP_BACKWARD, {{0}}, null_ctx, E_NULL, NULL, NULL, 0},
    {"backward NULL args", OP_MLP_BACKWARD, {{0}}, null_mlp_args, E_NULL, "args", NULL, 0},
    {"backward NULL gelu_output data", OP_MLP_BACKWARD, {{"gelu_output", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL,
     "gelu_output", NULL, 0},
    {"backward NULL grad_fc2_bias data", OP_MLP_BACKWARD, {{"grad_fc2_bias", SET_DATA_NULL, 0, NULL}}, NULL, E_NULL,
     "grad_fc2_bias", NULL, 0},
    {"backward grad_output cols -1", OP_MLP_BACKWARD, {{"grad_output", SET_COLS, -1, NULL}}, NULL, E_VALUE,
     "grad_output", NULL, 0},
    {"backward grad_fc1_bias stride -1", OP_MLP_BACKWARD, {{"grad_fc1_bias", SET_STRIDE, -1, NULL}}, NULL, E_VALUE,
     "grad_fc1_bias", NULL, 0},
    {"backward fc1_output dtype 8", OP_MLP_BACKWARD, {{"fc1_output", SET_DTYPE, 8, NULL}}, NULL, E_VALUE,
     "fc1_output", NULL, 0},
    {"backward fc1_weight (I, H+1)", OP_MLP_BACKWARD, {{"fc1_weight", SET_COLS, H + 1, NULL}}, NULL, E_SHAPE,
     "fc1_weight", NULL, 0},
    {"backward hidden_state (S+1, H)", OP_MLP_BACKWARD, {{"hidden_state", SET_ROWS, S + 1, NULL}}, NULL, E_SHAPE,
     "hidden_state", NULL, 0},
    {"backward grad_fc1_bias length I+1", OP_MLP_BACKWARD, {{"grad_fc1_bias", SET_LENGTH, I + 1, NULL}}, NULL,
     E_SHAPE, "grad_fc1_bias", NULL, 0},
    {"backward grad_fc2_bias length I", OP_MLP_BACKWARD, {{"grad_fc2_bias", SET_LENGTH, I, NULL}}, NULL, E_SHAPE,
     "grad_fc2_bias", NULL, 0},
    {"backward grad_fc2_weight (I, H)", OP_MLP_BACKWARD,
     {{"grad_fc2_weight", SET_ROWS, I, NULL}, {"grad_fc2_weight", SET_COLS, H, NULL}}, NULL, E_SHAPE,
     "grad_fc2_weight", NULL, 0},
    {"backward grad_hidden_state col stride 0", OP_MLP_BACKWARD, {{"grad_hidden_state", SET_COL_STRIDE, 0, NULL}},
     NULL, E_OVERLAP, "grad_hidden_state", NULL, 0},
    {"backward grad_fc2_bias stride 0", OP_MLP_BACKWARD, {{"grad_fc2_bias", SET_STRIDE, 0, NULL}}, NULL, E_OVERLAP,
     "grad_fc2_bias", NULL, 0},
    {"backward grad_fc1_weight wrapping the address space", OP_MLP_BACKWARD,
     {{"grad_fc1_weight", SET_DATA_WRAP, 0, NULL}, {"grad_fc1_weight", SET_ROW_STRIDE, 250, NULL}}, NULL,
     E_OVERFLOW, "grad_fc1_weight", NULL, 0},
    {"backward grad_fc1_weight aliases fc1_weight", OP_MLP_BACKWARD,
     {{"grad_fc1_weight", SET_DATA_ALIAS, 0, "fc1_weight"}}, NULL, E_ALIAS, "grad_fc1_weight", "fc1_weight", 0},
    {"backward grad_hidden_state over grad_output", OP_MLP_BACKWARD,
     {{"grad_hidden_state", SET_DATA_ALIAS, F4, "grad_output"}}, NULL, E_ALIAS, "grad_hidden_state", "grad_output",
     0},
    {"backward grad_fc2_weight shares grad_fc1_weight", OP_MLP_BACKWARD,
     {{"grad_fc2_weight", SET_DATA_ALIAS, 0, "grad_fc1_weight"}}, NULL, E_ALIAS, "grad_fc1_weight",
     "grad_fc2_weight", 0},
    {"backward grad_fc2_bias inside grad_fc1_bias", OP_MLP_BACKWARD,
     {{"grad_fc2_bias", SET_DATA_ALIAS, F4, "grad_fc1_bias"}}, NULL, E_ALIAS, "grad_fc1_bias", "grad_fc2_bias", 0},
    {"backward grad_fc1_weight f64 on the CPU", OP_MLP_BACKWARD, {{"grad_fc1_weight", SET_DTYPE, CVF_F64, NULL}},
     NULL, E_UNSUPPORTED, "grad_fc1_weight", "f64", DEV_CPU},
};
/* clang-format on */

/* ------------------------------------------------------------------------------------------ */
/* Running the table                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* Makes ctx's last call a success (so a stale message cannot satisfy a later check). */
static void prime_success(cvf_context *ctx)
{
    float x[2] = {1.0f, 2.0f}, out[2] = {0};
    cvf_matrix xv = cvf_matrix_row_major(x, CVF_F32, 1, 2);
    cvf_vector ov = cvf_vector_dense(out, CVF_F32, 2);
    if (cvf_column_sum(ctx, &xv, &ov) != CVF_STATUS_SUCCESS)
        check(false, "priming success call failed");
}

/* Makes ctx's last call a failure with a message (so a success must clear it). */
static void prime_failure(cvf_context *ctx)
{
    if (cvf_column_sum(ctx, NULL, NULL) != CVF_STATUS_NULL_POINTER || cvf_context_last_error(ctx)[0] == '\0')
        check(false, "priming failure call did not fail with a message");
}

/* Runs one table case on ctx (device is its name for messages). */
static void run_case(const error_case *tc, cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, tc->op, ctx);
    for (int i = 0; i < 2; i++)
        if (!check(apply_override(&f, &tc->set[i]), "[%s] %s: test bug: bad override of %s", device, tc->name,
                   tc->set[i].target ? tc->set[i].target : "(none)"))
            return;
    if (tc->mutate)
        tc->mutate(&f);
    if (tc->expected == CVF_STATUS_SUCCESS)
        prime_failure(ctx);
    else
        prime_success(ctx);

    arena_snapshot();
    cvf_status status = fixture_call(&f);
    const char *message = cvf_context_last_error(ctx);
    check(status == tc->expected, "[%s] %s %s: status %d (%s), expected %d (%s); message \"%s\"", device,
          op_name(tc->op), tc->name, (int)status, status_name(status), (int)tc->expected, status_name(tc->expected),
          message);
    if (tc->expected == CVF_STATUS_SUCCESS) {
        check(message[0] == '\0', "[%s] %s %s: success left message \"%s\"", device, op_name(tc->op), tc->name,
              message);
        return;
    }
    long changed = arena_first_change();
    check(changed < 0, "[%s] %s %s: failed call changed arena byte %ld (slot %ld)", device, op_name(tc->op), tc->name,
          changed, changed / SLOT_BYTES);
    if (!tc->arg)
        return;
    check(message[0] != '\0', "[%s] %s %s: empty message", device, op_name(tc->op), tc->name);
    check(message_names(message, tc->arg), "[%s] %s %s: message \"%s\" does not name \"%s\"", device, op_name(tc->op),
          tc->name, message, tc->arg);
    if (tc->arg2)
        check(message_names(message, tc->arg2), "[%s] %s %s: message \"%s\" does not name \"%s\"", device,
              op_name(tc->op), tc->name, message, tc->arg2);
}

/* Runs every table case on the devices it lists. */
static void test_table(cvf_context *cpu, cvf_context *ref)
{
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
        const error_case *tc = &g_cases[i];
        int devices = tc->devices ? tc->devices : DEV_BOTH;
        if (devices & DEV_CPU)
            run_case(tc, cpu, "cpu");
        if (devices & DEV_REF)
            run_case(tc, ref, "reference");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Contexts, names and status strings                                                          */
/* ------------------------------------------------------------------------------------------ */

/* A non-NULL value for *out before a failing create, to see that the call sets it to NULL. */
static cvf_context *poisoned_context(void)
{
    static unsigned char marker;
    return (cvf_context *)(void *)&marker;
}

/* Expects cvf_context_create(options) to fail with expected and to set *out to NULL. */
static void expect_create_fails(const char *what, cvf_device device, int32_t threads, cvf_status expected)
{
    cvf_context_options options = {device, threads, 0, NULL};
    cvf_context *ctx = poisoned_context();
    cvf_status status = cvf_context_create(&options, &ctx);
    check(status == expected, "cvf_context_create %s: status %d (%s), expected %d (%s)", what, (int)status,
          status_name(status), (int)expected, status_name(expected));
    check(ctx == NULL, "cvf_context_create %s: *out not set to NULL on failure", what);
    if (status == CVF_STATUS_SUCCESS && ctx != poisoned_context())
        cvf_context_destroy(ctx);
}

/* Expects cvf_context_create(options) to fail with expected and to set *out to NULL. */
static void expect_create_fails_options(const char *what, const cvf_context_options *options, cvf_status expected)
{
    cvf_context *ctx = poisoned_context();
    cvf_status status = cvf_context_create(options, &ctx);
    check(status == expected, "cvf_context_create %s: status %d (%s), expected %d (%s)", what, (int)status,
          status_name(status), (int)expected, status_name(expected));
    check(ctx == NULL, "cvf_context_create %s: *out not set to NULL on failure", what);
    if (status == CVF_STATUS_SUCCESS && ctx != poisoned_context())
        cvf_context_destroy(ctx);
}

/* Expects cvf_context_create(options) to succeed with the given device and thread count (0: any). */
static void expect_create_succeeds(const char *what, const cvf_context_options *options, cvf_device device,
                                   int32_t threads)
{
    cvf_context *ctx = poisoned_context();
    cvf_status status = cvf_context_create(options, &ctx);
    if (!check(status == CVF_STATUS_SUCCESS && ctx && ctx != poisoned_context(),
               "cvf_context_create %s: status %d (%s), expected success with a new context", what, (int)status,
               status_name(status)))
        return;
    check(cvf_context_device(ctx) == device, "cvf_context_create %s: device %d, expected %d", what,
          (int)cvf_context_device(ctx), (int)device);
    int32_t got = cvf_context_threads(ctx);
    check(threads ? got == threads : got >= 1, "cvf_context_create %s: %d threads, expected %d (0: at least 1)", what,
          (int)got, (int)threads);
    const char *message = cvf_context_last_error(ctx);
    check(message && message[0] == '\0', "cvf_context_create %s: a new context's last error is not \"\"", what);
    cvf_context_destroy(ctx);
}

/* cvf_context_create: NULL out, bad device, negative threads; the good cases for contrast. */
static void test_context_create(void)
{
    cvf_context_options options = {CVF_DEVICE_CPU, 1, 0, NULL};
    cvf_status status = cvf_context_create(&options, NULL);
    check(status == CVF_STATUS_NULL_POINTER, "cvf_context_create(options, NULL): status %d, expected NULL_POINTER",
          (int)status);
    status = cvf_context_create(NULL, NULL);
    check(status == CVF_STATUS_NULL_POINTER, "cvf_context_create(NULL, NULL): status %d, expected NULL_POINTER",
          (int)status);
    expect_create_fails("device 3", (cvf_device)3, 1, CVF_STATUS_INVALID_VALUE);
    expect_create_fails("device 1000", (cvf_device)1000, 0, CVF_STATUS_INVALID_VALUE);
    expect_create_fails("device -1", (cvf_device)-1, 1, CVF_STATUS_INVALID_VALUE);
    expect_create_fails("threads -1", CVF_DEVICE_CPU, -1, CVF_STATUS_INVALID_VALUE);
    expect_create_fails("threads INT32_MIN", CVF_DEVICE_REFERENCE, INT32_MIN, CVF_STATUS_INVALID_VALUE);
    expect_create_succeeds("NULL options", NULL, CVF_DEVICE_CPU, 0);
    cvf_context_options reference = {CVF_DEVICE_REFERENCE, 3, 0, NULL};
    expect_create_succeeds("reference, 3 threads asked (computes on the caller alone)", &reference,
                           CVF_DEVICE_REFERENCE, 1);
    cvf_context_options cpu_three = {CVF_DEVICE_CPU, 3, 0, NULL};
    expect_create_succeeds("cpu, 3 threads", &cpu_three, CVF_DEVICE_CPU, 3);
    cvf_context_options all_cores = {CVF_DEVICE_CPU, 0, 0, NULL};
    expect_create_succeeds("cpu, 0 threads", &all_cores, CVF_DEVICE_CPU, 0);
    /* CUDA: a context when a GPU is there, else UNSUPPORTED with *out NULL (never another status) */
    cvf_context_options cuda = {CVF_DEVICE_CUDA, 0, 0, NULL};
    cvf_context *cuda_ctx = poisoned_context();
    status = cvf_context_create(&cuda, &cuda_ctx);
    check(status == CVF_STATUS_SUCCESS || (status == CVF_STATUS_UNSUPPORTED && cuda_ctx == NULL),
          "cvf_context_create cuda: status %d (%s), expected success or UNSUPPORTED with *out NULL", (int)status,
          status_name(status));
    if (status == CVF_STATUS_SUCCESS)
        cvf_context_destroy(cuda_ctx);
    cvf_context_options cuda_bad = {CVF_DEVICE_CUDA, 0, 4096, NULL};
    expect_create_fails_options("cuda device_index 4096", &cuda_bad, CVF_STATUS_UNSUPPORTED);
    cvf_context_destroy(NULL); /* a no-op: reaching the next line is the check */
    check(true, "cvf_context_destroy(NULL)");
    const char *null_message = cvf_context_last_error(NULL);
    check(null_message != NULL, "cvf_context_last_error(NULL) returned NULL");
}

/* True when s is a non-NULL, non-empty string. */
static bool is_text(const char *s)
{
    return s && s[0] != '\0';
}

/* cvf_status_string: every status and out-of-range values give distinct non-empty strings. */
static void test_status_strings(void)
{
    enum { VALID = 13, EXTRA = 3 };
    const cvf_status extra[EXTRA] = {(cvf_status)13, (cvf_status)99, (cvf_status)-1};
    const char *names[VALID];
    for (int s = 0; s < VALID; s++) {
        names[s] = cvf_status_string((cvf_status)s);
        check(is_text(names[s]), "cvf_status_string(%d) is NULL or empty", s);
    }
    for (int s = 0; s < VALID; s++)
        for (int t = s + 1; t < VALID; t++)
            if (is_text(names[s]) && is_text(names[t]))
                check(strcmp(names[s], names[t]) != 0, "cvf_status_string(%d) == cvf_status_string(%d) = \"%s\"", s, t,
                      names[s]);
    for (int e = 0; e < EXTRA; e++) {
        const char *name = cvf_status_string(extra[e]);
        if (!check(is_text(name), "cvf_status_string(%d) (out of range) is NULL or empty", (int)extra[e]))
            continue;
        for (int s = 0; s < VALID; s++)
            if (is_text(names[s]))
                check(strcmp(name, names[s]) != 0, "cvf_status_string(%d) (out of range) equals status %d's \"%s\"",
                      (int)extra[e], s, name);
    }
}

/* Checks that a name function's result equals want. */
static void expect_name(const char *function, int value, const char *got, const char *want)
{
    check(got && strcmp(got, want) == 0, "%s(%d) = \"%s\", expected \"%s\"", function, value, got ? got : "(null)",
          want);
}

/* The enum name and size functions, for valid and for out-of-range values. */
static void test_enum_names(void)
{
    static const char *const dtype_names[] = {"f32", "f16", "bf16", "f64"};
    static const size_t dtype_sizes[] = {4, 2, 2, 8};
    for (int d = 0; d < 4; d++) {
        expect_name("cvf_dtype_name", d, cvf_dtype_name((cvf_dtype)d), dtype_names[d]);
        check(cvf_dtype_size((cvf_dtype)d) == dtype_sizes[d], "cvf_dtype_size(%d) = %zu, expected %zu", d,
              cvf_dtype_size((cvf_dtype)d), dtype_sizes[d]);
    }
    static const char *const activation_names[] = {"none", "relu", "gelu_tanh", "dgelu_tanh", "gelu_erf", "dgelu_erf"};
    for (int a = 0; a < 6; a++)
        expect_name("cvf_activation_name", a, cvf_activation_name((cvf_activation)a), activation_names[a]);
    expect_name("cvf_device_name", 0, cvf_device_name(CVF_DEVICE_CPU), "cpu");
    expect_name("cvf_device_name", 1, cvf_device_name(CVF_DEVICE_REFERENCE), "reference");

    static const int bad[] = {-1, 4, 99, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int v = bad[i];
        expect_name("cvf_dtype_name", v, cvf_dtype_name((cvf_dtype)v), "unknown");
        check(cvf_dtype_size((cvf_dtype)v) == 0, "cvf_dtype_size(%d) = %zu, expected 0", v,
              cvf_dtype_size((cvf_dtype)v));
        if (v != 4)
            expect_name("cvf_activation_name", v, cvf_activation_name((cvf_activation)v), "unknown");
    }
    expect_name("cvf_activation_name", 6, cvf_activation_name((cvf_activation)6), "unknown");
    expect_name("cvf_device_name", 2, cvf_device_name(CVF_DEVICE_CUDA), "cuda");
    expect_name("cvf_device_name", 3, cvf_device_name((cvf_device)3), "unknown");
    expect_name("cvf_device_name", -1, cvf_device_name((cvf_device)-1), "unknown");
}

/* ------------------------------------------------------------------------------------------ */
/* Plans                                                                                       */
/* ------------------------------------------------------------------------------------------ */

#define PLAN_PATTERN 0x5A

/* One cvf_mlp_backward_plan case: shape (or NULL), whether plan is NULL, expected status/name. */
typedef struct plan_case {
    const char *name;
    bool null_shape;
    bool null_plan;
    cvf_mlp_shape shape;
    cvf_status expected;
    const char *arg;
    const char *arg2;
    int devices;
} plan_case;

/* clang-format off */
static const plan_case g_plan_cases[] = {
    {"valid f32", false, false, {S, H, I, CVF_F32, CVF_GELU_TANH}, OK, NULL, NULL, 0},
    {"valid bf16", false, false, {64, 32, 128, CVF_BF16, CVF_GELU_TANH}, OK, NULL, NULL, 0},
    {"zero sizes", false, false, {0, 0, 0, CVF_F16, CVF_GELU_TANH}, OK, NULL, NULL, 0},
    {"f64 on the reference device", false, false, {S, H, I, CVF_F64, CVF_GELU_TANH}, OK, NULL, NULL, DEV_REF},
    {"NULL shape", true, false, {S, H, I, CVF_F32, CVF_GELU_TANH}, E_NULL, "shape", NULL, 0},
    {"NULL plan", false, true, {S, H, I, CVF_F32, CVF_GELU_TANH}, E_NULL, "plan", NULL, 0},
    {"tokens -1", false, false, {-1, H, I, CVF_F32, CVF_GELU_TANH}, E_VALUE, "shape", NULL, 0},
    {"hidden -1", false, false, {S, -1, I, CVF_F32, CVF_GELU_TANH}, E_VALUE, "shape", NULL, 0},
    {"intermediate INT64_MIN", false, false, {S, H, INT64_MIN, CVF_F32, CVF_GELU_TANH}, E_VALUE, "shape", NULL, 0},
    {"dtype 4", false, false, {S, H, I, (cvf_dtype)4, CVF_GELU_TANH}, E_VALUE, "shape.dtype", NULL, 0},
    {"dtype -1", false, false, {S, H, I, (cvf_dtype)-1, CVF_GELU_TANH}, E_VALUE, "shape.dtype", NULL, 0},
    {"f64 on the CPU", false, false, {S, H, I, CVF_F64, CVF_GELU_TANH}, E_UNSUPPORTED, "shape.dtype", "f64", DEV_CPU},
    {"8 S H I overflows", false, false, {INT64_MAX / 4, INT64_MAX / 4, 2, CVF_F32, CVF_GELU_TANH}, E_OVERFLOW, "shape", NULL, 0},
};
/* clang-format on */

/* Runs one plan case on ctx. */
static void run_plan_case(const plan_case *pc, cvf_context *ctx, const char *device)
{
    cvf_mlp_plan plan, before;
    memset(&plan, PLAN_PATTERN, sizeof plan);
    memcpy(&before, &plan, sizeof plan);
    if (pc->expected == CVF_STATUS_SUCCESS)
        prime_failure(ctx);
    else
        prime_success(ctx);
    cvf_status status = cvf_mlp_backward_plan(ctx, pc->null_shape ? NULL : &pc->shape, pc->null_plan ? NULL : &plan);
    const char *message = cvf_context_last_error(ctx);
    check(status == pc->expected, "[%s] cvf_mlp_backward_plan %s: status %d (%s), expected %d (%s); message \"%s\"",
          device, pc->name, (int)status, status_name(status), (int)pc->expected, status_name(pc->expected), message);
    if (pc->expected == CVF_STATUS_SUCCESS) {
        check(message[0] == '\0', "[%s] cvf_mlp_backward_plan %s: success left message \"%s\"", device, pc->name,
              message);
        if (status == CVF_STATUS_SUCCESS) {
            check(plan.shape.tokens == pc->shape.tokens && plan.shape.hidden == pc->shape.hidden &&
                      plan.shape.intermediate == pc->shape.intermediate && plan.shape.dtype == pc->shape.dtype,
                  "[%s] cvf_mlp_backward_plan %s: plan.shape differs from the request", device, pc->name);
            check(plan.kernel_count >= 1 && plan.kernel_count <= CVF_PLAN_MAX_KERNELS,
                  "[%s] cvf_mlp_backward_plan %s: kernel_count %d", device, pc->name, (int)plan.kernel_count);
        }
        return;
    }
    check(memcmp(&plan, &before, sizeof plan) == 0, "[%s] cvf_mlp_backward_plan %s: failed call wrote to *plan", device,
          pc->name);
    check(message[0] != '\0', "[%s] cvf_mlp_backward_plan %s: empty message", device, pc->name);
    check(message_names(message, pc->arg), "[%s] cvf_mlp_backward_plan %s: message \"%s\" does not name \"%s\"", device,
          pc->name, message, pc->arg);
    if (pc->arg2)
        check(message_names(message, pc->arg2), "[%s] cvf_mlp_backward_plan %s: message \"%s\" does not name \"%s\"",
              device, pc->name, message, pc->arg2);
}

/* cvf_mlp_backward_plan: NULL context, then the plan table on both devices. */
static void test_plan(cvf_context *cpu, cvf_context *ref)
{
    cvf_mlp_shape shape = {S, H, I, CVF_F32, CVF_GELU_TANH};
    cvf_mlp_plan plan;
    memset(&plan, PLAN_PATTERN, sizeof plan);
    cvf_status status = cvf_mlp_backward_plan(NULL, &shape, &plan);
    check(status == CVF_STATUS_NULL_POINTER, "cvf_mlp_backward_plan(NULL ctx): status %d, expected NULL_POINTER",
          (int)status);
    unsigned char *bytes = (unsigned char *)&plan;
    bool untouched = true;
    for (size_t i = 0; i < sizeof plan; i++)
        untouched = untouched && bytes[i] == PLAN_PATTERN;
    check(untouched, "cvf_mlp_backward_plan(NULL ctx) wrote to *plan");
    for (size_t i = 0; i < sizeof g_plan_cases / sizeof g_plan_cases[0]; i++) {
        const plan_case *pc = &g_plan_cases[i];
        int devices = pc->devices ? pc->devices : DEV_BOTH;
        if (devices & DEV_CPU)
            run_plan_case(pc, cpu, "cpu");
        if (devices & DEV_REF)
            run_plan_case(pc, ref, "reference");
    }
}

#define DESCRIBE_BYTES 8192
#define GUARD_BYTES 64

/* True when bytes [from, to) of buf all hold the pattern byte. */
static bool bytes_hold(const char *buf, size_t from, size_t to, unsigned char pattern)
{
    for (size_t i = from; i < to; i++)
        if ((unsigned char)buf[i] != pattern)
            return false;
    return true;
}

/* cvf_mlp_plan_describe: NULL buffer with size 0, truncation, size 0 and 1, exact fit, NULL plan. */
static void test_describe(cvf_context *cpu)
{
    static char buf[DESCRIBE_BYTES];
    cvf_mlp_shape shape = {S, H, I, CVF_F32, CVF_GELU_TANH};
    cvf_mlp_plan plan;
    if (!check(cvf_mlp_backward_plan(cpu, &shape, &plan) == CVF_STATUS_SUCCESS, "describe: cannot build a plan"))
        return;
    size_t needed = cvf_mlp_plan_describe(&plan, NULL, 0);
    if (!check(needed > 0 && needed + 1 + GUARD_BYTES < DESCRIBE_BYTES,
               "cvf_mlp_plan_describe(plan, NULL, 0) = %zu, expected a length in (0, %d)", needed,
               DESCRIBE_BYTES - GUARD_BYTES))
        return;

    memset(buf, PLAN_PATTERN, sizeof buf);
    size_t got = cvf_mlp_plan_describe(&plan, buf, needed + 1);
    check(got == needed, "describe with room: returned %zu, expected %zu", got, needed);
    check(buf[needed] == '\0' && strlen(buf) == needed, "describe with room: text is not %zu chars + NUL", needed);
    check(bytes_hold(buf, needed + 1, sizeof buf, PLAN_PATTERN), "describe with room: wrote past size");

    memset(buf, PLAN_PATTERN, sizeof buf);
    got = cvf_mlp_plan_describe(&plan, buf, 10);
    check(got == needed, "describe truncated to 10: returned %zu, expected %zu", got, needed);
    check(buf[9] == '\0' && strlen(buf) == 9, "describe truncated to 10: not 9 chars + NUL");
    check(bytes_hold(buf, 10, sizeof buf, PLAN_PATTERN), "describe truncated to 10: wrote past size");

    memset(buf, PLAN_PATTERN, sizeof buf);
    got = cvf_mlp_plan_describe(&plan, buf, 1);
    check(got == needed && buf[0] == '\0', "describe with size 1: returned %zu / first byte %d", got, buf[0]);
    check(bytes_hold(buf, 1, sizeof buf, PLAN_PATTERN), "describe with size 1: wrote past size");

    memset(buf, PLAN_PATTERN, sizeof buf);
    got = cvf_mlp_plan_describe(&plan, buf, 0);
    check(got == needed, "describe with size 0: returned %zu, expected %zu", got, needed);
    check(bytes_hold(buf, 0, sizeof buf, PLAN_PATTERN), "describe with size 0: wrote to the buffer");

    size_t null_needed = cvf_mlp_plan_describe(NULL, NULL, 0);
    memset(buf, PLAN_PATTERN, sizeof buf);
    got = cvf_mlp_plan_describe(NULL, buf, sizeof buf - GUARD_BYTES);
    check(got == null_needed, "describe(NULL plan): returned %zu with a buffer, %zu without", got, null_needed);
    check(got < sizeof buf - GUARD_BYTES && strlen(buf) == got, "describe(NULL plan): text length %zu, returned %zu",
          strlen(buf), got);
    check(bytes_hold(buf, sizeof buf - GUARD_BYTES, sizeof buf, PLAN_PATTERN), "describe(NULL plan): wrote past size");
}

/* ------------------------------------------------------------------------------------------ */
/* Successful edge cases, with values                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Reads element index of an f32 array stored at base. */
static float f32_at(const void *base, int64_t index)
{
    float value;
    memcpy(&value, (const unsigned char *)base + index * (int64_t)sizeof value, sizeof value);
    return value;
}

/* Reads element (i, j) of an f32 matrix view. */
static float matrix_at(const cvf_matrix *m, int64_t i, int64_t j)
{
    return f32_at(m->data, i * m->row_stride + j * m->col_stride);
}

/* Reads element i of an f32 vector view. */
static float vector_at(const cvf_vector *v, int64_t i)
{
    return f32_at(v->data, i * v->stride);
}

/* The exact A @ B element (i, j) in double (the test inputs are multiples of 1/4: exact in f32). */
static double dot(const cvf_matrix *a, const cvf_matrix *b, int64_t i, int64_t j)
{
    double sum = 0.0;
    for (int64_t k = 0; k < a->cols; k++)
        sum += (double)matrix_at(a, i, k) * (double)matrix_at(b, k, j);
    return sum;
}

/* max(x, 0) that keeps NaN. */
static double relu(double x)
{
    return x > 0.0 ? x : (x != x ? x : 0.0);
}

/* Calls the fixture, expecting success and a cleared message. Returns whether it succeeded. */
static bool expect_success(fixture *f, const char *what, const char *device)
{
    prime_failure(f->ctx);
    arena_snapshot();
    cvf_status status = fixture_call(f);
    const char *message = cvf_context_last_error(f->ctx);
    bool ok = check(status == CVF_STATUS_SUCCESS, "[%s] %s: status %d (%s), expected success; message \"%s\"", device,
                    what, (int)status, status_name(status), message);
    check(message[0] == '\0', "[%s] %s: success left message \"%s\"", device, what, message);
    return ok;
}

/* Checks that C, aux_out and bias_grad of a matmul fixture hold relu(A @ B + bias) and its sums. */
static void expect_matmul_values(fixture *f, const char *what, const char *device)
{
    for (int64_t j = 0; j < f->c.cols; j++) {
        double sum = 0.0;
        for (int64_t i = 0; i < f->c.rows; i++) {
            double x = dot(&f->a, &f->b, i, j) + (double)vector_at(&f->bias, j);
            double y = relu(x);
            sum += y;
            check((double)matrix_at(&f->aux_out, i, j) == x, "[%s] %s: aux_out[%lld][%lld] = %g, expected %g", device,
                  what, (long long)i, (long long)j, (double)matrix_at(&f->aux_out, i, j), x);
            check((double)matrix_at(&f->c, i, j) == y, "[%s] %s: c[%lld][%lld] = %g, expected %g", device, what,
                  (long long)i, (long long)j, (double)matrix_at(&f->c, i, j), y);
        }
        check((double)vector_at(&f->bias_grad, j) == sum, "[%s] %s: bias_grad[%lld] = %g, expected %g", device, what,
              (long long)j, (double)vector_at(&f->bias_grad, j), sum);
    }
}

/* Checks that the only arena bytes a call changed lie in C, aux_out and bias_grad (dense views). */
static void expect_only_outputs_written(const fixture *f, const char *what, const char *device)
{
    /* Put the three written ranges back to the snapshot, then compare everything. */
    static unsigned char saved[ARENA_BYTES];
    memcpy(saved, g_arena, sizeof g_arena);
    const struct {
        const void *data;
        size_t bytes;
    } written[3] = {
        {f->c.data, (size_t)(f->c.rows * f->c.cols) * sizeof(float)},
        {f->aux_out.data, (size_t)(f->aux_out.rows * f->aux_out.cols) * sizeof(float)},
        {f->bias_grad.data, (size_t)f->bias_grad.length * sizeof(float)},
    };
    for (int w = 0; w < 3; w++)
        if (written[w].data && written[w].bytes)
            memcpy((void *)written[w].data, g_snapshot + ((const unsigned char *)written[w].data - g_arena),
                   written[w].bytes);
    long changed = arena_first_change();
    check(changed < 0, "[%s] %s: wrote arena byte %ld outside its outputs", device, what, changed);
    memcpy(g_arena, saved, sizeof g_arena);
}

/* M = 0: success, C and aux_out empty (NULL data), bias_grad written with zeros. */
static void test_zero_m(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_MATMUL, ctx);
    f.a = cvf_matrix_row_major(NULL, CVF_F32, 0, K);
    f.c = cvf_matrix_row_major(NULL, CVF_F32, 0, N);
    f.aux_out = cvf_matrix_row_major(NULL, CVF_F32, 0, N);
    if (!expect_success(&f, "matmul M = 0", device))
        return;
    for (int64_t j = 0; j < N; j++)
        check(vector_at(&f.bias_grad, j) == 0.0f, "[%s] matmul M = 0: bias_grad[%lld] = %g, expected 0", device,
              (long long)j, (double)vector_at(&f.bias_grad, j));
    expect_only_outputs_written(&f, "matmul M = 0", device);
}

/* N = 0: success, nothing written (views made by the header's own helpers). */
static void test_zero_n(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_MATMUL, ctx);
    f.b = cvf_matrix_row_major(slot(1), CVF_F32, K, 0);
    f.c = cvf_matrix_row_major(slot(8), CVF_F32, M, 0);
    f.aux_out = cvf_matrix_row_major(NULL, CVF_F32, M, 0);
    f.bias = cvf_vector_dense(NULL, CVF_F32, 0);
    f.bias_grad = cvf_vector_dense(slot(10), CVF_F32, 0);
    if (!expect_success(&f, "matmul N = 0 (row-major helper views)", device))
        return;
    long changed = arena_first_change();
    check(changed < 0, "[%s] matmul N = 0: wrote arena byte %ld", device, changed);
}

/* N = 0 with unit strides everywhere (no zero stride an empty output check could trip on). */
static void test_zero_n_unit_strides(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_MATMUL, ctx);
    f.b = (cvf_matrix){slot(1), CVF_F32, K, 0, 1, 1};
    f.c = (cvf_matrix){NULL, CVF_F32, M, 0, 1, 1};
    f.aux_out = (cvf_matrix){NULL, CVF_F32, M, 0, 1, 1};
    f.bias = cvf_vector_dense(NULL, CVF_F32, 0);
    f.bias_grad = cvf_vector_dense(NULL, CVF_F32, 0);
    if (!expect_success(&f, "matmul N = 0 (unit strides)", device))
        return;
    long changed = arena_first_change();
    check(changed < 0, "[%s] matmul N = 0 (unit strides): wrote arena byte %ld", device, changed);
}

/* K = 0: C = relu(0 + bias), aux_out = bias, bias_grad = M relu(bias). */
static void test_zero_k(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_MATMUL, ctx);
    f.a = cvf_matrix_row_major(NULL, CVF_F32, M, 0);
    f.b = cvf_matrix_row_major(NULL, CVF_F32, 0, N);
    bool has_negative = false, has_positive = false;
    for (int64_t j = 0; j < N; j++) {
        has_negative = has_negative || vector_at(&f.bias, j) < 0.0f;
        has_positive = has_positive || vector_at(&f.bias, j) > 0.0f;
    }
    check(has_negative && has_positive, "test bug: K = 0 bias needs both signs");
    if (!expect_success(&f, "matmul K = 0", device))
        return;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            check(matrix_at(&f.c, i, j) == (float)relu((double)vector_at(&f.bias, j)),
                  "[%s] matmul K = 0: c[%lld][%lld] = %g, expected relu(bias[%lld]) = %g", device, (long long)i,
                  (long long)j, (double)matrix_at(&f.c, i, j), (long long)j, relu((double)vector_at(&f.bias, j)));
    expect_matmul_values(&f, "matmul K = 0", device);
    expect_only_outputs_written(&f, "matmul K = 0", device);

    fixture_init(&f, OP_MATMUL_RELU, ctx);
    f.a = cvf_matrix_row_major(NULL, CVF_F32, M, 0);
    f.b = cvf_matrix_row_major(NULL, CVF_F32, 0, N);
    if (!expect_success(&f, "matmul_relu K = 0", device))
        return;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            check(matrix_at(&f.c, i, j) == 0.0f, "[%s] matmul_relu K = 0: c[%lld][%lld] = %g, expected 0", device,
                  (long long)i, (long long)j, (double)matrix_at(&f.c, i, j));
}

/* Column sums of an empty x: M = 0 writes zeros, N = 0 writes nothing. */
static void test_zero_column_sum(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_COLUMN_SUM, ctx);
    f.x = cvf_matrix_row_major(NULL, CVF_F32, 0, N);
    if (expect_success(&f, "column_sum M = 0", device))
        for (int64_t j = 0; j < N; j++)
            check(vector_at(&f.out, j) == 0.0f, "[%s] column_sum M = 0: out[%lld] = %g, expected 0", device,
                  (long long)j, (double)vector_at(&f.out, j));
    check(arena_first_change_outside(f.out.data, N * sizeof(float)) < 0, "[%s] column_sum M = 0: wrote outside out",
          device);

    fixture_init(&f, OP_COLUMN_SUM, ctx);
    f.x = (cvf_matrix){slot(0), CVF_F32, M, 0, 1, 1};
    f.out = cvf_vector_dense(slot(8), CVF_F32, 0);
    if (expect_success(&f, "column_sum N = 0", device))
        check(arena_first_change() < 0, "[%s] column_sum N = 0: wrote to the arena", device);
}

/* S = 0 MLP: the forward writes nothing; the backward writes zero weight and bias gradients. */
static void test_zero_tokens_mlp(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_MLP_FORWARD, ctx);
    cvf_mlp_forward_args *fw = &f.forward;
    fw->hidden_state = cvf_matrix_row_major(NULL, CVF_F32, 0, H);
    fw->fc1_output = cvf_matrix_row_major(NULL, CVF_F32, 0, I);
    fw->gelu_output = cvf_matrix_row_major(NULL, CVF_F32, 0, I);
    fw->output = cvf_matrix_row_major(NULL, CVF_F32, 0, H);
    if (expect_success(&f, "mlp_forward S = 0", device))
        check(arena_first_change() < 0, "[%s] mlp_forward S = 0: wrote to the arena", device);

    fixture_init(&f, OP_MLP_BACKWARD, ctx);
    cvf_mlp_backward_args *bw = &f.backward;
    bw->grad_output = cvf_matrix_row_major(NULL, CVF_F32, 0, H);
    bw->hidden_state = cvf_matrix_row_major(NULL, CVF_F32, 0, H);
    bw->fc1_output = cvf_matrix_row_major(NULL, CVF_F32, 0, I);
    bw->gelu_output = cvf_matrix_row_major(NULL, CVF_F32, 0, I);
    bw->grad_hidden_state = cvf_matrix_row_major(NULL, CVF_F32, 0, H);
    if (!expect_success(&f, "mlp_backward S = 0", device))
        return;
    const cvf_matrix *weights[2] = {&bw->grad_fc1_weight, &bw->grad_fc2_weight};
    for (int w = 0; w < 2; w++)
        for (int64_t i = 0; i < weights[w]->rows; i++)
            for (int64_t j = 0; j < weights[w]->cols; j++)
                check(matrix_at(weights[w], i, j) == 0.0f, "[%s] mlp_backward S = 0: %s[%lld][%lld] = %g, expected 0",
                      device, w ? "grad_fc2_weight" : "grad_fc1_weight", (long long)i, (long long)j,
                      (double)matrix_at(weights[w], i, j));
    const cvf_vector *biases[2] = {&bw->grad_fc1_bias, &bw->grad_fc2_bias};
    for (int v = 0; v < 2; v++)
        for (int64_t i = 0; i < biases[v]->length; i++)
            check(vector_at(biases[v], i) == 0.0f, "[%s] mlp_backward S = 0: %s[%lld] = %g, expected 0", device,
                  v ? "grad_fc2_bias" : "grad_fc1_bias", (long long)i, (double)vector_at(biases[v], i));
}

/* Broadcast inputs (stride 0 on A's rows, B's columns, the bias) succeed with the right values. */
static void test_broadcast_inputs(cvf_context *ctx, const char *device)
{
    fixture f;
    fixture_init(&f, OP_MATMUL, ctx);
    f.a.row_stride = 0;
    f.b.col_stride = 0;
    f.bias.stride = 0;
    if (expect_success(&f, "matmul with broadcast a rows, b cols, bias", device)) {
        expect_matmul_values(&f, "matmul with broadcast inputs", device);
        expect_only_outputs_written(&f, "matmul with broadcast inputs", device);
    }

    fixture_init(&f, OP_COLUMN_SUM, ctx);
    f.x.row_stride = 0;
    if (expect_success(&f, "column_sum with broadcast x rows", device))
        for (int64_t j = 0; j < N; j++)
            check(vector_at(&f.out, j) == (float)M * matrix_at(&f.x, 0, j),
                  "[%s] column_sum broadcast: out[%lld] = %g, expected %g", device, (long long)j,
                  (double)vector_at(&f.out, j), (double)((float)M * matrix_at(&f.x, 0, j)));
}

/* A NaN in A's row r makes row r of relu(A @ B) NaN and leaves the other rows exact. */
static void test_nan_propagates(cvf_context *ctx, const char *device)
{
    const int64_t nan_row = 1;
    fixture f;
    fixture_init(&f, OP_MATMUL_RELU, ctx);
    float nan_value = NAN;
    memcpy((float *)f.a.data + nan_row * K + 2, &nan_value, sizeof nan_value);
    if (expect_success(&f, "matmul_relu with a NaN in a", device))
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float got = matrix_at(&f.c, i, j);
                if (i == nan_row)
                    check(isnan(got), "[%s] relu NaN: c[%lld][%lld] = %g, expected NaN", device, (long long)i,
                          (long long)j, (double)got);
                else
                    check((double)got == relu(dot(&f.a, &f.b, i, j)), "[%s] relu NaN: c[%lld][%lld] = %g, expected %g",
                          device, (long long)i, (long long)j, (double)got, relu(dot(&f.a, &f.b, i, j)));
            }

    /* Through the full epilogue: the NaN reaches aux_out's row and every column sum. */
    fixture_init(&f, OP_MATMUL, ctx);
    memcpy((float *)f.a.data + nan_row * K + 2, &nan_value, sizeof nan_value);
    if (expect_success(&f, "matmul relu epilogue with a NaN in a", device)) {
        for (int64_t j = 0; j < N; j++) {
            check(isnan(matrix_at(&f.c, nan_row, j)) && isnan(matrix_at(&f.aux_out, nan_row, j)),
                  "[%s] epilogue NaN: c/aux_out[%lld][%lld] not NaN", device, (long long)nan_row, (long long)j);
            check(isnan(vector_at(&f.bias_grad, j)), "[%s] epilogue NaN: bias_grad[%lld] = %g, expected NaN", device,
                  (long long)j, (double)vector_at(&f.bias_grad, j));
        }
    }
}

/* After a failed call, a successful call leaves "" as the last error (every entry point). */
static void test_error_then_success(cvf_context *ctx, const char *device)
{
    static const op_kind ops[] = {OP_MATMUL, OP_MATMUL_RELU, OP_COLUMN_SUM, OP_MLP_FORWARD, OP_MLP_BACKWARD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        fixture f;
        fixture_init(&f, ops[i], ctx);
        check(cvf_matmul(ctx, NULL, NULL, NULL, NULL) == CVF_STATUS_NULL_POINTER,
              "[%s] cvf_matmul(ctx, NULL...) did not fail", device);
        check(cvf_context_last_error(ctx)[0] != '\0', "[%s] failed cvf_matmul left no message", device);
        cvf_status status = fixture_call(&f);
        check(status == CVF_STATUS_SUCCESS, "[%s] %s after a failure: status %d", device, op_name(ops[i]), (int)status);
        check(cvf_context_last_error(ctx)[0] == '\0', "[%s] %s after a failure: last error \"%s\", expected \"\"",
              device, op_name(ops[i]), cvf_context_last_error(ctx));
    }
    cvf_mlp_shape shape = {S, H, I, CVF_F32, CVF_GELU_TANH};
    cvf_mlp_plan plan;
    check(cvf_mlp_backward_plan(ctx, NULL, &plan) == CVF_STATUS_NULL_POINTER, "[%s] plan(NULL shape) did not fail",
          device);
    check(cvf_mlp_backward_plan(ctx, &shape, &plan) == CVF_STATUS_SUCCESS && cvf_context_last_error(ctx)[0] == '\0',
          "[%s] cvf_mlp_backward_plan after a failure: last error \"%s\"", device, cvf_context_last_error(ctx));
}

/* f64 tensors: unsupported on the CPU (outputs untouched), exact on the reference device. */
static void test_f64(cvf_context *cpu, cvf_context *ref)
{
    enum { FM = 2, FK = 3, FN = 2 };
    const double a[FM * FK] = {1, -2, 3, 0.5, 4, -1};
    const double b[FK * FN] = {2, 1, -1, 0.25, 3, -2};
    const double bias[FN] = {0.5, -10};
    double c[FM * FN], aux[FM * FN], grad[FN];
    cvf_matrix av = cvf_matrix_row_major((void *)a, CVF_F64, FM, FK);
    cvf_matrix bv = cvf_matrix_row_major((void *)b, CVF_F64, FK, FN);
    cvf_matrix cv = cvf_matrix_row_major(c, CVF_F64, FM, FN);
    cvf_matrix auxv = cvf_matrix_row_major(aux, CVF_F64, FM, FN);
    cvf_vector biasv = cvf_vector_dense((void *)bias, CVF_F64, FN);
    cvf_vector gradv = cvf_vector_dense(grad, CVF_F64, FN);
    cvf_epilogue ep = {CVF_ACTIVATION_RELU, &biasv, NULL, &auxv, &gradv};

    memset(c, PATTERN, sizeof c);
    memset(aux, PATTERN, sizeof aux);
    memset(grad, PATTERN, sizeof grad);
    cvf_status status = cvf_matmul(cpu, &av, &bv, &cv, &ep);
    const char *message = cvf_context_last_error(cpu);
    check(status == CVF_STATUS_UNSUPPORTED, "[cpu] f64 matmul: status %d (%s), expected UNSUPPORTED", (int)status,
          status_name(status));
    check(message_names(message, "a") && message_names(message, "f64"),
          "[cpu] f64 matmul: message \"%s\" does not name a and f64", message);
    check(bytes_hold((const char *)c, 0, sizeof c, PATTERN) && bytes_hold((const char *)aux, 0, sizeof aux, PATTERN) &&
              bytes_hold((const char *)grad, 0, sizeof grad, PATTERN),
          "[cpu] f64 matmul: a failed call wrote its outputs");

    status = cvf_matmul(ref, &av, &bv, &cv, &ep);
    if (!check(status == CVF_STATUS_SUCCESS, "[reference] f64 matmul: status %d (%s), message \"%s\"", (int)status,
               status_name(status), cvf_context_last_error(ref)))
        return;
    for (int j = 0; j < FN; j++) {
        double sum = 0.0;
        for (int i = 0; i < FM; i++) {
            double x = bias[j];
            for (int k = 0; k < FK; k++)
                x += a[i * FK + k] * b[k * FN + j];
            sum += relu(x);
            check(aux[i * FN + j] == x && c[i * FN + j] == relu(x),
                  "[reference] f64 matmul: (%d, %d) aux %g c %g, expected %g and %g", i, j, aux[i * FN + j],
                  c[i * FN + j], x, relu(x));
        }
        check(grad[j] == sum, "[reference] f64 matmul: bias_grad[%d] = %g, expected %g", j, grad[j], sum);
    }
}

/* The successful edge cases on one device. */
static void test_edges(cvf_context *ctx, const char *device)
{
    test_zero_m(ctx, device);
    test_zero_n(ctx, device);
    test_zero_n_unit_strides(ctx, device);
    test_zero_k(ctx, device);
    test_zero_column_sum(ctx, device);
    test_zero_tokens_mlp(ctx, device);
    test_broadcast_inputs(ctx, device);
    test_nan_propagates(ctx, device);
    test_error_then_success(ctx, device);
}

/* ------------------------------------------------------------------------------------------ */
/* main                                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Creates a context on device with two threads; exits when that fails (nothing else can run). */
static cvf_context *make_context(cvf_device device)
{
    cvf_context_options options = {device, 2, 0, NULL};
    cvf_context *ctx = NULL;
    cvf_status status = cvf_context_create(&options, &ctx);
    if (status != CVF_STATUS_SUCCESS || !ctx) {
        printf("FAIL: cannot create a %s context: %s\n", cvf_device_name(device), cvf_status_string(status));
        printf("test_errors: %d passed, %d failed\n", g_passed, g_failed + 1);
        exit(1);
    }
    return ctx;
}

/* Runs every group of checks and prints the summary line. */
/* ------------------------------------------------------------------------------------------ */
/* Accessors on NULL, malformed plans, a failure after validation                              */
/* ------------------------------------------------------------------------------------------ */

/* The context accessors answer for a NULL context instead of crashing. */
static void test_null_accessors(void)
{
    check(cvf_context_device(NULL) == CVF_DEVICE_CPU, "cvf_context_device(NULL) is not CVF_DEVICE_CPU");
    check(cvf_context_threads(NULL) == 0, "cvf_context_threads(NULL) = %d, expected 0", cvf_context_threads(NULL));
}

/* A caller's plan may hold anything: describe must clamp the counts and survive NULL texts. */
static void test_describe_malformed(void)
{
    static char buf[DESCRIBE_BYTES];
    cvf_mlp_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.kernel_count = CVF_PLAN_MAX_KERNELS + 1;
    plan.saving_count = -3;
    size_t got = cvf_mlp_plan_describe(&plan, buf, sizeof buf);
    check(got > 0 && strlen(buf) == (got < sizeof buf ? got : sizeof buf - 1),
          "describe(zeroed plan with kernel_count %d): returned %zu", CVF_PLAN_MAX_KERNELS + 1, got);
    plan.saving_count = CVF_PLAN_MAX_SAVINGS + 5;
    got = cvf_mlp_plan_describe(&plan, buf, sizeof buf);
    check(got > 0, "describe(plan with saving_count %d): returned %zu", CVF_PLAN_MAX_SAVINGS + 5, got);
}

/* How many more workspace allocations succeed before failing_workspace_alloc fails. */
static int g_allocations_left;

/* A workspace allocator that succeeds g_allocations_left times, then fails. */
static void *failing_workspace_alloc(size_t bytes)
{
    if (g_allocations_left-- > 0)
        return aligned_alloc(64, (bytes + 63) / 64 * 64);
    return NULL;
}

/*
 * "A failed call writes nothing" beyond validation: on a fresh CPU context whose backend's
 * workspace allocator fails after 0, 1 or 2 successful allocations (a white-box copy of the CPU
 * backend table), every entry point either succeeds or fails with OUT_OF_MEMORY, says so, and
 * leaves every byte of the arena as it was. The MLP ops run several kernels: a design that
 * allocated per kernel would fail here after an earlier kernel had stored its output.
 */
static void test_out_of_memory_writes_nothing(void)
{
    static const op_kind ops[] = {OP_MATMUL, OP_MATMUL_RELU, OP_COLUMN_SUM, OP_MLP_FORWARD, OP_MLP_BACKWARD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (int allowed = 0; allowed < 3; allowed++) {
            cvf_context *ctx = make_context(CVF_DEVICE_CPU);
            const cvf_backend *real = ctx->backend;
            cvf_backend failing = *real;
            failing.workspace_alloc = failing_workspace_alloc;
            ctx->backend = &failing;
            g_allocations_left = allowed;
            fixture f;
            fixture_init(&f, ops[i], ctx);
            arena_snapshot();
            cvf_status status = fixture_call(&f);
            const char *message = cvf_context_last_error(ctx);
            if (allowed == 0 || status != CVF_STATUS_SUCCESS) {
                check(status == CVF_STATUS_OUT_OF_MEMORY,
                      "%s, workspace allocation %d fails: status %s, expected out of memory", op_name(ops[i]),
                      allowed + 1, status_name(status));
                check(strstr(message, "workspace") != NULL,
                      "%s, workspace allocation %d fails: message \"%s\" does not say what could not be allocated",
                      op_name(ops[i]), allowed + 1, message);
                long changed = arena_first_change();
                check(changed < 0, "%s, workspace allocation %d fails: changed arena byte %ld", op_name(ops[i]),
                      allowed + 1, changed);
            }
            ctx->backend = real;
            cvf_context_destroy(ctx);
        }
}

int main(void)
{
    cvf_context *cpu = make_context(CVF_DEVICE_CPU);
    cvf_context *ref = make_context(CVF_DEVICE_REFERENCE);
    test_context_create();
    test_status_strings();
    test_enum_names();
    test_table(cpu, ref);
    test_plan(cpu, ref);
    test_describe(cpu);
    test_f64(cpu, ref);
    test_edges(cpu, "cpu");
    test_edges(ref, "reference");
    test_null_accessors();
    test_describe_malformed();
    test_out_of_memory_writes_nothing();
    cvf_context_destroy(ref);
    cvf_context_destroy(cpu);
    printf("test_errors: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 && g_passed > 0 ? 0 : 1;
}

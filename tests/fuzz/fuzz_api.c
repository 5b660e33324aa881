/*
 * libFuzzer target: argument validation + CPU compute of cvf_matmul and cvf_mlp_backward.
 *
 * The input is decoded into one call: which operation, which CPU context (1 or 2 threads), forced
 * block sizes (CVF_CPU_BLOCKS), a caller workspace or not, then every operand: dtype (sometimes not
 * a cvf_dtype value), shape (sometimes mismatched or wild), strides (row-major, column-major with
 * padding, broadcast, or raw and possibly negative or huge), and where its data lies: its own slot
 * of a bounded arena, any byte offset of it (overlaps, misalignment), or NULL. For cvf_matmul the
 * epilogue too: activation (all six values and invalid ones), bias, aux_in (given or not whatever
 * the activation needs), aux_out, bias_grad.
 *
 * Inputs hold small multiples of 1/8 (exact in every dtype), outputs are filled with NaN and
 * the rest of the arena with a poison pattern. The call runs on the CPU context, then (on the
 * same initial arena) on the reference device (float64). Properties, each a __builtin_trap():
 *   - a failed call leaves every byte of the arena (and of the caller's workspace) unchanged, and
 *     says why (cvf_context_last_error is not empty);
 *   - a successful call changes no byte outside its output views' elements, and no byte of the
 *     caller's workspace beyond the size it was given;
 *   - a validation error on the CPU is the same status on the reference device, and a CPU success
 *     is a reference success (the reference accepts a superset: f64);
 *   - every output element of a successful CPU call is within a dtype-appropriate bound of the
 *     reference's float64 result (fp32 accumulation error from the sums of |terms|, one rounding
 *     of the output dtype, a little for the fp32 GELU);
 *   - a workspace of exactly the size cvf_matmul_workspace_size reports is enough.
 * Shapes stay small (<= 24, MLP <= 12) so that an execution takes well under a millisecond; a
 * call whose views would reach outside the arena, or whose consistent shape would be large, is
 * not made (the library cannot know the arena's bounds).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cvfuse.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOT 8192
#define NSLOTS 12
#define ARENA (SLOT * NSLOTS + 4096)
#define DIM_MAX 24
#define MLP_DIM_MAX 12
#define WS_BYTES (1u << 20)
#define WS_GUARD 4096
#define POISON 0xA5
#define MAX_OPS 11

/* A violated property: say which, then trap so that libFuzzer saves the input. */
#define REQUIRE(cond, ...)                                                                                             \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz_api: property violated at line %d: ", __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            __builtin_trap();                                                                                          \
        }                                                                                                              \
    } while (0)

static _Alignas(256) unsigned char arena[ARENA];
static unsigned char before[ARENA];
static unsigned char cpu_after[ARENA];
static unsigned char expect[ARENA];
static unsigned char poison_block[WS_BYTES + WS_GUARD];
static _Alignas(256) unsigned char workspace[WS_BYTES + WS_GUARD];
static cvf_context *cpu_ctx[2];
static cvf_context *ref_ctx;
static int debug; /* FUZZ_API_DEBUG set: one line per call with both statuses */
/* FUZZ_API_SELF_TEST=1: after a successful CPU matmul, c[0, 0] is made wrong (the comparison must
 * trap); =2: a byte just past c's last element is changed (the out-of-view check must trap) —
 * to check that the checks catch what they are for. */
static int self_test;

/* ---- input decoding ----------------------------------------------------------------------- */

typedef struct stream {
    const uint8_t *p;
    size_t n, pos;
    uint64_t rng; /* values of the inputs: a generator seeded from the input */
} stream;

static uint8_t u8(stream *s)
{
    return s->pos < s->n ? s->p[s->pos++] : 0;
}

static uint16_t u16(stream *s)
{
    uint16_t lo = u8(s);
    return (uint16_t)(lo | (uint16_t)u8(s) << 8);
}

static uint64_t next_random(stream *s)
{
    s->rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = s->rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Values that break assumptions about dimensions and strides. */
static int64_t wild_value(stream *s)
{
    static const int64_t table[] = {-1,
                                    0,
                                    1,
                                    2,
                                    -3,
                                    65,
                                    100000,
                                    INT32_MAX,
                                    (int64_t)1 << 31,
                                    (int64_t)1 << 40,
                                    (int64_t)1 << 62,
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MAX / 2,
                                    INT64_MAX / 3,
                                    -((int64_t)1 << 62)};
    return table[u8(s) % (sizeof table / sizeof table[0])];
}

static cvf_dtype decode_dtype(stream *s)
{
    uint8_t d = u8(s);
    switch (d & 7) {
    case 0:
    case 1: return CVF_F32;
    case 2:
    case 3: return CVF_F16;
    case 4:
    case 5: return CVF_BF16;
    case 6: return CVF_F64;
    default: {
        static const int wild[] = {-1, 4, 5, 99, INT32_MIN, INT32_MAX};
        return (cvf_dtype)wild[(d >> 3) % 6];
    }
    }
}

/* Where an operand's data lies: its own slot (aligned, a small shift), any byte of the arena, the
 * start of another operand's slot, or NULL. */
static void *decode_place(stream *s, int slot)
{
    uint8_t p = u8(s);
    if (p < 200)
        return arena + (size_t)slot * SLOT + (size_t)(p & 3) * 64;
    if (p < 230)
        return arena + u16(s) % ARENA;
    if (p < 252)
        return arena + (size_t)(p % NSLOTS) * SLOT + (size_t)(u8(s) & 7) * 2;
    return NULL;
}

/* a + b, wrapping (wild dimensions plus padding must not be undefined behaviour here). */
static int64_t wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t decode_dim(stream *s, uint8_t mode, int64_t dim)
{
    if (mode == 6)
        return wrap_add(dim, u8(s) & 1 ? 1 : -1);
    if (mode == 7)
        return wild_value(s);
    return dim;
}

static cvf_matrix decode_matrix(stream *s, int slot, int64_t rows, int64_t cols)
{
    cvf_matrix m;
    m.dtype = decode_dtype(s);
    uint8_t shape = u8(s);
    int64_t pad = (shape >> 3) & 3;
    uint8_t dim_mode = shape >> 5;
    m.rows = decode_dim(s, dim_mode, rows);
    m.cols = decode_dim(s, dim_mode == 7 ? (u8(s) & 1 ? 7 : 0) : 0, cols);
    switch (shape & 7) {
    case 4:
    case 5:
        m.row_stride = 1;
        m.col_stride = wrap_add(m.rows, pad);
        break;
    case 6: /* broadcast: every row the same (an input only; an output must be refused) */
        m.row_stride = 0;
        m.col_stride = 1;
        break;
    case 7:
        m.row_stride = (u8(s) & 1) ? wild_value(s) : (int8_t)u8(s);
        m.col_stride = (u8(s) & 1) ? wild_value(s) : (int8_t)u8(s);
        break;
    default:
        m.row_stride = wrap_add(m.cols, pad);
        m.col_stride = 1;
        break;
    }
    m.data = decode_place(s, slot);
    return m;
}

static cvf_vector decode_vector(stream *s, int slot, int64_t length)
{
    cvf_vector v;
    v.dtype = decode_dtype(s);
    uint8_t shape = u8(s);
    v.length = decode_dim(s, shape >> 5, length);
    switch (shape & 7) {
    case 5: v.stride = 2 + ((shape >> 3) & 3); break;
    case 6: v.stride = 0; break;
    case 7: v.stride = (u8(s) & 1) ? wild_value(s) : (int8_t)u8(s); break;
    default: v.stride = 1; break;
    }
    v.data = decode_place(s, slot);
    return v;
}

/* ---- operands ----------------------------------------------------------------------------- */

/* One view of the call, as a 2-D layout (a vector is length x 1). */
typedef struct operand {
    void *data;
    cvf_dtype dtype;
    int64_t rows, cols, rs, cs;
    bool is_output;
} operand;

static operand matrix_operand(const cvf_matrix *m, bool is_output)
{
    return (operand){m->data, m->dtype, m->rows, m->cols, m->row_stride, m->col_stride, is_output};
}

static operand vector_operand(const cvf_vector *v, bool is_output)
{
    return (operand){v->data, v->dtype, v->length, 1, v->stride, 0, is_output};
}

static size_t elem_size(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return 4;
    case CVF_F16:
    case CVF_BF16: return 2;
    case CVF_F64: return 8;
    }
    return 0;
}

/* True when the library may touch the view's elements and they all lie in the arena: known
 * dtype, data set, non-negative shape and strides, at least one element, no overflow. */
static bool touchable(const operand *o, size_t *first, size_t *bytes)
{
    size_t size = elem_size(o->dtype);
    if (size == 0 || o->data == NULL || o->rows <= 0 || o->cols <= 0 || o->rs < 0 || o->cs < 0)
        return false;
    int64_t a, b, last, n, nbytes;
    if (__builtin_mul_overflow(o->rows - 1, o->rs, &a) || __builtin_mul_overflow(o->cols - 1, o->cs, &b) ||
        __builtin_add_overflow(a, b, &last) || __builtin_add_overflow(last, 1, &n) ||
        __builtin_mul_overflow(n, (int64_t)size, &nbytes))
        return false;
    size_t off = (size_t)((unsigned char *)o->data - arena);
    if ((uintptr_t)o->data % size != 0 || (uint64_t)nbytes > ARENA || off > ARENA - (size_t)nbytes)
        return false;
    *first = off;
    *bytes = (size_t)nbytes;
    return true;
}

/* False when the call must not be made: a view that the library could accept reaches outside
 * the arena (an overflowing or misaligned one must be refused, so it is allowed in). */
static bool safe_to_call(const operand *ops, int count)
{
    for (int i = 0; i < count; i++) {
        const operand *o = &ops[i];
        size_t size = elem_size(o->dtype);
        if (size == 0 || o->data == NULL || o->rows <= 0 || o->cols <= 0 || o->rs < 0 || o->cs < 0)
            continue;
        if ((uintptr_t)o->data % size != 0)
            continue;
        int64_t a, b, last, n, nbytes;
        if (__builtin_mul_overflow(o->rows - 1, o->rs, &a) || __builtin_mul_overflow(o->cols - 1, o->cs, &b) ||
            __builtin_add_overflow(a, b, &last) || __builtin_add_overflow(last, 1, &n) ||
            __builtin_mul_overflow(n, (int64_t)size, &nbytes) || (uint64_t)nbytes > PTRDIFF_MAX)
            continue;
        size_t off = (size_t)((unsigned char *)o->data - arena);
        if ((uint64_t)nbytes > ARENA || off > ARENA - (size_t)nbytes)
            return false;
    }
    return true;
}

static unsigned char *elem_ptr(unsigned char *base, const operand *o, int64_t i, int64_t j)
{
    size_t off = (size_t)((unsigned char *)o->data - arena);
    return base + off + (size_t)(i * o->rs + j * o->cs) * elem_size(o->dtype);
}

static double load_elem(unsigned char *base, const operand *o, int64_t i, int64_t j)
{
    const unsigned char *p = elem_ptr(base, o, i, j);
    uint16_t h;
    float f;
    double d;
    switch (o->dtype) {
    case CVF_F32: memcpy(&f, p, 4); return f;
    case CVF_F16: memcpy(&h, p, 2); return cvf_f16_to_f32(h);
    case CVF_BF16: memcpy(&h, p, 2); return cvf_bf16_to_f32(h);
    case CVF_F64: memcpy(&d, p, 8); return d;
    }
    return NAN;
}

static void store_elem(unsigned char *base, const operand *o, int64_t i, int64_t j, double v)
{
    unsigned char *p = elem_ptr(base, o, i, j);
    uint16_t h;
    float f = (float)v;
    switch (o->dtype) {
    case CVF_F32: memcpy(p, &f, 4); break;
    case CVF_F16:
        h = cvf_f32_to_f16(f);
        memcpy(p, &h, 2);
        break;
    case CVF_BF16:
        h = cvf_f32_to_bf16(f);
        memcpy(p, &h, 2);
        break;
    case CVF_F64: memcpy(p, &v, 8); break;
    }
}

/* True for a view of at most 64 x 64 distinct places (a dimension with stride 0 counts once):
 * the only ones a call can accept here (larger consistent shapes are not called), and the only
 * ones walked element by element. */
static bool walkable(const operand *o, int64_t *rows, int64_t *cols)
{
    *rows = o->rs == 0 ? 1 : o->rows;
    *cols = o->cs == 0 ? 1 : o->cols;
    return *rows <= 64 && *cols <= 64;
}

/* Poisons the arena, fills the outputs with NaN and then the inputs with small values. */
static void fill_arena(stream *s, const operand *ops, int count)
{
    memset(arena, POISON, sizeof arena);
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < count; k++) {
            const operand *o = &ops[k];
            size_t first, bytes;
            int64_t rows, cols;
            if (o->is_output != (pass == 0) || !touchable(o, &first, &bytes) || !walkable(o, &rows, &cols))
                continue;
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++)
                    store_elem(arena, o, i, j, o->is_output ? NAN : (double)((int)(next_random(s) % 33) - 16) / 8.0);
        }
}

/* Copies into expect the arena as it was before the call, with the bytes of every element of the
 * output views taken from the arena after it: what a successful call may have left. */
static void overlay_outputs(const operand *ops, int count)
{
    memcpy(expect, before, sizeof expect);
    for (int k = 0; k < count; k++) {
        const operand *o = &ops[k];
        size_t first, bytes;
        int64_t rows, cols;
        if (!o->is_output || !touchable(o, &first, &bytes) || !walkable(o, &rows, &cols))
            continue;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                size_t off = (size_t)(elem_ptr(arena, o, i, j) - arena);
                memcpy(expect + off, arena + off, elem_size(o->dtype));
            }
    }
}

/* The first byte where two buffers differ (they do). */
static size_t first_difference(const unsigned char *x, const unsigned char *y, size_t n)
{
    size_t i = 0;
    while (i < n && x[i] == y[i])
        i++;
    return i;
}

/* ---- workspace ---------------------------------------------------------------------------- */

/* Sets the caller's workspace (bytes > 0) or the context's own (0), and poisons the buffer. */
static void use_workspace(cvf_context *ctx, size_t bytes)
{
    memset(workspace, POISON, sizeof workspace);
    cvf_status st = cvf_context_set_workspace(ctx, bytes ? workspace : NULL, bytes);
    REQUIRE(st == CVF_STATUS_SUCCESS, "cvf_context_set_workspace(%zu): %s", bytes, cvf_context_last_error(ctx));
}

/* Checks the workspace buffer: untouched past bytes (everything when the call failed). */
static void check_workspace(size_t bytes, bool ok)
{
    size_t from = ok ? bytes : 0;
    if (memcmp(workspace + from, poison_block, sizeof workspace - from) == 0)
        return;
    size_t i = from + first_difference(workspace + from, poison_block, sizeof workspace - from);
    REQUIRE(0, "workspace byte %zu (of %zu given) changed by a %s call", i, bytes, ok ? "successful" : "failed");
}

/* ---- checks ------------------------------------------------------------------------------- */

static bool is_validation_error(cvf_status st)
{
    return st == CVF_STATUS_NULL_POINTER || st == CVF_STATUS_INVALID_VALUE || st == CVF_STATUS_SHAPE_MISMATCH ||
           st == CVF_STATUS_OVERLAPPING_OUTPUT || st == CVF_STATUS_ALIASED_OUTPUT || st == CVF_STATUS_SIZE_OVERFLOW;
}

/* After a call: a failure changed nothing and said why; a success changed only output elements. */
static void check_arena(cvf_context *ctx, cvf_status st, const operand *ops, int count, const char *who)
{
    const char *msg = cvf_context_last_error(ctx);
    if (st != CVF_STATUS_SUCCESS) {
        REQUIRE(msg != NULL && msg[0] != '\0', "%s: failed (%s) without a message", who, cvf_status_string(st));
        REQUIRE(memcmp(arena, before, ARENA) == 0, "%s: failed (%s: %s) but changed arena byte %zu", who,
                cvf_status_string(st), msg, first_difference(arena, before, ARENA));
        return;
    }
    REQUIRE(msg != NULL && msg[0] == '\0', "%s: succeeded with a message: %s", who, msg);
    overlay_outputs(ops, count);
    REQUIRE(memcmp(arena, expect, ARENA) == 0, "%s: wrote arena byte %zu, outside every output view", who,
            first_difference(arena, expect, ARENA));
}

static double dtype_eps(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F16: return 0x1p-10;
    case CVF_BF16: return 0x1p-7;
    default: return 0x1p-23;
    }
}

static double dtype_floor(cvf_dtype dtype)
{
    return dtype == CVF_F16 ? 0x1p-23 : 1e-30;
}

/* Compares one output element of the CPU (cpu_after) with the reference (arena): |difference| <=
 * rel * scale (accumulation and fp32 math, scale the sum of |terms|) + one rounding of the dtype. */
static void compare_elem(const operand *o, int64_t i, int64_t j, double scale, double rel, const char *name)
{
    double got = load_elem(cpu_after, o, i, j);
    double want = load_elem(arena, o, i, j);
    REQUIRE(!isnan(want), "%s[%lld, %lld]: the reference left NaN", name, (long long)i, (long long)j);
    REQUIRE(!isnan(got), "%s[%lld, %lld]: the CPU left NaN (not written?), reference %.9g", name, (long long)i,
            (long long)j, want);
    if (isinf(want) || isinf(got)) {
        REQUIRE(got == want, "%s[%lld, %lld]: CPU %.9g, reference %.9g", name, (long long)i, (long long)j, got, want);
        return;
    }
    double tol = rel * scale + 2 * dtype_eps(o->dtype) * fabs(want) + dtype_floor(o->dtype);
    REQUIRE(fabs(got - want) <= tol, "%s[%lld, %lld] (%s): CPU %.9g, reference %.9g, |diff| %.3g > tolerance %.3g",
            name, (long long)i, (long long)j, cvf_dtype_name(o->dtype), got, want, fabs(got - want), tol);
}

/* Relative accumulation error allowed for a chain of sums of n terms in all (fp32), plus the fp32
 * activation functions. */
static double rel_error(int64_t n)
{
    return 8.0 * (double)(n + 4) * 0x1p-24 + 0x1p-16;
}

/* ---- cvf_matmul ----------------------------------------------------------------------------- */

static double absval(const operand *o, int64_t i, int64_t j)
{
    return fabs(load_elem(before, o, i, j));
}

static void fuzz_matmul(stream *s, cvf_context *cpu, uint8_t ws_mode)
{
    int64_t M = u8(s) % (DIM_MAX + 1), N = u8(s) % (DIM_MAX + 1), K = u8(s) % (DIM_MAX + 1);
    cvf_matrix a = decode_matrix(s, 0, M, K);
    cvf_matrix b = decode_matrix(s, 1, K, N);
    cvf_matrix c = decode_matrix(s, 2, M, N);
    uint8_t flags = u8(s);
    cvf_activation act;
    uint8_t act_byte = u8(s);
    if (act_byte < 240) {
        act = (cvf_activation)(act_byte % 6);
    } else {
        static const int wild[] = {-1, 6, 7, 100, INT32_MIN, INT32_MAX};
        act = (cvf_activation)wild[act_byte % 6];
    }
    bool needs_aux = act == CVF_ACTIVATION_DGELU_TANH || act == CVF_ACTIVATION_DGELU_ERF;
    cvf_vector bias = decode_vector(s, 3, N);
    cvf_matrix aux_in = decode_matrix(s, 4, M, N);
    cvf_matrix aux_out = decode_matrix(s, 5, M, N);
    cvf_vector bias_grad = decode_vector(s, 6, N);
    cvf_epilogue ep = {act, (flags & 2) ? &bias : NULL, (needs_aux != !!(flags & 4)) ? &aux_in : NULL,
                       (flags & 8) ? &aux_out : NULL, (flags & 16) ? &bias_grad : NULL};
    const cvf_epilogue *epp = (flags & 1) ? &ep : NULL;
    if (epp == NULL && (flags & 32))
        epp = &(const cvf_epilogue){CVF_ACTIVATION_NONE, NULL, NULL, NULL, NULL};
    /* A NULL view pointer now and then: the validator must refuse it. */
    const cvf_matrix *ap = &a, *bp = &b, *cp = &c;
    if ((flags & 0xC0) == 0xC0) {
        uint8_t which = u8(s) % 3;
        ap = which == 0 ? NULL : ap;
        bp = which == 1 ? NULL : bp;
        cp = which == 2 ? NULL : cp;
    }

    operand ops[7];
    int count = 0;
    if (ap)
        ops[count++] = matrix_operand(&a, false);
    if (bp)
        ops[count++] = matrix_operand(&b, false);
    if (cp)
        ops[count++] = matrix_operand(&c, true);
    const operand *o_bias = NULL, *o_aux_out = NULL, *o_bias_grad = NULL;
    if (epp && epp->bias)
        o_bias = &ops[count], ops[count++] = vector_operand(&bias, false);
    if (epp && epp->aux_in)
        ops[count++] = matrix_operand(&aux_in, false);
    if (epp && epp->aux_out)
        o_aux_out = &ops[count], ops[count++] = matrix_operand(&aux_out, true);
    if (epp && epp->bias_grad)
        o_bias_grad = &ops[count], ops[count++] = vector_operand(&bias_grad, true);
    if (!safe_to_call(ops, count))
        return;
    /* A consistent call with a large (wild) shape would be a long computation: not made. */
    if (ap && bp && cp && a.cols == b.rows && c.rows == a.rows && c.cols == b.cols &&
        (a.rows > DIM_MAX || a.cols > DIM_MAX || b.cols > DIM_MAX))
        return;

    fill_arena(s, ops, count);
    memcpy(before, arena, sizeof arena);

    /* The workspace: the context's own, exactly what the size query says, or a fuzzed size. */
    size_t ws = 0;
    if (ws_mode == 1) {
        size_t need = 0;
        cvf_status q = cvf_matmul_workspace_size(cpu, ap, bp, cp, epp, &need);
        REQUIRE(memcmp(arena, before, sizeof arena) == 0, "cvf_matmul_workspace_size wrote the arena");
        if (q == CVF_STATUS_SUCCESS)
            ws = need < WS_BYTES ? need : 0;
    } else if (ws_mode == 2) {
        ws = (size_t)u16(s) * 16 % WS_BYTES;
    }
    use_workspace(cpu, ws);

    cvf_status st = cvf_matmul(cpu, ap, bp, cp, epp);
    if (self_test && st == CVF_STATUS_SUCCESS && c.rows > 0 && c.cols > 0) {
        operand oc = matrix_operand(&c, true);
        if (self_test == 1)
            store_elem(arena, &oc, 0, 0, load_elem(arena, &oc, 0, 0) * 1.5 + 1.0);
        else
            elem_ptr(arena, &oc, c.rows - 1, c.cols - 1)[elem_size(c.dtype)] ^= 1;
    }
    REQUIRE(!(ws_mode == 1 && st == CVF_STATUS_WORKSPACE_TOO_SMALL),
            "a workspace of the size cvf_matmul_workspace_size reported (%zu) is too small: %s", ws,
            cvf_context_last_error(cpu));
    check_arena(cpu, st, ops, count, "cpu matmul");
    check_workspace(ws, st == CVF_STATUS_SUCCESS);
    use_workspace(cpu, 0);
    memcpy(cpu_after, arena, sizeof arena);

    memcpy(arena, before, sizeof arena);
    cvf_status rst = cvf_matmul(ref_ctx, ap, bp, cp, epp);
    if (debug)
        fprintf(stderr, "matmul M %lld N %lld K %lld act %d: cpu %s (%s), reference %s\n", (long long)M, (long long)N,
                (long long)K, (int)act, cvf_status_string(st), cvf_context_last_error(cpu), cvf_status_string(rst));
    check_arena(ref_ctx, rst, ops, count, "reference matmul");
    if (is_validation_error(st))
        REQUIRE(rst == st, "cpu says %s, the reference %s", cvf_status_string(st), cvf_status_string(rst));
    if (st != CVF_STATUS_SUCCESS)
        return;
    REQUIRE(rst == CVF_STATUS_SUCCESS || rst == CVF_STATUS_OUT_OF_MEMORY, "cpu succeeded, the reference says %s: %s",
            cvf_status_string(rst), cvf_context_last_error(ref_ctx));
    if (rst != CVF_STATUS_SUCCESS)
        return;

    /* A success means consistent shapes; compare every output element with the float64 result. */
    REQUIRE(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols,
            "cpu accepted a (%lld x %lld) @ b (%lld x %lld) -> c (%lld x %lld)", (long long)a.rows, (long long)a.cols,
            (long long)b.rows, (long long)b.cols, (long long)c.rows, (long long)c.cols);
    M = a.rows, K = a.cols, N = b.cols;
    const operand oa = matrix_operand(&a, false), ob = matrix_operand(&b, false), oc = matrix_operand(&c, true);
    bool gelu_like = act != CVF_ACTIVATION_NONE && act != CVF_ACTIVATION_RELU;
    double colsum_scale[DIM_MAX + 2] = {0};
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double scale = o_bias ? absval(o_bias, j, 0) : 0;
            for (int64_t k = 0; k < K; k++)
                scale += absval(&oa, i, k) * absval(&ob, k, j);
            if (o_aux_out)
                compare_elem(o_aux_out, i, j, scale, rel_error(K), "aux_out");
            double yscale = gelu_like ? 1.2 * scale : scale;
            compare_elem(&oc, i, j, yscale, rel_error(K), "c");
            colsum_scale[j] += yscale;
        }
    if (o_bias_grad)
        for (int64_t j = 0; j < N; j++)
            compare_elem(o_bias_grad, j, 0, colsum_scale[j], rel_error(K + M), "bias_grad");
}

/* ---- cvf_mlp_backward --------------------------------------------------------------------- */

static void fuzz_mlp_backward(stream *s, cvf_context *cpu, uint8_t ws_mode)
{
    int64_t S = u8(s) % (MLP_DIM_MAX + 1), H = u8(s) % (MLP_DIM_MAX + 1), I = u8(s) % (MLP_DIM_MAX + 1);
    cvf_mlp_backward_args args;
    memset(&args, 0, sizeof args);
    args.grad_output = decode_matrix(s, 0, S, H);
    args.hidden_state = decode_matrix(s, 1, S, H);
    args.fc1_weight = decode_matrix(s, 2, I, H);
    args.fc2_weight = decode_matrix(s, 3, H, I);
    args.fc1_output = decode_matrix(s, 4, S, I);
    args.gelu_output = decode_matrix(s, 5, S, I);
    args.grad_hidden_state = decode_matrix(s, 6, S, H);
    args.grad_fc1_weight = decode_matrix(s, 7, I, H);
    args.grad_fc1_bias = decode_vector(s, 8, I);
    args.grad_fc2_weight = decode_matrix(s, 9, H, I);
    args.grad_fc2_bias = decode_vector(s, 10, H);
    uint8_t g = u8(s);
    args.gelu = g < 250 ? (cvf_gelu)(g & 1) : (cvf_gelu)(g == 250 ? -1 : g);

    operand ops[MAX_OPS] = {
        matrix_operand(&args.grad_output, false),      matrix_operand(&args.hidden_state, false),
        matrix_operand(&args.fc1_weight, false),       matrix_operand(&args.fc2_weight, false),
        matrix_operand(&args.fc1_output, false),       matrix_operand(&args.gelu_output, false),
        matrix_operand(&args.grad_hidden_state, true), matrix_operand(&args.grad_fc1_weight, true),
        vector_operand(&args.grad_fc1_bias, true),     matrix_operand(&args.grad_fc2_weight, true),
        vector_operand(&args.grad_fc2_bias, true),
    };
    if (!safe_to_call(ops, MAX_OPS))
        return;
    /* Consistent with a large (wild) S, H or I: a long computation, not made. */
    int64_t s_ = args.grad_output.rows, h_ = args.grad_output.cols, i_ = args.fc1_weight.rows;
    static const int dims_of[MAX_OPS][2] = {{0, 1}, {0, 1}, {2, 1}, {1, 2}, {0, 2}, {0, 2},
                                            {0, 1}, {2, 1}, {2, 3}, {1, 2}, {1, 3}};
    const int64_t dims[4] = {s_, h_, i_, 1};
    bool consistent = true;
    for (int k = 0; k < MAX_OPS; k++)
        consistent = consistent && ops[k].rows == dims[dims_of[k][0]] && ops[k].cols == dims[dims_of[k][1]];
    if (consistent && (s_ > MLP_DIM_MAX || h_ > MLP_DIM_MAX || i_ > MLP_DIM_MAX))
        return;

    fill_arena(s, ops, MAX_OPS);
    memcpy(before, arena, sizeof arena);
    size_t ws = ws_mode == 2 ? (size_t)u16(s) * 16 % WS_BYTES : 0;
    use_workspace(cpu, ws);
    cvf_status st = cvf_mlp_backward(cpu, &args);
    check_arena(cpu, st, ops, MAX_OPS, "cpu mlp_backward");
    check_workspace(ws, st == CVF_STATUS_SUCCESS);
    use_workspace(cpu, 0);
    memcpy(cpu_after, arena, sizeof arena);

    memcpy(arena, before, sizeof arena);
    cvf_status rst = cvf_mlp_backward(ref_ctx, &args);
    if (debug)
        fprintf(stderr, "mlp_backward S %lld H %lld I %lld gelu %d: cpu %s (%s), reference %s\n", (long long)S,
                (long long)H, (long long)I, (int)args.gelu, cvf_status_string(st), cvf_context_last_error(cpu),
                cvf_status_string(rst));
    check_arena(ref_ctx, rst, ops, MAX_OPS, "reference mlp_backward");
    if (is_validation_error(st))
        REQUIRE(rst == st, "cpu says %s, the reference %s", cvf_status_string(st), cvf_status_string(rst));
    if (st != CVF_STATUS_SUCCESS)
        return;
    REQUIRE(rst == CVF_STATUS_SUCCESS || rst == CVF_STATUS_OUT_OF_MEMORY, "cpu succeeded, the reference says %s: %s",
            cvf_status_string(rst), cvf_context_last_error(ref_ctx));
    if (rst != CVF_STATUS_SUCCESS)
        return;

    REQUIRE(consistent, "cpu accepted inconsistent shapes (S %lld, H %lld, I %lld from grad_output and fc1_weight)",
            (long long)s_, (long long)h_, (long long)i_);
    S = s_, H = h_, I = i_;
    /* Bounds from sums of |terms| along the chain (S, H, I <= MLP_DIM_MAX here). */
    const operand *go = &ops[0], *hs = &ops[1], *w1 = &ops[2], *w2 = &ops[3], *ge = &ops[5];
    double g1[MLP_DIM_MAX][MLP_DIM_MAX]; /* |grad_fc1_output| bound, (S, I) */
    for (int64_t si = 0; si < S; si++)
        for (int64_t ii = 0; ii < I; ii++) {
            double t = 0;
            for (int64_t hi = 0; hi < H; hi++)
                t += absval(go, si, hi) * absval(w2, hi, ii);
            g1[si][ii] = 1.2 * t;
        }
    double rel = rel_error(S + H + I);
    /* grad_fc1_output is kept in the plan's workspace dtype (bf16 where bf16 x bf16 products have a
     * kernel of their own: AMX, vdpbf16ps on AMD): the GEMMs reading it see each term rounded once
     * more, to nearest, by at most half an ulp (dtype_eps is one ulp) of a value within g1's bound */
    cvf_mlp_shape shape = {S, H, I, go->dtype, args.gelu};
    cvf_mlp_plan plan;
    double rel_g1 = rel;
    if (cvf_mlp_backward_plan(cpu, &shape, &plan) == CVF_STATUS_SUCCESS && plan.workspace_dtype != CVF_F32)
        rel_g1 += dtype_eps(plan.workspace_dtype) / 2;
    for (int64_t si = 0; si < S; si++)
        for (int64_t hi = 0; hi < H; hi++) {
            double t = 0;
            for (int64_t ii = 0; ii < I; ii++)
                t += g1[si][ii] * absval(w1, ii, hi);
            compare_elem(&ops[6], si, hi, t, rel_g1, "grad_hidden_state");
        }
    for (int64_t ii = 0; ii < I; ii++) {
        double bias_scale = 0;
        for (int64_t hi = 0; hi < H; hi++) {
            double t = 0;
            for (int64_t si = 0; si < S; si++)
                t += g1[si][ii] * absval(hs, si, hi);
            compare_elem(&ops[7], ii, hi, t, rel_g1, "grad_fc1_weight");
        }
        for (int64_t si = 0; si < S; si++)
            bias_scale += g1[si][ii];
        compare_elem(&ops[8], ii, 0, bias_scale, rel, "grad_fc1_bias");
    }
    for (int64_t hi = 0; hi < H; hi++) {
        double bias_scale = 0;
        for (int64_t ii = 0; ii < I; ii++) {
            double t = 0;
            for (int64_t si = 0; si < S; si++)
                t += absval(go, si, hi) * absval(ge, si, ii);
            compare_elem(&ops[9], hi, ii, t, rel, "grad_fc2_weight");
        }
        for (int64_t si = 0; si < S; si++)
            bias_scale += absval(go, si, hi);
        compare_elem(&ops[10], hi, 0, bias_scale, rel, "grad_fc2_bias");
    }
}

/* ---- entry points ------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    debug = getenv("FUZZ_API_DEBUG") != NULL;
    self_test = getenv("FUZZ_API_SELF_TEST") ? atoi(getenv("FUZZ_API_SELF_TEST")) : 0;
    memset(poison_block, POISON, sizeof poison_block);
    for (int t = 0; t < 2; t++) {
        cvf_context_options options = {CVF_DEVICE_CPU, t + 1, 0, NULL};
        if (cvf_context_create(&options, &cpu_ctx[t]) != CVF_STATUS_SUCCESS) {
            fprintf(stderr, "fuzz_api: cannot create a CPU context: %s\n", cvf_context_create_error());
            abort();
        }
    }
    cvf_context_options options = {CVF_DEVICE_REFERENCE, 1, 0, NULL};
    if (cvf_context_create(&options, &ref_ctx) != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "fuzz_api: cannot create the reference context: %s\n", cvf_context_create_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    stream s = {data, size, 0, 0};
    uint8_t mode = u8(&s);
    s.rng = u8(&s);
    /* bit 0: the operation; bits 1-2: two threads when both set; bits 3-4: forced blocks;
     * bits 5-6: the workspace (0 own, 1 the queried size, 2 a fuzzed size). */
    cvf_context *cpu = cpu_ctx[((mode >> 1) & 3) == 3 ? 1 : 0];
    static const char *const blocks[] = {NULL, "16,24,64", "2,1,1", "4,8,16"};
    const char *forced = blocks[(mode >> 3) & 3];
    if (forced)
        setenv("CVF_CPU_BLOCKS", forced, 1);
    else
        unsetenv("CVF_CPU_BLOCKS");
    uint8_t ws_mode = (mode >> 5) & 3;
    if (mode & 1)
        fuzz_mlp_backward(&s, cpu, ws_mode == 3 ? 0 : ws_mode);
    else
        fuzz_matmul(&s, cpu, ws_mode == 3 ? 0 : ws_mode);
    return 0;
}

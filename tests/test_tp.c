/*
 * Tensor-parallel MLP (issue 14) in partial mode (args.tp with nccl_comm NULL), on the devices every
 * machine has: P = 1, 2, 3, 4 ranks simulated one after another in this process, each on its slice
 * of the full MLP's tensors (views into them: fc1_weight's rows, fc2_weight's columns). For every
 * rank the outputs are fully written, nothing outside them changes; the sum over the ranks of
 * output / grad_hidden_state, and every rank's slices of the other outputs, equal the full
 * single-rank result (CPU) and the float64 reference of the full MLP within the dtype tolerance.
 * The float64 oracle in partial mode, summed, equals its full answer to 1e-12. Uneven I (I % P != 0,
 * empty slices) is handled by torch.tensor_split's rule (cvf_tensor_parallel_slice); a slice of the
 * wrong size, bad tp fields and a communicator on a device without NCCL fail with their named
 * status and write nothing. The NCCL path itself: tests/test_nccl.c (GPU).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "support.h"

static cvf_context *cpu_ctx, *ref_ctx;

/* The full MLP's dense tensors in one dtype (inputs random) and, in f64, the reference answers. */
typedef struct full_mlp {
    int64_t S, H, I;
    cvf_dtype dtype;
    cvf_gelu gelu;
    /* inputs (dtype) */
    cvf_matrix x, w1, w2, go, fc1, gelu_out; /* fc1 / gelu_out: the backward's saved inputs */
    cvf_vector b1, b2;
    /* the same inputs in f64, for the reference */
    cvf_matrix x64, w1_64, w2_64, go64, fc1_64, gelu_out64;
    cvf_vector b1_64, b2_64;
    /* the reference's full answers (f64) */
    cvf_matrix y, y_fc1, y_gelu, gx, gw1, gw2;
    cvf_vector gb1, gb2;
    /* the CPU's full single-rank answers (dtype) */
    cvf_matrix c_y, c_fc1, c_gelu, c_gx, c_gw1, c_gw2;
    cvf_vector c_gb1, c_gb2;
} full_mlp;

static void free_matrix(cvf_matrix *m)
{
    free(m->data);
    m->data = NULL;
}

static void free_vector(cvf_vector *v)
{
    free(v->data);
    v->data = NULL;
}

static void full_free(full_mlp *f)
{
    cvf_matrix *ms[] = {&f->x,     &f->w1,     &f->w2,    &f->go,    &f->fc1,    &f->gelu_out, &f->x64,
                        &f->w1_64, &f->w2_64,  &f->go64,  &f->fc1_64, &f->gelu_out64, &f->y,   &f->y_fc1,
                        &f->y_gelu, &f->gx,    &f->gw1,   &f->gw2,   &f->c_y,    &f->c_fc1,  &f->c_gelu,
                        &f->c_gx,  &f->c_gw1,  &f->c_gw2};
    cvf_vector *vs[] = {&f->b1, &f->b2, &f->b1_64, &f->b2_64, &f->gb1, &f->gb2, &f->c_gb1, &f->c_gb2};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        free_matrix(ms[i]);
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        free_vector(vs[i]);
}

/* Builds the full MLP, its reference answers (float64 oracle on f64 copies) and the CPU's. */
static int full_create(full_mlp *f, int64_t S, int64_t H, int64_t I, cvf_dtype dtype, cvf_gelu gelu, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->S = S, f->H = H, f->I = I, f->dtype = dtype, f->gelu = gelu;
    cvft_rng rng = cvft_rng_make(seed);
    if (cvft_matrix_alloc(dtype, S, H, &f->x) || cvft_matrix_alloc(dtype, I, H, &f->w1) ||
        cvft_matrix_alloc(dtype, H, I, &f->w2) || cvft_matrix_alloc(dtype, S, H, &f->go) ||
        cvft_matrix_alloc(dtype, S, I, &f->fc1) || cvft_matrix_alloc(dtype, S, I, &f->gelu_out) ||
        cvft_vector_alloc(dtype, I, &f->b1) || cvft_vector_alloc(dtype, H, &f->b2))
        return -1;
    double a = support_gelu_a_range(H);
    cvft_matrix_fill_uniform(&f->x, &rng, -a, a);
    cvft_matrix_fill_uniform(&f->w1, &rng, -1, 1);
    cvft_matrix_fill_uniform(&f->w2, &rng, -1, 1);
    cvft_matrix_fill_uniform(&f->go, &rng, -1, 1);
    cvft_matrix_fill_uniform(&f->fc1, &rng, -4, 4);
    cvft_matrix_fill_uniform(&f->gelu_out, &rng, -1, 2);
    cvft_vector_fill_uniform(&f->b1, &rng, -1, 1);
    cvft_vector_fill_uniform(&f->b2, &rng, -1, 1);

    /* the reference, on f64 copies of the inputs (kept for the split references) */
    int bad = cvft_matrix_to_f64(&f->x, &f->x64) | cvft_matrix_to_f64(&f->w1, &f->w1_64) |
              cvft_matrix_to_f64(&f->w2, &f->w2_64) | cvft_matrix_to_f64(&f->go, &f->go64) |
              cvft_matrix_to_f64(&f->fc1, &f->fc1_64) | cvft_matrix_to_f64(&f->gelu_out, &f->gelu_out64) |
              cvft_vector_to_f64(&f->b1, &f->b1_64) | cvft_vector_to_f64(&f->b2, &f->b2_64);
    const cvf_matrix x = f->x64, w1 = f->w1_64, w2 = f->w2_64, go = f->go64, fc1 = f->fc1_64, ge = f->gelu_out64;
    const cvf_vector b1 = f->b1_64, b2 = f->b2_64;
    bad |= cvft_matrix_alloc(CVF_F64, S, H, &f->y) | cvft_matrix_alloc(CVF_F64, S, I, &f->y_fc1) |
           cvft_matrix_alloc(CVF_F64, S, I, &f->y_gelu) | cvft_matrix_alloc(CVF_F64, S, H, &f->gx) |
           cvft_matrix_alloc(CVF_F64, I, H, &f->gw1) | cvft_matrix_alloc(CVF_F64, H, I, &f->gw2) |
           cvft_vector_alloc(CVF_F64, I, &f->gb1) | cvft_vector_alloc(CVF_F64, H, &f->gb2);
    bad |= cvft_matrix_alloc(dtype, S, H, &f->c_y) | cvft_matrix_alloc(dtype, S, I, &f->c_fc1) |
           cvft_matrix_alloc(dtype, S, I, &f->c_gelu) | cvft_matrix_alloc(dtype, S, H, &f->c_gx) |
           cvft_matrix_alloc(dtype, I, H, &f->c_gw1) | cvft_matrix_alloc(dtype, H, I, &f->c_gw2) |
           cvft_vector_alloc(dtype, I, &f->c_gb1) | cvft_vector_alloc(dtype, H, &f->c_gb2);
    if (!bad) {
        cvf_mlp_forward_args fa = {.hidden_state = x, .fc1_weight = w1, .fc1_bias = b1, .fc2_weight = w2,
                                   .fc2_bias = b2, .fc1_output = f->y_fc1, .gelu_output = f->y_gelu,
                                   .output = f->y, .gelu = gelu};
        cvf_mlp_backward_args ba = {.grad_output = go, .hidden_state = x, .fc1_weight = w1, .fc2_weight = w2,
                                    .fc1_output = fc1, .gelu_output = ge, .grad_hidden_state = f->gx,
                                    .grad_fc1_weight = f->gw1, .grad_fc1_bias = f->gb1, .grad_fc2_weight = f->gw2,
                                    .grad_fc2_bias = f->gb2, .gelu = gelu};
        bad = cvf_mlp_forward(ref_ctx, &fa) != CVF_STATUS_SUCCESS || cvf_mlp_backward(ref_ctx, &ba) != CVF_STATUS_SUCCESS;
        cvf_mlp_forward_args ca = {.hidden_state = f->x, .fc1_weight = f->w1, .fc1_bias = f->b1, .fc2_weight = f->w2,
                                   .fc2_bias = f->b2, .fc1_output = f->c_fc1, .gelu_output = f->c_gelu,
                                   .output = f->c_y, .gelu = gelu};
        cvf_mlp_backward_args cb = {.grad_output = f->go, .hidden_state = f->x, .fc1_weight = f->w1,
                                    .fc2_weight = f->w2, .fc1_output = f->fc1, .gelu_output = f->gelu_out,
                                    .grad_hidden_state = f->c_gx, .grad_fc1_weight = f->c_gw1,
                                    .grad_fc1_bias = f->c_gb1, .grad_fc2_weight = f->c_gw2,
                                    .grad_fc2_bias = f->c_gb2, .gelu = gelu};
        bad = bad || cvf_mlp_forward(cpu_ctx, &ca) != CVF_STATUS_SUCCESS ||
              cvf_mlp_backward(cpu_ctx, &cb) != CVF_STATUS_SUCCESS;
    }
    return bad ? -1 : 0;
}

/* Elements [offset, offset + length) of a dense vector, in place. */
static cvf_vector vec_slice(const cvf_vector *v, int64_t offset, int64_t length)
{
    cvf_vector s = *v;
    s.data = (char *)v->data + (size_t)offset * cvf_dtype_size(v->dtype);
    s.length = length;
    return s;
}

/* Checks got against the reference answer want and the CPU's full answer cpu, within tol. */
static void check_close(const char *label, const char *name, const cvf_matrix *got, const cvf_matrix *want,
                        const cvf_matrix *cpu, double tol)
{
    double e_ref = cvft_matrix_rel_error(got, want), e_cpu = cvft_matrix_rel_error(got, cpu);
    CHECK(e_ref <= tol, "%s: %s: relative error %.3g against the float64 reference of the full MLP > %.3g", label, name,
          e_ref, tol);
    CHECK(e_cpu <= tol, "%s: %s: relative error %.3g against the full single-rank CPU result > %.3g", label, name,
          e_cpu, tol);
}

/* The outputs of one simulated rank (guarded, poisoned). */
typedef struct rank_out {
    support_matrix y, fc1, gelu, gx, gw1, gw2;
    support_vector gb1, gb2;
} rank_out;

static void rank_free(rank_out *r)
{
    support_matrix *ms[] = {&r->y, &r->fc1, &r->gelu, &r->gx, &r->gw1, &r->gw2};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        support_matrix_destroy(ms[i]);
    support_vector_destroy(&r->gb1);
    support_vector_destroy(&r->gb2);
}

/* Checks that an output view was fully written and nothing around it changed. */
static void check_written(const char *label, const char *name, const support_matrix *m)
{
    CHECK(support_count_poisoned_in_view(m) == 0, "%s: %s: %lld elements not written", label, name,
          (long long)support_count_poisoned_in_view(m));
    CHECK(support_outside_view_intact(m), "%s: %s: a byte outside the view changed", label, name);
}

static void check_vector_written(const char *label, const char *name, const support_vector *v)
{
    CHECK(support_vector_count_poisoned(v) == 0, "%s: %s: %lld elements not written", label, name,
          (long long)support_vector_count_poisoned(v));
    CHECK(support_vector_outside_intact(v), "%s: %s: a byte outside the view changed", label, name);
}

/* The forward and backward of every rank of P on ctx in partial mode, summed and checked. */
static void run_split(const full_mlp *f, int32_t P, cvf_context *ctx, const char *device)
{
    const int64_t S = f->S, H = f->H;
    const cvf_dtype e = f->dtype;
    char label[200];
    snprintf(label, sizeof label, "%s %s S=%lld H=%lld I=%lld P=%d gelu=%s", device, cvf_dtype_name(e), (long long)S,
             (long long)H, (long long)f->I, (int)P, f->gelu == CVF_GELU_ERF ? "erf" : "tanh");
    cvf_matrix y_sum, gx_sum;
    if (cvft_matrix_alloc(CVF_F64, S, H, &y_sum) || cvft_matrix_alloc(CVF_F64, S, H, &gx_sum)) {
        CHECK(false, "%s: out of memory", label);
        return;
    }
    double tol = cvft_tolerance(e);
    for (int32_t r = 0; r < P; r++) {
        int64_t off = -1, len = -1;
        CHECK(cvf_tensor_parallel_slice(f->I, P, r, &off, &len) == CVF_STATUS_SUCCESS, "%s: slice of rank %d", label,
              (int)r);
        rank_out o;
        memset(&o, 0, sizeof o);
        /* output with padded rows off the alignment: partial mode takes any layout */
        support_layout padded = {.pad = 3, .shift = 1}, dense = {0};
        if (support_matrix_create(&o.y, e, S, H, padded) || support_matrix_create(&o.fc1, e, S, len, dense) ||
            support_matrix_create(&o.gelu, e, S, len, dense) || support_matrix_create(&o.gx, e, S, H, dense) ||
            support_matrix_create(&o.gw1, e, len, H, dense) || support_matrix_create(&o.gw2, e, H, len, padded) ||
            support_vector_create(&o.gb1, e, len, 1, 0) || support_vector_create(&o.gb2, e, H, 2, 1)) {
            CHECK(false, "%s: out of memory", label);
            rank_free(&o);
            break;
        }
        cvf_tensor_parallel tp = {.size = P, .rank = r, .intermediate = f->I};
        cvf_mlp_forward_args fa = {.hidden_state = f->x,
                                   .fc1_weight = support_row_slice(&f->w1, off, len),
                                   .fc1_bias = vec_slice(&f->b1, off, len),
                                   .fc2_weight = support_col_slice(&f->w2, off, len),
                                   .fc2_bias = f->b2,
                                   .fc1_output = o.fc1.view,
                                   .gelu_output = o.gelu.view,
                                   .output = o.y.view,
                                   .gelu = f->gelu,
                                   .tp = tp};
        cvf_status st = cvf_mlp_forward(ctx, &fa);
        char rl[240];
        snprintf(rl, sizeof rl, "%s rank %d (rows %lld..+%lld)", label, (int)r, (long long)off, (long long)len);
        CHECK(st == CVF_STATUS_SUCCESS, "%s: forward: %s (%s)", rl, cvf_status_string(st), cvf_context_last_error(ctx));
        check_written(rl, "output", &o.y);
        check_written(rl, "fc1_output", &o.fc1);
        check_written(rl, "gelu_output", &o.gelu);
        cvf_matrix want = support_col_slice(&f->y_fc1, off, len), cpu = support_col_slice(&f->c_fc1, off, len);
        check_close(rl, "fc1_output (this rank's columns)", &o.fc1.view, &want, &cpu, tol);
        want = support_col_slice(&f->y_gelu, off, len), cpu = support_col_slice(&f->c_gelu, off, len);
        check_close(rl, "gelu_output (this rank's columns)", &o.gelu.view, &want, &cpu, tol);

        cvf_mlp_backward_args ba = {.grad_output = f->go,
                                    .hidden_state = f->x,
                                    .fc1_weight = support_row_slice(&f->w1, off, len),
                                    .fc2_weight = support_col_slice(&f->w2, off, len),
                                    .fc1_output = support_col_slice(&f->fc1, off, len),
                                    .gelu_output = support_col_slice(&f->gelu_out, off, len),
                                    .grad_hidden_state = o.gx.view,
                                    .grad_fc1_weight = o.gw1.view,
                                    .grad_fc1_bias = o.gb1.view,
                                    .grad_fc2_weight = o.gw2.view,
                                    .grad_fc2_bias = o.gb2.view,
                                    .gelu = f->gelu,
                                    .tp = tp};
        st = cvf_mlp_backward(ctx, &ba);
        CHECK(st == CVF_STATUS_SUCCESS, "%s: backward: %s (%s)", rl, cvf_status_string(st), cvf_context_last_error(ctx));
        check_written(rl, "grad_hidden_state", &o.gx);
        check_written(rl, "grad_fc1_weight", &o.gw1);
        check_written(rl, "grad_fc2_weight", &o.gw2);
        check_vector_written(rl, "grad_fc1_bias", &o.gb1);
        check_vector_written(rl, "grad_fc2_bias", &o.gb2);
        want = support_row_slice(&f->gw1, off, len), cpu = support_row_slice(&f->c_gw1, off, len);
        check_close(rl, "grad_fc1_weight (this rank's rows)", &o.gw1.view, &want, &cpu, tol);
        want = support_col_slice(&f->gw2, off, len), cpu = support_col_slice(&f->c_gw2, off, len);
        check_close(rl, "grad_fc2_weight (this rank's columns)", &o.gw2.view, &want, &cpu, tol);
        cvf_vector wv = vec_slice(&f->gb1, off, len), cv = vec_slice(&f->c_gb1, off, len);
        want = support_vector_as_row(&wv), cpu = support_vector_as_row(&cv);
        cvf_matrix got = support_vector_as_row(&o.gb1.view);
        check_close(rl, "grad_fc1_bias (this rank's slice)", &got, &want, &cpu, tol);
        want = support_vector_as_row(&f->gb2), cpu = support_vector_as_row(&f->c_gb2), got = support_vector_as_row(&o.gb2.view);
        check_close(rl, "grad_fc2_bias (every rank: the full sum)", &got, &want, &cpu, tol);

        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < H; j++) {
                ((double *)y_sum.data)[i * H + j] += cvft_matrix_get(&o.y.view, i, j);
                ((double *)gx_sum.data)[i * H + j] += cvft_matrix_get(&o.gx.view, i, j);
            }
        rank_free(&o);
    }
    /* the sum of P partials, each rounded to the dtype once: at most about sqrt(P) roundings of
     * partials no larger than the full result, within the one-call tolerance for these shapes */
    check_close(label, "output summed over the ranks", &y_sum, &f->y, &f->c_y, tol);
    check_close(label, "grad_hidden_state summed over the ranks", &gx_sum, &f->gx, &f->c_gx, tol);
    free(y_sum.data);
    free(gx_sum.data);
}

/* The float64 oracle in partial mode: summed over the ranks it is its own full answer. */
static void run_split_reference(const full_mlp *f, int32_t P)
{
    const int64_t S = f->S, H = f->H;
    const cvf_matrix x = f->x64, w1 = f->w1_64, w2 = f->w2_64, go = f->go64, fc1 = f->fc1_64, ge = f->gelu_out64;
    const cvf_vector b1 = f->b1_64, b2 = f->b2_64;
    cvf_matrix y_sum, gx_sum;
    if (cvft_matrix_alloc(CVF_F64, S, H, &y_sum) | cvft_matrix_alloc(CVF_F64, S, H, &gx_sum)) {
        CHECK(false, "out of memory");
        return;
    }
    for (int32_t r = 0; r < P; r++) {
        int64_t off = 0, len = 0;
        cvf_tensor_parallel_slice(f->I, P, r, &off, &len);
        cvf_matrix y, f1, g1, gx, gw1, gw2;
        cvf_vector gb1, gb2;
        if (cvft_matrix_alloc(CVF_F64, S, H, &y) | cvft_matrix_alloc(CVF_F64, S, len, &f1) |
            cvft_matrix_alloc(CVF_F64, S, len, &g1) | cvft_matrix_alloc(CVF_F64, S, H, &gx) |
            cvft_matrix_alloc(CVF_F64, len, H, &gw1) | cvft_matrix_alloc(CVF_F64, H, len, &gw2) |
            cvft_vector_alloc(CVF_F64, len, &gb1) | cvft_vector_alloc(CVF_F64, H, &gb2)) {
            CHECK(false, "out of memory");
            break;
        }
        cvf_tensor_parallel tp = {.size = P, .rank = r, .intermediate = f->I};
        cvf_mlp_forward_args fa = {.hidden_state = x, .fc1_weight = support_row_slice(&w1, off, len),
                                   .fc1_bias = vec_slice(&b1, off, len), .fc2_weight = support_col_slice(&w2, off, len),
                                   .fc2_bias = b2, .fc1_output = f1, .gelu_output = g1, .output = y,
                                   .gelu = f->gelu, .tp = tp};
        cvf_mlp_backward_args ba = {.grad_output = go, .hidden_state = x, .fc1_weight = support_row_slice(&w1, off, len),
                                    .fc2_weight = support_col_slice(&w2, off, len), .fc1_output = support_col_slice(&fc1, off, len),
                                    .gelu_output = support_col_slice(&ge, off, len), .grad_hidden_state = gx,
                                    .grad_fc1_weight = gw1, .grad_fc1_bias = gb1, .grad_fc2_weight = gw2,
                                    .grad_fc2_bias = gb2, .gelu = f->gelu, .tp = tp};
        cvf_status fs = cvf_mlp_forward(ref_ctx, &fa), bs = cvf_mlp_backward(ref_ctx, &ba);
        CHECK(fs == CVF_STATUS_SUCCESS && bs == CVF_STATUS_SUCCESS, "reference P=%d rank %d: %s / %s (%s)", (int)P,
              (int)r, cvf_status_string(fs), cvf_status_string(bs), cvf_context_last_error(ref_ctx));
        for (int64_t i = 0; i < S * H; i++) {
            ((double *)y_sum.data)[i] += ((double *)y.data)[i];
            ((double *)gx_sum.data)[i] += ((double *)gx.data)[i];
        }
        cvf_matrix want = support_col_slice(&f->y_gelu, off, len), want_gw2 = support_col_slice(&f->gw2, off, len);
        CHECK(cvft_matrix_rel_error(&g1, &want) <= 1e-12, "reference P=%d rank %d: gelu_output slice", (int)P, (int)r);
        CHECK(cvft_matrix_rel_error(&gw2, &want_gw2) <= 1e-12, "reference P=%d rank %d: grad_fc2_weight slice", (int)P, (int)r);
        cvf_matrix gb2m = support_vector_as_row(&gb2), want_gb2 = support_vector_as_row(&f->gb2);
        CHECK(cvft_matrix_rel_error(&gb2m, &want_gb2) <= 1e-12, "reference P=%d rank %d: grad_fc2_bias", (int)P, (int)r);
        cvf_matrix *ms[] = {&y, &f1, &g1, &gx, &gw1, &gw2};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            free(ms[i]->data);
        free(gb1.data);
        free(gb2.data);
    }
    double ey = cvft_matrix_rel_error(&y_sum, &f->y), egx = cvft_matrix_rel_error(&gx_sum, &f->gx);
    CHECK(ey <= 1e-12, "reference P=%d: output summed over the ranks: relative error %.3g (fc2_bias once?)", (int)P, ey);
    CHECK(egx <= 1e-12, "reference P=%d: grad_hidden_state summed: relative error %.3g", (int)P, egx);
    free(y_sum.data);
    free(gx_sum.data);
}

/* Section: the split runs, every dtype, P = 1 to 4, even and uneven I, an empty slice. */
static void test_split(void)
{
    static const struct {
        int64_t S, H, I;
    } shapes[] = {{5, 8, 12}, {7, 16, 10}, {33, 40, 70}, {4, 6, 3}, {64, 96, 256}};
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_F16, CVF_BF16};
    uint64_t seed = 1400;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            full_mlp f;
            cvf_gelu gelu = (s + d) % 2 ? CVF_GELU_ERF : CVF_GELU_TANH;
            if (full_create(&f, shapes[s].S, shapes[s].H, shapes[s].I, dtypes[d], gelu, seed++)) {
                CHECK(false, "setting up S=%lld H=%lld I=%lld failed", (long long)shapes[s].S, (long long)shapes[s].H,
                      (long long)shapes[s].I);
                full_free(&f);
                continue;
            }
            for (int32_t P = 1; P <= 4; P++) {
                run_split(&f, P, cpu_ctx, "cpu");
                if (shapes[s].S * shapes[s].H * shapes[s].I <= 40000)
                    run_split_reference(&f, P);
            }
            full_free(&f);
        }
}

/* Section: cvf_tensor_parallel_slice follows torch.tensor_split and rejects bad arguments. */
static void test_slice_rule(void)
{
    for (int64_t I = 0; I <= 20; I++)
        for (int32_t P = 1; P <= 6; P++) {
            int64_t next = 0;
            for (int32_t r = 0; r < P; r++) {
                int64_t off = -1, len = -1;
                cvf_status st = cvf_tensor_parallel_slice(I, P, r, &off, &len);
                int64_t want = I / P + (r < I % P ? 1 : 0);
                CHECK(st == CVF_STATUS_SUCCESS && off == next && len == want,
                      "slice(I=%lld, P=%d, rank %d) = %s, %lld +%lld; expected %lld +%lld", (long long)I, (int)P,
                      (int)r, cvf_status_string(st), (long long)off, (long long)len, (long long)next, (long long)want);
                next += want;
            }
            CHECK(next == I, "slices of I=%lld over P=%d cover %lld", (long long)I, (int)P, (long long)next);
        }
    int64_t off = 7, len = 7;
    CHECK(cvf_tensor_parallel_slice(10, 0, 0, &off, &len) == CVF_STATUS_INVALID_VALUE, "size 0 accepted");
    CHECK(cvf_tensor_parallel_slice(10, 2, 2, &off, &len) == CVF_STATUS_INVALID_VALUE, "rank 2 of 2 accepted");
    CHECK(cvf_tensor_parallel_slice(10, 2, -1, &off, &len) == CVF_STATUS_INVALID_VALUE, "rank -1 accepted");
    CHECK(cvf_tensor_parallel_slice(-1, 2, 0, &off, &len) == CVF_STATUS_INVALID_VALUE, "I -1 accepted");
    CHECK(cvf_tensor_parallel_slice(10, 2, 0, NULL, &len) == CVF_STATUS_INVALID_VALUE, "NULL offset accepted");
    CHECK(cvf_tensor_parallel_slice(10, 2, 0, &off, NULL) == CVF_STATUS_INVALID_VALUE, "NULL length accepted");
    CHECK(off == 7 && len == 7, "a rejected slice query wrote its outputs");
}

/* One rejected call: the expected status, a message naming what, no output written. */
typedef struct bad_case {
    const char *what;
    cvf_tensor_parallel tp;
    int64_t I; /* the rank's slice the call passes */
    cvf_status want;
    const char *names; /* a word the message must contain */
} bad_case;

/* Section: bad tp arguments fail with their status, on cpu and reference, forward, backward and
 * the size queries; every output buffer stays byte for byte as it was. */
static void test_rejected(void)
{
    int dummy_comm;
    const bad_case cases[] = {
        {"uneven I, rank 0 given the short slice", {3, 0, 10, NULL, 0}, 3, CVF_STATUS_SHAPE_MISMATCH, "args.tp"},
        {"uneven I, last rank given the long slice", {3, 2, 10, NULL, 0}, 4, CVF_STATUS_SHAPE_MISMATCH, "args.tp"},
        {"I / P rounded up (torch.chunk's rule)", {4, 3, 10, NULL, 0}, 3, CVF_STATUS_SHAPE_MISMATCH, "tensor_split"},
        {"the full I on a rank of 2", {2, 1, 8, NULL, 0}, 8, CVF_STATUS_SHAPE_MISMATCH, "args.tp"},
        {"rank == size", {2, 2, 8, NULL, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp.rank"},
        {"rank < 0", {2, -1, 8, NULL, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp.rank"},
        {"size < 0", {-2, 0, 8, NULL, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp.size"},
        {"size 0 with a rank", {0, 1, 0, NULL, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp"},
        {"size 0 with intermediate", {0, 0, 4, NULL, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp"},
        {"intermediate < 0", {2, 0, -8, NULL, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp.intermediate"},
        {"unknown flags", {2, 0, 8, NULL, 6}, 4, CVF_STATUS_INVALID_VALUE, "args.tp.flags"},
        {"a communicator on a device without NCCL", {2, 0, 8, &dummy_comm, 0}, 4, CVF_STATUS_UNSUPPORTED, "nccl_comm"},
        {"size 0 with a communicator", {0, 0, 0, &dummy_comm, 0}, 4, CVF_STATUS_INVALID_VALUE, "args.tp"},
    };
    const int64_t S = 5, H = 6;
    cvf_context *ctxs[2] = {cpu_ctx, ref_ctx};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 2; d++) {
            const bad_case *bc = &cases[c];
            cvf_context *ctx = ctxs[d];
            cvf_dtype e = d == 0 ? CVF_F16 : CVF_F64;
            const int64_t I = bc->I;
            support_matrix x, w1, w2, go, f1, g1, y, sf1, sg1, gx, gw1, gw2;
            support_vector b1, b2, gb1, gb2;
            memset(&x, 0, sizeof x);
            support_layout L = {0};
            cvft_rng rng = cvft_rng_make(c);
            int bad = support_matrix_create(&x, e, S, H, L) | support_matrix_create(&w1, e, I, H, L) |
                      support_matrix_create(&w2, e, H, I, L) | support_matrix_create(&go, e, S, H, L) |
                      support_matrix_create(&f1, e, S, I, L) | support_matrix_create(&g1, e, S, I, L) |
                      support_matrix_create(&y, e, S, H, L) | support_matrix_create(&sf1, e, S, I, L) |
                      support_matrix_create(&sg1, e, S, I, L) | support_matrix_create(&gx, e, S, H, L) |
                      support_matrix_create(&gw1, e, I, H, L) | support_matrix_create(&gw2, e, H, I, L) |
                      support_vector_create(&b1, e, I, 1, 0) | support_vector_create(&b2, e, H, 1, 0) |
                      support_vector_create(&gb1, e, I, 1, 0) | support_vector_create(&gb2, e, H, 1, 0);
            if (bad) {
                CHECK(false, "out of memory");
                return;
            }
            support_matrix *ins[] = {&x, &w1, &w2, &go, &f1, &g1};
            for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
                support_matrix_fill(ins[i], &rng, -1, 1);
            support_vector_fill(&b1, &rng, -1, 1);
            support_vector_fill(&b2, &rng, -1, 1);
            support_buffer *outs[] = {&y.buffer,  &sf1.buffer, &sg1.buffer, &gx.buffer, &gw1.buffer,
                                      &gw2.buffer, &gb1.buffer, &gb2.buffer};
            for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
                support_buffer_save(outs[i]);
            cvf_mlp_forward_args fa = {.hidden_state = x.view, .fc1_weight = w1.view, .fc1_bias = b1.view,
                                       .fc2_weight = w2.view, .fc2_bias = b2.view, .fc1_output = sf1.view,
                                       .gelu_output = sg1.view, .output = y.view, .tp = bc->tp};
            cvf_mlp_backward_args ba = {.grad_output = go.view, .hidden_state = x.view, .fc1_weight = w1.view,
                                        .fc2_weight = w2.view, .fc1_output = f1.view, .gelu_output = g1.view,
                                        .grad_hidden_state = gx.view, .grad_fc1_weight = gw1.view,
                                        .grad_fc1_bias = gb1.view, .grad_fc2_weight = gw2.view,
                                        .grad_fc2_bias = gb2.view, .tp = bc->tp};
            const char *dev = cvf_device_name(cvf_context_device(ctx));
            size_t bytes = 12345;
            cvf_status got[4] = {cvf_mlp_forward(ctx, &fa), CVF_STATUS_SUCCESS, CVF_STATUS_SUCCESS,
                                 CVF_STATUS_SUCCESS};
            bool named[4] = {strstr(cvf_context_last_error(ctx), bc->names) != NULL, false, false, false};
            got[1] = cvf_mlp_backward(ctx, &ba);
            named[1] = strstr(cvf_context_last_error(ctx), bc->names) != NULL;
            got[2] = cvf_mlp_forward_workspace_size(ctx, &fa, &bytes);
            named[2] = strstr(cvf_context_last_error(ctx), bc->names) != NULL;
            got[3] = cvf_mlp_backward_workspace_size(ctx, &ba, &bytes);
            named[3] = strstr(cvf_context_last_error(ctx), bc->names) != NULL;
            static const char *const calls[] = {"forward", "backward", "forward size query", "backward size query"};
            for (int k = 0; k < 4; k++)
                CHECK(got[k] == bc->want && named[k], "%s: %s %s: %s, expected %s with a message naming '%s'", dev,
                      bc->what, calls[k], cvf_status_string(got[k]), cvf_status_string(bc->want), bc->names);
            CHECK(bytes == 12345, "%s: %s: a rejected size query wrote *bytes", dev, bc->what);
            for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
                CHECK(support_buffer_unchanged(outs[i]), "%s: %s: output %zu written by a rejected call", dev,
                      bc->what, i);
            support_matrix *all[] = {&x, &w1, &w2, &go, &f1, &g1, &y, &sf1, &sg1, &gx, &gw1, &gw2};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                support_matrix_destroy(all[i]);
            support_vector_destroy(&b1);
            support_vector_destroy(&b2);
            support_vector_destroy(&gb1);
            support_vector_destroy(&gb2);
        }
}

/* Section (white box): with a communicator the backward's steps are K1, K2-3, its all-reduce, then
 * K2-1 and K2-2 ordered after K2-3 (the communication hides under them), K3; the forward ends with
 * the all-reduce of output; rank 0 alone adds fc2_bias. Partial mode keeps the unsplit steps. */
static void test_steps(void)
{
    int comm;
    cvf_mlp_backward_args ba = {.grad_output = cvf_matrix_row_major(NULL, CVF_F16, 8, 16),
                                .grad_hidden_state = cvf_matrix_row_major(NULL, CVF_F16, 8, 16),
                                .tp = {.size = 2, .rank = 1, .intermediate = 64, .nccl_comm = &comm}};
    cvf_matrix g1 = cvf_matrix_row_major(NULL, CVF_F32, 8, 32);
    cvf_mlp_step steps[CVF_PLAN_MAX_KERNELS];
    int n = cvf_mlp_backward_steps(&ba, &g1, steps);
    static const cvf_step_id order[] = {CVF_STEP_K1,   CVF_STEP_K2_3, CVF_STEP_AR_GRAD_HIDDEN,
                                        CVF_STEP_K2_1, CVF_STEP_K2_2, CVF_STEP_K3};
    CHECK(n == 6, "backward with a communicator: %d steps, expected 6", n);
    for (int i = 0; i < n && i < 6; i++)
        CHECK(steps[i].id == order[i], "backward step %d is %s (id %d), expected id %d", i, steps[i].info.name,
              (int)steps[i].id, (int)order[i]);
    if (n == 6) {
        CHECK(steps[2].info.kind == CVF_KERNEL_ALL_REDUCE && steps[2].comm == &comm && steps[2].needs == 2u &&
                  steps[2].c.rows == 8 && steps[2].c.cols == 16,
              "the all-reduce of grad_hidden_state: kind %d, needs 0x%x", (int)steps[2].info.kind,
              (unsigned)steps[2].needs);
        CHECK(steps[3].needs == 2u && steps[4].needs == 3u && steps[1].needs == 1u && steps[5].needs == 0u,
              "needs: K2-3 0x%x, K2-1 0x%x, K2-2 0x%x, K3 0x%x", (unsigned)steps[1].needs, (unsigned)steps[3].needs,
              (unsigned)steps[4].needs, (unsigned)steps[5].needs);
    }
    ba.tp.nccl_comm = NULL;
    n = cvf_mlp_backward_steps(&ba, &g1, steps);
    CHECK(n == 5 && steps[3].id == CVF_STEP_K2_3, "partial mode: %d steps", n);

    cvf_mlp_forward_args fa = {.fc2_bias = cvf_vector_dense(NULL, CVF_F16, 16),
                               .output = cvf_matrix_row_major(NULL, CVF_F16, 8, 16),
                               .tp = {.size = 2, .rank = 1, .intermediate = 64, .nccl_comm = &comm}};
    cvf_matrix ge = cvf_matrix_row_major(NULL, CVF_F16, 8, 32);
    n = cvf_mlp_forward_steps(&fa, &ge, NULL, steps);
    CHECK(n == 3 && steps[2].id == CVF_STEP_AR_OUTPUT && steps[2].needs == 2u && steps[2].comm == &comm,
          "forward with a communicator: %d steps", n);
    CHECK(steps[1].epilogue.bias == NULL && steps[1].info.kind == CVF_KERNEL_GEMM, "rank 1 adds fc2_bias");
    fa.tp.rank = 0;
    fa.tp.nccl_comm = NULL;
    n = cvf_mlp_forward_steps(&fa, &ge, NULL, steps);
    CHECK(n == 2 && steps[1].epilogue.bias == &fa.fc2_bias, "rank 0 in partial mode: %d steps, bias %p", n,
          (const void *)steps[1].epilogue.bias);
}

/* Section: the new statuses have names. */
static void test_statuses(void)
{
    CHECK(strcmp(cvf_status_string(CVF_STATUS_COMMUNICATION_FAILED), "communication failed") == 0, "name: %s",
          cvf_status_string(CVF_STATUS_COMMUNICATION_FAILED));
    CHECK(strcmp(cvf_status_string(CVF_STATUS_PEER_FAILED), "another rank failed") == 0, "name: %s",
          cvf_status_string(CVF_STATUS_PEER_FAILED));
}

int main(void)
{
    cvf_context_options cpu = {.device = CVF_DEVICE_CPU, .threads = 2}, ref = {.device = CVF_DEVICE_REFERENCE};
    if (cvf_context_create(&cpu, &cpu_ctx) != CVF_STATUS_SUCCESS ||
        cvf_context_create(&ref, &ref_ctx) != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "test_tp: cannot create the contexts: %s\n", cvf_context_create_error());
        return 1;
    }
    test_statuses();
    test_slice_rule();
    test_steps();
    test_rejected();
    test_split();
    cvf_context_destroy(cpu_ctx);
    cvf_context_destroy(ref_ctx);
    return test_report("test_tp");
}

/*
 * The table-driven operator test: every op x dtype x epilogue x shape x layout of the CPU device
 * against the float64 reference device, with outputs poisoned before every call and checked for
 * unwritten elements, writes outside the view, and the per-dtype relative Frobenius tolerance
 * (f32 1e-5, f16 2e-3, bf16 1e-2: the contract, never loosened). Every case runs on CPU contexts
 * of 1 and 2 threads (the MLP also on exactly the workspace its query gives); column sums
 * (bias_grad, cvf_column_sum, the MLP bias gradients) must be bit-identical across thread counts
 * and repeated runs.
 *
 * Sections: self-test of the checking tools, known answers, the epilogue x dtype x layout cross
 * product, a shape sweep over tail sizes, degenerate shapes (K = 0, M = 0, N = 0), large shapes,
 * cvf_matmul_relu, cvf_column_sum, NaN/Inf propagation, GELU accuracy in its small-valued tails,
 * the MLP forward and backward, and the MLP backward plan. Prints each section's checks and time,
 * the worst error / tolerance ratio seen, and "test_ops: N passed, M failed".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/isa.h"
#include "cpu/kernels/kernels.h"
#include "harness.h"
#include "support.h"

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The contexts every case runs on. */
typedef struct contexts {
    cvf_context *reference;
    cvf_context *cpu[3]; /* 1, 2 and 3 worker threads */
} contexts;

/* Thread counts of the CPU contexts. */
static const int32_t cpu_threads[3] = {1, 2, 3};

/* CPU contexts every case uses; the large cases also run on the third. */
#define CPU_DEFAULT_VARIANTS 2
#define CPU_ALL_VARIANTS 3

/* ---- dtype combinations, epilogues, layouts ------------------------------------------------ */

/* The dtypes of one matmul case. */
static const support_dtype_combo combos[] = {
    {CVF_F32, CVF_F32, CVF_F32, CVF_F32, CVF_F32},
    {CVF_F16, CVF_F16, CVF_F16, CVF_F16, CVF_F16},
    {CVF_BF16, CVF_BF16, CVF_BF16, CVF_BF16, CVF_BF16},
    {CVF_F16, CVF_F16, CVF_F32, CVF_F16, CVF_F32},   /* f16 inputs, f32 outputs */
    {CVF_F32, CVF_F16, CVF_F16, CVF_BF16, CVF_F32},  /* f32 A with f16 B, f16 C */
    {CVF_BF16, CVF_F32, CVF_BF16, CVF_F32, CVF_F16}, /* bf16 A with f32 B, bf16 C, f16 grads */
};
#define HOMOGENEOUS_COMBOS 3

/* Epilogue index bits: activation in bits 0-1, then bias, aux_out, bias_grad, and
 * SUPPORT_EPILOGUE_ERF (the exact GELU for the two GELU activations). EPILOGUE_COUNT enumerates the
 * 32 tanh-GELU / ReLU / none epilogues, then the 16 with GELU_ERF or DGELU_ERF (epilogue_index). */
#define EPILOGUE_COUNT 48

/* The epilogue index (support_make_matmul_case) of epilogue number i, i in [0, EPILOGUE_COUNT). */
static int epilogue_index(int i)
{
    if (i < 32)
        return i;
    int j = i - 32; /* activation GELU (2) or DGELU (3), then the three extras */
    return SUPPORT_EPILOGUE_ERF | (2 + (j & 1)) | ((j >> 1) << 2);
}

/* The layouts every epilogue and dtype combination runs with. */
static const unsigned layouts[] = {
    0,
    SUPPORT_A_TRANSPOSED,
    SUPPORT_B_TRANSPOSED,
    SUPPORT_A_TRANSPOSED | SUPPORT_B_TRANSPOSED,
    SUPPORT_C_PADDED | SUPPORT_VECTORS_STRIDED,
    SUPPORT_C_COLUMN_MAJOR,
    SUPPORT_INPUTS_PADDED | SUPPORT_B_TRANSPOSED | SUPPORT_C_PADDED,
    SUPPORT_A_TRANSPOSED | SUPPORT_INPUTS_PADDED | SUPPORT_C_COLUMN_MAJOR | SUPPORT_C_PADDED | SUPPORT_VECTORS_STRIDED,
};

/* ---- running matmul cases ------------------------------------------------------------------ */

/* Runs a set-up fixture on one context and checks it; when the case has bias_grad, also checks
 * that bias_grad is bit-identical to the first run's (saved when first is set). */
static bool run_and_check(support_matmul_fixture *f, cvf_context *ctx, const char *run_label, bool first)
{
    cvf_status status = support_matmul_run(f, ctx);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s [%s]: returned %s: %s", f->label, run_label, cvf_status_string(status),
               cvf_context_last_error(ctx)))
        return false;
    bool ok = support_matmul_check(f, run_label);
    if (f->spec.bias_grad) {
        if (first)
            ok &= CHECK(support_buffer_save(&f->bias_grad.buffer) == 0, "out of memory");
        else
            ok &= CHECK(support_buffer_unchanged(&f->bias_grad.buffer),
                        "%s [%s]: bias_grad differs in its bits from the run with 1 thread (must be deterministic)",
                        f->label, run_label);
    }
    return ok;
}

/* Runs case c on the first variants CPU contexts (and once more on the last, for run-to-run
 * determinism when the case has bias_grad). Returns whether every check passed. */
static bool run_matmul_case(const contexts *cx, const support_matmul_case *c, int variants)
{
    support_matmul_fixture *f = malloc(sizeof *f);
    if (!CHECK(f != NULL, "out of memory"))
        return false;
    cvf_status status = support_matmul_setup(f, c, cx->reference);
    bool ok = CHECK(status == CVF_STATUS_SUCCESS, "%s: reference device returned %s: %s", f->label,
                    cvf_status_string(status), cvf_context_last_error(cx->reference));
    if (ok) {
        char run_label[64];
        for (int t = 0; t < variants; t++) {
            snprintf(run_label, sizeof run_label, "cpu threads=%d", (int)cpu_threads[t]);
            ok &= run_and_check(f, cx->cpu[t], run_label, t == 0);
        }
        if (c->bias_grad) {
            snprintf(run_label, sizeof run_label, "cpu threads=%d, repeated", (int)cpu_threads[variants - 1]);
            ok &= run_and_check(f, cx->cpu[variants - 1], run_label, false);
        }
        support_matmul_teardown(f);
    }
    free(f);
    return ok;
}

/* ---- self-test of the checking tools ------------------------------------------------------- */

/* The checks must be able to fail: poison detection, out-of-view writes, and the error measure's
 * handling of NaN and Inf. */
static void test_checking_tools(void)
{
    support_matrix m;
    support_layout padded = {false, 3, 1};
    CHECK(support_matrix_create(&m, CVF_F16, 4, 5, padded) == 0, "support_matrix_create");
    CHECK(support_count_poisoned_in_view(&m) == 20, "a new matrix is all poison");
    cvft_matrix_set(&m.view, 1, 2, 0.5);
    CHECK(support_count_poisoned_in_view(&m) == 19, "one written element is seen as written");
    CHECK(support_outside_view_intact(&m), "writing inside the view keeps the outside intact");
    ((uint16_t *)m.view.data)[5] = 0; /* row 0's padding (cols 5..7) */
    CHECK(!support_outside_view_intact(&m), "a write into a row gap is detected");
    support_buffer_poison(&m.buffer);
    m.buffer.bytes[m.buffer.size - 1] ^= 1; /* the last byte of the trailing guard */
    CHECK(!support_outside_view_intact(&m), "a write into the guard is detected");
    support_matrix_destroy(&m);

    support_layout column_major = {true, 2, 0};
    CHECK(support_matrix_create(&m, CVF_F32, 3, 4, column_major) == 0, "column-major matrix");
    CHECK(m.view.row_stride == 1 && m.view.col_stride == 5, "column-major strides: got %lld/%lld",
          (long long)m.view.row_stride, (long long)m.view.col_stride);
    support_matrix_destroy(&m);

    double values[4] = {1.0, NAN, INFINITY, 2.0}, same[4] = {1.0, NAN, INFINITY, 2.0};
    cvf_vector want = cvf_vector_dense(values, CVF_F64, 4), got = cvf_vector_dense(same, CVF_F64, 4);
    CHECK(cvft_vector_rel_error(&got, &want) == 0.0, "NaN matching NaN and equal infinities count as no error");
    same[1] = 0.0;
    CHECK(isinf(cvft_vector_rel_error(&got, &want)), "a finite value where NaN is expected is an infinite error");
    same[1] = NAN;
    same[2] = -INFINITY;
    CHECK(isinf(cvft_vector_rel_error(&got, &want)), "opposite infinities are an infinite error");
    same[2] = INFINITY;
    same[3] = NAN;
    CHECK(isinf(cvft_vector_rel_error(&got, &want)), "NaN where a finite value is expected is an infinite error");
    same[3] = 2.0 * (1.0 + 1e-3);
    double err = cvft_vector_rel_error(&got, &want);
    CHECK(fabs(err - 2e-3 / sqrt(5.0)) < 1e-12, "relative Frobenius error: got %.17g", err);
}

/* ---- known answers ------------------------------------------------------------------------- */

/* Runs C = epilogue(A @ B) on ctx over small dense f32 arrays. */
static cvf_status small_matmul(cvf_context *ctx, float *a, float *b, float *c, int64_t m, int64_t n, int64_t k,
                               const cvf_epilogue *ep)
{
    cvf_matrix ma = cvf_matrix_row_major(a, CVF_F32, m, k);
    cvf_matrix mb = cvf_matrix_row_major(b, CVF_F32, k, n);
    cvf_matrix mc = cvf_matrix_row_major(c, CVF_F32, m, n);
    return cvf_matmul(ctx, &ma, &mb, &mc, ep);
}

/* Checks got against an expected value, relative to its magnitude. */
static void expect_near(const char *what, const char *device, double got, double want, double rel)
{
    CHECK(fabs(got - want) <= rel * fabs(want) || got == want, "%s on %s: got %.9g, expected %.9g", what, device, got,
          want);
}

/* Hand-computed answers on both devices: integer GEMM with bias, ReLU, aux_out and bias_grad;
 * GELU and its derivative at known points; K = 0. */
static void test_known_answers(const contexts *cx)
{
    cvf_context *devices[2] = {cx->reference, cx->cpu[1]};
    for (int d = 0; d < 2; d++) {
        const char *name = cvf_device_name(cvf_context_device(devices[d]));
        float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4], aux[4], bias[2] = {-20, 0}, grad[2];
        cvf_vector vb = cvf_vector_dense(bias, CVF_F32, 2), vg = cvf_vector_dense(grad, CVF_F32, 2);
        cvf_matrix mx = cvf_matrix_row_major(aux, CVF_F32, 2, 2);
        cvf_epilogue ep = {CVF_ACTIVATION_RELU, &vb, NULL, &mx, &vg};
        CHECK(small_matmul(devices[d], a, b, c, 2, 2, 2, &ep) == CVF_STATUS_SUCCESS, "2x2 relu on %s", name);
        const float want_c[4] = {0, 22, 23, 50}, want_aux[4] = {-1, 22, 23, 50}, want_grad[2] = {23, 72};
        CHECK(memcmp(c, want_c, sizeof c) == 0,
              "relu([[1,2],[3,4]] @ [[5,6],[7,8]] + [-20,0]) on %s: got [[%g,%g],[%g,%g]]", name, (double)c[0],
              (double)c[1], (double)c[2], (double)c[3]);
        CHECK(memcmp(aux, want_aux, sizeof aux) == 0, "aux_out on %s: got [[%g,%g],[%g,%g]]", name, (double)aux[0],
              (double)aux[1], (double)aux[2], (double)aux[3]);
        CHECK(memcmp(grad, want_grad, sizeof grad) == 0, "bias_grad on %s: got [%g,%g]", name, (double)grad[0],
              (double)grad[1]);

        float one = 1.0f, minus_two = -2.0f, two = 2.0f, one_and_half = 1.5f, y = 0.0f;
        cvf_epilogue gelu = {CVF_ACTIVATION_GELU_TANH, NULL, NULL, NULL, NULL};
        small_matmul(devices[d], &one, &one, &y, 1, 1, 1, &gelu);
        expect_near("gelu_tanh(1)", name, y, 0.8411919906082768, 1e-6);
        small_matmul(devices[d], &minus_two, &one, &y, 1, 1, 1, &gelu);
        expect_near("gelu_tanh(-2)", name, y, -0.04540230591222494, 1e-5);
        /* far in the negative tail, where 1 + tanh(u) is 0 in double but the value a normal fp32
         * number (values from mpmath at 80 digits, in the sigmoid form: 1 + tanh(u) cancels even
         * at 40; 5e-5: vec.h's bound there, 4 units of (1 + |2u|) fp32 epsilon with 2u ~ -87.3) */
        float minus_ten = -10.0f;
        small_matmul(devices[d], &minus_ten, &one, &y, 1, 1, 1, &gelu);
        expect_near("gelu_tanh(-10)", name, y, -1.2040923482098060e-37, 5e-5);
        float aux_in = 1.0f;
        cvf_matrix mi = cvf_matrix_row_major(&aux_in, CVF_F32, 1, 1);
        cvf_epilogue dgelu = {CVF_ACTIVATION_DGELU_TANH, NULL, &mi, NULL, NULL};
        small_matmul(devices[d], &two, &one_and_half, &y, 1, 1, 1, &dgelu);
        expect_near("3 * gelu_tanh'(1)", name, y, 3.0 * 1.0829640838457826, 1e-6);
        aux_in = -0.5f;
        small_matmul(devices[d], &two, &one_and_half, &y, 1, 1, 1, &dgelu);
        expect_near("3 * gelu_tanh'(-0.5)", name, y, 3.0 * 0.13263009646535764, 1e-6);
        aux_in = -9.0f;
        small_matmul(devices[d], &two, &one_and_half, &y, 1, 1, 1, &dgelu);
        expect_near("3 * gelu_tanh'(-9)", name, y, -7.5472058552022755e-27, 5e-5);

        /* the exact GELU (values from mpmath's ncdf / npdf at 30 digits) */
        float minus_six = -6.0f;
        cvf_epilogue gelu_erf = {CVF_ACTIVATION_GELU_ERF, NULL, NULL, NULL, NULL};
        small_matmul(devices[d], &one, &one, &y, 1, 1, 1, &gelu_erf);
        expect_near("gelu_erf(1)", name, y, 0.84134474606854295, 1e-6);
        small_matmul(devices[d], &minus_two, &one, &y, 1, 1, 1, &gelu_erf);
        expect_near("gelu_erf(-2)", name, y, -0.045500263896358414, 1e-6);
        small_matmul(devices[d], &minus_six, &one, &y, 1, 1, 1, &gelu_erf);
        expect_near("gelu_erf(-6)", name, y, -5.9195258702261888e-9, 1e-6);
        cvf_epilogue dgelu_erf = {CVF_ACTIVATION_DGELU_ERF, NULL, &mi, NULL, NULL};
        aux_in = 1.0f;
        small_matmul(devices[d], &two, &one_and_half, &y, 1, 1, 1, &dgelu_erf);
        expect_near("3 * gelu_erf'(1)", name, y, 3.2499464117630589, 1e-6);
        aux_in = -0.5f;
        small_matmul(devices[d], &two, &one_and_half, &y, 1, 1, 1, &dgelu_erf);
        expect_near("3 * gelu_erf'(-0.5)", name, y, 0.39751462603151147, 1e-6);

        float k0_bias[3] = {-1.0f, 2.0f, -0.0f}, k0_c[9], k0_grad[3];
        cvf_vector kb = cvf_vector_dense(k0_bias, CVF_F32, 3), kg = cvf_vector_dense(k0_grad, CVF_F32, 3);
        cvf_epilogue k0 = {CVF_ACTIVATION_RELU, &kb, NULL, NULL, &kg};
        CHECK(small_matmul(devices[d], NULL, NULL, k0_c, 3, 3, 0, &k0) == CVF_STATUS_SUCCESS, "K=0 on %s", name);
        bool rows_ok = true;
        for (int i = 0; i < 9; i++)
            rows_ok &= k0_c[i] == (i % 3 == 1 ? 2.0f : 0.0f);
        CHECK(rows_ok, "relu(0 + [-1, 2, -0]) with K=0 on %s: got row 0 = [%g, %g, %g]", name, (double)k0_c[0],
              (double)k0_c[1], (double)k0_c[2]);
        CHECK(k0_grad[0] == 0.0f && k0_grad[1] == 6.0f && k0_grad[2] == 0.0f,
              "bias_grad of K=0 relu on %s: got [%g, %g, %g], expected [0, 6, 0]", name, (double)k0_grad[0],
              (double)k0_grad[1], (double)k0_grad[2]);
    }
}

/* ---- subnormal inputs ---------------------------------------------------------------------- */

/* After a product, a GELU whose result is subnormal (gelu_tanh(-10.3), about -1e-40) in every tile
 * of a 1024 x 256 x 64 product on the 3-thread context: the kernels run under DAZ right before
 * each tile's epilogue, on the workers too, and an MXCSR left with DAZ there would read the
 * epilogue's subnormal exponential as zero and give -0. The expected value is x / (1 + exp(-2u))
 * in double, written out here so that the check does not rest on the reference device. */
static void check_gelu_tail_everywhere(const contexts *cx, size_t after_case)
{
    const int64_t m = 1024, n = 256, k = 64;
    float *a = calloc((size_t)(m * k), sizeof(float)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
        a[i * k] = -10.3f; /* row i of C is -10.3 x row 0 of B, the rest of A is zero */
    for (int64_t i = 0; i < k * n; i++)
        b[i] = i < n ? 1.0f : 0.5f;
    memset(c, 0xFF, sizeof(float) * (size_t)(m * n)); /* poison: NaN */
    cvf_epilogue gelu = {CVF_ACTIVATION_GELU_TANH, NULL, NULL, NULL, NULL};
    const double x = -10.3f, two_u = 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
    const double tail = x / (1.0 + exp(-two_u)); /* about -1.03e-40 */
    CHECK(small_matmul(cx->cpu[2], a, b, c, m, n, k, &gelu) == CVF_STATUS_SUCCESS, "GELU tail product after case %zu",
          after_case);
    int64_t bad = 0;
    for (int64_t i = 0; i < m * n; i++)
        bad += !(fabs((double)c[i] - tail) <= 1e-3 * fabs(tail));
    CHECK(bad == 0, "after subnormal case %zu: %lld of %lld values of gelu_tanh(-10.3) are not the subnormal %g "
          "(first %g)", after_case, (long long)bad, (long long)(m * n), tail, (double)c[0]);
    free(a), free(b), free(c);
}

/* The fp32 kernels read subnormal inputs (and subnormal partial sums) as zero where
 * cvf_cpu_kernels_daz says so (Intel, or CVF_CPU_DAZ=1: gemm.c, kernels_begin) and honour them
 * otherwise, and leave the caller's floating-point mode as it was. Row 0 of A holds only
 * subnormals (+-1e-39) against B values near 2^100, so its exact products are near 1e-9: zeros
 * with DAZ, those values without. The other rows are ordinary (near 1e31) and checked against the
 * reference. Every CPU path: direct (at most 128^3), dot tiles (few rows, B a transposed view),
 * several K passes, and above 128^3 one pass with the kernel's fused store (none, ReLU) or with
 * the tile epilogue (GELU). */
static void test_subnormal_inputs(const contexts *cx)
{
    static const struct {
        int64_t m, n, k;
        bool b_transposed;
        cvf_activation act;
    } cases[] = {
        {3, 5, 7, false, CVF_ACTIVATION_NONE},      {4, 64, 300, true, CVF_ACTIVATION_NONE},
        {40, 72, 1500, true, CVF_ACTIVATION_NONE},  {200, 96, 200, false, CVF_ACTIVATION_NONE},
        {200, 96, 200, false, CVF_ACTIVATION_RELU}, {200, 96, 200, false, CVF_ACTIVATION_GELU_TANH},
    };
    const bool daz = cvf_cpu_kernels_daz();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t m = cases[ci].m, n = cases[ci].n, k = cases[ci].k;
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
        float *want = malloc(sizeof(float) * (size_t)(m * n)), *c = malloc(sizeof(float) * (size_t)(m * n));
        for (int64_t i = 0; i < m * k; i++) /* row 0 zero first: the reference's A */
            a[i] = i < k ? 0.0f : (float)((i * 37 % 101) - 50) / 64.0f;
        for (int64_t i = 0; i < k * n; i++) /* near 2^100: (0.5 .. 1) 2^100 of both signs */
            b[i] = ldexpf((float)(64 + i * 13 % 64) / 128.0f, 100) * (i % 3 ? 1.0f : -1.0f);
        cvf_matrix ma = cvf_matrix_row_major(a, CVF_F32, m, k);
        cvf_matrix mb = cases[ci].b_transposed ? cvf_matrix_transpose(cvf_matrix_row_major(b, CVF_F32, n, k))
                                               : cvf_matrix_row_major(b, CVF_F32, k, n);
        cvf_matrix mc = cvf_matrix_row_major(c, CVF_F32, m, n), mw = cvf_matrix_row_major(want, CVF_F32, m, n);
        cvf_epilogue ep = {cases[ci].act, NULL, NULL, NULL, NULL};
        CHECK(cvf_matmul(cx->reference, &ma, &mb, &mw, &ep) == CVF_STATUS_SUCCESS, "reference, case %zu", ci);
        double *bound = malloc(sizeof(double) * (size_t)(m * n)); /* (k + 2) u sum |a b| + u |want| */
        const double u = support_unit_roundoff(CVF_F32);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double scale = 0.0;
                for (int64_t p = 0; p < k; p++)
                    scale += fabs((double)a[i * k + p] * (double)b[cases[ci].b_transposed ? j * k + p : p * n + j]);
                bound[i * n + j] = (double)(k + 2) * u * scale + u * fabs((double)want[i * n + j]);
            }
        for (int64_t i = 0; i < k; i++)
            a[i] = i % 2 ? 1e-39f : -1e-39f;
        for (int t = 0; t < 3; t++) {
            memset(c, 0xFF, sizeof(float) * (size_t)(m * n)); /* poison: NaN */
#if defined(__SSE2__)
            const unsigned int mode = _mm_getcsr() & ~0x3Fu; /* the mode, not the sticky flags */
#endif
            CHECK(cvf_matmul(cx->cpu[t], &ma, &mb, &mc, &ep) == CVF_STATUS_SUCCESS, "subnormal case %zu on %d threads",
                  ci, cpu_threads[t]);
#if defined(__SSE2__)
            CHECK((_mm_getcsr() & ~0x3Fu) == mode, "case %zu: the caller's MXCSR changed from %#x to %#x", ci, mode,
                  _mm_getcsr() & ~0x3Fu);
#endif
            bool row0_ok = true;
            for (int64_t j = 0; j < n; j++) {
                double exact = 0.0; /* the subnormals' own products, as a kernel honouring them sums */
                for (int64_t p = 0; p < k; p++)
                    exact += (double)a[p] * (double)b[cases[ci].b_transposed ? j * k + p : p * n + j];
                if (cases[ci].act == CVF_ACTIVATION_RELU && exact < 0.0)
                    exact = 0.0;
                if (cases[ci].act == CVF_ACTIVATION_GELU_TANH) /* near 1e-9: gelu(x) = x / 2 to 1e-9 */
                    exact *= 0.5;
                row0_ok &= daz ? c[j] == 0.0f : fabs((double)c[j] - exact) <= 1e-2 * fabs(exact) + 1e-30;
            }
            CHECK(row0_ok, "case %zu (%lldx%lldx%lld) on %d threads: a row of subnormal inputs was not %s", ci,
                  (long long)m, (long long)n, (long long)k, cpu_threads[t],
                  daz ? "read as zeros (cvf_cpu_kernels_daz)" : "honoured (its exact products near 1e-9)");
            int64_t bad = 0; /* rows 1..: within fp32's bound for a k-term sum of the reference (NaN fails) */
            for (int64_t i = n; i < m * n; i++)
                bad += !(fabs((double)c[i] - (double)want[i]) <= bound[i]);
            CHECK(bad == 0, "case %zu on %d threads: %lld values of rows 1.. off the reference beyond (k + 2) u "
                  "sum |a b|", ci, cpu_threads[t], (long long)bad);
        }
        free(a), free(b), free(want), free(c), free(bound);
        check_gelu_tail_everywhere(cx, ci);
    }
}

/* ---- matmul sections ----------------------------------------------------------------------- */

/* Every epilogue x dtype combination x layout at one shape with tails in every dimension. */
static void test_epilogue_cross_product(const contexts *cx)
{
    uint64_t seed = 1000;
    for (size_t d = 0; d < ARRAY_SIZE(combos); d++)
        for (int e = 0; e < EPILOGUE_COUNT; e++)
            for (size_t l = 0; l < ARRAY_SIZE(layouts); l++) {
                support_matmul_case c =
                    support_make_matmul_case(19, 37, 45, &combos[d], epilogue_index(e), layouts[l], seed++);
                run_matmul_case(cx, &c, CPU_DEFAULT_VARIANTS);
            }
}

/* Sizes around the CPU backend's tiles (multiples of 8/16/64): primes, powers of two, +-1. */
static const int64_t sweep_sizes[] = {1, 2, 3, 7, 17, 31, 63, 64, 65, 127, 128, 129, 255, 257};
#define SWEEP_COUNT ((int)ARRAY_SIZE(sweep_sizes))

/* Every (M, N) pair of the sweep sizes, K rotating through them too; dtypes, epilogues and
 * layouts rotate with co-prime periods so that each meets many shapes. */
static void test_shape_sweep(const contexts *cx)
{
    uint64_t seed = 5000;
    for (int i = 0; i < SWEEP_COUNT; i++)
        for (int j = 0; j < SWEEP_COUNT; j++) {
            int index = i * SWEEP_COUNT + j;
            int64_t k = sweep_sizes[(3 * i + 5 * j + 1) % SWEEP_COUNT];
            if (sweep_sizes[i] * sweep_sizes[j] * k > 128 * 128 * 129) /* keep the sanitizer run short */
                k = sweep_sizes[(i + j) % 6];
            const support_dtype_combo *d = &combos[index % ARRAY_SIZE(combos)];
            int epilogue = epilogue_index((index * 7 + 3) % EPILOGUE_COUNT);
            unsigned layout = layouts[(index * 3 + index / 8) % ARRAY_SIZE(layouts)];
            support_matmul_case c = support_make_matmul_case(sweep_sizes[i], sweep_sizes[j], k, d, epilogue, layout, seed++);
            run_matmul_case(cx, &c, CPU_DEFAULT_VARIANTS);
        }
}

/* K = 0 (zero product, the epilogue still applies: relu(bias), gelu(bias), bias sums), M = 0
 * (empty result; bias_grad must be written as zeros), N = 0, and all of them at once, for every
 * epilogue and the three homogeneous dtypes. */
static void test_degenerate_shapes(const contexts *cx)
{
    static const int64_t shapes[][3] = {{5, 9, 0}, {0, 9, 7}, {6, 0, 7}, {0, 0, 0}, {0, 9, 0}, {1, 1, 0}};
    uint64_t seed = 9000;
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (int d = 0; d < HOMOGENEOUS_COMBOS; d++)
            for (int e = 0; e < EPILOGUE_COUNT; e++) {
                unsigned layout = layouts[(size_t)(e + d) % ARRAY_SIZE(layouts)];
                support_matmul_case c = support_make_matmul_case(shapes[s][0], shapes[s][1], shapes[s][2], &combos[d],
                                                                 epilogue_index(e), layout, seed++);
                run_matmul_case(cx, &c, CPU_DEFAULT_VARIANTS);
            }
}

/* An M = 0 product with NULL data pointers (allowed for empty views): bias_grad is still zeros. */
static void test_empty_with_null_data(const contexts *cx)
{
    float grad[4] = {7, 7, 7, 7};
    cvf_matrix a = cvf_matrix_row_major(NULL, CVF_F32, 0, 3);
    float b[12] = {0};
    cvf_matrix mb = cvf_matrix_row_major(b, CVF_F32, 3, 4);
    cvf_matrix c = cvf_matrix_row_major(NULL, CVF_F32, 0, 4);
    cvf_vector g = cvf_vector_dense(grad, CVF_F32, 4);
    cvf_epilogue ep = {CVF_ACTIVATION_RELU, NULL, NULL, NULL, &g};
    for (int t = 0; t < CPU_DEFAULT_VARIANTS; t++) {
        cvf_status status = cvf_matmul(cx->cpu[t], &a, &mb, &c, &ep);
        CHECK(status == CVF_STATUS_SUCCESS, "M=0 with NULL data, threads=%d: %s: %s", (int)cpu_threads[t],
              cvf_status_string(status), cvf_context_last_error(cx->cpu[t]));
        CHECK(grad[0] == 0 && grad[1] == 0 && grad[2] == 0 && grad[3] == 0,
              "M=0 with NULL data, threads=%d: bias_grad = [%g, %g, %g, %g], expected zeros", (int)cpu_threads[t],
              (double)grad[0], (double)grad[1], (double)grad[2], (double)grad[3]);
        grad[0] = grad[1] = grad[2] = grad[3] = 7;
    }
}

/* A few large shapes: several threads, several cache blocks, long K. */
static void test_large_shapes(const contexts *cx)
{
    static const struct {
        int64_t m, n, k;
        int combo, epilogue;
        unsigned layout;
    } cases[] = {
        {300, 200, 500, 1, 2 | 4 | 8 | 16, 0},                                       /* f16 gelu, all extras */
        {300, 200, 500, 0, 0, SUPPORT_A_TRANSPOSED},                                 /* f32 plain */
        {257, 255, 300, 2, 1 | 16, SUPPORT_B_TRANSPOSED | SUPPORT_C_COLUMN_MAJOR},   /* bf16 relu, grads */
        {130, 1, 1000, 3, 3 | 4 | 16, SUPPORT_C_PADDED | SUPPORT_VECTORS_STRIDED},   /* N = 1, dgelu */
        {1, 300, 700, 4, 1 | 4, SUPPORT_INPUTS_PADDED},                              /* M = 1 */
        {200, 129, 257, 5, 2 | 4 | 16, SUPPORT_A_TRANSPOSED | SUPPORT_B_TRANSPOSED}, /* mixed, gelu */
        {300, 200, 500, 0, SUPPORT_EPILOGUE_ERF | 2 | 4 | 8 | 16, SUPPORT_C_PADDED}, /* f32 gelu_erf, all extras */
        {257, 130, 300, 2, SUPPORT_EPILOGUE_ERF | 3 | 4 | 16, SUPPORT_B_TRANSPOSED}, /* bf16 dgelu_erf */
        {131, 255, 129, 3, SUPPORT_EPILOGUE_ERF | 3 | 8, SUPPORT_C_COLUMN_MAJOR},    /* f16 -> f32 dgelu_erf */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        support_matmul_case c = support_make_matmul_case(cases[i].m, cases[i].n, cases[i].k, &combos[cases[i].combo],
                                          cases[i].epilogue, cases[i].layout, 20000 + i);
        run_matmul_case(cx, &c, CPU_ALL_VARIANTS);
    }
    /* once more through the one-shot helper on a default context (NULL options: every core) */
    cvf_context *all_cores = NULL;
    if (CHECK(cvf_context_create(NULL, &all_cores) == CVF_STATUS_SUCCESS, "default CPU context")) {
        support_matmul_case c = support_make_matmul_case(250, 130, 300, &combos[1], 2 | 4 | 8 | 16, SUPPORT_C_PADDED, 20100);
        CHECK(cvf_context_device(all_cores) == CVF_DEVICE_CPU, "a NULL-options context is not on the CPU");
        support_matmul_compare(&c, all_cores, cx->reference);
    }
    cvf_context_destroy(all_cores);
}

/* A few tokens through a weight, transposed (the CPU's dot tiles, <= 32 rows, run by the kernel in
 * groups of 16) or row-major (its row tiles, in groups of 6; K blocks past 6 rows; its stream
 * tiles for 1-4 rows, K slices x 1024-column chunks, also past one chunk); a 16-bit B
 * converted as it is loaded, a 16-bit A copied converted: every row
 * count up to 17, around the second group's end and one past the path's, K long enough for several
 * K blocks, and A's rows 2 KB and 4 KB apart (K = 512, 1024: the tiles read a copy of A with its
 * rows moved apart) as well as padded (read in place); f32 and the other dtype combinations in
 * turn, every epilogue in turn, on every thread count. */
static void test_token_rows(const contexts *cx)
{
    static const int64_t ks[] = {512, 1024, 700};
    static const int64_t ns[] = {37, 64};
    static const int64_t more_rows[] = {23, 31, 32, 33};
    uint64_t seed = 21000;
    int e = 0;
    for (int64_t r = 0; r < 17 + (int64_t)ARRAY_SIZE(more_rows); r++)
        for (size_t k = 0; k < ARRAY_SIZE(ks); k++)
            for (size_t n = 0; n < ARRAY_SIZE(ns); n++) {
                int64_t m = r < 17 ? r + 1 : more_rows[r - 17];
                unsigned padded = (m + (int64_t)k) % 4 == 0 ? SUPPORT_INPUTS_PADDED : 0;
                /* f32, and one of the other dtype combinations in turn: the six (k, n) pairs of a row
                 * count meet all five (the suite runs under the sanitizers too, so not all six each) */
                const size_t others = ARRAY_SIZE(combos) - 1;
                const size_t pick[2] = {0, 1 + (size_t)(r * 6 + (int64_t)(k * 2 + n)) % others};
                for (int d = 0; d < 2; d++) {
                    /* B transposed (the dot tiles) or row-major (the row tiles): each dtype pick
                     * meets both over a row count's six (k, n) pairs */
                    unsigned layout = padded | ((d + (int64_t)(k * 2 + n)) % 2 == 0 ? SUPPORT_B_TRANSPOSED : 0);
                    support_matmul_case c = support_make_matmul_case(
                        m, ns[n], ks[k], &combos[pick[d]], epilogue_index(e++ % EPILOGUE_COUNT), layout, seed++);
                    run_matmul_case(cx, &c, CPU_ALL_VARIANTS);
                }
            }
    /* one to four rows through a row-major B wider than the stream tiles' 1024-column chunks,
     * K from one row to several slices (and not a multiple of their 4-row steps); 1025 x 2000 is
     * cut into 2 chunks on 1 and 2 threads and 3 on 3 (8 slices: 24 tasks fill 3 threads' rounds),
     * and the sums must not change */
    static const int64_t wide[][2] = {{1025, 1}, {1031, 130}, {2049, 259}, {1025, 2000}};
    for (int64_t m = 1; m <= 4; m++)
        for (size_t w = 0; w < ARRAY_SIZE(wide); w++) {
            size_t pick = (size_t)(m * 3 + (int64_t)w) % ARRAY_SIZE(combos);
            support_matmul_case c = support_make_matmul_case(m, wide[w][0], wide[w][1], &combos[pick],
                                                             epilogue_index(e++ % EPILOGUE_COUNT), 0, seed++);
            run_matmul_case(cx, &c, CPU_ALL_VARIANTS);
        }
}

/* cvf_matmul_relu (the seed's fp16 workload, and the other dtypes) over tail shapes and layouts. */
static void test_matmul_relu(const contexts *cx)
{
    static const int64_t shapes[][3] = {{1, 1, 1},    {7, 17, 31},  {64, 64, 64}, {65, 63, 129},
                                        {127, 31, 2}, {33, 257, 3}, {3, 5, 0},    {100, 70, 90}};
    uint64_t seed = 30000;
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (size_t l = 0; l < ARRAY_SIZE(layouts); l++) {
            int d = (l % 4 == 3) ? (int)(s % HOMOGENEOUS_COMBOS) : 1; /* mostly f16 */
            support_matmul_case c = support_make_matmul_case(shapes[s][0], shapes[s][1], shapes[s][2], &combos[d], CVF_ACTIVATION_RELU,
                                              layouts[l], seed++);
            c.op = SUPPORT_OP_MATMUL_RELU;
            run_matmul_case(cx, &c, CPU_DEFAULT_VARIANTS);
        }
}

/* ---- column sums --------------------------------------------------------------------------- */

/* A cvf_column_sum case. */
typedef struct column_sum_case {
    int64_t rows, cols;
    cvf_dtype in, out;
    support_layout layout;
    int64_t out_stride;
    uint64_t seed;
} column_sum_case;

/* Writes a description of a column-sum case into buf. */
static void describe_column_sum(const column_sum_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "column_sum rows=%lld cols=%lld x=%s%s pad=%lld shift=%lld out=%s stride=%lld seed=%llu",
             (long long)c->rows, (long long)c->cols, cvf_dtype_name(c->in), c->layout.column_major ? " col-major" : "",
             (long long)c->layout.pad, (long long)c->layout.shift, cvf_dtype_name(c->out), (long long)c->out_stride,
             (unsigned long long)c->seed);
}

/* Runs one column-sum case on the CPU contexts against the reference; the sums must be
 * bit-identical across thread counts and a repeated run. */
static void run_column_sum_case(const contexts *cx, const column_sum_case *c)
{
    char label[256];
    describe_column_sum(c, label, sizeof label);
    support_matrix x;
    support_vector out;
    cvf_matrix x64 = {0};
    cvf_vector want = {0};
    int rc = support_matrix_create(&x, c->in, c->rows, c->cols, c->layout);
    rc |= support_vector_create(&out, c->out, c->cols, c->out_stride, c->out_stride > 1);
    cvft_rng rng = cvft_rng_make(c->seed);
    if (rc == 0) {
        support_matrix_fill(&x, &rng, -1.0, 1.0);
        rc = cvft_matrix_to_f64(&x.view, &x64) | cvft_vector_alloc(CVF_F64, c->cols, &want) |
             support_buffer_save(&x.buffer);
    }
    if (CHECK(rc == 0, "%s: out of memory", label)) {
        cvf_status status = cvf_column_sum(cx->reference, &x64, &want);
        CHECK(status == CVF_STATUS_SUCCESS, "%s: reference returned %s", label, cvf_status_string(status));
        for (int t = 0; t <= CPU_DEFAULT_VARIANTS; t++) { /* the last pass repeats threads=2 */
            int variant = t < CPU_DEFAULT_VARIANTS ? t : CPU_DEFAULT_VARIANTS - 1;
            char run[300];
            snprintf(run, sizeof run, "%s [cpu threads=%d%s]", label, (int)cpu_threads[variant],
                     t == CPU_DEFAULT_VARIANTS ? ", repeated" : "");
            support_buffer_poison(&out.buffer);
            status = cvf_column_sum(cx->cpu[variant], &x.view, &out.view);
            if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: returned %s: %s", run, cvf_status_string(status),
                       cvf_context_last_error(cx->cpu[variant])))
                continue;
            support_check_vector_output(run, "out", &out, &want);
            CHECK(support_buffer_unchanged(&x.buffer), "%s: input x was modified", run);
            if (t == 0)
                support_buffer_save(&out.buffer);
            else
                CHECK(support_buffer_unchanged(&out.buffer), "%s: sums differ in their bits from threads=1", run);
        }
    }
    free(x64.data);
    free(want.data);
    support_matrix_destroy(&x);
    support_vector_destroy(&out);
}

/* cvf_column_sum over dtypes, shapes (rows 0 included) and layouts. */
static void test_column_sum(const contexts *cx)
{
    /* rows past 256 are summed in parts (reduce.c): 257, 300 and 1000 rows take two, two and four */
    static const int64_t shapes[][2] = {{1, 1}, {7, 3},     {64, 65}, {257, 31},   {0, 5},
                                        {5, 0}, {300, 129}, {2, 257}, {1000, 513}, {512, 0}};
    static const cvf_dtype outs[] = {CVF_F32, CVF_F16, CVF_BF16};
    uint64_t seed = 40000;
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (int d = 0; d < HOMOGENEOUS_COMBOS; d++)
            for (int l = 0; l < 3; l++) {
                support_layout layout = {l == 1, l == 2 ? 3 : 0, l == 2 ? 1 : 0};
                column_sum_case c = {.rows = shapes[s][0],
                                     .cols = shapes[s][1],
                                     .in = combos[d].a,
                                     .out = outs[(s + (size_t)d + (size_t)l) % 3],
                                     .layout = layout,
                                     .out_stride = l == 0 ? 1 : l + 1,
                                     .seed = seed++};
                run_column_sum_case(cx, &c);
            }
}

/* ---- NaN and Inf --------------------------------------------------------------------------- */

/* Sets up a case, lets inject modify its inputs, computes the reference and checks the CPU runs.
 * Returns the fixture (caller tears it down and frees it) or NULL. */
static support_matmul_fixture *special_case(const contexts *cx, const support_matmul_case *c,
                                            void (*inject)(support_matmul_fixture *))
{
    support_matmul_fixture *f = malloc(sizeof *f);
    if (!CHECK(f != NULL && support_matmul_create(f, c) == CVF_STATUS_SUCCESS, "out of memory")) {
        free(f);
        return NULL;
    }
    inject(f);
    cvf_status status = support_matmul_reference(f, cx->reference);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: reference returned %s", f->label, cvf_status_string(status))) {
        support_matmul_teardown(f);
        free(f);
        return NULL;
    }
    return f;
}

/* Puts a NaN into A[2][3]. */
static void inject_nan_in_a(support_matmul_fixture *f)
{
    cvft_matrix_set(&f->a.view, 2, 3, NAN);
}

/* Puts a NaN into B[4][5]. */
static void inject_nan_in_b(support_matmul_fixture *f)
{
    cvft_matrix_set(&f->b.view, 4, 5, NAN);
}

/* Puts a NaN into bias[6]. */
static void inject_nan_in_bias(support_matmul_fixture *f)
{
    cvft_vector_set(&f->bias.view, 6, NAN);
}

/* Puts +Inf into A[1][0] and -Inf into A[3][2]. */
static void inject_inf_in_a(support_matmul_fixture *f)
{
    cvft_matrix_set(&f->a.view, 1, 0, INFINITY);
    cvft_matrix_set(&f->a.view, 3, 2, -INFINITY);
}

/* Counts the NaN elements of row i (or, when column is set, of column i) of m. */
static int64_t count_nan_line(const cvf_matrix *m, int64_t i, bool column)
{
    int64_t count = 0, length = column ? m->rows : m->cols;
    for (int64_t j = 0; j < length; j++)
        count += isnan(column ? cvft_matrix_get(m, j, i) : cvft_matrix_get(m, i, j)) ? 1 : 0;
    return count;
}

/* Counts the NaN elements of m. */
static int64_t count_nan(const cvf_matrix *m)
{
    int64_t count = 0;
    for (int64_t i = 0; i < m->rows; i++)
        count += count_nan_line(m, i, false);
    return count;
}

/* Runs a NaN case on each CPU context and checks that exactly the expected line (row or column
 * line of C) is NaN, plus the usual comparison with the reference (NaN matches NaN). */
static void run_nan_case(const contexts *cx, const support_matmul_case *c, void (*inject)(support_matmul_fixture *),
                         int64_t line, bool column)
{
    support_matmul_fixture *f = special_case(cx, c, inject);
    if (!f)
        return;
    int64_t line_length = column ? c->m : c->n;
    for (int t = 0; t < CPU_DEFAULT_VARIANTS; t++) {
        char run[64];
        snprintf(run, sizeof run, "cpu threads=%d", (int)cpu_threads[t]);
        if (!run_and_check(f, cx->cpu[t], run, t == 0))
            continue;
        int64_t in_line = count_nan_line(&f->c.view, line, column), total = count_nan(&f->c.view);
        CHECK(in_line == line_length && total == line_length,
              "%s [%s]: expected NaN in all %lld elements of %s %lld and nowhere else; got %lld there, %lld in all",
              f->label, run, (long long)line_length, column ? "column" : "row", (long long)line, (long long)in_line,
              (long long)total);
        if (c->bias_grad)
            CHECK(column == (isnan(cvft_vector_get(&f->bias_grad.view, line)) != 0),
                  "%s [%s]: bias_grad[%lld] NaN-ness", f->label, run, (long long)line);
    }
    support_matmul_teardown(f);
    free(f);
}

/* NaN propagates (ReLU(NaN) = NaN, as PyTorch) through the product, the bias and the GELU
 * epilogues; infinities give the reference's infinities and NaNs and do not crash. */
static void test_nan_inf(const contexts *cx)
{
    for (int d = 0; d < HOMOGENEOUS_COMBOS; d++) {
        support_matmul_case c = support_make_matmul_case(6, 70, 9, &combos[d], CVF_ACTIVATION_RELU, 0, 50000 + (uint64_t)d);
        c.op = SUPPORT_OP_MATMUL_RELU;
        run_nan_case(cx, &c, inject_nan_in_a, 2, false);
        c.op = SUPPORT_OP_MATMUL;
        c.layout = SUPPORT_A_TRANSPOSED | SUPPORT_C_COLUMN_MAJOR;
        run_nan_case(cx, &c, inject_nan_in_a, 2, false);

        support_matmul_case g = support_make_matmul_case(33, 9, 17, &combos[d], 2 | 4 | 16, SUPPORT_B_TRANSPOSED, 50100 + (uint64_t)d);
        run_nan_case(cx, &g, inject_nan_in_b, 5, true);
        support_matmul_case r = support_make_matmul_case(20, 11, 5, &combos[d], 1 | 4 | 8 | 16, 0, 50200 + (uint64_t)d);
        run_nan_case(cx, &r, inject_nan_in_bias, 6, true);
        support_matmul_case z = support_make_matmul_case(20, 11, 0, &combos[d], 1 | 4 | 16, 0, 50300 + (uint64_t)d);
        run_nan_case(cx, &z, inject_nan_in_bias, 6, true); /* K = 0: relu(NaN bias) */
        support_matmul_case ge = support_make_matmul_case(33, 9, 17, &combos[d], SUPPORT_EPILOGUE_ERF | 2 | 4 | 16,
                                                          SUPPORT_B_TRANSPOSED, 50500 + (uint64_t)d);
        run_nan_case(cx, &ge, inject_nan_in_b, 5, true);
        support_matmul_case de = support_make_matmul_case(20, 11, 5, &combos[d], SUPPORT_EPILOGUE_ERF | 3 | 4 | 8 | 16,
                                                          SUPPORT_C_COLUMN_MAJOR, 50600 + (uint64_t)d);
        run_nan_case(cx, &de, inject_nan_in_bias, 6, true);
        support_matmul_case gr = support_make_matmul_case(33, 9, 17, &combos[d], SUPPORT_EPILOGUE_ERF | 2 | 4 | 8,
                                                          SUPPORT_A_TRANSPOSED, 50700 + (uint64_t)d);
        run_nan_case(cx, &gr, inject_nan_in_a, 2, false);

        /* infinities: with ReLU compared against the reference; with GELU only "no crash" */
        support_matmul_case inf = support_make_matmul_case(5, 67, 4, &combos[d], 1, 0, 50400 + (uint64_t)d);
        support_matmul_fixture *f = special_case(cx, &inf, inject_inf_in_a);
        if (f) {
            for (int t = 0; t < CPU_DEFAULT_VARIANTS; t++)
                run_and_check(f, cx->cpu[t], t ? "cpu threads=2" : "cpu threads=1", t == 0);
            static const cvf_activation gelus[2] = {CVF_ACTIVATION_GELU_TANH, CVF_ACTIVATION_GELU_ERF};
            for (int v = 0; v < 2; v++) {
                f->spec.activation = gelus[v];
                cvf_status status = support_matmul_run(f, cx->cpu[1]);
                const char *act = cvf_activation_name(gelus[v]);
                CHECK(status == CVF_STATUS_SUCCESS, "%s with %s and infinities: %s", f->label, act,
                      cvf_status_string(status));
                CHECK(support_count_poisoned_in_view(&f->c) == 0 && support_outside_view_intact(&f->c),
                      "%s with %s and infinities: C not fully written or written outside", f->label, act);
            }
            support_matmul_teardown(f);
            free(f);
        }
    }
}

/* ---- GELU tails ---------------------------------------------------------------------------- */

/* Sets A[i][0] = -3 - i/4 and B[0][j] = 1 + j/80: pre-activations from -3 down to about -5.3,
 * where gelu_tanh(x) = 0.5 x (1 + tanh(u)) is tiny and 1 + tanh(u) cancels in fp32. */
static void inject_gelu_tail(support_matmul_fixture *f)
{
    for (int64_t i = 0; i < f->a.view.rows; i++)
        cvft_matrix_set(&f->a.view, i, 0, -3.0 - (double)i / 4.0);
    for (int64_t j = 0; j < f->b.view.cols; j++)
        cvft_matrix_set(&f->b.view, 0, j, 1.0 + (double)j / 80.0);
}

/* Sets aux_in to values spread over [-5, -3): gelu_tanh'(x) is small there and its fp32
 * evaluation through 1 + tanh(u) cancels. */
static void inject_dgelu_tail(support_matmul_fixture *f)
{
    const cvf_matrix *aux = &f->aux_in.view;
    for (int64_t i = 0; i < aux->rows; i++)
        for (int64_t j = 0; j < aux->cols; j++)
            cvft_matrix_set(aux, i, j, -3.0 - 2.0 * (double)(i * aux->cols + j) / (double)(aux->rows * aux->cols));
}

/* Sets A[i][0] = -3 - i and B[0][j] = 1 + j/80 (k = 1 in the f32 case: exact products):
 * pre-activations from -3 down to about -14.7, where gelu_erf(x) = x Phi(x) falls from 4e-3 to
 * 1e-47, through the fp32 subnormals to 0: Phi must be computed without 1 + erf(x / sqrt 2). */
static void inject_gelu_erf_tail(support_matmul_fixture *f)
{
    for (int64_t i = 0; i < f->a.view.rows; i++)
        cvft_matrix_set(&f->a.view, i, 0, -3.0 - (double)i);
    for (int64_t j = 0; j < f->b.view.cols; j++)
        cvft_matrix_set(&f->b.view, 0, j, 1.0 + (double)j / 80.0);
}

/* Sets aux_in to values spread over [-12, -3): gelu_erf'(x) = Phi(x) + x phi(x) is tiny there. */
static void inject_dgelu_erf_tail(support_matmul_fixture *f)
{
    const cvf_matrix *aux = &f->aux_in.view;
    for (int64_t i = 0; i < aux->rows; i++)
        for (int64_t j = 0; j < aux->cols; j++)
            cvft_matrix_set(aux, i, j, -3.0 - 9.0 * (double)(i * aux->cols + j) / (double)(aux->rows * aux->cols));
}

/* Runs a case whose inputs inject prepares on the default CPU contexts with the usual checks. */
static void run_injected_case(const contexts *cx, const support_matmul_case *c,
                              void (*inject)(support_matmul_fixture *))
{
    support_matmul_fixture *f = special_case(cx, c, inject);
    if (!f)
        return;
    for (int t = 0; t < CPU_DEFAULT_VARIANTS; t++)
        run_and_check(f, cx->cpu[t], t ? "cpu threads=2" : "cpu threads=1", t == 0);
    support_matmul_teardown(f);
    free(f);
}

/* GELU and its derivative where the values are small but not negligible (x in [-5.3, -3]): the
 * f32 tolerance is relative, so the epilogue must evaluate 1 + tanh(u) without cancellation
 * (e.g. as 2 / (1 + exp(-2u))), not only where the values are large. */
static void test_gelu_tails(const contexts *cx)
{
    for (int d = 0; d < HOMOGENEOUS_COMBOS; d++) {
        support_matmul_case g = support_make_matmul_case(8, 40, 1, &combos[d], CVF_ACTIVATION_GELU_TANH, 0, 55000 + (uint64_t)d);
        run_injected_case(cx, &g, inject_gelu_tail);
        support_matmul_case dg =
            support_make_matmul_case(8, 40, 3, &combos[d], CVF_ACTIVATION_DGELU_TANH | 16, 0, 55100 + (uint64_t)d);
        run_injected_case(cx, &dg, inject_dgelu_tail);
        support_matmul_case ge =
            support_make_matmul_case(12, 40, 1, &combos[d], SUPPORT_EPILOGUE_ERF | 2, 0, 55200 + (uint64_t)d);
        run_injected_case(cx, &ge, inject_gelu_erf_tail);
        support_matmul_case de =
            support_make_matmul_case(8, 40, 3, &combos[d], SUPPORT_EPILOGUE_ERF | 3 | 16, 0, 55300 + (uint64_t)d);
        run_injected_case(cx, &de, inject_dgelu_erf_tail);
    }
}

/* ---- MLP ----------------------------------------------------------------------------------- */

/* The dimensions an MLP tensor's shape is made of. */
typedef enum mlp_dim { DIM_S = 0, DIM_H = 1, DIM_I = 2 } mlp_dim;

/* One named tensor of an MLP call. */
typedef struct tensor_spec {
    const char *name;
    mlp_dim rows; /* a vector's length */
    mlp_dim cols;
    bool is_vector;
    bool is_output;
    support_layout strided; /* layout in the strided variant (vectors: pad is the stride) */
} tensor_spec;

/* A tensor's buffers: the guarded view, and its float64 twin (the input copy for the
 * reference device, or the reference's answer for an output). */
typedef struct tensor {
    support_matrix m;
    support_vector v;
    cvf_matrix m64;
    cvf_vector v64;
} tensor;

#define MLP_MAX_TENSORS 11

/* An MLP call under test: its tensors and how they are laid out. */
typedef struct mlp_fixture {
    const tensor_spec *specs;
    int count;
    cvf_gelu gelu; /* the GELU the calls ask for */
    tensor t[MLP_MAX_TENSORS];
    char label[160];
} mlp_fixture;

enum { FW_X, FW_W1, FW_B1, FW_W2, FW_B2, FW_FC1, FW_GELU, FW_Y, FW_COUNT };
static const tensor_spec forward_specs[FW_COUNT] = {
    {"hidden_state", DIM_S, DIM_H, false, false, {false, 3, 1}},
    {"fc1_weight", DIM_I, DIM_H, false, false, {true, 0, 0}},
    {"fc1_bias", DIM_I, DIM_I, true, false, {false, 2, 1}},
    {"fc2_weight", DIM_H, DIM_I, false, false, {false, 5, 1}},
    {"fc2_bias", DIM_H, DIM_H, true, false, {false, 3, 0}},
    {"fc1_output", DIM_S, DIM_I, false, true, {true, 1, 1}},
    {"gelu_output", DIM_S, DIM_I, false, true, {false, 5, 1}},
    {"output", DIM_S, DIM_H, false, true, {true, 2, 0}},
};

enum { BW_GO, BW_X, BW_W1, BW_W2, BW_FC1, BW_GELU, BW_GX, BW_GW1, BW_GB1, BW_GW2, BW_GB2, BW_COUNT };
static const tensor_spec backward_specs[BW_COUNT] = {
    {"grad_output", DIM_S, DIM_H, false, false, {true, 1, 1}},
    {"hidden_state", DIM_S, DIM_H, false, false, {false, 3, 1}},
    {"fc1_weight", DIM_I, DIM_H, false, false, {true, 0, 0}},
    {"fc2_weight", DIM_H, DIM_I, false, false, {false, 7, 1}},
    {"fc1_output", DIM_S, DIM_I, false, false, {false, 1, 1}},
    {"gelu_output", DIM_S, DIM_I, false, false, {true, 3, 0}},
    {"grad_hidden_state", DIM_S, DIM_H, false, true, {true, 2, 1}},
    {"grad_fc1_weight", DIM_I, DIM_H, false, true, {false, 4, 1}},
    {"grad_fc1_bias", DIM_I, DIM_I, true, true, {false, 2, 1}},
    {"grad_fc2_weight", DIM_H, DIM_I, false, true, {true, 0, 1}},
    {"grad_fc2_bias", DIM_H, DIM_H, true, true, {false, 3, 1}},
};

/* An MLP case. */
typedef struct mlp_case {
    int64_t s, h, i;
    cvf_dtype dtype;
    bool strided;
    uint64_t seed;
    cvf_gelu gelu; /* CVF_GELU_TANH (0) or CVF_GELU_ERF */
} mlp_case;

/* gelu_tanh in float64, to build consistent backward inputs: x / (1 + exp(-2u)), the form of
 * 0.5 x (1 + tanh u) that keeps the negative tail. */
static double gelu_tanh(double x)
{
    return x / (1.0 + exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* gelu_erf = x Phi(x) in float64, likewise. */
static double gelu_erf(double x)
{
    return 0.5 * x * erfc(-x * 0.70710678118654752);
}

/* Frees everything an MLP fixture holds. */
static void mlp_teardown(mlp_fixture *f)
{
    for (int n = 0; n < f->count; n++) {
        support_matrix_destroy(&f->t[n].m);
        support_vector_destroy(&f->t[n].v);
        free(f->t[n].m64.data);
        free(f->t[n].v64.data);
    }
}

/* Allocates the tensors of an MLP case (inputs not yet filled, outputs poisoned, f64 twins
 * allocated for outputs). Returns 0 or -1. */
static int mlp_create(mlp_fixture *f, const mlp_case *c, const tensor_spec *specs, int count, const char *op)
{
    const int64_t dims[3] = {c->s, c->h, c->i};
    memset(f, 0, sizeof *f);
    f->specs = specs;
    f->count = count;
    f->gelu = c->gelu;
    snprintf(f->label, sizeof f->label, "%s S=%lld H=%lld I=%lld %s %s gelu=%s seed=%llu", op, (long long)c->s,
             (long long)c->h, (long long)c->i, cvf_dtype_name(c->dtype), c->strided ? "strided" : "dense",
             c->gelu == CVF_GELU_ERF ? "erf" : "tanh", (unsigned long long)c->seed);
    int rc = 0;
    for (int n = 0; n < count; n++) {
        const tensor_spec *s = &specs[n];
        tensor *t = &f->t[n];
        support_layout dense = {false, 0, 0};
        support_layout layout = c->strided ? s->strided : dense;
        if (s->is_vector) {
            rc |= support_vector_create(&t->v, c->dtype, dims[s->rows], c->strided ? s->strided.pad : 1, layout.shift);
            if (s->is_output)
                rc |= cvft_vector_alloc(CVF_F64, dims[s->rows], &t->v64);
        } else {
            rc |= support_matrix_create(&t->m, c->dtype, dims[s->rows], dims[s->cols], layout);
            if (s->is_output)
                rc |= cvft_matrix_alloc(CVF_F64, dims[s->rows], dims[s->cols], &t->m64);
        }
    }
    return rc;
}

/* Fills every input with uniform values in [-1, 1) (a caller may then overwrite some before
 * mlp_snapshot_inputs). */
static void mlp_fill_inputs(mlp_fixture *f, cvft_rng *rng)
{
    for (int n = 0; n < f->count; n++) {
        if (f->specs[n].is_output)
            continue;
        if (f->specs[n].is_vector)
            support_vector_fill(&f->t[n].v, rng, -1.0, 1.0);
        else
            support_matrix_fill(&f->t[n].m, rng, -1.0, 1.0);
    }
}

/* Makes the f64 copies of the inputs for the reference device and saves the input buffers. */
static int mlp_snapshot_inputs(mlp_fixture *f)
{
    int rc = 0;
    for (int n = 0; n < f->count; n++) {
        tensor *t = &f->t[n];
        if (f->specs[n].is_output)
            continue;
        if (f->specs[n].is_vector)
            rc |= cvft_vector_to_f64(&t->v.view, &t->v64) | support_buffer_save(&t->v.buffer);
        else
            rc |= cvft_matrix_to_f64(&t->m.view, &t->m64) | support_buffer_save(&t->m.buffer);
    }
    return rc;
}

/* Returns tensor n's view (f64: its float64 twin). */
static cvf_matrix mlp_matrix(const mlp_fixture *f, int n, bool f64)
{
    return f64 ? f->t[n].m64 : f->t[n].m.view;
}

/* Returns vector tensor n's view (f64: its float64 twin). */
static cvf_vector mlp_vector(const mlp_fixture *f, int n, bool f64)
{
    return f64 ? f->t[n].v64 : f->t[n].v.view;
}

/* Fills the forward arguments from the fixture. */
static void forward_args(const mlp_fixture *f, bool f64, cvf_mlp_forward_args *args)
{
    memset(args, 0, sizeof *args);
    args->gelu = f->gelu;
    args->hidden_state = mlp_matrix(f, FW_X, f64);
    args->fc1_weight = mlp_matrix(f, FW_W1, f64);
    args->fc1_bias = mlp_vector(f, FW_B1, f64);
    args->fc2_weight = mlp_matrix(f, FW_W2, f64);
    args->fc2_bias = mlp_vector(f, FW_B2, f64);
    args->fc1_output = mlp_matrix(f, FW_FC1, f64);
    args->gelu_output = mlp_matrix(f, FW_GELU, f64);
    args->output = mlp_matrix(f, FW_Y, f64);
}

/* Fills the backward arguments from the fixture. */
static void backward_args(const mlp_fixture *f, bool f64, cvf_mlp_backward_args *args)
{
    memset(args, 0, sizeof *args);
    args->gelu = f->gelu;
    args->grad_output = mlp_matrix(f, BW_GO, f64);
    args->hidden_state = mlp_matrix(f, BW_X, f64);
    args->fc1_weight = mlp_matrix(f, BW_W1, f64);
    args->fc2_weight = mlp_matrix(f, BW_W2, f64);
    args->fc1_output = mlp_matrix(f, BW_FC1, f64);
    args->gelu_output = mlp_matrix(f, BW_GELU, f64);
    args->grad_hidden_state = mlp_matrix(f, BW_GX, f64);
    args->grad_fc1_weight = mlp_matrix(f, BW_GW1, f64);
    args->grad_fc1_bias = mlp_vector(f, BW_GB1, f64);
    args->grad_fc2_weight = mlp_matrix(f, BW_GW2, f64);
    args->grad_fc2_bias = mlp_vector(f, BW_GB2, f64);
}

/* Runs the forward (backward when backward is set) on ctx with the fixture's views or, when f64
 * is set, with its float64 twins. */
static cvf_status mlp_call(const mlp_fixture *f, cvf_context *ctx, bool backward, bool f64)
{
    if (backward) {
        cvf_mlp_backward_args args = {0};
        backward_args(f, f64, &args);
        return cvf_mlp_backward(ctx, &args);
    }
    cvf_mlp_forward_args args = {0};
    forward_args(f, f64, &args);
    return cvf_mlp_forward(ctx, &args);
}

/* The forward's answers composed from reference-device matmuls with the GELU epilogue of gelu,
 * written into the output twins: an oracle that does not depend on the reference's MLP code. */
static cvf_status mlp_compose_forward(const mlp_fixture *f, cvf_context *ref, cvf_gelu gelu)
{
    cvf_mlp_forward_args a;
    forward_args(f, true, &a);
    cvf_activation act = gelu == CVF_GELU_ERF ? CVF_ACTIVATION_GELU_ERF : CVF_ACTIVATION_GELU_TANH;
    cvf_matrix w1t = cvf_matrix_transpose(a.fc1_weight), w2t = cvf_matrix_transpose(a.fc2_weight);
    cvf_epilogue fc1 = {act, &a.fc1_bias, NULL, &a.fc1_output, NULL};
    cvf_epilogue fc2 = {CVF_ACTIVATION_NONE, &a.fc2_bias, NULL, NULL, NULL};
    cvf_status status = cvf_matmul(ref, &a.hidden_state, &w1t, &a.gelu_output, &fc1);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ref, &a.gelu_output, &w2t, &a.output, &fc2);
    return status;
}

/* The backward's answers composed likewise (the seed's seven operations, GELU' fused into the
 * grad_fc1_output product as K1 does). */
static cvf_status mlp_compose_backward(const mlp_fixture *f, cvf_context *ref, cvf_gelu gelu)
{
    cvf_mlp_backward_args a;
    backward_args(f, true, &a);
    cvf_activation act = gelu == CVF_GELU_ERF ? CVF_ACTIVATION_DGELU_ERF : CVF_ACTIVATION_DGELU_TANH;
    cvf_matrix g1 = {0}; /* grad_fc1_output */
    if (cvft_matrix_alloc(CVF_F64, a.fc1_output.rows, a.fc1_output.cols, &g1) != 0)
        return CVF_STATUS_OUT_OF_MEMORY;
    cvf_matrix go_t = cvf_matrix_transpose(a.grad_output), g1_t = cvf_matrix_transpose(g1);
    cvf_epilogue k1 = {act, NULL, &a.fc1_output, NULL, &a.grad_fc1_bias};
    cvf_status status = cvf_column_sum(ref, &a.grad_output, &a.grad_fc2_bias);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ref, &go_t, &a.gelu_output, &a.grad_fc2_weight, NULL);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ref, &a.grad_output, &a.fc2_weight, &g1, &k1);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ref, &g1_t, &a.hidden_state, &a.grad_fc1_weight, NULL);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ref, &g1, &a.fc1_weight, &a.grad_hidden_state, NULL);
    free(g1.data);
    return status;
}

/* The float64 answers (output twins) of a fixture, copied out: one array per tensor. */
typedef struct mlp_answers {
    double *values[MLP_MAX_TENSORS];
    int64_t counts[MLP_MAX_TENSORS];
} mlp_answers;

/* Copies the output twins into *out (freed by mlp_answers_free). Returns 0 or -1. */
static int mlp_answers_copy(const mlp_fixture *f, mlp_answers *out)
{
    memset(out, 0, sizeof *out);
    for (int n = 0; n < f->count; n++) {
        if (!f->specs[n].is_output)
            continue;
        const tensor *t = &f->t[n];
        int64_t count = f->specs[n].is_vector ? t->v64.length : t->m64.rows * t->m64.cols;
        const void *src = f->specs[n].is_vector ? t->v64.data : t->m64.data;
        out->counts[n] = count;
        out->values[n] = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
        if (!out->values[n])
            return -1;
        if (count > 0)
            memcpy(out->values[n], src, (size_t)count * sizeof(double));
    }
    return 0;
}

/* Frees copied answers. */
static void mlp_answers_free(mlp_answers *a)
{
    for (int n = 0; n < MLP_MAX_TENSORS; n++)
        free(a->values[n]);
}

/* The largest max|a - b| / max|b| over the output tensors of two sets of answers. */
static double mlp_answers_distance(const mlp_answers *a, const mlp_answers *b)
{
    double worst = 0.0;
    for (int n = 0; n < MLP_MAX_TENSORS; n++) {
        double diff = 0.0, size = 0.0;
        for (int64_t i = 0; i < a->counts[n]; i++) {
            diff = fmax(diff, fabs(a->values[n][i] - b->values[n][i]));
            size = fmax(size, fabs(b->values[n][i]));
        }
        if (a->counts[n] > 0)
            worst = fmax(worst, size > 0.0 ? diff / size : diff);
    }
    return worst;
}

/* Checks every output and input of an MLP run; vector outputs (the bias gradients) must match
 * the first run's bits (saved when first is set). */
static void mlp_check(mlp_fixture *f, const char *run, bool first)
{
    for (int n = 0; n < f->count; n++) {
        const tensor_spec *s = &f->specs[n];
        tensor *t = &f->t[n];
        support_buffer *buffer = s->is_vector ? &t->v.buffer : &t->m.buffer;
        if (!s->is_output) {
            CHECK(support_buffer_unchanged(buffer), "%s: input %s was modified", run, s->name);
            continue;
        }
        if (s->is_vector)
            support_check_vector_output(run, s->name, &t->v, &t->v64);
        else
            support_check_matrix_output(run, s->name, &t->m, &t->m64);
        if (!s->is_vector)
            continue;
        if (first)
            support_buffer_save(buffer);
        else
            CHECK(support_buffer_unchanged(buffer), "%s: %s differs in its bits from the run with 1 thread", run,
                  s->name);
    }
}

/* Poisons every output of the fixture. */
static void mlp_poison_outputs(mlp_fixture *f)
{
    for (int n = 0; n < f->count; n++)
        if (f->specs[n].is_output)
            support_buffer_poison(f->specs[n].is_vector ? &f->t[n].v.buffer : &f->t[n].m.buffer);
}

/* Whether every output of the fixture still holds its poison, in its view and around it. */
static bool mlp_outputs_untouched(const mlp_fixture *f)
{
    for (int n = 0; n < f->count; n++) {
        const tensor *t = &f->t[n];
        if (!f->specs[n].is_output)
            continue;
        if (f->specs[n].is_vector) {
            if (support_vector_count_poisoned(&t->v) != t->v.view.length || !support_vector_outside_intact(&t->v))
                return false;
        } else if (support_count_poisoned_in_view(&t->m) != t->m.view.rows * t->m.view.cols ||
                   !support_outside_view_intact(&t->m)) {
            return false;
        }
    }
    return true;
}

/* The workspace the MLP call of f would use on ctx, in *bytes. */
static cvf_status mlp_workspace_size(const mlp_fixture *f, cvf_context *ctx, bool backward, size_t *bytes)
{
    if (backward) {
        cvf_mlp_backward_args args = {0};
        backward_args(f, false, &args);
        return cvf_mlp_backward_workspace_size(ctx, &args, bytes);
    }
    cvf_mlp_forward_args args = {0};
    forward_args(f, false, &args);
    return cvf_mlp_forward_workspace_size(ctx, &args, bytes);
}

/* Gives ctx caller-owned workspace of the size the MLP call of f asks on it, after checking that
 * one byte less is refused (WORKSPACE_TOO_SMALL, every output still poisoned). Returns the memory
 * (NULL where the call needs none or the checks failed); the caller frees it after
 * cvf_context_set_workspace(ctx, NULL, 0). */
static void *mlp_give_callers_workspace(mlp_fixture *f, cvf_context *ctx, bool backward, const char *run)
{
    size_t need = 0;
    cvf_status status = mlp_workspace_size(f, ctx, backward, &need);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: size query returned %s: %s", run, cvf_status_string(status),
               cvf_context_last_error(ctx)) ||
        need == 0)
        return NULL;
    void *memory = aligned_alloc(256, (need + 255) / 256 * 256);
    if (!CHECK(memory != NULL, "%s: out of memory", run))
        return NULL;
    if (need > 1) {
        cvf_context_set_workspace(ctx, memory, need - 1);
        status = mlp_call(f, ctx, backward, false);
        CHECK(status == CVF_STATUS_WORKSPACE_TOO_SMALL, "%s: one byte short of the query returned %s", run,
              cvf_status_string(status));
        CHECK(mlp_outputs_untouched(f), "%s: a workspace too small still wrote an output", run);
    }
    if (!CHECK(cvf_context_set_workspace(ctx, memory, need) == CVF_STATUS_SUCCESS, "%s: set_workspace: %s", run,
               cvf_context_last_error(ctx))) {
        free(memory);
        return NULL;
    }
    return memory;
}

/* Runs the fixture on ctx with caller-owned workspace of exactly the size its query gives (after
 * checking that one byte less is refused with every output untouched) and checks it; a call that
 * needs no workspace has nothing to add to the runs on the context's own. */
static void mlp_run_on_callers_workspace(mlp_fixture *f, cvf_context *ctx, bool backward)
{
    char run[256];
    snprintf(run, sizeof run, "%s [cpu threads=%d, caller's workspace]", f->label, (int)cvf_context_threads(ctx));
    mlp_poison_outputs(f);
    void *memory = mlp_give_callers_workspace(f, ctx, backward, run);
    if (!memory)
        return;
    cvf_status status = mlp_call(f, ctx, backward, false);
    if (CHECK(status == CVF_STATUS_SUCCESS, "%s: returned %s: %s", run, cvf_status_string(status),
              cvf_context_last_error(ctx)))
        mlp_check(f, run, false);
    cvf_context_set_workspace(ctx, NULL, 0);
    free(memory);
}

/* Runs the prepared fixture on the reference (answers into the f64 twins), then on the CPU
 * contexts (threads 1, 2, and 2 again) with full checks. */
static void mlp_run_all(const contexts *cx, mlp_fixture *f, bool backward)
{
    /* the reference's MLP for the tanh GELU; for the erf GELU the composition of reference matmuls
     * (test_mlp_oracle checks the two agree where both apply) */
    cvf_status status;
    if (f->gelu == CVF_GELU_ERF)
        status = backward ? mlp_compose_backward(f, cx->reference, CVF_GELU_ERF)
                          : mlp_compose_forward(f, cx->reference, CVF_GELU_ERF);
    else
        status = mlp_call(f, cx->reference, backward, true);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: reference returned %s: %s", f->label, cvf_status_string(status),
               cvf_context_last_error(cx->reference)))
        return;
    for (int t = 0; t <= CPU_DEFAULT_VARIANTS; t++) {
        int variant = t < CPU_DEFAULT_VARIANTS ? t : CPU_DEFAULT_VARIANTS - 1;
        char run[256];
        snprintf(run, sizeof run, "%s [cpu threads=%d%s]", f->label, (int)cpu_threads[variant],
                 t == CPU_DEFAULT_VARIANTS ? ", repeated" : "");
        mlp_poison_outputs(f);
        status = mlp_call(f, cx->cpu[variant], backward, false);
        if (CHECK(status == CVF_STATUS_SUCCESS, "%s: returned %s: %s", run, cvf_status_string(status),
                  cvf_context_last_error(cx->cpu[variant])))
            mlp_check(f, run, t == 0);
    }
    mlp_run_on_callers_workspace(f, cx->cpu[1], backward);
}

/* The MLP forward: fc1_output, gelu_output and output against the reference. */
static void run_mlp_forward(const contexts *cx, const mlp_case *c)
{
    mlp_fixture *f = malloc(sizeof *f);
    if (!CHECK(f != NULL, "out of memory"))
        return;
    cvft_rng rng = cvft_rng_make(c->seed);
    if (CHECK(mlp_create(f, c, forward_specs, FW_COUNT, "mlp_forward") == 0, "%s: out of memory", f->label)) {
        mlp_fill_inputs(f, &rng);
        if (CHECK(mlp_snapshot_inputs(f) == 0, "%s: out of memory", f->label))
            mlp_run_all(cx, f, false);
    }
    mlp_teardown(f);
    free(f);
}

/* The MLP backward: all five gradients against the reference. fc1_output covers [-4, 4) and
 * gelu_output is the case's GELU of it, as a forward pass would have left them. */
static void run_mlp_backward(const contexts *cx, const mlp_case *c)
{
    mlp_fixture *f = malloc(sizeof *f);
    if (!CHECK(f != NULL, "out of memory"))
        return;
    cvft_rng rng = cvft_rng_make(c->seed);
    if (CHECK(mlp_create(f, c, backward_specs, BW_COUNT, "mlp_backward") == 0, "%s: out of memory", f->label)) {
        mlp_fill_inputs(f, &rng);
        const cvf_matrix *fc1 = &f->t[BW_FC1].m.view, *gelu = &f->t[BW_GELU].m.view;
        support_matrix_fill(&f->t[BW_FC1].m, &rng, -4.0, 4.0);
        for (int64_t i = 0; i < fc1->rows; i++)
            for (int64_t j = 0; j < fc1->cols; j++)
                cvft_matrix_set(gelu, i, j,
                                c->gelu == CVF_GELU_ERF ? gelu_erf(cvft_matrix_get(fc1, i, j))
                                                        : gelu_tanh(cvft_matrix_get(fc1, i, j)));
        if (CHECK(mlp_snapshot_inputs(f) == 0, "%s: out of memory", f->label))
            mlp_run_all(cx, f, true);
    }
    mlp_teardown(f);
    free(f);
}

/* The MLP forward and backward over token counts that are not multiples of the tiles, every
 * dtype, dense and strided views. The last two shapes put H and I off every multiple of 8 and
 * past the CPU's 256-wide column and depth blocks, so every GEMM of the plan has tails in M, N
 * and K and more than one K panel. */
static void test_mlp(const contexts *cx)
{
    static const int64_t shapes[][3] = {{197, 64, 256}, {33, 48, 96},   {1, 8, 16},     {0, 8, 16},
                                        {65, 24, 40},   {131, 67, 263}, {257, 300, 517}};
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_F16, CVF_BF16};
    uint64_t seed = 60000;
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (size_t d = 0; d < ARRAY_SIZE(dtypes); d++)
            for (int strided = 0; strided < 2; strided++) {
                if ((s == 0 || s >= 5) && strided && d != 1) /* the largest shapes: strided in f16 only */
                    continue;
                mlp_case c = {shapes[s][0], shapes[s][1], shapes[s][2], dtypes[d], strided != 0, seed++, CVF_GELU_TANH};
                run_mlp_forward(cx, &c);
                run_mlp_backward(cx, &c);
            }
}

/* The MLP with the exact GELU (args.gelu = CVF_GELU_ERF) over the same kinds of shapes, every
 * dtype, dense and strided; answers from composed reference matmuls (mlp_run_all). */
static void test_mlp_erf(const contexts *cx)
{
    static const int64_t shapes[][3] = {{197, 64, 256}, {33, 48, 96}, {1, 8, 16}, {0, 8, 16}, {131, 67, 263}};
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_F16, CVF_BF16};
    uint64_t seed = 61000;
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (size_t d = 0; d < ARRAY_SIZE(dtypes); d++)
            for (int strided = 0; strided < 2; strided++) {
                if ((s == 0 || s == 4) && strided && d != 1)
                    continue;
                mlp_case c = {shapes[s][0], shapes[s][1], shapes[s][2], dtypes[d], strided != 0, seed++, CVF_GELU_ERF};
                run_mlp_forward(cx, &c);
                run_mlp_backward(cx, &c);
            }
}

/* Checks the composed oracle of one fixture: with the tanh GELU it must equal the reference's MLP
 * (to float64 rounding), with the erf GELU it must differ from it by far more than the f32
 * tolerance (so the erf cases would catch the tanh GELU), and the reference's own MLP asked for
 * the erf GELU must match the erf composition. */
static void check_mlp_oracle(const contexts *cx, mlp_fixture *f, bool backward)
{
    mlp_answers mlp = {0}, tanh_composed = {0}, erf_composed = {0}, erf_mlp = {0};
    cvf_gelu asked = f->gelu;
    f->gelu = CVF_GELU_TANH;
    bool ok = mlp_call(f, cx->reference, backward, true) == CVF_STATUS_SUCCESS && mlp_answers_copy(f, &mlp) == 0;
    ok = ok && (backward ? mlp_compose_backward(f, cx->reference, CVF_GELU_TANH)
                         : mlp_compose_forward(f, cx->reference, CVF_GELU_TANH)) == CVF_STATUS_SUCCESS;
    ok = ok && mlp_answers_copy(f, &tanh_composed) == 0;
    ok = ok && (backward ? mlp_compose_backward(f, cx->reference, CVF_GELU_ERF)
                         : mlp_compose_forward(f, cx->reference, CVF_GELU_ERF)) == CVF_STATUS_SUCCESS;
    ok = ok && mlp_answers_copy(f, &erf_composed) == 0;
    f->gelu = CVF_GELU_ERF;
    ok = ok && mlp_call(f, cx->reference, backward, true) == CVF_STATUS_SUCCESS && mlp_answers_copy(f, &erf_mlp) == 0;
    f->gelu = asked;
    if (CHECK(ok, "%s: oracle runs failed", f->label)) {
        double same = mlp_answers_distance(&tanh_composed, &mlp), apart = mlp_answers_distance(&erf_composed, &mlp);
        double reference_erf = mlp_answers_distance(&erf_mlp, &erf_composed);
        CHECK(same <= 1e-12, "%s: composed tanh answers differ from the reference MLP by %.3g", f->label, same);
        CHECK(apart >= 4e-5, "%s: erf and tanh answers only %.3g apart: the erf cases could not tell them apart",
              f->label, apart);
        CHECK(reference_erf <= 1e-12,
              "%s: the reference device's MLP with gelu = CVF_GELU_ERF is %.3g away from the composed erf answers "
              "(does it honour args.gelu?)",
              f->label, reference_erf);
    }
    mlp_answers_free(&mlp);
    mlp_answers_free(&tanh_composed);
    mlp_answers_free(&erf_composed);
    mlp_answers_free(&erf_mlp);
}

/* The oracle of the erf MLP cases, forward and backward, on two shapes (see check_mlp_oracle). */
static void test_mlp_oracle(const contexts *cx)
{
    static const int64_t shapes[][3] = {{33, 48, 96}, {65, 24, 40}};
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (int backward = 0; backward < 2; backward++) {
            mlp_fixture *f = malloc(sizeof *f);
            if (!CHECK(f != NULL, "out of memory"))
                return;
            mlp_case c = {shapes[s][0], shapes[s][1], shapes[s][2], CVF_F32, false, 62000 + s, CVF_GELU_ERF};
            cvft_rng rng = cvft_rng_make(c.seed);
            const tensor_spec *specs = backward ? backward_specs : forward_specs;
            int count = backward ? BW_COUNT : FW_COUNT;
            if (CHECK(mlp_create(f, &c, specs, count, backward ? "mlp_backward" : "mlp_forward") == 0,
                      "%s: out of memory", f->label)) {
                mlp_fill_inputs(f, &rng);
                if (backward)
                    support_matrix_fill(&f->t[BW_FC1].m, &rng, -4.0, 4.0);
                if (CHECK(mlp_snapshot_inputs(f) == 0, "%s: out of memory", f->label))
                    check_mlp_oracle(cx, f, backward != 0);
            }
            mlp_teardown(f);
            free(f);
        }
}

/* ---- the MLP backward plan ----------------------------------------------------------------- */

/* Returns the plan's kernel named name, or NULL; counts how many carry that name. */
static const cvf_kernel_info *find_kernel(const cvf_mlp_plan *plan, const char *name, int *count)
{
    const cvf_kernel_info *found = NULL;
    *count = 0;
    for (int32_t k = 0; k < plan->kernel_count && k < CVF_PLAN_MAX_KERNELS; k++)
        if (plan->kernels[k].name && strcmp(plan->kernels[k].name, name) == 0) {
            found = &plan->kernels[k];
            ++*count;
        }
    return found;
}

/* Checks one GEMM kernel of the plan: present once, its kind, shape and FLOP count. */
static void check_plan_gemm(const cvf_mlp_plan *plan, const char *name, cvf_kernel_kind kind, int64_t m, int64_t n,
                            int64_t k)
{
    int count;
    const cvf_kernel_info *info = find_kernel(plan, name, &count);
    if (!CHECK(info != NULL && count == 1, "plan: kernel %s appears %d times, expected once", name, count))
        return;
    CHECK(info->kind == kind, "plan: %s has kind %d, expected %d", name, (int)info->kind, (int)kind);
    CHECK(info->m == m && info->n == n && info->k == k,
          "plan: %s shape %lld x %lld x %lld, expected %lld x %lld x %lld", name, (long long)info->m,
          (long long)info->n, (long long)info->k, (long long)m, (long long)n, (long long)k);
    CHECK(info->flops == 2 * (uint64_t)m * (uint64_t)n * (uint64_t)k, "plan: %s flops %llu, expected 2 m n k", name,
          (unsigned long long)info->flops);
    CHECK(info->computes && info->fused && info->bytes > 0, "plan: %s lacks text or bytes", name);
}

/* Returns whether some kernel's formula or fused epilogue mentions what. */
static bool plan_mentions(const cvf_mlp_plan *plan, const char *what)
{
    for (int32_t k = 0; k < plan->kernel_count && k < CVF_PLAN_MAX_KERNELS; k++) {
        const cvf_kernel_info *info = &plan->kernels[k];
        if ((info->computes && strstr(info->computes, what)) || (info->fused && strstr(info->fused, what)))
            return true;
    }
    return false;
}

/* Checks the describe text: the full length is returned for any buffer, the text is truncated
 * safely and NUL-terminated, and nothing past size is written. */
static void check_plan_describe(const cvf_mlp_plan *plan)
{
    size_t need = cvf_mlp_plan_describe(plan, NULL, 0);
    char *full = malloc(need + 1);
    if (!CHECK(need > 0 && full != NULL, "plan describe: needs %zu bytes", need)) {
        free(full);
        return;
    }
    size_t written = cvf_mlp_plan_describe(plan, full, need + 1);
    CHECK(written == need && strlen(full) == need, "plan describe: returned %zu, text length %zu, expected %zu",
          written, strlen(full), need);
    CHECK(strstr(full, "K1") && strstr(full, "K2-1") && strstr(full, "K2-2") && strstr(full, "K2-3"),
          "plan describe: the text does not name every kernel:\n%s", full);
    char small[32];
    memset(small, 'Z', sizeof small);
    CHECK(cvf_mlp_plan_describe(plan, small, 10) == need, "plan describe into 10 bytes must still return %zu", need);
    CHECK(small[9] == '\0' && memcmp(small, full, 9) == 0, "plan describe: 10-byte buffer not a NUL-terminated prefix");
    bool untouched = true;
    for (size_t i = 10; i < sizeof small; i++)
        untouched &= small[i] == 'Z';
    CHECK(untouched, "plan describe wrote past the 10 bytes it was given");
    memset(small, 'Z', sizeof small);
    CHECK(cvf_mlp_plan_describe(plan, small, 1) == need && small[0] == '\0' && small[1] == 'Z',
          "plan describe into 1 byte: must write only the NUL");
    free(full);
}

/* The CPU plan for the ViT-B shape: K1 fused (with grad_fc1_bias in its epilogue), K2-1..3 plain
 * GEMMs, grad_fc2_bias computed somewhere, consistent byte totals, bytes saved. */
static void test_plan(const contexts *cx)
{
    const int64_t S = 197, H = 768, I = 3072;
    cvf_mlp_shape shape = {S, H, I, CVF_F16, CVF_GELU_TANH};
    cvf_mlp_plan plan;
    memset(&plan, 0xA5, sizeof plan);
    cvf_status status = cvf_mlp_backward_plan(cx->cpu[1], &shape, &plan);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "cvf_mlp_backward_plan: %s: %s", cvf_status_string(status),
               cvf_context_last_error(cx->cpu[1])))
        return;
    CHECK(plan.shape.tokens == S && plan.shape.hidden == H && plan.shape.intermediate == I &&
              plan.shape.dtype == CVF_F16 && plan.device == CVF_DEVICE_CPU && plan.workspace_dtype == CVF_F32,
          "plan: shape/device/workspace not as asked (workspace %s)", cvf_dtype_name(plan.workspace_dtype));
    /* bf16 tensors keep grad_fc1_output in bf16 where bf16 x bf16 products have their own kernel (AMX;
     * vdpbf16ps where it pays), so that K2-2 and K2-3 run on it; fp32 elsewhere */
    cvf_mlp_shape bf16_shape = {S, H, I, CVF_BF16, CVF_GELU_TANH};
    cvf_mlp_plan bf16_plan;
    const cvf_cpu_isa isa = cvf_cpu_isa_active();
    const bool bf16_kernel = isa == CVF_CPU_ISA_AMX || (isa == CVF_CPU_ISA_AVX512_BF16 && cvf_cpu_bf16_dot_pays());
    if (CHECK(cvf_mlp_backward_plan(cx->cpu[1], &bf16_shape, &bf16_plan) == CVF_STATUS_SUCCESS, "bf16 plan failed"))
        CHECK(bf16_plan.workspace_dtype == (bf16_kernel ? CVF_BF16 : CVF_F32),
              "plan: bf16 tensors at level %s: grad_fc1_output %s, expected %s", cvf_cpu_isa_name(isa),
              cvf_dtype_name(bf16_plan.workspace_dtype), bf16_kernel ? "bf16" : "f32");
    if (!CHECK(plan.kernel_count >= 4 && plan.kernel_count <= CVF_PLAN_MAX_KERNELS, "plan: %d kernels",
               (int)plan.kernel_count))
        return;
    check_plan_gemm(&plan, "K1", CVF_KERNEL_FUSED_GEMM, S, I, H);
    check_plan_gemm(&plan, "K2-1", CVF_KERNEL_GEMM, H, I, S);
    check_plan_gemm(&plan, "K2-2", CVF_KERNEL_GEMM, I, H, S);
    check_plan_gemm(&plan, "K2-3", CVF_KERNEL_GEMM, S, H, I);
    int count;
    const cvf_kernel_info *k1 = find_kernel(&plan, "K1", &count);
    CHECK(k1 && k1->fused && strstr(k1->fused, "grad_fc1_bias"), "plan: K1's epilogue does not carry grad_fc1_bias");
    CHECK(plan_mentions(&plan, "grad_fc2_bias"), "plan: no kernel computes grad_fc2_bias");
    uint64_t bytes = 0;
    int64_t saved = 0;
    for (int32_t k = 0; k < plan.kernel_count; k++)
        bytes += plan.kernels[k].bytes;
    CHECK(bytes == plan.bytes_total, "plan: bytes_total %llu, kernels sum to %llu",
          (unsigned long long)plan.bytes_total, (unsigned long long)bytes);
    if (CHECK(plan.saving_count >= 1 && plan.saving_count <= CVF_PLAN_MAX_SAVINGS, "plan: %d savings",
              (int)plan.saving_count))
        for (int32_t k = 0; k < plan.saving_count; k++)
            saved += plan.savings[k].bytes;
    CHECK(plan.bytes_saved > 0 && saved == plan.bytes_saved, "plan: bytes_saved %lld, savings sum to %lld",
          (long long)plan.bytes_saved, (long long)saved);
    check_plan_describe(&plan);
}

/* ---- main ---------------------------------------------------------------------------------- */

/* Creates the reference context and the CPU contexts. Returns 0 or -1. */
static int contexts_create(contexts *cx)
{
    memset(cx, 0, sizeof *cx);
    cvf_context_options reference = {CVF_DEVICE_REFERENCE, 1, 0, NULL};
    if (cvf_context_create(&reference, &cx->reference) != CVF_STATUS_SUCCESS)
        return -1;
    for (int t = 0; t < CPU_ALL_VARIANTS; t++) {
        cvf_context_options cpu = {CVF_DEVICE_CPU, cpu_threads[t], 0, NULL};
        if (cvf_context_create(&cpu, &cx->cpu[t]) != CVF_STATUS_SUCCESS)
            return -1;
        CHECK(cvf_context_threads(cx->cpu[t]) == cpu_threads[t], "context asked for %d threads runs %d",
              (int)cpu_threads[t], (int)cvf_context_threads(cx->cpu[t]));
    }
    return 0;
}

/* Destroys the contexts. */
static void contexts_destroy(contexts *cx)
{
    cvf_context_destroy(cx->reference);
    for (int t = 0; t < CPU_ALL_VARIANTS; t++)
        cvf_context_destroy(cx->cpu[t]);
}

/* Runs one section and prints its time and the checks it added. */
static void run_section(const char *name, void (*section)(const contexts *), const contexts *cx)
{
    double start = cvft_now_seconds();
    int64_t passed = support_passed(), failed = support_failed();
    section(cx);
    printf("  %-22s %8lld passed %6lld failed %7.2f s\n", name, (long long)(support_passed() - passed),
           (long long)(support_failed() - failed), cvft_now_seconds() - start);
    fflush(stdout);
}

/* Adapts the self-test (which needs no context) to run_section. */
static void section_checking_tools(const contexts *cx)
{
    (void)cx;
    test_checking_tools();
}

/* The CPU variant under test: CVF_CPU_ISA names one (ctest runs the suite once per level), and a
 * level this CPU lacks is a visible skip (exit 77), never a silent run of another level. Returns
 * false when the suite should be skipped. */
static bool announce_cpu_variant(void)
{
    const char *forced = getenv("CVF_CPU_ISA");
    if (forced && *forced) {
        bool known = false;
        for (int isa = 0; isa < CVF_CPU_ISA_COUNT; isa++)
            if (strcmp(forced, cvf_cpu_isa_name((cvf_cpu_isa)isa)) == 0) {
                known = true;
                if (!cvf_cpu_isa_supported((cvf_cpu_isa)isa)) {
                    printf("SKIP: CVF_CPU_ISA=%s is not supported by this CPU\n", forced);
                    return false;
                }
            }
        if (!known) {
            printf("SKIP: CVF_CPU_ISA=%s names no ISA level\n", forced);
            return false;
        }
    }
    cvf_cpu_isa isa = cvf_cpu_isa_active();
    const char *blocks = getenv("CVF_CPU_BLOCKS");
    printf("cpu isa %s: kernels %s, %s%s%s\n", cvf_cpu_isa_name(isa), cvf_cpu_kernel_for(isa, CVF_F32, CVF_F32)->name,
           cvf_cpu_kernel_for(isa, CVF_BF16, CVF_BF16)->name, blocks ? "; CVF_CPU_BLOCKS=" : "", blocks ? blocks : "");
    return true;
}

int main(void)
{
    if (!announce_cpu_variant())
        return 77;
    double start = cvft_now_seconds();
    contexts cx;
    if (!CHECK(contexts_create(&cx) == 0, "could not create the contexts")) {
        contexts_destroy(&cx);
        return test_report("test_ops");
    }
    run_section("checking tools", section_checking_tools, &cx);
    run_section("known answers", test_known_answers, &cx);
    run_section("epilogue cross product", test_epilogue_cross_product, &cx);
    run_section("shape sweep", test_shape_sweep, &cx);
    run_section("degenerate shapes", test_degenerate_shapes, &cx);
    run_section("empty, NULL data", test_empty_with_null_data, &cx);
    run_section("large shapes", test_large_shapes, &cx);
    run_section("token rows", test_token_rows, &cx);
    run_section("matmul_relu", test_matmul_relu, &cx);
    run_section("column_sum", test_column_sum, &cx);
    run_section("NaN and Inf", test_nan_inf, &cx);
    run_section("GELU tails", test_gelu_tails, &cx);
    run_section("subnormal inputs", test_subnormal_inputs, &cx);
    run_section("MLP", test_mlp, &cx);
    run_section("MLP oracle (erf)", test_mlp_oracle, &cx);
    run_section("MLP gelu=erf", test_mlp_erf, &cx);
    run_section("MLP plan", test_plan, &cx);
    contexts_destroy(&cx);
    const char *where;
    double worst = support_worst_error_ratio(&where);
    printf("worst error / tolerance: %.3g (%s)\n", worst, where);
    printf("wall time: %.1f s\n", cvft_now_seconds() - start);
    return test_report("test_ops");
}

/*
 * The CUDA backend against the float64 reference: the table-driven matmul cases of the CPU tests,
 * run through device copies of the same guarded, poisoned buffers. Every buffer (guards, gaps and
 * view) is copied to the GPU; before each call the output buffers are re-poisoned on the GPU
 * (the host poison pattern, copied up); after it every buffer comes back and the CPU checks
 * apply unchanged: no element unwritten, nothing outside a view touched, inputs unchanged, the
 * relative error within the dtype's tolerance.
 *
 * Each case that the Hopper kernel can take runs twice: on the fast path (and the test checks it
 * ran there) and on the simple kernel (a context created under CVF_CUDA_KERNEL=simple). Bias
 * gradients must be bit-identical between two runs. Also: error statuses on a CUDA context,
 * column sums, one 4096^3 product checked at sampled elements, and the MLP forward and backward:
 * every output against the reference, element by element within a derived error bound, run
 * twice bit-identical, on a non-blocking user stream synchronised alone, captured into a CUDA
 * graph; and the CUDA plan's schedule fields (see the MLP section's comment).
 *
 * test_cuda [--quick] [--host-check]: --quick runs a small set (for compute-sanitizer);
 * --host-check runs the MLP section with the CPU backend in place of the GPU (no CUDA call: it
 * checks the error bounds on any machine). Without CUDA in the build, or without a GPU (and
 * without --host-check), prints "SKIP: ..." and exits 77 (ctest: skipped).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support.h"

#ifndef CVF_HAVE_CUDA
int main(void)
{
    printf("SKIP: test_cuda: cvfuse was built without the CUDA backend (no nvcc at configure time)\n");
    return 77;
}
#else

#include <cuda_runtime.h>

#include "cuda/cuda.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static cvf_context *reference_ctx, *fast_ctx, *simple_ctx;
static cvf_context *own_ctx; /* created under CVF_CUDA_ENGINE=own: our kernels on every call they can take */
static bool hopper;
static bool quick;     /* --quick: small cases only (for compute-sanitizer) */
static bool host_mode; /* --host-check: the CPU backend stands in for the GPU (no CUDA calls) */

/* ---- device mirrors of guarded buffers ------------------------------------------------------ */

/* A device copy of a whole support buffer. */
typedef struct mirror {
    support_buffer *host;
    unsigned char *dev;
} mirror;

static bool mirror_create(mirror *m, support_buffer *host)
{
    m->host = host;
    m->dev = NULL;
    if (!host->bytes || host_mode) /* --host-check: no device, the host views are used */
        return true;
    if (cudaMalloc((void **)&m->dev, host->size ? host->size : 1) != cudaSuccess)
        return false;
    return cudaMemcpy(m->dev, host->bytes, host->size, cudaMemcpyHostToDevice) == cudaSuccess;
}

static void mirror_upload(mirror *m)
{
    if (m->dev)
        CHECK(cudaMemcpy(m->dev, m->host->bytes, m->host->size, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
}

static void mirror_download(mirror *m)
{
    if (m->dev)
        CHECK(cudaMemcpy(m->host->bytes, m->dev, m->host->size, cudaMemcpyDeviceToHost) == cudaSuccess,
              "download: %s", cudaGetErrorString(cudaGetLastError()));
}

static void mirror_destroy(mirror *m)
{
    if (m->dev)
        cudaFree(m->dev);
    m->dev = NULL;
}

/* The device address of a host pointer into m's buffer. */
static void *on_device(const mirror *m, const void *host_ptr)
{
    if (!host_ptr || !m->dev)
        return NULL;
    return m->dev + ((const unsigned char *)host_ptr - m->host->bytes);
}

/* ---- matmul cases on the GPU ---------------------------------------------------------------- */

enum { M_A, M_B, M_AUX_IN, M_C, M_AUX_OUT, M_BIAS, M_GRAD, M_COUNT };

typedef struct gpu_fixture {
    support_matmul_fixture f;
    mirror m[M_COUNT];
    cvf_matrix a, b, c, aux_in, aux_out;
    cvf_vector bias, bias_grad;
} gpu_fixture;

static cvf_matrix dev_matrix(const mirror *m, const cvf_matrix *host)
{
    cvf_matrix d = *host;
    d.data = on_device(m, host->data);
    return d;
}

static cvf_vector dev_vector(const mirror *m, const cvf_vector *host)
{
    cvf_vector d = *host;
    d.data = on_device(m, host->data);
    return d;
}

static bool gpu_setup(gpu_fixture *g, const support_matmul_case *c)
{
    memset(g, 0, sizeof *g);
    cvf_status status = support_matmul_setup(&g->f, c, reference_ctx);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: reference setup failed: %s", g->f.label, cvf_status_string(status)))
        return false;
    support_buffer *host[M_COUNT] = {&g->f.a.buffer,       &g->f.b.buffer,    &g->f.aux_in.buffer,
                                     &g->f.c.buffer,       &g->f.aux_out.buffer, &g->f.bias.buffer,
                                     &g->f.bias_grad.buffer};
    bool ok = true;
    for (int i = 0; i < M_COUNT; i++)
        ok &= mirror_create(&g->m[i], host[i]);
    if (!CHECK(ok, "%s: device allocation failed", g->f.label))
        return false;
    g->a = dev_matrix(&g->m[M_A], &g->f.a.view);
    g->b = dev_matrix(&g->m[M_B], &g->f.b.view);
    g->c = dev_matrix(&g->m[M_C], &g->f.c.view);
    g->aux_in = dev_matrix(&g->m[M_AUX_IN], &g->f.aux_in.view);
    g->aux_out = dev_matrix(&g->m[M_AUX_OUT], &g->f.aux_out.view);
    g->bias = dev_vector(&g->m[M_BIAS], &g->f.bias.view);
    g->bias_grad = dev_vector(&g->m[M_GRAD], &g->f.bias_grad.view);
    return true;
}

static void gpu_teardown(gpu_fixture *g)
{
    for (int i = 0; i < M_COUNT; i++)
        mirror_destroy(&g->m[i]);
    support_matmul_teardown(&g->f);
}

/* The epilogue of the case on the device copies. */
static cvf_epilogue fixture_epilogue(gpu_fixture *g)
{
    const support_matmul_case *c = &g->f.spec;
    cvf_epilogue ep = {c->activation, c->bias ? &g->bias : NULL,
                       support_activation_reads_aux_in(c->activation) ? &g->aux_in : NULL,
                       c->aux_out ? &g->aux_out : NULL, c->bias_grad ? &g->bias_grad : NULL};
    return ep;
}

/* Poisons the outputs (host pattern, uploaded), runs the case on ctx, downloads every buffer. */
static cvf_status gpu_run(gpu_fixture *g, cvf_context *ctx)
{
    const support_matmul_case *c = &g->f.spec;
    support_buffer_poison(&g->f.c.buffer);
    mirror_upload(&g->m[M_C]);
    if (c->aux_out) {
        support_buffer_poison(&g->f.aux_out.buffer);
        mirror_upload(&g->m[M_AUX_OUT]);
    }
    if (c->bias_grad) {
        support_buffer_poison(&g->f.bias_grad.buffer);
        mirror_upload(&g->m[M_GRAD]);
    }
    cvf_epilogue ep = fixture_epilogue(g);
    cvf_status status = c->op == SUPPORT_OP_MATMUL_RELU ? cvf_matmul_relu(ctx, &g->a, &g->b, &g->c)
                                                        : cvf_matmul(ctx, &g->a, &g->b, &g->c, &ep);
    cudaError_t err = cudaDeviceSynchronize();
    CHECK(err == cudaSuccess, "%s: after the call: CUDA error %s", g->f.label, cudaGetErrorString(err));
    for (int i = 0; i < M_COUNT; i++)
        mirror_download(&g->m[i]);
    return status;
}

/* Whether the Hopper kernel can take the case (mirrors gemm_sm90.cu's rules for the harness's
 * layouts: f16/bf16 A and B of one dtype, 16-byte aligned unpadded... strides multiple of 8). */
static bool fast_eligible(const support_matmul_case *c)
{
    if (c->a_dtype != c->b_dtype || c->a_dtype == CVF_F32 || c->m == 0 || c->n == 0 || c->k == 0)
        return false;
    if (c->layout & SUPPORT_INPUTS_PADDED)
        return false; /* shifted one element off alignment */
    const bool at = (c->layout & SUPPORT_A_TRANSPOSED) != 0, bt = (c->layout & SUPPORT_B_TRANSPOSED) != 0;
    if (c->layout & SUPPORT_ROWS_16B) /* strides padded to 16 bytes, any extents */
        return true;
    int64_t a_ld = at ? c->m : c->k;
    int64_t b_ld = bt ? c->k : c->n;
    return a_ld % 8 == 0 && b_ld % 8 == 0;
}

/* CVF_CUDA_ENGINE as the tests run it (the suite runs once per engine): "own" expects our sm90
 * kernel on every call it can take; the others may pick cuBLASLt. */
static bool engine_forced(void)
{
    const char *e = getenv("CVF_CUDA_ENGINE");
    return e && strcmp(e, "own") == 0;
}

/* True when CVF_CUDA_ENGINE names a family other than auto: every context then runs a key on the
 * same engine. */
static bool engine_policy_forced(void)
{
    const char *e = getenv("CVF_CUDA_ENGINE");
    return e && *e && strcmp(e, "auto") != 0;
}

/* The engine a call the sm90 kernel can take must run on, under a forced policy. */
static const char *expected_fast_engine(void)
{
    return engine_forced() ? "sm90" : "any fast engine";
}

/* Runs case c on the fast context (checking which kernel ran) and on the simple one. */
static bool run_case(const support_matmul_case *c)
{
    gpu_fixture *g = malloc(sizeof *g);
    if (!CHECK(g != NULL, "out of memory"))
        return false;
    bool ok = gpu_setup(g, c);
    if (ok) {
        cvf_context *ctxs[2] = {fast_ctx, simple_ctx};
        const char *names[2] = {"cuda", "cuda simple"};
        unsigned char *first_grad = NULL;
        for (int v = 0; v < 2; v++) {
            cvf_status status = gpu_run(g, ctxs[v]);
            if (!CHECK(status == CVF_STATUS_SUCCESS, "%s [%s]: returned %s: %s", g->f.label, names[v],
                       cvf_status_string(status), cvf_context_last_error(ctxs[v]))) {
                ok = false;
                continue;
            }
            ok &= support_matmul_check(&g->f, names[v]);
            if (v == 0 && hopper && fast_eligible(c))
                ok &= CHECK(strcmp(cvf_cuda_last_kernel(ctxs[v]), expected_fast_engine()) == 0 ||
                                (!engine_forced() && strcmp(cvf_cuda_last_kernel(ctxs[v]), "simple") != 0),
                            "%s: expected the %s engine, ran '%s'", g->f.label, expected_fast_engine(),
                            cvf_cuda_last_kernel(ctxs[v]));
            if (v == 1 && c->m > 0 && c->n > 0) /* an empty output runs no kernel ("none") */
                ok &= CHECK(strcmp(cvf_cuda_last_kernel(ctxs[v]), "simple") == 0, "%s: simple context ran '%s'",
                            g->f.label, cvf_cuda_last_kernel(ctxs[v]));
            if (v == 0 && c->bias_grad) { /* run-to-run determinism of the bias gradient */
                first_grad = malloc(g->f.bias_grad.buffer.size);
                if (first_grad)
                    memcpy(first_grad, g->f.bias_grad.buffer.bytes, g->f.bias_grad.buffer.size);
                gpu_run(g, ctxs[v]);
                ok &= CHECK(first_grad && memcmp(first_grad, g->f.bias_grad.buffer.bytes,
                                                 g->f.bias_grad.buffer.size) == 0,
                            "%s: bias_grad differs in its bits between two runs", g->f.label);
                free(first_grad);
            }
        }
    }
    gpu_teardown(g);
    free(g);
    return ok;
}

static const support_dtype_combo combos[] = {
    {CVF_F16, CVF_F16, CVF_F16, CVF_F16, CVF_F16},    {CVF_BF16, CVF_BF16, CVF_BF16, CVF_BF16, CVF_BF16},
    {CVF_F16, CVF_F16, CVF_F32, CVF_F16, CVF_F32},    {CVF_BF16, CVF_BF16, CVF_F32, CVF_F32, CVF_BF16},
    {CVF_F32, CVF_F32, CVF_F32, CVF_F32, CVF_F32},    {CVF_F32, CVF_F16, CVF_F16, CVF_BF16, CVF_F32},
};

static const unsigned layouts[] = {
    0,
    SUPPORT_A_TRANSPOSED,
    SUPPORT_B_TRANSPOSED,
    SUPPORT_A_TRANSPOSED | SUPPORT_B_TRANSPOSED,
    SUPPORT_C_PADDED | SUPPORT_VECTORS_STRIDED,
    SUPPORT_C_COLUMN_MAJOR,
    SUPPORT_INPUTS_PADDED | SUPPORT_B_TRANSPOSED | SUPPORT_C_PADDED,
};

/* Section: every epilogue x dtype combination x layout on a shape with tails in M, N and K that
 * the fast kernel takes (strides multiples of 8). */
static void test_cross_product(void)
{
    uint64_t seed = 1000;
    for (size_t d = 0; d < ARRAY_SIZE(combos); d++)
        for (size_t l = 0; l < ARRAY_SIZE(layouts); l++)
            for (int e = 0; e < 64; e++) { /* bit 5: the exact (erf) GELU and its backward */
                if (l > 0 && e % 3 != 0 && e % 32 != 31 && e % 32 != 30)
                    continue; /* all 64 epilogues on the plain layout, a third of them elsewhere */
                support_matmul_case c = support_make_matmul_case(200, 264, 72, &combos[d], e, layouts[l], seed++);
                run_case(&c);
            }
}

/* Section: shapes: ones, primes, tails, sizes around the tile (128 x 256 x 64). */
static void test_shapes(void)
{
    static const int64_t shapes[][3] = {
        {1, 1, 1},     {7, 13, 5},      {127, 129, 65},  {257, 511, 200}, {1, 256, 64},   {128, 256, 64},
        {129, 257, 65}, {136, 8, 8},    {8, 520, 1000},  {1000, 1000, 1000}, {333, 1024, 136}, {2048, 40, 16},
    };
    uint64_t seed = 5000;
    static const int epilogues[] = {1 /* relu */, 2 | 4 | 8 | 16 /* gelu, bias, aux_out, grad */,
                                    3 | 16 /* dgelu, grad */, 0, 2 | 4 | 8 | 32 /* gelu_erf ... */,
                                    3 | 16 | 32 /* dgelu_erf, grad */};
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (size_t d = 0; d < 4; d++)
            for (size_t e = 0; e < ARRAY_SIZE(epilogues); e++)
                for (unsigned l = 0; l < 4; l++) {
                    int64_t volume = shapes[s][0] * shapes[s][1] * shapes[s][2];
                    if (volume > 50000000 && !(e == 0 && l == d))
                        continue; /* the float64 reference is slow: a few cases of the big shapes */
                    if ((e + l + s) % 2 && shapes[s][0] * shapes[s][1] > 100000)
                        continue;
                    support_matmul_case c =
                        support_make_matmul_case(shapes[s][0], shapes[s][1], shapes[s][2], &combos[d], epilogues[e], layouts[l], seed++);
                    run_case(&c);
                }
    /* cvf_matmul_relu, the seed workload, and degenerate K = 0, M = 0, N = 0 */
    support_matmul_case relu = support_make_matmul_case(300, 520, 264, &combos[0], 1, 0, seed++);
    relu.op = SUPPORT_OP_MATMUL_RELU;
    run_case(&relu);
    support_matmul_case k0 = support_make_matmul_case(33, 40, 0, &combos[0], 2 | 4 | 8 | 16, 0, seed++);
    run_case(&k0);
    support_matmul_case m0 = support_make_matmul_case(0, 40, 16, &combos[1], 1 | 16, 0, seed++);
    run_case(&m0);
}

/* Section: 4096 x 4096 x 4096 f16 ReLU (and bf16 plain), every element written, 512 sampled
 * elements against float64 dot products. */
static void test_large(cvf_dtype dtype, cvf_activation act, unsigned layout)
{
    const int64_t n = 4096;
    support_matrix a, b, c;
    support_layout row = {false, 0, 0}, col = {true, 0, 0};
    if (support_matrix_create(&a, dtype, n, n, (layout & SUPPORT_A_TRANSPOSED) ? col : row) ||
        support_matrix_create(&b, dtype, n, n, (layout & SUPPORT_B_TRANSPOSED) ? col : row) ||
        support_matrix_create(&c, dtype, n, n, row)) {
        CHECK(false, "large: out of memory");
        return;
    }
    cvft_rng rng = cvft_rng_make(77 + layout);
    support_matrix_fill(&a, &rng, -1.0, 1.0);
    support_matrix_fill(&b, &rng, -1.0, 1.0);
    mirror ma, mb, mc;
    bool ok = mirror_create(&ma, &a.buffer) && mirror_create(&mb, &b.buffer) && mirror_create(&mc, &c.buffer);
    if (CHECK(ok, "large: device allocation")) {
        cvf_matrix da = dev_matrix(&ma, &a.view), db = dev_matrix(&mb, &b.view), dc = dev_matrix(&mc, &c.view);
        cvf_epilogue ep = {act, NULL, NULL, NULL, NULL};
        cvf_status status = cvf_matmul(fast_ctx, &da, &db, &dc, &ep);
        CHECK(status == CVF_STATUS_SUCCESS, "large: %s", cvf_context_last_error(fast_ctx));
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "large: CUDA error");
        if (hopper)
            CHECK(!engine_forced() || strcmp(cvf_cuda_last_kernel(fast_ctx), "sm90") == 0, "large: ran %s",
                  cvf_cuda_last_kernel(fast_ctx));
        mirror_download(&mc);
        CHECK(support_count_poisoned_in_view(&c) == 0, "large %s: unwritten elements", cvf_dtype_name(dtype));
        double err = 0.0, norm = 0.0;
        for (int s = 0; s < 512; s++) {
            int64_t i = (int64_t)(cvft_rng_uniform(&rng, 0, (double)n)), j = (int64_t)(cvft_rng_uniform(&rng, 0, (double)n));
            double want = 0.0;
            for (int64_t q = 0; q < n; q++)
                want += cvft_matrix_get(&a.view, i, q) * cvft_matrix_get(&b.view, q, j);
            if (act == CVF_ACTIVATION_RELU && want < 0)
                want = 0;
            double got = cvft_matrix_get(&c.view, i, j);
            err += (got - want) * (got - want);
            norm += want * want;
        }
        double rel = sqrt(err / (norm > 0 ? norm : 1));
        CHECK(rel <= cvft_tolerance(dtype), "large %s %s layout %u: sampled relative error %.3g > %.3g",
              cvf_dtype_name(dtype), cvf_activation_name(act), layout, rel, cvft_tolerance(dtype));
        printf("  large 4096^3 %s %s layout %u: sampled relative error %.3g\n", cvf_dtype_name(dtype),
               cvf_activation_name(act), layout, rel);
    }
    mirror_destroy(&ma);
    mirror_destroy(&mb);
    mirror_destroy(&mc);
    support_matrix_destroy(&a);
    support_matrix_destroy(&b);
    support_matrix_destroy(&c);
}

/* Section: error statuses and messages on a CUDA context (validation never reads device data). */
static void test_errors(void)
{
    void *mem = NULL;
    CHECK(cudaMalloc(&mem, 4096) == cudaSuccess, "errors: cudaMalloc");
    cvf_matrix a = cvf_matrix_row_major(mem, CVF_F16, 8, 8), b = a, c = a;
    cvf_matrix c_wrong = cvf_matrix_row_major((char *)mem + 2048, CVF_F16, 8, 7);
    cvf_matrix c_ok = cvf_matrix_row_major((char *)mem + 2048, CVF_F16, 8, 8);
    cvf_status status = cvf_matmul(fast_ctx, NULL, &b, &c_ok, NULL);
    CHECK(status == CVF_STATUS_NULL_POINTER, "errors: NULL a gave %s", cvf_status_string(status));
    CHECK(strstr(cvf_context_last_error(fast_ctx), "a:") != NULL, "errors: message '%s'",
          cvf_context_last_error(fast_ctx));
    status = cvf_matmul(fast_ctx, &a, &b, &c_wrong, NULL);
    CHECK(status == CVF_STATUS_SHAPE_MISMATCH, "errors: shape mismatch gave %s", cvf_status_string(status));
    status = cvf_matmul(fast_ctx, &a, &b, &c, NULL);
    CHECK(status == CVF_STATUS_ALIASED_OUTPUT, "errors: aliased output gave %s", cvf_status_string(status));
    cvf_matrix f64 = cvf_matrix_row_major(mem, CVF_F64, 8, 8);
    status = cvf_matmul(fast_ctx, &f64, &b, &c_ok, NULL);
    CHECK(status == CVF_STATUS_UNSUPPORTED, "errors: f64 gave %s", cvf_status_string(status));
    status = cvf_matmul(fast_ctx, &a, &b, &c_ok, NULL);
    CHECK(status == CVF_STATUS_SUCCESS && cvf_context_last_error(fast_ctx)[0] == '\0', "errors: good call gave %s",
          cvf_status_string(status));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "errors: CUDA error");
    cvf_context *bad = NULL;
    cvf_context_options options = {CVF_DEVICE_CUDA, 0, 999, NULL};
    status = cvf_context_create(&options, &bad);
    CHECK(status == CVF_STATUS_UNSUPPORTED && bad == NULL, "errors: device 999 gave %s", cvf_status_string(status));
    cudaFree(mem);
}

/* Section: cvf_column_sum against the reference; bit-identical twice. */
static void test_column_sum(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {1000, 37}, {513, 1024}, {0, 5}};
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
        support_matrix x;
        support_vector out;
        support_layout layout = {s % 2 == 1, 3, 0};
        if (support_matrix_create(&x, CVF_BF16, shapes[s][0], shapes[s][1], layout) ||
            support_vector_create(&out, CVF_F32, shapes[s][1], 1, 0)) {
            CHECK(false, "column sum: out of memory");
            return;
        }
        cvft_rng rng = cvft_rng_make(900 + s);
        support_matrix_fill(&x, &rng, -1, 1);
        cvf_matrix x64 = {0};
        cvf_vector want = {0};
        CHECK(cvft_matrix_to_f64(&x.view, &x64) == 0 && cvft_vector_alloc(CVF_F64, shapes[s][1], &want) == 0, "oom");
        CHECK(cvf_column_sum(reference_ctx, &x64, &want) == CVF_STATUS_SUCCESS, "column sum reference");
        mirror mx, mo;
        mirror_create(&mx, &x.buffer);
        mirror_create(&mo, &out.buffer);
        cvf_matrix dx = dev_matrix(&mx, &x.view);
        cvf_vector dout = dev_vector(&mo, &out.view);
        unsigned char first[64 * 1024];
        for (int run = 0; run < 2; run++) {
            support_buffer_poison(&out.buffer);
            mirror_upload(&mo);
            cvf_status status = cvf_column_sum(fast_ctx, &dx, &dout);
            CHECK(status == CVF_STATUS_SUCCESS, "column sum: %s", cvf_context_last_error(fast_ctx));
            mirror_download(&mo);
            char label[64];
            snprintf(label, sizeof label, "column sum %lld x %lld", (long long)shapes[s][0], (long long)shapes[s][1]);
            support_check_vector_output(label, "out", &out, &want);
            if (run == 0 && out.buffer.size <= sizeof first)
                memcpy(first, out.buffer.bytes, out.buffer.size);
            else if (out.buffer.size <= sizeof first)
                CHECK(memcmp(first, out.buffer.bytes, out.buffer.size) == 0, "%s: not bit-identical", label);
        }
        mirror_destroy(&mx);
        mirror_destroy(&mo);
        free(x64.data);
        free(want.data);
        support_matrix_destroy(&x);
        support_vector_destroy(&out);
    }
}

/* ---- MLP forward and backward against the float64 reference --------------------------------- */
/*
 * Every output of cvf_mlp_forward (fc1_output, gelu_output, output) and cvf_mlp_backward
 * (grad_hidden_state, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias) on a CUDA
 * context is compared with the float64 reference device run on exact float64 copies of the same
 * inputs, twice over:
 *
 *  - the relative Frobenius error within cvft_tolerance (f32 1e-5, f16 2e-3, bf16 1e-2), as in every
 *    other test, with every element written and nothing outside the view touched
 *    (support_check_*_output). On CUDA grad_fc1_output is rounded once more than on the CPU (to
 *    the 16-bit storage dtype, before K2-2 and K2-3): an rms relative error of u / sqrt(3) in the
 *    inputs of those products, about 1.1e-3 in bf16 and 2.8e-4 in f16, plus as much again for the
 *    final rounding: ~1.6e-3 and ~4e-4, well inside 1e-2 and 2e-3. f32 keeps an f32 workspace.
 *  - every element within its own bound (the *_bounds functions below), so that an error confined to
 *    a few elements (one tile, one row, a K slice of one tile, an element off by one) cannot hide in
 *    the norm of a large output.
 *
 * The per-element bound. u(T) is the unit roundoff of T (f32 2^-24, f16 2^-11, bf16 2^-8).
 *  - own: the output's own fp32 accumulation of K terms plus a bias, in any order, any K split:
 *    acc(K) ||a|| ||b||, acc(K) = 4 u(f32) min(K + 2, 8 sqrt(K + 2)). K + 2 is the worst case (+2 for
 *    the bias and a slice combine); 8 sqrt(K + 2) the probabilistic bound of Higham & Mary (2019) at
 *    lambda = 8 (fails with probability ~2 exp(-32)), tighter from K = 62; the 4 covers tensor
 *    cores, whose accumulation truncates. ||a|| ||b|| >= sum |a_p b_p| (Cauchy-Schwarz; 1.33x on
 *    uniform data) costs O(SH + SI + HI) instead of one more product per output.
 *  - spread: the errors e_p of an intermediate a product reads (gelu_output before fc2;
 *    grad_fc1_output before K2-2 and K2-3, held in the dtype the context's plan names): each is
 *    bounded, |e_p| <= B_p + u |x_p| / sqrt(3) in standard deviation (B_p: its own fp32
 *    accumulation as above, GELU / GELU' in fp32; then its rounding), and the other operand b is
 *    uniform, symmetric and independent of them, so by Hoeffding sum e_p b_p <= 8 sqrt(sum sd_p^2)
 *    max |b| but with probability 2 exp(-32). grad_fc1_bias sums G itself: its errors are symmetric
 *    because grad_output's are (flipping a row of it flips them). A worst-case bound here, sum
 *    |e_p| |b_p|, would be sqrt(K) times looser (the bound of the forward's output at I = 3072 was
 *    97% of the answer's rms with it).
 *  - GELU and GELU' evaluated in fp32: 8 FLT_EPSILON (1 + max(0, -2u)) |value| (test_vec's bound, its
 *    ratio 4, doubled); |gelu'| <= 1.13 carries fc1's error into gelu_output.
 *  The check is |got - want| <= 2 own + spread + u(out) |want| + half the smallest subnormal of out
 *  (the 2 covers the second-order terms left out). An output rounded to nearest can sit a full
 *  u(out) |want| off, so |err| / bound close to 1 in bf16 / f16 is the rounding, not a near miss.
 *
 * How tight: a sign error, a neighbour's value, a missing K slice or a transposed operand moves an
 * element by about its own size; rms(bound) / rms(answer) is at most ~7% in bf16, ~4.5% in f16
 * and f32 on these cases (--host-check measured; each case's summary line prints it), and
 * mlp_self_check negates the largest element of each output and demands the check catch exactly
 * that element.
 *
 * Each case runs on: the fast context (twice: every output bit-identical, the bias gradients
 * included), the simple kernel's context, and for the stream cases a context on a user stream
 * created non-blocking, synchronised with cudaStreamSynchronize on that stream only and read back
 * with copies ordered on it (also with no host synchronisation between the call and the copies);
 * side streams not joined into the caller's stream would leave poison in the copy. That run is
 * also captured into a CUDA graph, which fails deterministically (cudaErrorStreamCaptureUnjoined)
 * when forked work is not joined. test_cuda --host-check runs the same machinery on the CPU
 * backend (and on the CUDA plan's composition run on the CPU, grad_fc1_output in the storage
 * dtype) without a GPU: it checks the bounds themselves.
 */

#define MLP_MAX_TENSORS 11
#define MLP_U32 5.9604644775390625e-8 /* 2^-24 */
#define MLP_ACC_MARGIN 4.0            /* over the IEEE fp32 accumulation bound */
#define MLP_LAMBDA 8.0                /* Hoeffding and probabilistic rounding: P(fail) ~ 2 exp(-32) */
#define MLP_GELU_SLOPE 1.13           /* max |gelu_tanh'(x)| = 1.1289 */

static cvf_context *cpu_ctx;
static cvf_context *stream_ctx; /* a CUDA context on user_stream */
static cudaStream_t user_stream;

/* The dimensions a tensor's shape is made of. */
typedef enum mlp_dim { DIM_S = 0, DIM_H = 1, DIM_I = 2, DIM_ONE = 3 } mlp_dim;

/* One named tensor of an MLP call; a vector is (1 x cols). */
typedef struct mlp_spec {
    const char *name;
    mlp_dim rows, cols;
    bool is_vector, is_output;
} mlp_spec;

enum { FW_X, FW_W1, FW_B1, FW_W2, FW_B2, FW_FC1, FW_GELU, FW_Y, FW_COUNT };
static const mlp_spec forward_specs[FW_COUNT] = {
    {"hidden_state", DIM_S, DIM_H, false, false}, {"fc1_weight", DIM_I, DIM_H, false, false},
    {"fc1_bias", DIM_ONE, DIM_I, true, false},    {"fc2_weight", DIM_H, DIM_I, false, false},
    {"fc2_bias", DIM_ONE, DIM_H, true, false},    {"fc1_output", DIM_S, DIM_I, false, true},
    {"gelu_output", DIM_S, DIM_I, false, true},   {"output", DIM_S, DIM_H, false, true},
};

enum { BW_GO, BW_X, BW_W1, BW_W2, BW_FC1, BW_GELU, BW_GX, BW_GW1, BW_GB1, BW_GW2, BW_GB2, BW_COUNT };
static const mlp_spec backward_specs[BW_COUNT] = {
    {"grad_output", DIM_S, DIM_H, false, false},      {"hidden_state", DIM_S, DIM_H, false, false},
    {"fc1_weight", DIM_I, DIM_H, false, false},       {"fc2_weight", DIM_H, DIM_I, false, false},
    {"fc1_output", DIM_S, DIM_I, false, false},       {"gelu_output", DIM_S, DIM_I, false, false},
    {"grad_hidden_state", DIM_S, DIM_H, false, true}, {"grad_fc1_weight", DIM_I, DIM_H, false, true},
    {"grad_fc1_bias", DIM_ONE, DIM_I, true, true},    {"grad_fc2_weight", DIM_H, DIM_I, false, true},
    {"grad_fc2_bias", DIM_ONE, DIM_H, true, true},
};

/* One tensor: its guarded buffer (m or v), float64 twin, bound and device copy. */
typedef struct mlp_tensor {
    support_matrix m;     /* a matrix */
    support_vector v;     /* a vector */
    cvf_matrix f64;       /* dense float64: an input's exact copy, an output's reference answer */
    cvf_matrix bound;     /* an output's per-element bound (dense float64, f64's shape) */
    mirror dev;           /* the device copy of the whole guarded buffer */
    unsigned char *first; /* an output's buffer after the first run (determinism) */
} mlp_tensor;

/* One MLP call under test with its answers. */
typedef struct mlp_fixture {
    const mlp_spec *specs;
    int count;
    bool backward;
    int64_t dims[4]; /* S, H, I, 1 */
    cvf_dtype dtype;
    mlp_tensor t[MLP_MAX_TENSORS];
    cvf_matrix p64;     /* backward: grad_output @ fc2_weight in float64 (for the bounds) */
    double bounds_for;  /* backward: the unit roundoff of grad_fc1_output the bounds hold for */
    double looseness;   /* the largest rms(bound) / rms(answer) over the outputs */
    double worst_ratio; /* the largest |got - want| / bound seen */
    double worst_frob;  /* the largest relative Frobenius error / tolerance seen */
    char worst_where[160];
    char label[128];
} mlp_fixture;

/* Which views of the tensors a call takes. */
typedef enum view_kind { VIEW_HOST, VIEW_DEVICE, VIEW_F64 } view_kind;

/* How a run waits for its results and reads them back. */
typedef enum sync_mode {
    SYNC_DEVICE, /* cudaDeviceSynchronize, then cudaMemcpy */
    SYNC_STREAM, /* cudaStreamSynchronize(stream) only, then copies ordered on stream */
    SYNC_NONE,   /* copies ordered on stream straight after the call, then cudaStreamSynchronize */
    SYNC_HOST    /* a CPU context on the host views (--host-check) */
} sync_mode;

/* A context the cases run on and how. */
typedef struct mlp_runner {
    const char *name;
    cvf_context *ctx;
    cudaStream_t stream;
    sync_mode sync;
    bool compose; /* host: the CUDA plan's composition on ctx, grad_fc1_output in the storage dtype */
} mlp_runner;

/* Which runs a case gets. */
enum { MLP_FORWARD = 1, MLP_BACKWARD = 2, MLP_SIMPLE = 4, MLP_STREAM = 8, MLP_QUICK = 16 };

/* An MLP case: shape, dtype and runs. */
typedef struct mlp_case {
    int64_t s, h, i;
    cvf_dtype dtype;
    unsigned runs;
} mlp_case;

/* ---- float64 GELU and its fp32 error ---- */

/* 2u = 2 k (x + c x^3). */
static double gelu_2u(double x)
{
    return 2.0 * CVF_GELU_K * (x + CVF_GELU_C * x * x * x);
}

/* gelu_tanh(x) = x sigmoid(2u) in float64. */
static double gelu64(double x)
{
    return x / (1.0 + exp(-gelu_2u(x)));
}

/* gelu_tanh'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2) in float64; *scale gets |s| + |second term|. */
static double dgelu64(double x, double *scale)
{
    double t = gelu_2u(x);
    double s = 1.0 / (1.0 + exp(-t)), one_minus_s = 1.0 / (1.0 + exp(t));
    double second = 2.0 * x * s * one_minus_s * CVF_GELU_K * (1.0 + 3.0 * CVF_GELU_C * x * x);
    *scale = fabs(s) + fabs(second);
    return s + second;
}

/* The error of an fp32 evaluation of gelu or gelu' at x whose result has size scale. */
static double gelu_eval_error(double x, double scale)
{
    double t = gelu_2u(x);
    double condition = 1.0 + (t < 0.0 && isfinite(t) ? -t : 0.0);
    return 8.0 * FLT_EPSILON * condition * scale + ldexp(1.0, -140);
}

/* acc(K): the bound factor, times sum |a b|, of a K-term fp32 dot product plus a bias. */
static double acc_factor(int64_t k)
{
    double terms = (double)(k + 2);
    return MLP_ACC_MARGIN * MLP_U32 * fmin(terms, MLP_LAMBDA * sqrt(terms));
}

/* The final bound of an output element of dtype with answer want: own is the bound of the
 * output's own fp32 accumulation, spread the Hoeffding bound of its inputs' errors. */
static double final_bound(double own, double spread, double want, cvf_dtype dtype)
{
    return 2.0 * own + spread + support_unit_roundoff(dtype) * fabs(want) + support_underflow_floor(dtype);
}

/* ---- dense float64 helpers ---- */

/* Element (i, j) of a dense float64 matrix. */
static double *at64(const cvf_matrix *m, int64_t i, int64_t j)
{
    return (double *)m->data + i * m->row_stride + j * m->col_stride;
}

/* The 2-norms (or, when max_abs, the largest magnitudes) of the rows of m (or of its columns when
 * by_column) into out. */
static void line_norms(const cvf_matrix *m, bool by_column, bool max_abs, double *out)
{
    int64_t lines = by_column ? m->cols : m->rows;
    for (int64_t l = 0; l < lines; l++)
        out[l] = 0.0;
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++) {
            double v = *at64(m, i, j);
            double *o = &out[by_column ? j : i];
            *o = max_abs ? fmax(*o, fabs(v)) : *o + v * v;
        }
    for (int64_t l = 0; l < lines && !max_abs; l++)
        out[l] = sqrt(out[l]);
}

/* Allocates count zeroed doubles into *out; false (with a failed check) when out of memory. */
static bool alloc_doubles(double **out, int64_t count, const char *label)
{
    *out = calloc((size_t)(count > 0 ? count : 1), sizeof(double));
    return CHECK(*out != NULL, "%s: out of memory for the bounds", label);
}

/* Frees an array of count pointers. */
static void free_all(double **list, int count)
{
    for (int i = 0; i < count; i++)
        free(list[i]);
}

/* Records rms(bound) / rms(answer) of output n as the fixture's looseness when larger. */
static void note_looseness(mlp_fixture *f, int n)
{
    const cvf_matrix *b = &f->t[n].bound, *w = &f->t[n].f64;
    double bb = 0.0, ww = 0.0;
    for (int64_t i = 0; i < w->rows; i++)
        for (int64_t j = 0; j < w->cols; j++) {
            bb += *at64(b, i, j) * *at64(b, i, j);
            ww += *at64(w, i, j) * *at64(w, i, j);
        }
    if (ww > 0.0 && sqrt(bb / ww) > f->looseness)
        f->looseness = sqrt(bb / ww);
}

/* ---- bounds ---- */

/* The per-element bounds of the forward's outputs: fc1_output (fp32 accumulation over H plus the
 * bias), gelu_output (fc1's error through |gelu'| <= 1.13, plus GELU in fp32), output (fp32
 * accumulation over I, plus the spread of gelu_output's errors, its rounding included). */
static bool forward_bounds(mlp_fixture *f)
{
    const int64_t S = f->dims[0], H = f->dims[1], I = f->dims[2];
    const double u = support_unit_roundoff(f->dtype), acc_h = acc_factor(H), acc_i = acc_factor(I);
    enum { XR, W1R, W2R, W2MAX, ERR2, ABS2, COUNT };
    double *a[COUNT] = {NULL};
    const int64_t sizes[COUNT] = {S, I, H, H, S, S};
    bool ok = true;
    for (int k = 0; k < COUNT && ok; k++)
        ok = alloc_doubles(&a[k], sizes[k], f->label);
    if (ok) {
        const cvf_matrix *b1 = &f->t[FW_B1].f64, *b2 = &f->t[FW_B2].f64, *fc1 = &f->t[FW_FC1].f64;
        const cvf_matrix *gelu = &f->t[FW_GELU].f64, *y = &f->t[FW_Y].f64;
        line_norms(&f->t[FW_X].f64, false, false, a[XR]);
        line_norms(&f->t[FW_W1].f64, false, false, a[W1R]);
        line_norms(&f->t[FW_W2].f64, false, false, a[W2R]);
        line_norms(&f->t[FW_W2].f64, false, true, a[W2MAX]);
        for (int64_t s = 0; s < S; s++)
            for (int64_t i = 0; i < I; i++) {
                double x = *at64(fc1, s, i), g = *at64(gelu, s, i);
                double e_fc1 = acc_h * (a[XR][s] * a[W1R][i] + fabs(*at64(b1, 0, i)));
                double e_gelu = MLP_GELU_SLOPE * e_fc1 + gelu_eval_error(x, fabs(g));
                double sigma = e_gelu + u * fabs(g) / sqrt(3.0), stored = (fabs(g) + e_gelu) * (1 + u);
                *at64(&f->t[FW_FC1].bound, s, i) = final_bound(e_fc1, 0.0, x, f->dtype);
                *at64(&f->t[FW_GELU].bound, s, i) = final_bound(e_gelu, 0.0, g, f->dtype);
                a[ERR2][s] += sigma * sigma;
                a[ABS2][s] += stored * stored;
            }
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                double own = acc_i * (sqrt(a[ABS2][s]) * a[W2R][h] + fabs(*at64(b2, 0, h)));
                double spread = MLP_LAMBDA * sqrt(a[ERR2][s]) * a[W2MAX][h];
                *at64(&f->t[FW_Y].bound, s, h) = final_bound(own, spread, *at64(y, s, h), f->dtype);
            }
    }
    free_all(a, COUNT);
    return ok;
}

/* Per-line sums of the backward's intermediate grad_fc1_output G = P * gelu'(fc1_output) as the
 * device holds it, over tokens s for each column i (the _C arrays) and over i for each token (the
 * _R arrays): ERR2, squares of the standard-deviation bound of its error (P's fp32 accumulation over
 * H, gelu' in fp32, its rounding to the workspace dtype); ABS, a bound of its magnitude. */
enum { GOR, W2C, ABS_C, ERR2_C, ABS2_C, ERR2_R, ABS2_R, G_SUMS };

/* Fills the G_SUMS arrays for grad_fc1_output rounded with unit roundoff uw. */
static void grad_fc1_output_sums(const mlp_fixture *f, double uw, double **a)
{
    const int64_t S = f->dims[0], I = f->dims[2];
    const double acc_h = acc_factor(f->dims[1]);
    line_norms(&f->t[BW_GO].f64, false, false, a[GOR]);
    line_norms(&f->t[BW_W2].f64, true, false, a[W2C]);
    for (int64_t s = 0; s < S; s++)
        for (int64_t i = 0; i < I; i++) {
            double p = *at64(&f->p64, s, i), x = *at64(&f->t[BW_FC1].f64, s, i), scale;
            double d = dgelu64(x, &scale), ed = gelu_eval_error(x, scale);
            double g = p * d, ep = acc_h * a[GOR][s] * a[W2C][i];
            double eg = (fabs(d) + ed) * ep + fabs(p) * ed;
            double sigma = eg + uw * fabs(g) / sqrt(3.0), abs_g = (fabs(g) + eg) * (1 + uw);
            a[ABS_C][i] += abs_g;
            a[ERR2_C][i] += sigma * sigma;
            a[ABS2_C][i] += abs_g * abs_g;
            a[ERR2_R][s] += sigma * sigma;
            a[ABS2_R][s] += abs_g * abs_g;
        }
}

/* The bounds of grad_fc1_bias (fp32 sums over S of G, and the spread of G's errors),
 * grad_fc1_weight = G^T @ hidden_state and grad_hidden_state = G @ fc1_weight (fp32 accumulation
 * over S or I, and the spread of G's errors through the other operand). */
static bool grad_fc1_bounds(mlp_fixture *f, double **a)
{
    const int64_t S = f->dims[0], H = f->dims[1], I = f->dims[2];
    const double acc_s = acc_factor(S), acc_i = acc_factor(I);
    enum { XC, XMAX, W1C, W1MAX, COUNT };
    double *c[COUNT] = {NULL};
    bool ok = true;
    for (int k = 0; k < COUNT && ok; k++)
        ok = alloc_doubles(&c[k], H, f->label);
    if (ok) {
        line_norms(&f->t[BW_X].f64, true, false, c[XC]);
        line_norms(&f->t[BW_X].f64, true, true, c[XMAX]);
        line_norms(&f->t[BW_W1].f64, true, false, c[W1C]);
        line_norms(&f->t[BW_W1].f64, true, true, c[W1MAX]);
        for (int64_t i = 0; i < I; i++) {
            double spread = MLP_LAMBDA * sqrt(a[ERR2_C][i]);
            *at64(&f->t[BW_GB1].bound, 0, i) =
                final_bound(acc_s * a[ABS_C][i], spread, *at64(&f->t[BW_GB1].f64, 0, i), f->dtype);
            for (int64_t j = 0; j < H; j++)
                *at64(&f->t[BW_GW1].bound, i, j) =
                    final_bound(acc_s * sqrt(a[ABS2_C][i]) * c[XC][j], spread * c[XMAX][j],
                                *at64(&f->t[BW_GW1].f64, i, j), f->dtype);
        }
        for (int64_t s = 0; s < S; s++)
            for (int64_t j = 0; j < H; j++)
                *at64(&f->t[BW_GX].bound, s, j) =
                    final_bound(acc_i * sqrt(a[ABS2_R][s]) * c[W1C][j], MLP_LAMBDA * sqrt(a[ERR2_R][s]) * c[W1MAX][j],
                                *at64(&f->t[BW_GX].f64, s, j), f->dtype);
    }
    free_all(c, COUNT);
    return ok;
}

/* The bounds of grad_fc2_weight = grad_output^T @ gelu_output and grad_fc2_bias = column sums of
 * grad_output: fp32 accumulation over S of the exact inputs. */
static bool grad_fc2_bounds(mlp_fixture *f)
{
    const int64_t H = f->dims[1], I = f->dims[2];
    const double acc_s = acc_factor(f->dims[0]);
    double *goc = NULL, *gelc = NULL;
    bool ok = alloc_doubles(&goc, H, f->label) && alloc_doubles(&gelc, I, f->label);
    if (ok) {
        line_norms(&f->t[BW_GO].f64, true, false, goc);
        line_norms(&f->t[BW_GELU].f64, true, false, gelc);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < I; i++)
                *at64(&f->t[BW_GW2].bound, h, i) =
                    final_bound(acc_s * goc[h] * gelc[i], 0.0, *at64(&f->t[BW_GW2].f64, h, i), f->dtype);
        const cvf_matrix *go = &f->t[BW_GO].f64;
        for (int64_t h = 0; h < H; h++) {
            double sum = 0.0;
            for (int64_t s = 0; s < go->rows; s++)
                sum += fabs(*at64(go, s, h));
            *at64(&f->t[BW_GB2].bound, 0, h) = final_bound(acc_s * sum, 0.0, *at64(&f->t[BW_GB2].f64, 0, h), f->dtype);
        }
    }
    free(goc);
    free(gelc);
    return ok;
}

/* The per-element bounds of the backward's outputs for grad_fc1_output held with unit roundoff uw
 * (the plan's workspace dtype). */
static bool backward_bounds(mlp_fixture *f, double uw)
{
    const int64_t S = f->dims[0], I = f->dims[2];
    double *a[G_SUMS] = {NULL};
    const int64_t sizes[G_SUMS] = {S, I, I, I, I, S, S};
    bool ok = true;
    for (int k = 0; k < G_SUMS && ok; k++)
        ok = alloc_doubles(&a[k], sizes[k], f->label);
    if (ok) {
        grad_fc1_output_sums(f, uw, a);
        ok = grad_fc1_bounds(f, a) && grad_fc2_bounds(f);
    }
    free_all(a, G_SUMS);
    return ok;
}

/* Makes the bounds hold for grad_fc1_output's unit roundoff uw (the forward's do not depend on it). */
static bool ensure_bounds(mlp_fixture *f, double uw)
{
    if (f->bounds_for == uw)
        return true;
    bool ok = f->backward ? backward_bounds(f, uw) : forward_bounds(f);
    f->bounds_for = ok ? uw : -1.0;
    f->looseness = 0.0;
    for (int n = 0; n < f->count && ok; n++)
        if (f->specs[n].is_output)
            note_looseness(f, n);
    return ok;
}

/* ---- fixture ---- */

/* The guarded buffer of tensor n. */
static support_buffer *tensor_buffer(mlp_fixture *f, int n)
{
    return f->specs[n].is_vector ? &f->t[n].v.buffer : &f->t[n].m.buffer;
}

/* Tensor n's host view as a matrix (a vector as one row). */
static cvf_matrix tensor_view(const mlp_fixture *f, int n)
{
    return f->specs[n].is_vector ? support_vector_as_row(&f->t[n].v.view) : f->t[n].m.view;
}

/* Returns matrix tensor n's view of the given kind. */
static cvf_matrix mlp_matrix(const mlp_fixture *f, int n, view_kind kind)
{
    const mlp_tensor *t = &f->t[n];
    if (kind == VIEW_F64)
        return t->f64;
    return kind == VIEW_DEVICE ? dev_matrix(&t->dev, &t->m.view) : t->m.view;
}

/* Returns vector tensor n's view of the given kind. */
static cvf_vector mlp_vector(const mlp_fixture *f, int n, view_kind kind)
{
    const mlp_tensor *t = &f->t[n];
    if (kind == VIEW_F64)
        return cvf_vector_dense(t->f64.data, CVF_F64, t->f64.cols);
    return kind == VIEW_DEVICE ? dev_vector(&t->dev, &t->v.view) : t->v.view;
}

/* The forward's arguments in views of the given kind. */
static cvf_mlp_forward_args forward_args(const mlp_fixture *f, view_kind k)
{
    cvf_mlp_forward_args a = {mlp_matrix(f, FW_X, k),    mlp_matrix(f, FW_W1, k), mlp_vector(f, FW_B1, k),
                              mlp_matrix(f, FW_W2, k),   mlp_vector(f, FW_B2, k), mlp_matrix(f, FW_FC1, k),
                              mlp_matrix(f, FW_GELU, k), mlp_matrix(f, FW_Y, k),  CVF_GELU_TANH, {0}};
    return a;
}

/* The backward's arguments in views of the given kind. */
static cvf_mlp_backward_args backward_args(const mlp_fixture *f, view_kind k)
{
    cvf_mlp_backward_args a = {mlp_matrix(f, BW_GO, k),  mlp_matrix(f, BW_X, k),   mlp_matrix(f, BW_W1, k),
                               mlp_matrix(f, BW_W2, k),  mlp_matrix(f, BW_FC1, k), mlp_matrix(f, BW_GELU, k),
                               mlp_matrix(f, BW_GX, k),  mlp_matrix(f, BW_GW1, k), mlp_vector(f, BW_GB1, k),
                               mlp_matrix(f, BW_GW2, k), mlp_vector(f, BW_GB2, k), CVF_GELU_TANH, {0}};
    return a;
}

/* Runs the fixture's call on ctx with views of the given kind. */
static cvf_status mlp_call(const mlp_fixture *f, cvf_context *ctx, view_kind kind)
{
    if (f->backward) {
        cvf_mlp_backward_args a = backward_args(f, kind);
        return cvf_mlp_backward(ctx, &a);
    }
    cvf_mlp_forward_args a = forward_args(f, kind);
    return cvf_mlp_forward(ctx, &a);
}

/* The CUDA backward's composition on a CPU context with grad_fc1_output rounded to the storage
 * dtype between K1 and K2-2 / K2-3: --host-check's model of the device's roundings. */
static cvf_status compose_backward(const mlp_fixture *f, cvf_context *ctx)
{
    cvf_mlp_backward_args a = backward_args(f, VIEW_HOST);
    cvf_matrix g;
    if (cvft_matrix_alloc(f->dtype, f->dims[0], f->dims[2], &g) != 0)
        return CVF_STATUS_OUT_OF_MEMORY;
    cvf_epilogue k1 = {CVF_ACTIVATION_DGELU_TANH, NULL, &a.fc1_output, NULL, &a.grad_fc1_bias};
    cvf_matrix go_t = cvf_matrix_transpose(a.grad_output), g_t = cvf_matrix_transpose(g);
    cvf_status status = cvf_matmul(ctx, &a.grad_output, &a.fc2_weight, &g, &k1);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ctx, &go_t, &a.gelu_output, &a.grad_fc2_weight, NULL);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ctx, &g_t, &a.hidden_state, &a.grad_fc1_weight, NULL);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_matmul(ctx, &g, &a.fc1_weight, &a.grad_hidden_state, NULL);
    if (status == CVF_STATUS_SUCCESS)
        status = cvf_column_sum(ctx, &a.grad_output, &a.grad_fc2_bias);
    free(g.data);
    return status;
}

/* Frees everything a fixture holds. */
static void mlp_teardown(mlp_fixture *f)
{
    for (int n = 0; n < f->count; n++) {
        mlp_tensor *t = &f->t[n];
        mirror_destroy(&t->dev);
        support_matrix_destroy(&t->m);
        support_vector_destroy(&t->v);
        free(t->f64.data);
        free(t->bound.data);
        free(t->first);
    }
    free(f->p64.data);
    memset(f, 0, sizeof *f);
}

/* Allocates tensor n (poisoned), its float64 twin and, for an output, its bound. Returns 0 or -1. */
static int tensor_create(mlp_fixture *f, int n)
{
    const mlp_spec *s = &f->specs[n];
    mlp_tensor *t = &f->t[n];
    int64_t rows = f->dims[s->rows], cols = f->dims[s->cols];
    support_layout dense = {false, 0, 0};
    int rc = s->is_vector ? support_vector_create(&t->v, f->dtype, cols, 1, 0)
                          : support_matrix_create(&t->m, f->dtype, rows, cols, dense);
    rc |= cvft_matrix_alloc(CVF_F64, rows, cols, &t->f64);
    if (s->is_output)
        rc |= cvft_matrix_alloc(CVF_F64, rows, cols, &t->bound);
    return rc;
}

/* Fills the forward's inputs: hidden_state and fc2 uniform in [-1, 1), fc1_weight in
 * [-6/sqrt(H), 6/sqrt(H)) and fc1_bias in [-2, 2) so that fc1_output spreads over GELU's bend. */
static void fill_forward(mlp_fixture *f, cvft_rng *rng)
{
    double w1 = support_gelu_a_range(f->dims[1]);
    support_matrix_fill(&f->t[FW_X].m, rng, -1.0, 1.0);
    support_matrix_fill(&f->t[FW_W1].m, rng, -w1, w1);
    support_vector_fill(&f->t[FW_B1].v, rng, -2.0, 2.0);
    support_matrix_fill(&f->t[FW_W2].m, rng, -1.0, 1.0);
    support_vector_fill(&f->t[FW_B2].v, rng, -1.0, 1.0);
}

/* Fills the backward's inputs as test_ops does: uniform in [-1, 1), fc1_output in [-4, 4) and
 * gelu_output = gelu_tanh(fc1_output), as a forward pass leaves them. */
static void fill_backward(mlp_fixture *f, cvft_rng *rng)
{
    for (int n = 0; n < BW_GX; n++)
        support_matrix_fill(&f->t[n].m, rng, -1.0, 1.0);
    support_matrix_fill(&f->t[BW_FC1].m, rng, -4.0, 4.0);
    const cvf_matrix *fc1 = &f->t[BW_FC1].m.view, *gelu = &f->t[BW_GELU].m.view;
    for (int64_t i = 0; i < fc1->rows; i++)
        for (int64_t j = 0; j < fc1->cols; j++)
            cvft_matrix_set(gelu, i, j, gelu64(cvft_matrix_get(fc1, i, j)));
}

/* Copies every input into its float64 twin and saves its buffer. Returns 0 or -1. */
static int snapshot_inputs(mlp_fixture *f)
{
    int rc = 0;
    for (int n = 0; n < f->count; n++) {
        if (f->specs[n].is_output)
            continue;
        cvf_matrix view = tensor_view(f, n);
        for (int64_t i = 0; i < view.rows; i++)
            for (int64_t j = 0; j < view.cols; j++)
                *at64(&f->t[n].f64, i, j) = cvft_matrix_get(&view, i, j);
        rc |= support_buffer_save(tensor_buffer(f, n));
    }
    return rc;
}

/* Computes the reference's answers (and, for the backward, grad_output @ fc2_weight). */
static bool mlp_reference(mlp_fixture *f)
{
    cvf_status status = mlp_call(f, reference_ctx, VIEW_F64);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: the reference device returned %s: %s", f->label,
               cvf_status_string(status), cvf_context_last_error(reference_ctx)))
        return false;
    if (!f->backward)
        return true;
    if (!CHECK(cvft_matrix_alloc(CVF_F64, f->dims[0], f->dims[2], &f->p64) == 0, "%s: out of memory", f->label))
        return false;
    status = cvf_matmul(reference_ctx, &f->t[BW_GO].f64, &f->t[BW_W2].f64, &f->p64, NULL);
    return CHECK(status == CVF_STATUS_SUCCESS, "%s: reference grad_output @ fc2_weight: %s", f->label,
                 cvf_context_last_error(reference_ctx));
}

/* Builds case c: tensors, inputs, their float64 copies, device copies and the reference's
 * answers. Returns whether it is ready to run (on failure it has been checked and torn down). */
static bool mlp_setup(mlp_fixture *f, const mlp_case *c, bool backward, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->backward = backward;
    f->specs = backward ? backward_specs : forward_specs;
    f->count = backward ? BW_COUNT : FW_COUNT;
    f->dims[0] = c->s, f->dims[1] = c->h, f->dims[2] = c->i, f->dims[3] = 1;
    f->dtype = c->dtype;
    f->bounds_for = -1.0;
    snprintf(f->label, sizeof f->label, "%s S=%lld H=%lld I=%lld %s seed=%llu",
             backward ? "mlp_backward" : "mlp_forward", (long long)c->s, (long long)c->h, (long long)c->i,
             cvf_dtype_name(c->dtype), (unsigned long long)seed);
    int rc = 0;
    for (int n = 0; n < f->count; n++)
        rc |= tensor_create(f, n);
    bool ok = CHECK(rc == 0, "%s: out of memory", f->label);
    if (ok) {
        cvft_rng rng = cvft_rng_make(seed);
        if (backward)
            fill_backward(f, &rng);
        else
            fill_forward(f, &rng);
        ok = CHECK(snapshot_inputs(f) == 0, "%s: out of memory", f->label);
    }
    for (int n = 0; n < f->count && ok; n++)
        ok = CHECK(mirror_create(&f->t[n].dev, tensor_buffer(f, n)), "%s: device allocation for %s failed", f->label,
                   f->specs[n].name);
    ok = ok && mlp_reference(f);
    if (!ok)
        mlp_teardown(f);
    return ok;
}

/* ---- runs ---- */

/* Poisons every output (and uploads the poison unless the run is on the host). */
static void poison_outputs(mlp_fixture *f, const mlp_runner *r)
{
    for (int n = 0; n < f->count; n++)
        if (f->specs[n].is_output) {
            support_buffer_poison(tensor_buffer(f, n));
            if (r->sync != SYNC_HOST)
                mirror_upload(&f->t[n].dev);
        }
}

/* Waits for a finished call as the runner says and copies every buffer back (inputs too: the
 * inputs-unchanged check reads them). */
static void finish_run(mlp_fixture *f, const mlp_runner *r)
{
    cudaError_t err = cudaSuccess, copy = cudaSuccess;
    if (r->sync == SYNC_HOST)
        return;
    if (r->sync == SYNC_DEVICE) {
        err = cudaDeviceSynchronize();
        for (int n = 0; n < f->count; n++)
            mirror_download(&f->t[n].dev);
    } else {
        if (r->sync == SYNC_STREAM)
            err = cudaStreamSynchronize(r->stream); /* that stream only: the side streams must be joined into it */
        for (int n = 0; n < f->count && copy == cudaSuccess; n++) {
            mirror *m = &f->t[n].dev;
            copy = cudaMemcpyAsync(m->host->bytes, m->dev, m->host->size, cudaMemcpyDeviceToHost, r->stream);
        }
        if (copy == cudaSuccess)
            copy = cudaStreamSynchronize(r->stream);
        if (err == cudaSuccess)
            err = cudaDeviceSynchronize(); /* after the copies: quiets the side streams before the next run */
    }
    CHECK(err == cudaSuccess && copy == cudaSuccess, "%s [%s]: CUDA error after the call: %s / copies: %s", f->label,
          r->name, cudaGetErrorString(err), cudaGetErrorString(copy));
}

/* Poisons the outputs, runs the call as the runner says and brings the results back. */
static cvf_status mlp_run(mlp_fixture *f, const mlp_runner *r)
{
    poison_outputs(f, r);
    if (r->sync != SYNC_HOST) /* host-to-device copies may still be in flight when cudaMemcpy returns */
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: CUDA error before the call", f->label);
    cvf_status status;
    if (r->sync == SYNC_HOST)
        status = r->compose && f->backward ? compose_backward(f, r->ctx) : mlp_call(f, r->ctx, VIEW_HOST);
    else
        status = mlp_call(f, r->ctx, VIEW_DEVICE);
    finish_run(f, r);
    return status;
}

/* The dtype the runner keeps grad_fc1_output in: its context's plan says (the storage dtype when
 * the plan cannot be had: the loosest bounds). */
static cvf_dtype workspace_dtype(const mlp_fixture *f, const mlp_runner *r)
{
    if (r->compose)
        return f->dtype;
    cvf_mlp_shape shape = {f->dims[0], f->dims[1], f->dims[2], f->dtype, CVF_GELU_TANH};
    cvf_mlp_plan plan;
    cvf_status status = cvf_mlp_backward_plan(r->ctx, &shape, &plan);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s [%s]: cvf_mlp_backward_plan: %s", f->label, r->name,
               cvf_context_last_error(r->ctx)))
        return f->dtype;
    return plan.workspace_dtype;
}

/* Checks one output after a run: written, nothing outside touched, Frobenius error, every element
 * within its bound; records the worst ratios. */
static void check_output(mlp_fixture *f, int n, const char *run)
{
    const mlp_tensor *t = &f->t[n];
    const char *name = f->specs[n].name;
    if (f->specs[n].is_vector) {
        cvf_vector want = cvf_vector_dense(t->f64.data, CVF_F64, t->f64.cols);
        support_check_vector_output(run, name, &t->v, &want);
    } else {
        support_check_matrix_output(run, name, &t->m, &t->f64);
    }
    cvf_matrix view = tensor_view(f, n);
    support_bound_report report;
    support_check_bounded(run, name, &view, &t->f64, &t->bound, &report);
    double frob = cvft_matrix_rel_error(&view, &t->f64) / cvft_tolerance(f->dtype);
    if (report.worst_ratio > f->worst_ratio || isnan(report.worst_ratio)) {
        f->worst_ratio = report.worst_ratio;
        snprintf(f->worst_where, sizeof f->worst_where, "%s [%lld, %lld] in %s", name, (long long)report.worst_i,
                 (long long)report.worst_j, strchr(run, '[') ? strchr(run, '[') : run);
    }
    if (frob > f->worst_frob || isnan(frob))
        f->worst_frob = frob;
}

/* Checks every output and input after a run labelled run. */
static void mlp_check(mlp_fixture *f, const char *run)
{
    for (int n = 0; n < f->count; n++) {
        if (f->specs[n].is_output) {
            check_output(f, n, run);
            continue;
        }
        cvf_matrix v = tensor_view(f, n);
        CHECK(support_buffer_unchanged(tensor_buffer(f, n)), "%s: input %s (%s, %lld x %lld) was modified by the call",
              run, f->specs[n].name, cvf_dtype_name(v.dtype), (long long)v.rows, (long long)v.cols);
    }
}

/* Saves every output buffer as the first run's. */
static void save_first(mlp_fixture *f)
{
    for (int n = 0; n < f->count; n++) {
        if (!f->specs[n].is_output)
            continue;
        support_buffer *b = tensor_buffer(f, n);
        free(f->t[n].first);
        f->t[n].first = malloc(b->size ? b->size : 1);
        if (CHECK(f->t[n].first != NULL, "%s: out of memory", f->label))
            memcpy(f->t[n].first, b->bytes, b->size);
    }
}

/* The bits of element (i, j) of a view of 16- or 32-bit elements. */
static uint32_t element_bits(const cvf_matrix *m, int64_t i, int64_t j)
{
    const unsigned char *p =
        (const unsigned char *)m->data + (size_t)(i * m->row_stride + j * m->col_stride) * cvf_dtype_size(m->dtype);
    uint32_t bits = 0;
    memcpy(&bits, p, cvf_dtype_size(m->dtype) < 4 ? cvf_dtype_size(m->dtype) : 4);
    return bits;
}

/* Checks output n equals the first run's bits; names the first element that differs. */
static void check_same_output(mlp_fixture *f, int n, const char *run)
{
    support_buffer *b = tensor_buffer(f, n);
    if (!f->t[n].first || memcmp(f->t[n].first, b->bytes, b->size) == 0) {
        CHECK(f->t[n].first != NULL, "%s: %s: no first run to compare with", run, f->specs[n].name);
        return;
    }
    cvf_matrix now = tensor_view(f, n), then = now;
    then.data = f->t[n].first + ((unsigned char *)now.data - b->bytes);
    int64_t fi = -1, fj = -1, count = 0;
    for (int64_t i = 0; i < now.rows; i++)
        for (int64_t j = 0; j < now.cols; j++)
            if (element_bits(&now, i, j) != element_bits(&then, i, j) && count++ == 0)
                fi = i, fj = j;
    if (count == 0) {
        CHECK(false, "%s: %s: bytes outside the view differ from the first run", run, f->specs[n].name);
        return;
    }
    CHECK(false,
          "%s: %s (%s, %lld x %lld) not bit-identical to the first run: %lld elements differ; first [%lld, %lld]: "
          "%.9g (0x%X) now, %.9g (0x%X) then",
          run, f->specs[n].name, cvf_dtype_name(now.dtype), (long long)now.rows, (long long)now.cols, (long long)count,
          (long long)fi, (long long)fj, cvft_matrix_get(&now, fi, fj), (unsigned)element_bits(&now, fi, fj),
          cvft_matrix_get(&then, fi, fj), (unsigned)element_bits(&then, fi, fj));
}

/* Checks every output equals the first run's bits (the backward: K slices are added in a fixed
 * order and the bias gradients are deterministic). */
static void check_same(mlp_fixture *f, const char *run)
{
    for (int n = 0; n < f->count; n++)
        if (f->specs[n].is_output)
            check_same_output(f, n, run);
}

/* The self-check of the per-element check: negating the largest element of each output (in a
 * float64 copy of the result) must add exactly one violation, at that element. */
static void mlp_self_check(mlp_fixture *f, const char *run)
{
    for (int n = 0; n < f->count; n++) {
        if (!f->specs[n].is_output)
            continue;
        const mlp_tensor *t = &f->t[n];
        cvf_matrix view = tensor_view(f, n), copy;
        if (!CHECK(cvft_matrix_to_f64(&view, &copy) == 0, "%s: out of memory", run))
            continue;
        int64_t bi = 0, bj = 0;
        for (int64_t i = 0; i < copy.rows; i++)
            for (int64_t j = 0; j < copy.cols; j++)
                if (fabs(*at64(&t->f64, i, j)) > fabs(*at64(&t->f64, bi, bj)))
                    bi = i, bj = j;
        support_bound_report before, after;
        support_compare_bounded(&copy, &t->f64, &t->bound, &before);
        double *e = at64(&copy, bi, bj), old = *e;
        *e = -*e;
        support_compare_bounded(&copy, &t->f64, &t->bound, &after);
        CHECK(after.violations == before.violations + 1 && after.worst_i == bi && after.worst_j == bj,
              "%s: self-check: %s with element [%lld, %lld] negated (%.6g -> %.6g, want %.6g, bound %.3g) not caught "
              "alone: %lld violations before, %lld after, worst at [%lld, %lld]",
              run, f->specs[n].name, (long long)bi, (long long)bj, old, *e, *at64(&t->f64, bi, bj),
              *at64(&t->bound, bi, bj), (long long)before.violations, (long long)after.violations,
              (long long)after.worst_i, (long long)after.worst_j);
        free(copy.data);
    }
}

/* Runs the fixture on r, checks it against the reference; first: saves the outputs and runs the
 * self-check; same: demands the first run's bits. */
static void run_and_check(mlp_fixture *f, const mlp_runner *r, bool first, bool same)
{
    char run[256];
    cvf_dtype workspace = f->backward ? workspace_dtype(f, r) : f->dtype;
    double uw = f->backward ? support_unit_roundoff(workspace) : 0.0;
    snprintf(run, sizeof run, "%s [%s%s%s]", f->label, r->name, f->backward ? ", grad_fc1_output in " : "",
             f->backward ? cvf_dtype_name(workspace) : "");
    if (!ensure_bounds(f, uw))
        return;
    cvf_status status = mlp_run(f, r);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: returned %s: %s", run, cvf_status_string(status),
               cvf_context_last_error(r->ctx)))
        return;
    mlp_check(f, run);
    if (first) {
        save_first(f);
        mlp_self_check(f, run);
    }
    if (same)
        check_same(f, run);
}

/* Captures the backward on the runner's user stream into a CUDA graph, then replays and checks
 * it. Capture fails with cudaErrorStreamCaptureUnjoined when work forked onto a side stream is not
 * joined back into the caller's stream: a deterministic check of the join (a copy after a stream
 * synchronisation catches a missing join only when the side stream is still running). Another
 * capture failure (a call capture does not allow) is printed as a note: capture is not promised. */
static void capture_check(mlp_fixture *f, const mlp_runner *r)
{
    char run[256];
    snprintf(run, sizeof run, "%s [%s, CUDA graph replay]", f->label, r->name);
    /* The replay must give the bits of the same context's eager run, the runner's just before (under
     * auto a context measures its own engines, so the first run's bits are not demanded). */
    save_first(f);
    poison_outputs(f, r);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: CUDA error before capture", run);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t begin = cudaStreamBeginCapture(r->stream, cudaStreamCaptureModeRelaxed);
    cvf_status status = begin == cudaSuccess ? mlp_call(f, r->ctx, VIEW_DEVICE) : CVF_STATUS_INTERNAL_ERROR;
    cudaError_t end = begin == cudaSuccess ? cudaStreamEndCapture(r->stream, &graph) : begin;
    cudaGetLastError(); /* a failed capture leaves no sticky error */
    bool joined = CHECK(end != cudaErrorStreamCaptureUnjoined,
                        "%s: cudaStreamEndCapture: %s: work forked onto a side stream was not joined back into the "
                        "context's stream before cvf_mlp_backward returned",
                        run, cudaGetErrorString(end));
    if (joined && (end != cudaSuccess || status != CVF_STATUS_SUCCESS || !graph))
        printf("  note: %s: the backward could not be captured into a CUDA graph (%s; %s: %s); not required\n", run,
               cudaGetErrorString(end), cvf_status_string(status), cvf_context_last_error(r->ctx));
    else if (joined && CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0) == cudaSuccess, "%s: instantiate", run)) {
        CHECK(cudaGraphLaunch(exec, r->stream) == cudaSuccess, "%s: cudaGraphLaunch", run);
        finish_run(f, r);
        mlp_check(f, run);
        check_same(f, run);
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: CUDA error after the capture check", run);
}

/* The runners a case gets: GPU contexts (or, with --host-check, the CPU and the composition). */
static int case_runners(const mlp_case *c, bool backward, mlp_runner *out)
{
    int n = 0;
    if (host_mode) {
        out[n++] = (mlp_runner){"cpu", cpu_ctx, NULL, SYNC_HOST, false};
        out[n++] = (mlp_runner){"cpu, again", cpu_ctx, NULL, SYNC_HOST, false};
        if (backward && c->dtype != CVF_F32)
            out[n++] = (mlp_runner){"cpu, CUDA composition", cpu_ctx, NULL, SYNC_HOST, true};
        return n;
    }
    out[n++] = (mlp_runner){"cuda", fast_ctx, NULL, SYNC_DEVICE, false};
    if (backward)
        out[n++] = (mlp_runner){"cuda, again", fast_ctx, NULL, SYNC_DEVICE, false};
    if ((c->runs & MLP_SIMPLE) && !quick)
        out[n++] = (mlp_runner){"cuda simple", simple_ctx, NULL, SYNC_DEVICE, false};
    if (c->runs & MLP_STREAM) {
        out[n++] = (mlp_runner){"cuda on a non-blocking user stream, stream sync", stream_ctx, user_stream, SYNC_STREAM,
                                false};
        out[n++] =
            (mlp_runner){"cuda on a non-blocking user stream, copies on it", stream_ctx, user_stream, SYNC_NONE, false};
    }
    return n;
}

/* Runs one op (forward or backward) of case c on every runner it gets. */
static void run_mlp_op(const mlp_case *c, bool backward, uint64_t seed)
{
    mlp_fixture *f = malloc(sizeof *f);
    if (!CHECK(f != NULL, "out of memory"))
        return;
    double t0 = cvft_now_seconds();
    if (!mlp_setup(f, c, backward, seed)) {
        free(f);
        return;
    }
    double t_ref = cvft_now_seconds() - t0;
    mlp_runner runners[6];
    int count = case_runners(c, backward, runners);
    for (int r = 0; r < count; r++) {
        /* bits compared with the first run: the same context again, and the user-stream context
         * when the engines are forced (under auto each context measures and may choose others) */
        bool same = r > 0 && backward && runners[r].ctx != simple_ctx && !runners[r].compose &&
                    (runners[r].ctx == runners[0].ctx || engine_policy_forced());
        run_and_check(f, &runners[r], r == 0, same);
    }
    if (backward && (c->runs & MLP_STREAM) && !host_mode)
        capture_check(f, &runners[count - 1]);
    printf("  %-44s %d runs: worst |err|/bound %.3f (%s), rel. Frobenius/tol %.3f, bound %.2g of |answer| (rms); "
           "%.1f s (reference %.1f s)\n",
           f->label, count, f->worst_ratio, f->worst_where, f->worst_frob, f->looseness, cvft_now_seconds() - t0,
           t_ref);
    mlp_teardown(f);
    free(f);
}

/* The MLP cases (see the section comment). Reference cost 4 SHI (forward) + 10 SHI (backward,
 * with the bounds' grad_output @ fc2_weight) FLOP on one host core: 197x768x3072 6.5 GFLOP per
 * dtype, 394x384x1536 3.3, 4099x256x512 (backward only) 5.4, the rest < 0.1: ~40 GFLOP in all,
 * 6-15 s at 3-7 GFLOP/s. */
static const mlp_case mlp_cases[] = {
    {130, 24, 40, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE | MLP_QUICK},
    {197, 64, 256, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_QUICK},
    {197, 64, 256, CVF_F16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE},
    {197, 64, 256, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {1, 1, 1, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE},
    {1, 1, 1, CVF_F16, MLP_FORWARD | MLP_BACKWARD},
    {1, 1, 1, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {33, 67, 263, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE},
    {33, 67, 263, CVF_F16, MLP_FORWARD | MLP_BACKWARD},
    {33, 67, 263, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {130, 24, 40, CVF_F16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE},
    {130, 24, 40, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {5, 8, 16, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE},
    {5, 8, 16, CVF_F16, MLP_FORWARD | MLP_BACKWARD},
    {5, 8, 16, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {197, 768, 3072, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE | MLP_STREAM},
    {197, 768, 3072, CVF_F16, MLP_FORWARD | MLP_BACKWARD},
    {197, 768, 3072, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {394, 384, 1536, CVF_BF16, MLP_FORWARD | MLP_BACKWARD | MLP_SIMPLE},
    {394, 384, 1536, CVF_F16, MLP_FORWARD | MLP_BACKWARD},
    {394, 384, 1536, CVF_F32, MLP_FORWARD | MLP_BACKWARD},
    {4099, 256, 512, CVF_BF16, MLP_BACKWARD | MLP_SIMPLE},
    {4099, 256, 512, CVF_F16, MLP_BACKWARD},
};

/* Section: the MLP cases (--quick: the two marked quick, the fast context only). */
static void test_mlp(void)
{
    uint64_t seed = 7000;
    for (size_t k = 0; k < ARRAY_SIZE(mlp_cases); k++) {
        const mlp_case *c = &mlp_cases[k];
        if (quick && !(c->runs & MLP_QUICK)) {
            seed += 2;
            continue;
        }
        if (c->runs & MLP_FORWARD)
            run_mlp_op(c, false, seed);
        if (c->runs & MLP_BACKWARD)
            run_mlp_op(c, true, seed + 1);
        seed += 2;
    }
}

/* The variables that force the Hopper kernel's schedule, and their values when a test that sets
 * its own set them aside (NULL: unset), so that it gives them back after: test_cuda run whole
 * under a forcing (CVF_CUDA_SPLITK=7, say) keeps it in the sections after that test. */
#define SCHEDULE_FORCING_COUNT 3
static const char *const schedule_forcing[SCHEDULE_FORCING_COUNT] = {"CVF_CUDA_SPLITK", "CVF_CUDA_TILE_N",
                                                                     "CVF_CUDA_CLUSTER"};
typedef struct forcing_saved {
    char *value[SCHEDULE_FORCING_COUNT];
} forcing_saved;

/* Copies the forcing variables' values and unsets them. */
static forcing_saved forcing_set_aside(void)
{
    forcing_saved saved;
    for (int i = 0; i < SCHEDULE_FORCING_COUNT; i++)
        saved.value[i] = support_env_take(schedule_forcing[i]);
    return saved;
}

/* Gives the forcing variables back the values forcing_set_aside found (unset where there were none). */
static void forcing_restore(forcing_saved *saved)
{
    for (int i = 0; i < SCHEDULE_FORCING_COUNT; i++) {
        support_env_give_back(schedule_forcing[i], saved->value[i]);
        saved->value[i] = NULL;
    }
}

/* ---- the MLP backward plan on CUDA ---------------------------------------------------------- */

/* Checks one kernel of a CUDA plan of the MLP backward: a GEMM is scheduled (engine, tiles) and, as
 * the backward's lanes run beside each other, in whole tiles (units = tiles, no split; cutting
 * tiles there made it slower, docs/PERF.md issue 12); every kernel runs on stream 0, 1 or 2. */
static void check_plan_kernel(const char *label, const cvf_kernel_info *k)
{
    bool gemm = k->kind != CVF_KERNEL_REDUCTION;
    CHECK(k->stream >= 0 && k->stream <= 2, "%s: %s: stream %d, expected 0, 1 or 2", label, k->name, (int)k->stream);
    if (!gemm)
        return;
    CHECK(k->engine && k->engine[0], "%s: %s: no engine", label, k->name);
    CHECK(k->choice && k->choice[0], "%s: %s: no choice", label, k->name);
    if (k->engine && strncmp(k->engine, "cublaslt", 8) == 0)
        return; /* the vendor's kernel: no tiles of ours */
    if (CHECK(k->tile_m > 0 && k->tile_n > 0 && k->tile_k > 0, "%s: %s: tiles %dx%dx%d, expected all > 0", label,
              k->name, (int)k->tile_m, (int)k->tile_n, (int)k->tile_k)) {
        int64_t tiles = ((k->m + k->tile_m - 1) / k->tile_m) * ((k->n + k->tile_n - 1) / k->tile_n);
        CHECK(k->splits == 1 && k->units == tiles,
              "%s: %s (%lld x %lld x %lld): units %lld with %d splits, expected %lld whole tiles of %dx%d", label,
              k->name, (long long)k->m, (long long)k->n, (long long)k->k, (long long)k->units, (int)k->splits,
              (long long)tiles, (int)k->tile_m, (int)k->tile_n);
    }
}

/* Checks the plan ctx makes for an MLP backward of S, H, I in dtype; prints its schedule (and,
 * with print, the whole description). */
static void check_plan(cvf_context *ctx, const char *name, int64_t S, int64_t H, int64_t I, cvf_dtype dtype, bool print)
{
    char label[160];
    snprintf(label, sizeof label, "plan S=%lld H=%lld I=%lld %s [%s]", (long long)S, (long long)H, (long long)I,
             cvf_dtype_name(dtype), name);
    cvf_mlp_shape shape = {S, H, I, dtype, CVF_GELU_TANH};
    cvf_mlp_plan plan;
    cvf_status status = cvf_mlp_backward_plan(ctx, &shape, &plan);
    if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: %s: %s", label, cvf_status_string(status),
               cvf_context_last_error(ctx)))
        return;
    CHECK(plan.kernel_count == 5, "%s: %d kernels, expected 5", label, (int)plan.kernel_count);
    printf("  %s: grad_fc1_output %s;", label, cvf_dtype_name(plan.workspace_dtype));
    for (int32_t i = 0; i < plan.kernel_count && i < CVF_PLAN_MAX_KERNELS; i++) {
        const cvf_kernel_info *k = &plan.kernels[i];
        check_plan_kernel(label, k);
        printf(" %s: %s %dx%dx%d x%d s%d;", k->name, k->engine ? k->engine : "(null)", (int)k->tile_m, (int)k->tile_n,
               (int)k->tile_k, (int)k->splits, (int)k->stream);
    }
    printf("\n");
    size_t length = cvf_mlp_plan_describe(&plan, NULL, 0);
    char *text = malloc(length + 1);
    if (!CHECK(text != NULL, "%s: out of memory", label))
        return;
    cvf_mlp_plan_describe(&plan, text, length + 1);
    CHECK(strstr(text, "runs on") != NULL, "%s: the description has no 'runs on' line:\n%s", label, text);
    if (print)
        fputs(text, stdout);
    free(text);
}

/* Section: the CUDA plans: the ViT-B/16 batch-64 shape on both contexts, and the long-K case. The
 * plans checked are the planner's own, so a schedule forced for the whole run (CVF_CUDA_SPLITK=7,
 * say, which cuts every tile) is set aside here and given back after. */
static void test_mlp_plan(void)
{
    forcing_saved saved = forcing_set_aside();
    check_plan(fast_ctx, "cuda", 12608, 768, 3072, CVF_BF16, !quick);
    check_plan(simple_ctx, "cuda simple", 12608, 768, 3072, CVF_BF16, false);
    check_plan(fast_ctx, "cuda", 4099, 256, 512, CVF_BF16, false);
    check_plan(fast_ctx, "cuda", 197, 768, 3072, CVF_F32, false);
    forcing_restore(&saved);
}

/* Runs case c on the context of our kernels under CVF_CUDA_SPLITK=split (N: stream-K over N units;
 * kN: N K parts per tile; 1: whole tiles), CVF_CUDA_CLUSTER=cluster ("1": single CTAs, "2":
 * pairs sharing B by multicast) and CVF_CUDA_TILE_N=width, checks it against the reference, and
 * runs it again: C, aux_out and bias_grad must come out bit-identical (the pieces of a cut tile
 * are added in K order, whichever finished first). Unless want_whole, the schedule must cut
 * tiles (else the section would pass on whole tiles); with cluster "2" it must run pairs.
 * Returns whether the epilogue ran beside the consumers (in the epilogue warpgroup or the relay),
 * so that the caller can run the case again in the consumers. */
static bool run_forced_case(const support_matmul_case *c, const char *split, const char *cluster, int width,
                            bool want_whole, bool want_lean)
{
    bool beside_ran = false;
    forcing_saved saved = forcing_set_aside();
    setenv("CVF_CUDA_SPLITK", split, 1);
    setenv("CVF_CUDA_CLUSTER", cluster, 1);
    char width_text[8];
    snprintf(width_text, sizeof width_text, "%d", width);
    setenv("CVF_CUDA_TILE_N", width_text, 1);
    gpu_fixture *g = malloc(sizeof *g);
    if (CHECK(g != NULL, "out of memory") && gpu_setup(g, c)) {
        char label[400];
        snprintf(label, sizeof label, "%.300s [CVF_CUDA_SPLITK=%.8s CVF_CUDA_CLUSTER=%.2s CVF_CUDA_TILE_N=%d]",
                 g->f.label, split, cluster, width);
        cvf_status status = gpu_run(g, own_ctx);
        if (CHECK(status == CVF_STATUS_SUCCESS, "%s: returned %s: %s", label, cvf_status_string(status),
                  cvf_context_last_error(own_ctx))) {
            support_matmul_check(&g->f, label);
            const int32_t lean = cvf_cuda_last_lean(own_ctx);
            beside_ran = lean > 0 && (lean & (CVF_CUDA_LEAN_WARPS | CVF_CUDA_LEAN_RELAY)) != 0;
            if (hopper && fast_eligible(c)) {
                CHECK(strcmp(cvf_cuda_last_kernel(own_ctx), "sm90") == 0, "%s: ran '%s', expected sm90", label,
                      cvf_cuda_last_kernel(own_ctx));
                cvf_epilogue ep = fixture_epilogue(g);
                cvf_kernel_info info;
                memset(&info, 0, sizeof info);
                cvf_cuda_gemm_describe(own_ctx, false, &g->a, &g->b, &g->c, &ep, &info);
                CHECK(info.splits > 1 || want_whole, "%s: the schedule kept whole tiles (%lld units)", label,
                      (long long)info.units);
                const bool paired = strstr(info.engine, "2-CTA clusters") != NULL;
                CHECK(paired == (strcmp(cluster, "2") == 0), "%s: ran %s", label, info.engine);
                CHECK(info.tile_n == width, "%s: tiles %d wide", label, (int)info.tile_n);
                CHECK((cvf_cuda_last_lean(own_ctx) > 0) == want_lean, "%s: ran the %s epilogue (recipe %d)", label,
                      want_lean ? "general" : "lean", (int)cvf_cuda_last_lean(own_ctx));
                const char *warps_env = getenv("CVF_CUDA_EPI_WARPS");
                const bool beside = want_lean && width == 256 && !(warps_env && strcmp(warps_env, "0") == 0);
                const bool want_warps = beside && ep.activation == CVF_ACTIVATION_DGELU_TANH && !ep.bias &&
                                        ep.aux_in->row_stride % 8 == 0 && (uintptr_t)ep.aux_in->data % 16 == 0;
                const bool want_relay = beside &&
                                        (ep.activation == CVF_ACTIVATION_NONE || ep.activation == CVF_ACTIVATION_RELU) &&
                                        !ep.bias && !ep.aux_out && !ep.bias_grad;
                CHECK(((cvf_cuda_last_lean(own_ctx) & CVF_CUDA_LEAN_WARPS) != 0) == want_warps,
                      "%s: the epilogue %s in the epilogue warpgroup (recipe %d)", label,
                      want_warps ? "did not run" : "ran", (int)cvf_cuda_last_lean(own_ctx));
                CHECK(((cvf_cuda_last_lean(own_ctx) & CVF_CUDA_LEAN_RELAY) != 0) == want_relay,
                      "%s: the epilogue %s in the relay kernel (recipe %d)", label, want_relay ? "did not run" : "ran",
                      (int)cvf_cuda_last_lean(own_ctx));
            }
            support_buffer *outs[3] = {&g->f.c.buffer, &g->f.aux_out.buffer, &g->f.bias_grad.buffer};
            unsigned char *first[3] = {NULL, NULL, NULL};
            for (int i = 0; i < 3; i++)
                if (outs[i]->size && (first[i] = malloc(outs[i]->size)) != NULL)
                    memcpy(first[i], outs[i]->bytes, outs[i]->size);
            CHECK(gpu_run(g, own_ctx) == CVF_STATUS_SUCCESS, "%s: the second run failed", label);
            static const char *names[3] = {"C", "aux_out", "bias_grad"};
            for (int i = 0; i < 3; i++) {
                if (!outs[i]->size)
                    continue;
                CHECK(first[i] && memcmp(first[i], outs[i]->bytes, outs[i]->size) == 0,
                      "%s: %s differs in its bits between two runs", label, names[i]);
                free(first[i]);
            }
        }
    }
    if (g)
        gpu_teardown(g);
    free(g);
    forcing_restore(&saved);
    return beside_ran;
}

/* Whether a forced case keeps whole tiles: one K step, or CVF_CUDA_SPLITK "1" (nothing to cut). */
static bool keeps_whole_tiles(int64_t k, const char *split)
{
    return k <= 64 || strcmp(split, "1") == 0;
}

/* Section: tiles cut into pieces, tiles run by pairs of CTAs, and the three tile widths: stream-K
 * units that cut tiles into 2 to many pieces and units that span several tiles; split-K into 2, 3
 * and 7 K parts; 2-CTA clusters on whole tiles and on K parts, with an odd number of row tiles (a
 * pair's second tile past M) and with 192-wide tiles (three 64-column boxes of B shared unevenly);
 * tails in M, N and K, every epilogue family (the general loop and the lean recipes: ReLU, none,
 * GELU' + sums, bias + GELU + aux_out), both operand layouts; and outputs whose rows are padded
 * to 16 bytes with n not a multiple of 8 (nothing written past n). */
static void test_cut_tiles(void)
{
    static const struct {
        int64_t m, n, k;
        const char *split, *cluster;
        int width;
    } shapes[] = {
        {333, 520, 200, "1", "1", 128},     /* whole tiles 128 wide, lean GELU / GELU' recipes, rows past M */
        {296, 520, 640, "7", "1", 256},     /* 9 tiles x 10 K steps in 7 units: cuts and whole tiles */
        {136, 8, 4000, "11", "1", 128},     /* 2 tiles x 63 steps: up to 7 pieces a tile */
        {200, 264, 72, "5", "1", 128},      /* 6 tiles x 2 steps in 5 units */
        {296, 520, 640, "1", "2", 256},     /* pairs: 3 row tiles (the last pair's second past M) x 3 */
        {296, 520, 640, "k3", "2", 192},    /* pairs in 3 K parts, 192 wide */
        {136, 264, 1000, "3", "1", 192},    /* 4 tiles x 16 steps in 3 units: units span tiles */
        {1000, 1000, 1000, "50", "1", 256}, /* 32 tiles x 16 steps */
        {64, 64, 64, "4", "1", 128},        /* one step: no cut possible (one unit) */
        {296, 520, 640, "k3", "1", 256},    /* 9 tiles in 3 K parts of 3-4 steps */
        {136, 8, 4000, "k7", "2", 128},     /* pairs in 7 parts of 9 steps */
        {200, 264, 136, "k2", "1", 192},    /* 2 parts with a K tail in the second */
        {1000, 1000, 1000, "1", "2", 192},  /* 4 x 6 pairs, whole tiles, tails in M and N */
        {2100, 300, 200, "k2", "2", 128},   /* 17 row tiles: 9 pairs x 3 in 2 parts */
        {1000, 1000, 1000, "1", "1", 128},  /* 8 x 8 tiles 128 wide */
        {2560, 2560, 64, "1", "1", 256},    /* 20 x 10 whole tiles inside, up to 2 a CTA: the epilogue warps'
                                               aux_in boxes take the next tile's first chunk during the last */
    };
    static const int epilogues[] = {3 | 16 /* dgelu, grad */, 2 | 4 | 8 | 16 /* gelu, bias, aux_out, grad */,
                                    1 /* relu */, 0, 2 | 4 | 8 /* gelu, bias, aux_out: fc1 */};
    static const unsigned lays[] = {0, SUPPORT_A_TRANSPOSED | SUPPORT_B_TRANSPOSED};
    uint64_t seed = 9000;
    for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
        for (size_t e = 0; e < ARRAY_SIZE(epilogues); e++)
            for (size_t l = 0; l < ARRAY_SIZE(lays); l++) {
                if (quick && (s > 4 || (e + l) % 2))
                    continue;
                support_matmul_case c = support_make_matmul_case(shapes[s].m, shapes[s].n, shapes[s].k,
                                                                 &combos[(s + e) % 2], epilogues[e], lays[l], seed++);
                /* combos 0 and 1 are all f16 / all bf16, so every
                 * epilogue but GELU with column sums has a lean recipe. */
                const bool whole = keeps_whole_tiles(shapes[s].k, shapes[s].split);
                if (run_forced_case(&c, shapes[s].split, shapes[s].cluster, shapes[s].width, whole, e != 1)) {
                    /* GELU' 256 wide ran in the epilogue warpgroup, ReLU and none in the relay kernel
                     * (run_forced_case checks which): again in the consumers */
                    char *warps = support_env_override("CVF_CUDA_EPI_WARPS", "0");
                    run_forced_case(&c, shapes[s].split, shapes[s].cluster, shapes[s].width, whole, true);
                    support_env_give_back("CVF_CUDA_EPI_WARPS", warps);
                }
            }
    /* m, n, k not multiples of 8 in matrices whose lines are padded to 16 bytes (views of wider
     * tensors): the last 16 bytes of a line are partly past the view. The tails of A and B must
     * read as zeros, and nothing past n may be written: the padding was written on the H200 when
     * such rows took TMA stores, so these outputs take the general epilogue's element stores (no
     * lean recipe). Odd k runs with each operand in each layout: K-major, K's tail is the TMA's
     * zero fill inside a line (the padding past k holds the fixture's poison); MN-major, of whole
     * lines. */
    static const struct {
        int64_t m, n, k;
        const char *split, *cluster;
        unsigned layout;
    } tails[] = {{296, 517, 640, "7", "1", 0},
                 {296, 517, 640, "7", "1", SUPPORT_A_TRANSPOSED | SUPPORT_B_TRANSPOSED},
                 {200, 1001, 203, "1", "2", SUPPORT_A_TRANSPOSED},
                 {200, 1001, 203, "1", "2", SUPPORT_B_TRANSPOSED},
                 {133, 259, 1001, "k3", "1", SUPPORT_A_TRANSPOSED},
                 {133, 259, 1001, "k3", "1", 0}};
    for (size_t s = 0; s < ARRAY_SIZE(tails); s++) {
        support_matmul_case c = support_make_matmul_case(tails[s].m, tails[s].n, tails[s].k, &combos[s % 2],
                                                         epilogues[0], tails[s].layout | SUPPORT_ROWS_16B, seed++);
        CHECK(!hopper || fast_eligible(&c), "tail case %zu: not one the sm90 kernel takes", s);
        const bool whole = keeps_whole_tiles(tails[s].k, tails[s].split);
        run_forced_case(&c, tails[s].split, tails[s].cluster, 256, whole, false);
    }
}

/* The NaN elements of row i of m. */
static int64_t count_nan_in_row(const cvf_matrix *m, int64_t i)
{
    int64_t count = 0;
    for (int64_t j = 0; j < m->cols; j++)
        count += isnan(cvft_matrix_get(m, i, j)) ? 1 : 0;
    return count;
}

/* Section: a NaN in A[2][3] makes row 2 of C NaN and nothing else, through our kernel's ReLU (as
 * on the CPU and in PyTorch): the lean epilogue's clamping cvt (16-bit C of the operands' dtype,
 * both dtypes, one and many K-slices, with and without a bias) and the general epilogue's
 * compare-select (f32 C; a strided bias). */
static void test_nan(void)
{
    static const struct {
        int64_t m, n, k;
        int combo, epilogue;
        unsigned layout;
        bool lean;
    } cases[] = {
        {300, 520, 64, 0, 1, 0, true},                      /* f16, lean epilogue, one K-slice */
        {300, 520, 1000, 1, 1, SUPPORT_B_TRANSPOSED, true}, /* bf16, lean epilogue, 16 K-slices */
        {200, 264, 72, 2, 1, 0, false},                     /* f16 in, f32 C: general epilogue */
        {200, 264, 136, 1, 1 | 4, SUPPORT_A_TRANSPOSED | SUPPORT_VECTORS_STRIDED, false}, /* strided bias */
        {200, 264, 136, 1, 1 | 4, SUPPORT_A_TRANSPOSED, true}, /* bf16 with a bias: the lean bias + ReLU */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        support_matmul_case c = support_make_matmul_case(cases[i].m, cases[i].n, cases[i].k, &combos[cases[i].combo],
                                                         cases[i].epilogue, cases[i].layout, 700 + i);
        gpu_fixture *g = malloc(sizeof *g);
        if (CHECK(g != NULL, "out of memory") && gpu_setup(g, &c)) {
            cvft_matrix_set(&g->f.a.view, 2, 3, NAN);
            mirror_upload(&g->m[M_A]);
            cvf_context *ctxs[2] = {own_ctx, simple_ctx};
            for (int v = 0; v < 2; v++) {
                cvf_status status = gpu_run(g, ctxs[v]);
                if (!CHECK(status == CVF_STATUS_SUCCESS, "%s: returned %s", g->f.label, cvf_status_string(status)))
                    continue;
                int64_t in_row = count_nan_in_row(&g->f.c.view, 2), total = 0;
                for (int64_t r = 0; r < c.m; r++)
                    total += count_nan_in_row(&g->f.c.view, r);
                CHECK(in_row == c.n && total == c.n,
                      "%s [%s]: NaN in A[2][3]: %lld of row 2's %lld elements NaN, %lld in all (kernel %s)",
                      g->f.label, v ? "simple" : "own", (long long)in_row, (long long)c.n, (long long)total,
                      cvf_cuda_last_kernel(ctxs[v]));
                if (v == 0 && hopper) /* the epilogue this case is about ran */
                    CHECK(strcmp(cvf_cuda_last_kernel(own_ctx), "sm90") == 0 &&
                              (cvf_cuda_last_lean(own_ctx) > 0) == cases[i].lean,
                          "%s: ran %s with epilogue recipe %d, expected the %s epilogue", g->f.label,
                          cvf_cuda_last_kernel(own_ctx), (int)cvf_cuda_last_lean(own_ctx),
                          cases[i].lean ? "lean" : "general");
            }
        }
        if (g)
            gpu_teardown(g);
        free(g);
    }
}

/* Section for compute-sanitizer (--quick): a few small cases through both kernels. */
static void test_sanitize_cases(void)
{
    support_matmul_case cases[] = {
        support_make_matmul_case(200, 264, 72, &combos[0], 2 | 4 | 8 | 16, 0, 1),
        support_make_matmul_case(136, 264, 64, &combos[1], 1, SUPPORT_B_TRANSPOSED, 2),
        support_make_matmul_case(72, 16, 136, &combos[1], 3 | 16, SUPPORT_A_TRANSPOSED, 3),
        support_make_matmul_case(130, 40, 24, &combos[2], 3 | 4, SUPPORT_A_TRANSPOSED | SUPPORT_B_TRANSPOSED, 4),
        support_make_matmul_case(72, 264, 32, &combos[3], 1 | 8, SUPPORT_C_COLUMN_MAJOR, 5),
        support_make_matmul_case(37, 13, 5, &combos[4], 2 | 4 | 8 | 16, SUPPORT_C_PADDED | SUPPORT_VECTORS_STRIDED, 6),
        support_make_matmul_case(1, 1, 1, &combos[5], 1, 0, 7),
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        run_case(&cases[i]);
}

/* Runs a section and prints its checks and time. */
static void section(const char *name, void (*fn)(void))
{
    int64_t passed = support_passed(), failed = support_failed();
    double t0 = cvft_now_seconds();
    fn();
    printf("%-14s %6lld passed %4lld failed  %.1f s\n", name, (long long)(support_passed() - passed),
           (long long)(support_failed() - failed), cvft_now_seconds() - t0);
    fflush(stdout);
}

static void test_large_all(void)
{
    test_large(CVF_F16, CVF_ACTIVATION_RELU, 0);
    test_large(CVF_BF16, CVF_ACTIVATION_NONE, SUPPORT_B_TRANSPOSED);
    test_large(CVF_F16, CVF_ACTIVATION_RELU, SUPPORT_A_TRANSPOSED);
}

/* ---- the Hopper kernel's schedule (a pure host function: runs without a GPU) ------------- */

/* Checks what holds for every schedule of an m x n x k product on sm_count SMs: a known width, the
 * tile count of that width, and per mode its units, splits and exchange workspace (a slot of the
 * widest tile, 128 x 256 floats, per piece that can be stored); beside other lanes, whole tiles. */
static void check_schedule_shape(const char *label, const cvf_sm90_schedule *s, int32_t sm_count, int64_t m,
                                 int64_t n, int64_t k, bool beside)
{
    const size_t slot = sizeof(float) * 128 * 256;
    const int64_t tiles_m = (m + 127) / 128;
    CHECK(s->tile_n == 256 || s->tile_n == 192 || s->tile_n == 128, "%s: tile width %d", label, s->tile_n);
    if (s->tile_n <= 0)
        return;
    const int64_t tiles_n = (n + s->tile_n - 1) / s->tile_n, pairs = (tiles_m + 1) / 2 * tiles_n;
    CHECK(s->tiles == tiles_m * tiles_n, "%s: %lld tiles, expected %lld", label, (long long)s->tiles,
          (long long)(tiles_m * tiles_n));
    CHECK(s->cluster == 1 || (s->cluster == 2 && tiles_m >= 2 && s->mode != CVF_SM90_STREAM_K),
          "%s: cluster %d (%lld row tiles, mode %d)", label, s->cluster, (long long)tiles_m, (int)s->mode);
    const int64_t per_cluster = s->cluster == 2 ? pairs : s->tiles; /* the units' tiles */
    CHECK(s->unit_tiles == per_cluster * s->cluster, "%s: %lld unit tiles, expected %lld", label,
          (long long)s->unit_tiles, (long long)(per_cluster * s->cluster));
    const int64_t slots = sm_count / s->cluster;
    switch (s->mode) {
    case CVF_SM90_WHOLE_TILES:
        CHECK(s->units == per_cluster && s->splits == 1 && s->split_bytes == 0,
              "%s: whole tiles: %lld units, %d splits, %zu bytes", label, (long long)s->units, s->splits,
              s->split_bytes);
        break;
    case CVF_SM90_SPLIT_K:
        CHECK(!beside && s->splits >= 2 && s->units == per_cluster * s->splits && per_cluster <= slots &&
                  s->split_bytes >= slot * (size_t)(s->units * s->cluster),
              "%s: split-K: %lld units in %d parts (%lld tiles, %lld slots), %zu bytes", label, (long long)s->units,
              s->splits, (long long)per_cluster, (long long)slots, s->split_bytes);
        break;
    case CVF_SM90_STREAM_K:
        CHECK(!beside && s->cluster == 1 && s->units >= 2 && s->units <= sm_count && (k + 63) / 64 <= 96 &&
                  s->split_bytes == slot * 2 * (size_t)s->units,
              "%s: stream-K: %lld units, K %lld, %zu bytes", label, (long long)s->units, (long long)k,
              s->split_bytes);
        break;
    }
}

/* The schedule's rules on many shapes (as above, beside and alone), the choices measured
 * on the H200 (docs/PERF.md issue 12 part 2), so that a change of the model that undoes one fails
 * here, and the variables that force it (tests and experiments). */
static void test_schedule_rules(void)
{
    const int32_t h200 = 132;
    static const int64_t shapes[][3] = {
        {1, 1, 1},          {7, 13, 5},          {136, 8, 4000},      {296, 520, 640},     {1000, 1000, 1000},
        {768, 3072, 12608}, {3072, 768, 12608},  {12608, 768, 3072},  {12608, 3072, 768},  {8192, 8192, 8192},
        {4096, 4096, 4096}, {1024, 4096, 16448}, {16448, 1024, 4096}, {1280, 5120, 16448}, {16448, 1280, 5120},
        {8192, 8192, 256},  {16384, 8192, 64},   {2100, 300, 200},    {64, 64, 64},        {100000, 40, 8},
    };
    static const int32_t sm_counts[] = {1, 132, 264};
    char label[160];
    for (size_t i = 0; i < ARRAY_SIZE(shapes); i++)
        for (int beside = 0; beside < 2; beside++)
            for (size_t c = 0; c < ARRAY_SIZE(sm_counts); c++) {
                const int32_t sms = sm_counts[c];
                const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
                snprintf(label, sizeof label, "schedule %lldx%lldx%lld on %d SMs%s", (long long)m, (long long)n,
                         (long long)k, sms, beside ? ", beside" : "");
                const cvf_sm90_schedule s = cvf_cuda_sm90_schedule(sms, m, n, k, beside != 0);
                check_schedule_shape(label, &s, sms, m, n, k, beside != 0);
            }
    /* measured choices (H200): 192 wide in three whole waves beat stream-K at 256 (0.0877 vs 0.103
     * ms); 128 wide was slower at 1024 x 4096 x 16448 (0.233 vs 0.179) and at 8192^3 */
    const cvf_sm90_schedule k23 = cvf_cuda_sm90_schedule(h200, 12608, 768, 3072, false);
    CHECK(k23.tile_n == 192 && k23.mode == CVF_SM90_WHOLE_TILES, "12608x768x3072: width %d, mode %d", k23.tile_n,
          (int)k23.mode);
    const cvf_sm90_schedule big = cvf_cuda_sm90_schedule(h200, 8192, 8192, 8192, false);
    CHECK(big.tile_n == 256 && big.mode == CVF_SM90_WHOLE_TILES, "8192^3: width %d, mode %d", big.tile_n,
          (int)big.mode);
    const cvf_sm90_schedule vitl = cvf_cuda_sm90_schedule(h200, 1024, 4096, 16448, false);
    CHECK(vitl.tile_n == 256, "1024x4096x16448: width %d", vitl.tile_n);
    /* measured choices (H100, every candidate forced, docs/PERF.md 2026-12-06 third session): the
     * ViT-B weight gradients in one wave of whole 192-wide tiles (0.097 ms; 4 K parts 0.113), 1024^3
     * whole (0.0132; 2 parts 0.0165), and 4 tiles of 256 x 256 x 12608 still cut (7 parts 0.0272, 3
     * parts 0.0375) */
    const cvf_sm90_schedule k21 = cvf_cuda_sm90_schedule(h200, 768, 3072, 12608, false);
    CHECK(k21.tile_n == 192 && k21.mode == CVF_SM90_WHOLE_TILES, "768x3072x12608: width %d, mode %d", k21.tile_n,
          (int)k21.mode);
    const cvf_sm90_schedule cube = cvf_cuda_sm90_schedule(h200, 1024, 1024, 1024, false);
    CHECK(cube.mode == CVF_SM90_WHOLE_TILES, "1024^3: mode %d", (int)cube.mode);
    const cvf_sm90_schedule few = cvf_cuda_sm90_schedule(h200, 256, 256, 12608, false);
    CHECK(few.mode == CVF_SM90_SPLIT_K && few.splits >= 4, "256x256x12608: mode %d, %d parts", (int)few.mode,
          few.splits);
    /* forcing: the width; pairs; stream-K stays on single CTAs even with pairs asked for */
    setenv("CVF_CUDA_TILE_N", "192", 1);
    const cvf_sm90_schedule w192 = cvf_cuda_sm90_schedule(h200, 8192, 8192, 8192, false);
    CHECK(w192.tile_n == 192 && w192.tiles == 64 * 43, "CVF_CUDA_TILE_N=192: width %d, %lld tiles", w192.tile_n,
          (long long)w192.tiles);
    unsetenv("CVF_CUDA_TILE_N");
    setenv("CVF_CUDA_CLUSTER", "2", 1);
    const cvf_sm90_schedule pairs = cvf_cuda_sm90_schedule(h200, 296, 520, 640, true);
    CHECK(pairs.cluster == 2 && pairs.mode == CVF_SM90_WHOLE_TILES && pairs.tile_n > 0 &&
              pairs.units == 2 * ((520 + pairs.tile_n - 1) / pairs.tile_n), /* 2 pair rows of 3 row tiles */
          "CVF_CUDA_CLUSTER=2: cluster %d, mode %d, %lld units", pairs.cluster, (int)pairs.mode,
          (long long)pairs.units);
    const cvf_sm90_schedule one_row = cvf_cuda_sm90_schedule(h200, 100, 520, 640, true);
    CHECK(one_row.cluster == 1, "CVF_CUDA_CLUSTER=2 with one row tile: cluster %d", one_row.cluster);
    setenv("CVF_CUDA_SPLITK", "7", 1);
    const cvf_sm90_schedule sk = cvf_cuda_sm90_schedule(h200, 296, 520, 640, false);
    CHECK(sk.mode == CVF_SM90_STREAM_K && sk.cluster == 1 && sk.units == 7,
          "CVF_CUDA_SPLITK=7 with CVF_CUDA_CLUSTER=2: mode %d, cluster %d, %lld units", (int)sk.mode, sk.cluster,
          (long long)sk.units);
    setenv("CVF_CUDA_SPLITK", "k3", 1);
    const cvf_sm90_schedule pk = cvf_cuda_sm90_schedule(h200, 296, 520, 640, false);
    check_schedule_shape("CVF_CUDA_SPLITK=k3 CVF_CUDA_CLUSTER=2", &pk, h200, 296, 520, 640, false);
    CHECK(pk.mode == CVF_SM90_SPLIT_K && pk.cluster == 2 && pk.splits == 3 && pk.units == 2 * 3 * 3,
          "CVF_CUDA_SPLITK=k3 with CVF_CUDA_CLUSTER=2: mode %d, cluster %d, %d parts, %lld units", (int)pk.mode,
          pk.cluster, pk.splits, (long long)pk.units);
    unsetenv("CVF_CUDA_CLUSTER");
    /* stream-K forced where there is not a second slice to share: whole tiles (at K = 0 the
     * schedule divided by its zero units: SIGFPE in test_cuda run under CVF_CUDA_SPLITK=7) */
    setenv("CVF_CUDA_SPLITK", "7", 1);
    static const int64_t no_second_slice[][3] = {{296, 520, 0}, {1, 1, 0}, {1, 1, 1}, {100, 200, 64}};
    for (size_t i = 0; i < ARRAY_SIZE(no_second_slice); i++) {
        const int64_t m = no_second_slice[i][0], n = no_second_slice[i][1], k = no_second_slice[i][2];
        const cvf_sm90_schedule s = cvf_cuda_sm90_schedule(h200, m, n, k, false);
        CHECK(s.mode == CVF_SM90_WHOLE_TILES && s.units == s.tiles,
              "CVF_CUDA_SPLITK=7 at %lldx%lldx%lld: mode %d, %lld units (%lld tiles)", (long long)m, (long long)n,
              (long long)k, (int)s.mode, (long long)s.units, (long long)s.tiles);
    }
}

/* Section: test_schedule_rules with the forcing test_cuda was started under set aside, and given
 * back after (forcing_set_aside; forcing_restore also clears what the rules left set). */
static void test_schedule(void)
{
    forcing_saved saved = forcing_set_aside();
    test_schedule_rules();
    forcing_restore(&saved);
}

/* test_cuda --host-check: the MLP section with the CPU backend standing in for the GPU (no CUDA
 * call is made): checks the error bounds and the self-checks on a machine without a GPU; and the
 * Hopper kernel's schedule, a host function. */
static int host_check_main(void)
{
    cvf_context_options ref = {CVF_DEVICE_REFERENCE, 1, 0, NULL}, cpu = {CVF_DEVICE_CPU, 0, 0, NULL};
    if (cvf_context_create(&ref, &reference_ctx) || cvf_context_create(&cpu, &cpu_ctx)) {
        printf("FAIL: context creation\n");
        return 1;
    }
    printf("test_cuda --host-check: the MLP checks with the CPU backend (and the CUDA composition on it) as the "
           "device\n");
    section("mlp (host)", test_mlp);
    section("schedule", test_schedule);
    const char *where = "";
    double worst = support_worst_error_ratio(&where);
    printf("worst error / tolerance: %.3f (%s)\n", worst, where);
    cvf_context_destroy(cpu_ctx);
    cvf_context_destroy(reference_ctx);
    return test_report("test_cuda --host-check");
}

/* ---- the framework API on the GPU: the caller's stream, the caller's workspace ------------ */

/* Device buffers of one bf16 product c (m x n) = a (m x k) @ b (k x n) + bias, GELU (erf),
 * aux_out, bias_grad. */
typedef struct api_case {
    int64_t m, n, k;
    void *a, *b, *c, *aux, *bias, *grad;
    cvf_matrix va, vb, vc, vaux;
    cvf_vector vbias, vgrad;
    cvf_epilogue ep;
} api_case;

static bool api_alloc(void **p, size_t bytes, uint16_t fill_seed)
{
    if (cudaMalloc(p, bytes) != cudaSuccess)
        return false;
    uint16_t *host = malloc(bytes);
    if (!host)
        return false;
    cvft_rng rng = cvft_rng_make(fill_seed);
    for (size_t i = 0; i < bytes / 2; i++)
        host[i] = cvf_f32_to_bf16((float)cvft_rng_uniform(&rng, -1.0, 1.0));
    bool ok = cudaMemcpy(*p, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
    free(host);
    return ok;
}

static bool api_setup(api_case *t)
{
    memset(t, 0, sizeof *t);
    t->m = 300, t->n = 264, t->k = 200;
    size_t e = 2;
    bool ok = api_alloc(&t->a, t->m * t->k * e, 1) && api_alloc(&t->b, t->k * t->n * e, 2) &&
              api_alloc(&t->c, t->m * t->n * e, 3) && api_alloc(&t->aux, t->m * t->n * e, 4) &&
              api_alloc(&t->bias, t->n * e, 5) && api_alloc(&t->grad, t->n * e, 6);
    t->va = cvf_matrix_row_major(t->a, CVF_BF16, t->m, t->k);
    t->vb = cvf_matrix_row_major(t->b, CVF_BF16, t->k, t->n);
    t->vc = cvf_matrix_row_major(t->c, CVF_BF16, t->m, t->n);
    t->vaux = cvf_matrix_row_major(t->aux, CVF_BF16, t->m, t->n);
    t->vbias = cvf_vector_dense(t->bias, CVF_BF16, t->n);
    t->vgrad = cvf_vector_dense(t->grad, CVF_BF16, t->n);
    t->ep = (cvf_epilogue){CVF_ACTIVATION_GELU_ERF, &t->vbias, NULL, &t->vaux, &t->vgrad};
    return ok;
}

static void api_teardown(api_case *t)
{
    void *all[] = {t->a, t->b, t->c, t->aux, t->bias, t->grad};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++)
        cudaFree(all[i]);
}

/* Copies the outputs (c, aux, grad) of t to host memory out (m n + m n + n bf16). */
static void api_outputs(const api_case *t, uint16_t *out)
{
    size_t mn = (size_t)(t->m * t->n);
    cudaDeviceSynchronize();
    cudaMemcpy(out, t->c, mn * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(out + mn, t->aux, mn * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(out + 2 * mn, t->grad, (size_t)t->n * 2, cudaMemcpyDeviceToHost);
}

/* Section: a context follows the stream it is given between calls, and runs in the caller's
 * workspace: too small gives WORKSPACE_TOO_SMALL with every output untouched, exactly the queried
 * size gives the same bits as the context's own workspace. */
static void test_framework_api(void)
{
    api_case t;
    cvf_context *ctx = NULL;
    cudaStream_t s1 = NULL, s2 = NULL;
    size_t total = 0;
    uint16_t *want = NULL, *got = NULL;
    void *ws = NULL;
    cvf_context_options opts = {CVF_DEVICE_CUDA, 0, 0, NULL};
    if (!CHECK(api_setup(&t) && cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess &&
                   cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess &&
                   cvf_context_create(&opts, &ctx) == CVF_STATUS_SUCCESS,
               "framework api: setup"))
        goto done;
    total = (size_t)(2 * t.m * t.n + t.n);
    want = malloc(total * 2);
    got = malloc(total * 2);
    if (!CHECK(want && got, "out of memory"))
        goto done;
    CHECK(cvf_context_set_stream(ctx, s1) == CVF_STATUS_SUCCESS && cvf_context_stream(ctx) == (void *)s1,
          "set_stream(s1)");
    CHECK(cvf_matmul(ctx, &t.va, &t.vb, &t.vc, &t.ep) == CVF_STATUS_SUCCESS, "on s1: %s", cvf_context_last_error(ctx));
    cudaStreamSynchronize(s1);
    api_outputs(&t, want);
    cudaMemset(t.c, 0xFF, (size_t)(t.m * t.n * 2));
    CHECK(cvf_context_set_stream(ctx, s2) == CVF_STATUS_SUCCESS, "set_stream(s2)");
    CHECK(cvf_matmul(ctx, &t.va, &t.vb, &t.vc, &t.ep) == CVF_STATUS_SUCCESS, "on s2: %s", cvf_context_last_error(ctx));
    CHECK(cudaStreamSynchronize(s2) == cudaSuccess, "sync s2");
    api_outputs(&t, got);
    CHECK(memcmp(want, got, total * 2) == 0, "the call on s2 gave other bits than on s1");
    size_t need = 0;
    CHECK(cvf_matmul_workspace_size(ctx, &t.va, &t.vb, &t.vc, &t.ep, &need) == CVF_STATUS_SUCCESS && need > 0,
          "workspace size: %zu (%s)", need, cvf_context_last_error(ctx));
    if (!CHECK(cudaMalloc(&ws, need + 256) == cudaSuccess, "cudaMalloc workspace"))
        goto done;
    cudaMemset(t.c, 0x5A, (size_t)(t.m * t.n * 2));
    cudaMemset(t.aux, 0x5A, (size_t)(t.m * t.n * 2));
    cudaMemset(t.grad, 0x5A, (size_t)t.n * 2);
    cudaDeviceSynchronize();
    CHECK(cvf_context_set_workspace(ctx, ws, need - 256) == CVF_STATUS_SUCCESS, "set_workspace");
    cvf_status status = cvf_matmul(ctx, &t.va, &t.vb, &t.vc, &t.ep);
    CHECK(status == CVF_STATUS_WORKSPACE_TOO_SMALL, "too small: %s", cvf_status_string(status));
    api_outputs(&t, got);
    bool untouched = true;
    for (size_t i = 0; i < total; i++)
        untouched = untouched && got[i] == 0x5A5A;
    CHECK(untouched, "a too-small caller workspace still wrote an output");
    CHECK(cvf_context_set_workspace(ctx, ws, need) == CVF_STATUS_SUCCESS, "set_workspace exact");
    CHECK(cvf_matmul(ctx, &t.va, &t.vb, &t.vc, &t.ep) == CVF_STATUS_SUCCESS, "exact: %s", cvf_context_last_error(ctx));
    api_outputs(&t, got);
    CHECK(memcmp(want, got, total * 2) == 0, "the caller's workspace gave other bits than the context's own");
    cvf_context_set_workspace(ctx, NULL, 0);
done:
    cvf_context_destroy(ctx);
    cudaFree(ws);
    free(want);
    free(got);
    if (s1)
        cudaStreamDestroy(s1);
    if (s2)
        cudaStreamDestroy(s2);
    api_teardown(&t);
}

/* Creates the CUDA contexts: the default one, the simple kernel's, and one on a non-blocking user
 * stream. Returns whether all were made. */
static bool create_cuda_contexts(void)
{
    cvf_context_options ref = {CVF_DEVICE_REFERENCE, 1, 0, NULL}, cuda = {CVF_DEVICE_CUDA, 0, 0, NULL};
    if (cvf_context_create(&ref, &reference_ctx) || cvf_context_create(&cuda, &fast_ctx))
        return false;
    char *saved = support_env_override("CVF_CUDA_KERNEL", "simple");
    cvf_status status = cvf_context_create(&cuda, &simple_ctx);
    support_env_give_back("CVF_CUDA_KERNEL", saved);
    if (status != CVF_STATUS_SUCCESS || cudaStreamCreateWithFlags(&user_stream, cudaStreamNonBlocking) != cudaSuccess)
        return false;
    saved = support_env_override("CVF_CUDA_ENGINE", "own");
    status = cvf_context_create(&cuda, &own_ctx);
    support_env_give_back("CVF_CUDA_ENGINE", saved);
    if (status != CVF_STATUS_SUCCESS)
        return false;
    cvf_context_options on_stream = {CVF_DEVICE_CUDA, 0, 0, user_stream};
    return cvf_context_create(&on_stream, &stream_ctx) == CVF_STATUS_SUCCESS;
}

/* Parses the options (--quick, --host-check). Returns whether they were all known. */
static bool parse_options(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[a], "--host-check") == 0)
            host_mode = true;
        else {
            printf("usage: test_cuda [--quick] [--host-check]\n");
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    if (!parse_options(argc, argv))
        return 2;
    if (host_mode)
        return host_check_main();
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP: test_cuda: no CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    hopper = prop.major == 9;
    printf("test_cuda on %s (sm_%d%d, %d SMs)%s\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           hopper ? "" : ": not Hopper, every call runs on the simple kernel");
    if (!create_cuda_contexts()) {
        printf("FAIL: context creation\n");
        return 1;
    }
    section("errors", test_errors);
    section("framework api", test_framework_api);
    if (quick) {
        section("sanitize set", test_sanitize_cases);
    } else {
        section("shapes", test_shapes);
        section("cross product", test_cross_product);
        section("column sum", test_column_sum);
    }
    section("schedule", test_schedule);
    section("cut tiles", test_cut_tiles);
    section("nan", test_nan);
    section("mlp", test_mlp);
    section("mlp plan", test_mlp_plan);
    if (!quick)
        section("large", test_large_all);
    const char *where = "";
    double worst = support_worst_error_ratio(&where);
    printf("worst error / tolerance: %.3f (%s)\n", worst, where);
    cvf_context_destroy(stream_ctx);
    cudaStreamDestroy(user_stream);
    cvf_context_destroy(simple_ctx);
    cvf_context_destroy(own_ctx);
    cvf_context_destroy(fast_ctx);
    cvf_context_destroy(reference_ctx);
    return test_report("test_cuda");
}

#endif /* CVF_HAVE_CUDA */

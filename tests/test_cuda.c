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
 * column sums, the MLP forward and backward against the CPU, and one 4096^3 product checked at
 * sampled elements.
 *
 * Without CUDA in the build, or without a GPU, prints "SKIP: ..." and exits 77 (ctest: skipped).
 */
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
static bool hopper;
static bool quick; /* --quick: small cases only (for compute-sanitizer) */

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
    if (!host->bytes)
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
    cvf_epilogue ep = {c->activation, c->bias ? &g->bias : NULL,
                       c->activation == CVF_ACTIVATION_DGELU_TANH ? &g->aux_in : NULL, c->aux_out ? &g->aux_out : NULL,
                       c->bias_grad ? &g->bias_grad : NULL};
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
    int64_t a_ld = (c->layout & SUPPORT_A_TRANSPOSED) ? c->m : c->k;
    int64_t b_ld = (c->layout & SUPPORT_B_TRANSPOSED) ? c->k : c->n;
    return a_ld % 8 == 0 && b_ld % 8 == 0;
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
                ok &= CHECK(strcmp(cvf_cuda_last_kernel(ctxs[v]), "sm90") == 0,
                            "%s: expected the sm90 kernel, ran '%s'", g->f.label, cvf_cuda_last_kernel(ctxs[v]));
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
            for (int e = 0; e < 32; e++) {
                if (l > 0 && e % 3 != 0 && e != 31 && e != 30)
                    continue; /* all 32 epilogues on the plain layout, a third of them elsewhere */
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
                                    3 | 16 /* dgelu, grad */, 0};
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
            CHECK(strcmp(cvf_cuda_last_kernel(fast_ctx), "sm90") == 0, "large: ran %s", cvf_cuda_last_kernel(fast_ctx));
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

/* ---- MLP forward / backward: the core's composition runs on CUDA; compare with the CPU ------ */

typedef struct tensor {
    support_matrix m;
    support_vector v;
    bool is_vector;
    mirror dev;
} tensor;

static void tensor_matrix(tensor *t, cvf_dtype dtype, int64_t rows, int64_t cols, cvft_rng *rng)
{
    memset(t, 0, sizeof *t);
    support_layout layout = {false, 0, 0};
    CHECK(support_matrix_create(&t->m, dtype, rows, cols, layout) == 0, "mlp: oom");
    if (rng)
        support_matrix_fill(&t->m, rng, -1, 1);
    mirror_create(&t->dev, &t->m.buffer);
}

static void tensor_vector(tensor *t, cvf_dtype dtype, int64_t length, cvft_rng *rng)
{
    memset(t, 0, sizeof *t);
    t->is_vector = true;
    CHECK(support_vector_create(&t->v, dtype, length, 1, 0) == 0, "mlp: oom");
    if (rng)
        support_vector_fill(&t->v, rng, -1, 1);
    mirror_create(&t->dev, &t->v.buffer);
}

static cvf_matrix host_m(tensor *t)
{
    return t->m.view;
}

static cvf_matrix dev_m(tensor *t)
{
    return dev_matrix(&t->dev, &t->m.view);
}

static cvf_vector host_v(tensor *t)
{
    return t->v.view;
}

static cvf_vector dev_v(tensor *t)
{
    return dev_vector(&t->dev, &t->v.view);
}

/* Compares a CUDA output (downloaded into a copy) with the CPU's. */
static void compare_output(const char *name, tensor *t, cvf_dtype dtype)
{
    support_buffer *b = t->is_vector ? &t->v.buffer : &t->m.buffer;
    unsigned char *cpu = malloc(b->size);
    memcpy(cpu, b->bytes, b->size);
    mirror_download(&t->dev);
    double err;
    if (t->is_vector) {
        cvf_vector want = t->v.view;
        want.data = cpu + ((unsigned char *)t->v.view.data - b->bytes);
        err = cvft_vector_rel_error(&t->v.view, &want);
        CHECK(support_vector_count_poisoned(&t->v) == 0, "mlp %s: unwritten", name);
    } else {
        cvf_matrix want = t->m.view;
        want.data = cpu + ((unsigned char *)t->m.view.data - b->bytes);
        err = cvft_matrix_rel_error(&t->m.view, &want);
        CHECK(support_count_poisoned_in_view(&t->m) == 0, "mlp %s: unwritten", name);
    }
    CHECK(err <= 2 * cvft_tolerance(dtype), "mlp %s: CUDA vs CPU relative difference %.3g > %.3g", name, err,
          2 * cvft_tolerance(dtype));
    free(cpu);
}

static void test_mlp(cvf_dtype dtype)
{
    const int64_t S = 197, H = 64, I = 256;
    cvft_rng rng = cvft_rng_make(31);
    cvf_context *cpu = NULL;
    cvf_context_options cpu_options = {CVF_DEVICE_CPU, 2, 0, NULL};
    CHECK(cvf_context_create(&cpu_options, &cpu) == CVF_STATUS_SUCCESS, "mlp: cpu context");
    tensor x, w1, b1, w2, b2, fc1, gelu, y, gy, gx, gw1, gb1, gw2, gb2;
    tensor_matrix(&x, dtype, S, H, &rng);
    tensor_matrix(&w1, dtype, I, H, &rng);
    tensor_vector(&b1, dtype, I, &rng);
    tensor_matrix(&w2, dtype, H, I, &rng);
    tensor_vector(&b2, dtype, H, &rng);
    tensor_matrix(&fc1, dtype, S, I, NULL);
    tensor_matrix(&gelu, dtype, S, I, NULL);
    tensor_matrix(&y, dtype, S, H, NULL);
    tensor_matrix(&gy, dtype, S, H, &rng);
    tensor_matrix(&gx, dtype, S, H, NULL);
    tensor_matrix(&gw1, dtype, I, H, NULL);
    tensor_vector(&gb1, dtype, I, NULL);
    tensor_matrix(&gw2, dtype, H, I, NULL);
    tensor_vector(&gb2, dtype, H, NULL);
    /* forward on the CPU (host views) and on CUDA (device views) */
    cvf_mlp_forward_args fh = {host_m(&x), host_m(&w1), host_v(&b1), host_m(&w2), host_v(&b2),
                               host_m(&fc1), host_m(&gelu), host_m(&y)};
    cvf_mlp_forward_args fd = {dev_m(&x),  dev_m(&w1),   dev_v(&b1),   dev_m(&w2), dev_v(&b2),
                               dev_m(&fc1), dev_m(&gelu), dev_m(&y)};
    CHECK(cvf_mlp_forward(cpu, &fh) == CVF_STATUS_SUCCESS, "mlp forward cpu: %s", cvf_context_last_error(cpu));
    cvf_status status = cvf_mlp_forward(fast_ctx, &fd);
    CHECK(status == CVF_STATUS_SUCCESS, "mlp forward cuda: %s", cvf_context_last_error(fast_ctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "mlp forward: CUDA error");
    /* the backward reads the CPU's forward outputs on both sides: upload them first */
    unsigned char *fc1_cpu = malloc(fc1.m.buffer.size), *gelu_cpu = malloc(gelu.m.buffer.size);
    memcpy(fc1_cpu, fc1.m.buffer.bytes, fc1.m.buffer.size);
    memcpy(gelu_cpu, gelu.m.buffer.bytes, gelu.m.buffer.size);
    compare_output("fc1_output", &fc1, dtype);
    compare_output("gelu_output", &gelu, dtype);
    compare_output("output", &y, dtype);
    memcpy(fc1.m.buffer.bytes, fc1_cpu, fc1.m.buffer.size);
    memcpy(gelu.m.buffer.bytes, gelu_cpu, gelu.m.buffer.size);
    mirror_upload(&fc1.dev);
    mirror_upload(&gelu.dev);
    free(fc1_cpu);
    free(gelu_cpu);
    cvf_mlp_backward_args bh = {host_m(&gy), host_m(&x),  host_m(&w1), host_m(&w2),  host_m(&fc1), host_m(&gelu),
                                host_m(&gx), host_m(&gw1), host_v(&gb1), host_m(&gw2), host_v(&gb2)};
    cvf_mlp_backward_args bd = {dev_m(&gy), dev_m(&x),  dev_m(&w1), dev_m(&w2),  dev_m(&fc1), dev_m(&gelu),
                                dev_m(&gx), dev_m(&gw1), dev_v(&gb1), dev_m(&gw2), dev_v(&gb2)};
    CHECK(cvf_mlp_backward(cpu, &bh) == CVF_STATUS_SUCCESS, "mlp backward cpu: %s", cvf_context_last_error(cpu));
    status = cvf_mlp_backward(fast_ctx, &bd);
    CHECK(status == CVF_STATUS_SUCCESS, "mlp backward cuda: %s", cvf_context_last_error(fast_ctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "mlp backward: CUDA error");
    compare_output("grad_hidden_state", &gx, dtype);
    compare_output("grad_fc1_weight", &gw1, dtype);
    compare_output("grad_fc1_bias", &gb1, dtype);
    compare_output("grad_fc2_weight", &gw2, dtype);
    compare_output("grad_fc2_bias", &gb2, dtype);
    tensor *all[] = {&x, &w1, &b1, &w2, &b2, &fc1, &gelu, &y, &gy, &gx, &gw1, &gb1, &gw2, &gb2};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
        mirror_destroy(&all[i]->dev);
        support_matrix_destroy(&all[i]->m);
        support_vector_destroy(&all[i]->v);
    }
    cvf_context_destroy(cpu);
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

static void test_mlp_all(void)
{
    test_mlp(CVF_BF16);
    test_mlp(CVF_F16);
}

int main(int argc, char **argv)
{
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
    cvf_context_options ref = {CVF_DEVICE_REFERENCE, 1, 0, NULL}, cuda = {CVF_DEVICE_CUDA, 0, 0, NULL};
    if (cvf_context_create(&ref, &reference_ctx) || cvf_context_create(&cuda, &fast_ctx)) {
        printf("FAIL: context creation\n");
        return 1;
    }
    setenv("CVF_CUDA_KERNEL", "simple", 1);
    cvf_status status = cvf_context_create(&cuda, &simple_ctx);
    unsetenv("CVF_CUDA_KERNEL");
    if (status) {
        printf("FAIL: simple context creation\n");
        return 1;
    }
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    section("errors", test_errors);
    if (quick)
        section("sanitize set", test_sanitize_cases);
    else
        section("shapes", test_shapes);
    if (!quick) {
        section("cross product", test_cross_product);
        section("column sum", test_column_sum);
        section("mlp", test_mlp_all);
        section("large", test_large_all);
    }
    const char *where = "";
    double worst = support_worst_error_ratio(&where);
    printf("worst error / tolerance: %.3f (%s)\n", worst, where);
    cvf_context_destroy(simple_ctx);
    cvf_context_destroy(fast_ctx);
    cvf_context_destroy(reference_ctx);
    return test_report("test_cuda");
}

#endif /* CVF_HAVE_CUDA */

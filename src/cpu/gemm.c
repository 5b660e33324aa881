/*
 * The CPU GEMM with a fused epilogue: the "cube" and the "vector" of one output tile in one task.
 *
 * The output is cut into MC x NC tiles, one task each, spread over the context's threads. A task
 * loops over K in KC panels: it packs the A block (MC x KC) and the B block (KC x NC) into fp32
 * micro-panels (converting f16/bf16 and reading strided or transposed views in place) and runs
 * the micro-kernel over them into an fp32 accumulator tile. After the last panel the epilogue
 * runs on that tile — bias, aux_out, activation, conversion, store, bias-gradient partial sums —
 * so the fp32 product never goes to memory. Bias-gradient partials are kept per row block and
 * combined in row-block order: the sums do not depend on the thread count.
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "cpu/convert.h"
#include "cpu/cpu.h"
#include "cpu/kernels/kernels.h"

enum {
    MR = CVF_CPU_MR,
    NR = CVF_CPU_NR,
    MC = 64,                                                  /* rows of an output tile (multiple of MR) */
    NC = 256,                                                 /* columns of an output tile (multiple of NR) */
    KC = 256,                                                 /* depth of one packed panel */
    RUN = NC > KC ? (NC > MC ? NC : MC) : (KC > MC ? KC : MC) /* longest converted run */
};

/* Per-thread scratch, in floats, laid out one after the other. */
enum {
    SCRATCH_ACC = 0,                   /* MC x NC accumulator tile */
    SCRATCH_A = SCRATCH_ACC + MC * NC, /* packed A block, MC x KC */
    SCRATCH_B = SCRATCH_A + MC * KC,   /* packed B block, KC x NC */
    SCRATCH_RUN = SCRATCH_B + KC * NC, /* one converted run */
    SCRATCH_BIAS = SCRATCH_RUN + RUN,  /* the tile's bias columns */
    SCRATCH_SUMS = SCRATCH_BIAS + NC,  /* the tile's bias-gradient partial sums */
    SCRATCH_FLOATS = SCRATCH_SUMS + NC
};

/* Everything the tasks of one GEMM share. */
typedef struct gemm_job {
    const cvf_matrix *a, *b, *c;
    const cvf_epilogue *ep;
    int64_t m, n, k;
    int64_t row_blocks, col_blocks;
    float *scratch;  /* SCRATCH_FLOATS per thread */
    float *partials; /* row_blocks x n bias-gradient partial sums, or NULL */
} gemm_job;

/* Returns ceil(x / y) for x >= 0, y > 0. */
static int64_t ceil_div(int64_t x, int64_t y)
{
    return (x + y - 1) / y;
}

/* Packs A[i0 .. i0+mc, p0 .. p0+kc] into MR-row micro-panels: packed[(i / MR) * MR * kc + p * MR + i % MR]. */
static void pack_a(const cvf_matrix *a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *packed, float *run)
{
    int64_t panels = ceil_div(mc, MR);
    memset(packed, 0, sizeof(float) * (size_t)(panels * MR * kc));
    if (a->col_stride <= a->row_stride) { /* rows are the contiguous direction: convert row runs */
        for (int64_t i = 0; i < mc; i++) {
            cvf_cpu_load_run(a->data, a->dtype, (i0 + i) * a->row_stride + p0 * a->col_stride, a->col_stride, kc, run);
            float *dst = packed + (i / MR) * MR * kc + i % MR;
            for (int64_t p = 0; p < kc; p++)
                dst[p * MR] = run[p];
        }
    } else { /* columns are contiguous (a transposed view): convert column runs */
        for (int64_t p = 0; p < kc; p++) {
            cvf_cpu_load_run(a->data, a->dtype, i0 * a->row_stride + (p0 + p) * a->col_stride, a->row_stride, mc, run);
            for (int64_t i = 0; i < mc; i++)
                packed[(i / MR) * MR * kc + p * MR + i % MR] = run[i];
        }
    }
}

/* Packs B[p0 .. p0+kc, j0 .. j0+nc] into NR-column micro-panels: packed[(j / NR) * NR * kc + p * NR + j % NR]. */
static void pack_b(const cvf_matrix *b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *packed, float *run)
{
    int64_t panels = ceil_div(nc, NR);
    memset(packed, 0, sizeof(float) * (size_t)(panels * NR * kc));
    if (b->col_stride <= b->row_stride) { /* row runs */
        for (int64_t p = 0; p < kc; p++) {
            cvf_cpu_load_run(b->data, b->dtype, (p0 + p) * b->row_stride + j0 * b->col_stride, b->col_stride, nc, run);
            for (int64_t j = 0; j < nc; j++)
                packed[(j / NR) * NR * kc + p * NR + j % NR] = run[j];
        }
    } else { /* column runs (a transposed view, e.g. a PyTorch weight read as W^T) */
        for (int64_t j = 0; j < nc; j++) {
            cvf_cpu_load_run(b->data, b->dtype, p0 * b->row_stride + (j0 + j) * b->col_stride, b->row_stride, kc, run);
            float *dst = packed + (j / NR) * NR * kc + j % NR;
            for (int64_t p = 0; p < kc; p++)
                dst[p * NR] = run[p];
        }
    }
}

/* acc[MC x NC] += A block @ B block over the whole K, panel by panel. */
static void accumulate_tile(const gemm_job *job, int64_t i0, int64_t mc, int64_t j0, int64_t nc, float *scratch)
{
    float *acc = scratch + SCRATCH_ACC;
    float *pa = scratch + SCRATCH_A, *pb = scratch + SCRATCH_B, *run = scratch + SCRATCH_RUN;
    memset(acc, 0, sizeof(float) * MC * NC);
    for (int64_t p0 = 0; p0 < job->k; p0 += KC) {
        int64_t kc = job->k - p0 < KC ? job->k - p0 : KC;
        pack_a(job->a, i0, mc, p0, kc, pa, run);
        pack_b(job->b, p0, kc, j0, nc, pb, run);
        for (int64_t jr = 0; jr < nc; jr += NR)
            for (int64_t ir = 0; ir < mc; ir += MR)
                cvf_cpu_kernel_generic(kc, pa + ir * kc, pb + jr * kc, acc + ir * NC + jr, NC);
    }
}

/*
 * GELU in fp32 without cancellation. With u = k (x + c x^3) and s = sigmoid(2u):
 *   0.5 (1 + tanh u) = s,   1 - tanh(u)^2 = 4 s (1 - s),   1 - s = sigmoid(-2u),
 * so gelu(x) = x s and gelu'(x) = s + 2 x s (1 - s) k (1 + 3 c x^2): the same functions as the
 * tanh form, but the tails (where 1 + tanh u cancels) keep full relative accuracy.
 */
static float gelu_u(float x)
{
    const float k = (float)CVF_GELU_K, c = (float)CVF_GELU_C;
    return k * (x + c * x * x * x);
}

/* gelu_tanh(x) in fp32. */
static float gelu_f32(float x)
{
    return x / (1.0f + expf(-2.0f * gelu_u(x)));
}

/* gelu_tanh'(x) in fp32; beyond |x| = 1e10 its limit, 1 or 0 (x * x would overflow). */
static float gelu_derivative_f32(float x)
{
    const float k = (float)CVF_GELU_K, c = (float)CVF_GELU_C;
    if (fabsf(x) > 1e10f)
        return x > 0.0f ? 1.0f : 0.0f;
    float u = gelu_u(x);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    float one_minus_s = 1.0f / (1.0f + expf(2.0f * u));
    return s + 2.0f * x * s * one_minus_s * k * (1.0f + 3.0f * c * x * x);
}

/* Applies the activation to one row of the tile; aux holds the row of aux_in for DGELU. */
static void activate_row(cvf_activation activation, float *x, const float *aux, int64_t nc)
{
    switch (activation) {
    case CVF_ACTIVATION_NONE: break;
    case CVF_ACTIVATION_RELU:
        for (int64_t j = 0; j < nc; j++)
            x[j] = x[j] < 0.0f ? 0.0f : x[j]; /* NaN stays NaN, as in PyTorch */
        break;
    case CVF_ACTIVATION_GELU_TANH:
        for (int64_t j = 0; j < nc; j++)
            x[j] = gelu_f32(x[j]);
        break;
    case CVF_ACTIVATION_DGELU_TANH:
        for (int64_t j = 0; j < nc; j++)
            x[j] *= gelu_derivative_f32(aux[j]);
        break;
    }
}

/* The vector side: epilogue on the finished fp32 tile, row by row, then the stores. */
static void finish_tile(const gemm_job *job, int64_t row_block, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
                        float *scratch)
{
    const cvf_epilogue *ep = job->ep;
    const cvf_matrix *c = job->c;
    float *acc = scratch + SCRATCH_ACC, *run = scratch + SCRATCH_RUN;
    float *bias = scratch + SCRATCH_BIAS, *sums = scratch + SCRATCH_SUMS;
    if (ep->bias)
        cvf_cpu_load_run(ep->bias->data, ep->bias->dtype, j0 * ep->bias->stride, ep->bias->stride, nc, bias);
    memset(sums, 0, sizeof(float) * NC);
    for (int64_t i = 0; i < mc; i++) {
        float *x = acc + i * NC;
        if (ep->bias)
            for (int64_t j = 0; j < nc; j++)
                x[j] += bias[j];
        if (ep->aux_out)
            cvf_cpu_store_run(ep->aux_out->data, ep->aux_out->dtype,
                              (i0 + i) * ep->aux_out->row_stride + j0 * ep->aux_out->col_stride,
                              ep->aux_out->col_stride, nc, x);
        if (ep->aux_in)
            cvf_cpu_load_run(ep->aux_in->data, ep->aux_in->dtype,
                             (i0 + i) * ep->aux_in->row_stride + j0 * ep->aux_in->col_stride, ep->aux_in->col_stride,
                             nc, run);
        activate_row(ep->activation, x, run, nc);
        cvf_cpu_store_run(c->data, c->dtype, (i0 + i) * c->row_stride + j0 * c->col_stride, c->col_stride, nc, x);
        for (int64_t j = 0; j < nc; j++)
            sums[j] += x[j];
    }
    if (job->partials)
        memcpy(job->partials + row_block * job->n + j0, sums, sizeof(float) * (size_t)nc);
}

/* One task: one MC x NC output tile, computed and finished. */
static void gemm_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    int64_t row_block = task / job->col_blocks, col_block = task % job->col_blocks;
    int64_t i0 = row_block * MC, j0 = col_block * NC;
    int64_t mc = job->m - i0 < MC ? job->m - i0 : MC;
    int64_t nc = job->n - j0 < NC ? job->n - j0 : NC;
    float *scratch = job->scratch + (size_t)thread * SCRATCH_FLOATS;
    accumulate_tile(job, i0, mc, j0, nc, scratch);
    finish_tile(job, row_block, i0, mc, j0, nc, scratch);
}

/* bias_grad[j] = sum over row blocks, in order, of the partial sums (accumulated in double). */
static void combine_partials(const gemm_job *job)
{
    const cvf_vector *out = job->ep->bias_grad;
    for (int64_t j = 0; j < job->n; j++) {
        double sum = 0.0;
        for (int64_t r = 0; r < job->row_blocks; r++)
            sum += job->partials[r * job->n + j];
        float value = (float)sum;
        cvf_cpu_store_run(out->data, out->dtype, j * out->stride, 1, 1, &value);
    }
}

/* Number of MC x NC tile tasks of an output. */
static int64_t tile_tasks(const cvf_matrix *c)
{
    return ceil_div(c->rows, MC) * ceil_div(c->cols, NC);
}

/* Bytes of the per-thread scratch (packing buffers, accumulator tile) for the threads a run of
 * tasks uses: a small product does not pay for the whole pool. */
static size_t scratch_bytes(const cvf_context *ctx, int64_t tasks)
{
    size_t threads = (size_t)cvf_threadpool_threads_for(ctx->pool, tasks);
    return cvf_round_up_64(sizeof(float) * SCRATCH_FLOATS * threads);
}

size_t cvf_cpu_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                const cvf_epilogue *ep)
{
    (void)a, (void)b;
    size_t partials = ep->bias_grad ? sizeof(float) * (size_t)(ceil_div(c->rows, MC) * c->cols) : 0;
    return scratch_bytes(ctx, tile_tasks(c)) + cvf_round_up_64(partials);
}

cvf_status cvf_cpu_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                          const cvf_epilogue *ep, void *workspace)
{
    gemm_job job = {a,         b,   c, ep, c->rows, c->cols, a->cols, ceil_div(c->rows, MC), ceil_div(c->cols, NC),
                    workspace, NULL};
    if (ep->bias_grad && workspace) /* no workspace: an empty product, no partials to keep */
        job.partials = (float *)((char *)workspace + scratch_bytes(ctx, tile_tasks(c)));
    cvf_threadpool_run(ctx->pool, tile_tasks(c), gemm_task, &job);
    if (ep->bias_grad)
        combine_partials(&job);
    return CVF_STATUS_SUCCESS;
}

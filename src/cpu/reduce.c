/*
 * Column sums (the K3 "bias gradient" reduction). x's rows are cut into parts of ROWS_PER_PART
 * (a constant, never the thread count) and its columns into blocks of COLUMNS_PER_TASK; each task
 * sums one part of one block in row order, in double, and where there are several parts a second
 * pass adds each column's partial sums in part order. The order of every addition is thus fixed
 * by x's shape alone, so the result does not depend on the thread count, and a tall x keeps many
 * threads busy (768 columns are only 3 blocks: 3 threads of 16 summed 2048 rows before).
 */
#include <string.h>

#include "cpu/convert.h"
#include "cpu/cpu.h"

enum { COLUMNS_PER_TASK = 256, ROWS_PER_PART = 256 };

typedef struct sum_job {
    const cvf_matrix *x;
    const cvf_vector *out;
    int64_t blocks;   /* column blocks of COLUMNS_PER_TASK */
    int64_t parts;    /* row parts of ROWS_PER_PART (at least 1) */
    float *scratch;   /* per thread: one converted run of COLUMNS_PER_TASK */
    double *partials; /* parts x cols partial sums, where parts > 1 */
} sum_job;

/* Columns of block b of x. */
static int64_t block_cols(const cvf_matrix *x, int64_t b)
{
    const int64_t left = x->cols - b * COLUMNS_PER_TASK;
    return left < COLUMNS_PER_TASK ? left : COLUMNS_PER_TASK;
}

/* Stores sums[0..nc) (columns j0 on) to out, converted to its dtype through run. */
static void store_sums(const cvf_vector *out, int64_t j0, int64_t nc, const double *sums, float *run)
{
    for (int64_t j = 0; j < nc; j++)
        run[j] = (float)sums[j];
    cvf_cpu_store_run(out->data, out->dtype, j0 * out->stride, out->stride, nc, run);
}

/* Sums the rows of one part of x for one block of columns (task = part * blocks + block): into
 * out where x is one part, else into the part's row of partial sums. */
static void sum_task(void *arg, int64_t task, int32_t thread)
{
    const sum_job *job = arg;
    const cvf_matrix *x = job->x;
    const int64_t block = task % job->blocks, part = task / job->blocks;
    const int64_t j0 = block * COLUMNS_PER_TASK, nc = block_cols(x, block);
    const int64_t i0 = part * ROWS_PER_PART, i1 = i0 + ROWS_PER_PART < x->rows ? i0 + ROWS_PER_PART : x->rows;
    float *run = job->scratch + (size_t)thread * COLUMNS_PER_TASK;
    double sums[COLUMNS_PER_TASK] = {0};
    for (int64_t i = i0; i < i1; i++) {
        cvf_cpu_load_run(x->data, x->dtype, i * x->row_stride + j0 * x->col_stride, x->col_stride, nc, run);
        for (int64_t j = 0; j < nc; j++)
            sums[j] += run[j];
    }
    if (job->parts == 1)
        store_sums(job->out, j0, nc, sums, run);
    else
        memcpy(job->partials + part * x->cols + j0, sums, sizeof(double) * (size_t)nc);
}

/* Adds one block's partial sums in part order and stores them. */
static void finish_task(void *arg, int64_t block, int32_t thread)
{
    const sum_job *job = arg;
    const int64_t j0 = block * COLUMNS_PER_TASK, nc = block_cols(job->x, block);
    double sums[COLUMNS_PER_TASK] = {0};
    for (int64_t part = 0; part < job->parts; part++) {
        const double *p = job->partials + part * job->x->cols + j0;
        for (int64_t j = 0; j < nc; j++)
            sums[j] += p[j];
    }
    store_sums(job->out, j0, nc, sums, job->scratch + (size_t)thread * COLUMNS_PER_TASK);
}

/* Column blocks and row parts of x (parts at least 1, so that 0 rows still store zeros). */
static void sum_shape(const cvf_matrix *x, int64_t *blocks, int64_t *parts)
{
    *blocks = (x->cols + COLUMNS_PER_TASK - 1) / COLUMNS_PER_TASK;
    *parts = x->rows > ROWS_PER_PART ? (x->rows + ROWS_PER_PART - 1) / ROWS_PER_PART : 1;
}

/* Bytes of the per-thread runs, where the partial sums start. */
static size_t runs_bytes(const cvf_context *ctx, int64_t blocks, int64_t parts)
{
    const size_t threads = (size_t)cvf_threadpool_threads_for(ctx->pool, blocks * parts);
    return cvf_round_up_64(sizeof(float) * COLUMNS_PER_TASK * threads);
}

size_t cvf_cpu_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x)
{
    int64_t blocks, parts;
    sum_shape(x, &blocks, &parts);
    const size_t partials = parts > 1 ? sizeof(double) * (size_t)parts * (size_t)x->cols : 0;
    return runs_bytes(ctx, blocks, parts) + cvf_round_up_64(partials);
}

cvf_status cvf_cpu_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace)
{
    sum_job job = {x, out, 0, 0, workspace, NULL};
    sum_shape(x, &job.blocks, &job.parts);
    if (job.blocks == 0) /* no columns: nothing to sum or store (and maybe no workspace) */
        return CVF_STATUS_SUCCESS;
    if (job.parts > 1)
        job.partials = (double *)((char *)workspace + runs_bytes(ctx, job.blocks, job.parts));
    cvf_threadpool_run(ctx->pool, job.blocks * job.parts, sum_task, &job);
    if (job.parts > 1)
        cvf_threadpool_run(ctx->pool, job.blocks, finish_task, &job);
    return CVF_STATUS_SUCCESS;
}

/*
 * Column sums (the K3 "bias gradient" reduction). Each task owns a block of columns and sums all
 * rows of it in row order, so the result does not depend on the thread count.
 */
#include "cpu/convert.h"
#include "cpu/cpu.h"

enum { COLUMNS_PER_TASK = 256 };

typedef struct sum_job {
    const cvf_matrix *x;
    const cvf_vector *out;
    float *scratch; /* per thread: one converted run of COLUMNS_PER_TASK */
} sum_job;

/* Sums rows of x into out for one block of columns. */
static void sum_task(void *arg, int64_t task, int32_t thread)
{
    const sum_job *job = arg;
    const cvf_matrix *x = job->x;
    int64_t j0 = task * COLUMNS_PER_TASK;
    int64_t nc = x->cols - j0 < COLUMNS_PER_TASK ? x->cols - j0 : COLUMNS_PER_TASK;
    float *run = job->scratch + (size_t)thread * COLUMNS_PER_TASK;
    double sums[COLUMNS_PER_TASK] = {0};
    for (int64_t i = 0; i < x->rows; i++) {
        cvf_cpu_load_run(x->data, x->dtype, i * x->row_stride + j0 * x->col_stride, x->col_stride, nc, run);
        for (int64_t j = 0; j < nc; j++)
            sums[j] += run[j];
    }
    for (int64_t j = 0; j < nc; j++)
        run[j] = (float)sums[j];
    cvf_cpu_store_run(job->out->data, job->out->dtype, (j0)*job->out->stride, job->out->stride, nc, run);
}

/* Number of column-block tasks for x. */
static int64_t sum_tasks(const cvf_matrix *x)
{
    return (x->cols + COLUMNS_PER_TASK - 1) / COLUMNS_PER_TASK;
}

size_t cvf_cpu_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x)
{
    const size_t threads = (size_t)cvf_cpu_plan_threads_for(ctx, sum_tasks(x));
    return cvf_round_up_64(sizeof(float) * COLUMNS_PER_TASK * threads);
}

cvf_status cvf_cpu_column_sum(cvf_context *ctx, const cvf_matrix *x, const cvf_vector *out, void *workspace)
{
    sum_job job = {x, out, workspace};
    cvf_threadpool_run(ctx->pool, sum_tasks(x), sum_task, &job);
    return CVF_STATUS_SUCCESS;
}

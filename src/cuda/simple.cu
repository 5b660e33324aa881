/*
 * The portable CUDA kernels: simple, obviously correct, any compute capability.
 *
 *  - simple_gemm: one thread per 8 outputs of one column (rows ty, ty+8, ..., of a 64-row slab),
 *    fp32 accumulation in K order, any dtypes, any strides; the epilogue in the same code as the
 *    fast kernel (device.cuh). It runs every call the Hopper kernel cannot take, and every call
 *    under CVF_CUDA_KERNEL=simple: the oracle to debug the fast kernel against.
 *  - column sums and the bias-gradient combine: per-slab partial sums, then one pass that adds
 *    the slabs of each column in a fixed order (double; see combine_kernel): bit-identical run
 *    to run.
 */
#include <cuda_runtime.h>

#include "cuda/device.cuh"

enum { SIMPLE_COLS = 32, SIMPLE_ROWS_PER_THREAD = 8, SIMPLE_THREAD_ROWS = 8 };

typedef struct simple_args {
    int64_t m, n, k;
    dev_mat a, b, c;
    dev_epilogue ep;
} simple_args;

__global__ void __launch_bounds__(SIMPLE_COLS *SIMPLE_THREAD_ROWS) simple_gemm_kernel(simple_args p)
{
    __shared__ float column_part[SIMPLE_THREAD_ROWS][SIMPLE_COLS];
    int64_t j = (int64_t)blockIdx.x * SIMPLE_COLS + threadIdx.x;
    int64_t i0 = (int64_t)blockIdx.y * CVF_CUDA_SIMPLE_SLAB + threadIdx.y;
    float acc[SIMPLE_ROWS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < SIMPLE_ROWS_PER_THREAD; r++)
        acc[r] = 0.0f;
    if (j < p.n) {
        for (int64_t q = 0; q < p.k; q++) {
            float bv = dev_load(p.b.data, p.b.dtype, q * p.b.rs + j * p.b.cs);
#pragma unroll
            for (int r = 0; r < SIMPLE_ROWS_PER_THREAD; r++) {
                int64_t i = i0 + r * SIMPLE_THREAD_ROWS;
                if (i < p.m)
                    acc[r] = fmaf(dev_load(p.a.data, p.a.dtype, i * p.a.rs + q * p.a.cs), bv, acc[r]);
            }
        }
    }
    float sum = 0.0f;
    if (j < p.n) {
        float bias = p.ep.bias.data ? dev_load(p.ep.bias.data, p.ep.bias.dtype, j * p.ep.bias.stride) : 0.0f;
#pragma unroll
        for (int r = 0; r < SIMPLE_ROWS_PER_THREAD; r++) {
            int64_t i = i0 + r * SIMPLE_THREAD_ROWS;
            if (i < p.m)
                sum += dev_finish_element(p.ep, p.c, i, j, acc[r], bias);
        }
    }
    if (!p.ep.partials)
        return;
    column_part[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && j < p.n) {
        float total = 0.0f;
        for (int t = 0; t < SIMPLE_THREAD_ROWS; t++) /* fixed order */
            total += column_part[t][threadIdx.x];
        p.ep.partials[(int64_t)blockIdx.y * p.n + j] = total;
    }
}

/* partials[s][j] = sum of rows [s * slab, (s + 1) * slab) of column j of x, in row order. */
__global__ void column_partials_kernel(dev_mat x, int64_t rows, int64_t cols, int64_t slab, float *partials)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t s = blockIdx.y;
    if (j >= cols)
        return;
    int64_t end = (s + 1) * slab < rows ? (s + 1) * slab : rows, i = s * slab;
    float sum = 0.0f;
    for (; i + 8 <= end; i += 8) { /* 8 loads in flight, then added in row order */
        float v[8];
#pragma unroll
        for (int q = 0; q < 8; q++)
            v[q] = dev_load(x.data, x.dtype, (i + q) * x.rs + j * x.cs);
#pragma unroll
        for (int q = 0; q < 8; q++)
            sum += v[q];
    }
    for (; i < end; i++)
        sum += dev_load(x.data, x.dtype, i * x.rs + j * x.cs);
    partials[s * cols + j] = sum;
}

enum { COMBINE_COLS = 32, COMBINE_GROUPS = 16 };

/* out[j] = the sum of partials[s][j] over the slabs, in double, rounded once to out's dtype. A
 * block takes 32 columns; group g of its 16 adds slabs g, g + 16, ... in order, then the group
 * sums are added in group order: a fixed order for a given slab count (bit-identical run to run).
 * Each thread keeps 8 loads in flight: the slabs are many (one per 16 rows of a GEMM), and one
 * load at a time would wait on memory latency for each. */
__global__ void __launch_bounds__(COMBINE_COLS *COMBINE_GROUPS)
    combine_kernel(const float *partials, int64_t slabs, int64_t n, dev_vec out)
{
    __shared__ double group_sum[COMBINE_GROUPS][COMBINE_COLS];
    const int64_t j = (int64_t)blockIdx.x * COMBINE_COLS + threadIdx.x;
    double sum = 0.0;
    if (j < n) {
        const int64_t step = COMBINE_GROUPS;
        int64_t s = threadIdx.y;
        for (; s + 7 * step < slabs; s += 8 * step) { /* 8 loads in flight, added in slab order */
            float v[8];
#pragma unroll
            for (int q = 0; q < 8; q++)
                v[q] = __ldg(partials + (s + q * step) * n + j);
#pragma unroll
            for (int q = 0; q < 8; q++)
                sum += v[q];
        }
        for (; s < slabs; s += step)
            sum += __ldg(partials + s * n + j);
    }
    group_sum[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y != 0 || j >= n)
        return;
    double total = 0.0;
    for (int g = 0; g < COMBINE_GROUPS; g++)
        total += group_sum[g][threadIdx.x];
    dev_store(out.data, out.dtype, j * out.stride, (float)total);
}

static int64_t ceil_div(int64_t x, int64_t y)
{
    return (x + y - 1) / y;
}

cvf_status cvf_cuda_combine_partials(cvf_context *ctx, cvf_cuda_launch launch, const float *partials, int64_t slabs,
                                     int64_t n, const cvf_vector *out)
{
    if (n == 0)
        return CVF_STATUS_SUCCESS;
    cudaStream_t stream = (cudaStream_t)launch.stream;
    combine_kernel<<<(unsigned)ceil_div(n, COMBINE_COLS), dim3(COMBINE_COLS, COMBINE_GROUPS), 0, stream>>>(
        partials, slabs, n, dev_vec_of(out));
    return cvf_cuda_check(ctx, cudaGetLastError(), "bias-gradient combine kernel launch");
}

cvf_status cvf_cuda_simple_matmul(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                                  const cvf_matrix *c, const cvf_epilogue *ep, float *partials)
{
    simple_args p;
    p.m = c->rows;
    p.n = c->cols;
    p.k = a->cols;
    p.a = dev_mat_of(a);
    p.b = dev_mat_of(b);
    p.c = dev_mat_of(c);
    p.ep = dev_epilogue_of(ep, partials);
    int64_t slabs = ceil_div(p.m, CVF_CUDA_SIMPLE_SLAB);
    if (slabs > 65535)
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "c: %lld rows exceed the simple CUDA kernel's grid",
                        (long long)p.m);
    dim3 grid((unsigned)ceil_div(p.n, SIMPLE_COLS), (unsigned)slabs);
    dim3 block(SIMPLE_COLS, SIMPLE_THREAD_ROWS);
    simple_gemm_kernel<<<grid, block, 0, (cudaStream_t)launch.stream>>>(p);
    cvf_status status = cvf_cuda_check(ctx, cudaGetLastError(), "simple GEMM kernel launch");
    if (status == CVF_STATUS_SUCCESS && ep->bias_grad)
        status = cvf_cuda_combine_partials(ctx, launch, partials, slabs, p.n, ep->bias_grad);
    return status;
}

/* Rows per column-sum slab: 64 (many short chains in flight), more when the grid's 65535 rows
 * of blocks would not cover x. */
static int64_t sum_slab(int64_t rows)
{
    return rows > 64 * (int64_t)65535 ? ceil_div(rows, 65535) : 64;
}

extern "C" size_t cvf_cuda_column_sum_workspace(const cvf_context *ctx, const cvf_matrix *x)
{
    (void)ctx;
    return cvf_round_up_64(sizeof(float) * (size_t)(ceil_div(x->rows, sum_slab(x->rows)) * x->cols));
}

cvf_status cvf_cuda_column_sum_on(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *x, const cvf_vector *out,
                                  void *workspace)
{
    const int64_t slab = sum_slab(x->rows), slabs = ceil_div(x->rows, slab);
    if (x->cols == 0)
        return CVF_STATUS_SUCCESS;
    float *partials = (float *)workspace;
    if (slabs > 0) {
        dim3 grid((unsigned)ceil_div(x->cols, 256), (unsigned)slabs);
        column_partials_kernel<<<grid, 256, 0, (cudaStream_t)launch.stream>>>(dev_mat_of(x), x->rows, x->cols, slab,
                                                                             partials);
        cvf_status status = cvf_cuda_check(ctx, cudaGetLastError(), "column-sum kernel launch");
        if (status != CVF_STATUS_SUCCESS)
            return status;
    }
    return cvf_cuda_combine_partials(ctx, launch, partials, slabs, x->cols, out);
}

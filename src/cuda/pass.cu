/*
 * The epilogue pass of the unfused engine: C already holds the product (rounded once to C's
 * dtype by the GEMM that wrote it); one memory-bound pass applies the rest of the epilogue in
 * place, in the same sequence as every other kernel (dev_finish_element): x = C + bias,
 * aux_out = x, y = activation(x) (aux_in for GELU'), C = y, and the bias-gradient partials per
 * 64-row slab, combined afterwards in a fixed order (bit-identical run to run).
 *
 * A block covers a 64-row slab and 32 column groups: 256 threads in 32 x 8, each taking VEC
 * consecutive columns of rows ty, ty + 8, ..., ty + 56. With 16-bit row-major C (and aux_in /
 * aux_out) on 16-byte aligned rows, VEC = 8 and every load and store is one 16-byte access;
 * otherwise VEC = 1 and elements go one by one (any dtype, any strides).
 */
#include <cuda_runtime.h>

#include "cuda/device.cuh"

enum { PASS_COLS = 32, PASS_THREAD_ROWS = 8, PASS_SLAB = 64 };

typedef struct pass_args {
    int64_t m, n;
    dev_mat c;
    dev_epilogue ep;
} pass_args;

/* 8 consecutive 16-bit elements of row i from column j (16-byte aligned) as fp32. */
__device__ __forceinline__ void load8(const dev_mat &x, int64_t i, int64_t j, float (&v)[8])
{
    const uint4 raw = *reinterpret_cast<const uint4 *>((const unsigned short *)x.data + i * x.rs + j);
    const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int q = 0; q < 8; q++) {
        unsigned short bits = (unsigned short)(q & 1 ? w[q / 2] >> 16 : w[q / 2] & 0xFFFFu);
        v[q] = x.dtype == CVF_F16 ? __half2float(__ushort_as_half(bits)) : __uint_as_float((unsigned)bits << 16);
    }
}

/* Stores 8 fp32 values, each rounded once, as 16-bit elements of row i from column j. */
__device__ __forceinline__ void store8(const dev_mat &x, int64_t i, int64_t j, const float (&v)[8])
{
    unsigned int w[4];
#pragma unroll
    for (int q = 0; q < 4; q++)
        w[q] = (unsigned)dev_round16(v[2 * q], x.dtype) | ((unsigned)dev_round16(v[2 * q + 1], x.dtype) << 16);
    *reinterpret_cast<uint4 *>((unsigned short *)x.data + i * x.rs + j) = make_uint4(w[0], w[1], w[2], w[3]);
}

/* The epilogue of 8 whole columns of row i, with 16-byte accesses (the same arithmetic as
 * dev_finish_element, element by element). */
__device__ __forceinline__ void finish8(const pass_args &p, int64_t i, int64_t j, const float (&bias)[8],
                                       float (&sum)[8])
{
    float x[8], aux[8];
    load8(p.c, i, j, x);
#pragma unroll
    for (int q = 0; q < 8; q++)
        x[q] += bias[q];
    if (p.ep.aux_out.data)
        store8(p.ep.aux_out, i, j, x);
    if (p.ep.aux_in.data)
        load8(p.ep.aux_in, i, j, aux);
    else
#pragma unroll
        for (int q = 0; q < 8; q++)
            aux[q] = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; q++) {
        x[q] = dev_activate(p.ep.activation, x[q], aux[q]);
        sum[q] += x[q];
    }
    store8(p.c, i, j, x);
}

template <int VEC>
__global__ void __launch_bounds__(PASS_COLS *PASS_THREAD_ROWS) epilogue_pass_kernel(pass_args p)
{
    __shared__ float part[PASS_THREAD_ROWS][PASS_COLS * VEC];
    const int64_t j0 = ((int64_t)blockIdx.x * PASS_COLS + threadIdx.x) * VEC;
    const int64_t i0 = (int64_t)blockIdx.y * PASS_SLAB + threadIdx.y;
    float bias[VEC], sum[VEC];
#pragma unroll
    for (int q = 0; q < VEC; q++) {
        const int64_t j = j0 + q;
        bias[q] = p.ep.bias.data && j < p.n ? dev_load(p.ep.bias.data, p.ep.bias.dtype, j * p.ep.bias.stride) : 0.0f;
        sum[q] = 0.0f;
    }
    const bool whole = VEC > 1 && j0 + VEC <= p.n;
    for (int r = 0; r < PASS_SLAB / PASS_THREAD_ROWS; r++) {
        const int64_t i = i0 + r * PASS_THREAD_ROWS;
        if (i >= p.m)
            break;
        if constexpr (VEC == 8) {
            if (whole) {
                finish8(p, i, j0, bias, sum);
                continue;
            }
        }
#pragma unroll
        for (int q = 0; q < VEC; q++) {
            const int64_t j = j0 + q;
            if (j < p.n)
                sum[q] += dev_finish_element(p.ep, p.c, i, j, dev_load(p.c.data, p.c.dtype, i * p.c.rs + j * p.c.cs),
                                             bias[q]);
        }
    }
    if (!p.ep.partials)
        return;
#pragma unroll
    for (int q = 0; q < VEC; q++)
        part[threadIdx.y][threadIdx.x * VEC + q] = sum[q];
    __syncthreads();
    if (threadIdx.y != 0)
        return;
#pragma unroll
    for (int q = 0; q < VEC; q++) {
        const int64_t j = j0 + q;
        if (j >= p.n)
            continue;
        float total = 0.0f;
        for (int t = 0; t < PASS_THREAD_ROWS; t++) /* fixed order */
            total += part[t][threadIdx.x * VEC + q];
        p.ep.partials[(int64_t)blockIdx.y * p.n + j] = total;
    }
}

/* True when x (absent, or 16-bit, row-major, 16-byte aligned rows) takes 16-byte accesses. */
static bool vector_ok(const cvf_matrix *x)
{
    if (!x)
        return true;
    return (x->dtype == CVF_F16 || x->dtype == CVF_BF16) && x->col_stride == 1 && x->row_stride % 8 == 0 &&
           (uintptr_t)x->data % 16 == 0;
}

cvf_status cvf_cuda_epilogue_pass(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *c,
                                  const cvf_epilogue *ep, float *partials)
{
    if (!cvf_cuda_epilogue_needed(ep) || c->rows == 0 || c->cols == 0)
        return CVF_STATUS_SUCCESS;
    pass_args p;
    p.m = c->rows;
    p.n = c->cols;
    p.c = dev_mat_of(c);
    p.ep = dev_epilogue_of(ep, ep->bias_grad ? partials : NULL);
    const int64_t slabs = (p.m + PASS_SLAB - 1) / PASS_SLAB;
    if (slabs > 65535)
        return cvf_fail(ctx, CVF_STATUS_UNSUPPORTED, "c: %lld rows exceed the epilogue pass's grid", (long long)p.m);
    const bool vec = vector_ok(c) && vector_ok(ep->aux_in) && vector_ok(ep->aux_out);
    const int64_t per_block = PASS_COLS * (vec ? 8 : 1);
    dim3 grid((unsigned)((p.n + per_block - 1) / per_block), (unsigned)slabs), block(PASS_COLS, PASS_THREAD_ROWS);
    if (vec)
        epilogue_pass_kernel<8><<<grid, block, 0, (cudaStream_t)launch.stream>>>(p);
    else
        epilogue_pass_kernel<1><<<grid, block, 0, (cudaStream_t)launch.stream>>>(p);
    cvf_status status = cvf_cuda_check(ctx, cudaGetLastError(), "epilogue pass kernel launch");
    if (status == CVF_STATUS_SUCCESS && ep->bias_grad)
        status = cvf_cuda_combine_partials(ctx, launch, partials, slabs, p.n, ep->bias_grad);
    return status;
}

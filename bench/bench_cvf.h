/*
 * What the stand-alone CPU probes in bench/ that call the public API share (cpu_mlp_steps.c,
 * cpu_mlp_pairs.c, cpu_call_time.c), each compiled by hand on its own: everything here is static
 * inline. A CPU context that exits on failure, test matrices, and the MLP backward's tensors with
 * its four GEMMs as cvf_mlp_backward runs them (weights in PyTorch's (out, in) layout).
 */
#ifndef CVF_BENCH_CVF_H
#define CVF_BENCH_CVF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cvfuse.h"

/* A CPU context of `threads` threads; exits with the reason when it cannot be made. */
static inline cvf_context *bench_cpu_context(int threads)
{
    cvf_context_options options = {0};
    options.device = CVF_DEVICE_CPU;
    options.threads = threads;
    cvf_context *ctx = NULL;
    if (cvf_context_create(&options, &ctx) != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "cvf_context_create: %s\n", cvf_context_create_error());
        exit(1);
    }
    return ctx;
}

/* A rows x cols row-major matrix of dtype (f32 or bf16) with small values of both signs (no
 * subnormals); exits when out of memory. */
static inline cvf_matrix bench_matrix(cvf_dtype dtype, int64_t rows, int64_t cols)
{
    void *data = malloc(cvf_dtype_size(dtype) * (size_t)(rows * cols));
    if (!data) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < rows * cols; i++) {
        const float v = (float)(i % 97 - 48) / 64.0f;
        if (dtype == CVF_F32)
            ((float *)data)[i] = v;
        else
            ((uint16_t *)data)[i] = cvf_f32_to_bf16(v);
    }
    return cvf_matrix_row_major(data, dtype, rows, cols);
}

/* The MLP backward's tensors at S x H x I (grad_fc1_output in the tensors' dtype, as the AMX level
 * keeps it for bf16). */
typedef struct bench_mlp {
    cvf_matrix grad_output, hidden, fc1_weight, fc2_weight, fc1_output, gelu_output;
    cvf_matrix grad_fc1_output, grad_fc1_weight, grad_fc2_weight, grad_hidden;
    cvf_matrix grad_output_t, grad_fc1_output_t; /* transposed views, read in place */
    cvf_vector grad_fc1_bias, grad_fc2_bias;
    cvf_epilogue k1;   /* GELU' with fc1_output, grad_fc1_bias sums */
    cvf_epilogue none; /* the K2 products' */
} bench_mlp;

/* The four GEMMs of the backward (step 0 .. 3), each with its layout and epilogue. */
typedef struct bench_mlp_gemm {
    const char *name;
    const cvf_matrix *a, *b, *c;
    const cvf_epilogue *ep;
} bench_mlp_gemm;

/* Fills *m (which must stay where it is: the epilogues point into it). */
static inline void bench_mlp_make(bench_mlp *m, cvf_dtype dtype, int64_t S, int64_t H, int64_t I)
{
    m->grad_output = bench_matrix(dtype, S, H);
    m->hidden = bench_matrix(dtype, S, H);
    m->fc1_weight = bench_matrix(dtype, I, H);
    m->fc2_weight = bench_matrix(dtype, H, I);
    m->fc1_output = bench_matrix(dtype, S, I);
    m->gelu_output = bench_matrix(dtype, S, I);
    m->grad_fc1_output = bench_matrix(dtype, S, I);
    m->grad_fc1_weight = bench_matrix(dtype, I, H);
    m->grad_fc2_weight = bench_matrix(dtype, H, I);
    m->grad_hidden = bench_matrix(dtype, S, H);
    m->grad_output_t = cvf_matrix_transpose(m->grad_output);
    m->grad_fc1_output_t = cvf_matrix_transpose(m->grad_fc1_output);
    float *fc1_sums = malloc(sizeof(float) * (size_t)I), *fc2_sums = malloc(sizeof(float) * (size_t)H);
    if (!fc1_sums || !fc2_sums) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    m->grad_fc1_bias = cvf_vector_dense(fc1_sums, CVF_F32, I);
    m->grad_fc2_bias = cvf_vector_dense(fc2_sums, CVF_F32, H);
    m->k1 = (cvf_epilogue){.activation = CVF_ACTIVATION_DGELU_TANH, .aux_in = &m->fc1_output,
                           .bias_grad = &m->grad_fc1_bias};
    m->none = (cvf_epilogue){0};
}

/* GEMM `step` of the backward:
 *   0 K1    grad_fc1_output = (grad_output @ fc2_weight) * gelu_tanh'(fc1_output), grad_fc1_bias sums
 *   1 K2-1  grad_fc2_weight = grad_output^T @ gelu_output
 *   2 K2-2  grad_fc1_weight = grad_fc1_output^T @ hidden_state
 *   3 K2-3  grad_hidden_state = grad_fc1_output @ fc1_weight */
static inline bench_mlp_gemm bench_mlp_step(const bench_mlp *m, int step)
{
    switch (step) {
    case 0:
        return (bench_mlp_gemm){"K1   (g @ W2) * gelu'", &m->grad_output, &m->fc2_weight, &m->grad_fc1_output, &m->k1};
    case 1:
        return (bench_mlp_gemm){"K2-1 g^T @ gelu_out", &m->grad_output_t, &m->gelu_output, &m->grad_fc2_weight,
                                &m->none};
    case 2:
        return (bench_mlp_gemm){"K2-2 gfo^T @ x", &m->grad_fc1_output_t, &m->hidden, &m->grad_fc1_weight, &m->none};
    default:
        return (bench_mlp_gemm){"K2-3 gfo @ W1", &m->grad_fc1_output, &m->fc1_weight, &m->grad_hidden, &m->none};
    }
}

#endif /* CVF_BENCH_CVF_H */

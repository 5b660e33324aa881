/*
 * The cuBLASLt engine: the vendor's GEMM as one of the engines the planner chooses from, where it
 * honours our contract. It runs plain products, products + bias (its BIAS epilogue: the bias
 * is added to the fp32 accumulator before the one rounding to C's dtype, as ours is), and the
 * forward's fc1 epilogue, bias + tanh GELU with the pre-activation stored (GELU_AUX_BIAS: the
 * same sequence on the fp32 accumulator; the tests hold it to the same per-element bounds).
 * Everything else (ReLU, the exact GELU, GELU', bias gradients) runs in our own epilogue pass
 * after a cuBLASLt product (the "cublaslt+pass" engine, engines.cu) or fused in ours: cuBLASLt's
 * RELU is not used (its NaN handling is not ours to rely on).
 *
 * cuBLASLt is column-major. A row-major C (col_stride 1) is computed as C^T = B^T A^T; a
 * column-major C directly; each operand is described as the column-major matrix its memory
 * holds, transposed by the operation where needed, so every layout is read in place.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include "cuda/device.cuh"

struct cvf_lt_plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t x, y, d; /* the two operands, then C (as D and C, beta = 0) */
    cublasLtMatmulAlgo_t algos[CVF_LT_MAX_ALGOS]; /* the heuristic's best first */
    int algo_count;
    int algo; /* the one runs use (the fastest measured, else the heuristic's first) */
    bool c_row_major; /* C^T = B^T A^T: the operands swap */
    bool with_bias;
    bool with_gelu; /* bias + tanh GELU (+ the pre-activation to aux_out): GELU_BIAS / GELU_AUX_BIAS */
};

namespace {

/* The cuBLASLt type of a dtype. */
cudaDataType_t lt_type(cvf_dtype dtype)
{
    return dtype == CVF_F16 ? CUDA_R_16F : dtype == CVF_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* A view as a column-major operand: rows x cols with leading dimension ld, and whether the
 * operation transposes it. */
struct lt_operand {
    uint64_t rows, cols;
    int64_t ld;
    cublasOperation_t op;
};

/* Describes v (r x c) as the column-major operand "v" (transpose false) or "v^T" (true). False
 * when neither stride is 1. */
bool describe(const cvf_matrix *v, bool transpose, lt_operand *out)
{
    const int64_t r = v->rows, c = v->cols;
    /* Column-major memory of v: unit row stride, leading dimension col_stride; of v^T: unit
     * col_stride, leading dimension row_stride. A single column or row has any stride. */
    const bool col_major = v->row_stride == 1 || r == 1, row_major = v->col_stride == 1 || c == 1;
    if (!transpose && col_major) {
        *out = {(uint64_t)r, (uint64_t)c, c > 1 ? v->col_stride : r, CUBLAS_OP_N};
    } else if (!transpose && row_major) {
        *out = {(uint64_t)c, (uint64_t)r, r > 1 ? v->row_stride : c, CUBLAS_OP_T};
    } else if (transpose && row_major) {
        *out = {(uint64_t)c, (uint64_t)r, r > 1 ? v->row_stride : c, CUBLAS_OP_N};
    } else if (transpose && col_major) {
        *out = {(uint64_t)r, (uint64_t)c, c > 1 ? v->col_stride : r, CUBLAS_OP_T};
    } else {
        return false;
    }
    if (out->ld < (int64_t)out->rows)
        out->ld = (int64_t)out->rows;
    return true;
}

/* The operands of C = A @ B in cuBLASLt's terms: x, y with D = op(x) op(y), and D. */
bool describe_all(const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c, lt_operand *x, lt_operand *y,
                  lt_operand *d, bool *c_row_major)
{
    *c_row_major = c->col_stride == 1 && c->cols > 1;
    if (*c_row_major) /* C^T (n x m) = B^T A^T */
        return describe(b, true, x) && describe(a, true, y) && describe(c, true, d) && d->op == CUBLAS_OP_N;
    return describe(a, false, x) && describe(b, false, y) && describe(c, false, d) && d->op == CUBLAS_OP_N;
}

/* True when a view's layout suits cuBLASLt's fast kernels: 16-byte aligned start and leading
 * dimension, strides within int32. */
bool aligned(const cvf_matrix *v)
{
    const size_t e = cvf_dtype_size(v->dtype);
    const int64_t ld = v->col_stride == 1 ? v->row_stride : v->col_stride;
    return (uintptr_t)v->data % 16 == 0 && ((size_t)ld * e) % 16 == 0 && ld < ((int64_t)1 << 31) && ld > 0;
}

template <typename T>
bool set_attr(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T &value)
{
    return cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof value) == CUBLAS_STATUS_SUCCESS;
}

/* A matrix layout of the operand in dtype. */
bool make_layout(cublasLtMatrixLayout_t *layout, cvf_dtype dtype, const lt_operand &o)
{
    return cublasLtMatrixLayoutCreate(layout, lt_type(dtype), o.rows, o.cols, o.ld) == CUBLAS_STATUS_SUCCESS;
}

/* Asks cuBLASLt's heuristic for the best algorithm of the plan's problem. */
bool find_algo(cublasLtHandle_t handle, cvf_lt_plan *plan)
{
    cublasLtMatmulPreference_t pref;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
        return false;
    const size_t ws = CVF_LT_WORKSPACE;
    const uint32_t align = 16;
    bool ok =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align) ==
            CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulHeuristicResult_t results[CVF_LT_MAX_ALGOS];
    int found = 0;
    ok = ok && cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->x, plan->y, plan->d, plan->d, pref,
                                              CVF_LT_MAX_ALGOS, results, &found) == CUBLAS_STATUS_SUCCESS &&
         found > 0;
    for (int i = 0; ok && i < found; i++)
        plan->algos[i] = results[i].algo;
    plan->algo_count = ok ? found : 0;
    cublasLtMatmulPreferenceDestroy(pref);
    return ok;
}

} /* namespace */

bool cvf_lt_eligible(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                     const cvf_epilogue *ep, bool with_bias)
{
    if (!cvf_cuda_state_of(ctx)->lt)
        return false;
    /* f16 / bf16 on the tensor cores, f32 as true fp32 (CUBLAS_COMPUTE_32F: no TF32), all
     * accumulating in fp32 as ours do. */
    if (a->dtype != b->dtype || (a->dtype != CVF_F16 && a->dtype != CVF_BF16 && a->dtype != CVF_F32))
        return false;
    if (c->dtype != a->dtype && c->dtype != CVF_F32)
        return false;
    if (c->rows < 1 || c->cols < 1 || a->cols < 1 || c->rows >= ((int64_t)1 << 31) || c->cols >= ((int64_t)1 << 31) ||
        a->cols >= ((int64_t)1 << 31))
        return false;
    lt_operand x, y, d;
    bool c_row_major;
    if (!describe_all(a, b, c, &x, &y, &d, &c_row_major) || !aligned(a) || !aligned(b) || !aligned(c))
        return false;
    if (!with_bias)
        return true;
    /* Its BIAS epilogue adds a vector along D's rows: C's columns only when C is row-major. */
    const cvf_vector *bias = ep->bias;
    return bias && c_row_major && bias->dtype == c->dtype && (bias->stride == 1 || bias->length == 1) &&
           (uintptr_t)bias->data % 16 == 0;
}

bool cvf_lt_fuses_gelu(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                       const cvf_epilogue *ep)
{
    if (ep->activation != CVF_ACTIVATION_GELU_TANH || ep->aux_in || ep->bias_grad || c->dtype == CVF_F32 ||
        !cvf_lt_eligible(ctx, a, b, c, ep, true))
        return false;
    const cvf_matrix *aux = ep->aux_out;
    /* aux_out as D's twin: same dtype, row-major like C, leading dimension a multiple of 8. */
    return !aux || (aux->dtype == c->dtype && aux->col_stride == 1 && aux->row_stride % 8 == 0 &&
                    aux->row_stride >= aux->cols && (uintptr_t)aux->data % 16 == 0);
}

cvf_lt_plan *cvf_lt_plan_create(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                const cvf_epilogue *ep, bool with_bias, bool with_gelu)
{
    lt_operand x, y, d;
    bool c_row_major;
    if (!describe_all(a, b, c, &x, &y, &d, &c_row_major))
        return NULL;
    cvf_lt_plan *plan = (cvf_lt_plan *)calloc(1, sizeof *plan);
    if (!plan)
        return NULL;
    plan->c_row_major = c_row_major;
    plan->with_bias = with_bias || with_gelu;
    plan->with_gelu = with_gelu;
    bool ok = cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    ok = ok && set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, x.op) && set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, y.op);
    if (ok && plan->with_bias) {
        const cublasLtEpilogue_t epi = !with_gelu     ? CUBLASLT_EPILOGUE_BIAS
                                       : ep->aux_out ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                     : CUBLASLT_EPILOGUE_GELU_BIAS;
        ok = set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
        if (ok && with_gelu && ep->aux_out)
            ok = set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, (int64_t)ep->aux_out->row_stride);
    }
    /* The layouts describe memory: an operand read transposed keeps its stored shape. */
    ok = ok && make_layout(&plan->x, c_row_major ? b->dtype : a->dtype, x) &&
         make_layout(&plan->y, c_row_major ? a->dtype : b->dtype, y) && make_layout(&plan->d, c->dtype, d);
    ok = ok && find_algo((cublasLtHandle_t)cvf_cuda_state_of(ctx)->lt, plan);
    if (!ok) {
        cvf_lt_plan_destroy(plan);
        return NULL;
    }
    return plan;
}

int cvf_lt_plan_algo_count(const cvf_lt_plan *plan)
{
    return plan->algo_count;
}

void cvf_lt_plan_use(cvf_lt_plan *plan, int algo)
{
    if (algo >= 0 && algo < plan->algo_count)
        plan->algo = algo;
}

bool cvf_lt_plan_adds_bias(const cvf_lt_plan *plan)
{
    return plan->with_bias;
}

void cvf_lt_plan_destroy(cvf_lt_plan *plan)
{
    if (!plan)
        return;
    if (plan->x)
        cublasLtMatrixLayoutDestroy(plan->x);
    if (plan->y)
        cublasLtMatrixLayoutDestroy(plan->y);
    if (plan->d)
        cublasLtMatrixLayoutDestroy(plan->d);
    if (plan->op)
        cublasLtMatmulDescDestroy(plan->op);
    free(plan);
}

cvf_status cvf_lt_run(cvf_context *ctx, cvf_cuda_launch launch, const cvf_lt_plan *plan, const cvf_matrix *a,
                      const cvf_matrix *b, const cvf_matrix *c, const cvf_epilogue *ep, void *workspace)
{
    if (plan->with_bias) {
        const void *bias = ep->bias->data;
        if (!set_attr(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias))
            return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "cuBLASLt: setting the bias pointer failed");
    }
    if (plan->with_gelu && ep->aux_out) {
        const void *aux = ep->aux_out->data;
        if (!set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux))
            return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "cuBLASLt: setting the aux pointer failed");
    }
    const float alpha = 1.0f, beta = 0.0f;
    const void *x = plan->c_row_major ? b->data : a->data, *y = plan->c_row_major ? a->data : b->data;
    cublasStatus_t s = cublasLtMatmul((cublasLtHandle_t)cvf_cuda_state_of(ctx)->lt, plan->op, &alpha, x, plan->x, y,
                                      plan->y, &beta, c->data, plan->d, c->data, plan->d, &plan->algos[plan->algo], workspace,
                                      CVF_LT_WORKSPACE, (cudaStream_t)launch.stream);
    if (s != CUBLAS_STATUS_SUCCESS)
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "cuBLASLt matmul failed (status %d)", (int)s);
    return CVF_STATUS_SUCCESS;
}

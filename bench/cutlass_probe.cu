/*
 * cutlass_probe: issue 12's question "would CUTLASS 4.x's sm90 kernels serve as our Hopper engine?"
 * answered by measurement. Each case runs a CUTLASS kernel and cuBLASLt side by side in one
 * process on the same inputs, checks CUTLASS's output against cuBLASLt's (and K1 against a
 * float32 evaluation of its epilogue), and prints medians. Not part of the build and not linked
 * into the library: a probe, like bench/sm90_probe.sh.
 *
 * The kernels (CUTLASS's collective builders, TMA + wgmma, warp-specialised, persistent; all
 * computed transposed, D^T = B^T A^T, so that our row-major C is CUTLASS's column-major D and a
 * bias along our N is CUTLASS's per-row bias). Cooperative 128 x 256 x 64 tiles unless named:
 *   gemm-mk     plain bf16 GEMM, A and B row-major (MatMul, K1's GEMM, K2-3 of the backward)
 *   gemm-mk-pp  the same, pingpong 128 x 128 x 64 (two consumer warpgroups on different tiles,
 *               one's epilogue under the other's MMA)
 *   gemm-mk-c2  the same, 2-CTA clusters along CUTLASS's M (the B' = A^T tile multicast)
 *   gemm-tn     plain bf16 GEMM, A transposed (stored k x m, read in place), B row-major (K2-1, K2-2)
 *   gemm-sk     gemm-tn with CUTLASS's stream-K scheduler (the long-K weight gradients)
 *   gemm-bt     plain bf16 GEMM, B transposed (a PyTorch (out, in) weight read in place: fc1's GEMM)
 *   relu        f16 MatMul + ReLU; relu-pp the same, pingpong 128 x 128 x 64
 *   k1          the backward's K1: D = (g @ fc2_weight) * gelu_tanh'(fc1_output) in bf16 and
 *               grad_fc1_bias = column sums of D in fp32 (LinCombDeEltActDePerRowBias with our
 *               GELU' as the activation); k1-pp the same, pingpong 128 x 128 x 64; k1-fast the
 *               same with GELU' from __expf and __fdividef; k1-nodb that without the bias gradient
 *               (LinCombDeEltAct): where K1's epilogue time goes
 *   fc1         the forward's fc1: aux = x @ fc1_weight^T + fc1_bias (fc1_output) and D =
 *               gelu_tanh(aux) (gelu_output), bf16 (LinCombPerRowBiasEltActAux, our GELU)
 * cuBLASLt gets the same product (plain, or its RELU epilogue), the fastest of its first 8
 * heuristics.
 *
 * Written on 2026-12-04 on a machine without a GPU (compiled there, run on none): the first run
 * on an H200 is its test. Build (the headers come from the PyPI wheel `nvidia-cutlass`, 4.2.0.0,
 * unpacked; nothing of it is committed):
 *
 *   pip download --no-deps nvidia-cutlass==4.2.0.0 -d build-cutlass && \
 *     python3 -m zipfile -e build-cutlass/nvidia_cutlass-4.2.0.0-py3-none-any.whl build-cutlass/x
 *   CUT=build-cutlass/x/cutlass_library/source
 *   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I$CUT/include \
 *     -I$CUT/tools/util/include bench/cutlass_probe.cu -lcublasLt -o build/cutlass_probe
 *
 * (-DNDEBUG matters: a device-side assert is a function call, and ptxas then serialises the
 * wgmma pipeline, warning C7510.) The eleven kernels compile in ~4 min of one core; no spills.
 * On the device, bench/cutlass_device.sh builds and runs it beside our kernel.
 *
 * usage: cutlass_probe [--repeat N] [--warmup N] [CASE ...]
 *   CASE is kind,m,n,k (the gemm, relu kinds) or kind,S,H,I (k1, k1-pp, k1-fast, k1-nodb, fc1); without cases, the
 *   issue's target shapes (8192^3, 4096^3, the K2 shapes, K1 and fc1 of the three ViT sizes,
 *   MatMul + ReLU at its four bench shapes). K1 and fc1 are checked against an fp32 evaluation of
 *   their epilogue on cuBLASLt's fp32 product, and timed against cuBLASLt's plain GEMM of the
 *   same layout (the issue's target: <= 1.10x the plain GEMM).
 */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/version.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/util/packed_stride.hpp>

using namespace cute;

#define CUDA_OK(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

#define LT_OK(call)                                                                                                    \
    do {                                                                                                               \
        cublasStatus_t st_ = (call);                                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                            \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #call, (int)st_);                     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* ---- the kernels ------------------------------------------------------------------------------ */

/* gelu_tanh'(z) dy, the library's formula (include/cvfuse.h): s + 2 z s (1 - s) k (1 + 3 c z^2) with
 * s = sigmoid(2u), u = k (z + c z^3), from e = exp(-|2u|) (no cancellation in either tail). */
template <typename T> struct GeluTanhGrad {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE T operator()(T const &dy, T const &z) const
    {
        const float k = 0.7978845608028654f, c = 0.044715f;
        float x = fminf(fmaxf(float(z), -1e10f), 1e10f);
        float e = expf(-fabsf(2.0f * k * (x + c * x * x * x))), r = 1.0f / (1.0f + e);
        float s = x >= 0.0f ? r : e * r;
        return T(float(dy) * (s + 2.0f * x * e * r * r * k * (1.0f + 3.0f * c * x * x)));
    }
};

template <typename T, int N> struct GeluTanhGrad<cutlass::Array<T, N>> {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const &dy,
                                                        cutlass::Array<T, N> const &z) const
    {
        cutlass::Array<T, N> y;
        GeluTanhGrad<T> op;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; ++i)
            y[i] = op(dy[i], z[i]);
        return y;
    }
};

/* GeluTanhGrad with the fast intrinsics (__expf: ex2.approx; __fdividef: rcp.approx), to tell
 * how much of K1's epilogue time is the accurate expf and division (the k1-fast kinds). */
template <typename T> struct GeluTanhGradFast {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE T operator()(T const &dy, T const &z) const
    {
#if defined(__CUDA_ARCH__)
        const float k = 0.7978845608028654f, c = 0.044715f;
        float x = fminf(fmaxf(float(z), -1e10f), 1e10f);
        float e = __expf(-fabsf(2.0f * k * (x + c * x * x * x))), r = __fdividef(1.0f, 1.0f + e);
        float s = x >= 0.0f ? r : e * r;
        return T(float(dy) * (s + 2.0f * x * e * r * r * k * (1.0f + 3.0f * c * x * x)));
#else
        return GeluTanhGrad<T>()(dy, z);
#endif
    }
};

template <typename T, int N> struct GeluTanhGradFast<cutlass::Array<T, N>> {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const &dy,
                                                        cutlass::Array<T, N> const &z) const
    {
        cutlass::Array<T, N> y;
        GeluTanhGradFast<T> op;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; ++i)
            y[i] = op(dy[i], z[i]);
        return y;
    }
};

/* gelu_tanh(x) = x sigmoid(2u) from e = exp(-|2u|): x / (1 + e) or x e / (1 + e). */
template <typename T> struct GeluTanh {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE T operator()(T const &z) const
    {
        const float k = 0.7978845608028654f, c = 0.044715f;
        float x = float(z), e = expf(-fabsf(2.0f * k * (x + c * x * x * x)));
        return T((x >= 0.0f ? x : x * e) / (1.0f + e));
    }
};

template <typename T, int N> struct GeluTanh<cutlass::Array<T, N>> {
    static const bool kIsHeavy = true;
    CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const &z) const
    {
        cutlass::Array<T, N> y;
        GeluTanh<T> op;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; ++i)
            y[i] = op(z[i]);
        return y;
    }
};

using bf16 = cutlass::bfloat16_t;
using f16 = cutlass::half_t;
using ColMajor = cutlass::layout::ColumnMajor; /* A': M-major; B': K-major */
using RowMajor = cutlass::layout::RowMajor;    /* A': K-major; B': N-major */
using Wide = Shape<_128, _256, _64>;
using Square = Shape<_128, _128, _64>;
using One = Shape<_1, _1, _1>;
using Pair = Shape<_2, _1, _1>;

/* The cooperative schedule (both consumer warpgroups on one tile) and the pingpong one. */
struct Cooperative {
    using Main = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
    using Epi = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
    using Main = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
    using Epi = cutlass::epilogue::TmaWarpSpecialized;
};

/* One CUTLASS GEMM: element type, the layouts of A' = B^T and B' = A^T, the epilogue's fusion
 * operation, tile, cluster, schedule and tile scheduler. */
template <class Elt, class LayoutA, class LayoutB, class Fusion, class TileMNK = Wide, class ClusterMNK = One,
          class Schedule = Cooperative, class Scheduler = void>
struct Kernel {
    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileMNK, ClusterMNK,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, ColMajor, 8, Elt, ColMajor, 8,
        typename Schedule::Epi, Fusion>::CollectiveOp;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Elt, LayoutA, 8, Elt, LayoutB, 8, float, TileMNK,
        ClusterMNK,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
        typename Schedule::Main>::CollectiveOp;
    using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
    using FusionOp = Fusion;
};

using Plain = cutlass::epilogue::fusion::LinearCombination<bf16, float, bf16, float>;
using ReluOp = cutlass::epilogue::fusion::LinCombEltAct<cutlass::epilogue::thread::ReLu, f16, float, f16, float>;
using K1Op = cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<ColMajor, GeluTanhGrad, bf16, float, bf16, float>;
using K1FastOp =
    cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<ColMajor, GeluTanhGradFast, bf16, float, bf16, float>;
using K1NoDbOp = cutlass::epilogue::fusion::LinCombDeEltAct<ColMajor, GeluTanhGradFast, bf16, float, bf16, float>;
using Fc1Op = cutlass::epilogue::fusion::LinCombPerRowBiasEltActAux<ColMajor, GeluTanh, bf16, float, bf16, bf16>;

using GemmMK = Kernel<bf16, ColMajor, ColMajor, Plain>;
using GemmMKPingpong = Kernel<bf16, ColMajor, ColMajor, Plain, Square, One, Pingpong>;
using GemmMKPair = Kernel<bf16, ColMajor, ColMajor, Plain, Wide, Pair>;
using GemmTN = Kernel<bf16, ColMajor, RowMajor, Plain>;
using GemmSK = Kernel<bf16, ColMajor, RowMajor, Plain, Wide, One, Cooperative, cutlass::gemm::StreamKScheduler>;
using GemmBT = Kernel<bf16, RowMajor, ColMajor, Plain>;
using Relu = Kernel<f16, ColMajor, ColMajor, ReluOp>;
using ReluPingpong = Kernel<f16, ColMajor, ColMajor, ReluOp, Square, One, Pingpong>;
using K1 = Kernel<bf16, ColMajor, ColMajor, K1Op>;
using K1Pingpong = Kernel<bf16, ColMajor, ColMajor, K1Op, Square, One, Pingpong>;
using K1Fast = Kernel<bf16, ColMajor, ColMajor, K1FastOp>;
using K1NoDb = Kernel<bf16, ColMajor, ColMajor, K1NoDbOp>;
using Fc1 = Kernel<bf16, RowMajor, ColMajor, Fc1Op>;

/* ---- cases ------------------------------------------------------------------------------------ */

enum kind { GEMM_MK, GEMM_MK_PP, GEMM_MK_C2, GEMM_TN, GEMM_SK, GEMM_BT, RELU, RELU_PP, KIND_K1, K1_PP, K1_FAST, K1_NODB, FC1,
            KINDS };
static const char *const kind_names[KINDS] = {"gemm-mk", "gemm-mk-pp", "gemm-mk-c2", "gemm-tn", "gemm-sk", "gemm-bt",
                                              "relu",    "relu-pp",    "k1",         "k1-pp",   "k1-fast",
                                              "k1-nodb", "fc1"};

/* What a kind computes, apart from its kernel. */
enum epilogue { EPI_PLAIN, EPI_RELU, EPI_K1, EPI_FC1 };
static epilogue epilogue_of(kind op)
{
    return op == RELU || op == RELU_PP    ? EPI_RELU
           : op == KIND_K1 || op == K1_PP || op == K1_FAST || op == K1_NODB ? EPI_K1
           : op == FC1                    ? EPI_FC1
                                          : EPI_PLAIN;
}
static bool a_transposed(kind op)
{
    return op == GEMM_TN || op == GEMM_SK;
}
static bool b_transposed(kind op)
{
    return op == GEMM_BT || op == FC1;
}

/* Our C (m x n, row-major) = A (m x k) @ B (k x n). A row-major, or (gemm-tn, gemm-sk) stored
 * k x m and read transposed; B row-major, or (gemm-bt, fc1) stored n x k and read transposed.
 * K1: m = S, n = I, k = H (A = grad_output, B = fc2_weight as stored, H x I). fc1: m = S, n = I,
 * k = H (A = hidden_state, B = fc1_weight^T: fc1_weight is I x H). */
struct bench_case {
    kind op;
    int m, n, k;
};

/* Device buffers of a case: A, B, C (CUTLASS's), C of cuBLASLt; K1 and fc1: aux (K1: fc1_output,
 * read; fc1: fc1_output, written), the fp32 reference, bias (fc1) or bias gradient and its
 * reference (K1). */
struct buffers {
    void *a = nullptr, *b = nullptr, *c = nullptr, *c_lt = nullptr, *aux = nullptr, *bias = nullptr;
    float *ref = nullptr, *ref_aux = nullptr, *dbias = nullptr, *dbias_ref = nullptr;
    void *workspace = nullptr;
    size_t workspace_size = 0;
};

__global__ void fill_kernel(uint16_t *p, size_t count, uint64_t seed, float scale, int is_bf16)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float v = scale * ((float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
    if (is_bf16) {
        bf16 h(v);
        p[i] = h.raw();
    } else {
        f16 h(v);
        p[i] = h.raw();
    }
}

static void fill(void *p, size_t count, uint64_t seed, float scale, bool is_bf16)
{
    fill_kernel<<<(unsigned)((count + 255) / 256), 256>>>((uint16_t *)p, count, seed, scale, is_bf16);
    CUDA_OK(cudaGetLastError());
}

/* K1's reference epilogue on the fp32 product p (S x I row-major), in place: p * gelu'(z), and the
 * column sums of the result in double (one thread a column). */
__global__ void k1_reference_kernel(float *p, const bf16 *z, int s, int i, float *dbias)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= i)
        return;
    GeluTanhGrad<float> grad;
    double sum = 0.0;
    for (int row = 0; row < s; row++) {
        size_t at = (size_t)row * i + col;
        float v = grad(p[at], float(z[at]));
        p[at] = v;
        sum += v;
    }
    dbias[col] = (float)sum;
}

/* fc1's reference epilogue on the fp32 product p (S x I row-major): aux = p + bias, p = gelu(aux). */
__global__ void fc1_reference_kernel(float *p, const bf16 *bias, size_t count, int i, float *aux)
{
    size_t at = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (at >= count)
        return;
    float v = p[at] + float(bias[at % (size_t)i]);
    aux[at] = v;
    p[at] = GeluTanh<float>()(v);
}

/* sqrt(sum (x - y)^2 / sum y^2) over count elements (x: 16-bit, y: 16-bit or fp32). */
__global__ void diff_kernel(const uint16_t *x, const void *y, int y_is_f32, int is_bf16, size_t count, double *out)
{
    double num = 0.0, den = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        float a = is_bf16 ? float(bf16::bitcast(x[i])) : float(f16::bitcast(x[i]));
        float b = y_is_f32 ? ((const float *)y)[i]
                           : (is_bf16 ? float(bf16::bitcast(((const uint16_t *)y)[i]))
                                      : float(f16::bitcast(((const uint16_t *)y)[i])));
        num += (double)(a - b) * (a - b);
        den += (double)b * b;
    }
    atomicAdd(&out[0], num);
    atomicAdd(&out[1], den);
}

/* The relative RMS difference of x from y; NaN anywhere in x (the poison left unwritten) gives NaN. */
static double relative_rms(const void *x, const void *y, bool y_is_f32, bool is_bf16, size_t count)
{
    double *acc, host[2];
    CUDA_OK(cudaMalloc(&acc, sizeof host));
    CUDA_OK(cudaMemset(acc, 0, sizeof host));
    diff_kernel<<<264, 256>>>((const uint16_t *)x, y, y_is_f32, is_bf16, count, acc);
    CUDA_OK(cudaMemcpy(host, acc, sizeof host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(acc));
    return host[1] > 0 ? std::sqrt(host[0] / host[1]) : std::sqrt(host[0]);
}

/* ---- cuBLASLt ----------------------------------------------------------------------------------- */

/* cuBLASLt's side of a case, column-major as CUTLASS's: D^T (n x m) = B^T (n x k) A^T (k x m). */
struct lt_setup {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulHeuristicResult_t results[8];
    int count = 0, best = 0;
    void *workspace = nullptr;
    size_t workspace_size = 64u << 20;
};

/* cuBLASLt for case c with D of type d_type: its RELU epilogue for the ReLU kinds, else plain (K1
 * and fc1 are timed against their plain GEMM, the issue's measure of an epilogue's cost). */
static void lt_create(lt_setup *s, cublasLtHandle_t lt, const bench_case &c, cudaDataType_t t, cudaDataType_t d_type)
{
    s->lt = lt;
    CUDA_OK(cudaMalloc(&s->workspace, s->workspace_size));
    LT_OK(cublasLtMatmulDescCreate(&s->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = epilogue_of(c.op) == EPI_RELU ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT;
    LT_OK(cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    cublasOperation_t op_t = CUBLAS_OP_T;
    /* first operand B^T (n x k): B row-major k x n is column-major n x k (ld n); B stored n x k
     * row-major (transposed) is column-major k x n (ld k), read transposed */
    if (b_transposed(c.op)) {
        LT_OK(cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
        LT_OK(cublasLtMatrixLayoutCreate(&s->la, t, (uint64_t)c.k, (uint64_t)c.n, c.k));
    } else {
        LT_OK(cublasLtMatrixLayoutCreate(&s->la, t, (uint64_t)c.n, (uint64_t)c.k, c.n));
    }
    /* second operand A^T (k x m): A row-major m x k is column-major k x m (ld k); A stored k x m
     * row-major (transposed) is column-major m x k (ld m), read transposed */
    if (a_transposed(c.op)) {
        LT_OK(cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_t, sizeof op_t));
        LT_OK(cublasLtMatrixLayoutCreate(&s->lb, t, (uint64_t)c.m, (uint64_t)c.k, c.m));
    } else {
        LT_OK(cublasLtMatrixLayoutCreate(&s->lb, t, (uint64_t)c.k, (uint64_t)c.m, c.k));
    }
    LT_OK(cublasLtMatrixLayoutCreate(&s->ld, d_type, (uint64_t)c.n, (uint64_t)c.m, c.n));
    cublasLtMatmulPreference_t pref;
    LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &s->workspace_size,
                                               sizeof s->workspace_size));
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, s->desc, s->la, s->lb, s->ld, s->ld, pref, 8, s->results, &s->count));
    cublasLtMatmulPreferenceDestroy(pref);
}

static void lt_run(const lt_setup *s, int algo, const void *a, const void *b, void *d, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    LT_OK(cublasLtMatmul(s->lt, s->desc, &one, b, s->la, a, s->lb, &zero, d, s->ld, d, s->ld, &s->results[algo].algo,
                         s->workspace, s->workspace_size, stream));
}

static void lt_destroy(lt_setup *s)
{
    cublasLtMatrixLayoutDestroy(s->la);
    cublasLtMatrixLayoutDestroy(s->lb);
    cublasLtMatrixLayoutDestroy(s->ld);
    cublasLtMatmulDescDestroy(s->desc);
    cudaFree(s->workspace);
}

/* ---- CUTLASS ------------------------------------------------------------------------------------- */

/* Arguments of kernel K for case c: problem (n, m, k); A' = B^T (B as stored: M-major, or K-major
 * when B is stored transposed), B' = A^T (K-major: A row-major; N-major: A stored k x m), D' = C^T
 * (M-major: C row-major); the epilogue's pointers for K1 and fc1. */
template <class K> static typename K::Gemm::Arguments arguments(const bench_case &c, const buffers &b)
{
    using GK = typename K::GemmKernel;
    using Elt = typename K::Gemm::ElementA;
    typename K::Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {c.n, c.m, c.k, 1},
        {(const Elt *)b.b, cutlass::make_cute_packed_stride(typename GK::StrideA{}, {c.n, c.k, 1}), (const Elt *)b.a,
         cutlass::make_cute_packed_stride(typename GK::StrideB{}, {c.m, c.k, 1})},
        {{}, nullptr, {}, (Elt *)b.c, cutlass::make_cute_packed_stride(typename GK::StrideD{}, {c.n, c.m, 1})}};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    if constexpr (std::is_same_v<typename K::FusionOp, K1Op> || std::is_same_v<typename K::FusionOp, K1FastOp> ||
                  std::is_same_v<typename K::FusionOp, K1NoDbOp>) {
        args.epilogue.thread.aux_ptr = (const bf16 *)b.aux;
        args.epilogue.thread.dAux = cutlass::make_cute_packed_stride(typename GK::StrideD{}, {c.n, c.m, 1});
    }
    if constexpr (std::is_same_v<typename K::FusionOp, K1Op> || std::is_same_v<typename K::FusionOp, K1FastOp>)
        args.epilogue.thread.dbias_ptr = b.dbias;
    if constexpr (std::is_same_v<typename K::FusionOp, Fc1Op>) {
        args.epilogue.thread.aux_ptr = (bf16 *)b.aux;
        args.epilogue.thread.dAux = cutlass::make_cute_packed_stride(typename GK::StrideD{}, {c.n, c.m, 1});
        args.epilogue.thread.bias_ptr = (const bf16 *)b.bias;
    }
    return args;
}

/* A ready CUTLASS kernel of type K for case c (initialised once, run many times). Every run clears
 * the workspace's counters first (K1's bias-gradient reduction and stream-K's tile locks count
 * arrivals there, and only initialize_workspace resets them), so the times include that memset,
 * as an engine's launches would. */
template <class K> struct cutlass_run {
    typename K::Gemm gemm;
    typename K::Gemm::Arguments args;
    void *workspace = nullptr;
    size_t workspace_size = 0;
    bool ok = false;

    void setup(const bench_case &c, buffers &b)
    {
        args = arguments<K>(c, b);
        if (K::Gemm::can_implement(args) != cutlass::Status::kSuccess) {
            fprintf(stderr, "%s %d x %d x %d: CUTLASS cannot implement it\n", kind_names[c.op], c.m, c.n, c.k);
            return;
        }
        b.workspace_size = workspace_size = K::Gemm::get_workspace_size(args);
        if (b.workspace_size)
            CUDA_OK(cudaMalloc(&b.workspace, b.workspace_size));
        workspace = b.workspace;
        ok = gemm.initialize(args, b.workspace) == cutlass::Status::kSuccess;
        if (!ok)
            fprintf(stderr, "%s: CUTLASS initialize failed\n", kind_names[c.op]);
    }

    void run(cudaStream_t stream)
    {
        if (workspace_size &&
            K::GemmKernel::initialize_workspace(args, workspace, stream) != cutlass::Status::kSuccess) {
            fprintf(stderr, "CUTLASS initialize_workspace failed\n");
            exit(1);
        }
        if (gemm.run(stream) != cutlass::Status::kSuccess) {
            fprintf(stderr, "CUTLASS run failed\n");
            exit(1);
        }
    }
};

/* ---- timing ------------------------------------------------------------------------------------ */

template <class F> static float median_ms(F &&call, int warmup, int repeat, cudaStream_t stream)
{
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    for (int i = 0; i < warmup; i++)
        call();
    std::vector<float> times((size_t)repeat);
    for (int i = 0; i < repeat; i++) {
        CUDA_OK(cudaEventRecord(start, stream));
        call();
        CUDA_OK(cudaEventRecord(stop, stream));
        CUDA_OK(cudaEventSynchronize(stop));
        CUDA_OK(cudaEventElapsedTime(&times[(size_t)i], start, stop));
    }
    std::sort(times.begin(), times.end());
    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(stop));
    return times[(size_t)repeat / 2];
}

/* The relative RMS difference of two fp32 vectors on the host. */
static double vector_diff(const float *got_dev, const float *want_dev, int n)
{
    std::vector<float> got((size_t)n), want((size_t)n);
    CUDA_OK(cudaMemcpy(got.data(), got_dev, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(want.data(), want_dev, 4 * (size_t)n, cudaMemcpyDeviceToHost));
    double num = 0.0, den = 0.0;
    for (int j = 0; j < n; j++)
        num += (double)(got[(size_t)j] - want[(size_t)j]) * (got[(size_t)j] - want[(size_t)j]),
            den += (double)want[(size_t)j] * want[(size_t)j];
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/* Checks CUTLASS's outputs of case c (already run) against cuBLASLt: plain and ReLU against its
 * output of the same product; K1 and fc1 against their epilogue in fp32 on its fp32 product.
 * Prints the differences. */
static void check_outputs(const bench_case &c, buffers &b, lt_setup *s, cublasLtHandle_t lt, cudaDataType_t t,
                          cudaStream_t stream)
{
    size_t mn = (size_t)c.m * c.n;
    bool is_bf16 = t == CUDA_R_16BF;
    epilogue e = epilogue_of(c.op);
    if (e == EPI_PLAIN || e == EPI_RELU) {
        lt_run(s, s->best, b.a, b.b, b.c_lt, stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        printf("  rel_diff %.2e", relative_rms(b.c, b.c_lt, false, is_bf16, mn));
        return;
    }
    lt_setup s32;
    lt_create(&s32, lt, c, t, CUDA_R_32F);
    if (s32.count == 0) {
        printf("  (no cuBLASLt heuristic for the fp32 reference product)");
        lt_destroy(&s32);
        return;
    }
    lt_run(&s32, 0, b.a, b.b, b.ref, stream);
    if (e == EPI_K1) {
        k1_reference_kernel<<<(c.n + 127) / 128, 128, 0, stream>>>(b.ref, (const bf16 *)b.aux, c.m, c.n, b.dbias_ref);
        CUDA_OK(cudaStreamSynchronize(stream));
        printf("  rel_diff %.2e", relative_rms(b.c, b.ref, true, true, mn));
        if (c.op != K1_NODB) /* that kind computes no bias gradient */
            printf("  bias_grad rel_diff %.2e", vector_diff(b.dbias, b.dbias_ref, c.n));
    } else {
        fc1_reference_kernel<<<(unsigned)((mn + 255) / 256), 256, 0, stream>>>(b.ref, (const bf16 *)b.bias, mn, c.n,
                                                                               b.ref_aux);
        CUDA_OK(cudaStreamSynchronize(stream));
        printf("  rel_diff %.2e  aux rel_diff %.2e", relative_rms(b.c, b.ref, true, true, mn),
               relative_rms(b.aux, b.ref_aux, true, true, mn));
    }
    lt_destroy(&s32);
}

/* Runs one case: CUTLASS's kernel K and cuBLASLt (its fastest heuristic), checked, timed. */
template <class K> static void run_case(const bench_case &c, cublasLtHandle_t lt, int warmup, int repeat)
{
    epilogue e = epilogue_of(c.op);
    bool is_bf16 = e != EPI_RELU;
    cudaDataType_t t = is_bf16 ? CUDA_R_16BF : CUDA_R_16F;
    size_t mk = (size_t)c.m * c.k, kn = (size_t)c.k * c.n, mn = (size_t)c.m * c.n;
    buffers b;
    CUDA_OK(cudaMalloc(&b.a, 2 * mk));
    CUDA_OK(cudaMalloc(&b.b, 2 * kn));
    CUDA_OK(cudaMalloc(&b.c, 2 * mn));
    CUDA_OK(cudaMalloc(&b.c_lt, 2 * mn));
    fill(b.a, mk, 1, 1.0f, is_bf16);
    fill(b.b, kn, 2, 1.0f / std::sqrt((float)c.k), is_bf16);
    if (e == EPI_K1 || e == EPI_FC1) {
        CUDA_OK(cudaMalloc(&b.aux, 2 * mn));
        CUDA_OK(cudaMalloc(&b.ref, 4 * mn));
        if (e == EPI_K1) {
            fill(b.aux, mn, 3, 4.0f, true);
            CUDA_OK(cudaMalloc(&b.dbias, 4 * (size_t)c.n));
            CUDA_OK(cudaMalloc(&b.dbias_ref, 4 * (size_t)c.n));
        } else {
            CUDA_OK(cudaMalloc(&b.ref_aux, 4 * mn));
            CUDA_OK(cudaMalloc(&b.bias, 2 * (size_t)c.n));
            fill(b.bias, (size_t)c.n, 4, 1.0f, true);
            CUDA_OK(cudaMemset(b.aux, 0xFF, 2 * mn)); /* poison: NaN */
        }
    }
    cudaStream_t stream = 0;

    lt_setup s;
    lt_create(&s, lt, c, t, t);
    float lt_ms = 1e30f;
    for (int h = 0; h < s.count; h++) {
        float ms = median_ms([&] { lt_run(&s, h, b.a, b.b, b.c_lt, stream); }, 2, 5, stream);
        if (ms < lt_ms)
            lt_ms = ms, s.best = h;
    }
    cutlass_run<K> ours;
    ours.setup(c, b);
    if (!ours.ok || s.count == 0) {
        printf("%-10s %6d %6d %6d  not run (%s)\n", kind_names[c.op], c.m, c.n, c.k,
               s.count == 0 ? "no cuBLASLt heuristic" : "CUTLASS setup failed");
    } else {
        lt_ms = median_ms([&] { lt_run(&s, s.best, b.a, b.b, b.c_lt, stream); }, warmup, repeat, stream);
        float ours_ms = median_ms([&] { ours.run(stream); }, warmup, repeat, stream);
        /* the check: one more launch (so a launch after many) into poisoned outputs (NaN) */
        CUDA_OK(cudaMemset(b.c, 0xFF, 2 * mn));
        if (b.dbias)
            CUDA_OK(cudaMemset(b.dbias, 0xFF, 4 * (size_t)c.n));
        if (e == EPI_FC1)
            CUDA_OK(cudaMemset(b.aux, 0xFF, 2 * mn));
        ours.run(stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        double tflops = 2.0 * c.m * c.n * c.k / (ours_ms * 1e-3) / 1e12;
        printf("%-10s %6d %6d %6d  cutlass %8.4f ms %6.1f TFLOP/s  cublaslt%s %8.4f ms  ratio %.3f", kind_names[c.op],
               c.m, c.n, c.k, ours_ms, tflops, e == EPI_K1 || e == EPI_FC1 ? " plain" : "", lt_ms, ours_ms / lt_ms);
        check_outputs(c, b, &s, lt, t, stream);
        printf("\n");
    }
    fflush(stdout);
    lt_destroy(&s);
    cudaFree(b.a), cudaFree(b.b), cudaFree(b.c), cudaFree(b.c_lt), cudaFree(b.aux), cudaFree(b.bias);
    cudaFree(b.ref), cudaFree(b.ref_aux), cudaFree(b.dbias), cudaFree(b.dbias_ref), cudaFree(b.workspace);
}

static void run_any(const bench_case &c, cublasLtHandle_t lt, int warmup, int repeat)
{
    switch (c.op) {
    case GEMM_MK: run_case<GemmMK>(c, lt, warmup, repeat); break;
    case GEMM_MK_PP: run_case<GemmMKPingpong>(c, lt, warmup, repeat); break;
    case GEMM_MK_C2: run_case<GemmMKPair>(c, lt, warmup, repeat); break;
    case GEMM_TN: run_case<GemmTN>(c, lt, warmup, repeat); break;
    case GEMM_SK: run_case<GemmSK>(c, lt, warmup, repeat); break;
    case GEMM_BT: run_case<GemmBT>(c, lt, warmup, repeat); break;
    case RELU: run_case<Relu>(c, lt, warmup, repeat); break;
    case RELU_PP: run_case<ReluPingpong>(c, lt, warmup, repeat); break;
    case KIND_K1: run_case<K1>(c, lt, warmup, repeat); break;
    case K1_PP: run_case<K1Pingpong>(c, lt, warmup, repeat); break;
    case K1_FAST: run_case<K1Fast>(c, lt, warmup, repeat); break;
    case K1_NODB: run_case<K1NoDb>(c, lt, warmup, repeat); break;
    case FC1: run_case<Fc1>(c, lt, warmup, repeat); break;
    case KINDS: break;
    }
}

/* The issue's targets: plain GEMMs at 8192^3, 4096^3 and the K2 shapes of the three ViT sizes
 * (K2-1 = H x I x S, K2-2 = I x H x S with A transposed, K2-3 = S x H x I), K1 (S x I x H) and fc1
 * (S x I x H, the weight read transposed) beside their plain GEMMs, and MatMul + ReLU f16 at its
 * four bench shapes; each in the cooperative kernel and, where one exists, its variants. */
static std::vector<bench_case> default_cases()
{
    std::vector<bench_case> cases;
    for (int size : {8192, 4096})
        for (kind op : {GEMM_MK, GEMM_MK_PP, GEMM_MK_C2})
            cases.push_back({op, size, size, size});
    const int vit[3][3] = {{12608, 768, 3072}, {16448, 1024, 4096}, {16448, 1280, 5120}};
    for (auto &v : vit) {
        int S = v[0], H = v[1], I = v[2];
        for (kind op : {KIND_K1, K1_PP, K1_FAST, K1_NODB, GEMM_MK, GEMM_MK_PP})
            cases.push_back({op, S, I, H}); /* K1 and its GEMM alone */
        for (kind op : {FC1, GEMM_BT})
            cases.push_back({op, S, I, H}); /* fc1 and its GEMM alone */
        for (kind op : {GEMM_TN, GEMM_SK}) {
            cases.push_back({op, H, I, S}); /* K2-1 */
            cases.push_back({op, I, H, S}); /* K2-2 */
        }
        for (kind op : {GEMM_MK, GEMM_MK_PP, GEMM_MK_C2})
            cases.push_back({op, S, H, I}); /* K2-3 */
    }
    const int relu[4][3] = {{4096, 4096, 4096}, {8192, 8192, 256}, {16384, 8192, 64}, {8192, 8192, 512}};
    for (auto &r : relu)
        for (kind op : {RELU, RELU_PP})
            cases.push_back({op, r[0], r[1], r[2]});
    return cases;
}

static bool parse_case(const char *text, bench_case *c)
{
    char name[16];
    if (sscanf(text, "%15[^,],%d,%d,%d", name, &c->m, &c->n, &c->k) != 4)
        return false;
    for (int i = 0; i < KINDS; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            c->op = (kind)i;
            if (epilogue_of(c->op) == EPI_K1 || epilogue_of(c->op) == EPI_FC1) /* S,H,I -> m = S, n = I, k = H */
                std::swap(c->n, c->k);
            return c->m > 0 && c->n > 0 && c->k > 0;
        }
    return false;
}

int main(int argc, char **argv)
{
    int warmup = 10, repeat = 50;
    std::vector<bench_case> cases;
    for (int i = 1; i < argc; i++) {
        bench_case c;
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (parse_case(argv[i], &c))
            cases.push_back(c);
        else {
            fprintf(stderr, "usage: %s [--repeat N] [--warmup N] [kind,m,n,k | k1|k1-pp|fc1,S,H,I ...]\n", argv[0]);
            return 2;
        }
    }
    if (cases.empty())
        cases = default_cases();
    if (repeat < 1)
        repeat = 1;
    cublasLtHandle_t lt;
    LT_OK(cublasLtCreate(&lt));
    printf("cutlass_probe: CUTLASS %d.%d.%d sm90 kernels against cuBLASLt (the fastest of its first 8 heuristics); "
           "medians of %d after %d; K1 and fc1 against cuBLASLt's plain GEMM of the same product\n",
           CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, repeat, warmup);
    for (const bench_case &c : cases)
        run_any(c, lt, warmup, repeat);
    cublasLtDestroy(lt);
    return 0;
}

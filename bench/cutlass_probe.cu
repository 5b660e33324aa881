/*
 * cutlass_probe: issue 12's question "would CUTLASS 4.x's sm90 kernels serve as our Hopper engine?"
 * answered by measurement. Each case runs a CUTLASS kernel and cuBLASLt side by side in one
 * process on the same inputs, checks CUTLASS's output against cuBLASLt's (and K1 against a
 * float32 evaluation of its epilogue), and prints medians. Not part of the build and not linked
 * into the library: a probe, like bench/sm90_probe.sh.
 *
 * The kernels (CUTLASS's collective builders, TMA + wgmma, warp-specialised, 128 x 256 x 64 tiles,
 * persistent; all computed transposed, D^T = B^T A^T, so that our row-major C is CUTLASS's
 * column-major D and a bias along our N is CUTLASS's per-row bias):
 *   gemm-mk  plain bf16 GEMM, A row-major, B row-major (MatMul, K1's GEMM, K2-3 of the backward)
 *   gemm-tn  plain bf16 GEMM, A transposed (read in place), B row-major (K2-1, K2-2)
 *   gemm-sk  gemm-tn with CUTLASS's stream-K scheduler (the long-K weight gradients)
 *   relu     f16 MatMul + ReLU
 *   k1       the backward's K1: D = (g @ fc2_weight) * gelu_tanh'(fc1_output) in bf16 and
 *            grad_fc1_bias = column sums of D in fp32 (LinCombDeEltActDePerRowBias with our
 *            GELU' as the activation)
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
 * wgmma pipeline, warning C7510.) Each kernel costs ~2.4 min of one core to compile.
 *
 * usage: cutlass_probe [--repeat N] [--warmup N] [CASE ...]
 *   CASE is kind,m,n,k (kind gemm-mk, gemm-tn, gemm-sk, relu) or k1,S,H,I; without cases, the
 *   issue's target shapes (8192^3, 4096^3, the K2 shapes and K1 of the three ViT sizes, MatMul +
 *   ReLU at its four bench shapes).
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

using bf16 = cutlass::bfloat16_t;
using f16 = cutlass::half_t;
using ColMajor = cutlass::layout::ColumnMajor; /* D^T's A: M-major; B: K-major */
using RowMajor = cutlass::layout::RowMajor;    /* B: N-major */
using TileMNK = Shape<_128, _256, _64>;
using Cluster = Shape<_1, _1, _1>;

/* One CUTLASS GEMM: element type, the layouts of A' = B^T and B' = A^T, the epilogue's fusion
 * operation and the tile scheduler. */
template <class Elt, class LayoutB, class Fusion, class Scheduler = void> struct Kernel {
    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileMNK, Cluster,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, ColMajor, 8, Elt, ColMajor, 8,
        cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Elt, ColMajor, 8, Elt, LayoutB, 8, float, TileMNK, Cluster,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
        cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
    using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

using Plain = cutlass::epilogue::fusion::LinearCombination<bf16, float, bf16, float>;
using GemmMK = Kernel<bf16, ColMajor, Plain>;
using GemmTN = Kernel<bf16, RowMajor, Plain>;
using GemmSK = Kernel<bf16, RowMajor, Plain, cutlass::gemm::StreamKScheduler>;
using Relu = Kernel<f16, ColMajor,
                    cutlass::epilogue::fusion::LinCombEltAct<cutlass::epilogue::thread::ReLu, f16, float, f16, float>>;
using K1 = Kernel<bf16, ColMajor,
                  cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<ColMajor, GeluTanhGrad, bf16, float, bf16,
                                                                         float>>;

/* ---- cases ------------------------------------------------------------------------------------ */

enum kind { GEMM_MK, GEMM_TN, GEMM_SK, RELU, KIND_K1 };
static const char *const kind_names[] = {"gemm-mk", "gemm-tn", "gemm-sk", "relu", "k1"};

/* Our C (m x n, row-major) = A (m x k) @ B (k x n); A row-major, or (gemm-tn, gemm-sk) stored k x m
 * and read transposed; B row-major. K1: m = S, n = I, k = H (A = grad_output, B = fc2_weight^T as
 * stored: fc2_weight is H x I, row-major, which is B itself). */
struct bench_case {
    kind op;
    int m, n, k;
};

/* Device buffers of a case: A, B, C (ours = CUTLASS's), C of cuBLASLt, and for K1 fc1_output,
 * the fp32 product (cuBLASLt), the bias gradient and its reference. */
struct buffers {
    void *a = nullptr, *b = nullptr, *c = nullptr, *c_lt = nullptr, *aux = nullptr;
    float *c32 = nullptr, *dbias = nullptr, *dbias_ref = nullptr;
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

/* K1's reference epilogue on cuBLASLt's fp32 product p (S x I row-major): d = p * gelu'(z), and the
 * column sums of d (one thread a column, in order). */
__global__ void k1_reference_kernel(const float *p, const bf16 *z, int s, int i, float *dbias, float *d)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= i)
        return;
    GeluTanhGrad<float> grad;
    double sum = 0.0;
    for (int row = 0; row < s; row++) {
        size_t at = (size_t)row * i + col;
        float v = grad(p[at], float(z[at]));
        d[at] = v;
        sum += v;
    }
    dbias[col] = (float)sum;
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
    void *workspace;
    size_t workspace_size = 64u << 20;
};

static void lt_create(lt_setup *s, cublasLtHandle_t lt, const bench_case &c, cudaDataType_t t, cudaDataType_t d_type)
{
    s->lt = lt;
    CUDA_OK(cudaMalloc(&s->workspace, s->workspace_size));
    LT_OK(cublasLtMatmulDescCreate(&s->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = c.op == RELU ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT;
    LT_OK(cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    bool a_transposed = c.op == GEMM_TN || c.op == GEMM_SK;
    /* first operand B^T: B is row-major k x n, so column-major n x k with ld n, no transpose */
    LT_OK(cublasLtMatrixLayoutCreate(&s->la, t, (uint64_t)c.n, (uint64_t)c.k, c.n));
    /* second operand A^T: A row-major m x k is column-major k x m (ld k); stored k x m row-major
     * (transposed A) it is column-major m x k (ld m), read transposed */
    if (a_transposed) {
        cublasOperation_t op_t = CUBLAS_OP_T;
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
    LT_OK(cublasLtMatmul(s->lt, s->desc, &one, b, s->la, a, s->lb, &zero, d, s->ld, d, s->ld,
                         &s->results[algo].algo, s->workspace, s->workspace_size, stream));
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

/* Arguments of one of the kernels for case c: problem (n, m, k), A' = B^T (M-major, B as stored),
 * B' = A^T (K-major: A row-major; N-major: A stored k x m), D' = C^T (M-major: C row-major). */
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
    return args;
}

template <class K> static void set_k1_epilogue(typename K::Gemm::Arguments &args, const bench_case &c, const buffers &b)
{
    using GK = typename K::GemmKernel;
    args.epilogue.thread.aux_ptr = (const bf16 *)b.aux;
    args.epilogue.thread.dAux = cutlass::make_cute_packed_stride(typename GK::StrideD{}, {c.n, c.m, 1});
    args.epilogue.thread.dbias_ptr = b.dbias;
}

/* A ready CUTLASS kernel of type K for case c (initialised once, run many times). */
template <class K> struct cutlass_run {
    typename K::Gemm gemm;
    bool ok = false;

    void setup(const bench_case &c, buffers &b)
    {
        auto args = arguments<K>(c, b);
        if constexpr (std::is_same_v<K, ::K1>)
            set_k1_epilogue<K>(args, c, b);
        if (K::Gemm::can_implement(args) != cutlass::Status::kSuccess) {
            fprintf(stderr, "%s %d x %d x %d: CUTLASS cannot implement it\n", kind_names[c.op], c.m, c.n, c.k);
            return;
        }
        b.workspace_size = K::Gemm::get_workspace_size(args);
        if (b.workspace_size)
            CUDA_OK(cudaMalloc(&b.workspace, b.workspace_size));
        ok = gemm.initialize(args, b.workspace) == cutlass::Status::kSuccess;
        if (!ok)
            fprintf(stderr, "%s: CUTLASS initialize failed\n", kind_names[c.op]);
    }

    void run(cudaStream_t stream)
    {
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

/* Runs one case: CUTLASS's kernel K and cuBLASLt (its fastest heuristic), checked, timed. */
template <class K> static void run_case(const bench_case &c, cublasLtHandle_t lt, int warmup, int repeat)
{
    bool is_bf16 = c.op != RELU, k1 = c.op == KIND_K1;
    cudaDataType_t t = is_bf16 ? CUDA_R_16BF : CUDA_R_16F;
    size_t mk = (size_t)c.m * c.k, kn = (size_t)c.k * c.n, mn = (size_t)c.m * c.n;
    buffers b;
    CUDA_OK(cudaMalloc(&b.a, 2 * mk));
    CUDA_OK(cudaMalloc(&b.b, 2 * kn));
    CUDA_OK(cudaMalloc(&b.c, 2 * mn));
    CUDA_OK(cudaMalloc(&b.c_lt, 2 * mn));
    fill(b.a, mk, 1, 1.0f, is_bf16);
    fill(b.b, kn, 2, 1.0f / std::sqrt((float)c.k), is_bf16);
    if (k1) {
        CUDA_OK(cudaMalloc(&b.aux, 2 * mn));
        CUDA_OK(cudaMalloc(&b.c32, 4 * mn));
        CUDA_OK(cudaMalloc(&b.dbias, 4 * (size_t)c.n));
        CUDA_OK(cudaMalloc(&b.dbias_ref, 4 * (size_t)c.n));
        fill(b.aux, mn, 3, 4.0f, true);
    }
    cudaStream_t stream = 0;

    /* cuBLASLt: the fastest of its heuristics; for K1 its plain GEMM (K1's target is against it) */
    bench_case plain = c;
    if (k1)
        plain.op = GEMM_MK;
    lt_setup s;
    lt_create(&s, lt, plain, t, t);
    float lt_ms = 1e30f;
    for (int h = 0; h < s.count; h++) {
        float ms = median_ms([&] { lt_run(&s, h, b.a, b.b, b.c_lt, stream); }, 2, 5, stream);
        if (ms < lt_ms)
            lt_ms = ms, s.best = h;
    }
    lt_ms = median_ms([&] { lt_run(&s, s.best, b.a, b.b, b.c_lt, stream); }, warmup, repeat, stream);

    cutlass_run<K> ours;
    ours.setup(c, b);
    if (!ours.ok || s.count == 0) {
        printf("%-8s %6d %6d %6d  not run (%s)\n", kind_names[c.op], c.m, c.n, c.k,
               s.count == 0 ? "no cuBLASLt heuristic" : "CUTLASS setup failed");
        return;
    }
    CUDA_OK(cudaMemset(b.c, 0xFF, 2 * mn)); /* poison: NaN */
    ours.run(stream);
    CUDA_OK(cudaStreamSynchronize(stream));
    double diff, bias_diff = 0.0;
    if (k1) {
        lt_setup s32;
        lt_create(&s32, lt, plain, t, CUDA_R_32F);
        if (s32.count == 0) {
            printf("k1: no cuBLASLt heuristic for the fp32 reference product\n");
            return;
        }
        lt_run(&s32, 0, b.a, b.b, b.c32, stream);
        k1_reference_kernel<<<(c.n + 127) / 128, 128, 0, stream>>>(b.c32, (const bf16 *)b.aux, c.m, c.n, b.dbias_ref,
                                                                    b.c32);
        CUDA_OK(cudaStreamSynchronize(stream));
        diff = relative_rms(b.c, b.c32, true, true, mn);
        std::vector<float> got((size_t)c.n), want((size_t)c.n);
        CUDA_OK(cudaMemcpy(got.data(), b.dbias, 4 * (size_t)c.n, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(want.data(), b.dbias_ref, 4 * (size_t)c.n, cudaMemcpyDeviceToHost));
        double num = 0.0, den = 0.0;
        for (int j = 0; j < c.n; j++)
            num += (double)(got[j] - want[j]) * (got[j] - want[j]), den += (double)want[j] * want[j];
        bias_diff = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
        lt_destroy(&s32);
    } else {
        lt_run(&s, s.best, b.a, b.b, b.c_lt, stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        diff = relative_rms(b.c, b.c_lt, false, is_bf16, mn);
    }
    float ours_ms = median_ms([&] { ours.run(stream); }, warmup, repeat, stream);
    double tflops = 2.0 * c.m * c.n * c.k / (ours_ms * 1e-3) / 1e12;
    printf("%-8s %6d %6d %6d  cutlass %8.4f ms %6.1f TFLOP/s  cublaslt %8.4f ms  ratio %.3f  rel_diff %.2e", kind_names[c.op],
           c.m, c.n, c.k, ours_ms, tflops, lt_ms, ours_ms / lt_ms, diff);
    if (k1)
        printf("  bias_grad rel_diff %.2e (against cuBLASLt's plain GEMM)", bias_diff);
    printf("\n");
    fflush(stdout);
    lt_destroy(&s);
    cudaFree(b.a), cudaFree(b.b), cudaFree(b.c), cudaFree(b.c_lt), cudaFree(b.aux), cudaFree(b.c32);
    cudaFree(b.dbias), cudaFree(b.dbias_ref), cudaFree(b.workspace);
}

static void run_any(const bench_case &c, cublasLtHandle_t lt, int warmup, int repeat)
{
    switch (c.op) {
    case GEMM_MK: run_case<GemmMK>(c, lt, warmup, repeat); break;
    case GEMM_TN: run_case<GemmTN>(c, lt, warmup, repeat); break;
    case GEMM_SK: run_case<GemmSK>(c, lt, warmup, repeat); break;
    case RELU: run_case<Relu>(c, lt, warmup, repeat); break;
    case KIND_K1: run_case<K1>(c, lt, warmup, repeat); break;
    }
}

/* The issue's targets: plain GEMMs at 8192^3, 4096^3 and the K2 shapes of the three ViT sizes
 * (K2-1 = H x I x S, K2-2 = I x H x S with A transposed, K2-3 = S x H x I), K1 (S x I x H), and
 * MatMul + ReLU f16 at its four bench shapes. */
static std::vector<bench_case> default_cases()
{
    std::vector<bench_case> cases = {{GEMM_MK, 8192, 8192, 8192}, {GEMM_MK, 4096, 4096, 4096}};
    const int vit[3][3] = {{12608, 768, 3072}, {16448, 1024, 4096}, {16448, 1280, 5120}};
    for (auto &v : vit) {
        int S = v[0], H = v[1], I = v[2];
        cases.push_back({KIND_K1, S, I, H});
        cases.push_back({GEMM_MK, S, I, H}); /* K1's GEMM alone */
        cases.push_back({GEMM_TN, H, I, S});
        cases.push_back({GEMM_SK, H, I, S});
        cases.push_back({GEMM_TN, I, H, S});
        cases.push_back({GEMM_SK, I, H, S});
        cases.push_back({GEMM_MK, S, H, I});
    }
    const int relu[4][3] = {{4096, 4096, 4096}, {8192, 8192, 256}, {16384, 8192, 64}, {8192, 8192, 512}};
    for (auto &r : relu)
        cases.push_back({RELU, r[0], r[1], r[2]});
    return cases;
}

static bool parse_case(const char *text, bench_case *c)
{
    char name[16];
    if (sscanf(text, "%15[^,],%d,%d,%d", name, &c->m, &c->n, &c->k) != 4)
        return false;
    for (int i = 0; i < 5; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            c->op = (kind)i;
            if (c->op == KIND_K1) /* k1,S,H,I -> m = S, n = I, k = H */
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
            fprintf(stderr, "usage: %s [--repeat N] [--warmup N] [kind,m,n,k | k1,S,H,I ...]\n", argv[0]);
            return 2;
        }
    }
    if (cases.empty())
        cases = default_cases();
    if (repeat < 1)
        repeat = 1;
    cublasLtHandle_t lt;
    LT_OK(cublasLtCreate(&lt));
    printf("cutlass_probe: CUTLASS %d.%d.%d sm90 kernels (128 x 256 x 64, cooperative) against cuBLASLt; medians of %d "
           "after %d\n",
           CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, repeat, warmup);
    for (const bench_case &c : cases)
        run_any(c, lt, warmup, repeat);
    cublasLtDestroy(lt);
    return 0;
}

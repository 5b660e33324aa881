/*
 * lt_dgelu_probe: would cuBLASLt's own GELU-gradient epilogue serve K1 of the MLP backward?
 * K1 is D = (grad_output @ fc2_weight) * gelu_tanh'(fc1_output), bf16, with grad_fc1_bias the
 * column sums of D. The planner runs it today as our fused kernel or as cuBLASLt's plain product
 * plus our epilogue pass (which reads and writes D once more). cuBLASLt offers DGELU (the product
 * times GELU' of an aux matrix, in its epilogue) and DGELU_BGRAD (the same and the bias gradient);
 * an earlier measurement (PERF.md, CUDA part 3) found DGELU_BGRAD 3.6x slower than the plain
 * product at ViT-B. This probe times DEFAULT, DGELU and DGELU_BGRAD side by side on the same
 * inputs (the fastest of cuBLASLt's first 8 heuristics each, medians) and checks DGELU's values
 * against a float64 evaluation of GELU' on cuBLASLt's own fp32 product: whether it keeps the
 * contract's accuracy (GELU' in fp32, then one rounding to bf16). Not part of the build.
 *
 * Row-major C (S x I) = A (S x H) @ B (H x I) is computed as cuBLASLt's column-major
 * D (I x S) = B' (I x H) A' (H x S), so the aux matrix (fc1_output, S x I row-major) is D's twin
 * and the bias gradient is a vector along D's rows.
 *
 *   nvcc -std=c++17 -O3 -arch=sm_90a bench/lt_dgelu_probe.cu -lcublasLt -o build/lt_dgelu_probe
 *   build/lt_dgelu_probe [S,H,I ...]        (default: the three ViT sizes of issue 12)
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                         \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define CHECK_LT(x)                                                                                                    \
    do {                                                                                                               \
        cublasStatus_t s_ = (x);                                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);                                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static const size_t WORKSPACE = 32u << 20;

struct problem {
    int64_t S, H, I;
    __nv_bfloat16 *a, *b, *aux, *d;
    float *d32, *bgrad;
    void *ws;
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniform(float lo, float hi)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

static __nv_bfloat16 *upload_random(size_t count, float lo, float hi, std::vector<float> *host)
{
    std::vector<__nv_bfloat16> h(count);
    host->resize(count);
    for (size_t i = 0; i < count; i++) {
        h[i] = __float2bfloat16(uniform(lo, hi));
        (*host)[i] = __bfloat162float(h[i]);
    }
    __nv_bfloat16 *d;
    CHECK_CUDA(cudaMalloc(&d, count * sizeof *d));
    CHECK_CUDA(cudaMemcpy(d, h.data(), count * sizeof *d, cudaMemcpyHostToDevice));
    return d;
}

/* The matmul of one epilogue: descriptors, up to 8 algorithms. */
struct lt_case {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulHeuristicResult_t algos[8];
    int count;
};

static lt_case make_case(cublasLtHandle_t lt, const problem &p, cublasLtEpilogue_t epi, cudaDataType_t d_type)
{
    lt_case c{};
    CHECK_LT(cublasLtMatmulDescCreate(&c.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t n = CUBLAS_OP_N;
    CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof n));
    CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
    CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epi == CUBLASLT_EPILOGUE_DGELU || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
        void *aux = p.aux;
        int64_t ld = p.I;
        CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    if (epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
        void *bias = p.bgrad;
        cudaDataType_t bt = CUDA_R_32F;
        CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CHECK_LT(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    CHECK_LT(cublasLtMatrixLayoutCreate(&c.la, CUDA_R_16BF, p.I, p.H, p.I)); /* B' (I x H) */
    CHECK_LT(cublasLtMatrixLayoutCreate(&c.lb, CUDA_R_16BF, p.H, p.S, p.H)); /* A' (H x S) */
    CHECK_LT(cublasLtMatrixLayoutCreate(&c.ld, d_type, p.I, p.S, p.I));     /* D (I x S) */
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &WORKSPACE,
                                                  sizeof WORKSPACE));
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, c.op, c.la, c.lb, c.ld, c.ld, pref, 8, c.algos, &c.count);
    if (s != CUBLAS_STATUS_SUCCESS)
        c.count = 0;
    cublasLtMatmulPreferenceDestroy(pref);
    return c;
}

static void run(cublasLtHandle_t lt, const problem &p, const lt_case &c, int algo, void *d, cudaStream_t st)
{
    const float one = 1.0f, zero = 0.0f;
    CHECK_LT(cublasLtMatmul(lt, c.op, &one, p.b, c.la, p.a, c.lb, &zero, d, c.ld, d, c.ld, &c.algos[algo].algo, p.ws,
                            WORKSPACE, st));
}

/* The fastest algorithm's median time (ms) over `repeat` runs after `warmup`; -1 without one. */
static double time_case(cublasLtHandle_t lt, const problem &p, const lt_case &c, void *d, int repeat, int warmup,
                        int *best_algo)
{
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    double best = -1.0;
    for (int a = 0; a < c.count; a++) {
        std::vector<float> t(repeat);
        for (int w = 0; w < warmup; w++)
            run(lt, p, c, a, d, 0);
        for (int r = 0; r < repeat; r++) {
            CHECK_CUDA(cudaEventRecord(e0));
            run(lt, p, c, a, d, 0);
            CHECK_CUDA(cudaEventRecord(e1));
            CHECK_CUDA(cudaEventSynchronize(e1));
            CHECK_CUDA(cudaEventElapsedTime(&t[r], e0, e1));
        }
        std::sort(t.begin(), t.end());
        double med = t[repeat / 2];
        if (best < 0 || med < best)
            best = med, *best_algo = a;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
}

static double gelu_tanh_derivative(double x)
{
    const double k = 0.7978845608028654, c = 0.044715;
    double u = k * (x + c * x * x * x), t = std::tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x);
}

int main(int argc, char **argv)
{
    std::vector<problem> shapes;
    for (int i = 1; i < argc; i++) {
        problem p{};
        if (sscanf(argv[i], "%ld,%ld,%ld", &p.S, &p.H, &p.I) == 3)
            shapes.push_back(p);
    }
    if (shapes.empty())
        shapes = {{12608, 768, 3072}, {16448, 1024, 4096}, {16448, 1280, 5120}};
    cublasLtHandle_t lt;
    CHECK_LT(cublasLtCreate(&lt));
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, cuBLASLt %zu\n", prop.name, cublasLtGetVersion());
    for (problem &p : shapes) {
        std::vector<float> ha, hb, haux;
        p.a = upload_random((size_t)(p.S * p.H), -1.0f, 1.0f, &ha);
        p.b = upload_random((size_t)(p.H * p.I), -0.05f, 0.05f, &hb);
        p.aux = upload_random((size_t)(p.S * p.I), -4.0f, 4.0f, &haux);
        CHECK_CUDA(cudaMalloc(&p.d, (size_t)(p.S * p.I) * sizeof(__nv_bfloat16)));
        CHECK_CUDA(cudaMalloc(&p.d32, (size_t)(p.S * p.I) * sizeof(float)));
        CHECK_CUDA(cudaMalloc(&p.bgrad, (size_t)p.I * sizeof(float)));
        CHECK_CUDA(cudaMalloc(&p.ws, WORKSPACE));
        static const struct {
            cublasLtEpilogue_t epi;
            const char *name;
        } kinds[] = {{CUBLASLT_EPILOGUE_DEFAULT, "default"},
                     {CUBLASLT_EPILOGUE_DGELU, "dgelu"},
                     {CUBLASLT_EPILOGUE_DGELU_BGRAD, "dgelu_bgrad"}};
        double plain = 0.0;
        for (const auto &kind : kinds) {
            lt_case c = make_case(lt, p, kind.epi, CUDA_R_16BF);
            int algo = -1;
            double ms = c.count ? time_case(lt, p, c, p.d, 30, 5, &algo) : -1.0;
            if (kind.epi == CUBLASLT_EPILOGUE_DEFAULT)
                plain = ms;
            printf("K1 %ld,%ld,%ld  %-12s %d algos  %.4f ms  (%.2fx the plain product)\n", (long)p.S, (long)p.H,
                   (long)p.I, kind.name, c.count, ms, plain > 0 ? ms / plain : 0.0);
            if (kind.epi == CUBLASLT_EPILOGUE_DGELU && c.count) {
                /* accuracy: DGELU's bf16 D against GELU' (float64) times cuBLASLt's fp32 product */
                lt_case f = make_case(lt, p, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F);
                if (f.count)
                    run(lt, p, f, 0, p.d32, 0);
                run(lt, p, c, algo, p.d, 0);
                CHECK_CUDA(cudaDeviceSynchronize());
                std::vector<float> prod((size_t)(p.S * p.I));
                std::vector<__nv_bfloat16> got((size_t)(p.S * p.I));
                CHECK_CUDA(cudaMemcpy(prod.data(), p.d32, prod.size() * sizeof(float), cudaMemcpyDeviceToHost));
                CHECK_CUDA(cudaMemcpy(got.data(), p.d, got.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
                double worst_ulps = 0.0, sum_sq = 0.0, ref_sq = 0.0;
                for (size_t i = 0; i < prod.size(); i++) {
                    double ref = (double)prod[i] * gelu_tanh_derivative((double)haux[i]);
                    double g = (double)__bfloat162float(got[i]);
                    sum_sq += (g - ref) * (g - ref), ref_sq += ref * ref;
                    double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(ref), 1e-30)) - 7); /* bf16 ulp */
                    worst_ulps = std::max(worst_ulps, std::fabs(g - ref) / ulp);
                }
                printf("   dgelu accuracy: relative rms error %.3g (bf16 rounding alone: ~%.3g), worst %.2f bf16 ulps\n",
                       std::sqrt(sum_sq / ref_sq), std::ldexp(1.0, -9) / std::sqrt(3.0), worst_ulps);
            }
        }
        cudaFree(p.a), cudaFree(p.b), cudaFree(p.aux), cudaFree(p.d), cudaFree(p.d32), cudaFree(p.bgrad), cudaFree(p.ws);
    }
    cublasLtDestroy(lt);
    return 0;
}

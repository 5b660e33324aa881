/*
 * cvfuse_cuda_bench: our CUDA matmul (public API, CUDA context) against cuBLASLt on the same
 * inputs, on one GPU. For each case: both compute C = act(A @ B) with A (M x K) and B (K x N)
 * row-major, C row-major, fp32 accumulation; cuBLASLt gets the RELU epilogue for matmul-relu
 * and the default one for the plain GEMM, and the fastest of its top heuristics (each timed).
 *
 * Timing: warm-up calls, then each call timed alone with a cudaEvent pair on the stream; the
 * median is reported. Inputs and outputs rotate over several sets when A + B + C is under three
 * times the L2 (so that small shapes are not timed from L2). The outputs of both are compared
 * at sampled elements before timing.
 *
 * Output: a table on stdout, and one JSON object per case (op, dtype, shape, device, ms,
 * baseline "cublaslt", baseline_ms, ratio = ms / baseline_ms, tflops, baseline_tflops,
 * max_rel_diff) appended to the file named by --json.
 *
 * usage: cvfuse_cuda_bench [--json FILE] [--repeat N] [CASE ...]
 *   CASE is op,dtype,m,n,k with op matmul-relu or gemm and dtype f16 or bf16; without cases,
 *   the suite (MatMul+ReLU f16 at the four target shapes, plain bf16 GEMM 8192^3).
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cvfuse.h"

#define CUDA_OK(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                      \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define LT_OK(call)                                                                                                    \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #call, (int)s_);                       \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

typedef struct bench_case {
    const char *op; /* "matmul-relu" or "gemm" */
    cvf_dtype dtype;
    int64_t m, n, k;
} bench_case;

enum { MAX_SETS = 8, HEURISTICS = 8 };

static int compare_float(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* Fills a host array of 16-bit values with uniform values in [-1, 1) (a fixed LCG). */
static void fill16(uint16_t *h, size_t count, cvf_dtype dtype, uint64_t seed)
{
    uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (size_t i = 0; i < count; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        h[i] = dtype == CVF_F16 ? cvf_f32_to_f16(v) : cvf_f32_to_bf16(v);
    }
}

static float to_f32(uint16_t bits, cvf_dtype dtype)
{
    return dtype == CVF_F16 ? cvf_f16_to_f32(bits) : cvf_bf16_to_f32(bits);
}

typedef struct lt_setup {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulHeuristicResult_t results[HEURISTICS];
    int count, best;
    void *workspace;
    size_t workspace_size;
} lt_setup;

/* Row-major C = A @ B is column-major C^T = B^T A^T: cuBLASLt's "A" is our B (N x K column-major,
 * ld N), its "B" our A (K x M, ld K), its D our C (N x M, ld N). */
static void lt_create(lt_setup *s, const bench_case *c, cublasLtHandle_t lt)
{
    memset(s, 0, sizeof *s);
    s->lt = lt;
    cudaDataType_t t = c->dtype == CVF_F16 ? CUDA_R_16F : CUDA_R_16BF;
    LT_OK(cublasLtMatmulDescCreate(&s->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = strcmp(c->op, "matmul-relu") == 0 ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT;
    LT_OK(cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    LT_OK(cublasLtMatrixLayoutCreate(&s->la, t, (uint64_t)c->n, (uint64_t)c->k, c->n));
    LT_OK(cublasLtMatrixLayoutCreate(&s->lb, t, (uint64_t)c->k, (uint64_t)c->m, c->k));
    LT_OK(cublasLtMatrixLayoutCreate(&s->lc, t, (uint64_t)c->n, (uint64_t)c->m, c->n));
    s->workspace_size = 64u << 20;
    CUDA_OK(cudaMalloc(&s->workspace, s->workspace_size));
    cublasLtMatmulPreference_t pref;
    LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &s->workspace_size,
                                               sizeof s->workspace_size));
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, s->desc, s->la, s->lb, s->lc, s->lc, pref, HEURISTICS, s->results,
                                         &s->count));
    cublasLtMatmulPreferenceDestroy(pref);
    if (s->count == 0) {
        fprintf(stderr, "cuBLASLt: no algorithm\n");
        exit(1);
    }
}

static void lt_run(const lt_setup *s, int algo, const void *a, const void *b, void *c, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    LT_OK(cublasLtMatmul(s->lt, s->desc, &one, b, s->la, a, s->lb, &zero, c, s->lc, c, s->lc,
                         &s->results[algo].algo, s->workspace, s->workspace_size, stream));
}

static void lt_destroy(lt_setup *s)
{
    cublasLtMatrixLayoutDestroy(s->la);
    cublasLtMatrixLayoutDestroy(s->lb);
    cublasLtMatrixLayoutDestroy(s->lc);
    cublasLtMatmulDescDestroy(s->desc);
    cudaFree(s->workspace);
}

typedef struct operands {
    int sets;
    void *a[MAX_SETS], *b[MAX_SETS], *c[MAX_SETS];
} operands;

static void ours_run(cvf_context *ctx, const bench_case *c, const operands *o, int set)
{
    cvf_matrix a = cvf_matrix_row_major(o->a[set], c->dtype, c->m, c->k);
    cvf_matrix b = cvf_matrix_row_major(o->b[set], c->dtype, c->k, c->n);
    cvf_matrix out = cvf_matrix_row_major(o->c[set], c->dtype, c->m, c->n);
    cvf_epilogue ep = {strcmp(c->op, "matmul-relu") == 0 ? CVF_ACTIVATION_RELU : CVF_ACTIVATION_NONE, NULL, NULL,
                       NULL, NULL};
    cvf_status status = cvf_matmul(ctx, &a, &b, &out, &ep);
    if (status != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "cvf_matmul: %s: %s\n", cvf_status_string(status), cvf_context_last_error(ctx));
        exit(1);
    }
}

/* Times fn over warmup + repeat calls rotating over the sets; returns the median ms. */
typedef void (*run_fn)(void *state, int set);

static float time_median(run_fn fn, void *state, int sets, int warmup, int repeat, cudaStream_t stream)
{
    for (int i = 0; i < warmup; i++)
        fn(state, i % sets);
    CUDA_OK(cudaStreamSynchronize(stream));
    cudaEvent_t start[256], stop[256];
    float ms[256];
    if (repeat > 256)
        repeat = 256;
    for (int i = 0; i < repeat; i++) {
        CUDA_OK(cudaEventCreate(&start[i]));
        CUDA_OK(cudaEventCreate(&stop[i]));
    }
    for (int i = 0; i < repeat; i++) {
        CUDA_OK(cudaEventRecord(start[i], stream));
        fn(state, i % sets);
        CUDA_OK(cudaEventRecord(stop[i], stream));
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    for (int i = 0; i < repeat; i++) {
        CUDA_OK(cudaEventElapsedTime(&ms[i], start[i], stop[i]));
        cudaEventDestroy(start[i]);
        cudaEventDestroy(stop[i]);
    }
    return median(ms, repeat);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Host time of one call (enqueue only): the mean over 20 back-to-back calls, then a sync. */
static double host_us(run_fn fn, void *state, int sets, cudaStream_t stream)
{
    double t0 = now_us();
    for (int i = 0; i < 20; i++)
        fn(state, i % sets);
    double t = (now_us() - t0) / 20;
    CUDA_OK(cudaStreamSynchronize(stream));
    return t;
}

/* Mean ms per call of 20 calls between one event pair (no events in between). */
static float back_to_back_ms(run_fn fn, void *state, int sets, cudaStream_t stream)
{
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaEventRecord(start, stream));
    for (int i = 0; i < 20; i++)
        fn(state, i % sets);
    CUDA_OK(cudaEventRecord(stop, stream));
    CUDA_OK(cudaEventSynchronize(stop));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms / 20;
}

/* Median ms of calls each started on an idle GPU (a sync before each), as a profiler sees them. */
static float isolated_ms(run_fn fn, void *state, int sets, cudaStream_t stream)
{
    float ms[15];
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    for (int i = 0; i < 15; i++) {
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(cudaEventRecord(start, stream));
        fn(state, i % sets);
        CUDA_OK(cudaEventRecord(stop, stream));
        CUDA_OK(cudaEventSynchronize(stop));
        CUDA_OK(cudaEventElapsedTime(&ms[i], start, stop));
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return median(ms, 15);
}

typedef struct ours_state {
    cvf_context *ctx;
    const bench_case *c;
    const operands *o;
} ours_state;

static void ours_fn(void *state, int set)
{
    ours_state *s = state;
    ours_run(s->ctx, s->c, s->o, set);
}

typedef struct lt_state {
    const lt_setup *lt;
    int algo;
    const operands *o;
    cudaStream_t stream;
} lt_state;

static void lt_fn(void *state, int set)
{
    lt_state *s = state;
    lt_run(s->lt, s->algo, s->o->a[set], s->o->b[set], s->o->c[set], s->stream);
}

/* Relative difference of ours and cuBLASLt at sampled elements of set 0's outputs. */
static double sampled_difference(const bench_case *c, const void *ours, const void *theirs)
{
    size_t count = (size_t)(c->m * c->n);
    size_t step = count / 4096 + 1;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < count; i += step) {
        uint16_t x, y;
        CUDA_OK(cudaMemcpy(&x, (const uint16_t *)ours + i, 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&y, (const uint16_t *)theirs + i, 2, cudaMemcpyDeviceToHost));
        double u = to_f32(x, c->dtype), v = to_f32(y, c->dtype);
        diff += (u - v) * (u - v);
        norm += v * v;
    }
    return sqrt(diff / (norm > 0 ? norm : 1));
}

static void run_case(const bench_case *c, cvf_context *ctx, cublasLtHandle_t lt, cudaStream_t stream, int repeat,
                     size_t l2, FILE *json)
{
    size_t esize = 2;
    size_t bytes_a = (size_t)(c->m * c->k) * esize, bytes_b = (size_t)(c->k * c->n) * esize,
           bytes_c = (size_t)(c->m * c->n) * esize;
    size_t total = bytes_a + bytes_b + bytes_c;
    operands ours = {0}, theirs = {0};
    int sets = total >= 3 * l2 ? 1 : (int)((3 * l2) / total + 1);
    if (sets > MAX_SETS)
        sets = MAX_SETS;
    if (sets < 3 && total < 3 * l2)
        sets = 3;
    ours.sets = theirs.sets = sets;
    uint16_t *host = malloc(bytes_a > bytes_b ? bytes_a : bytes_b);
    for (int s = 0; s < sets; s++) {
        CUDA_OK(cudaMalloc(&ours.a[s], bytes_a));
        CUDA_OK(cudaMalloc(&ours.b[s], bytes_b));
        CUDA_OK(cudaMalloc(&ours.c[s], bytes_c));
        CUDA_OK(cudaMalloc(&theirs.c[s], bytes_c));
        fill16(host, bytes_a / 2, c->dtype, 11 + s);
        CUDA_OK(cudaMemcpy(ours.a[s], host, bytes_a, cudaMemcpyHostToDevice));
        fill16(host, bytes_b / 2, c->dtype, 101 + s);
        CUDA_OK(cudaMemcpy(ours.b[s], host, bytes_b, cudaMemcpyHostToDevice));
        theirs.a[s] = ours.a[s];
        theirs.b[s] = ours.b[s];
        CUDA_OK(cudaMemset(ours.c[s], 0xFF, bytes_c));
        CUDA_OK(cudaMemset(theirs.c[s], 0xFF, bytes_c));
    }
    free(host);
    lt_setup ls;
    lt_create(&ls, c, lt);
    /* correctness first: one call each on set 0 */
    ours_run(ctx, c, &ours, 0);
    lt_run(&ls, 0, theirs.a[0], theirs.b[0], theirs.c[0], stream);
    CUDA_OK(cudaStreamSynchronize(stream));
    double diff = sampled_difference(c, ours.c[0], theirs.c[0]);
    /* cuBLASLt: the fastest of its heuristics (a short timing of each) */
    lt_state lts = {&ls, 0, &theirs, stream};
    float best = 1e30f;
    for (int h = 0; h < ls.count; h++) {
        lts.algo = h;
        float t = time_median(lt_fn, &lts, sets, 3, 10, stream);
        if (t < best) {
            best = t;
            ls.best = h;
        }
    }
    lts.algo = ls.best;
    int warmup = 10;
    ours_state os = {ctx, c, &ours};
    float ms_theirs = time_median(lt_fn, &lts, sets, warmup, repeat, stream);
    float ms_ours = time_median(ours_fn, &os, sets, warmup, repeat, stream);
    float ms_theirs2 = time_median(lt_fn, &lts, sets, warmup, repeat, stream); /* drift check */
    double host_ours = host_us(ours_fn, &os, sets, stream), host_theirs = host_us(lt_fn, &lts, sets, stream);
    printf("  [timing study] ours: isolated %.4f ms, back-to-back %.4f ms; cublaslt: isolated %.4f ms, "
           "back-to-back %.4f ms\n",
           isolated_ms(ours_fn, &os, sets, stream), back_to_back_ms(ours_fn, &os, sets, stream),
           isolated_ms(lt_fn, &lts, sets, stream), back_to_back_ms(lt_fn, &lts, sets, stream));
    if (ms_theirs2 < ms_theirs)
        ms_theirs = ms_theirs2;
    double flops = 2.0 * (double)c->m * (double)c->n * (double)c->k;
    double tf = flops / (ms_ours * 1e-3) / 1e12, tf_theirs = flops / (ms_theirs * 1e-3) / 1e12;
    printf("%-12s %-5s %6lld %6lld %6lld  ours %8.4f ms %6.1f TF/s  cublaslt %8.4f ms %6.1f TF/s  ratio %.3f  "
           "sets %d  diff %.2g  host us/call ours %.1f cublaslt %.1f\n",
           c->op, cvf_dtype_name(c->dtype), (long long)c->m, (long long)c->n, (long long)c->k, ms_ours, tf, ms_theirs,
           tf_theirs, ms_ours / ms_theirs, sets, diff, host_ours, host_theirs);
    fflush(stdout);
    if (json) {
        fprintf(json,
                "{\"op\":\"%s\",\"dtype\":\"%s\",\"shape\":{\"m\":%lld,\"n\":%lld,\"k\":%lld},\"device\":\"cuda\","
                "\"ms\":%.5f,\"baseline\":\"cublaslt\",\"baseline_ms\":%.5f,\"ratio\":%.4f,\"tflops\":%.1f,"
                "\"baseline_tflops\":%.1f,\"max_rel_diff\":%.3g,\"input_sets\":%d,\"repeat\":%d,"
                "\"host_us\":%.1f,\"baseline_host_us\":%.1f}\n",
                c->op, cvf_dtype_name(c->dtype), (long long)c->m, (long long)c->n, (long long)c->k, ms_ours, ms_theirs,
                ms_ours / ms_theirs, tf, tf_theirs, diff, sets, repeat, host_ours, host_theirs);
        fflush(json);
    }
    lt_destroy(&ls);
    for (int s = 0; s < sets; s++) {
        cudaFree(ours.a[s]);
        cudaFree(ours.b[s]);
        cudaFree(ours.c[s]);
        cudaFree(theirs.c[s]);
    }
}

/* The bench's command line (see the top of this file); also `cvfuse bench --device cuda`. */
int cvf_cuda_bench_main(int argc, char **argv);
int cvf_cuda_bench_main(int argc, char **argv)
{
    const char *json_path = NULL;
    int repeat = 50;
    bench_case cases[32];
    int count = 0;
    static char op_names[32][32];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json_path = argv[++i];
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (count < 32) {
            char dtype[8];
            long long m, n, k;
            if (sscanf(argv[i], "%31[^,],%7[^,],%lld,%lld,%lld", op_names[count], dtype, &m, &n, &k) != 5 ||
                (strcmp(dtype, "f16") != 0 && strcmp(dtype, "bf16") != 0)) {
                fprintf(stderr, "usage: %s [--json FILE] [--repeat N] [op,dtype,m,n,k ...]\n", argv[0]);
                return 2;
            }
            cases[count].op = op_names[count];
            cases[count].dtype = strcmp(dtype, "f16") == 0 ? CVF_F16 : CVF_BF16;
            cases[count].m = m;
            cases[count].n = n;
            cases[count].k = k;
            count++;
        }
    }
    if (count == 0) {
        static const bench_case suite[] = {
            {"matmul-relu", CVF_F16, 8192, 8192, 8192}, {"matmul-relu", CVF_F16, 4096, 4096, 4096},
            {"matmul-relu", CVF_F16, 8192, 8192, 256},  {"matmul-relu", CVF_F16, 16384, 8192, 64},
            {"gemm", CVF_BF16, 8192, 8192, 8192},
        };
        count = (int)(sizeof suite / sizeof suite[0]);
        memcpy(cases, suite, sizeof suite);
    }
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cvf_context_options options = {CVF_DEVICE_CUDA, 0, 0, (void *)stream};
    cvf_context *ctx = NULL;
    cvf_status status = cvf_context_create(&options, &ctx);
    if (status != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "cvf_context_create(cuda): %s\n", cvf_status_string(status));
        return 1;
    }
    cublasLtHandle_t lt;
    LT_OK(cublasLtCreate(&lt));
    FILE *json = json_path ? fopen(json_path, "a") : NULL;
    for (int i = 0; i < count; i++)
        run_case(&cases[i], ctx, lt, stream, repeat, (size_t)prop.l2CacheSize, json);
    if (json)
        fclose(json);
    cublasLtDestroy(lt);
    cvf_context_destroy(ctx);
    cudaStreamDestroy(stream);
    return 0;
}

#ifdef CVF_CUDA_BENCH_STANDALONE
int main(int argc, char **argv)
{
    return cvf_cuda_bench_main(argc, argv);
}
#endif

/*
 * cvfuse_cuda_bench: our CUDA ops (public API, CUDA context) against cuBLASLt on the same inputs,
 * on one GPU.
 *
 * matmul-relu, gemm: C = act(A @ B) with A (M x K) and B (K x N) row-major, C row-major, fp32
 * accumulation; cuBLASLt gets the RELU epilogue for matmul-relu and the default one for the plain
 * GEMM, and the fastest of its top heuristics (each timed). Inputs and outputs rotate over several
 * sets when A + B + C is under three times the L2 (so that small shapes are not timed from L2).
 *
 * mlp-backward (S, H, I): the vision-MLP GELU backward, tensors as in cvf_mlp_backward_args
 * (row-major, PyTorch (out, in) weights). Timed: ours whole (cvf_mlp_backward on the context's
 * stream; side streams it forks are joined into that stream before it returns), ours per kernel
 * (the library's plan reproduced with public calls: K1 fused DGELU + grad_fc1_bias into an S x I
 * grad_fc1_output of the storage dtype, K2-1..3 plain GEMMs on transposed views, K3 column sum),
 * K1's GEMM alone (its epilogue's cost), and cuBLASLt's four calls: K1 DGELU_BGRAD (aux = fc1_output),
 * K2-1 BGRADB (grad_fc2_bias), two plain GEMMs, each call with the fastest of its heuristics; bias,
 * bias-gradient and aux buffers in the storage dtype (cuBLASLt's default: D's type). An epilogue
 * cuBLASLt does not support for its layout is said in the output and replaced, marked FALLBACK:
 * K1 by DGELU plus our column sum, K2-1 by the plain GEMM plus our column sum; without even DGELU
 * there is no baseline. FLOPs: the four GEMMs, 8 S H I.
 * mlp-forward (S, H, I): ours cvf_mlp_forward (and its two cvf_matmul calls) against cuBLASLt fc1
 * GELU_AUX_BIAS (fc1_output as aux, gelu_output as D) + fc2 BIAS. FLOPs 4 S H I. MLP cases use one
 * input set (they are far bigger than the L2).
 *
 * Timing: warm-up calls, then each call timed alone with a cudaEvent pair on the stream; the
 * median is reported (the MLP wholes are timed in turns, cuBLASLt, ours, cuBLASLt, ours, and each
 * side keeps its smaller median).
 * Correctness before timing: ours and cuBLASLt's outputs compared at about 4096 evenly spaced
 * elements of each output: the relative RMS difference sqrt(sum (ours - theirs)^2 / sum theirs^2);
 * max_rel_diff is the largest over the outputs (bf16 ~1e-2 and f16 ~1e-3 are normal).
 *
 * Output: a table on stdout, and one JSON object per case appended to the file named by --json.
 * matmul cases: op, dtype, shape {m, n, k}, device, ms, baseline "cublaslt", baseline_ms, ratio =
 * ms / baseline_ms, tflops, baseline_tflops, max_rel_diff, input_sets, repeat, host_us,
 * baseline_host_us, and the memory floor: gbs and baseline_gbs (A + B + C's bytes, each once, over
 * the median), copy_ms / copy_gbs (a device-to-device copy of C: its bytes read and written) and
 * memset_ms / memset_gbs (C written only), timed on the same stream after both sides. MLP cases: op, dtype, S, H, I, device, ms (ours whole), baseline ("cublaslt",
 * or "none" when cuBLASLt cannot run the case), baseline_ms, ratio, tflops, baseline_tflops,
 * kernels {ours {K1, K2-1, K2-2, K2-3, K3, sum}, cublaslt {...}} (forward: fc1, fc2, sum; per-kernel
 * medians in ms; cuBLASLt's K3 is null: it rides in K2-1), k1_plain_ms and cublaslt_k1_plain_ms
 * (forward: fc1_plain_ms, ...: the fused kernel's GEMM with no epilogue), k1_epilogue_overhead (ours
 * K1 / K1 plain - 1; forward fc1_epilogue_overhead), cublaslt_epilogues, max_rel_diff, diffs
 * {output: difference}, perkernel_max_rel_diff (ours per kernel against ours whole), nan_in_outputs,
 * workspace_dtype (where the plan keeps grad_fc1_output), repeat, warmup. Unknown numbers are null.
 *
 * usage: cvfuse_cuda_bench [--json FILE] [--repeat N] [--warmup N] [--suite all|matmul|mlp] [CASE ...]
 *   CASE is op,dtype,m,n,k with op matmul-relu or gemm, or op,dtype,S,H,I with op mlp-backward or
 *   mlp-forward; dtype f16 or bf16. Without cases, the suite (default all): matmul = MatMul+ReLU f16
 *   at the four target shapes and plain bf16 GEMM 8192^3; mlp = mlp-backward bf16 and f16 and
 *   mlp-forward bf16 at S,H,I = 12608,768,3072; 16448,1024,4096; 16448,1280,5120 (docs/PERF.md).
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
    const char *op; /* "matmul-relu", "gemm", "mlp-backward" or "mlp-forward" */
    cvf_dtype dtype;
    int64_t m, n, k; /* for the MLP ops: S, H, I */
} bench_case;

enum { MAX_SETS = 8, HEURISTICS = 8 };

/* qsort order of floats. */
static int compare_float(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* Median of v[0..n) (sorts v). */
static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* Fills a host array of 16-bit values with uniform values in [-scale, scale) (a fixed LCG). */
static void fill16_scaled(uint16_t *h, size_t count, cvf_dtype dtype, uint64_t seed, float scale)
{
    uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (size_t i = 0; i < count; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        float v = scale * (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        h[i] = dtype == CVF_F16 ? cvf_f32_to_f16(v) : cvf_f32_to_bf16(v);
    }
}

/* Fills a host array of 16-bit values with uniform values in [-1, 1) (a fixed LCG). */
static void fill16(uint16_t *h, size_t count, cvf_dtype dtype, uint64_t seed)
{
    fill16_scaled(h, count, dtype, seed, 1.0f);
}

/* Widens a 16-bit value of dtype (f16 or bf16) to float. */
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

/* Enqueues cuBLASLt's C = act(A @ B) with heuristic candidate algo. */
static void lt_run(const lt_setup *s, int algo, const void *a, const void *b, void *c, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    LT_OK(cublasLtMatmul(s->lt, s->desc, &one, b, s->la, a, s->lb, &zero, c, s->lc, c, s->lc,
                         &s->results[algo].algo, s->workspace, s->workspace_size, stream));
}

/* Frees what lt_create made. */
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

/* Enqueues our C = act(A @ B) on input set `set`. */
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

/* Monotonic host time in microseconds. */
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

/* run_fn of ours_run (state: ours_state). */
static void ours_fn(void *state, int set)
{
    ours_state *s = state;
    ours_run(s->ctx, s->c, s->o, set);
}

/* The memory floor of a case: a device-to-device copy of C's bytes (each read once, written once)
 * and a memset of them (written only), on the same stream (state: floor_state). At small K the
 * GEMM is C's store with A and B read once: issue 12 asks it for >= 85% of the copy's bandwidth. */
typedef struct floor_state {
    const operands *src, *dst;
    size_t bytes;
    cudaStream_t stream;
} floor_state;

/* run_fn: C of set `set` copied into the other side's C. */
static void copy_fn(void *state, int set)
{
    floor_state *s = state;
    CUDA_OK(cudaMemcpyAsync(s->dst->c[set], s->src->c[set], s->bytes, cudaMemcpyDeviceToDevice, s->stream));
}

/* run_fn: C of set `set` set to zero bytes. */
static void memset_fn(void *state, int set)
{
    floor_state *s = state;
    CUDA_OK(cudaMemsetAsync(s->dst->c[set], 0, s->bytes, s->stream));
}

typedef struct lt_state {
    const lt_setup *lt;
    int algo;
    const operands *o;
    cudaStream_t stream;
} lt_state;

/* run_fn of lt_run with the chosen algorithm (state: lt_state). */
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

/* Measures one matmul case (see the top of this file) and reports it. */
static void run_case(const bench_case *c, cvf_context *ctx, cublasLtHandle_t lt, cudaStream_t stream, int warmup,
                     int repeat, size_t l2, FILE *json)
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
    /* the memory floor, after both sides' timings (it overwrites cuBLASLt's C) */
    floor_state fs = {&ours, &theirs, bytes_c, stream};
    double ms_copy = time_median(copy_fn, &fs, sets, warmup, repeat, stream);
    double ms_memset = time_median(memset_fn, &fs, sets, warmup, repeat, stream);
    double gbs = total / (ms_ours * 1e6), gbs_theirs = total / (ms_theirs * 1e6), gbs_copy = 2.0 * bytes_c / (ms_copy * 1e6),
           gbs_memset = bytes_c / (ms_memset * 1e6);
    printf("  [memory floor] A + B + C once: ours %.0f GB/s, cublaslt %.0f GB/s; copy of C %.4f ms (%.0f GB/s: ours "
           "%.0f%% of it), memset of C %.4f ms (%.0f GB/s)\n",
           gbs, gbs_theirs, ms_copy, gbs_copy, 100.0 * gbs / gbs_copy, ms_memset, gbs_memset);
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
                "\"host_us\":%.1f,\"baseline_host_us\":%.1f,\"gbs\":%.0f,\"baseline_gbs\":%.0f,\"copy_ms\":%.5f,"
                "\"copy_gbs\":%.0f,\"memset_ms\":%.5f,\"memset_gbs\":%.0f}\n",
                c->op, cvf_dtype_name(c->dtype), (long long)c->m, (long long)c->n, (long long)c->k, ms_ours, ms_theirs,
                ms_ours / ms_theirs, tf, tf_theirs, diff, sets, repeat, host_ours, host_theirs, gbs, gbs_theirs, ms_copy,
                gbs_copy, ms_memset, gbs_memset);
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

/* ---------------------------------------------------------------------------------------------- */
/* MLP cases: the vision-MLP backward and forward, ours against cuBLASLt                          */
/* ---------------------------------------------------------------------------------------------- */

enum { SAMPLES = 4096, MAX_ALLOCS = 40 };

/* Exits with the library's message when a cvfuse call failed. */
static void cvf_check(cvf_context *ctx, cvf_status status, const char *call)
{
    if (status != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "%s: %s: %s\n", call, cvf_status_string(status), cvf_context_last_error(ctx));
        exit(1);
    }
}

/* GELU, tanh approximation (as CVF_ACTIVATION_GELU_TANH), on the host. */
static float gelu_tanh_host(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* Rounds a float to the 16-bit dtype. */
static uint16_t from_f32(float v, cvf_dtype dtype)
{
    return dtype == CVF_F16 ? cvf_f32_to_f16(v) : cvf_f32_to_bf16(v);
}

/* One side's outputs of an MLP case (device buffers of the storage dtype; NULL when unused). */
typedef struct mlp_side {
    void *grad_hidden_state, *grad_fc1_weight, *grad_fc1_bias, *grad_fc2_weight, *grad_fc2_bias;
    void *grad_fc1_output; /* K1's output, S x I */
    void *fc1_output, *gelu_output, *output;
} mlp_side;

/* An MLP case: its sizes, the inputs both sides read, each side's outputs, the allocations. */
typedef struct mlp_case {
    int64_t S, H, I;
    cvf_dtype dtype;
    cvf_context *ctx;
    cudaStream_t stream;
    void *grad_output, *hidden_state, *fc1_weight, *fc2_weight, *fc1_output, *gelu_output, *fc1_bias, *fc2_bias;
    mlp_side ours, theirs;
    uint16_t *host; /* staging for the uploads: the largest tensor */
    void *allocs[MAX_ALLOCS];
    int alloc_count;
} mlp_case;

/* cudaMallocs count 16-bit elements owned by the case, poisoned with 0xFFFF (NaN). */
static void *mlp_output(mlp_case *m, int64_t count)
{
    void *p;
    CUDA_OK(cudaMalloc(&p, (size_t)count * 2));
    CUDA_OK(cudaMemset(p, 0xFF, (size_t)count * 2));
    if (m->alloc_count == MAX_ALLOCS) {
        fprintf(stderr, "mlp_output: too many buffers\n");
        exit(1);
    }
    m->allocs[m->alloc_count++] = p;
    return p;
}

/* An input owned by the case: count values uniform in [-scale, scale) from seed. */
static void *mlp_input(mlp_case *m, int64_t count, uint64_t seed, float scale)
{
    void *p = mlp_output(m, count);
    fill16_scaled(m->host, (size_t)count, m->dtype, seed, scale);
    CUDA_OK(cudaMemcpy(p, m->host, (size_t)count * 2, cudaMemcpyHostToDevice));
    return p;
}

/* fc1_output uniform in [-3, 3) (pre-activations) and gelu_output = gelu_tanh(fc1_output) of the
 * rounded values, rounded once. */
static void mlp_activations(mlp_case *m, uint64_t seed)
{
    int64_t count = m->S * m->I;
    m->fc1_output = mlp_input(m, count, seed, 3.0f); /* leaves the values in m->host */
    for (int64_t i = 0; i < count; i++)
        m->host[i] = from_f32(gelu_tanh_host(to_f32(m->host[i], m->dtype)), m->dtype);
    m->gelu_output = mlp_output(m, count);
    CUDA_OK(cudaMemcpy(m->gelu_output, m->host, (size_t)count * 2, cudaMemcpyHostToDevice));
}

/* Allocates the case's staging buffer (the largest of S x I, S x H, I x H elements). */
static void mlp_begin(mlp_case *m, const bench_case *c, cvf_context *ctx, cudaStream_t stream)
{
    memset(m, 0, sizeof *m);
    m->S = c->m;
    m->H = c->n;
    m->I = c->k;
    m->dtype = c->dtype;
    m->ctx = ctx;
    m->stream = stream;
    int64_t most = m->S * m->I;
    most = m->S * m->H > most ? m->S * m->H : most;
    most = m->I * m->H > most ? m->I * m->H : most;
    m->host = malloc((size_t)(most > 1 ? most : 1) * 2);
    if (!m->host) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
}

/* Frees everything the case allocated. */
static void mlp_end(mlp_case *m)
{
    CUDA_OK(cudaStreamSynchronize(m->stream));
    for (int i = 0; i < m->alloc_count; i++)
        cudaFree(m->allocs[i]);
    free(m->host);
}

/* The backward's inputs and both sides' outputs. */
static void mlp_backward_alloc(mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    m->grad_output = mlp_input(m, S * H, 21, 1.0f);
    m->hidden_state = mlp_input(m, S * H, 22, 1.0f);
    m->fc1_weight = mlp_input(m, I * H, 23, 1.0f);
    m->fc2_weight = mlp_input(m, H * I, 24, 1.0f);
    mlp_activations(m, 25);
    mlp_side *sides[2] = {&m->ours, &m->theirs};
    for (int i = 0; i < 2; i++) {
        sides[i]->grad_hidden_state = mlp_output(m, S * H);
        sides[i]->grad_fc1_weight = mlp_output(m, I * H);
        sides[i]->grad_fc1_bias = mlp_output(m, I);
        sides[i]->grad_fc2_weight = mlp_output(m, H * I);
        sides[i]->grad_fc2_bias = mlp_output(m, H);
        sides[i]->grad_fc1_output = mlp_output(m, S * I);
    }
    CUDA_OK(cudaDeviceSynchronize()); /* the poisoning memsets ran on the legacy stream */
}

/* The forward's inputs and both sides' outputs. */
static void mlp_forward_alloc(mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    m->hidden_state = mlp_input(m, S * H, 31, 1.0f);
    m->fc1_weight = mlp_input(m, I * H, 32, 1.0f);
    m->fc1_bias = mlp_input(m, I, 33, 1.0f);
    m->fc2_weight = mlp_input(m, H * I, 34, 1.0f);
    m->fc2_bias = mlp_input(m, H, 35, 1.0f);
    mlp_side *sides[2] = {&m->ours, &m->theirs};
    for (int i = 0; i < 2; i++) {
        sides[i]->fc1_output = mlp_output(m, S * I);
        sides[i]->gelu_output = mlp_output(m, S * I);
        sides[i]->output = mlp_output(m, S * H);
    }
    CUDA_OK(cudaDeviceSynchronize()); /* the poisoning memsets ran on the legacy stream */
}

/* A row-major view of one of the case's tensors. */
static cvf_matrix mat(const mlp_case *m, void *data, int64_t rows, int64_t cols)
{
    return cvf_matrix_row_major(data, m->dtype, rows, cols);
}

/* A dense vector view of one of the case's tensors. */
static cvf_vector vec(const mlp_case *m, void *data, int64_t length)
{
    return cvf_vector_dense(data, m->dtype, length);
}

/* cvf_mlp_backward's arguments: the case's inputs, our outputs. */
static cvf_mlp_backward_args backward_args(const mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    cvf_mlp_backward_args a = {
        .grad_output = mat(m, m->grad_output, S, H),
        .hidden_state = mat(m, m->hidden_state, S, H),
        .fc1_weight = mat(m, m->fc1_weight, I, H),
        .fc2_weight = mat(m, m->fc2_weight, H, I),
        .fc1_output = mat(m, m->fc1_output, S, I),
        .gelu_output = mat(m, m->gelu_output, S, I),
        .grad_hidden_state = mat(m, m->ours.grad_hidden_state, S, H),
        .grad_fc1_weight = mat(m, m->ours.grad_fc1_weight, I, H),
        .grad_fc1_bias = vec(m, m->ours.grad_fc1_bias, I),
        .grad_fc2_weight = mat(m, m->ours.grad_fc2_weight, H, I),
        .grad_fc2_bias = vec(m, m->ours.grad_fc2_bias, H),
    };
    return a;
}

/* cvf_mlp_forward's arguments: the case's inputs, our outputs. */
static cvf_mlp_forward_args forward_args(const mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    cvf_mlp_forward_args a = {
        .hidden_state = mat(m, m->hidden_state, S, H),
        .fc1_weight = mat(m, m->fc1_weight, I, H),
        .fc1_bias = vec(m, m->fc1_bias, I),
        .fc2_weight = mat(m, m->fc2_weight, H, I),
        .fc2_bias = vec(m, m->fc2_bias, H),
        .fc1_output = mat(m, m->ours.fc1_output, S, I),
        .gelu_output = mat(m, m->ours.gelu_output, S, I),
        .output = mat(m, m->ours.output, S, H),
    };
    return a;
}

/* c = epilogue(a @ b) on the case's context; exits on failure. */
static void ours_gemm(const mlp_case *m, cvf_matrix a, cvf_matrix b, cvf_matrix c, const cvf_epilogue *ep,
                      const char *what)
{
    cvf_check(m->ctx, cvf_matmul(m->ctx, &a, &b, &c, ep), what);
}

/* Ours, whole backward: the public entry point. */
static void ours_backward_fn(void *state, int set)
{
    (void)set;
    const mlp_case *m = state;
    cvf_mlp_backward_args args = backward_args(m);
    cvf_check(m->ctx, cvf_mlp_backward(m->ctx, &args), "cvf_mlp_backward");
}

/* K1: grad_fc1_output = (grad_output @ fc2_weight) * gelu_tanh'(fc1_output), grad_fc1_bias summed
 * in the epilogue; grad_fc1_output in the storage dtype. */
static void ours_k1_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    cvf_matrix aux = mat(m, m->fc1_output, m->S, m->I);
    cvf_vector bias_grad = vec(m, m->ours.grad_fc1_bias, m->I);
    cvf_epilogue ep = {CVF_ACTIVATION_DGELU_TANH, NULL, &aux, NULL, &bias_grad};
    ours_gemm(m, mat(m, m->grad_output, m->S, m->H), mat(m, m->fc2_weight, m->H, m->I),
              mat(m, m->ours.grad_fc1_output, m->S, m->I), &ep, "cvf_matmul (K1)");
}

/* K1's GEMM alone, no epilogue, same operands and output. */
static void ours_k1_plain_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    ours_gemm(m, mat(m, m->grad_output, m->S, m->H), mat(m, m->fc2_weight, m->H, m->I),
              mat(m, m->ours.grad_fc1_output, m->S, m->I), NULL, "cvf_matmul (K1 plain)");
}

/* K2-1: grad_fc2_weight = grad_output^T @ gelu_output (transpose read in place). */
static void ours_k21_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    ours_gemm(m, cvf_matrix_transpose(mat(m, m->grad_output, m->S, m->H)), mat(m, m->gelu_output, m->S, m->I),
              mat(m, m->ours.grad_fc2_weight, m->H, m->I), NULL, "cvf_matmul (K2-1)");
}

/* K2-2: grad_fc1_weight = grad_fc1_output^T @ hidden_state. */
static void ours_k22_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    ours_gemm(m, cvf_matrix_transpose(mat(m, m->ours.grad_fc1_output, m->S, m->I)), mat(m, m->hidden_state, m->S, m->H),
              mat(m, m->ours.grad_fc1_weight, m->I, m->H), NULL, "cvf_matmul (K2-2)");
}

/* K2-3: grad_hidden_state = grad_fc1_output @ fc1_weight. */
static void ours_k23_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    ours_gemm(m, mat(m, m->ours.grad_fc1_output, m->S, m->I), mat(m, m->fc1_weight, m->I, m->H),
              mat(m, m->ours.grad_hidden_state, m->S, m->H), NULL, "cvf_matmul (K2-3)");
}

/* K3: grad_fc2_bias = grad_output.sum(0). */
static void ours_k3_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    cvf_matrix x = mat(m, m->grad_output, m->S, m->H);
    cvf_vector out = vec(m, m->ours.grad_fc2_bias, m->H);
    cvf_check(m->ctx, cvf_column_sum(m->ctx, &x, &out), "cvf_column_sum (K3)");
}

/* The plan's five kernels in order, one after another on the stream. */
static void ours_kernels_fn(void *state, int set)
{
    ours_k1_fn(state, set);
    ours_k21_fn(state, set);
    ours_k22_fn(state, set);
    ours_k23_fn(state, set);
    ours_k3_fn(state, set);
}

/* Ours, whole forward: the public entry point. */
static void ours_forward_fn(void *state, int set)
{
    (void)set;
    const mlp_case *m = state;
    cvf_mlp_forward_args args = forward_args(m);
    cvf_check(m->ctx, cvf_mlp_forward(m->ctx, &args), "cvf_mlp_forward");
}

/* fc1 as the forward runs it: gelu_output = gelu_tanh(fc1_output = hidden_state @ fc1_weight^T + fc1_bias). */
static void ours_fc1_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    cvf_vector bias = vec(m, m->fc1_bias, m->I);
    cvf_matrix aux = mat(m, m->ours.fc1_output, m->S, m->I);
    cvf_epilogue ep = {CVF_ACTIVATION_GELU_TANH, &bias, NULL, &aux, NULL};
    ours_gemm(m, mat(m, m->hidden_state, m->S, m->H), cvf_matrix_transpose(mat(m, m->fc1_weight, m->I, m->H)),
              mat(m, m->ours.gelu_output, m->S, m->I), &ep, "cvf_matmul (fc1)");
}

/* fc1's GEMM alone, no epilogue. */
static void ours_fc1_plain_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    ours_gemm(m, mat(m, m->hidden_state, m->S, m->H), cvf_matrix_transpose(mat(m, m->fc1_weight, m->I, m->H)),
              mat(m, m->ours.gelu_output, m->S, m->I), NULL, "cvf_matmul (fc1 plain)");
}

/* fc2: output = gelu_output @ fc2_weight^T + fc2_bias. */
static void ours_fc2_fn(void *state, int set)
{
    (void)set;
    mlp_case *m = state;
    cvf_vector bias = vec(m, m->fc2_bias, m->H);
    cvf_epilogue ep = {CVF_ACTIVATION_NONE, &bias, NULL, NULL, NULL};
    ours_gemm(m, mat(m, m->ours.gelu_output, m->S, m->I), cvf_matrix_transpose(mat(m, m->fc2_weight, m->H, m->I)),
              mat(m, m->ours.output, m->S, m->H), &ep, "cvf_matmul (fc2)");
}

/* What every cuBLASLt call of an MLP case shares. */
typedef struct lt_env {
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_size;
    cudaStream_t stream;
} lt_env;

/* One operand of a cuBLASLt call: a column-major (rows x cols) matrix with leading dimension ld,
 * used as is (CUBLAS_OP_N) or transposed (CUBLAS_OP_T). */
typedef struct lt_operand {
    const void *data;
    uint64_t rows, cols;
    int64_t ld;
    cublasOperation_t op;
} lt_operand;

/* A cuBLASLt call D = epilogue(op(A) op(B)) in cuBLASLt's column-major terms. */
typedef struct lt_spec {
    const char *name;
    cudaDataType_t type; /* of A, B, D (and, by default, of the bias and aux vectors) */
    lt_operand a, b;
    void *d;
    uint64_t d_rows, d_cols;
    int64_t d_ld;
    cublasLtEpilogue_t epilogue;
    void *bias;     /* bias (input) or bias gradient (output), or NULL */
    void *aux;      /* the GELU input: written by GELU_AUX*, read by DGELU*; or NULL */
    int64_t aux_ld; /* in elements */
} lt_spec;

/* A cuBLASLt call set up, its heuristic candidates and the one chosen. */
typedef struct lt_call {
    const lt_env *env;
    lt_spec spec;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulHeuristicResult_t results[HEURISTICS];
    int count, best, created;
    cublasStatus_t heuristic_status;
} lt_call;

/* Returns the name of an epilogue this bench uses. */
static const char *lt_epilogue_name(cublasLtEpilogue_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    default: return "other";
    }
}

/* Sets the descriptor's attributes from the spec: compute fp32, transposes, epilogue, bias, aux. */
static void lt_call_describe(lt_call *call)
{
    const lt_spec *s = &call->spec;
    LT_OK(cublasLtMatmulDescCreate(&call->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSA, &s->a.op, sizeof s->a.op));
    LT_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSB, &s->b.op, sizeof s->b.op));
    LT_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s->epilogue, sizeof s->epilogue));
    if (s->bias)
        LT_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s->bias, sizeof s->bias));
    if (s->aux) {
        LT_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &s->aux,
                                             sizeof s->aux));
        LT_OK(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &s->aux_ld,
                                             sizeof s->aux_ld));
    }
    LT_OK(cublasLtMatrixLayoutCreate(&call->la, s->type, s->a.rows, s->a.cols, s->a.ld));
    LT_OK(cublasLtMatrixLayoutCreate(&call->lb, s->type, s->b.rows, s->b.cols, s->b.ld));
    LT_OK(cublasLtMatrixLayoutCreate(&call->ld, s->type, s->d_rows, s->d_cols, s->d_ld));
}

/* Sets up a call and asks for its heuristic candidates. Returns how many there are (0: cuBLASLt
 * cannot run this epilogue for this layout; heuristic_status says why). */
static int lt_call_create(lt_call *call, const lt_env *env, const lt_spec *spec)
{
    memset(call, 0, sizeof *call);
    call->env = env;
    call->spec = *spec;
    call->created = 1;
    lt_call_describe(call);
    cublasLtMatmulPreference_t pref;
    LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &env->workspace_size,
                                               sizeof env->workspace_size));
    call->heuristic_status = cublasLtMatmulAlgoGetHeuristic(env->lt, call->desc, call->la, call->lb, call->ld, call->ld,
                                                            pref, HEURISTICS, call->results, &call->count);
    cublasLtMatmulPreferenceDestroy(pref);
    if (call->heuristic_status != CUBLAS_STATUS_SUCCESS)
        call->count = 0;
    return call->count;
}

/* Enqueues the call with candidate algo; returns cuBLASLt's status. */
static cublasStatus_t lt_call_run(const lt_call *call, int algo)
{
    const float one = 1.0f, zero = 0.0f;
    const lt_spec *s = &call->spec;
    return cublasLtMatmul(call->env->lt, call->desc, &one, s->a.data, call->la, s->b.data, call->lb, &zero, s->d,
                          call->ld, s->d, call->ld, &call->results[algo].algo, call->env->workspace,
                          call->env->workspace_size, call->env->stream);
}

/* Runs the chosen candidate (a run_fn; state is the lt_call). */
static void lt_call_fn(void *state, int set)
{
    (void)set;
    const lt_call *call = state;
    LT_OK(lt_call_run(call, call->best));
}

/* Chooses the fastest candidate that runs (one checked call, then a short timing of each).
 * Returns 0 when none runs. */
static int lt_call_pick(lt_call *call)
{
    float best = 1e30f;
    int found = 0;
    for (int h = 0; h < call->count; h++) {
        if (call->results[h].state != CUBLAS_STATUS_SUCCESS || lt_call_run(call, h) != CUBLAS_STATUS_SUCCESS)
            continue;
        CUDA_OK(cudaStreamSynchronize(call->env->stream));
        call->best = h;
        float t = time_median(lt_call_fn, call, 1, 3, 10, call->env->stream);
        if (t < best) {
            best = t;
            found = h + 1;
        }
    }
    call->best = found ? found - 1 : 0;
    if (found)
        printf("  cublaslt %-9s %-13s fastest of %d candidates: #%d, %.4f ms\n", call->spec.name,
               lt_epilogue_name(call->spec.epilogue), call->count, call->best, best);
    return found != 0;
}

/* Frees a call's descriptors (nothing when it was never created). */
static void lt_call_destroy(lt_call *call)
{
    if (!call->created)
        return;
    cublasLtMatrixLayoutDestroy(call->la);
    cublasLtMatrixLayoutDestroy(call->lb);
    cublasLtMatrixLayoutDestroy(call->ld);
    cublasLtMatmulDescDestroy(call->desc);
    call->created = 0;
}

/* Sets up a call and picks its algorithm. Returns 1 when it runs; otherwise prints why, frees it
 * and returns 0. */
static int lt_call_setup(lt_call *call, const lt_env *env, const lt_spec *spec)
{
    if (lt_call_create(call, env, spec) > 0 && lt_call_pick(call))
        return 1;
    printf("  cublaslt: %s with epilogue %s is not supported for this layout (heuristic status %d, %d "
           "candidates, none ran)\n",
           spec->name, lt_epilogue_name(spec->epilogue), (int)call->heuristic_status, call->count);
    lt_call_destroy(call);
    return 0;
}

/* The storage dtype as cuBLASLt names it. */
static cudaDataType_t lt_type(const mlp_case *m)
{
    return m->dtype == CVF_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* Row-major (rows x cols) data seen by cuBLASLt: column-major (cols x rows), ld cols; op says
 * whether cuBLASLt uses it transposed (then it is our row-major matrix itself). */
static lt_operand lt_row_major(const void *data, int64_t rows, int64_t cols, cublasOperation_t op)
{
    lt_operand o = {data, (uint64_t)cols, (uint64_t)rows, cols, op};
    return o;
}

/*
 * The backward's calls in cuBLASLt's column-major terms. A row-major (r x c) tensor is a
 * column-major (c x r) one, so a row-major product C = A B is computed as C^T = B^T A^T:
 *   K1   grad_fc1_output^T (I x S) = fc2_weight^T (I x H) grad_output^T (H x S); DGELU's aux is
 *        fc1_output^T (I x S, ld I); the bias gradient has D's rows (I): grad_fc1_bias.
 *   K2-1 grad_fc2_weight^T (I x H) = gelu_output^T (I x S) [grad_output^T]^T (S x H); the bias
 *        gradient of B sums B over k = S into D's columns (H): BGRADB gives grad_fc2_bias.
 *   K2-2 grad_fc1_weight^T (H x I) = hidden_state^T (H x S) [grad_fc1_output^T]^T (S x I).
 *   K2-3 grad_hidden_state^T (H x S) = fc1_weight^T (H x I) grad_fc1_output^T (I x S).
 */
static lt_spec lt_k1_spec(const mlp_case *m, cublasLtEpilogue_t epilogue)
{
    int64_t S = m->S, H = m->H, I = m->I;
    lt_spec s = {.name = "K1",
                 .type = lt_type(m),
                 .a = lt_row_major(m->fc2_weight, H, I, CUBLAS_OP_N),
                 .b = lt_row_major(m->grad_output, S, H, CUBLAS_OP_N),
                 .d = m->theirs.grad_fc1_output,
                 .d_rows = (uint64_t)I,
                 .d_cols = (uint64_t)S,
                 .d_ld = I,
                 .epilogue = epilogue,
                 .bias = epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD ? m->theirs.grad_fc1_bias : NULL,
                 .aux = epilogue == CUBLASLT_EPILOGUE_DEFAULT ? NULL : m->fc1_output,
                 .aux_ld = I};
    return s;
}

/* K2-1 (see lt_k1_spec); with BGRADB also grad_fc2_bias. */
static lt_spec lt_k21_spec(const mlp_case *m, cublasLtEpilogue_t epilogue)
{
    int64_t S = m->S, H = m->H, I = m->I;
    lt_spec s = {.name = "K2-1",
                 .type = lt_type(m),
                 .a = lt_row_major(m->gelu_output, S, I, CUBLAS_OP_N),
                 .b = lt_row_major(m->grad_output, S, H, CUBLAS_OP_T),
                 .d = m->theirs.grad_fc2_weight,
                 .d_rows = (uint64_t)I,
                 .d_cols = (uint64_t)H,
                 .d_ld = I,
                 .epilogue = epilogue,
                 .bias = epilogue == CUBLASLT_EPILOGUE_DEFAULT ? NULL : m->theirs.grad_fc2_bias};
    return s;
}

/* K2-2 (see lt_k1_spec). */
static lt_spec lt_k22_spec(const mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    lt_spec s = {.name = "K2-2",
                 .type = lt_type(m),
                 .a = lt_row_major(m->hidden_state, S, H, CUBLAS_OP_N),
                 .b = lt_row_major(m->theirs.grad_fc1_output, S, I, CUBLAS_OP_T),
                 .d = m->theirs.grad_fc1_weight,
                 .d_rows = (uint64_t)H,
                 .d_cols = (uint64_t)I,
                 .d_ld = H,
                 .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
    return s;
}

/* K2-3 (see lt_k1_spec). */
static lt_spec lt_k23_spec(const mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    lt_spec s = {.name = "K2-3",
                 .type = lt_type(m),
                 .a = lt_row_major(m->fc1_weight, I, H, CUBLAS_OP_N),
                 .b = lt_row_major(m->theirs.grad_fc1_output, S, I, CUBLAS_OP_N),
                 .d = m->theirs.grad_hidden_state,
                 .d_rows = (uint64_t)H,
                 .d_cols = (uint64_t)S,
                 .d_ld = H,
                 .epilogue = CUBLASLT_EPILOGUE_DEFAULT};
    return s;
}

/*
 * The forward's calls:
 *   fc1  gelu_output^T (I x S) = [fc1_weight^T]^T (I x H) hidden_state^T (H x S) + fc1_bias (D's
 *        rows, I), GELU_AUX_BIAS storing the pre-activation fc1_output^T (ld I) as aux.
 *   fc2  output^T (H x S) = [fc2_weight^T]^T (H x I) gelu_output^T (I x S) + fc2_bias (H), BIAS.
 */
static lt_spec lt_fc1_spec(const mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    lt_spec s = {.name = "fc1",
                 .type = lt_type(m),
                 .a = lt_row_major(m->fc1_weight, I, H, CUBLAS_OP_T),
                 .b = lt_row_major(m->hidden_state, S, H, CUBLAS_OP_N),
                 .d = m->theirs.gelu_output,
                 .d_rows = (uint64_t)I,
                 .d_cols = (uint64_t)S,
                 .d_ld = I,
                 .epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                 .bias = m->fc1_bias,
                 .aux = m->theirs.fc1_output,
                 .aux_ld = I};
    return s;
}

/* fc2 (see lt_fc1_spec); reads cuBLASLt's own gelu_output. */
static lt_spec lt_fc2_spec(const mlp_case *m)
{
    int64_t S = m->S, H = m->H, I = m->I;
    lt_spec s = {.name = "fc2",
                 .type = lt_type(m),
                 .a = lt_row_major(m->fc2_weight, H, I, CUBLAS_OP_T),
                 .b = lt_row_major(m->theirs.gelu_output, S, I, CUBLAS_OP_N),
                 .d = m->theirs.output,
                 .d_rows = (uint64_t)H,
                 .d_cols = (uint64_t)S,
                 .d_ld = H,
                 .epilogue = CUBLASLT_EPILOGUE_BIAS,
                 .bias = m->fc2_bias};
    return s;
}

/* cuBLASLt's backward: four calls, with our column sums where an epilogue is not supported. */
typedef struct lt_backward {
    mlp_case *m;
    lt_call k1, k1_plain, k21, k22, k23;
    int k1_sums;  /* 1: K1 runs DGELU without BGRAD; grad_fc1_bias by cvf_column_sum */
    int k21_sums; /* 1: K2-1 runs plain; grad_fc2_bias by cvf_column_sum */
    int ok;       /* 0: no cuBLASLt baseline (K1 cannot run) */
} lt_backward;

/* Sets up cuBLASLt's backward, falling back (and saying so) where an epilogue is not supported. */
static void lt_backward_create(lt_backward *b, mlp_case *m, const lt_env *env)
{
    memset(b, 0, sizeof *b);
    b->m = m;
    lt_spec spec = lt_k1_spec(m, CUBLASLT_EPILOGUE_DGELU_BGRAD);
    if (!lt_call_setup(&b->k1, env, &spec)) {
        spec = lt_k1_spec(m, CUBLASLT_EPILOGUE_DGELU);
        if (!lt_call_setup(&b->k1, env, &spec)) {
            printf("  cublaslt: no GELU backward epilogue for K1: no cuBLASLt baseline for this case\n");
            return;
        }
        b->k1_sums = 1;
        printf("  cublaslt: FALLBACK K1 = DGELU + our cvf_column_sum for grad_fc1_bias\n");
    }
    spec = lt_k1_spec(m, CUBLASLT_EPILOGUE_DEFAULT);
    spec.name = "K1 plain";
    if (!lt_call_setup(&b->k1_plain, env, &spec))
        return;
    spec = lt_k21_spec(m, CUBLASLT_EPILOGUE_BGRADB);
    if (!lt_call_setup(&b->k21, env, &spec)) {
        spec = lt_k21_spec(m, CUBLASLT_EPILOGUE_DEFAULT);
        if (!lt_call_setup(&b->k21, env, &spec))
            return;
        b->k21_sums = 1;
        printf("  cublaslt: FALLBACK K2-1 = plain GEMM + our cvf_column_sum for grad_fc2_bias\n");
    }
    spec = lt_k22_spec(m);
    if (!lt_call_setup(&b->k22, env, &spec))
        return;
    spec = lt_k23_spec(m);
    b->ok = lt_call_setup(&b->k23, env, &spec);
}

/* Frees cuBLASLt's backward calls. */
static void lt_backward_destroy(lt_backward *b)
{
    lt_call *calls[] = {&b->k1, &b->k1_plain, &b->k21, &b->k22, &b->k23};
    for (int i = 0; i < 5; i++)
        lt_call_destroy(calls[i]);
}

/* cuBLASLt's K1 (plus our grad_fc1_bias column sum in the fallback). */
static void lt_k1_fn(void *state, int set)
{
    lt_backward *b = state;
    lt_call_fn(&b->k1, set);
    if (b->k1_sums) {
        mlp_case *m = b->m;
        cvf_matrix x = mat(m, m->theirs.grad_fc1_output, m->S, m->I);
        cvf_vector out = vec(m, m->theirs.grad_fc1_bias, m->I);
        cvf_check(m->ctx, cvf_column_sum(m->ctx, &x, &out), "cvf_column_sum (cuBLASLt K1 fallback)");
    }
}

/* cuBLASLt's K2-1 (plus our grad_fc2_bias column sum in the fallback). */
static void lt_k21_fn(void *state, int set)
{
    lt_backward *b = state;
    lt_call_fn(&b->k21, set);
    if (b->k21_sums) {
        mlp_case *m = b->m;
        cvf_matrix x = mat(m, m->grad_output, m->S, m->H);
        cvf_vector out = vec(m, m->theirs.grad_fc2_bias, m->H);
        cvf_check(m->ctx, cvf_column_sum(m->ctx, &x, &out), "cvf_column_sum (cuBLASLt K2-1 fallback)");
    }
}

/* cuBLASLt's whole backward: the four calls in order on the stream. */
static void lt_backward_fn(void *state, int set)
{
    lt_backward *b = state;
    lt_k1_fn(b, set);
    lt_k21_fn(b, set);
    lt_call_fn(&b->k22, set);
    lt_call_fn(&b->k23, set);
}

/* cuBLASLt's forward: fc1 GELU_AUX_BIAS, fc2 BIAS. */
typedef struct lt_forward {
    lt_call fc1, fc1_plain, fc2;
    int ok;
} lt_forward;

/* Sets up cuBLASLt's forward; ok stays 0 when an epilogue is not supported. */
static void lt_forward_create(lt_forward *f, const mlp_case *m, const lt_env *env)
{
    memset(f, 0, sizeof *f);
    lt_spec spec = lt_fc1_spec(m);
    if (!lt_call_setup(&f->fc1, env, &spec))
        return;
    spec.name = "fc1 plain";
    spec.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    spec.bias = NULL;
    spec.aux = NULL;
    if (!lt_call_setup(&f->fc1_plain, env, &spec))
        return;
    spec = lt_fc2_spec(m);
    f->ok = lt_call_setup(&f->fc2, env, &spec);
    if (!f->ok)
        printf("  cublaslt: no cuBLASLt baseline for this case\n");
}

/* Frees cuBLASLt's forward calls. */
static void lt_forward_destroy(lt_forward *f)
{
    lt_call_destroy(&f->fc1);
    lt_call_destroy(&f->fc1_plain);
    lt_call_destroy(&f->fc2);
}

/* cuBLASLt's whole forward: the two calls in order. */
static void lt_forward_fn(void *state, int set)
{
    lt_forward *f = state;
    lt_call_fn(&f->fc1, set);
    lt_call_fn(&f->fc2, set);
}

/* Copies about SAMPLES evenly spaced elements of a device array of count 16-bit values into out
 * (as floats); returns how many. */
static int sample16(const void *dev, int64_t count, cvf_dtype dtype, float *out)
{
    static uint16_t raw[SAMPLES];
    int64_t step = count / SAMPLES + 1;
    int64_t n = (count + step - 1) / step; /* <= SAMPLES */
    if (n > 0)
        CUDA_OK(cudaMemcpy2D(raw, 2, dev, (size_t)step * 2, 2, (size_t)n, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n; i++)
        out[i] = to_f32(raw[i], dtype);
    return (int)n;
}

/* Relative RMS difference of x against y: sqrt(sum (x - y)^2 / sum y^2) (NaN stays NaN). */
static double rel_rms(const float *x, const float *y, int n)
{
    double diff = 0, norm = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        diff += d * d;
        norm += (double)y[i] * (double)y[i];
    }
    return sqrt(diff / (norm > 0 ? norm : 1));
}

enum { MAX_OUTPUTS = 5 };

/* The outputs an MLP case compares: names, element counts and each side's buffers. */
typedef struct output_set {
    int count;
    const char *name[MAX_OUTPUTS];
    int64_t elements[MAX_OUTPUTS];
    void *ours[MAX_OUTPUTS], *theirs[MAX_OUTPUTS];
    float *samples; /* ours, MAX_OUTPUTS x SAMPLES, filled by outputs_sample */
} output_set;

/* Adds one output to the set. */
static void outputs_add(output_set *o, const char *name, int64_t elements, void *ours, void *theirs)
{
    o->name[o->count] = name;
    o->elements[o->count] = elements;
    o->ours[o->count] = ours;
    o->theirs[o->count] = theirs;
    o->count++;
}

/* The five outputs of the backward. */
static void backward_outputs(const mlp_case *m, output_set *o)
{
    int64_t S = m->S, H = m->H, I = m->I;
    memset(o, 0, sizeof *o);
    outputs_add(o, "grad_hidden_state", S * H, m->ours.grad_hidden_state, m->theirs.grad_hidden_state);
    outputs_add(o, "grad_fc1_weight", I * H, m->ours.grad_fc1_weight, m->theirs.grad_fc1_weight);
    outputs_add(o, "grad_fc1_bias", I, m->ours.grad_fc1_bias, m->theirs.grad_fc1_bias);
    outputs_add(o, "grad_fc2_weight", H * I, m->ours.grad_fc2_weight, m->theirs.grad_fc2_weight);
    outputs_add(o, "grad_fc2_bias", H, m->ours.grad_fc2_bias, m->theirs.grad_fc2_bias);
}

/* The three outputs of the forward. */
static void forward_outputs(const mlp_case *m, output_set *o)
{
    int64_t S = m->S, H = m->H, I = m->I;
    memset(o, 0, sizeof *o);
    outputs_add(o, "fc1_output", S * I, m->ours.fc1_output, m->theirs.fc1_output);
    outputs_add(o, "gelu_output", S * I, m->ours.gelu_output, m->theirs.gelu_output);
    outputs_add(o, "output", S * H, m->ours.output, m->theirs.output);
}

/* Keeps samples of our outputs as they are now (after a synchronize). */
static void outputs_sample(output_set *o, cvf_dtype dtype)
{
    if (!o->samples)
        o->samples = malloc(sizeof(float) * MAX_OUTPUTS * SAMPLES);
    for (int i = 0; i < o->count; i++)
        sample16(o->ours[i], o->elements[i], dtype, o->samples + i * SAMPLES);
}

/* Differences of the kept samples against the same elements of one side's outputs now (ours:
 * theirs = 0; cuBLASLt: 1), into diff[]; returns the largest (NaN if any is NaN). */
static double outputs_compare(const output_set *o, cvf_dtype dtype, int theirs, double *diff)
{
    static float now[SAMPLES];
    double most = 0;
    for (int i = 0; i < o->count; i++) {
        int n = sample16(theirs ? o->theirs[i] : o->ours[i], o->elements[i], dtype, now);
        diff[i] = rel_rms(o->samples + i * SAMPLES, now, n);
        most = isnan(diff[i]) || isnan(most) ? NAN : diff[i] > most ? diff[i] : most;
    }
    return most;
}

/* One row of an MLP case's table: a kernel run by each side, its medians and its FLOPs. */
typedef struct kernel_timing {
    const char *name;
    run_fn ours_fn;
    void *ours_state;
    run_fn theirs_fn; /* NULL: cuBLASLt has no such call (or no baseline) */
    void *theirs_state;
    double flops; /* 0: not a GEMM */
    int plain;    /* 1: a GEMM without its epilogue, for the epilogue's cost; not in the sums */
    char note[160];
    float ours_ms, theirs_ms; /* medians; -1: not measured */
} kernel_timing;

/* Times each row's kernels on both sides. */
static void time_kernels(kernel_timing *rows, int count, int warmup, int repeat, cudaStream_t stream)
{
    for (int i = 0; i < count; i++) {
        rows[i].ours_ms = time_median(rows[i].ours_fn, rows[i].ours_state, 1, warmup, repeat, stream);
        rows[i].theirs_ms =
            rows[i].theirs_fn ? time_median(rows[i].theirs_fn, rows[i].theirs_state, 1, warmup, repeat, stream) : -1;
    }
}

/* Sum of one side's medians over the rows that are not plain; cuBLASLt's rows without a call of
 * their own (K3: in K2-1) count 0. -1 when nothing was measured. */
static float kernels_sum(const kernel_timing *rows, int count, int theirs)
{
    float sum = 0;
    int measured = 0;
    for (int i = 0; i < count; i++) {
        float ms = theirs ? rows[i].theirs_ms : rows[i].ours_ms;
        if (rows[i].plain || ms < 0)
            continue;
        sum += ms;
        measured++;
    }
    return measured ? sum : -1;
}

/* Formats a median ("-" when not measured). */
static const char *fmt_ms(char *buf, size_t size, float ms)
{
    if (ms < 0)
        snprintf(buf, size, "%8s", "-");
    else
        snprintf(buf, size, "%8.4f", ms);
    return buf;
}

/* Formats TFLOP/s of flops in ms ("-" when not a GEMM or not measured). */
static const char *fmt_tf(char *buf, size_t size, double flops, float ms)
{
    if (ms <= 0 || flops <= 0)
        snprintf(buf, size, "%6s", "-");
    else
        snprintf(buf, size, "%6.1f", flops / (ms * 1e-3) / 1e12);
    return buf;
}

/* Prints one table row: the name, each side's ms and TF/s, and the note. */
static void print_row(const char *name, float ours, float theirs, double flops, const char *note)
{
    char a[16], b[16], c[16], d[16];
    printf("  %-12s ours %s ms %s TF/s | cublaslt %s ms %s TF/s | %s\n", name, fmt_ms(a, sizeof a, ours),
           fmt_tf(b, sizeof b, flops, ours), fmt_ms(c, sizeof c, theirs), fmt_tf(d, sizeof d, flops, theirs), note);
}

/* Everything one MLP case reports. */
typedef struct mlp_report {
    const bench_case *c;
    double flops;             /* of the whole: 8 S H I (backward), 4 S H I (forward) */
    float ours_ms, theirs_ms; /* whole; theirs_ms < 0: no cuBLASLt baseline */
    kernel_timing *rows;      /* rows[0]: the fused kernel (K1, fc1); rows[1]: its GEMM alone */
    int row_count;
    const char *plain_key;      /* JSON key of rows[1]'s ms ("k1_plain_ms") */
    const char *overhead_key;   /* JSON key of rows[0] / rows[1] - 1, ours ("k1_epilogue_overhead") */
    const char *epilogues_json; /* JSON object: cuBLASLt's epilogue per call */
    const output_set *outputs;
    double diffs[MAX_OUTPUTS]; /* ours against cuBLASLt; -1: not compared */
    double max_diff;           /* -1: not compared */
    double perkernel_max_diff; /* ours per kernel against ours whole */
    const char *workspace_dtype;
    int warmup, repeat;
} mlp_report;

/* Prints the case's table: a row per kernel, the sums, the whole and the differences. */
static void print_mlp_table(const mlp_report *r)
{
    for (int i = 0; i < r->row_count; i++)
        print_row(r->rows[i].name, r->rows[i].ours_ms, r->rows[i].theirs_ms, r->rows[i].flops, r->rows[i].note);
    print_row("sum kernels", kernels_sum(r->rows, r->row_count, 0), kernels_sum(r->rows, r->row_count, 1), r->flops,
              "serial, one stream");
    char note[64] = "no cuBLASLt baseline";
    if (r->theirs_ms > 0)
        snprintf(note, sizeof note, "ours / cublaslt %.3f", r->ours_ms / r->theirs_ms);
    print_row("whole", r->ours_ms, r->theirs_ms, r->flops, note);
    int compared = !(r->max_diff < 0); /* NaN: compared, and an output holds NaN or Inf */
    printf("  diff vs cublaslt (relative RMS at sampled elements):");
    for (int i = 0; i < r->outputs->count && compared; i++)
        printf(" %s %.2g", r->outputs->name[i], r->diffs[i]);
    if (compared)
        printf("; max %.2g", r->max_diff);
    else
        printf(" none (no cuBLASLt baseline)");
    printf("; ours per kernel vs ours whole: max %.2g\n", r->perkernel_max_diff);
}

/* Prints the case's one-line summary (the same columns as the matmul cases). */
static void print_mlp_line(const mlp_report *r)
{
    const bench_case *c = r->c;
    char a[16], b[16], ta[16], tb[16];
    printf("%-12s %-5s %6lld %6lld %6lld  ours %s ms %s TF/s  cublaslt %s ms %s TF/s  ratio %.3f  diff %.2g\n", c->op,
           cvf_dtype_name(c->dtype), (long long)c->m, (long long)c->n, (long long)c->k, fmt_ms(a, sizeof a, r->ours_ms),
           fmt_tf(ta, sizeof ta, r->flops, r->ours_ms), fmt_ms(b, sizeof b, r->theirs_ms),
           fmt_tf(tb, sizeof tb, r->flops, r->theirs_ms), r->theirs_ms > 0 ? r->ours_ms / r->theirs_ms : NAN,
           r->max_diff < 0 ? NAN : r->max_diff);
    fflush(stdout);
}

/* Writes ,"key":value (no comma when first); null when value is not finite. */
static void json_signed(FILE *f, int first, const char *key, double value)
{
    fprintf(f, "%s\"%s\":", first ? "" : ",", key);
    if (!isfinite(value))
        fprintf(f, "null");
    else
        fprintf(f, "%.6g", value);
}

/* Writes ,"key":value (no comma when first); null when value is negative (unknown) or not finite. */
static void json_num(FILE *f, int first, const char *key, double value)
{
    json_signed(f, first, key, value < 0 ? NAN : value);
}

/* Writes "side":{"K1":ms,...,"sum":ms} for the rows that are not plain. */
static void json_kernels(FILE *f, const mlp_report *r, int theirs)
{
    fprintf(f, "\"%s\":{", theirs ? "cublaslt" : "ours");
    int first = 1;
    for (int i = 0; i < r->row_count; i++) {
        if (r->rows[i].plain)
            continue;
        json_num(f, first, r->rows[i].name, theirs ? r->rows[i].theirs_ms : r->rows[i].ours_ms);
        first = 0;
    }
    json_num(f, first, "sum", kernels_sum(r->rows, r->row_count, theirs));
    fprintf(f, "}");
}

/* Appends the case's JSON object (one line). */
static void write_mlp_json(const mlp_report *r, FILE *f)
{
    const bench_case *c = r->c;
    int baseline = r->theirs_ms > 0;
    fprintf(f, "{\"op\":\"%s\",\"dtype\":\"%s\",\"S\":%lld,\"H\":%lld,\"I\":%lld,\"device\":\"cuda\"", c->op,
            cvf_dtype_name(c->dtype), (long long)c->m, (long long)c->n, (long long)c->k);
    json_num(f, 0, "ms", r->ours_ms);
    fprintf(f, ",\"baseline\":\"%s\"", baseline ? "cublaslt" : "none");
    json_num(f, 0, "baseline_ms", r->theirs_ms);
    json_num(f, 0, "ratio", baseline ? r->ours_ms / r->theirs_ms : -1);
    json_num(f, 0, "tflops", r->flops / (r->ours_ms * 1e-3) / 1e12);
    json_num(f, 0, "baseline_tflops", baseline ? r->flops / (r->theirs_ms * 1e-3) / 1e12 : -1);
    fprintf(f, ",\"kernels\":{");
    json_kernels(f, r, 0);
    fprintf(f, ",");
    json_kernels(f, r, 1);
    fprintf(f, "}");
    char key[64];
    json_num(f, 0, r->plain_key, r->rows[1].ours_ms);
    snprintf(key, sizeof key, "cublaslt_%s", r->plain_key);
    json_num(f, 0, key, r->rows[1].theirs_ms);
    json_signed(f, 0, r->overhead_key, r->rows[0].ours_ms / r->rows[1].ours_ms - 1);
    fprintf(f, ",\"cublaslt_epilogues\":%s", r->epilogues_json);
    json_num(f, 0, "max_rel_diff", r->max_diff);
    fprintf(f, ",\"diffs\":{");
    for (int i = 0; i < r->outputs->count; i++)
        json_num(f, i == 0, r->outputs->name[i], r->diffs[i]);
    fprintf(f, "}");
    json_num(f, 0, "perkernel_max_rel_diff", r->perkernel_max_diff);
    fprintf(f, ",\"nan_in_outputs\":%s", isnan(r->max_diff) || isnan(r->perkernel_max_diff) ? "true" : "false");
    fprintf(f, ",\"workspace_dtype\":\"%s\",\"repeat\":%d,\"warmup\":%d}\n", r->workspace_dtype, r->repeat, r->warmup);
    fflush(f);
}

/* The library's plan for the case's forward (forward 1) or backward (0) as it stands now. */
static void mlp_plan_of(const mlp_case *m, int forward, cvf_mlp_plan *plan)
{
    cvf_mlp_shape shape = {m->S, m->H, m->I, m->dtype, CVF_GELU_TANH};
    cvf_check(m->ctx,
              forward ? cvf_mlp_forward_plan(m->ctx, &shape, plan) : cvf_mlp_backward_plan(m->ctx, &shape, plan),
              forward ? "cvf_mlp_forward_plan" : "cvf_mlp_backward_plan");
}

/* Prints the library's plan for the case's backward before its first call (its schedule, where
 * the backend gives one; the engines the heuristic would take, since none is measured yet: see
 * print_choices) and returns the name of the dtype it keeps grad_fc1_output in. */
static const char *print_plan(const mlp_case *m)
{
    cvf_mlp_plan plan;
    mlp_plan_of(m, 0, &plan);
    for (int i = 0; i < plan.kernel_count; i++) {
        const cvf_kernel_info *k = &plan.kernels[i];
        if (k->engine && k->engine[0])
            printf("  plan %-5s %s, tile %dx%dx%d, splits %d, units %lld, stream %d%s%s\n", k->name, k->engine,
                   k->tile_m, k->tile_n, k->tile_k, k->splits, (long long)k->units, k->stream,
                   k->choice && k->choice[0] ? "; " : "", k->choice ? k->choice : "");
    }
    if (plan.workspace_dtype != m->dtype)
        printf("  note: the library keeps grad_fc1_output in %s; the per-kernel rows keep it in %s\n",
               cvf_dtype_name(plan.workspace_dtype), cvf_dtype_name(m->dtype));
    return cvf_dtype_name(plan.workspace_dtype);
}

/* Prints the engine each GEMM of the case's plan runs on after its first calls, and what the
 * engine choice measured for it (the plan printed before the calls shows the heuristic's). */
static void print_choices(const mlp_case *m, int forward)
{
    cvf_mlp_plan plan;
    mlp_plan_of(m, forward, &plan);
    for (int i = 0; i < plan.kernel_count; i++) {
        const cvf_kernel_info *k = &plan.kernels[i];
        if (k->candidate_count < 1)
            continue;
        printf("  chose %-5s %.40s (%s):", k->name, k->engine ? k->engine : "", k->choice ? k->choice : "");
        for (int j = 0; j < k->candidate_count; j++)
            printf(" %s %.4f ms%s", k->candidates[j].engine, (double)k->candidates[j].ms,
                   j + 1 < k->candidate_count ? "," : "\n");
    }
}

/* Runs ours whole and cuBLASLt's whole once and compares their outputs; then runs ours per kernel
 * and compares it with ours whole. theirs NULL: no baseline (diffs stay -1). */
static void compare_outputs(mlp_report *r, output_set *outs, mlp_case *m, run_fn ours, run_fn theirs,
                            void *theirs_state, run_fn ours_kernels)
{
    ours(m, 0);
    if (theirs)
        theirs(theirs_state, 0);
    CUDA_OK(cudaStreamSynchronize(m->stream));
    outputs_sample(outs, m->dtype);
    for (int i = 0; i < MAX_OUTPUTS; i++)
        r->diffs[i] = -1;
    r->max_diff = theirs ? outputs_compare(outs, m->dtype, 1, r->diffs) : -1;
    ours_kernels(m, 0);
    CUDA_OK(cudaStreamSynchronize(m->stream));
    double per_kernel[MAX_OUTPUTS];
    r->perkernel_max_diff = outputs_compare(outs, m->dtype, 0, per_kernel);
}

/* Times both wholes in turns, cuBLASLt, ours, cuBLASLt, ours, and keeps each side's smaller
 * median: the same treatment for both (one median of ours against the better of two of theirs
 * read ~1% against ours, half their scatter: docs/PERF.md, fourteenth session). */
static void time_wholes(mlp_report *r, mlp_case *m, run_fn ours, run_fn theirs, void *theirs_state)
{
    r->theirs_ms = theirs ? time_median(theirs, theirs_state, 1, r->warmup, r->repeat, m->stream) : -1;
    r->ours_ms = time_median(ours, m, 1, r->warmup, r->repeat, m->stream);
    if (theirs)
        r->theirs_ms = fminf(r->theirs_ms, time_median(theirs, theirs_state, 1, r->warmup, r->repeat, m->stream));
    r->ours_ms = fminf(r->ours_ms, time_median(ours, m, 1, r->warmup, r->repeat, m->stream));
}

/* The note of a plain row: what the fused kernel's epilogue costs on each side. */
static void plain_note(kernel_timing *rows)
{
    float ours = rows[0].ours_ms / rows[1].ours_ms - 1;
    int n = snprintf(rows[1].note, sizeof rows[1].note, "GEMM alone: epilogue cost ours %+.1f%% (target <= +5%%: %s)",
                     100 * ours, ours <= 0.05f ? "met" : "MISSED");
    if (rows[0].theirs_ms > 0 && rows[1].theirs_ms > 0)
        snprintf(rows[1].note + n, sizeof rows[1].note - (size_t)n, ", cublaslt %+.1f%%",
                 100 * (rows[0].theirs_ms / rows[1].theirs_ms - 1));
}

/* Reports a measured case: the table, the one-line summary, the JSON object. */
static void report_mlp(mlp_report *r, FILE *json)
{
    plain_note(r->rows);
    print_mlp_table(r);
    print_mlp_line(r);
    if (json)
        write_mlp_json(r, json);
}

/* Measures one mlp-backward case (see the top of this file) and reports it. */
static void run_mlp_backward(const bench_case *c, cvf_context *ctx, const lt_env *env, int warmup, int repeat,
                             FILE *json)
{
    mlp_case m;
    mlp_begin(&m, c, ctx, env->stream);
    mlp_backward_alloc(&m);
    double gemm = 2.0 * (double)m.S * (double)m.H * (double)m.I;
    printf("%s %s S=%lld H=%lld I=%lld (4 GEMMs, 8*S*H*I = %.1f GFLOP)\n", c->op, cvf_dtype_name(c->dtype),
           (long long)m.S, (long long)m.H, (long long)m.I, 4 * gemm * 1e-9);
    mlp_report r = {.c = c,
                    .flops = 4 * gemm,
                    .plain_key = "k1_plain_ms",
                    .overhead_key = "k1_epilogue_overhead",
                    .warmup = warmup,
                    .repeat = repeat};
    r.workspace_dtype = print_plan(&m);
    lt_backward lb;
    lt_backward_create(&lb, &m, env);
    output_set outs;
    backward_outputs(&m, &outs);
    r.outputs = &outs;
    compare_outputs(&r, &outs, &m, ours_backward_fn, lb.ok ? lt_backward_fn : NULL, &lb, ours_kernels_fn);
    time_wholes(&r, &m, ours_backward_fn, lb.ok ? lt_backward_fn : NULL, &lb);
    print_choices(&m, 0);
    kernel_timing rows[] = {
        {"K1", ours_k1_fn, &m, lt_k1_fn, &lb, gemm, 0, "", 0, 0},
        {"K1 plain", ours_k1_plain_fn, &m, lt_call_fn, &lb.k1_plain, gemm, 1, "", 0, 0},
        {"K2-1", ours_k21_fn, &m, lt_k21_fn, &lb, gemm, 0, "", 0, 0},
        {"K2-2", ours_k22_fn, &m, lt_call_fn, &lb.k22, gemm, 0, "", 0, 0},
        {"K2-3", ours_k23_fn, &m, lt_call_fn, &lb.k23, gemm, 0, "", 0, 0},
        {"K3", ours_k3_fn, &m, NULL, NULL, 0, 0, "column sum; cublaslt: in K2-1", 0, 0},
    };
    int count = (int)(sizeof rows / sizeof rows[0]);
    for (int i = 0; i < count && !lb.ok; i++)
        rows[i].theirs_fn = NULL;
    snprintf(rows[0].note, sizeof rows[0].note, "fused DGELU + grad_fc1_bias; cublaslt %s",
             !lb.ok       ? "-"
             : lb.k1_sums ? "DGELU + cvf_column_sum (FALLBACK)"
                          : "DGELU_BGRAD");
    snprintf(rows[2].note, sizeof rows[2].note, "cublaslt %s",
             !lb.ok        ? "-"
             : lb.k21_sums ? "plain + cvf_column_sum (FALLBACK)"
                           : "BGRADB (also grad_fc2_bias)");
    time_kernels(rows, count, warmup, repeat, m.stream);
    char epilogues[128] = "null";
    if (lb.ok)
        snprintf(epilogues, sizeof epilogues, "{\"K1\":\"%s\",\"K2-1\":\"%s\"}",
                 lb.k1_sums ? "DGELU+column_sum" : "DGELU_BGRAD", lb.k21_sums ? "DEFAULT+column_sum" : "BGRADB");
    r.rows = rows;
    r.row_count = count;
    r.epilogues_json = epilogues;
    report_mlp(&r, json);
    free(outs.samples);
    lt_backward_destroy(&lb);
    mlp_end(&m);
}

/* Ours forward per kernel: fc1, then fc2. */
static void ours_forward_kernels_fn(void *state, int set)
{
    ours_fc1_fn(state, set);
    ours_fc2_fn(state, set);
}

/* Measures one mlp-forward case (see the top of this file) and reports it. */
static void run_mlp_forward(const bench_case *c, cvf_context *ctx, const lt_env *env, int warmup, int repeat,
                            FILE *json)
{
    mlp_case m;
    mlp_begin(&m, c, ctx, env->stream);
    mlp_forward_alloc(&m);
    double gemm = 2.0 * (double)m.S * (double)m.H * (double)m.I;
    printf("%s %s S=%lld H=%lld I=%lld (2 GEMMs, 4*S*H*I = %.1f GFLOP)\n", c->op, cvf_dtype_name(c->dtype),
           (long long)m.S, (long long)m.H, (long long)m.I, 2 * gemm * 1e-9);
    mlp_report r = {.c = c,
                    .flops = 2 * gemm,
                    .plain_key = "fc1_plain_ms",
                    .overhead_key = "fc1_epilogue_overhead",
                    .workspace_dtype = cvf_dtype_name(c->dtype),
                    .warmup = warmup,
                    .repeat = repeat};
    lt_forward lf;
    lt_forward_create(&lf, &m, env);
    output_set outs;
    forward_outputs(&m, &outs);
    r.outputs = &outs;
    compare_outputs(&r, &outs, &m, ours_forward_fn, lf.ok ? lt_forward_fn : NULL, &lf, ours_forward_kernels_fn);
    time_wholes(&r, &m, ours_forward_fn, lf.ok ? lt_forward_fn : NULL, &lf);
    print_choices(&m, 1);
    kernel_timing rows[] = {
        {"fc1", ours_fc1_fn, &m, lt_call_fn, &lf.fc1, gemm, 0, "bias + GELU, fc1_output stored; cublaslt GELU_AUX_BIAS",
         0, 0},
        {"fc1 plain", ours_fc1_plain_fn, &m, lt_call_fn, &lf.fc1_plain, gemm, 1, "", 0, 0},
        {"fc2", ours_fc2_fn, &m, lt_call_fn, &lf.fc2, gemm, 0, "bias; cublaslt BIAS", 0, 0},
    };
    int count = (int)(sizeof rows / sizeof rows[0]);
    for (int i = 0; i < count && !lf.ok; i++)
        rows[i].theirs_fn = NULL;
    time_kernels(rows, count, warmup, repeat, m.stream);
    r.rows = rows;
    r.row_count = count;
    r.epilogues_json = lf.ok ? "{\"fc1\":\"GELU_AUX_BIAS\",\"fc2\":\"BIAS\"}" : "null";
    report_mlp(&r, json);
    free(outs.samples);
    lt_forward_destroy(&lf);
    mlp_end(&m);
}

enum { MAX_CASES = 32 };

/* The suites: matmul (issue 4's MatMul+ReLU targets and a plain bf16 GEMM) and mlp (issue 5's
 * vision-MLP shapes of docs/PERF.md; m, n, k are S, H, I). */
static const bench_case SUITE_MATMUL[] = {
    {"matmul-relu", CVF_F16, 8192, 8192, 8192}, {"matmul-relu", CVF_F16, 4096, 4096, 4096},
    {"matmul-relu", CVF_F16, 8192, 8192, 256},  {"matmul-relu", CVF_F16, 16384, 8192, 64},
    {"gemm", CVF_BF16, 8192, 8192, 8192},
};
static const bench_case SUITE_MLP[] = {
    {"mlp-backward", CVF_BF16, 12608, 768, 3072},  {"mlp-backward", CVF_BF16, 16448, 1024, 4096},
    {"mlp-backward", CVF_BF16, 16448, 1280, 5120}, {"mlp-backward", CVF_F16, 12608, 768, 3072},
    {"mlp-backward", CVF_F16, 16448, 1024, 4096},  {"mlp-backward", CVF_F16, 16448, 1280, 5120},
    {"mlp-forward", CVF_BF16, 12608, 768, 3072},   {"mlp-forward", CVF_BF16, 16448, 1024, 4096},
    {"mlp-forward", CVF_BF16, 16448, 1280, 5120},
};

/* Prints the usage line; returns 2 (a usage error). */
static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--json FILE] [--repeat N] [--warmup N] [--suite all|matmul|mlp] [CASE ...]\n"
            "  CASE: matmul-relu|gemm,f16|bf16,M,N,K or mlp-backward|mlp-forward,f16|bf16,S,H,I\n",
            argv0);
    return 2;
}

/* Parses one CASE (op,dtype,d0,d1,d2) into c, its op name kept in op (32 bytes). Returns 0 when
 * the text is not a case this bench runs. */
static int parse_case(const char *text, bench_case *c, char *op)
{
    char dtype[8];
    long long d0, d1, d2;
    if (sscanf(text, "%31[^,],%7[^,],%lld,%lld,%lld", op, dtype, &d0, &d1, &d2) != 5 || d0 <= 0 || d1 <= 0 || d2 <= 0)
        return 0;
    if (strcmp(dtype, "f16") != 0 && strcmp(dtype, "bf16") != 0)
        return 0;
    if (strcmp(op, "matmul-relu") != 0 && strcmp(op, "gemm") != 0 && strcmp(op, "mlp-backward") != 0 &&
        strcmp(op, "mlp-forward") != 0)
        return 0;
    c->op = op;
    c->dtype = strcmp(dtype, "f16") == 0 ? CVF_F16 : CVF_BF16;
    c->m = d0;
    c->n = d1;
    c->k = d2;
    return 1;
}

/* Fills cases with the named suite (all, matmul or mlp); returns how many, -1 for an unknown name. */
static int suite_cases(const char *name, bench_case *cases)
{
    int all = strcmp(name, "all") == 0, count = 0;
    if (!all && strcmp(name, "matmul") != 0 && strcmp(name, "mlp") != 0)
        return -1;
    if (all || strcmp(name, "matmul") == 0) {
        memcpy(cases, SUITE_MATMUL, sizeof SUITE_MATMUL);
        count = (int)(sizeof SUITE_MATMUL / sizeof SUITE_MATMUL[0]);
    }
    if (all || strcmp(name, "mlp") == 0) {
        memcpy(cases + count, SUITE_MLP, sizeof SUITE_MLP);
        count += (int)(sizeof SUITE_MLP / sizeof SUITE_MLP[0]);
    }
    return count;
}

/* Runs one case of any kind. */
static void run_any_case(const bench_case *c, cvf_context *ctx, const lt_env *env, int warmup, int repeat, size_t l2,
                         FILE *json)
{
    if (strcmp(c->op, "mlp-backward") == 0)
        run_mlp_backward(c, ctx, env, warmup, repeat, json);
    else if (strcmp(c->op, "mlp-forward") == 0)
        run_mlp_forward(c, ctx, env, warmup, repeat, json);
    else
        run_case(c, ctx, env->lt, env->stream, warmup, repeat, l2, json);
}

/* The bench's command line (see the top of this file); also `cvfuse bench --device cuda`. */
int cvf_cuda_bench_main(int argc, char **argv);
int cvf_cuda_bench_main(int argc, char **argv)
{
    const char *json_path = NULL, *suite = "all";
    int repeat = 50, warmup = 10, count = 0;
    bench_case cases[MAX_CASES];
    static char op_names[MAX_CASES][32];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_path = argv[++i];
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--suite") == 0 && i + 1 < argc)
            suite = argv[++i];
        else if (count == MAX_CASES || !parse_case(argv[i], &cases[count], op_names[count]))
            return usage(argv[0]);
        else
            count++;
    }
    if (repeat < 1 || warmup < 0)
        return usage(argv[0]);
    if (count == 0 && (count = suite_cases(suite, cases)) < 0)
        return usage(argv[0]);
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cvf_context_options options = {CVF_DEVICE_CUDA, 0, 0, (void *)stream};
    cvf_context *ctx = NULL;
    cvf_status status = cvf_context_create(&options, &ctx);
    if (status != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "cvf_context_create(cuda): %s: %s\n", cvf_status_string(status), cvf_context_create_error());
        return 1;
    }
    lt_env env = {NULL, NULL, 64u << 20, stream};
    LT_OK(cublasLtCreate(&env.lt));
    CUDA_OK(cudaMalloc(&env.workspace, env.workspace_size));
    FILE *json = json_path ? fopen(json_path, "a") : NULL;
    if (json_path && !json) {
        fprintf(stderr, "cannot open %s\n", json_path);
        return 1;
    }
    for (int i = 0; i < count; i++)
        run_any_case(&cases[i], ctx, &env, warmup, repeat, (size_t)prop.l2CacheSize, json);
    if (json)
        fclose(json);
    cudaFree(env.workspace);
    cublasLtDestroy(env.lt);
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

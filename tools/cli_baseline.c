/*
 * The unfused baselines of `cvfuse bench` (see cli_baseline.h): OpenBLAS cblas_sgemm plus simple
 * vectorised loops, on the same inputs as our op and the same number of threads. The loops are
 * plain C written so that GCC vectorises them; each has an AVX2 + FMA + F16C copy (function
 * target attributes) picked at run time by cvf_cpu_isa_supported, and the file itself builds with
 * the project's plain flags (plus -fno-trapping-math). OpenBLAS is loaded with dlopen from the
 * path CMake found (CVF_OPENBLAS_LIBRARY); the library never depends on it.
 */
#include "cli_baseline.h"
#include "cpu/isa.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef CVF_HAVE_OPENBLAS

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>

#ifndef CVF_OPENBLAS_LIBRARY
#define CVF_OPENBLAS_LIBRARY "libopenblas.so.0"
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BASE_X86 1
#include <immintrin.h>
#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define BASE_X86 0
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The most threads a pass of the loops is split over. */
#define MAX_PARTS 64

/* ---- CPU features ------------------------------------------------------------------------------ */

/* Returns whether the AVX2 + FMA + F16C copies of the loops can run on this CPU: the library's own
 * CPUID check (clang 14's __builtin_cpu_supports rejects "f16c"). */
static int have_avx2(void)
{
#if BASE_X86
    return cvf_cpu_isa_supported(CVF_CPU_ISA_AVX2);
#else
    return 0;
#endif
}

/* ---- the loops: bodies (plain C, always inlined into a plain and an AVX2 copy) ------------------- */

/* GELU constants: sqrt(2 / pi) and the cubic coefficient. */
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

/* exp(x) in fp32 for any x (clamped to [-87, 88]), within 2 ulp: Cephes' expf polynomial, with
 * the rounding to n = round(x / ln 2) and the 2^n scaling done by arithmetic (1.5 * 2^23 added
 * leaves n in the low bits), so that it vectorises. The file is built with -fno-trapping-math,
 * without which GCC keeps the clamps as branches. */
static ALWAYS_INLINE float exp_approx(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    uint32_t t_bits;
    memcpy(&t_bits, &t, sizeof t_bits);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (t_bits - 0x4b400000u + 127u) << 23; /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* dst[j] = bf16 src[j] widened to f32. */
static ALWAYS_INLINE void body_bf16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        uint32_t bits = (uint32_t)src[j] << 16;
        memcpy(&dst[j], &bits, sizeof bits);
    }
}

/* dst[j] = bf16(relu ? max(src[j], 0) : src[j]), rounded to nearest even (NaN stays NaN). */
static ALWAYS_INLINE void body_f32_to_bf16(const float *src, uint16_t *dst, int64_t n, int relu)
{
    for (int64_t j = 0; j < n; j++) {
        float x = src[j];
        x = relu && x < 0.0f ? 0.0f : x;
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
        uint32_t quiet = (bits >> 16) | 0x40u;
        dst[j] = (uint16_t)((bits & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
    }
}

/* x[j] = max(x[j], 0) in place (NaN stays NaN). */
static ALWAYS_INLINE void body_relu(float *x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = x[j] < 0.0f ? 0.0f : x[j];
}

/* pre[j] += bias[j]; act[j] = gelu_tanh(pre[j]) = pre / (1 + exp(-2u)), u = k (x + c x^3). */
static ALWAYS_INLINE void body_bias_gelu(float *pre, float *act, const float *bias, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        float x = pre[j] + bias[j];
        float u = GELU_K * (x + GELU_C * x * x * x);
        pre[j] = x;
        act[j] = x / (1.0f + exp_approx(-2.0f * u));
    }
}

/* x[j] += bias[j]. */
static ALWAYS_INLINE void body_bias(float *x, const float *bias, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        x[j] += bias[j];
}

/* g[j] *= gelu_tanh'(pre[j]) = s + 2 x s (1 - s) k (1 + 3 c x^2), s = sigmoid(2u) (the tanh
 * formula: 0.5 (1 + tanh u) = s); beyond |x| = 1e10 the limit, 1 or 0. */
static ALWAYS_INLINE void body_dgelu(float *g, const float *pre, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        float x = pre[j];
        float u = GELU_K * (x + GELU_C * x * x * x);
        float e = exp_approx(-2.0f * u);
        float s = 1.0f / (1.0f + e);
        float d = s + 2.0f * x * s * (e * s) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
        float limit = x > 0.0f ? 1.0f : 0.0f;
        g[j] *= fabsf(x) > 1e10f ? limit : d;
    }
}

/* sum[j] += x[j]. */
static ALWAYS_INLINE void body_add(float *sum, const float *x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        sum[j] += x[j];
}

/* ---- the loops: plain and AVX2 copies ------------------------------------------------------------ */

/* Defines NAME_plain and (on x86-64) NAME_avx2 with parameter list PARAMS calling body_NAME ARGS. */
#if BASE_X86
#define VARIANTS(name, params, args)                                                                                   \
    static void name##_plain params                                                                                    \
    {                                                                                                                  \
        body_##name args;                                                                                              \
    }                                                                                                                  \
    TARGET_AVX2 static void name##_avx2 params                                                                         \
    {                                                                                                                  \
        body_##name args;                                                                                              \
    }
#define PICK(name) (have_avx2() ? name##_avx2 : name##_plain)
#else
#define VARIANTS(name, params, args)                                                                                   \
    static void name##_plain params                                                                                    \
    {                                                                                                                  \
        body_##name args;                                                                                              \
    }
#define PICK(name) (name##_plain)
#endif

VARIANTS(bf16_to_f32, (const uint16_t *src, float *dst, int64_t n), (src, dst, n))
VARIANTS(f32_to_bf16, (const float *src, uint16_t *dst, int64_t n, int relu), (src, dst, n, relu))
VARIANTS(relu, (float *x, int64_t n), (x, n))
VARIANTS(bias_gelu, (float *pre, float *act, const float *bias, int64_t n), (pre, act, bias, n))
VARIANTS(bias, (float *x, const float *bias, int64_t n), (x, bias, n))
VARIANTS(dgelu, (float *g, const float *pre, int64_t n), (g, pre, n))
VARIANTS(add, (float *sum, const float *x, int64_t n), (sum, x, n))

/* f16 -> f32 without F16C: the library's exact conversion, one element at a time. */
static void f16_to_f32_plain(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = cvf_f16_to_f32(src[j]);
}

/* f32 -> f16 (nearest even) without F16C, after an optional ReLU. */
static void f32_to_f16_plain(const float *src, uint16_t *dst, int64_t n, int relu)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = cvf_f32_to_f16(relu && src[j] < 0.0f ? 0.0f : src[j]);
}

#if BASE_X86
/* f16 -> f32 with F16C, 8 at a time. */
TARGET_AVX2 static void f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + j))));
    for (; j < n; j++)
        dst[j] = _cvtsh_ss(src[j]);
}

/* f32 -> f16 (nearest even) with F16C, 8 at a time, after an optional ReLU (NaN stays NaN). */
TARGET_AVX2 static void f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n, int relu)
{
    const __m256 zero = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(src + j);
        if (relu)
            x = _mm256_andnot_ps(_mm256_cmp_ps(x, zero, _CMP_LT_OQ), x);
        _mm_storeu_si128((__m128i *)(dst + j), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; j < n; j++)
        dst[j] = _cvtss_sh(relu && src[j] < 0.0f ? 0.0f : src[j], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

/* ---- passes: one loop over a matrix, split over threads --------------------------------------- */

/* The kinds of passes. */
typedef enum pass_kind {
    PASS_TO_F32,     /* dst (f32) = src (any dtype) */
    PASS_FROM_F32,   /* dst (any dtype) = [relu] src (f32) */
    PASS_RELU,       /* dst = relu(dst), f32 */
    PASS_BIAS_GELU,  /* dst += vec; dst2 = gelu(dst) */
    PASS_BIAS,       /* dst += vec */
    PASS_DGELU,      /* dst *= gelu'(src) */
    PASS_COLUMN_SUM, /* vec_out[j] = sum over rows of src[:, j] (split by columns) */
} pass_kind;

/* One pass over a (rows x cols) region; row r of a matrix starts at data + r * ld elements. */
typedef struct pass {
    pass_kind kind;
    int64_t rows, cols;
    cvf_dtype src_dtype, dst_dtype; /* PASS_TO_F32 / PASS_FROM_F32; f32 otherwise */
    const void *src;
    int64_t src_ld;
    void *dst;
    int64_t dst_ld;
    float *dst2;
    int64_t dst2_ld;
    const float *vec; /* the bias */
    float *vec_out;   /* the column sums */
    int relu;
} pass;

/* Address of row r of a matrix of dtype with leading dimension ld. */
static void *row_at(const void *data, cvf_dtype dtype, int64_t ld, int64_t r)
{
    return (char *)(uintptr_t)data + (size_t)(r * ld) * cvf_dtype_size(dtype);
}

/* Converts one row to f32. */
static void row_to_f32(cvf_dtype dtype, const void *src, float *dst, int64_t n)
{
    if (dtype == CVF_F32)
        memcpy(dst, src, (size_t)n * sizeof *dst);
    else if (dtype == CVF_BF16)
        PICK(bf16_to_f32)(src, dst, n);
#if BASE_X86
    else if (have_avx2())
        f16_to_f32_avx2(src, dst, n);
#endif
    else
        f16_to_f32_plain(src, dst, n);
}

/* Converts one f32 row to dtype, after an optional ReLU. */
static void row_from_f32(cvf_dtype dtype, const float *src, void *dst, int64_t n, int relu)
{
    if (dtype == CVF_F32) {
        memmove(dst, src, (size_t)n * sizeof *src);
        if (relu)
            PICK(relu)(dst, n);
    } else if (dtype == CVF_BF16) {
        PICK(f32_to_bf16)(src, dst, n, relu);
    }
#if BASE_X86
    else if (have_avx2()) {
        f32_to_f16_avx2(src, dst, n, relu);
    }
#endif
    else {
        f32_to_f16_plain(src, dst, n, relu);
    }
}

/* Runs rows [begin, end) of a row pass. */
static void pass_rows(const pass *p, int64_t begin, int64_t end)
{
    for (int64_t r = begin; r < end; r++) {
        const void *src = p->src ? row_at(p->src, p->src_dtype, p->src_ld, r) : NULL;
        void *dst = row_at(p->dst, p->dst_dtype, p->dst_ld, r);
        switch (p->kind) {
        case PASS_TO_F32: row_to_f32(p->src_dtype, src, dst, p->cols); break;
        case PASS_FROM_F32: row_from_f32(p->dst_dtype, src, dst, p->cols, p->relu); break;
        case PASS_RELU: PICK(relu)(dst, p->cols); break;
        case PASS_BIAS_GELU: PICK(bias_gelu)(dst, p->dst2 + r * p->dst2_ld, p->vec, p->cols); break;
        case PASS_BIAS: PICK(bias)(dst, p->vec, p->cols); break;
        case PASS_DGELU: PICK(dgelu)(dst, src, p->cols); break;
        case PASS_COLUMN_SUM: break;
        }
    }
}

/* Runs columns [begin, end) of a column-sum pass: the rows added in order, in f32. */
static void pass_columns(const pass *p, int64_t begin, int64_t end)
{
    float *sum = p->vec_out + begin;
    memset(sum, 0, (size_t)(end - begin) * sizeof *sum);
    for (int64_t r = 0; r < p->rows; r++)
        PICK(add)(sum, (const float *)row_at(p->src, CVF_F32, p->src_ld, r) + begin, end - begin);
}

/* One thread's share of a pass. */
typedef struct pass_part {
    const pass *p;
    int64_t begin, end;
} pass_part;

/* Runs one share of a pass. */
static void *pass_part_run(void *arg)
{
    const pass_part *part = arg;
    if (part->p->kind == PASS_COLUMN_SUM)
        pass_columns(part->p, part->begin, part->end);
    else
        pass_rows(part->p, part->begin, part->end);
    return NULL;
}

/* Runs a pass split over up to threads threads (the caller's included): rows, or for the column
 * sums columns in multiples of 64. Threads are started per pass; a thread that cannot be started
 * leaves its share to the caller. */
static void pass_run(const pass *p, int threads)
{
    int by_columns = p->kind == PASS_COLUMN_SUM;
    int64_t extent = by_columns ? p->cols : p->rows, grain = by_columns ? 64 : 1;
    int64_t units = (extent + grain - 1) / grain;
    int64_t parts = threads < MAX_PARTS ? threads : MAX_PARTS;
    if (parts > units)
        parts = units;
    if (p->rows * p->cols < 32768 || parts < 1)
        parts = 1;
    pass_part shares[MAX_PARTS];
    pthread_t ids[MAX_PARTS];
    int started[MAX_PARTS] = {0};
    for (int64_t i = 0; i < parts; i++) {
        int64_t begin = units * i / parts * grain, end = units * (i + 1) / parts * grain;
        shares[i] = (pass_part){p, begin, end < extent ? end : extent};
    }
    for (int64_t i = 1; i < parts; i++)
        started[i] = pthread_create(&ids[i], NULL, pass_part_run, &shares[i]) == 0;
    pass_part_run(&shares[0]);
    for (int64_t i = 1; i < parts; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            pass_part_run(&shares[i]);
    }
}

/* ---- the library --------------------------------------------------------------------------------- */

/* The OpenBLAS entry points the baselines use. */
typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                         const float *, blasint, const float *, blasint, float, float *, blasint);
typedef void (*set_threads_fn)(int);
typedef char *(*get_text_fn)(void);

struct cli_blas {
    const char *path; /* what was loaded */
    sgemm_fn sgemm;
    set_threads_fn set_num_threads;
    get_text_fn get_config, get_corename;
};

/* Looks up symbol name in handle into *fn (a function pointer of fn_size bytes). Returns 0, or -1
 * with why set. */
static int lookup(void *handle, const char *name, void *fn, size_t fn_size, char *why, size_t size)
{
    void *symbol = dlsym(handle, name);
    if (!symbol) {
        snprintf(why, size, "%s has no %s", CVF_OPENBLAS_LIBRARY, name);
        return -1;
    }
    memcpy(fn, &symbol, fn_size); /* POSIX: a data pointer from dlsym converts to a function pointer */
    return 0;
}

/* Looks up every entry point of blas in handle. Returns 0, or -1 with why set. */
static int lookup_all(void *handle, cli_blas *blas, char *why, size_t size)
{
    const struct {
        const char *name;
        void *fn;
        size_t fn_size;
    } entries[] = {
        {"cblas_sgemm", &blas->sgemm, sizeof blas->sgemm},
        {"openblas_set_num_threads", &blas->set_num_threads, sizeof blas->set_num_threads},
        {"openblas_get_config", &blas->get_config, sizeof blas->get_config},
        {"openblas_get_corename", &blas->get_corename, sizeof blas->get_corename},
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (lookup(handle, entries[i].name, entries[i].fn, entries[i].fn_size, why, size) != 0)
            return -1;
    return 0;
}

/* dlopens OpenBLAS: the path found at build time, else the soname. Returns the handle or NULL. */
static void *load_library(const char **path, char *why, size_t size)
{
    static const char *const candidates[] = {CVF_OPENBLAS_LIBRARY, "libopenblas.so.0"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        void *handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (handle) {
            *path = candidates[i];
            return handle;
        }
        const char *error = dlerror();
        if (i == 0)
            snprintf(why, size, "cannot load OpenBLAS: %s", error ? error : CVF_OPENBLAS_LIBRARY);
    }
    return NULL;
}

cli_blas *cli_baseline_open(char *why, size_t size)
{
    if (!getenv("OPENBLAS_THREAD_TIMEOUT"))
        setenv("OPENBLAS_THREAD_TIMEOUT", CLI_OPENBLAS_THREAD_TIMEOUT, 1);
    cli_blas *blas = calloc(1, sizeof *blas);
    if (!blas) {
        snprintf(why, size, "out of memory");
        return NULL;
    }
    void *handle = load_library(&blas->path, why, size);
    if (!handle || lookup_all(handle, blas, why, size) != 0) {
        free(blas); /* the handle stays open: OpenBLAS's threads are not safe to unload */
        return NULL;
    }
    return blas;
}

void cli_baseline_close(cli_blas *blas)
{
    free(blas);
}

void cli_baseline_describe(const cli_blas *blas, const char *why, char *buf, size_t size)
{
    if (!blas) {
        snprintf(buf, size, "none (%s)", why);
        return;
    }
    const char *coretype = getenv("OPENBLAS_CORETYPE"), *timeout = getenv("OPENBLAS_THREAD_TIMEOUT");
    int n = snprintf(buf, size, "openblas (%s; core %s; OPENBLAS_THREAD_TIMEOUT=%s)", blas->get_config(),
                     blas->get_corename(), timeout ? timeout : "unset");
    if (coretype && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n,
                 "\n  OPENBLAS_CORETYPE=%s is set: OpenBLAS may not use its best kernels (make bench unsets it)",
                 coretype);
}

/* ---- the baselines ------------------------------------------------------------------------------ */

/* Which computation a baseline runs. */
typedef enum base_kind { BASE_MATMUL, BASE_MLP_FORWARD, BASE_MLP_BACKWARD } base_kind;

struct cli_baseline {
    const cli_blas *blas;
    const cli_tensor_set *set; /* ours: the inputs are read from it */
    base_kind kind;
    int relu; /* BASE_MATMUL: a ReLU after the product */
    int threads;
    cvf_matrix out[CLI_MAX_TENSORS]; /* the baseline's outputs (data NULL at the inputs' indices) */
    float *a32, *b32, *c32;          /* BASE_MATMUL in f16 / bf16: f32 copies of A, B and the product */
    float *work;                     /* BASE_MLP_BACKWARD: grad_fc1_output (S x I) */
};

/* Returns the input view called name of the baseline's set. */
static const cvf_matrix *input(const cli_baseline *b, const char *name)
{
    return cli_set_matrix(b->set, cli_set_index(b->set, name));
}

/* Returns the baseline's output view called name. */
static const cvf_matrix *output(const cli_baseline *b, const char *name)
{
    return &b->out[cli_set_index(b->set, name)];
}

/* Returns the operand form of an f32 view for cblas: row-major, or a transposed row-major. */
static CBLAS_TRANSPOSE operand(const cvf_matrix *m, blasint *ld)
{
    if (m->col_stride == 1) {
        *ld = (blasint)(m->row_stride > 1 ? m->row_stride : 1);
        return CblasNoTrans;
    }
    *ld = (blasint)(m->col_stride > 1 ? m->col_stride : 1);
    return CblasTrans;
}

/* c = a @ b with cblas_sgemm, f32 views (row-major or transposed row-major) read in place. */
static void sgemm(const cli_baseline *base, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c)
{
    blasint lda, ldb, ldc = (blasint)(c->row_stride > 1 ? c->row_stride : 1);
    CBLAS_TRANSPOSE ta = operand(a, &lda), tb = operand(b, &ldb);
    base->blas->sgemm(CblasRowMajor, ta, tb, (blasint)c->rows, (blasint)c->cols, (blasint)a->cols, 1.0f, a->data, lda,
                      b->data, ldb, 0.0f, c->data, ldc);
}

/* A row pass over the view m (dst), f32 unless said otherwise. */
static pass row_pass(pass_kind kind, const cvf_matrix *m)
{
    pass p = {0};
    p.kind = kind;
    p.rows = m->rows;
    p.cols = m->cols;
    p.src_dtype = CVF_F32;
    p.dst_dtype = m->dtype;
    p.dst = m->data;
    p.dst_ld = m->row_stride;
    return p;
}

/* Converts the view m into a dense f32 copy (m's shape) at dst. */
static void convert_in(const cli_baseline *b, const cvf_matrix *m, float *dst)
{
    pass p = row_pass(PASS_TO_F32, m);
    p.src = m->data;
    p.src_dtype = m->dtype;
    p.src_ld = m->row_stride;
    p.dst = dst;
    p.dst_dtype = CVF_F32;
    p.dst_ld = m->cols;
    pass_run(&p, b->threads);
}

/* gemm / matmul-relu: sgemm straight from f32 inputs, or convert, sgemm, ReLU + convert back. */
static void run_matmul(cli_baseline *b)
{
    const cvf_matrix *a = input(b, "a"), *bm = input(b, "b"), *c = output(b, "c");
    if (a->dtype == CVF_F32) {
        sgemm(b, a, bm, c);
        if (b->relu) {
            pass p = row_pass(PASS_RELU, c);
            pass_run(&p, b->threads);
        }
        return;
    }
    convert_in(b, a, b->a32);
    convert_in(b, bm, b->b32);
    cvf_matrix a32 = cvf_matrix_row_major(b->a32, CVF_F32, a->rows, a->cols);
    cvf_matrix b32 = cvf_matrix_row_major(b->b32, CVF_F32, bm->rows, bm->cols);
    cvf_matrix c32 = cvf_matrix_row_major(b->c32, CVF_F32, c->rows, c->cols);
    sgemm(b, &a32, &b32, &c32);
    pass p = row_pass(PASS_FROM_F32, c);
    p.src = b->c32;
    p.src_ld = c->cols;
    p.relu = b->relu;
    pass_run(&p, b->threads);
}

/* mlp-forward: fc1 sgemm, bias + GELU pass, fc2 sgemm, bias pass. */
static void run_mlp_forward(cli_baseline *b)
{
    const cvf_matrix *fc1_output = output(b, "fc1_output"), *gelu_output = output(b, "gelu_output");
    const cvf_matrix *out = output(b, "output");
    cvf_matrix w1t = cvf_matrix_transpose(*input(b, "fc1_weight"));
    cvf_matrix w2t = cvf_matrix_transpose(*input(b, "fc2_weight"));
    sgemm(b, input(b, "hidden_state"), &w1t, fc1_output);
    pass p = row_pass(PASS_BIAS_GELU, fc1_output);
    p.dst2 = gelu_output->data;
    p.dst2_ld = gelu_output->row_stride;
    p.vec = input(b, "fc1_bias")->data;
    pass_run(&p, b->threads);
    sgemm(b, gelu_output, &w2t, out);
    p = row_pass(PASS_BIAS, out);
    p.vec = input(b, "fc2_bias")->data;
    pass_run(&p, b->threads);
}

/* Column sums of the f32 view m into the vector view out. */
static void column_sums(const cli_baseline *b, const cvf_matrix *m, const cvf_matrix *out)
{
    pass p = row_pass(PASS_COLUMN_SUM, m);
    p.src = m->data;
    p.src_ld = m->row_stride;
    p.vec_out = out->data;
    pass_run(&p, b->threads);
}

/* mlp-backward: four sgemm (transposes read in place), a GELU' pass and two column-sum passes. */
static void run_mlp_backward(cli_baseline *b)
{
    const cvf_matrix *grad_output = input(b, "grad_output"), *fc1_output = input(b, "fc1_output");
    cvf_matrix grad_output_t = cvf_matrix_transpose(*grad_output);
    cvf_matrix work = cvf_matrix_row_major(b->work, CVF_F32, fc1_output->rows, fc1_output->cols);
    cvf_matrix work_t = cvf_matrix_transpose(work);
    sgemm(b, &grad_output_t, input(b, "gelu_output"), output(b, "grad_fc2_weight"));
    column_sums(b, grad_output, output(b, "grad_fc2_bias"));
    sgemm(b, grad_output, input(b, "fc2_weight"), &work);
    pass p = row_pass(PASS_DGELU, &work);
    p.src = fc1_output->data;
    p.src_ld = fc1_output->row_stride;
    pass_run(&p, b->threads);
    column_sums(b, &work, output(b, "grad_fc1_bias"));
    sgemm(b, &work_t, input(b, "hidden_state"), output(b, "grad_fc1_weight"));
    sgemm(b, &work, input(b, "fc1_weight"), output(b, "grad_hidden_state"));
}

/* Returns whether every tensor of set has dense f32-addressable rows cblas can take. */
static int rows_dense(const cli_tensor_set *set)
{
    for (int i = 0; i < set->op->tensor_count; i++) {
        const cvf_matrix *m = cli_set_matrix(set, i);
        if (m->col_stride != 1 || m->row_stride < m->cols || m->rows > INT_MAX || m->row_stride > INT_MAX || !m->data)
            return 0;
    }
    return 1;
}

const char *cli_baseline_unsupported(const cli_blas *blas, const cli_tensor_set *set)
{
    const char *name = set->op->name;
    if (!blas)
        return "no baseline library";
    int matmul = strcmp(name, "gemm") == 0 || strcmp(name, "matmul-relu") == 0;
    int mlp = strcmp(name, "mlp-forward") == 0 || strcmp(name, "mlp-backward") == 0;
    if (!matmul && !mlp)
        return "no baseline for this op";
    if (mlp && set->dtype != CVF_F32)
        return "the MLP baselines are f32 only";
    if (!rows_dense(set))
        return "the baseline needs dense row-major tensors";
    return NULL;
}

/* Allocates the baseline's outputs and workspaces. Returns 0, or -1 when out of memory. */
static int allocate(cli_baseline *b)
{
    const cli_tensor_set *set = b->set;
    for (int i = 0; i < set->op->tensor_count; i++) {
        const cvf_matrix *m = cli_set_matrix(set, i);
        if (set->op->tensors[i].is_output && cvft_matrix_alloc(m->dtype, m->rows, m->cols, &b->out[i]) != 0)
            return -1;
    }
    const int64_t *d = set->dims;
    size_t f = sizeof(float);
    if (b->kind == BASE_MATMUL && set->dtype != CVF_F32) {
        b->a32 = malloc((size_t)(d[0] * d[2]) * f + f);
        b->b32 = malloc((size_t)(d[2] * d[1]) * f + f);
        b->c32 = malloc((size_t)(d[0] * d[1]) * f + f);
        if (!b->a32 || !b->b32 || !b->c32)
            return -1;
    }
    if (b->kind == BASE_MLP_BACKWARD && !(b->work = malloc((size_t)(d[0] * d[2]) * f + f)))
        return -1;
    return 0;
}

int cli_baseline_create(const cli_blas *blas, const cli_tensor_set *set, int threads, cli_baseline **out)
{
    *out = NULL;
    cli_baseline *b = calloc(1, sizeof *b);
    if (!b)
        return cli_runtime_error(set->command, "out of memory");
    const char *name = set->op->name;
    b->blas = blas;
    b->set = set;
    b->threads = threads < 1 ? 1 : threads;
    b->relu = strcmp(name, "matmul-relu") == 0;
    b->kind = strcmp(name, "mlp-forward") == 0    ? BASE_MLP_FORWARD
              : strcmp(name, "mlp-backward") == 0 ? BASE_MLP_BACKWARD
                                                  : BASE_MATMUL;
    if (allocate(b) != 0) {
        cli_baseline_destroy(b);
        return cli_runtime_error(set->command, "out of memory (baseline buffers)");
    }
    blas->set_num_threads(b->threads);
    *out = b;
    return CLI_EXIT_OK;
}

void cli_baseline_run(cli_baseline *b)
{
    switch (b->kind) {
    case BASE_MATMUL: run_matmul(b); break;
    case BASE_MLP_FORWARD: run_mlp_forward(b); break;
    case BASE_MLP_BACKWARD: run_mlp_backward(b); break;
    }
}

double cli_baseline_check(const cli_baseline *b, const cli_tensor_set *set)
{
    double worst = 0.0;
    for (int i = 0; i < set->op->tensor_count; i++) {
        if (!set->op->tensors[i].is_output)
            continue;
        double e = cvft_matrix_rel_error(&b->out[i], cli_set_matrix(set, i));
        worst = isnan(e) || e > worst ? e : worst;
    }
    return worst;
}

void cli_baseline_destroy(cli_baseline *b)
{
    if (!b)
        return;
    for (int i = 0; i < CLI_MAX_TENSORS; i++)
        free(b->out[i].data);
    free(b->a32);
    free(b->b32);
    free(b->c32);
    free(b->work);
    free(b);
}

#else /* no OpenBLAS at build time: no baseline */

cli_blas *cli_baseline_open(char *why, size_t size)
{
    snprintf(why, size, "OpenBLAS not found at build time");
    return NULL;
}

void cli_baseline_close(cli_blas *blas)
{
    (void)blas;
}

void cli_baseline_describe(const cli_blas *blas, const char *why, char *buf, size_t size)
{
    (void)blas;
    snprintf(buf, size, "none (%s)", why);
}

const char *cli_baseline_unsupported(const cli_blas *blas, const cli_tensor_set *set)
{
    (void)blas;
    (void)set;
    return "OpenBLAS not found at build time";
}

int cli_baseline_create(const cli_blas *blas, const cli_tensor_set *set, int threads, cli_baseline **out)
{
    (void)blas;
    (void)threads;
    *out = NULL;
    return cli_runtime_error(set->command, "no baseline: OpenBLAS not found at build time");
}

void cli_baseline_run(cli_baseline *baseline)
{
    (void)baseline;
}

double cli_baseline_check(const cli_baseline *baseline, const cli_tensor_set *set)
{
    (void)baseline;
    (void)set;
    return NAN;
}

void cli_baseline_destroy(cli_baseline *baseline)
{
    (void)baseline;
}

#endif

/*
 * AVX2 + FMA fp32 micro-kernel, 6 x 16 (see kernels.h for the contract). Compiled with the AVX2
 * level's flags; runs only where cvf_cpu_isa_supported(CVF_CPU_ISA_AVX2) holds.
 *
 * Shape: 12 ymm accumulators (6 rows x 2 vectors of 8 columns), 2 B vectors and 2 broadcast A
 * elements: all 16 ymm registers, 12 FMAs per k against 2 loads and 6 broadcasts (two FMA pipes
 * with latency 4-5 need at least 8-10 independent chains). The k loop is written in inline
 * assembly, unrolled by 4: compilers given the same loop in intrinsics interleave the unrolled
 * steps and spill accumulators to the stack inside the loop (gcc 12 did: 74% of the FMA peak).
 * The A panel (streamed from L2) is prefetched a few steps ahead; the B micro-panel is already in
 * L1 (the driver keeps it there across the MC block's kernel calls). C's lines are requested
 * before the loop so that the stores do not wait.
 * Edge tiles go through a local copy of the tile and scalar stores of the m x n corner; the fused
 * store (bias, ReLU, f32/f16/bf16) runs on the registers with masked stores.
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define MR CVF_CPU_F32_AVX2_MR
#define NR CVF_CPU_F32_AVX2_NR

/* Bytes ahead of the current k step at which the A panel is prefetched (A is 24 bytes a step). */
#ifndef A_PREFETCH
#define A_PREFETCH "384"
#endif

/* The accumulator tile: row i, columns 0..7 in v[i][0] and 8..15 in v[i][1]. */
typedef struct tile {
    __m256 v[MR][2];
} tile;

/* One k step of the loop at step s of the unrolled body (A at s * 24 bytes, B at s * 64). */
#define STEP(s)                                                                                                        \
    "vmovaps " #s "*64(%[b]), %%ymm0\n\t"                                                                              \
    "vmovaps " #s "*64+32(%[b]), %%ymm1\n\t"                                                                           \
    "vbroadcastss " #s "*24(%[a]), %%ymm2\n\t"                                                                         \
    "vbroadcastss " #s "*24+4(%[a]), %%ymm3\n\t"                                                                       \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm4\n\t"                                                                           \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm5\n\t"                                                                           \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm6\n\t"                                                                           \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm7\n\t"                                                                           \
    "vbroadcastss " #s "*24+8(%[a]), %%ymm2\n\t"                                                                       \
    "vbroadcastss " #s "*24+12(%[a]), %%ymm3\n\t"                                                                      \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm8\n\t"                                                                           \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm9\n\t"                                                                           \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm10\n\t"                                                                          \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm11\n\t"                                                                          \
    "vbroadcastss " #s "*24+16(%[a]), %%ymm2\n\t"                                                                      \
    "vbroadcastss " #s "*24+20(%[a]), %%ymm3\n\t"                                                                      \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm12\n\t"                                                                          \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm13\n\t"                                                                          \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm14\n\t"                                                                          \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm15\n\t"

/* acc = A B over kc steps of the packed panels (acc is overwritten). Registers: B in ymm0-1, A
 * broadcasts in ymm2-3, the accumulators (row i, half h) in ymm(4 + 2 i + h). */
static inline __attribute__((always_inline)) void tile_product(int64_t kc, const float *a, const float *b, tile *acc)
{
    int64_t quads = kc / 4, rest = kc % 4;
    __asm__ volatile("vxorps %%ymm4, %%ymm4, %%ymm4\n\t"
                     "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"
                     "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
                     "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
                     "vxorps %%ymm8, %%ymm8, %%ymm8\n\t"
                     "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"
                     "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
                     "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
                     "vxorps %%ymm12, %%ymm12, %%ymm12\n\t"
                     "vxorps %%ymm13, %%ymm13, %%ymm13\n\t"
                     "vxorps %%ymm14, %%ymm14, %%ymm14\n\t"
                     "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
                     "test %[quads], %[quads]\n\t"
                     "jz 2f\n\t"
                     ".p2align 5\n"
                     "1:\n\t"
                     "prefetcht0 " A_PREFETCH "(%[a])\n\t" STEP(0)
                         STEP(1) "prefetcht0 " A_PREFETCH "+64(%[a])\n\t" STEP(2)
                             STEP(3) "add $96, %[a]\n\t"
                                     "add $256, %[b]\n\t"
                                     "dec %[quads]\n\t"
                                     "jnz 1b\n"
                                     "2:\n\t"
                                     "test %[rest], %[rest]\n\t"
                                     "jz 4f\n"
                                     "3:\n\t" STEP(0) "add $24, %[a]\n\t"
                                                      "add $64, %[b]\n\t"
                                                      "dec %[rest]\n\t"
                                                      "jnz 3b\n"
                                                      "4:\n\t"
                                                      "vmovaps %%ymm4, 0(%[acc])\n\t"
                                                      "vmovaps %%ymm5, 32(%[acc])\n\t"
                                                      "vmovaps %%ymm6, 64(%[acc])\n\t"
                                                      "vmovaps %%ymm7, 96(%[acc])\n\t"
                                                      "vmovaps %%ymm8, 128(%[acc])\n\t"
                                                      "vmovaps %%ymm9, 160(%[acc])\n\t"
                                                      "vmovaps %%ymm10, 192(%[acc])\n\t"
                                                      "vmovaps %%ymm11, 224(%[acc])\n\t"
                                                      "vmovaps %%ymm12, 256(%[acc])\n\t"
                                                      "vmovaps %%ymm13, 288(%[acc])\n\t"
                                                      "vmovaps %%ymm14, 320(%[acc])\n\t"
                                                      "vmovaps %%ymm15, 352(%[acc])\n\t"
                     : [a] "+r"(a), [b] "+r"(b), [quads] "+r"(quads), [rest] "+r"(rest)
                     : [acc] "r"(acc->v)
                     : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

/* Requests the lines of the m rows x `bytes` of C at c (rows ld bytes apart) before they are
 * written: the first and the last byte of each row (a 64-byte row may straddle two lines). */
static inline __attribute__((always_inline)) void prefetch_c(const char *c, int64_t ld, int64_t m, int64_t bytes)
{
    for (int64_t i = 0; i < m; i++) {
        _mm_prefetch(c + i * ld, _MM_HINT_T0);
        _mm_prefetch(c + i * ld + bytes - 1, _MM_HINT_T0);
    }
}

/* Stores (or adds) the full 6 x 16 tile with unaligned vector accesses. */
static inline __attribute__((always_inline)) void store_full(const tile *acc, float *c, int64_t ldc, int accumulate)
{
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *row = c + i * ldc;
        __m256 lo = acc->v[i][0], hi = acc->v[i][1];
        if (accumulate) {
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(row));
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(row + 8));
        }
        _mm256_storeu_ps(row, lo);
        _mm256_storeu_ps(row + 8, hi);
    }
}

/* Stores (or adds) the m x n corner of the tile through a local copy (no access outside it). */
static void store_edge(const tile *acc, float *c, int64_t ldc, int64_t m, int64_t n, int accumulate)
{
    float buf[MR][NR];
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(buf[i], acc->v[i][0]);
        _mm256_storeu_ps(buf[i] + 8, acc->v[i][1]);
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + buf[i][j] : buf[i][j];
}

void cvf_cpu_kernel_f32_avx2(int64_t kc, const void *a_panel, const void *b_panel, float *c, int64_t ldc, int64_t m,
                             int64_t n, int accumulate)
{
    tile acc;
    prefetch_c((const char *)c, ldc * 4, m, n * 4);
    tile_product(kc, a_panel, b_panel, &acc);
    if (m == MR && n == NR)
        store_full(&acc, c, ldc, accumulate);
    else
        store_edge(&acc, c, ldc, m, n, accumulate);
}

/* ---- the fused store ------------------------------------------------------------------------ */

/* Lane mask of the first `count` (0..8) of 8 lanes. */
static inline __m256i lane_mask(int64_t count)
{
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), index);
}

/* bfloat16 bits of x as cvf_f32_to_bf16 (round to nearest even, NaN truncated and made quiet),
 * packed into 8 16-bit lanes. */
static inline __m128i bf16_bits(__m256 x)
{
    __m256i b = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x0040));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    __m256i lanes = _mm256_blendv_epi8(rounded, quiet, nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
}

/* Stores the first `count` (1..8) lanes of x at element `offset` of C (dtype known at compile
 * time after inlining). */
static inline __attribute__((always_inline)) void store_vector(void *c, cvf_dtype dtype, int64_t offset, __m256 x,
                                                               int64_t count)
{
    if (dtype == CVF_F32) {
        float *dst = (float *)c + offset;
        if (count == 8)
            _mm256_storeu_ps(dst, x);
        else
            _mm256_maskstore_ps(dst, lane_mask(count), x);
        return;
    }
    __m128i h = dtype == CVF_F16 ? _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT) : bf16_bits(x);
    uint16_t *dst = (uint16_t *)c + offset;
    if (count == 8) {
        _mm_storeu_si128((__m128i *)dst, h);
    } else {
        uint16_t buf[8];
        _mm_storeu_si128((__m128i *)buf, h);
        memcpy(dst, buf, (size_t)count * sizeof(uint16_t));
    }
}

/* The fused store of the m x n corner of acc in one dtype: bias added (zeros when NULL), ReLU,
 * rounded, stored; full-width rows with plain vector stores. */
static inline __attribute__((always_inline)) void store_fused(const tile *acc, const cvf_cpu_fused_store *out,
                                                              cvf_dtype dtype, int64_t m, int64_t n)
{
    int64_t n0 = n < 8 ? n : 8, n1 = n - n0; /* columns in the first and the second vector */
    __m256 bias0 = _mm256_setzero_ps(), bias1 = bias0;
    if (out->bias) {
        bias0 = n0 == 8 ? _mm256_loadu_ps(out->bias) : _mm256_maskload_ps(out->bias, lane_mask(n0));
        bias1 = n1 == 8  ? _mm256_loadu_ps(out->bias + 8)
                : n1 > 0 ? _mm256_maskload_ps(out->bias + 8, lane_mask(n1))
                         : bias1;
    }
    const __m256 zero = _mm256_setzero_ps();
    int relu = out->relu;
    /* in locals: the stores through C may alias *out, so the compiler would reload them per row */
    void *c = out->c;
    const int64_t ldc = out->ldc;
    for (int64_t i = 0; i < m; i++) {
        __m256 x0 = _mm256_add_ps(acc->v[i][0], bias0), x1 = _mm256_add_ps(acc->v[i][1], bias1);
        if (relu) { /* max(0, x) returns x when x is NaN or -0: x < 0 ? 0 : x */
            x0 = _mm256_max_ps(zero, x0);
            x1 = _mm256_max_ps(zero, x1);
        }
        if (n == NR) {
            store_vector(c, dtype, i * ldc, x0, 8);
            store_vector(c, dtype, i * ldc + 8, x1, 8);
        } else {
            store_vector(c, dtype, i * ldc, x0, n0);
            if (n1 > 0)
                store_vector(c, dtype, i * ldc + 8, x1, n1);
        }
    }
}

void cvf_cpu_kernel_f32_avx2_fused(int64_t kc, const void *a_panel, const void *b_panel, const cvf_cpu_fused_store *out,
                                   int64_t m, int64_t n)
{
    tile acc;
    int64_t size = out->dtype == CVF_F32 ? 4 : 2;
    prefetch_c((const char *)out->c, m > 1 ? out->ldc * size : 0, m, n * size); /* one row: any ldc, unused */
    tile_product(kc, a_panel, b_panel, &acc);
    switch (out->dtype) {
    case CVF_F16: store_fused(&acc, out, CVF_F16, m, n); break;
    case CVF_BF16: store_fused(&acc, out, CVF_BF16, m, n); break;
    default: store_fused(&acc, out, CVF_F32, m, n); break;
    }
}

/* ---- the direct kernel: A and B read in place ------------------------------------------------ */

/* Full 6 x 16 tiles run the assembly loop below; edge tiles (fewer rows or columns) an intrinsics
 * loop compiled per row count that reads only the corner (kernels.h: the caller copies no
 * zero-padded panels). One thread, ours / OpenBLAS Haswell on the development VM: 30^3 1.53 ->
 * 0.97, 100^3 1.33 -> 0.99-1.01, 127^3 1.14 -> 0.89, 64^3 0.98 -> 0.96 (PERF.md). */

/* One k step of the direct loop at step s of the unrolled body: A element s of each of the six
 * rows (rows 0-2 from a, 3-5 from a3, lda bytes apart), B row s (ldb bytes apart, row 3 through
 * ldb3 = 3 ldb). */
#define DSTEP(s, brow)                                                                                                 \
    "vmovups " brow ", %%ymm0\n\t"                                                                                     \
    "vmovups 32" brow ", %%ymm1\n\t"                                                                                  \
    "vbroadcastss " #s "*4(%[a]), %%ymm2\n\t"                                                                          \
    "vbroadcastss " #s "*4(%[a],%[lda],1), %%ymm3\n\t"                                                                 \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm4\n\t"                                                                           \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm5\n\t"                                                                           \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm6\n\t"                                                                           \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm7\n\t"                                                                           \
    "vbroadcastss " #s "*4(%[a],%[lda],2), %%ymm2\n\t"                                                                 \
    "vbroadcastss " #s "*4(%[a3]), %%ymm3\n\t"                                                                         \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm8\n\t"                                                                           \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm9\n\t"                                                                           \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm10\n\t"                                                                          \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm11\n\t"                                                                          \
    "vbroadcastss " #s "*4(%[a3],%[lda],1), %%ymm2\n\t"                                                                \
    "vbroadcastss " #s "*4(%[a3],%[lda],2), %%ymm3\n\t"                                                                \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm12\n\t"                                                                          \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm13\n\t"                                                                          \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm14\n\t"                                                                          \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm15\n\t"

/* acc = A B over k steps, A's six rows lda floats apart and B's rows ldb floats apart, both read in
 * place (same registers as tile_product). */
static inline __attribute__((always_inline)) void tile_product_direct(int64_t k, const float *a, int64_t lda,
                                                                      const float *b, int64_t ldb, tile *acc)
{
    int64_t quads = k / 4, rest = k % 4, lda_bytes = lda * 4, ldb_bytes = ldb * 4, ldb3 = 3 * ldb_bytes;
    const float *a3 = a + 3 * lda;
    __asm__ volatile("vxorps %%ymm4, %%ymm4, %%ymm4\n\t"
                     "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"
                     "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
                     "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
                     "vxorps %%ymm8, %%ymm8, %%ymm8\n\t"
                     "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"
                     "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
                     "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
                     "vxorps %%ymm12, %%ymm12, %%ymm12\n\t"
                     "vxorps %%ymm13, %%ymm13, %%ymm13\n\t"
                     "vxorps %%ymm14, %%ymm14, %%ymm14\n\t"
                     "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
                     "test %[quads], %[quads]\n\t"
                     "jz 2f\n\t"
                     ".p2align 5\n"
                     "1:\n\t" DSTEP(0, "(%[b])") DSTEP(1, "(%[b],%[ldb],1)") DSTEP(2, "(%[b],%[ldb],2)")
                         DSTEP(3, "(%[b],%[ldb3],1)") "add $16, %[a]\n\t"
                                                      "add $16, %[a3]\n\t"
                                                      "lea (%[b],%[ldb],4), %[b]\n\t"
                                                      "dec %[quads]\n\t"
                                                      "jnz 1b\n"
                                                      "2:\n\t"
                                                      "test %[rest], %[rest]\n\t"
                                                      "jz 4f\n"
                                                      "3:\n\t" DSTEP(0, "(%[b])") "add $4, %[a]\n\t"
                                                                                  "add $4, %[a3]\n\t"
                                                                                  "add %[ldb], %[b]\n\t"
                                                                                  "dec %[rest]\n\t"
                                                                                  "jnz 3b\n"
                                                                                  "4:\n\t"
                                                                                  "vmovaps %%ymm4, 0(%[acc])\n\t"
                                                                                  "vmovaps %%ymm5, 32(%[acc])\n\t"
                                                                                  "vmovaps %%ymm6, 64(%[acc])\n\t"
                                                                                  "vmovaps %%ymm7, 96(%[acc])\n\t"
                                                                                  "vmovaps %%ymm8, 128(%[acc])\n\t"
                                                                                  "vmovaps %%ymm9, 160(%[acc])\n\t"
                                                                                  "vmovaps %%ymm10, 192(%[acc])\n\t"
                                                                                  "vmovaps %%ymm11, 224(%[acc])\n\t"
                                                                                  "vmovaps %%ymm12, 256(%[acc])\n\t"
                                                                                  "vmovaps %%ymm13, 288(%[acc])\n\t"
                                                                                  "vmovaps %%ymm14, 320(%[acc])\n\t"
                                                                                  "vmovaps %%ymm15, 352(%[acc])\n\t"
                     : [a] "+r"(a), [a3] "+r"(a3), [b] "+r"(b), [quads] "+r"(quads), [rest] "+r"(rest)
                     : [acc] "r"(acc->v), [lda] "r"(lda_bytes), [ldb] "r"(ldb_bytes), [ldb3] "r"(ldb3)
                     : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

/* acc = A B for an edge tile of `rows` rows (1-6) and `vecs` vectors of 8 columns (constants where
 * it is inlined, with `full` when n fills them): A's m = rows rows and B's n columns read in place
 * (columns from n on masked off, never read; full vectors with plain loads, vmaskmovps costing a
 * uop beside the FMAs), so that the caller copies nothing (kernels.h, cvf_cpu_direct_fn); the rows
 * and vectors past the corner are left unset (store_fused stores only the corner). */
static inline __attribute__((always_inline)) void tile_product_edge(int rows, int vecs, bool full, int64_t k,
                                                                    const float *a, int64_t lda, const float *b,
                                                                    int64_t ldb, int64_t n, tile *acc)
{
    const int64_t n0 = n < 8 ? n : 8;
    const __m256i m0 = lane_mask(n0), m1 = lane_mask(n - n0);
    __m256 c[MR][2];
    _Pragma("GCC unroll 6") for (int i = 0; i < rows; i++)
    {
        _Pragma("GCC unroll 2") for (int v = 0; v < vecs; v++) c[i][v] = _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < k; p++) {
        __m256 bv[2];
        bv[0] = vecs > 1 || full ? _mm256_loadu_ps(b + p * ldb) : _mm256_maskload_ps(b + p * ldb, m0);
        if (vecs > 1)
            bv[1] = full ? _mm256_loadu_ps(b + p * ldb + 8) : _mm256_maskload_ps(b + p * ldb + 8, m1);
        _Pragma("GCC unroll 6") for (int i = 0; i < rows; i++)
        {
            const __m256 x = _mm256_broadcast_ss(a + i * lda + p);
            _Pragma("GCC unroll 2") for (int v = 0; v < vecs; v++) c[i][v] = _mm256_fmadd_ps(x, bv[v], c[i][v]);
        }
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < rows; i++)
    {
        acc->v[i][0] = c[i][0];
        acc->v[i][1] = vecs > 1 ? c[i][1] : _mm256_setzero_ps();
    }
}

/* The edge tiles' products, compiled for each row count and one or two vectors of columns. */
static void tile_product_edges(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m,
                               int64_t n, tile *acc)
{
#define EDGE_ROWS(r)                                                                                                   \
    case r:                                                                                                            \
        if (n == 16)                                                                                                   \
            tile_product_edge(r, 2, true, k, a, lda, b, ldb, n, acc);                                                  \
        else if (n > 8)                                                                                                \
            tile_product_edge(r, 2, false, k, a, lda, b, ldb, n, acc);                                                 \
        else                                                                                                           \
            tile_product_edge(r, 1, n == 8, k, a, lda, b, ldb, n, acc);                                                \
        break;
    switch (m) {
        EDGE_ROWS(1)
        EDGE_ROWS(2)
        EDGE_ROWS(3)
        EDGE_ROWS(4)
        EDGE_ROWS(5)
        EDGE_ROWS(6)
    default: break; /* m is 1 .. MR */
    }
#undef EDGE_ROWS
}

void cvf_cpu_direct_f32_avx2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                             const cvf_cpu_fused_store *out, int64_t m, int64_t n)
{
    tile acc;
    int64_t size = out->dtype == CVF_F32 ? 4 : 2;
    prefetch_c((const char *)out->c, m > 1 ? out->ldc * size : 0, m, n * size); /* one row: any ldc, unused */
    /* the full tile through the assembly loop; an edge reads only its rows and columns */
    if (m == MR && n == NR)
        tile_product_direct(k, a, lda, b, ldb, &acc);
    else
        tile_product_edges(k, a, lda, b, ldb, m, n, &acc);
    switch (out->dtype) {
    case CVF_F16: store_fused(&acc, out, CVF_F16, m, n); break;
    case CVF_BF16: store_fused(&acc, out, CVF_BF16, m, n); break;
    default: store_fused(&acc, out, CVF_F32, m, n); break;
    }
}

/* ---- packing: rows interleaved into a micro-panel ------------------------------------------ */

/* Transposes the 8 x 8 block r[0..7] in place: afterwards r[q] holds element q of each input row. */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* Interleaves rows r0 .. r0 + 7 (those >= count read as zeros) into columns r0 .. r0 + lanes - 1 of
 * dst (lanes = min(8, width - r0)): 8 k steps at a time through an 8 x 8 transpose. A group of
 * fewer than 8 lanes spills 8 - lanes floats into the following k steps' first columns: when it
 * is the panel's only group (r0 = 0, width < 8) those are its own, rewritten by the later stores
 * in increasing k, so a full 8-lane store is used wherever it ends inside the panel and a masked
 * one at its end; a partial group after others (width 14, say) would clobber the first group's
 * columns, so all its stores are masked. */
static void interleave_group(const float *const *rows, int64_t count, int64_t width, int64_t kc, int64_t r0, float *dst)
{
    int64_t lanes = width - r0 < 8 ? width - r0 : 8;
    __m256i store_mask = lane_mask(lanes);
    for (int64_t p0 = 0; p0 < kc; p0 += 8) {
        int64_t steps = kc - p0 < 8 ? kc - p0 : 8;
        __m256i load_mask = lane_mask(steps);
        __m256 r[8];
        for (int q = 0; q < 8; q++) {
            int64_t row = r0 + q;
            if (row < count && (p0 & 15) == 0 && p0 + 64 < kc) /* a line 4 ahead (as the generic packing) */
                _mm_prefetch((const char *)(rows[row] + p0 + 64), _MM_HINT_T0);
            if (row >= count)
                r[q] = _mm256_setzero_ps();
            else if (steps == 8)
                r[q] = _mm256_loadu_ps(rows[row] + p0);
            else
                r[q] = _mm256_maskload_ps(rows[row] + p0, load_mask);
        }
        transpose8(r);
        for (int64_t q = 0; q < steps; q++) {
            float *to = dst + (p0 + q) * width + r0;
            if (lanes == 8 || (r0 == 0 && (p0 + q) * width + 8 <= kc * width))
                _mm256_storeu_ps(to, r[q]);
            else
                _mm256_maskstore_ps(to, store_mask, r[q]);
        }
    }
}

void cvf_cpu_interleave_f32_avx2(const float *const *rows, int64_t count, int64_t width, int64_t kc, float *dst)
{
    for (int64_t r0 = 0; r0 < width; r0 += 8)
        interleave_group(rows, count, width, kc, r0, dst);
}

/* ---- dot-product tiles for short products with a transposed B ------------------------------ */

/* The sums of the 8 lanes of each of w, x, y, z, in that order. */
static inline __m128 hsum4(__m256 w, __m256 x, __m256 y, __m256 z)
{
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(w, x), _mm256_hadd_ps(y, z));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* The running sums of a dot tile (2 A rows x 4 B rows, or 4 x 3), 8 lanes of k each: s[i][j] for
 * A row i, B row j. */
typedef struct dot_sums {
    __m256 s[4][4];
} dot_sums;

/* Bytes of one element of a B of dtype bt (f32, f16 or bf16). */
static inline __attribute__((always_inline)) int64_t b_size(cvf_dtype bt)
{
    return bt == CVF_F32 ? 4 : 2;
}

/* Elements p .. p + 7 of the B row at row, as fp32 (f16 through F16C, bf16 by a 16-bit shift:
 * both exact). */
static inline __attribute__((always_inline)) __m256 load_b8(const void *row, int64_t p, cvf_dtype bt)
{
    if (bt == CVF_F32)
        return _mm256_loadu_ps((const float *)row + p);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + p));
    if (bt == CVF_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Elements p .. p + count - 1 (count in 1..7) of the B row at row as fp32, zeros after; reads
 * nothing beyond. */
static inline __attribute__((always_inline)) __m256 load_b_tail(const void *row, int64_t p, int64_t count,
                                                                 cvf_dtype bt)
{
    if (bt == CVF_F32)
        return _mm256_maskload_ps((const float *)row + p, lane_mask(count));
    uint16_t buf[8] = {0};
    /* (count < 8 by contract; the bound lets gcc's -Wstringop-overflow see it through the row
     * tiles' inlining, where it could not) */
    memcpy(buf, (const uint16_t *)row + p, (size_t)(count < 8 ? count : 8) * sizeof(uint16_t));
    return load_b8(buf, 0, bt);
}

/* Asks for the cache line holding element p of the B row at row. */
static inline __attribute__((always_inline)) void prefetch_b(const void *row, int64_t p, cvf_dtype bt)
{
    _mm_prefetch((const char *)row + p * b_size(bt), _MM_HINT_T0);
}

/* Adds to *sums the products of two A rows and four B rows (any of them repeated by the caller
 * past an edge) over k = p .. end - 1, 8 values at a time; a last partial step (end - p not a
 * multiple of 8: the product's end) through masked loads. With next, asks for the same lines of
 * the next four B rows. The sums stay in registers for the whole range. B is of dtype bt, A fp32. */
static inline __attribute__((always_inline)) void dot_2x4(int64_t p, int64_t end, const float *const a[2],
                                                          const void *const b[4], const void *const next[4],
                                                          dot_sums *sums, cvf_dtype bt)
{
    __m256 s00 = sums->s[0][0], s01 = sums->s[0][1], s02 = sums->s[0][2], s03 = sums->s[0][3];
    __m256 s10 = sums->s[1][0], s11 = sums->s[1][1], s12 = sums->s[1][2], s13 = sums->s[1][3];
    const float *a0 = a[0], *a1 = a[1];
    const void *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
    for (; p + 8 <= end; p += 8) {
        if (next && ((p * b_size(bt)) & 63) == 0) /* the same line of the next four B rows */
            for (int j = 0; j < 4; j++)
                prefetch_b(next[j], p, bt);
        __m256 x0 = _mm256_loadu_ps(a0 + p), x1 = _mm256_loadu_ps(a1 + p), y;
        y = load_b8(b0, p, bt), s00 = _mm256_fmadd_ps(x0, y, s00), s10 = _mm256_fmadd_ps(x1, y, s10);
        y = load_b8(b1, p, bt), s01 = _mm256_fmadd_ps(x0, y, s01), s11 = _mm256_fmadd_ps(x1, y, s11);
        y = load_b8(b2, p, bt), s02 = _mm256_fmadd_ps(x0, y, s02), s12 = _mm256_fmadd_ps(x1, y, s12);
        y = load_b8(b3, p, bt), s03 = _mm256_fmadd_ps(x0, y, s03), s13 = _mm256_fmadd_ps(x1, y, s13);
    }
    if (p < end) {
        int64_t count = end - p;
        __m256i mask = lane_mask(count);
        __m256 x0 = _mm256_maskload_ps(a0 + p, mask), x1 = _mm256_maskload_ps(a1 + p, mask), y;
        y = load_b_tail(b0, p, count, bt), s00 = _mm256_fmadd_ps(x0, y, s00), s10 = _mm256_fmadd_ps(x1, y, s10);
        y = load_b_tail(b1, p, count, bt), s01 = _mm256_fmadd_ps(x0, y, s01), s11 = _mm256_fmadd_ps(x1, y, s11);
        y = load_b_tail(b2, p, count, bt), s02 = _mm256_fmadd_ps(x0, y, s02), s12 = _mm256_fmadd_ps(x1, y, s12);
        y = load_b_tail(b3, p, count, bt), s03 = _mm256_fmadd_ps(x0, y, s03), s13 = _mm256_fmadd_ps(x1, y, s13);
    }
    sums->s[0][0] = s00, sums->s[0][1] = s01, sums->s[0][2] = s02, sums->s[0][3] = s03;
    sums->s[1][0] = s10, sums->s[1][1] = s11, sums->s[1][2] = s12, sums->s[1][3] = s13;
}

/* dot_2x4 for four A rows and three B rows: 12 independent sums (8 left the two FMA pipes waiting
 * on their 4-cycle latency: 68% of a core's peak in L1 against 86% for these) and 7 loads per 12
 * FMAs instead of 6 per 8. */
static inline __attribute__((always_inline)) void dot_4x3(int64_t p, int64_t end, const float *const a[4],
                                                          const void *const b[3], const void *const next[3],
                                                          dot_sums *sums, cvf_dtype bt)
{
    __m256 s00 = sums->s[0][0], s01 = sums->s[0][1], s02 = sums->s[0][2];
    __m256 s10 = sums->s[1][0], s11 = sums->s[1][1], s12 = sums->s[1][2];
    __m256 s20 = sums->s[2][0], s21 = sums->s[2][1], s22 = sums->s[2][2];
    __m256 s30 = sums->s[3][0], s31 = sums->s[3][1], s32 = sums->s[3][2];
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const void *b0 = b[0], *b1 = b[1], *b2 = b[2];
    for (; p + 8 <= end; p += 8) {
        if (next && ((p * b_size(bt)) & 63) == 0) /* the same line of the next three B rows */
            for (int j = 0; j < 3; j++)
                prefetch_b(next[j], p, bt);
        __m256 y0 = load_b8(b0, p, bt), y1 = load_b8(b1, p, bt), y2 = load_b8(b2, p, bt), x;
        x = _mm256_loadu_ps(a0 + p);
        s00 = _mm256_fmadd_ps(x, y0, s00), s01 = _mm256_fmadd_ps(x, y1, s01), s02 = _mm256_fmadd_ps(x, y2, s02);
        x = _mm256_loadu_ps(a1 + p);
        s10 = _mm256_fmadd_ps(x, y0, s10), s11 = _mm256_fmadd_ps(x, y1, s11), s12 = _mm256_fmadd_ps(x, y2, s12);
        x = _mm256_loadu_ps(a2 + p);
        s20 = _mm256_fmadd_ps(x, y0, s20), s21 = _mm256_fmadd_ps(x, y1, s21), s22 = _mm256_fmadd_ps(x, y2, s22);
        x = _mm256_loadu_ps(a3 + p);
        s30 = _mm256_fmadd_ps(x, y0, s30), s31 = _mm256_fmadd_ps(x, y1, s31), s32 = _mm256_fmadd_ps(x, y2, s32);
    }
    if (p < end) {
        int64_t count = end - p;
        __m256i mask = lane_mask(count);
        __m256 y0 = load_b_tail(b0, p, count, bt), y1 = load_b_tail(b1, p, count, bt),
               y2 = load_b_tail(b2, p, count, bt), x;
        x = _mm256_maskload_ps(a0 + p, mask);
        s00 = _mm256_fmadd_ps(x, y0, s00), s01 = _mm256_fmadd_ps(x, y1, s01), s02 = _mm256_fmadd_ps(x, y2, s02);
        x = _mm256_maskload_ps(a1 + p, mask);
        s10 = _mm256_fmadd_ps(x, y0, s10), s11 = _mm256_fmadd_ps(x, y1, s11), s12 = _mm256_fmadd_ps(x, y2, s12);
        x = _mm256_maskload_ps(a2 + p, mask);
        s20 = _mm256_fmadd_ps(x, y0, s20), s21 = _mm256_fmadd_ps(x, y1, s21), s22 = _mm256_fmadd_ps(x, y2, s22);
        x = _mm256_maskload_ps(a3 + p, mask);
        s30 = _mm256_fmadd_ps(x, y0, s30), s31 = _mm256_fmadd_ps(x, y1, s31), s32 = _mm256_fmadd_ps(x, y2, s32);
    }
    sums->s[0][0] = s00, sums->s[0][1] = s01, sums->s[0][2] = s02;
    sums->s[1][0] = s10, sums->s[1][1] = s11, sums->s[1][2] = s12;
    sums->s[2][0] = s20, sums->s[2][1] = s21, sums->s[2][2] = s22;
    sums->s[3][0] = s30, sums->s[3][1] = s31, sums->s[3][2] = s32;
}

/* The most A rows and B rows one blocked dot tile takes (16 tokens by the AVX2 kernel's NR);
 * larger m or n (the planner's up to 32 tokens; the AVX-512 level's NR of 32 calls this code too)
 * run as several. */
#define DOT_ROWS 16
#define DOT_COLS 16

/* k values per block: the block's slices of the tile's m rows of A (4 bytes a value) and n rows of
 * B (size bytes a value) fit in about 20 KB, so that while every group of A rows meets every group
 * of B rows they are read from L1. */
static int64_t dot_block_depth(int64_t m, int64_t n, int64_t size)
{
    int64_t depth = 20 * 1024 / (4 * m + size * n) / 8 * 8;
    return depth < 64 ? 64 : depth;
}

/* Sets every sum of a group to zero. */
static inline void zero_sums(dot_sums *sums)
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            sums->s[i][j] = _mm256_setzero_ps();
}

/* Pointers to `count` rows of the fp32 x (ld floats apart) from row `first`, a row past `last`
 * repeating it. */
static inline void row_group(const float *x, int64_t ld, int64_t first, int64_t last, int count, const float **rows)
{
    for (int r = 0; r < count; r++)
        rows[r] = x + (first + r <= last ? first + r : last) * ld;
}

/* The same for B, ld elements of `size` bytes apart. */
static inline void b_row_group(const void *x, int64_t ld, int64_t size, int64_t first, int64_t last, int count,
                               const void **rows)
{
    for (int r = 0; r < count; r++)
        rows[r] = (const char *)x + (first + r <= last ? first + r : last) * ld * size;
}

/* Writes the sums of a rows x cols group at (i0, j0) of c, within its m x n corner. */
static void store_group(const dot_sums *sums, int rows, int cols, float *c, int64_t ldc, int64_t i0, int64_t j0,
                        int64_t m, int64_t n)
{
    for (int r = 0; r < rows && i0 + r < m; r++) {
        float out[4];
        _mm_storeu_ps(out, hsum4(sums->s[r][0], sums->s[r][1], sums->s[r][2], sums->s[r][3]));
        for (int j = 0; j < cols && j0 + j < n; j++)
            c[(i0 + r) * ldc + j0 + j] = out[j];
    }
}

/*
 * c[i * ldc + j] = the dot products of A rows i < m <= DOT_ROWS and B rows j < n <= DOT_COLS over
 * k, B of dtype bt (converted to fp32 as it is loaded). Rows go in groups of four through dot_4x3
 * while three or more are left (a third row's group repeats its last row), the last one or two
 * through dot_2x4; B rows in threes and fours for them (a partial group repeats its last row). K
 * goes in blocks (dot_block_depth): each block's slices come from memory once and are reused from
 * L1 (the unblocked tile read all of A again for every four B rows, from L2: 35-45 GFLOP/s on a
 * core at 16 rows). The lanes' sums carry from block to block in memory, so every lane adds the
 * same products in the same order as one pass over k.
 */
static inline __attribute__((always_inline)) void dot_tile(int64_t k, const float *a, int64_t lda, int64_t m,
                                                           const void *b, cvf_dtype bt, int64_t ldb, int64_t n,
                                                           float *c, int64_t ldc)
{
    int64_t quads = m / 4 + (m % 4 == 3), pair_row = 4 * quads; /* rows pair_row.. (1 or 2) in a pair */
    bool pair = pair_row < m;
    int64_t triples = (n + 2) / 3, fours = (n + 3) / 4, size = b_size(bt), depth = dot_block_depth(m, n, size);
    const float *rows4[DOT_ROWS / 4][4], *rows2[2];
    const void *cols3[(DOT_COLS + 2) / 3][3], *cols4[DOT_COLS / 4][4];
    for (int64_t i = 0; i < quads; i++)
        row_group(a, lda, 4 * i, m - 1, 4, rows4[i]);
    row_group(a, lda, pair_row < m ? pair_row : m - 1, m - 1, 2, rows2); /* used only with pair */
    for (int64_t q = 0; q < triples; q++)
        b_row_group(b, ldb, size, 3 * q, n - 1, 3, cols3[q]);
    for (int64_t q = 0; q < fours; q++)
        b_row_group(b, ldb, size, 4 * q, n - 1, 4, cols4[q]);
    dot_sums sums4[DOT_ROWS / 4][(DOT_COLS + 2) / 3], sums2[DOT_COLS / 4];
    for (int64_t i = 0; i < quads; i++) /* only the groups in use (the arrays are 14 KB) */
        for (int64_t q = 0; q < triples; q++)
            zero_sums(&sums4[i][q]);
    for (int64_t q = 0; pair && q < fours; q++)
        zero_sums(&sums2[q]);
    const void *ahead3[3], *ahead4[4]; /* the first B rows one block on: the next block's slices */
    for (int j = 0; j < 3; j++)
        ahead3[j] = (const char *)cols3[0][j] + depth * size;
    for (int j = 0; j < 4; j++)
        ahead4[j] = (const char *)cols4[0][j] + depth * size;
    /* the first row group streams the B slices from memory: it asks for the next group of B rows'
     * (the hardware prefetchers, each row a short stream, left loads waiting on DRAM: 3x slower than
     * OpenBLAS when the weights were not in cache), the last group for the next block's first */
    for (int64_t p0 = 0; p0 < k; p0 += depth) {
        int64_t end = k - p0 < depth ? k : p0 + depth;
        for (int64_t q = 0; q < triples; q++) {
            const void *const *next = q + 1 < triples ? cols3[q + 1] : end < k ? ahead3 : NULL;
            for (int64_t i = 0; i < quads; i++)
                dot_4x3(p0, end, rows4[i], cols3[q], i == 0 ? next : NULL, &sums4[i][q], bt);
        }
        for (int64_t q = 0; pair && q < fours; q++) { /* B's slices in L1 already when quads ran */
            const void *const *next = quads > 0 ? NULL : q + 1 < fours ? cols4[q + 1] : end < k ? ahead4 : NULL;
            dot_2x4(p0, end, rows2, cols4[q], next, &sums2[q], bt);
        }
    }
    for (int64_t i = 0; i < quads; i++)
        for (int64_t q = 0; q < triples; q++)
            store_group(&sums4[i][q], 4, 3, c, ldc, 4 * i, 3 * q, m, n);
    for (int64_t q = 0; pair && q < fours; q++)
        store_group(&sums2[q], 2, 4, c, ldc, pair_row, 4 * q, m, n);
}

/* dot_tile over all of an m x n product for one B dtype (a specialisation each: the loads'
 * conversion is decided at compile time). */
static inline __attribute__((always_inline)) void dot_all(int64_t k, const float *a, int64_t lda, int64_t m,
                                                          const void *b, cvf_dtype bt, int64_t ldb, int64_t n,
                                                          float *c, int64_t ldc)
{
    for (int64_t i0 = 0; i0 < m; i0 += DOT_ROWS)
        for (int64_t j0 = 0; j0 < n; j0 += DOT_COLS)
            dot_tile(k, a + i0 * lda, lda, m - i0 < DOT_ROWS ? m - i0 : DOT_ROWS,
                     (const char *)b + j0 * ldb * b_size(bt), bt, ldb, n - j0 < DOT_COLS ? n - j0 : DOT_COLS,
                     c + i0 * ldc + j0, ldc);
}

static void dot_f32(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, int64_t ldb, int64_t n, float *c,
                    int64_t ldc)
{
    dot_all(k, a, lda, m, b, CVF_F32, ldb, n, c, ldc);
}

static void dot_f16(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, int64_t ldb, int64_t n, float *c,
                    int64_t ldc)
{
    dot_all(k, a, lda, m, b, CVF_F16, ldb, n, c, ldc);
}

static void dot_bf16(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, int64_t ldb, int64_t n,
                     float *c, int64_t ldc)
{
    dot_all(k, a, lda, m, b, CVF_BF16, ldb, n, c, ldc);
}

void cvf_cpu_dot_avx2(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype, int64_t ldb,
                      int64_t n, float *c, int64_t ldc)
{
    switch (b_dtype) {
    case CVF_F16: dot_f16(k, a, lda, m, b, ldb, n, c, ldc); break;
    case CVF_BF16: dot_bf16(k, a, lda, m, b, ldb, n, c, ldc); break;
    default: dot_f32(k, a, lda, m, b, ldb, n, c, ldc); break;
    }
}

/* ---- row tiles for short products with a row-major B --------------------------------------- */

/* A rows per group of the row tiles: 6 x 2 accumulators, 2 B vectors and a broadcast in 16 ymm. */
#define ROWS_GROUP 6

/* B rows ahead that the first row group asks for: each B row of a tile is its own line (the rows
 * are a whole weight row apart), so the prefetchers see k short streams. */
#define ROWS_PREFETCH 16

/* K rows per block when there are several row groups: the first group copies the block's slice
 * of a 16-column chunk (converted to fp32) into a 16 KB buffer that the later groups read from
 * L1. In place they would not find it there: B's rows lie a weight row apart, and where that is a
 * multiple of 4 KB (3072 fp32 columns: 12 KB) every row's line falls in the same L1 set. */
#define ROWS_DEPTH 256

/* Columns 0..15 of the B row at row as two fp32 vectors; with full false only the first cols
 * (1..15) are read and the rest are zero. */
static inline __attribute__((always_inline)) void load_b16(const void *row, bool full, int64_t cols, cvf_dtype bt,
                                                           __m256 *lo, __m256 *hi)
{
    if (full) {
        *lo = load_b8(row, 0, bt);
        *hi = load_b8(row, 8, bt);
    } else if (cols > 8) {
        *lo = load_b8(row, 0, bt);
        *hi = load_b_tail(row, 8, cols - 8, bt);
    } else {
        *lo = cols == 8 ? load_b8(row, 0, bt) : load_b_tail(row, 0, cols, bt);
        *hi = _mm256_setzero_ps();
    }
}

/*
 * Rows i < R (R <= ROWS_GROUP, a constant where inlined) of a 16-column chunk over k = p0 .. end - 1:
 * acc[i][j] (+)= sum of a[i * lda + p] * B(p, j). B(p, j) is read from the slice copy
 * (slice[(p - p0) * 16 + j], from_slice) or in place (b + (p * ldb + j) * size, dtype bt, the
 * first cols columns: all 16 when full), then, where slice is given, written to the copy (zeros
 * past cols). The sums start from zero (first) or from c, and go back to c's first cols columns.
 */
static inline __attribute__((always_inline)) void rows_group(int R, bool from_slice, bool full, int64_t p0,
                                                             int64_t end, int64_t k, const float *a, int64_t lda,
                                                             const void *b, int64_t ldb, cvf_dtype bt, int64_t cols,
                                                             bool first, float *slice, float *c, int64_t ldc)
{
    int64_t size = b_size(bt), row_bytes = ldb * size, last_byte = (full ? 16 : cols) * size - 1;
    __m256i mask_lo = lane_mask(cols > 8 ? 8 : cols), mask_hi = lane_mask(cols > 8 ? cols - 8 : 0);
    __m256 acc[ROWS_GROUP][2];
    for (int r = 0; r < R; r++) {
        if (first) {
            acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        } else if (full) {
            acc[r][0] = _mm256_loadu_ps(c + r * ldc);
            acc[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
        } else {
            acc[r][0] = _mm256_maskload_ps(c + r * ldc, mask_lo);
            acc[r][1] = _mm256_maskload_ps(c + r * ldc + 8, mask_hi);
        }
    }
    for (int64_t p = p0; p < end; p++) {
        __m256 lo, hi;
        if (from_slice) {
            lo = _mm256_load_ps(slice + (p - p0) * 16);
            hi = _mm256_load_ps(slice + (p - p0) * 16 + 8);
        } else {
            const char *row = (const char *)b + p * row_bytes;
            if (p + ROWS_PREFETCH < k) {
                const char *line = row + ROWS_PREFETCH * row_bytes;
                _mm_prefetch(line, _MM_HINT_T0);
                _mm_prefetch(line + last_byte, _MM_HINT_T0); /* the chunk's second line, if it has one */
            }
            load_b16(row, full, cols, bt, &lo, &hi);
            if (slice) {
                _mm256_store_ps(slice + (p - p0) * 16, lo);
                _mm256_store_ps(slice + (p - p0) * 16 + 8, hi);
            }
        }
        for (int r = 0; r < R; r++) {
            __m256 x = _mm256_broadcast_ss(a + r * lda + p);
            acc[r][0] = _mm256_fmadd_ps(x, lo, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, hi, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        if (full) {
            _mm256_storeu_ps(c + r * ldc, acc[r][0]);
            _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
        } else {
            _mm256_maskstore_ps(c + r * ldc, mask_lo, acc[r][0]);
            _mm256_maskstore_ps(c + r * ldc + 8, mask_hi, acc[r][1]);
        }
    }
}

/* rows_group for the rows left (1..ROWS_GROUP), each count its own specialisation. */
static inline __attribute__((always_inline)) void rows_group_any(int64_t rows, bool from_slice, bool full, int64_t p0,
                                                                 int64_t end, int64_t k, const float *a, int64_t lda,
                                                                 const void *b, int64_t ldb, cvf_dtype bt,
                                                                 int64_t cols, bool first, float *slice, float *c,
                                                                 int64_t ldc)
{
    switch (rows) {
    case 1: rows_group(1, from_slice, full, p0, end, k, a, lda, b, ldb, bt, cols, first, slice, c, ldc); break;
    case 2: rows_group(2, from_slice, full, p0, end, k, a, lda, b, ldb, bt, cols, first, slice, c, ldc); break;
    case 3: rows_group(3, from_slice, full, p0, end, k, a, lda, b, ldb, bt, cols, first, slice, c, ldc); break;
    case 4: rows_group(4, from_slice, full, p0, end, k, a, lda, b, ldb, bt, cols, first, slice, c, ldc); break;
    case 5: rows_group(5, from_slice, full, p0, end, k, a, lda, b, ldb, bt, cols, first, slice, c, ldc); break;
    default:
        rows_group(ROWS_GROUP, from_slice, full, p0, end, k, a, lda, b, ldb, bt, cols, first, slice, c, ldc);
        break;
    }
}

/* One chunk of 16 columns (the first cols of them) for one K block: the first row group reads B
 * in place (copying the block's slice when more groups follow), the others read the copy. */
static inline __attribute__((always_inline)) void rows_chunk(bool full, int64_t p0, int64_t end, int64_t k,
                                                             const float *a, int64_t lda, int64_t m, const void *b,
                                                             int64_t ldb, cvf_dtype bt, int64_t cols, float *slice,
                                                             float *c, int64_t ldc)
{
    float *copy = m > ROWS_GROUP ? slice : NULL;
    rows_group_any(m < ROWS_GROUP ? m : ROWS_GROUP, false, full, p0, end, k, a, lda, b, ldb, bt, cols, p0 == 0, copy,
                   c, ldc);
    for (int64_t i0 = ROWS_GROUP; i0 < m; i0 += ROWS_GROUP)
        rows_group_any(m - i0 < ROWS_GROUP ? m - i0 : ROWS_GROUP, true, full, p0, end, k, a + i0 * lda, lda, b, ldb,
                       bt, cols, p0 == 0, slice, c + i0 * ldc, ldc);
}

/*
 * All of an m x n product with a row-major B for one B dtype, 16 columns at a time. With one row
 * group, each chunk's B rows are read once, straight through k. With more, K goes in blocks of
 * ROWS_DEPTH whose slice the first group copies for the others; the sums go through c between
 * blocks, and every lane still adds its products in order of p.
 */
static inline __attribute__((always_inline)) void rows_all(int64_t k, const float *a, int64_t lda, int64_t m,
                                                           const void *b, cvf_dtype bt, int64_t ldb, int64_t n,
                                                           float *c, int64_t ldc)
{
    float slice[ROWS_DEPTH * 16] __attribute__((aligned(32)));
    int64_t size = b_size(bt), depth = m <= ROWS_GROUP ? k : ROWS_DEPTH;
    for (int64_t p0 = 0; p0 < k; p0 += depth) {
        int64_t end = k - p0 < depth ? k : p0 + depth;
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            const char *chunk = (const char *)b + j0 * size;
            if (n - j0 >= 16)
                rows_chunk(true, p0, end, k, a, lda, m, chunk, ldb, bt, 16, slice, c + j0, ldc);
            else
                rows_chunk(false, p0, end, k, a, lda, m, chunk, ldb, bt, n - j0, slice, c + j0, ldc);
        }
    }
}

static void rows_f32(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, int64_t ldb, int64_t n,
                     float *c, int64_t ldc)
{
    rows_all(k, a, lda, m, b, CVF_F32, ldb, n, c, ldc);
}

static void rows_f16(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, int64_t ldb, int64_t n,
                     float *c, int64_t ldc)
{
    rows_all(k, a, lda, m, b, CVF_F16, ldb, n, c, ldc);
}

static void rows_bf16(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, int64_t ldb, int64_t n,
                      float *c, int64_t ldc)
{
    rows_all(k, a, lda, m, b, CVF_BF16, ldb, n, c, ldc);
}

void cvf_cpu_rows_avx2(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype,
                       int64_t ldb, int64_t n, float *c, int64_t ldc)
{
    switch (b_dtype) {
    case CVF_F16: rows_f16(k, a, lda, m, b, ldb, n, c, ldc); break;
    case CVF_BF16: rows_bf16(k, a, lda, m, b, ldb, n, c, ldc); break;
    default: rows_f32(k, a, lda, m, b, ldb, n, c, ldc); break;
    }
}

/* ---- stream tiles: one to four rows through a row-major B, row after row -------------------- */

/* c[r][j .. j + count) += the products of the D (4 or 1) B rows from b (row_bytes apart) at column
 * j with x[r][0 .. D), in order of the rows; count 8, or 1..7 at the end of the row (masked). */
static inline __attribute__((always_inline)) void stream_step(int R, int D, const __m256 x[][4], const char *b,
                                                              int64_t row_bytes, cvf_dtype bt, int64_t j,
                                                              int64_t count, float *c, int64_t ldc)
{
    __m256 v[4];
    for (int d = 0; d < D; d++)
        v[d] = count == 8 ? load_b8(b + d * row_bytes, j, bt) : load_b_tail(b + d * row_bytes, j, count, bt);
    __m256i mask = lane_mask(count);
    for (int r = 0; r < R; r++) {
        float *out = c + r * ldc + j;
        __m256 s = count == 8 ? _mm256_loadu_ps(out) : _mm256_maskload_ps(out, mask);
        for (int d = 0; d < D; d++)
            s = _mm256_fmadd_ps(x[r][d], v[d], s);
        if (count == 8)
            _mm256_storeu_ps(out, s);
        else
            _mm256_maskstore_ps(out, mask, s);
    }
}

/* stream_step across all n columns of the D B rows at b: 8 at a time, then the tail. */
static inline __attribute__((always_inline)) void stream_across(int R, int D, const __m256 x[][4], const char *b,
                                                                int64_t row_bytes, cvf_dtype bt, int64_t n, float *c,
                                                                int64_t ldc)
{
    int64_t full = n / 8 * 8;
    for (int64_t j = 0; j < full; j += 8)
        stream_step(R, D, x, b, row_bytes, bt, j, 8, c, ldc);
    if (full < n)
        stream_step(R, D, x, b, row_bytes, bt, full, n - full, c, ldc);
}

/*
 * The row tiles' product for R (1 to CVF_CPU_STREAM_MAX_ROWS) rows, B read row after row: four B
 * rows at a time (then the last k % 4 one by one) go through all n columns, each sum adding their
 * products in order of p into c (L1 for the planner's chunks). The rows of B stream straight
 * through memory, where the row tiles walk a 64-column strip down K, a page per B row (one row
 * through a 3072-wide f32 B: ~9 GB/s).
 */
static inline __attribute__((always_inline)) void stream_all(int R, int64_t k, const float *a, int64_t lda,
                                                             const void *b, cvf_dtype bt, int64_t ldb, int64_t n,
                                                             float *c, int64_t ldc)
{
    int64_t row_bytes = ldb * b_size(bt);
    for (int r = 0; r < R; r++)
        memset(c + r * ldc, 0, sizeof(float) * (size_t)n);
    __m256 x[CVF_CPU_STREAM_MAX_ROWS][4]; /* A's values; past 2 rows partly on the stack: loads as A's */
    for (int64_t p = 0; p < k;) {
        int D = k - p >= 4 ? 4 : 1;
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++)
                x[r][d] = _mm256_broadcast_ss(a + r * lda + p + d);
        const char *rows = (const char *)b + p * row_bytes;
        if (D == 4)
            stream_across(R, 4, x, rows, row_bytes, bt, n, c, ldc);
        else
            stream_across(R, 1, x, rows, row_bytes, bt, n, c, ldc);
        p += D;
    }
}

/* stream_all with the B dtype and R constant in each instance. */
typedef void (*stream_fn)(int64_t k, const float *a, int64_t lda, const void *b, int64_t ldb, int64_t n, float *c,
                          int64_t ldc);
#define STREAM_INSTANCE(name, R, bt)                                                                              \
    static void name(int64_t k, const float *a, int64_t lda, const void *b, int64_t ldb, int64_t n, float *c,     \
                     int64_t ldc)                                                                                 \
    {                                                                                                             \
        stream_all(R, k, a, lda, b, bt, ldb, n, c, ldc);                                                          \
    }
#define STREAM_INSTANCES(dtype, bt)                                                                               \
    STREAM_INSTANCE(stream_1_##dtype, 1, bt)                                                                      \
    STREAM_INSTANCE(stream_2_##dtype, 2, bt)                                                                      \
    STREAM_INSTANCE(stream_3_##dtype, 3, bt)                                                                      \
    STREAM_INSTANCE(stream_4_##dtype, 4, bt)                                                                      \
    static const stream_fn stream_##dtype[CVF_CPU_STREAM_MAX_ROWS] = {stream_1_##dtype, stream_2_##dtype,         \
                                                                      stream_3_##dtype, stream_4_##dtype};
STREAM_INSTANCES(f32, CVF_F32)
STREAM_INSTANCES(f16, CVF_F16)
STREAM_INSTANCES(bf16, CVF_BF16)
#undef STREAM_INSTANCES
#undef STREAM_INSTANCE
_Static_assert(CVF_CPU_STREAM_MAX_ROWS == 4, "an instance per row count");

void cvf_cpu_stream_avx2(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype,
                         int64_t ldb, int64_t n, float *c, int64_t ldc)
{
    int64_t r = (m < 1 ? 1 : m > CVF_CPU_STREAM_MAX_ROWS ? CVF_CPU_STREAM_MAX_ROWS : m) - 1; /* m in 1..4 */
    const stream_fn *fns = b_dtype == CVF_F16 ? stream_f16 : b_dtype == CVF_BF16 ? stream_bf16 : stream_f32;
    fns[r](k, a, lda, b, ldb, n, c, ldc);
}

#else
typedef int cvf_cpu_f32_avx2_unavailable; /* not an x86 target: nothing to compile */
#endif

/*
 * AVX-512 fp32 micro-kernel, 14 x 32 (see kernels.h for the contract). Compiled with the AVX512
 * level's flags; runs only where cvf_cpu_isa_supported(CVF_CPU_ISA_AVX512) holds.
 *
 * Shape: 28 zmm accumulators (14 rows x 2 vectors of 16 columns), B loaded as 2 zmm per k and
 * each A element broadcast once per k: 28 FMAs against 2 vector loads and 14 scalar broadcasts,
 * enough independent chains to cover the FMA latency of two 512-bit pipes (Zen 4/5, Skylake-X).
 * A KC x 32 B micro-panel (24 KB at kc = 188) stays in L1 while 14-row A micro-panels stream from
 * L2. The k loop is inline assembly on fixed registers, unrolled by 4, with one prefetch per new
 * cache line of A 16 steps ahead; it ends by storing the 28 accumulators to a 64-byte aligned
 * tile on the stack, from which the stores read them (28 stores and loads against ~5000 FMAs at
 * kc = 188). C's rows are requested from inside the loop, one row per iteration, in its last
 * iterations. Edge tiles (m < 14 or n < 32) use masked loads and stores, the full tile plain ones.
 *
 * Tried on Zen 5 and not kept: FMAs with an embedded broadcast of A (vfmadd231ps m32{1to16}:
 * twice the loads, ~6% slower), 12x32, 10x32, 8x48 and 6x64 (within noise of 14x32), prefetch
 * distances 8 and 32 (same as 16), k unrolled by 8 (same as 4).
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu/kernels/store_avx512.h"

#define MR CVF_CPU_F32_AVX512_MR
#define NR CVF_CPU_F32_AVX512_NR

/* Bytes ahead of the current k step at which the A panel is prefetched (A is 56 bytes a step:
 * 16 steps). */
#ifndef C_LEAD
#define C_LEAD 4
#endif

#ifndef A_PREFETCH
#define A_PREFETCH "896"
#endif

/* Vectors of 16 columns per row of the tile. */
#define NV (NR / 16)

/* Row i of step s: A[i, s] broadcast into zmm `bc`, times the two B vectors (zmm0, zmm1) into the
 * row's accumulators zmm(4 + 2 i) and zmm(5 + 2 i). */
#define ROW(s, i, bc, c0, c1)                                                                                          \
    "vbroadcastss " #s "*56+" #i "*4(%[a]), %%zmm" #bc "\n\t"                                                          \
    "vfmadd231ps %%zmm0, %%zmm" #bc ", %%zmm" #c0 "\n\t"                                                               \
    "vfmadd231ps %%zmm1, %%zmm" #bc ", %%zmm" #c1 "\n\t"

/* One k step at step s of the unrolled body (A at s * 56 bytes, B at s * 128). */
#define STEP(s)                                                                                                        \
    "vmovaps " #s "*128(%[b]), %%zmm0\n\t"                                                                             \
    "vmovaps " #s "*128+64(%[b]), %%zmm1\n\t" ROW(s, 0, 2, 4, 5) ROW(s, 1, 3, 6, 7) ROW(s, 2, 2, 8, 9)                 \
        ROW(s, 3, 3, 10, 11) ROW(s, 4, 2, 12, 13) ROW(s, 5, 3, 14, 15) ROW(s, 6, 2, 16, 17) ROW(s, 7, 3, 18, 19)       \
            ROW(s, 8, 2, 20, 21) ROW(s, 9, 3, 22, 23) ROW(s, 10, 2, 24, 25) ROW(s, 11, 3, 26, 27)                      \
                ROW(s, 12, 2, 28, 29) ROW(s, 13, 3, 30, 31)

#define ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define SAVE(r) "vmovaps %%zmm" #r ", (" #r "-4)*64(%[acc])\n\t"

/* acc = A B over kc steps of the packed micro-panels (acc is overwritten; row i, vector v at
 * acc[i][v]). The k loop is inline assembly on fixed registers: B in zmm0-1, A broadcasts in
 * zmm2-3, the 28 accumulators in zmm4-31. Compiled from intrinsics, gcc 12 kept one accumulator
 * on the stack (a store and a reload per 4 k steps) and shuffled others with register moves:
 * 84% of the FMA peak in L1/L2 against 9x% for this loop (PERF.md, "AVX-512 fp32 kernel at BLAS
 * speed"). */
static inline __attribute__((always_inline)) void tile_product(int64_t kc, const float *a, const float *b,
                                                               __m512 acc[MR][NV], const char *c, int64_t ldc_bytes,
                                                               int64_t m)
{
    int64_t quads = kc / 4, rest = kc % 4;
    /* C's rows are requested one per iteration of the main loop, from the iteration with
     * C_LEAD + m iterations left: all at once before the loop, 28 lines missing to L3 filled the
     * line-fill buffers and stalled the loop (11% of the kernel's samples in a 2048^3 product) */
    int64_t pf_from = m + C_LEAD;
    const char *c_end = c + m * ldc_bytes;
    __asm__ volatile(ZERO(4) ZERO(5) ZERO(6) ZERO(7) ZERO(8) ZERO(9) ZERO(10) ZERO(11) ZERO(12) ZERO(13) ZERO(14)
                         ZERO(15) ZERO(16) ZERO(17) ZERO(18) ZERO(19) ZERO(20) ZERO(21) ZERO(22) ZERO(23) ZERO(24)
                             ZERO(25) ZERO(26) ZERO(27) ZERO(28) ZERO(29) ZERO(30) ZERO(31)
                     "test %[quads], %[quads]\n\t"
                     "jz 2f\n\t"
                     ".p2align 5\n"
                     "1:\n\t"
                     "prefetcht0 " A_PREFETCH "(%[a])\n\t" STEP(0) "prefetcht0 " A_PREFETCH "+64(%[a])\n\t" STEP(1)
                     "prefetcht0 " A_PREFETCH "+128(%[a])\n\t" STEP(2) "prefetcht0 " A_PREFETCH "+192(%[a])\n\t" STEP(3)
                     "cmp %[pf_from], %[quads]\n\t"
                     "ja 5f\n\t"
                     "cmp %[c_end], %[c]\n\t"
                     "jae 5f\n\t"
                     "prefetcht0 (%[c])\n\t"
                     "prefetcht0 64(%[c])\n\t"
                     "prefetcht0 124(%[c])\n\t"
                     "add %[ldc], %[c]\n"
                     "5:\n\t"
                     "add $224, %[a]\n\t"
                     "add $512, %[b]\n\t"
                     "dec %[quads]\n\t"
                     "jnz 1b\n"
                     "2:\n\t"
                     "test %[rest], %[rest]\n\t"
                     "jz 4f\n"
                     "3:\n\t" STEP(0) "add $56, %[a]\n\t"
                     "add $128, %[b]\n\t"
                     "dec %[rest]\n\t"
                     "jnz 3b\n"
                     "4:\n\t" SAVE(4) SAVE(5) SAVE(6) SAVE(7) SAVE(8) SAVE(9) SAVE(10) SAVE(11) SAVE(12) SAVE(13)
                         SAVE(14) SAVE(15) SAVE(16) SAVE(17) SAVE(18) SAVE(19) SAVE(20) SAVE(21) SAVE(22) SAVE(23)
                             SAVE(24) SAVE(25) SAVE(26) SAVE(27) SAVE(28) SAVE(29) SAVE(30) SAVE(31)
                     : [a] "+r"(a), [b] "+r"(b), [quads] "+r"(quads), [rest] "+r"(rest), [c] "+r"(c)
                     : [acc] "r"(&acc[0][0]), [pf_from] "r"(pf_from), [c_end] "r"(c_end), [ldc] "r"(ldc_bytes)
                     : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19",
                       "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29",
                       "xmm30", "xmm31");
}

void cvf_cpu_kernel_f32_avx512(int64_t kc, const void *a_panel, const void *b_panel, float *cp, int64_t ldc, int64_t m,
                               int64_t n, int accumulate)
{
    __m512 c[MR][NV];
    tile_product(kc, a_panel, b_panel, c, (const char *)cp, ldc * 4, m);
    __mmask16 mk[NV];
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
    {
        int64_t r = n - 16 * v;
        mk[v] = (__mmask16)(r >= 16 ? 0xFFFFu : r > 0 ? (1u << r) - 1u : 0u);
    }
    if (m == MR && n == NR) {
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)
        {
            float *row = cp + i * ldc;
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            {
                __m512 x = c[i][v];
                if (accumulate)
                    x = _mm512_add_ps(x, _mm512_loadu_ps(row + 16 * v));
                _mm512_storeu_ps(row + 16 * v, x);
            }
        }
    } else {
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)
        {
            if (i < m) {
                float *row = cp + i * ldc;
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
                {
                    __m512 x = c[i][v];
                    if (accumulate)
                        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk[v], row + 16 * v));
                    _mm512_mask_storeu_ps(row + 16 * v, mk[v], x);
                }
            }
        }
    }
}

/* The column masks of an n-column corner, one per vector of 16 columns. */
static inline __attribute__((always_inline)) void column_masks(int64_t n, __mmask16 mk[NV])
{
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
    {
        int64_t r = n - 16 * v;
        mk[v] = (__mmask16)(r >= 16 ? 0xFFFFu : r > 0 ? (1u << r) - 1u : 0u);
    }
}

void cvf_cpu_kernel_f32_avx512_fused(int64_t kc, const void *a_panel, const void *b_panel,
                                     const cvf_cpu_fused_store *out, int64_t m, int64_t n)
{
    __m512 c[MR][NV];
    int64_t size = out->dtype == CVF_F32 ? 4 : 2;
    tile_product(kc, a_panel, b_panel, c, (const char *)out->c, out->ldc * size, m);
    __mmask16 mk[NV];
    column_masks(n, mk);
    __m512 bias[NV];
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bias[v] =
        out->bias ? _mm512_maskz_loadu_ps(mk[v], out->bias + 16 * v) : _mm512_setzero_ps();
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)
    {
        if (i < m) {
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            {
                __m512 x = _mm512_add_ps(c[i][v], bias[v]);
                if (out->relu) /* max(0, x) returns x when x is NaN or -0: x < 0 ? 0 : x */
                    x = _mm512_max_ps(_mm512_setzero_ps(), x);
                cvf_cpu_avx512_store_row(out, i, v, x, mk[v]);
            }
        }
    }
}

#else
typedef int cvf_cpu_f32_avx512_unavailable; /* not an x86 target: nothing to compile */
#endif

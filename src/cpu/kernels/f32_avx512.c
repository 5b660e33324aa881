/*
 * AVX-512 fp32 micro-kernel, 12 x 32 (see kernels.h for the contract). Compiled with the AVX512
 * level's flags; runs only where cvf_cpu_isa_supported(CVF_CPU_ISA_AVX512) holds.
 *
 * Shape: 24 zmm accumulators, 6 row pairs x 2 vectors of 16 columns x even/odd. Each k step
 * loads B's two vectors twice, with the even and with the odd lanes duplicated (vmovsldup,
 * vmovshdup), and broadcasts each pair of A rows as 64-bit lanes (vbroadcastsd: A[2q], A[2q+1]
 * alternate along the vector): 24 FMAs against 4 vector loads and 6 broadcasts, where the
 * 14 x 32 kernel this replaces did 28 FMAs against 2 loads and 14 broadcasts (load uops per FMA
 * 0.42 instead of 0.57). The accumulators so hold, for each row pair, columns 2j and 2j + 1 of
 * both rows in lanes 2j and 2j + 1 of two registers; the stores take the rows apart with one
 * masked lane duplication each (tile_row). The packed layouts are those of kernels.h (pairs of
 * A rows are adjacent in a k step of the A micro-panel, 8-byte aligned since MR is even).
 *
 * The k loop is inline assembly on fixed registers (gcc 12 spilled an accumulator of the
 * intrinsics loop), unrolled by 4, A prefetched 16 steps ahead, C's rows requested from inside
 * the loop in its last iterations (one row per iteration: all 28 lines before the loop filled
 * the line-fill buffers, 11% of the kernel's samples); it ends by storing the accumulators to a
 * 64-byte aligned tile on the stack, which the stores read. Edge tiles (m < 12 or n < 32) use
 * masked loads and stores, the full tile plain ones. Measurements: PERF.md, "AVX-512 fp32
 * kernel at BLAS speed" (in a 2048^3 product on one thread ~3% faster than the 14 x 32 loop;
 * alone, in L1/L2, both at ~85% of the FMA peak of a register-only loop).
 *
 * Tried on Zen 5 earlier and not kept: FMAs with an embedded broadcast of A (vfmadd231ps
 * m32{1to16}: twice the loads, ~6% slower; also slower on Sapphire Rapids, 78% of peak), 10x32,
 * 8x48 and 6x64 (within noise of 14x32), prefetch distances 8 and 32, k unrolled by 8.
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu/kernels/store_avx512.h"

#define MR CVF_CPU_F32_AVX512_MR
#define NR CVF_CPU_F32_AVX512_NR

/* Iterations of the main loop (4 k steps each) left, beyond one per row, when C's rows start
 * being requested. */
#ifndef C_LEAD
#define C_LEAD 4
#endif

/* Bytes ahead of the current k step at which the A panel is prefetched (A is 48 bytes a step:
 * 16 steps). */
#ifndef A_PREFETCH
#define A_PREFETCH "768"
#endif

/* Vectors of 16 columns per row of the tile. */
#define NV (NR / 16)

/* Rows 2q and 2q + 1 of step s: the pair A[2q, s], A[2q + 1, s] broadcast as 64-bit lanes into
 * zmm `bc`, times the even- and odd-duplicated B vectors (zmm0-1: columns 0-15, zmm2-3: 16-31)
 * into the pair's accumulators zmm(8 + 4q) .. zmm(11 + 4q). */
#define PAIR(s, q, bc, c0, c1, c2, c3)                                                                                 \
    "vbroadcastsd " #s "*48+" #q "*8(%[a]), %%zmm" #bc "\n\t"                                                          \
    "vfmadd231ps %%zmm0, %%zmm" #bc ", %%zmm" #c0 "\n\t"                                                               \
    "vfmadd231ps %%zmm1, %%zmm" #bc ", %%zmm" #c1 "\n\t"                                                               \
    "vfmadd231ps %%zmm2, %%zmm" #bc ", %%zmm" #c2 "\n\t"                                                               \
    "vfmadd231ps %%zmm3, %%zmm" #bc ", %%zmm" #c3 "\n\t"

/* One k step at step s of the unrolled body (A at s * 48 bytes, B at s * 128). */
#define STEP(s)                                                                                                        \
    "vmovsldup " #s "*128(%[b]), %%zmm0\n\t"                                                                           \
    "vmovshdup " #s "*128(%[b]), %%zmm1\n\t"                                                                           \
    "vmovsldup " #s "*128+64(%[b]), %%zmm2\n\t"                                                                        \
    "vmovshdup " #s "*128+64(%[b]), %%zmm3\n\t" PAIR(s, 0, 4, 8, 9, 10, 11) PAIR(s, 1, 5, 12, 13, 14, 15)               \
        PAIR(s, 2, 6, 16, 17, 18, 19) PAIR(s, 3, 7, 20, 21, 22, 23) PAIR(s, 4, 4, 24, 25, 26, 27)                      \
            PAIR(s, 5, 5, 28, 29, 30, 31)

#define ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define SAVE(r) "vmovaps %%zmm" #r ", (" #r "-8)*64(%[acc])\n\t"

/* The accumulators of a row pair for one vector of 16 columns, as the loop leaves them: e holds
 * B[2j] A[2q] in lane 2j and B[2j] A[2q+1] in lane 2j+1, o the same with B[2j+1]. */
typedef struct pair_acc {
    __m512 v[MR / 2][NV][2]; /* [pair][vector][even, odd] */
} pair_acc;

/* Bytes from one row of C to the next; 0 for a one-row corner, whose view may have any row stride
 * (INT64_MAX among them: ldc * size would overflow, and is never needed). */
static inline int64_t row_bytes(int64_t ldc, int64_t size, int64_t m)
{
    return m > 1 ? ldc * size : 0;
}

/* acc = A B over kc steps of the packed micro-panels, as row pairs (see pair_acc). The k loop is
 * inline assembly on fixed registers: B's two vectors loaded with even and odd lanes duplicated
 * (zmm0-3), pairs of A broadcast as 64-bit lanes (zmm4-7), the 24 accumulators in zmm8-31. */
static inline __attribute__((always_inline)) void tile_product(int64_t kc, const float *a, const float *b,
                                                               pair_acc *acc, const char *c, int64_t ldc_bytes,
                                                               int64_t m)
{
    int64_t quads = kc / 4, rest = kc % 4;
    /* C's rows are requested one per iteration of the main loop, from the iteration with
     * C_LEAD + m iterations left: all at once before the loop, the lines missing to L3 filled the
     * line-fill buffers and stalled the loop (11% of the kernel's samples in a 2048^3 product) */
    int64_t pf_from = m + C_LEAD, c_rows = m; /* rows of C still to request (a count: c + m * ldc_bytes
                                                * may lie past C, or overflow for a one-row view) */
    __asm__ volatile(ZERO(8) ZERO(9) ZERO(10) ZERO(11) ZERO(12) ZERO(13) ZERO(14) ZERO(15) ZERO(16) ZERO(17) ZERO(18)
                         ZERO(19) ZERO(20) ZERO(21) ZERO(22) ZERO(23) ZERO(24) ZERO(25) ZERO(26) ZERO(27) ZERO(28)
                             ZERO(29) ZERO(30) ZERO(31)
                     "test %[quads], %[quads]\n\t"
                     "jz 2f\n\t"
                     ".p2align 5\n"
                     "1:\n\t"
                     "prefetcht0 " A_PREFETCH "(%[a])\n\t" STEP(0) "prefetcht0 " A_PREFETCH "+64(%[a])\n\t" STEP(1)
                     "prefetcht0 " A_PREFETCH "+128(%[a])\n\t" STEP(2) STEP(3)
                     "cmp %[pf_from], %[quads]\n\t"
                     "ja 5f\n\t"
                     "test %[c_rows], %[c_rows]\n\t"
                     "jz 5f\n\t"
                     "prefetcht0 (%[c])\n\t"
                     "prefetcht0 64(%[c])\n\t"
                     "prefetcht0 124(%[c])\n\t"
                     "add %[ldc], %[c]\n\t"
                     "dec %[c_rows]\n"
                     "5:\n\t"
                     "add $192, %[a]\n\t"
                     "add $512, %[b]\n\t"
                     "dec %[quads]\n\t"
                     "jnz 1b\n"
                     "2:\n\t"
                     "test %[rest], %[rest]\n\t"
                     "jz 4f\n"
                     "3:\n\t" STEP(0) "add $48, %[a]\n\t"
                     "add $128, %[b]\n\t"
                     "dec %[rest]\n\t"
                     "jnz 3b\n"
                     "4:\n\t" SAVE(8) SAVE(9) SAVE(10) SAVE(11) SAVE(12) SAVE(13) SAVE(14) SAVE(15) SAVE(16) SAVE(17)
                         SAVE(18) SAVE(19) SAVE(20) SAVE(21) SAVE(22) SAVE(23) SAVE(24) SAVE(25) SAVE(26) SAVE(27)
                             SAVE(28) SAVE(29) SAVE(30) SAVE(31)
                     : [a] "+r"(a), [b] "+r"(b), [quads] "+r"(quads), [rest] "+r"(rest), [c] "+r"(c),
                       [c_rows] "+r"(c_rows)
                     : [acc] "r"(acc->v), [pf_from] "r"(pf_from), [ldc] "r"(ldc_bytes)
                     : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19",
                       "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29",
                       "xmm30", "xmm31");
}

/* Row i, vector v of the tile from the row pairs: even rows take the even lanes of e and, in the
 * odd lanes, the even lanes of o; odd rows the odd lanes of o and, in the even lanes, the odd
 * lanes of e. */
static inline __attribute__((always_inline)) __m512 tile_row(const pair_acc *acc, int i, int v)
{
    __m512 e = acc->v[i / 2][v][0], o = acc->v[i / 2][v][1];
    return i % 2 == 0 ? _mm512_mask_moveldup_ps(e, 0xAAAA, o) : _mm512_mask_movehdup_ps(o, 0x5555, e);
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

void cvf_cpu_kernel_f32_avx512(int64_t kc, const void *a_panel, const void *b_panel, float *cp, int64_t ldc, int64_t m,
                               int64_t n, int accumulate)
{
    pair_acc acc;
    tile_product(kc, a_panel, b_panel, &acc, (const char *)cp, row_bytes(ldc, 4, m), m);
    __mmask16 mk[NV];
    column_masks(n, mk);
    if (m == MR && n == NR) {
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)
        {
            float *row = cp + i * ldc;
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            {
                __m512 x = tile_row(&acc, i, v);
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
                    __m512 x = tile_row(&acc, i, v);
                    if (accumulate)
                        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk[v], row + 16 * v));
                    _mm512_mask_storeu_ps(row + 16 * v, mk[v], x);
                }
            }
        }
    }
}

/* The column masks of an n-column corner and the bias of its columns (zeros without one). */
static inline __attribute__((always_inline)) void store_setup(const cvf_cpu_fused_store *out, int64_t n,
                                                              __mmask16 mk[NV], __m512 bias[NV])
{
    column_masks(n, mk);
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bias[v] =
        out->bias ? _mm512_maskz_loadu_ps(mk[v], out->bias + 16 * v) : _mm512_setzero_ps();
}

/* The fused store of vector v of tile row i: bias, ReLU, out's dtype. */
static inline __attribute__((always_inline)) void store_fused(const cvf_cpu_fused_store *out, int i, int v, __m512 x,
                                                              const __m512 bias[NV], const __mmask16 mk[NV])
{
    x = _mm512_add_ps(x, bias[v]);
    if (out->relu) /* max(0, x) returns x when x is NaN or -0: x < 0 ? 0 : x */
        x = _mm512_max_ps(_mm512_setzero_ps(), x);
    cvf_cpu_avx512_store_row(out, i, v, x, mk[v]);
}

void cvf_cpu_kernel_f32_avx512_fused(int64_t kc, const void *a_panel, const void *b_panel,
                                     const cvf_cpu_fused_store *out, int64_t m, int64_t n)
{
    pair_acc acc;
    int64_t size = out->dtype == CVF_F32 ? 4 : 2;
    tile_product(kc, a_panel, b_panel, &acc, (const char *)out->c, row_bytes(out->ldc, size, m), m);
    __mmask16 mk[NV];
    __m512 bias[NV];
    store_setup(out, n, mk, bias);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)
    {
        if (i < m) {
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) store_fused(out, i, v, tile_row(&acc, i, v), bias, mk);
        }
    }
}

/* The fused store of a direct tile's rows x 16 vecs values (tile[i][v], row i of out) into a
 * 16-bit out: bias, ReLU, rounding (out of line: one copy for every tile shape). */
static __attribute__((noinline)) void direct_store_16(const cvf_cpu_fused_store *out, const __m512 (*tile)[NV],
                                                      int rows, int vecs, int64_t n)
{
    __mmask16 mk[NV];
    __m512 bias[NV];
    store_setup(out, n, mk, bias);
    for (int i = 0; i < rows; i++)
        for (int v = 0; v < vecs; v++)
            store_fused(out, i, v, tile[i][v], bias, mk);
}

/* The direct tile of `rows` rows and `vecs` vectors of 16 columns (constants where it is inlined,
 * with `full` when n fills them), A and B read in place one k step at a time: B's row as vecs
 * vectors (columns from n on masked off, never read; a full row with plain loads, as a zeroing
 * masked load costs a uop beside the FMAs: 12 x 32 x 128 took 4-5% longer masked), each A element
 * broadcast from memory into its vecs FMAs. Only the m = rows
 * rows of A and the n columns of B are read, so no row or column of the tile is computed for
 * nothing and the caller copies no edge panel (kernels.h, cvf_cpu_direct_fn). An f32
 * out is stored here without branches (ReLU as a max with 0 or -inf, which keeps NaN and -0 as
 * store_fused does); a 16-bit one through direct_store_16. */
static inline __attribute__((always_inline)) void direct_tile(int rows, int vecs, bool full, int64_t k, const float *a,
                                                              int64_t lda, const float *b, int64_t ldb,
                                                              const cvf_cpu_fused_store *out, int64_t n)
{
    __m512 acc[MR][NV];
    __mmask16 mk[NV];
    column_masks(n, mk);
    _Pragma("GCC unroll 16") for (int i = 0; i < rows; i++)
    {
        _Pragma("GCC unroll 4") for (int v = 0; v < vecs; v++) acc[i][v] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < k; p++) {
        __m512 bv[NV];
        _Pragma("GCC unroll 4") for (int v = 0; v < vecs; v++) bv[v] =
            full ? _mm512_loadu_ps(b + p * ldb + 16 * v) : _mm512_maskz_loadu_ps(mk[v], b + p * ldb + 16 * v);
        _Pragma("GCC unroll 16") for (int i = 0; i < rows; i++)
        {
            __m512 x = _mm512_set1_ps(a[i * lda + p]);
            _Pragma("GCC unroll 4") for (int v = 0; v < vecs; v++) acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
        }
    }
    if (out->dtype != CVF_F32) { /* (a copy: acc itself stays in registers) */
        __m512 tile[MR][NV];
        _Pragma("GCC unroll 16") for (int i = 0; i < rows; i++)
        {
            _Pragma("GCC unroll 4") for (int v = 0; v < vecs; v++) tile[i][v] = acc[i][v];
        }
        direct_store_16(out, (const __m512(*)[NV])tile, rows, vecs, n);
        return;
    }
    __m512 bias[NV];
    store_setup(out, n, mk, bias);
    const __m512 floor = out->relu ? _mm512_setzero_ps() : _mm512_set1_ps(-__builtin_inff());
    float *c = (float *)out->c;
    const int64_t ldc = out->ldc;
    _Pragma("GCC unroll 16") for (int i = 0; i < rows; i++)
    {
        _Pragma("GCC unroll 4") for (int v = 0; v < vecs; v++)
            _mm512_mask_storeu_ps(c + i * ldc + 16 * v, mk[v], _mm512_max_ps(floor, _mm512_add_ps(acc[i][v], bias[v])));
    }
}

/* The direct kernel (kernels.h, cvf_cpu_direct_fn): an m x n corner of the 12 x 32 tile through
 * direct_tile compiled for its m (1-12) and for one or two vectors of columns (n <= 16 or not): 24
 * accumulators at most, plain rows (no pair layout to undo). For products too small for packing to
 * pay (64^3 on one thread: 6.6 us packed against OpenBLAS-SkylakeX's 3.3; 4.3 us with every tile
 * 12 rows tall, 64 = 5 x 12 + 4 computing 72 rows, and the last tile's rows copied zero-padded). */
void cvf_cpu_direct_f32_avx512(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                               const cvf_cpu_fused_store *out, int64_t m, int64_t n)
{
#define DIRECT_ROWS(r)                                                                                                 \
    case r:                                                                                                            \
        if (n == 32)                                                                                                   \
            direct_tile(r, 2, true, k, a, lda, b, ldb, out, n);                                                        \
        else if (n > 16)                                                                                               \
            direct_tile(r, 2, false, k, a, lda, b, ldb, out, n);                                                       \
        else                                                                                                           \
            direct_tile(r, 1, n == 16, k, a, lda, b, ldb, out, n);                                                     \
        break;
    switch (m) {
        DIRECT_ROWS(1)
        DIRECT_ROWS(2)
        DIRECT_ROWS(3)
        DIRECT_ROWS(4)
        DIRECT_ROWS(5)
        DIRECT_ROWS(6)
        DIRECT_ROWS(7)
        DIRECT_ROWS(8)
        DIRECT_ROWS(9)
        DIRECT_ROWS(10)
        DIRECT_ROWS(11)
        DIRECT_ROWS(12)
    default: break; /* m is 1 .. MR */
    }
#undef DIRECT_ROWS
}

#else
typedef int cvf_cpu_f32_avx512_unavailable; /* not an x86 target: nothing to compile */
#endif

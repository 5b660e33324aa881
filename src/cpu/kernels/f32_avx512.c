/*
 * AVX-512 fp32 micro-kernel, 14 x 32 (see kernels.h for the contract). Compiled with the AVX512
 * level's flags; runs only where cvf_cpu_isa_supported(CVF_CPU_ISA_AVX512) holds.
 *
 * Shape: 28 zmm accumulators (14 rows x 2 vectors of 16 columns), B loaded as 2 zmm per k and
 * each A element broadcast once per k: 28 FMAs against 2 vector loads and 14 scalar broadcasts,
 * enough independent chains to cover the FMA latency of two 512-bit pipes (Zen 4/5, Skylake-X).
 * A KC x 32 B micro-panel (24 KB at kc = 188) stays in L1 while 14-row A micro-panels stream from
 * L2. The k loop is unrolled by 4 with one prefetch per new cache line of A, PREFETCH_A_STEPS
 * ahead. The accumulators live in registers only: the full-tile and edge stores are both inlined
 * and unrolled over the rows (an out-of-line edge store taking the tile by address made GCC keep
 * a copy of the tile on the stack: ~3% of the kernel). Edge tiles (m < 14 or n < 32) use masked
 * loads and stores, the full tile plain ones.
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

/* How far ahead (in k steps) the A micro-panel is prefetched. */
#define PFA 16

/* k steps per iteration of the main loop. */
#define UNR 4

/* Vectors of 16 columns per row of the tile. */
#define NV (NR / 16)

/* c[i][v] += A[i, p] B[p, 16 v .. 16 v + 15] for one k step p (ap, bp point at the step's MR and
 * NR values). */
#define STEP(ap, bp)                                                                                                   \
    do {                                                                                                               \
        __m512 bv[NV];                                                                                                 \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps((bp) + 16 * v);                    \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                          \
        {                                                                                                              \
            __m512 ai = _mm512_set1_ps((ap)[i]);                                                                       \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) c[i][v] = _mm512_fmadd_ps(ai, bv[v], c[i][v]);        \
        }                                                                                                              \
    } while (0)

/* c = A B over kc steps of the micro-panels (the accumulators start at zero). Inlined into each
 * entry point so that c stays in registers. */
static inline __attribute__((always_inline)) void tile_product(int64_t kc, const float *a, const float *b,
                                                               __m512 c[MR][NV])
{
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) c[i][v] =
        _mm512_setzero_ps();
    int64_t p = kc;
    for (; p >= UNR; p -= UNR) {
        _Pragma("GCC unroll 8") for (int u = 0; u < UNR; u++)
        {
            if (u * MR * 4 / 64 != ((u + 1) * MR * 4 - 1) / 64 || u == 0)
                _mm_prefetch((const char *)(a + PFA * MR + u * MR + MR - 1), _MM_HINT_T0);
            STEP(a + u * MR, b + u * NR);
        }
        a += UNR * MR;
        b += UNR * NR;
    }
    for (; p > 0; p--) {
        STEP(a, b);
        a += MR;
        b += NR;
    }
}

void cvf_cpu_kernel_f32_avx512(int64_t kc, const void *a_panel, const void *b_panel, float *cp, int64_t ldc, int64_t m,
                               int64_t n, int accumulate)
{
    __m512 c[MR][NV];
    for (int64_t i = 0; i < m; i++) {
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            _mm_prefetch((const char *)(cp + i * ldc + 16 * v), _MM_HINT_T0);
        _mm_prefetch((const char *)(cp + i * ldc + NR - 1), _MM_HINT_T0);
    }
    tile_product(kc, a_panel, b_panel, c);
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
    int64_t size = out->dtype == CVF_F32 ? 4 : 2, row_bytes = n * size;
    for (int64_t i = 0; i < m; i++) /* ask for the tile's output lines early, for writing */
        for (int64_t byte = 0; byte < row_bytes; byte += 64)
            _mm_prefetch((const char *)out->c + i * out->ldc * size + byte, _MM_HINT_ET0);
    tile_product(kc, a_panel, b_panel, c);
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

/*
 * AMX micro-kernel, 32 x 32, bf16 x bf16 -> fp32 (see kernels.h for the contract and the
 * CVF_CPU_PACK_BF16_TILES layout). Compiled with the AMX level's flags; runs only where
 * cvf_cpu_isa_supported(CVF_CPU_ISA_AMX) holds, between cvf_cpu_kernel_bf16_amx_begin and _end on
 * the calling thread.
 *
 * The CPU's own "cube": eight tile registers of 16 rows x 64 bytes, all configured alike. Tiles 0-3
 * hold the 2 x 2 fp32 accumulator tiles of 16 x 16 (C rows 0-15 / 16-31, columns 0-15 / 16-31),
 * tiles 4 and 5 the A rows 0-15 and 16-31 of one 32-deep block (32 bf16 per row), tiles 6 and 7
 * the B columns 0-15 and 16-31 of that block (16 VNNI pairs per row). Each block is four
 * tdpbf16ps, each 16 x 16 x 32 multiply-adds, with every tile loaded once, from the packed A
 * block and B micro-panel (both stream from L2 at the driver's KC up to 2048). The products of two bf16 are
 * exact in fp32 and tdpbf16ps accumulates pairs in fp32 (as vdpbf16ps does, flushing bf16
 * subnormal inputs and fp32 subnormal results to zero).
 *
 * When the accumulators are done they leave the tiles once: straight into C for a full tile, or
 * through an fp32 buffer on the stack (the L1) for an edge tile, whose m x n corner alone is then
 * written with masked AVX-512 stores. The epilogue (bias, activation, conversion, sums) is the
 * caller's vector code on that fp32 tile, as for every kernel. cvf_cpu_kernel_bf16_amx_overlapped
 * runs the caller's side work (the previous tile's epilogue, kernels.h) between its blocks: the
 * vector units finish one tile while the tile unit computes the next.
 */
#include "cpu/kernels/kernels.h"

#if defined(__x86_64__) && defined(CVF_CPU_AMX_KERNEL)

#include <immintrin.h>

#define MR CVF_CPU_BF16_AMX_MR
#define NR CVF_CPU_BF16_AMX_NR
#define KT CVF_CPU_TILE_DEPTH

/* The 64-byte operand of LDTILECFG (palette 1): per tile, its bytes per row and its rows. */
typedef struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

/* The configuration of the kernel's eight tiles: 16 rows x 64 bytes each (the only shape it uses).
 * A constant object rather than one filled on the stack: gcc 12 does not see _tile_loadconfig
 * read its operand and drops the stores that fill it (ldtilecfg then faults on a zero palette
 * or loads a wrong shape). */
static const tile_config kernel_tiles = {
    .palette = 1,
    .bytes_per_row = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* Configures this thread's tiles for the kernel. */
void cvf_cpu_kernel_bf16_amx_begin(void)
{
    _tile_loadconfig(&kernel_tiles);
}

/* Returns this thread's tiles to their initial state (so a later user of AMX starts clean, and
 * the OS need not save 8 KiB of tile data on context switches). Any tile state the application
 * itself kept on the thread (the caller's thread computes too) is lost: AMX users must not hold
 * tiles across a cvfuse call. */
void cvf_cpu_kernel_bf16_amx_end(void)
{
    _tile_release();
}

/* Stores the four accumulator tiles to rows ld floats apart at c. */
static inline __attribute__((always_inline)) void store_tiles(float *c, int64_t ld)
{
    const size_t stride = (size_t)ld * sizeof(float);
    _tile_stored(0, c, stride);
    _tile_stored(1, c + 16, stride);
    _tile_stored(2, c + 16 * ld, stride);
    _tile_stored(3, c + 16 * ld + 16, stride);
}

/* Copies (or adds) the m x n corner of the 32 x 32 tile buffer into c, nothing outside it. */
static void write_corner(const float *tile, float *c, int64_t ldc, int64_t m, int64_t n, int accumulate)
{
    __mmask16 lo = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    __mmask16 hi = (__mmask16)(n >= 32 ? 0xFFFFu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        __m512 x0 = _mm512_load_ps(tile + i * NR), x1 = _mm512_load_ps(tile + i * NR + 16);
        if (accumulate) {
            x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(lo, row));
            x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(hi, row + 16));
        }
        _mm512_mask_storeu_ps(row, lo, x0);
        _mm512_mask_storeu_ps(row + 16, hi, x1);
    }
}

/* Runs parts [*next, p) of side, where p is the first part not due after `done` of `blocks` blocks: the
 * parts are spread evenly over the blocks (part p after block p * blocks / parts), the rest at the end. */
static inline __attribute__((always_inline)) void run_side(const cvf_cpu_side_work *side, int64_t *next, int64_t done,
                                                           int64_t blocks)
{
    for (; *next < side->parts && *next * blocks < done * side->parts; ++*next)
        side->run(side->arg, *next, side->parts);
}

/* The kernel (see kernels.h), with side's parts run between the blocks when side is not NULL (a
 * constant NULL in cvf_cpu_kernel_bf16_amx, where the checks fold away). */
static inline __attribute__((always_inline)) void amx_tile(int64_t kc, const void *a_panel, const void *b_panel,
                                                           float *c, int64_t ldc, int64_t m, int64_t n, int accumulate,
                                                           const cvf_cpu_side_work *side)
{
    const uint16_t *a = a_panel, *b = b_panel;
    const int64_t blocks = (kc + KT - 1) / KT;
    const size_t b_stride = NR * 2 * sizeof(uint16_t); /* one row of VNNI pairs of the micro-panel */
    const int full = m == MR && n == NR;
    int64_t next = 0;
    if (full && accumulate) { /* the accumulators start from C itself */
        const size_t stride = (size_t)ldc * sizeof(float);
        _tile_loadd(0, c, stride);
        _tile_loadd(1, c + 16, stride);
        _tile_loadd(2, c + 16 * ldc, stride);
        _tile_loadd(3, c + 16 * ldc + 16, stride);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t t = 0; t < blocks; t++) {
        const uint16_t *at = a + t * MR * KT, *bt = b + t * (KT / 2) * NR * 2;
        _tile_loadd(4, at, KT * sizeof(uint16_t));
        _tile_loadd(6, bt, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, bt + 32, b_stride); /* columns 16..31: 16 pairs further along the row */
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, at + 16 * KT, KT * sizeof(uint16_t));
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        if (side) /* vector work while these tdpbf16ps run */
            run_side(side, &next, t + 1, blocks);
    }
    if (side)
        run_side(side, &next, blocks + 1, blocks); /* what is left (kc == 0: everything) */
    if (full) {
        store_tiles(c, ldc);
        return;
    }
    float tile[MR * NR] __attribute__((aligned(64)));
    store_tiles(tile, NR);
    write_corner(tile, c, ldc, m, n, accumulate);
}

void cvf_cpu_kernel_bf16_amx(int64_t kc, const void *a_panel, const void *b_panel, float *c, int64_t ldc, int64_t m,
                             int64_t n, int accumulate)
{
    amx_tile(kc, a_panel, b_panel, c, ldc, m, n, accumulate, NULL);
}

void cvf_cpu_kernel_bf16_amx_overlapped(int64_t kc, const void *a_panel, const void *b_panel, float *c, int64_t ldc,
                                        int64_t m, int64_t n, int accumulate, const cvf_cpu_side_work *side)
{
    amx_tile(kc, a_panel, b_panel, c, ldc, m, n, accumulate, side);
}

#else
typedef int cvf_cpu_bf16_amx_unavailable; /* not x86-64, or a compiler without AMX: nothing to compile */
#endif

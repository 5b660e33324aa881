/*
 * The CPU micro-kernel contract (as in BLIS): one MR x NR tile of fp32 accumulators.
 *
 *     acc[i][j] = sum over p < kc of A[i][p] * B[p][j]                  (i < MR, j < NR)
 *     c[i * ldc + j] = acc[i][j]          (accumulate == 0)             for i < m, j < n only
 *     c[i * ldc + j] += acc[i][j]         (accumulate != 0)
 *
 * a is an MR-row micro-panel of packed A (4-byte aligned only: A is read by broadcasts), b an
 * NR-column micro-panel of packed B (64-byte aligned: NR x element size is a multiple of 64 for the
 * vector kernels), both zero-padded by the packing (rows i >= m, columns j >= n, and for BF16 the odd last
 * k) so the kernel may always compute the full tile; it stores only the m x n corner (edge tiles
 * are the kernel's job: m <= MR, n <= NR, m, n >= 1). c is fp32, any alignment, row stride ldc
 * floats. kc >= 0 (kc == 0 stores zeros, or adds nothing).
 *
 * Packed layouts (element type, then index of A[i][p] / B[p][j] inside one micro-panel):
 *   CVF_CPU_PACK_F32:  float;     A: p * MR + i                      B: p * NR + j
 *   CVF_CPU_PACK_BF16: uint16_t;  A: ((p / 2) * MR + i) * 2 + p % 2  B: ((p / 2) * NR + j) * 2 + p % 2
 *     (bf16 pairs along k, as vdpbf16ps reads them; a micro-panel holds ceil(kc / 2) pairs and
 *      the second element of the last pair is zero when kc is odd)
 *   CVF_CPU_PACK_BF16_TILES: uint16_t, kc rounded up to KT = 32 with zeros (one AMX tile's depth);
 *                      A: ((p / KT) * MR + i) * KT + p % KT  (each KT-deep block: MR rows of 64 bytes,
 *                                                            the rows of an AMX A tile)
 *                      B: as CVF_CPU_PACK_BF16 with ceil(kc / KT) * KT / 2 pairs (VNNI pairs: the rows of an
 *                         AMX B tile are 16 pairs of a 16-column slice, NR * 4 bytes apart)
 * cvf_cpu_pack_depth gives the packed depth of a panel kc deep.
 *
 * Kernels with per-thread state (AMX's tile configuration) have begin and end hooks: a thread
 * calls begin before its first run of the kernel in a stretch of work and end after its last, with
 * nothing else in between that could use that state.
 */
#ifndef CVF_CPU_KERNELS_H
#define CVF_CPU_KERNELS_H

#include <stdint.h>

#include "cpu/isa.h"
#include "cvfuse.h"

/* Upper bounds of MR and NR over all kernels (for buffers sized at compile time). */
#define CVF_CPU_MR_MAX 32
#define CVF_CPU_NR_MAX 64

typedef enum cvf_cpu_pack_format { CVF_CPU_PACK_F32, CVF_CPU_PACK_BF16, CVF_CPU_PACK_BF16_TILES } cvf_cpu_pack_format;

/* The depth of the AMX tiles of CVF_CPU_PACK_BF16_TILES (32 bf16 values: one 64-byte tile row). */
#define CVF_CPU_TILE_DEPTH 32

/* The k extent of a packed panel kc deep: kc (F32), kc rounded up to pairs (BF16) or to tiles. */
static inline int64_t cvf_cpu_pack_depth(cvf_cpu_pack_format format, int64_t kc)
{
    int64_t unit = format == CVF_CPU_PACK_BF16_TILES ? CVF_CPU_TILE_DEPTH : format == CVF_CPU_PACK_BF16 ? 2 : 1;
    return (kc + unit - 1) / unit * unit;
}

typedef void (*cvf_cpu_kernel_fn)(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m, int64_t n,
                                  int accumulate);

/*
 * Work that a kernel runs in pieces between its own instructions: run(arg, p, parts) for p = 0, 1,
 * ..., parts - 1, in order, each exactly once, all before the kernel stores its tile (parts >= 1).
 * The AMX kernel spreads them over its K loop, so that the vector code (the epilogue of the
 * previous tile) runs while the tile unit works on the tdpbf16ps already issued. The pieces must not
 * touch the kernel's own a, b and c.
 */
typedef struct cvf_cpu_side_work {
    void (*run)(void *arg, int64_t part, int64_t parts);
    void *arg;
    int64_t parts;
} cvf_cpu_side_work;

/* The kernel contract above, running side's parts during the product. */
typedef void (*cvf_cpu_overlapped_kernel_fn)(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m,
                                             int64_t n, int accumulate, const cvf_cpu_side_work *side);

/*
 * The fused store of a simple epilogue, done by the kernel on its registers (no tile buffer):
 *     C[i][j] = rounded(relu?(acc[i][j] + bias[j]))      for i < m, j < n
 * c points at the tile's element (0, 0), rows ldc elements apart, columns contiguous; dtype
 * f32, f16 or bf16 (rounded to nearest even); bias is NULL or n floats; relu keeps NaN and -0.
 */
typedef struct cvf_cpu_fused_store {
    void *c;
    int64_t ldc;
    cvf_dtype dtype;
    const float *bias;
    int relu;
} cvf_cpu_fused_store;

typedef void (*cvf_cpu_fused_kernel_fn)(int64_t kc, const void *a, const void *b, const cvf_cpu_fused_store *out,
                                        int64_t m, int64_t n);

/*
 * One fp32 micro-panel from `count` rows of kc floats (any alignment):
 *     dst[p * width + r] = rows[r][p]   for r < count, p < kc;   0 for count <= r < width
 * (A panels: width MR, rows of A; B panels of a transposed B: width NR, columns of B). Writes
 * nothing outside dst[0 .. kc * width).
 */
typedef void (*cvf_cpu_interleave_fn)(const float *const *rows, int64_t count, int64_t width, int64_t kc, float *dst);

/*
 * A tile of dot products, for products too short in M for packing B to pay (a few tokens through
 * a PyTorch Linear weight, read as W^T: B's columns contiguous), with A and B read in place:
 *     c[i * ldc + j] = sum over p < k of a[i * lda + p] * b[j * ldb + p]     (i < m, j < n)
 * A and C fp32, B of b_dtype (f32, f16 or bf16: converted to fp32 exactly as it is loaded), any
 * alignment, any m, n >= 1 (the planner passes up to 32 rows, a product's tokens, by NR
 * columns), k >= 1; nothing but the m x n corner is written.
 */
/*
 * The MR x NR tile of fp32 A and B read in place, for products too small for packing to pay:
 *     acc[i][j] = sum over p < k of a[i * lda + p] * b[p * ldb + j]       (i < MR, j < NR)
 * then stored as by the fused store (bias, ReLU, dtype) into the m x n corner of out (1 <= m <= MR,
 * 1 <= n <= NR). Only the m rows of A and the n columns of B (and of the bias) are read, so an edge
 * tile needs no zero-padded copy. Any alignment; k >= 0.
 */
typedef void (*cvf_cpu_direct_fn)(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                                  const cvf_cpu_fused_store *out, int64_t m, int64_t n);

typedef void (*cvf_cpu_dot_fn)(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype,
                               int64_t ldb, int64_t n, float *c, int64_t ldc);

/*
 * The same for a row-major B (a few tokens through weights stored in x out), A and B in place:
 *     c[i * ldc + j] = sum over p < k of a[i * lda + p] * b[p * ldb + j]     (i < m, j < n)
 * with the dot tiles' contract otherwise (dtypes, any alignment, m, n, k >= 1, only the m x n
 * corner written). Each output adds its products in order of p (bit-identical however m is cut).
 */
typedef cvf_cpu_dot_fn cvf_cpu_rows_fn;

/*
 * The row tiles' product for 1 to CVF_CPU_STREAM_MAX_ROWS rows with B read row after row (for the
 * planner's K slices x column chunks of a few tokens through a row-major weight), the same
 * contract otherwise. Each output adds its products in order of p.
 */
typedef cvf_cpu_dot_fn cvf_cpu_stream_fn;
#define CVF_CPU_STREAM_MAX_ROWS 4

/* One micro-kernel and what its caller must know to feed it. */
typedef struct cvf_cpu_kernel {
    const char *name; /* e.g. "avx512 f32 12x32" */
    cvf_cpu_isa isa;
    int32_t mr, nr;
    cvf_cpu_pack_format format;
    cvf_cpu_kernel_fn run;
    cvf_cpu_fused_kernel_fn run_fused;           /* the same product with the fused store, or NULL */
    cvf_cpu_overlapped_kernel_fn run_overlapped; /* run with side work in its K loop, or NULL */
    cvf_cpu_interleave_fn interleave;            /* the level's vector panel interleave (F32 format), or NULL */
    cvf_cpu_dot_fn dot;                          /* dot-product tiles for short products with B^T, or NULL */
    cvf_cpu_rows_fn rows;                        /* row tiles for short products with a row-major B, or NULL */
    cvf_cpu_stream_fn stream;                    /* the same for 1-4 rows, B streamed row by row, or NULL */
    cvf_cpu_direct_fn direct;                    /* unpacked tiles for tiny products, or NULL */
    int32_t kc_l1_16ths;                         /* the share of L1, in 16ths, that a KC x NR B micro-panel
                                                  * may fill when K is cut into passes (0: half, 8/16) */
    int32_t min_block_panels;                    /* the fewest MR panels of an MC block when M is cut for the
                                                  * threads (0: 16, and at least 192 rows; gemm.c) */
    int32_t blocks_per_thread;                   /* MC blocks per thread aimed for then (0: 4) */
    int32_t balance_l2_16ths;                    /* the share of L2, in 16ths, that a packed A block may
                                                  * fill when few panels are split among the threads
                                                  * (0: half, as mc_max; gemm.c, balance_tiles) */
    void (*begin)(void);                         /* prepares this thread's state for run (see above), or NULL */
    void (*end)(void);                           /* releases it, or NULL */
} cvf_cpu_kernel;

/* The kernel for products of A and B of these dtypes at this level: when both are bf16, the AMX
 * kernel at the AMX level and the vdpbf16ps kernel at AVX512_BF16 where it pays
 * (cvf_cpu_bf16_dot_pays); else the level's fp32 kernel
 * (16-bit inputs are converted to fp32 while packing). Never NULL for a level cvf_cpu_isa_supported
 * accepts. */
const cvf_cpu_kernel *cvf_cpu_kernel_for(cvf_cpu_isa isa, cvf_dtype a, cvf_dtype b);

/* The micro-kernels behind cvf_cpu_kernel_for (each follows the contract above with its own MR x NR;
 * the x86 ones are compiled with their level's flags and may run only where cvf_cpu_isa_supported
 * accepts that level). */
#define CVF_CPU_F32_GENERIC_MR 4
#define CVF_CPU_F32_GENERIC_NR 8
#define CVF_CPU_F32_AVX2_MR 6
#define CVF_CPU_F32_AVX2_NR 16
#define CVF_CPU_F32_AVX512_MR 12
#define CVF_CPU_F32_AVX512_NR 32
#define CVF_CPU_BF16_AVX512_MR 14
#define CVF_CPU_BF16_AVX512_NR 32
#define CVF_CPU_BF16_AMX_MR 32
#define CVF_CPU_BF16_AMX_NR 32
void cvf_cpu_kernel_f32_generic(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m, int64_t n,
                                int accumulate);
#if defined(__x86_64__) || defined(__i386__)
void cvf_cpu_kernel_f32_avx2(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m, int64_t n,
                             int accumulate);
void cvf_cpu_kernel_f32_avx2_fused(int64_t kc, const void *a, const void *b, const cvf_cpu_fused_store *out, int64_t m,
                                   int64_t n);
void cvf_cpu_interleave_f32_avx2(const float *const *rows, int64_t count, int64_t width, int64_t kc, float *dst);
void cvf_cpu_direct_f32_avx2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                             const cvf_cpu_fused_store *out, int64_t m, int64_t n);
void cvf_cpu_direct_f32_avx512(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                               const cvf_cpu_fused_store *out, int64_t m, int64_t n);
void cvf_cpu_dot_avx2(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype, int64_t ldb,
                      int64_t n, float *c, int64_t ldc);
void cvf_cpu_stream_avx2(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype,
                         int64_t ldb, int64_t n, float *c, int64_t ldc);
void cvf_cpu_rows_avx2(int64_t k, const float *a, int64_t lda, int64_t m, const void *b, cvf_dtype b_dtype,
                       int64_t ldb, int64_t n, float *c, int64_t ldc);
void cvf_cpu_kernel_f32_avx512(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m, int64_t n,
                               int accumulate);
void cvf_cpu_kernel_f32_avx512_fused(int64_t kc, const void *a, const void *b, const cvf_cpu_fused_store *out,
                                     int64_t m, int64_t n);
void cvf_cpu_kernel_bf16_avx512(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m, int64_t n,
                                int accumulate);
void cvf_cpu_kernel_bf16_amx(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m, int64_t n,
                             int accumulate);
void cvf_cpu_kernel_bf16_amx_overlapped(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int64_t m,
                                        int64_t n, int accumulate, const cvf_cpu_side_work *side);
void cvf_cpu_kernel_bf16_amx_begin(void);
void cvf_cpu_kernel_bf16_amx_end(void);
#endif

#endif /* CVF_CPU_KERNELS_H */

/* cvf_cpu_kernel_for: the micro-kernel descriptor of each ISA level and dtype pair (kernels.h). */
#include "cpu/kernels/kernels.h"

#include <stdbool.h>
#include <stddef.h>

/* Portable C fp32 kernel: the GENERIC level, and the fallback on non-x86 targets. */
static const cvf_cpu_kernel f32_generic = {
    .name = "generic f32 4x8",
    .isa = CVF_CPU_ISA_GENERIC,
    .mr = CVF_CPU_F32_GENERIC_MR,
    .nr = CVF_CPU_F32_GENERIC_NR,
    .format = CVF_CPU_PACK_F32,
    .run = cvf_cpu_kernel_f32_generic,
};

#if defined(__x86_64__) || defined(__i386__)
/* AVX2 + FMA fp32 kernel. */
static const cvf_cpu_kernel f32_avx2 = {
    .name = "avx2 f32 6x16",
    .isa = CVF_CPU_ISA_AVX2,
    .mr = CVF_CPU_F32_AVX2_MR,
    .nr = CVF_CPU_F32_AVX2_NR,
    .format = CVF_CPU_PACK_F32,
    .run = cvf_cpu_kernel_f32_avx2,
    .run_fused = cvf_cpu_kernel_f32_avx2_fused,
    .interleave = cvf_cpu_interleave_f32_avx2,
    .dot = cvf_cpu_dot_avx2,
    .rows = cvf_cpu_rows_avx2,
    .stream = cvf_cpu_stream_avx2,
    .direct = cvf_cpu_direct_f32_avx2,
};

/* AVX-512 fp32 kernel (also the AVX512_BF16 level's kernel for anything but bf16 x bf16). */
static const cvf_cpu_kernel f32_avx512 = {
    .name = "avx512 f32 12x32",
    .isa = CVF_CPU_ISA_AVX512,
    .mr = CVF_CPU_F32_AVX512_MR,
    .nr = CVF_CPU_F32_AVX512_NR,
    .format = CVF_CPU_PACK_F32,
    .run = cvf_cpu_kernel_f32_avx512,
    .run_fused = cvf_cpu_kernel_f32_avx512_fused,
    /* AVX2 code too: the A pack's 8 x 8 transposes, 12 rows as 8 + 4; A's pack 1.3% -> 0.8% of a
     * 2048^3 product's samples (PERF.md, 2026-12-05 fourth session) */
    .interleave = cvf_cpu_interleave_f32_avx2,
    .dot = cvf_cpu_dot_avx2, /* AVX2 code, on every AVX-512 CPU: the MLP at S = 8 1.43x -> 1.11x
                                    OpenBLAS (2 threads, development VM; PERF.md, issue 16) */
    .rows = cvf_cpu_rows_avx2,
    .stream = cvf_cpu_stream_avx2,
    .direct = cvf_cpu_direct_f32_avx512,
    /* KC up to 360 at 48 KB of L1 (2048 in 6 passes of 342): 2048^3 on one thread 1.04-1.06x
     * OpenBLAS at the half-L1 KC of 187, 0.98-1.00x at 342, 1.00-1.03x at 384 (PERF.md) */
    .kc_l1_16ths = 15,
};

/* AVX-512 BF16 kernel (vdpbf16ps) for bf16 x bf16 products. */
static const cvf_cpu_kernel bf16_avx512 = {
    .name = "avx512_bf16 bf16 14x32",
    .isa = CVF_CPU_ISA_AVX512_BF16,
    .mr = CVF_CPU_BF16_AVX512_MR,
    .nr = CVF_CPU_BF16_AVX512_NR,
    .format = CVF_CPU_PACK_BF16,
    .run = cvf_cpu_kernel_bf16_avx512,
    .dot = cvf_cpu_dot_avx2, /* a few tokens: the fp32 tiles read the bf16 weight in place */
    .rows = cvf_cpu_rows_avx2,
    .stream = cvf_cpu_stream_avx2,
};
#endif

#if defined(__x86_64__) && defined(CVF_CPU_AMX_KERNEL)
/* AMX kernel (tdpbf16ps on tiles) for bf16 x bf16 products: the tiles are configured per thread. */
static const cvf_cpu_kernel bf16_amx = {
    .name = "amx bf16 32x32",
    .isa = CVF_CPU_ISA_AMX,
    .mr = CVF_CPU_BF16_AMX_MR,
    .nr = CVF_CPU_BF16_AMX_NR,
    .format = CVF_CPU_PACK_BF16_TILES,
    .run = cvf_cpu_kernel_bf16_amx,
    .run_overlapped = cvf_cpu_kernel_bf16_amx_overlapped,
    .dot = cvf_cpu_dot_avx2, /* a few tokens: packing the weight into tiles cost more than its FMAs */
    .rows = cvf_cpu_rows_avx2,
    .stream = cvf_cpu_stream_avx2,
    /* Two blocks per thread of 2 panels (64 rows) at the least: the B micro-panels stream from L2
     * for every panel whatever the block (gemm.c, AMX_KC_MAX), so small blocks lose no L1 reuse,
     * and one block per thread left a slowed core holding up every pass. On the 16-core host
     * (cores at 0.66-1.07 of one alone's rate when others run) 32 blocks of 64 rows against 16 of
     * 128 (CVF_CPU_BLOCKS=0,64,0) ran MatMul+ReLU bf16 2048^3 in 6.75 / 4.16 / 5.16 ms against
     * 8.19 / 4.61 / 5.13 (PERF.md, 2026-12-05 fourth session). */
    .min_block_panels = 2,
    .blocks_per_thread = 2,
    /* K2-1 of the MLP backward (768 x 3072 x 2048, 24 panels on the 16-core host, KC 2048): 2 blocks
     * of 384 rows (1.5 MB of A) x 8 chunks ran in 2.48 / 2.26 ms where the 4 x 4 that half of L2
     * allowed took 3.14 / 2.48: each task reads half as much of B for twice the A, 768 rows and
     * columns to move where 4 x 4 moves 960 (PERF.md, 2026-12-06 eighth session) */
    .balance_l2_16ths = 12,
    .begin = cvf_cpu_kernel_bf16_amx_begin,
    .end = cvf_cpu_kernel_bf16_amx_end,
};
#endif

/* See kernels.h; NULL only for a level outside the enum (or an x86 level on another target). */
const cvf_cpu_kernel *cvf_cpu_kernel_for(cvf_cpu_isa isa, cvf_dtype a, cvf_dtype b)
{
    bool bf16_pair = a == CVF_BF16 && b == CVF_BF16;
    switch (isa) {
    case CVF_CPU_ISA_GENERIC: return &f32_generic;
#if defined(__x86_64__) || defined(__i386__)
    case CVF_CPU_ISA_AVX2: return &f32_avx2;
    case CVF_CPU_ISA_AVX512: return &f32_avx512;
    case CVF_CPU_ISA_AVX512_BF16: return bf16_pair && cvf_cpu_bf16_dot_pays() ? &bf16_avx512 : &f32_avx512;
#endif
#if defined(__x86_64__) && defined(CVF_CPU_AMX_KERNEL)
    case CVF_CPU_ISA_AMX: return bf16_pair ? &bf16_amx : &f32_avx512;
#endif
    default: (void)bf16_pair; return NULL;
    }
}

/*
 * CPU instruction-set levels: detected once at run time, forced with CVF_CPU_ISA, logged with
 * CVF_DEBUG. Every kernel variant (micro-kernels, vector epilogue, conversions) is chosen by the
 * active level, so a test run with CVF_CPU_ISA=generic|avx2|avx512|avx512_bf16|amx exercises that
 * variant on any CPU that has it.
 */
#ifndef CVF_CPU_ISA_H
#define CVF_CPU_ISA_H

#include <stdbool.h>

typedef enum cvf_cpu_isa {
    CVF_CPU_ISA_GENERIC = 0, /* portable C (whatever the compiler's baseline gives) */
    CVF_CPU_ISA_AVX2,        /* AVX2 + FMA + F16C */
    CVF_CPU_ISA_AVX512,      /* AVX-512 F/BW/DQ/VL + FMA + F16C */
    CVF_CPU_ISA_AVX512_BF16, /* AVX512 plus avx512_bf16 (vdpbf16ps for bf16 x bf16 products) */
    CVF_CPU_ISA_AMX,         /* AVX512_BF16 plus AMX-TILE + AMX-BF16 (tdpbf16ps tiles for bf16 x bf16), with the
                              * OS's permission for the tile data (Linux: arch_prctl ARCH_REQ_XCOMP_PERM) */
    CVF_CPU_ISA_COUNT
} cvf_cpu_isa;

/* The level every CPU kernel uses in this process: the best the CPU supports, or the one named
 * by the environment variable CVF_CPU_ISA (generic, avx2, avx512, avx512_bf16, amx) when the CPU
 * supports it; an unsupported or unknown name falls back to the detected level with a warning on
 * stderr. Decided once, on the first call; CVF_DEBUG=1 logs the decision on stderr. */
cvf_cpu_isa cvf_cpu_isa_active(void);

/* True when this CPU (and OS) can run code of the given level. */
bool cvf_cpu_isa_supported(cvf_cpu_isa isa);

/* Whether bf16 x bf16 products at the AVX512_BF16 level take the vdpbf16ps kernel (true) or are
 * converted to fp32 for the FMA kernel (false), decided once from a known table: vdpbf16ps pays on
 * AMD (Zen 4/5, where that kernel was tuned) and loses on Intel cores (Sapphire Rapids: 193 ms
 * against 134 ms for the fp32 path at 2048^3 on one thread; PERF.md, issue 15). The environment
 * variable CVF_CPU_BF16_DOT=1|0 overrides the table (the tests force 1 to keep the kernel covered).
 * CVF_DEBUG=1 logs the choice. The AMX level is not concerned: its tiles win everywhere. */
bool cvf_cpu_bf16_dot_pays(void);

/* Whether the fp32 FMA kernels run with subnormal operands (inputs and partial sums) read as zero
 * (x86's DAZ, set around the kernel calls only: gemm.c, kernels_begin), decided once from a known
 * table: on Intel cores an FMA with a subnormal operand takes a microcode assist (a 2048 x 768 x
 * 3072 product whose A held 1.7% of them ran 4-8x slower, as OpenBLAS's did), on AMD it costs
 * nothing while switching the mode around each kernel call costs 5-12% of small products, so: on
 * x86 with SSE2 except AMD and Hygon (Zen cores). The AMX and vdpbf16ps kernels read subnormals as
 * zero in hardware. CVF_CPU_DAZ=1|0 overrides the table (ctest runs the op suite with both).
 * CVF_DEBUG=1 logs the choice. */
bool cvf_cpu_kernels_daz(void);

/* Whether an FMA with a subnormal operand costs this CPU a microcode assist, from the same known
 * table: on x86 except AMD and Hygon (Zen cores execute them at full speed). Where it does and
 * the kernels keep subnormals (cvf_cpu_kernels_daz false), the dot tiles, which meet a subnormal
 * in any of 8 lanes of every vector, give way to the packed kernel when A holds one (gemm.c). */
bool cvf_cpu_subnormals_slow(void);

/* "generic", "avx2", "avx512", "avx512_bf16", "amx". */
const char *cvf_cpu_isa_name(cvf_cpu_isa isa);

#endif /* CVF_CPU_ISA_H */

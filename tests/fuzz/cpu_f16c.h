/*
 * Included (fuzz builds only) into a copy of src/cpu/isa.c whose __builtin_cpu_supports("f16c")
 * was replaced by cvf_fuzz_cpu_has_f16c(): clang 14 does not know the "f16c" feature string of
 * that builtin (clang 15 does), and the fuzzers need clang. CPUID leaf 1, ECX bit 29.
 */
#ifndef CVF_FUZZ_CPU_F16C_H
#define CVF_FUZZ_CPU_F16C_H

#include <stdbool.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static inline bool cvf_fuzz_cpu_has_f16c(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
#else
    return false;
#endif
}

#endif

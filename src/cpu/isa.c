/* Run-time CPU feature detection and the CVF_CPU_ISA override; see isa.h. */
#include "cpu/isa.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static const char *const isa_names[CVF_CPU_ISA_COUNT] = {"generic", "avx2", "avx512", "avx512_bf16", "amx"};

const char *cvf_cpu_isa_name(cvf_cpu_isa isa)
{
    return (unsigned)isa < CVF_CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}

/* Which levels this CPU and OS can run, read once (cpu_levels_once); process-wide, not per-call. */
static bool level_ok[CVF_CPU_ISA_COUNT];
static pthread_once_t levels_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
/* CPUID leaf 1 ECX, leaf 7 (subleaf 0) EBX, leaf 7 subleaf 1 EAX bits. */
#define CPUID1_ECX_FMA (1u << 12)
#define CPUID1_ECX_OSXSAVE (1u << 27)
#define CPUID1_ECX_AVX (1u << 28)
#define CPUID1_ECX_F16C (1u << 29)
#define CPUID7_EBX_AVX2 (1u << 5)
#define CPUID7_EBX_AVX512F (1u << 16)
#define CPUID7_EBX_AVX512DQ (1u << 17)
#define CPUID7_EBX_AVX512BW (1u << 30)
#define CPUID7_EBX_AVX512VL (1u << 31)
#define CPUID7_1_EAX_AVX512_BF16 (1u << 5)
#define CPUID7_EDX_AMX_BF16 (1u << 22)
#define CPUID7_EDX_AMX_TILE (1u << 24)
/* XCR0 state components the OS saves on context switches: SSE + YMM upper halves for AVX, and
 * the opmask, ZMM0-15 upper halves and ZMM16-31 for AVX-512. */
#define XCR0_YMM 0x6u
#define XCR0_ZMM 0xe0u
/* and the tile configuration (bit 17) and tile data (bit 18) for AMX */
#define XCR0_TILE 0x60000u

/* The OS-enabled state components (XCR0), read with XGETBV; only valid when CPUID says OSXSAVE.
 * Raw instruction rather than _xgetbv, which needs -mxsave on the whole file. */
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/*
 * Asks Linux for the right to use the AMX tile data in this process (all its threads): without
 * it, the first tile instruction raises SIGILL (the kernel keeps the 8 KiB tile state out of
 * every thread's signal frame and context switch unless asked). Process-wide and idempotent.
 */
static bool amx_permitted(void)
{
#if defined(__linux__) && defined(__x86_64__) && defined(CVF_CPU_AMX_KERNEL)
    const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
    return false; /* the request is Linux's (and the kernel needs a compiler with AMX): the level stays off */
#endif
}

/* Fills level_ok from CPUID and XCR0 (a level needs both the instructions and the OS's saving of
 * their registers). The levels: avx2 = AVX2 + FMA + F16C; avx512 = avx2 + AVX-512 F/BW/DQ/VL;
 * avx512_bf16 = avx512 + AVX512_BF16; amx = avx512_bf16 + AMX-TILE + AMX-BF16 and the tile state
 * enabled in XCR0 (the OS's permission is asked for only when the level is wanted: amx_granted). */
static void cpu_levels_once(void)
{
    unsigned a, b, c, d;
    level_ok[CVF_CPU_ISA_GENERIC] = true;
    if (!__get_cpuid_count(1, 0, &a, &b, &c, &d))
        return;
    const unsigned ecx1 = c;
    if (!(ecx1 & CPUID1_ECX_OSXSAVE) || !(ecx1 & CPUID1_ECX_AVX))
        return;
    const uint64_t xcr0 = read_xcr0();
    if ((xcr0 & XCR0_YMM) != XCR0_YMM || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return;
    const unsigned ebx7 = b, edx7 = d, max_subleaf7 = a;
    const unsigned avx2_bits = CPUID1_ECX_FMA | CPUID1_ECX_F16C;
    level_ok[CVF_CPU_ISA_AVX2] = (ecx1 & avx2_bits) == avx2_bits && (ebx7 & CPUID7_EBX_AVX2);
    const unsigned avx512_bits = CPUID7_EBX_AVX512F | CPUID7_EBX_AVX512BW | CPUID7_EBX_AVX512DQ | CPUID7_EBX_AVX512VL;
    level_ok[CVF_CPU_ISA_AVX512] =
        level_ok[CVF_CPU_ISA_AVX2] && (ebx7 & avx512_bits) == avx512_bits && (xcr0 & XCR0_ZMM) == XCR0_ZMM;
    if (level_ok[CVF_CPU_ISA_AVX512] && max_subleaf7 >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
        level_ok[CVF_CPU_ISA_AVX512_BF16] = (a & CPUID7_1_EAX_AVX512_BF16) != 0;
    const unsigned amx_bits = CPUID7_EDX_AMX_BF16 | CPUID7_EDX_AMX_TILE;
    level_ok[CVF_CPU_ISA_AMX] = level_ok[CVF_CPU_ISA_AVX512_BF16] && (edx7 & amx_bits) == amx_bits &&
                                (xcr0 & XCR0_TILE) == XCR0_TILE; /* and the OS's permission: amx_granted */
}
#else
/* Not x86: the portable kernels only. */
static void cpu_levels_once(void)
{
    level_ok[CVF_CPU_ISA_GENERIC] = true;
}
#endif

/* True when the CPU says it is AMD's, or Hygon's (Zen cores) (CPUID leaf 0 vendor string). */
static bool vendor_is_amd(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return false;
    char vendor[13];
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    return strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0;
#else
    return false;
#endif
}

/* An environment switch: "0" is off, any other non-empty value on; unset or empty gives fallback. */
static bool env_switch(const char *name, bool fallback)
{
    const char *value = getenv(name);
    return value && *value ? strcmp(value, "0") != 0 : fallback;
}

/* Set once by decide_bf16_dot (pthread_once); process-wide configuration. */
static bool bf16_dot = false;
static pthread_once_t bf16_dot_once = PTHREAD_ONCE_INIT;

static void decide_bf16_dot(void)
{
    bf16_dot = env_switch("CVF_CPU_BF16_DOT", vendor_is_amd());
}

bool cvf_cpu_bf16_dot_pays(void)
{
    pthread_once(&bf16_dot_once, decide_bf16_dot);
    return bf16_dot;
}

/* Set once by decide_daz (pthread_once); process-wide configuration. */
static bool kernels_daz = false;
static pthread_once_t kernels_daz_once = PTHREAD_ONCE_INIT;

static void decide_daz(void)
{
#if defined(__SSE2__) /* gemm.c's kernels_begin sets the bit under the same condition */
    kernels_daz = env_switch("CVF_CPU_DAZ", !vendor_is_amd());
#else
    kernels_daz = false; /* no MXCSR: subnormals are always honoured */
#endif
}

bool cvf_cpu_kernels_daz(void)
{
    pthread_once(&kernels_daz_once, decide_daz);
    return kernels_daz;
}

bool cvf_cpu_subnormals_slow(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return !vendor_is_amd();
#else
    return false;
#endif
}

/* The kernel bf16 x bf16 products take at a level, for the CVF_DEBUG log. */
static const char *bf16_route(cvf_cpu_isa isa)
{
    if (isa == CVF_CPU_ISA_AMX)
        return "AMX tiles (tdpbf16ps)";
    if (isa == CVF_CPU_ISA_AVX512_BF16)
        return cvf_cpu_bf16_dot_pays() ? "vdpbf16ps (AMD, or CVF_CPU_BF16_DOT=1)"
                                       : "converted to fp32 FMA (vdpbf16ps is slower on this vendor's cores; "
                                         "CVF_CPU_BF16_DOT=1 forces it)";
    return "converted to fp32 FMA";
}

/* The permission for the tile data, asked for once and only when the AMX level is wanted: the grant
 * enlarges every signal frame of the process (a program with a small sigaltstack would notice), so a
 * process that forces a lower level never makes the request. */
static bool amx_ok = false;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void request_amx(void)
{
    amx_ok = amx_permitted();
}

static bool amx_granted(void)
{
    pthread_once(&amx_once, request_amx);
    return amx_ok;
}

/* What the CPU and XCR0 offer, before the OS's AMX permission. */
static bool level_offered(cvf_cpu_isa isa)
{
    pthread_once(&levels_once, cpu_levels_once);
    return (unsigned)isa < CVF_CPU_ISA_COUNT && level_ok[isa];
}

bool cvf_cpu_isa_supported(cvf_cpu_isa isa)
{
    if (!level_offered(isa))
        return false;
    return isa != CVF_CPU_ISA_AMX || amx_granted();
}

/* Set once by decide_isa (pthread_once); process-wide configuration, not per-call state. */
static cvf_cpu_isa active_isa = CVF_CPU_ISA_GENERIC;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

/* The best level this CPU offers (AMX without asking the OS yet). */
static cvf_cpu_isa detect_isa(void)
{
    cvf_cpu_isa best = CVF_CPU_ISA_GENERIC;
    for (int isa = 0; isa < CVF_CPU_ISA_COUNT; isa++)
        if (level_offered((cvf_cpu_isa)isa))
            best = (cvf_cpu_isa)isa;
    return best;
}

/* Detects the level, applies CVF_CPU_ISA, logs under CVF_DEBUG. */
static void decide_isa(void)
{
    cvf_cpu_isa detected = detect_isa();
    const char *forced = getenv("CVF_CPU_ISA");
    active_isa = detected;
    if (forced && *forced) {
        int match = -1;
        for (int isa = 0; isa < CVF_CPU_ISA_COUNT; isa++)
            if (strcmp(forced, isa_names[isa]) == 0)
                match = isa;
        if (match < 0)
            fprintf(stderr, "cvfuse: CVF_CPU_ISA=%s is not one of generic, avx2, avx512, avx512_bf16, amx; using %s\n",
                    forced, isa_names[detected]);
        else if (!cvf_cpu_isa_supported((cvf_cpu_isa)match))
            fprintf(stderr, "cvfuse: CVF_CPU_ISA=%s is not supported by this CPU (or OS, or build); using %s\n",
                    forced, isa_names[detected]);
        else
            active_isa = (cvf_cpu_isa)match;
    }
    bool refused = active_isa == CVF_CPU_ISA_AMX && !amx_granted();
    if (refused) /* the CPU has AMX but the OS (or this build) does not let us use it */
        active_isa = CVF_CPU_ISA_AVX512_BF16;
    if (env_switch("CVF_DEBUG", false))
        fprintf(stderr,
                "cvfuse: cpu isa %s (detected %s%s); bf16 x bf16 products: %s; fp32 kernels: subnormal inputs %s%s\n",
                isa_names[active_isa],
                isa_names[detected],
                refused                  ? ", but the OS refused the AMX tile state (or the build lacks the kernel)"
                : active_isa != detected ? ", forced by CVF_CPU_ISA"
                                         : "",
                bf16_route(active_isa),
                cvf_cpu_kernels_daz() ? "read as zero (CVF_CPU_DAZ=0 keeps them)" : "kept (CVF_CPU_DAZ=1 reads them as zero)",
                cvf_cpu_kernels_daz()       ? ""
                : cvf_cpu_subnormals_slow() ? ", at a microcode assist each (the dot tiles give way when A holds one)"
                                            : ", at full speed on this vendor's cores");
}

cvf_cpu_isa cvf_cpu_isa_active(void)
{
    pthread_once(&active_once, decide_isa);
    return active_isa;
}

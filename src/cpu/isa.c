/* Run-time CPU feature detection and the CVF_CPU_ISA override; see isa.h. */
#include "cpu/isa.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[CVF_CPU_ISA_COUNT] = {"generic", "avx2", "avx512", "avx512_bf16"};

const char *cvf_cpu_isa_name(cvf_cpu_isa isa)
{
    return (unsigned)isa < CVF_CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}

bool cvf_cpu_isa_supported(cvf_cpu_isa isa)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    switch (isa) {
    case CVF_CPU_ISA_GENERIC: return true;
    case CVF_CPU_ISA_AVX2: return avx2;
    case CVF_CPU_ISA_AVX512: return avx512;
    case CVF_CPU_ISA_AVX512_BF16: return avx512 && __builtin_cpu_supports("avx512bf16");
    default: return false;
    }
#else
    return isa == CVF_CPU_ISA_GENERIC;
#endif
}

/* Set once by decide_isa (pthread_once); process-wide configuration, not per-call state. */
static cvf_cpu_isa active_isa = CVF_CPU_ISA_GENERIC;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

/* The best level this CPU supports. */
static cvf_cpu_isa detect_isa(void)
{
    cvf_cpu_isa best = CVF_CPU_ISA_GENERIC;
    for (int isa = 0; isa < CVF_CPU_ISA_COUNT; isa++)
        if (cvf_cpu_isa_supported((cvf_cpu_isa)isa))
            best = (cvf_cpu_isa)isa;
    return best;
}

/* Detects the level, applies CVF_CPU_ISA, logs under CVF_DEBUG. */
static void decide_isa(void)
{
    cvf_cpu_isa detected = detect_isa();
    const char *forced = getenv("CVF_CPU_ISA");
    const char *debug = getenv("CVF_DEBUG");
    active_isa = detected;
    if (forced && *forced) {
        int match = -1;
        for (int isa = 0; isa < CVF_CPU_ISA_COUNT; isa++)
            if (strcmp(forced, isa_names[isa]) == 0)
                match = isa;
        if (match < 0)
            fprintf(stderr, "cvfuse: CVF_CPU_ISA=%s is not one of generic, avx2, avx512, avx512_bf16; using %s\n",
                    forced, isa_names[detected]);
        else if (!cvf_cpu_isa_supported((cvf_cpu_isa)match))
            fprintf(stderr, "cvfuse: CVF_CPU_ISA=%s is not supported by this CPU; using %s\n", forced,
                    isa_names[detected]);
        else
            active_isa = (cvf_cpu_isa)match;
    }
    if (debug && *debug && strcmp(debug, "0") != 0)
        fprintf(stderr, "cvfuse: cpu isa %s (detected %s%s)\n", isa_names[active_isa], isa_names[detected],
                active_isa != detected ? ", forced by CVF_CPU_ISA" : "");
}

cvf_cpu_isa cvf_cpu_isa_active(void)
{
    pthread_once(&active_once, decide_isa);
    return active_isa;
}

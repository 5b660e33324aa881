/*
 * The peak probe of bench: how many fp32 FLOP/s (and bf16 dot-product FLOP/s) this CPU delivers
 * with a given number of threads running at once. Each thread runs a loop of independent
 * multiply-adds with many accumulator chains, so that latency never limits it: 16 zmm chains of
 * vfmadd (AVX-512) or 12 ymm chains (AVX2 + FMA), and 16 zmm chains of vdpbf16ps (avx512bf16) or,
 * where the CPU has AMX, 4 independent tdpbf16ps accumulator tiles (the bf16 peak is then AMX's).
 * The threads start together at a gate; the peak is all their FLOPs over the span from the
 * first start to the last finish, best of a few repetitions. The ISA is picked at run time
 * (__builtin_cpu_supports), so the file builds with the project's plain flags.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cli.h"
#include "cpu/isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PEAK_X86 1
#include <immintrin.h>
#else
#define PEAK_X86 0
#endif

/* Seconds one repetition of a probe aims to last, and the repetitions (the best one counts). */
#define PEAK_SECONDS 0.03
#define PEAK_REPS 3

/* The kinds of loops the probe can run. */
typedef enum peak_kind { PEAK_FMA512, PEAK_FMA256, PEAK_BF16, PEAK_AMX } peak_kind;

/* FLOPs of one iteration of each loop: chains x lanes x 2 (vdpbf16ps: two products per lane). */
static double flops_per_iteration(peak_kind kind)
{
    switch (kind) {
    case PEAK_FMA512: return 16.0 * 16.0 * 2.0;
    case PEAK_FMA256: return 12.0 * 8.0 * 2.0;
    case PEAK_BF16: return 16.0 * 16.0 * 4.0;
    case PEAK_AMX: return 4.0 * 16.0 * 16.0 * 32.0 * 2.0; /* 4 tiles of 16 x 16, 32 deep */
    }
    return 0.0;
}

#if PEAK_X86

/* Sixteen independent zmm FMA chains, iterations times; returns a value that depends on them all. */
__attribute__((target("avx512f"))) static float loop_fma512(int64_t iterations)
{
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f);
    __m512 c3 = _mm512_set1_ps(0.3f), c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f);
    __m512 c6 = _mm512_set1_ps(0.6f), c7 = _mm512_set1_ps(0.7f), c8 = _mm512_set1_ps(0.8f);
    __m512 c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f), c11 = _mm512_set1_ps(1.1f);
    __m512 c12 = _mm512_set1_ps(1.2f), c13 = _mm512_set1_ps(1.3f), c14 = _mm512_set1_ps(1.4f);
    __m512 c15 = _mm512_set1_ps(1.5f);
    for (int64_t i = 0; i < iterations; i++) {
        c0 = _mm512_fmadd_ps(c0, m, a), c1 = _mm512_fmadd_ps(c1, m, a), c2 = _mm512_fmadd_ps(c2, m, a);
        c3 = _mm512_fmadd_ps(c3, m, a), c4 = _mm512_fmadd_ps(c4, m, a), c5 = _mm512_fmadd_ps(c5, m, a);
        c6 = _mm512_fmadd_ps(c6, m, a), c7 = _mm512_fmadd_ps(c7, m, a), c8 = _mm512_fmadd_ps(c8, m, a);
        c9 = _mm512_fmadd_ps(c9, m, a), c10 = _mm512_fmadd_ps(c10, m, a), c11 = _mm512_fmadd_ps(c11, m, a);
        c12 = _mm512_fmadd_ps(c12, m, a), c13 = _mm512_fmadd_ps(c13, m, a), c14 = _mm512_fmadd_ps(c14, m, a);
        c15 = _mm512_fmadd_ps(c15, m, a);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                             _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15)));
    return _mm512_reduce_add_ps(_mm512_add_ps(s, t));
}

/* Twelve independent ymm FMA chains, iterations times; returns a value that depends on them all. */
__attribute__((target("avx2,fma"))) static float loop_fma256(int64_t iterations)
{
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f);
    __m256 c3 = _mm256_set1_ps(0.3f), c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f);
    __m256 c6 = _mm256_set1_ps(0.6f), c7 = _mm256_set1_ps(0.7f), c8 = _mm256_set1_ps(0.8f);
    __m256 c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f), c11 = _mm256_set1_ps(1.1f);
    for (int64_t i = 0; i < iterations; i++) {
        c0 = _mm256_fmadd_ps(c0, m, a), c1 = _mm256_fmadd_ps(c1, m, a), c2 = _mm256_fmadd_ps(c2, m, a);
        c3 = _mm256_fmadd_ps(c3, m, a), c4 = _mm256_fmadd_ps(c4, m, a), c5 = _mm256_fmadd_ps(c5, m, a);
        c6 = _mm256_fmadd_ps(c6, m, a), c7 = _mm256_fmadd_ps(c7, m, a), c8 = _mm256_fmadd_ps(c8, m, a);
        c9 = _mm256_fmadd_ps(c9, m, a), c10 = _mm256_fmadd_ps(c10, m, a), c11 = _mm256_fmadd_ps(c11, m, a);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* Sixteen independent zmm vdpbf16ps chains, iterations times; returns a value that depends on them. */
__attribute__((target("avx512bf16,avx512f"))) static float loop_bf16(int64_t iterations)
{
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
    const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(3e-3f), _mm512_set1_ps(1e-3f));
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f);
    __m512 c3 = _mm512_set1_ps(0.3f), c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f);
    __m512 c6 = _mm512_set1_ps(0.6f), c7 = _mm512_set1_ps(0.7f), c8 = _mm512_set1_ps(0.8f);
    __m512 c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f), c11 = _mm512_set1_ps(1.1f);
    __m512 c12 = _mm512_set1_ps(1.2f), c13 = _mm512_set1_ps(1.3f), c14 = _mm512_set1_ps(1.4f);
    __m512 c15 = _mm512_set1_ps(1.5f);
    for (int64_t i = 0; i < iterations; i++) {
        c0 = _mm512_dpbf16_ps(c0, x, y), c1 = _mm512_dpbf16_ps(c1, x, y), c2 = _mm512_dpbf16_ps(c2, x, y);
        c3 = _mm512_dpbf16_ps(c3, x, y), c4 = _mm512_dpbf16_ps(c4, x, y), c5 = _mm512_dpbf16_ps(c5, x, y);
        c6 = _mm512_dpbf16_ps(c6, x, y), c7 = _mm512_dpbf16_ps(c7, x, y), c8 = _mm512_dpbf16_ps(c8, x, y);
        c9 = _mm512_dpbf16_ps(c9, x, y), c10 = _mm512_dpbf16_ps(c10, x, y), c11 = _mm512_dpbf16_ps(c11, x, y);
        c12 = _mm512_dpbf16_ps(c12, x, y), c13 = _mm512_dpbf16_ps(c13, x, y), c14 = _mm512_dpbf16_ps(c14, x, y);
        c15 = _mm512_dpbf16_ps(c15, x, y);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                             _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15)));
    return _mm512_reduce_add_ps(_mm512_add_ps(s, t));
}

#if defined(CVF_PEAK_AMX)
/* The AMX probe's tiles: all eight 16 rows x 64 bytes. A constant (gcc 12 drops stores to a local
 * operand of _tile_loadconfig). */
static const struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_tiles = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

/* Four independent tdpbf16ps accumulator tiles on operands loaded once, iterations times. */
__attribute__((target("amx-tile,amx-bf16"))) static float loop_amx(int64_t iterations)
{
    static const uint16_t ones[16 * 32] = {0}; /* zeros: the values do not matter, only the rate */
    float out[16 * 16];
    _tile_loadconfig(&amx_tiles);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    for (int64_t i = 0; i < iterations; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

/* Whether the library's amx level can run here: CPUID, XCR0 and the OS's permission for the tile
 * data, which cvf_cpu_isa_supported asks for once (src/cpu/isa.c). */
static int amx_usable(void)
{
    return cvf_cpu_isa_supported(CVF_CPU_ISA_AMX);
}
#else  /* a compiler without AMX: no AMX probe */
static int amx_usable(void)
{
    return 0;
}

static float loop_amx(int64_t iterations)
{
    (void)iterations;
    return 0.0f;
}
#endif

/* Returns whether this CPU runs the loop of kind. */
static int kind_supported(peak_kind kind)
{
    __builtin_cpu_init();
    switch (kind) {
    case PEAK_FMA512: return __builtin_cpu_supports("avx512f");
    case PEAK_FMA256: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case PEAK_BF16: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
    case PEAK_AMX: return amx_usable();
    }
    return 0;
}

/* Runs the loop of kind (supported by the CPU). */
static float run_loop(peak_kind kind, int64_t iterations)
{
    switch (kind) {
    case PEAK_FMA512: return loop_fma512(iterations);
    case PEAK_FMA256: return loop_fma256(iterations);
    case PEAK_BF16: return loop_bf16(iterations);
    case PEAK_AMX: return loop_amx(iterations);
    }
    return 0.0f;
}

#else /* not x86-64: no probe */

/* Returns whether this CPU runs the loop of kind: never, off x86-64. */
static int kind_supported(peak_kind kind)
{
    (void)kind;
    return 0;
}

/* Never called off x86-64. */
static float run_loop(peak_kind kind, int64_t iterations)
{
    (void)kind;
    (void)iterations;
    return 0.0f;
}

#endif

/* The start gate: the probe threads wait until every one of them exists. */
typedef struct peak_gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    int open;
} peak_gate;

/* What one probe thread does and what it measured. */
typedef struct peak_worker {
    peak_kind kind;
    int64_t iterations;
    peak_gate *gate;
    double began, ended; /* cvft_now_seconds around its loop */
    float sink;          /* the loop's result, so that it is not optimised away */
} peak_worker;

/* Thread body: waits at the gate, then runs its loop, timed. */
static void *peak_thread(void *arg)
{
    peak_worker *w = arg;
    pthread_mutex_lock(&w->gate->lock);
    while (!w->gate->open)
        pthread_cond_wait(&w->gate->opened, &w->gate->lock);
    pthread_mutex_unlock(&w->gate->lock);
    w->began = cvft_now_seconds();
    w->sink = run_loop(w->kind, w->iterations);
    w->ended = cvft_now_seconds();
    return NULL;
}

/* Runs iterations of kind on threads threads at once; returns GFLOP/s over the span from the
 * first start to the last end, or NaN when threads could not be started. */
static double run_concurrent(peak_kind kind, int threads, int64_t iterations)
{
    peak_worker *workers = calloc((size_t)threads, sizeof *workers);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    peak_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int started = 0;
    for (; workers && ids && started < threads; started++) {
        workers[started] = (peak_worker){kind, iterations, &gate, 0.0, 0.0, 0.0f};
        if (pthread_create(&ids[started], NULL, peak_thread, &workers[started]) != 0)
            break;
    }
    pthread_mutex_lock(&gate.lock);
    gate.open = 1;
    pthread_cond_broadcast(&gate.opened);
    pthread_mutex_unlock(&gate.lock);
    for (int t = 0; t < started; t++)
        pthread_join(ids[t], NULL);
    double result = NAN;
    if (started == threads) {
        double first = workers[0].began, last = workers[0].ended;
        for (int t = 1; t < threads; t++) {
            first = workers[t].began < first ? workers[t].began : first;
            last = workers[t].ended > last ? workers[t].ended : last;
        }
        double flops = flops_per_iteration(kind) * (double)iterations * threads;
        result = last > first ? flops / (last - first) * 1e-9 : NAN;
    }
    free(workers);
    free(ids);
    return result;
}

/* Returns the best GFLOP/s of PEAK_REPS concurrent runs of kind on threads threads (NaN when the
 * CPU lacks the instructions). The iteration count is calibrated to last about PEAK_SECONDS. */
static double probe(peak_kind kind, int threads)
{
    if (!kind_supported(kind))
        return NAN;
    int64_t iterations = 100000;
    double warm = run_concurrent(kind, 1, iterations); /* also wakes the vector units up */
    if (!(warm > 0.0))
        return NAN;
    double per_second = warm * 1e9 / flops_per_iteration(kind);
    iterations = (int64_t)(per_second * PEAK_SECONDS) + 1;
    double best = NAN;
    for (int rep = 0; rep < PEAK_REPS; rep++) {
        double g = run_concurrent(kind, threads, iterations);
        if (isnan(best) || g > best)
            best = g;
    }
    return best;
}

void cli_peak_measure(int threads, cli_peak *peak)
{
    /* The peaks of the units the library runs on at its active level (CVF_CPU_ISA may force a lower
     * one than the CPU has): an AVX2 run is held against the AVX2 FMA peak, and bf16 products
     * against the unit that computes them (AMX tiles, vdpbf16ps where that kernel is taken, else the
     * fp32 FMA path they are converted to). */
    const cvf_cpu_isa isa = cvf_cpu_isa_active();
    peak->threads = threads < 1 ? 1 : threads;
    peak->fp32_isa = isa >= CVF_CPU_ISA_AVX512 ? "avx512f" : isa >= CVF_CPU_ISA_AVX2 ? "avx2+fma" : "none";
    peak->fp32_gflops = isa >= CVF_CPU_ISA_AVX512 ? probe(PEAK_FMA512, peak->threads)
                        : isa >= CVF_CPU_ISA_AVX2 ? probe(PEAK_FMA256, peak->threads)
                                                  : NAN;
    if (isa == CVF_CPU_ISA_AMX) {
        peak->bf16_isa = "amx";
        peak->bf16_gflops = probe(PEAK_AMX, peak->threads);
    } else if (isa == CVF_CPU_ISA_AVX512_BF16 && cvf_cpu_bf16_dot_pays()) {
        peak->bf16_isa = "vdpbf16ps";
        peak->bf16_gflops = probe(PEAK_BF16, peak->threads);
    } else {
        peak->bf16_isa = peak->fp32_isa; /* converted to fp32 for the FMA kernel */
        peak->bf16_gflops = peak->fp32_gflops;
    }
}

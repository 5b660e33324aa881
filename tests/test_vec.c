/*
 * The vector operations of every instruction-set level this CPU supports (src/cpu/vec.h):
 *  - load / store bit-exact with the scalar conversions of cvfuse.h on every 16-bit pattern,
 *    every rounding tie and a few million random binary32 patterns;
 *  - every operation at counts 0..67 with its arrays ending at a PROT_NONE page (a read or write
 *    past the end faults) and, separately, guard elements after the end that must not change;
 *  - tanh against libm's double tanh, in ulp: a dense sweep of [-20, 20], random patterns over
 *    the whole range, signed zeros, infinities, NaN, subnormals; bound TANH_MAX_ULP;
 *  - gelu and gelu' against a double evaluation of the same functions (the sigmoid form, which is
 *    the tanh formula without its cancellation), with an error bound scaled by the condition of
 *    the fp32 argument 2u (see gelu_bound); tails up to 1e30, infinities, NaN;
 *  - the exact GELU gelu_erf(x) = x Phi(x) in ulp of the true fp32 value (subnormal results in
 *    units of the smallest subnormal), and gelu_erf'(x) = Phi(x) + x phi(x) in ulp of the size of
 *    its two terms (its zero near x = -0.75 cancels whatever the method), both against long double
 *    erfcl / expl: bounds ERF_MAX_ULP, over the same sweep; a self-check shows the measure rejects
 *    wrong values (a few ulp off, the tanh GELU, a flushed tail);
 *  - relu (x < 0 ? 0 : x, bitwise), add and accumulate exact;
 *  - finish_tile (the one-call tile epilogue) bit-identical with the level's members applied row
 *    by row in the order vec.h states, every activation, dtype, width 1..67, rows past n untouched;
 *  - every level within the bounds of the generic level.
 * The largest errors seen are printed per level.
 */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/internal.h"
#include "cpu/vec.h"
#include "support.h"

/* tanh: the most ulp allowed. */
#define TANH_MAX_ULP 3.0
/* gelu, gelu': the most error allowed, in units of gelu_bound's scale. */
#define GELU_MAX_RATIO 4.0
/* gelu_erf, gelu_erf': the most error allowed, in ulp (see erf_error). */
#define ERF_MAX_ULP 4.0
/* Mismatches printed per check before only counting. */
#define MAX_EXAMPLES 5
/* Random binary32 patterns per conversion / per function. */
#define RANDOM_PATTERNS 4000000
/* Elements per block when sweeping a function. */
#define BLOCK 4096

/* ---- small helpers ------------------------------------------------------------------------- */

/* splitmix64: the next pseudo-random 64-bit value of *state. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Returns the bits of a binary32 value. */
static uint32_t bits_of(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* Returns the binary32 value with the given bits. */
static float float_of(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Returns malloc'd memory or exits: the test cannot go on without it. */
static void *checked_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test_vec: out of memory\n");
        exit(2);
    }
    return p;
}

/* A region whose usable bytes end exactly where a PROT_NONE page starts. */
typedef struct fenced {
    unsigned char *map; /* the whole mapping */
    size_t map_size;
    unsigned char *end; /* first byte of the inaccessible page */
} fenced;

/* Maps room for bytes (at most one page) followed by an inaccessible page. */
static void fenced_create(fenced *f)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    f->map_size = 2 * page;
    f->map = mmap(NULL, f->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f->map == MAP_FAILED || mprotect(f->map + page, page, PROT_NONE) != 0) {
        fprintf(stderr, "test_vec: mmap failed\n");
        exit(2);
    }
    f->end = f->map + page;
}

/* Unmaps a fenced region. */
static void fenced_destroy(fenced *f)
{
    munmap(f->map, f->map_size);
}

/* ---- conversions --------------------------------------------------------------------------- */

/* The scalar conversion of one float to the 16-bit dtype. */
static uint16_t scalar_to16(cvf_dtype dtype, float value)
{
    return dtype == CVF_F16 ? cvf_f32_to_f16(value) : cvf_f32_to_bf16(value);
}

/* The scalar conversion of one 16-bit pattern of dtype to float. */
static float scalar_from16(cvf_dtype dtype, uint16_t bits)
{
    return dtype == CVF_F16 ? cvf_f16_to_f32(bits) : cvf_bf16_to_f32(bits);
}

/* Loads every 16-bit pattern of both 16-bit dtypes in one call; compares bits with the scalar. */
static void test_load_all_patterns(const cvf_cpu_vec_ops *ops)
{
    uint16_t *src = checked_malloc(65536 * sizeof(uint16_t));
    float *dst = checked_malloc(65536 * sizeof(float));
    for (uint32_t i = 0; i < 65536; i++)
        src[i] = (uint16_t)i;
    cvf_dtype dtypes[2] = {CVF_F16, CVF_BF16};
    for (int d = 0; d < 2; d++) {
        ops->load(src, dtypes[d], 65536, dst);
        int64_t bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t want = bits_of(scalar_from16(dtypes[d], (uint16_t)i)), got = bits_of(dst[i]);
            if (want != got && bad++ < MAX_EXAMPLES)
                printf("  %s load %s 0x%04X: got 0x%08X want 0x%08X\n", ops->name, cvf_dtype_name(dtypes[d]),
                       (unsigned)i, (unsigned)got, (unsigned)want);
        }
        CHECK(bad == 0, "%s load %s: %lld of 65536 patterns differ", ops->name, cvf_dtype_name(dtypes[d]),
              (long long)bad);
    }
    free(src);
    free(dst);
}

/* Fills values with the binary32 inputs of the store test; returns how many. Room: 12 << 19 +
 * RANDOM_PATTERNS. Every top-19-bit pattern with five low parts (0, ties of f16, around them,
 * random), the midpoints between consecutive 16-bit values of both dtypes and their float
 * neighbours, and random patterns of every kind. */
static int64_t store_inputs(float *values, uint64_t *rng)
{
    int64_t n = 0;
    for (uint32_t top = 0; top < (1u << 19); top++) {
        uint32_t lows[5] = {0, 0x1000, 0x0FFF, 0x1001, (uint32_t)next_random(rng) & 0x1FFF};
        for (int j = 0; j < 5; j++)
            values[n++] = float_of((top << 13) | lows[j]);
    }
    cvf_dtype dtypes[2] = {CVF_F16, CVF_BF16};
    for (int d = 0; d < 2; d++)
        for (uint32_t h = 0; h < 65535; h++) {
            float a = scalar_from16(dtypes[d], (uint16_t)h), b = scalar_from16(dtypes[d], (uint16_t)(h + 1));
            if (isnan(a) || isnan(b) || isinf(a) || isinf(b) || (h & 0x7FFF) == 0x7FFF)
                continue;
            float mid = (float)(((double)a + (double)b) / 2.0); /* exact: one more bit than dtype */
            values[n++] = mid;
            values[n++] = nextafterf(mid, INFINITY);
            values[n++] = nextafterf(mid, -INFINITY);
        }
    for (int i = 0; i < RANDOM_PATTERNS; i++)
        values[n++] = float_of((uint32_t)next_random(rng));
    return n;
}

/* Stores the store inputs to both 16-bit dtypes in one call; compares bits with the scalar. */
static void test_store_patterns(const cvf_cpu_vec_ops *ops)
{
    uint64_t rng = 0x5EED0001u;
    float *values = checked_malloc(((size_t)12 << 19) * sizeof(float) + RANDOM_PATTERNS * sizeof(float));
    int64_t n = store_inputs(values, &rng);
    uint16_t *dst = checked_malloc((size_t)n * sizeof(uint16_t));
    cvf_dtype dtypes[2] = {CVF_F16, CVF_BF16};
    for (int d = 0; d < 2; d++) {
        ops->store(dst, dtypes[d], n, values);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            uint16_t want = scalar_to16(dtypes[d], values[i]);
            if (want != dst[i] && bad++ < MAX_EXAMPLES)
                printf("  %s store %s 0x%08X: got 0x%04X want 0x%04X\n", ops->name, cvf_dtype_name(dtypes[d]),
                       (unsigned)bits_of(values[i]), (unsigned)dst[i], (unsigned)want);
        }
        CHECK(bad == 0, "%s store %s: %lld of %lld values differ", ops->name, cvf_dtype_name(dtypes[d]), (long long)bad,
              (long long)n);
    }
    free(values);
    free(dst);
}

/* ---- reference math ------------------------------------------------------------------------ */

/* 2u = 2 k (x + c x^3) in double. */
static double ref_2u(double x)
{
    return 2.0 * CVF_GELU_K * (x + CVF_GELU_C * x * x * x);
}

/* gelu_tanh(x) = 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), in double (no cancellation). */
static double ref_gelu(double x)
{
    return x / (1.0 + exp(-ref_2u(x)));
}

/* gelu_tanh'(x) in double, as s + 2 x s (1 - s) k (1 + 3 c x^2); *scale gets the sum of the
 * magnitudes of the two terms (the size of the rounding errors near its zero). Beyond |x| =
 * 1e10 the limit, as vec.h specifies. */
static double ref_gelu_derivative(double x, double *scale)
{
    if (fabs(x) > 1e10) {
        *scale = 1.0;
        return x > 0 ? 1.0 : 0.0;
    }
    double t = ref_2u(x);
    double s = 1.0 / (1.0 + exp(-t)), one_minus_s = 1.0 / (1.0 + exp(t));
    double second = 2.0 * x * s * one_minus_s * CVF_GELU_K * (1.0 + 3.0 * CVF_GELU_C * x * x);
    *scale = fabs(s) + fabs(second);
    return s + second;
}

/* The unit in which gelu / gelu' errors are measured at x, for a result of size scale: fp32's
 * epsilon times scale, times 1 + |2u| where the sigmoid's exponential is small (2u < 0): there an
 * fp32 argument 2u off by a few ulp (its inputs x, k and c are rounded) moves exp(2u), and so the
 * result, by |2u| times as much. Plus 2^-140, a few subnormal ulp. */
static double gelu_bound(double x, double scale)
{
    double t = ref_2u(x);
    double condition = 1.0 + (t < 0 ? (isinf(t) ? 0.0 : -t) : 0.0);
    return FLT_EPSILON * condition * scale + ldexp(1.0, -140);
}

/* The error of got against want in ulp of want's binade (binary32, subnormals included). */
static double ulp_error(float got, double want);

/* Phi(x) = 0.5 erfc(-x / sqrt 2) in long double (x87 extended on x86: 11 more bits than double). */
static long double ref_phi(long double x)
{
    return 0.5L * erfcl(-x * 0.707106781186547524400844362104849039L);
}

/* gelu_erf(x) = x Phi(x) in long double; -0 at -Inf (the limit), +Inf at +Inf. */
static double ref_gelu_erf(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    return (double)((long double)x * ref_phi((long double)x));
}

/* gelu_erf'(x) = Phi(x) + x phi(x) in long double; *scale gets |Phi(x)| + |x phi(x)|, the size of
 * the rounding errors near its zero. 1 / 0 at +-Inf. */
static double ref_gelu_erf_derivative(double x, double *scale)
{
    if (isinf(x)) {
        *scale = 1.0;
        return x > 0 ? 1.0 : 0.0;
    }
    long double z = (long double)x, phi = z * expl(-0.5L * z * z) * 0.398942280401432677939946059934381868L;
    long double cdf = ref_phi(z);
    *scale = (double)(fabsl(cdf) + fabsl(phi));
    return (double)(cdf + phi);
}

/* The error of got against want in ulp of the binary32 binade of scale (>= |want|): ulp_error for
 * scale = |want|; NaN only matches NaN, infinities only themselves. */
static double erf_error(float got, double want, double scale)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(want) || isinf(got))
        return (double)got == want ? 0.0 : INFINITY;
    int e;
    frexp(scale, &e);
    if (e < -125)
        e = -125;
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

static double ulp_error(float got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(want) || isinf(got))
        return (double)got == want ? 0.0 : INFINITY;
    int e;
    frexp(want, &e);
    if (e < -125)
        e = -125;
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

/* Largest errors seen by one function on one level. */
typedef struct error_stats {
    double worst;       /* largest error (ulp or bound ratio) */
    float worst_x;      /* where */
    double worst_rel;   /* largest relative error over results of magnitude >= 1e-30 */
    double worst_rel_u; /* the same where 2u >= -8 (x >= about -2.4) */
    int64_t count, bad;
} error_stats;

/* Records an error at x; rel is the relative error (or -1 when not meaningful). */
static void stats_add(error_stats *st, double error, float x, double rel, bool in_core)
{
    st->count++;
    if (error > st->worst || (isnan(error) && !isnan(st->worst))) {
        st->worst = error;
        st->worst_x = x;
    }
    if (rel > st->worst_rel)
        st->worst_rel = rel;
    if (in_core && rel > st->worst_rel_u)
        st->worst_rel_u = rel;
}

/* ---- the function sweeps ------------------------------------------------------------------- */

/* Which function a sweep checks. */
typedef enum sweep_fn { FN_TANH, FN_GELU, FN_DGELU, FN_GELU_ERF, FN_DGELU_ERF } sweep_fn;

/* Whether fn is measured in ulp (tanh and the erf GELU) rather than in gelu_bound units. */
static bool fn_in_ulp(sweep_fn fn)
{
    return fn == FN_TANH || fn == FN_GELU_ERF || fn == FN_DGELU_ERF;
}

/* The bound of fn's error measure. */
static double fn_limit(sweep_fn fn)
{
    switch (fn) {
    case FN_TANH: return TANH_MAX_ULP;
    case FN_GELU_ERF:
    case FN_DGELU_ERF: return ERF_MAX_ULP;
    default: return GELU_MAX_RATIO;
    }
}

/* Runs fn of ops on the block x[0..n) into y (gelu in place on a copy, dgelu with grad 1). */
static void run_fn(const cvf_cpu_vec_ops *ops, sweep_fn fn, const float *x, float *y, int64_t n)
{
    switch (fn) {
    case FN_TANH: ops->tanh(x, y, n); break;
    case FN_GELU:
        memcpy(y, x, (size_t)n * sizeof(float));
        ops->activate(CVF_ACTIVATION_GELU_TANH, y, NULL, n);
        break;
    case FN_DGELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = 1.0f;
        ops->activate(CVF_ACTIVATION_DGELU_TANH, y, x, n);
        break;
    case FN_GELU_ERF:
        memcpy(y, x, (size_t)n * sizeof(float));
        ops->activate(CVF_ACTIVATION_GELU_ERF, y, NULL, n);
        break;
    case FN_DGELU_ERF:
        for (int64_t i = 0; i < n; i++)
            y[i] = 1.0f;
        ops->activate(CVF_ACTIVATION_DGELU_ERF, y, x, n);
        break;
    }
}

/* The error measure of fn's result got at x: ulp for tanh and the erf GELU (gelu_erf' in ulp of
 * its terms' size), bound ratio for gelu / gelu'. Sets *rel to the relative error (-1 when the
 * reference is below 1e-30 or not finite). */
static double fn_error(sweep_fn fn, float x, float got, double *rel)
{
    double want, scale = 0.0;
    switch (fn) {
    case FN_TANH: want = tanh((double)x); break;
    case FN_GELU:
        want = ref_gelu((double)x);
        scale = fabs(want);
        break;
    case FN_GELU_ERF: want = ref_gelu_erf((double)x); break;
    case FN_DGELU_ERF: want = ref_gelu_erf_derivative((double)x, &scale); break;
    default: want = ref_gelu_derivative((double)x, &scale); break;
    }
    *rel = (isfinite(want) && fabs(want) >= 1e-30) ? fabs((double)got - want) / fabs(want) : -1.0;
    if (fn == FN_TANH || fn == FN_GELU_ERF)
        return ulp_error(got, want);
    if (fn == FN_DGELU_ERF)
        return erf_error(got, want, scale);
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(want) || isinf(got))
        return (double)got == want ? 0.0 : INFINITY;
    return fabs((double)got - want) / gelu_bound((double)x, scale);
}

/* Checks fn on the block x[0..n) on ops, and against the generic level's results: the two may
 * differ by their two bounds. */
static void check_block(const cvf_cpu_vec_ops *ops, const cvf_cpu_vec_ops *generic, sweep_fn fn, const float *x,
                        int64_t n, error_stats *st, error_stats *versus)
{
    float y[BLOCK], g[BLOCK];
    run_fn(ops, fn, x, y, n);
    run_fn(generic, fn, x, g, n);
    double limit = fn_limit(fn);
    for (int64_t i = 0; i < n; i++) {
        double rel, generic_rel;
        double error = fn_error(fn, x[i], y[i], &rel);
        double generic_error = fn_error(fn, x[i], g[i], &generic_rel);
        stats_add(st, error, x[i], rel, ref_2u((double)x[i]) >= -8.0);
        double apart = (isnan(y[i]) || isnan(g[i]))   ? (isnan(y[i]) && isnan(g[i]) ? 0.0 : INFINITY)
                       : (double)y[i] == (double)g[i] ? 0.0
                                                      : error + generic_error;
        stats_add(versus, apart, x[i], -1.0, false);
        if (!(error <= limit) && st->bad++ < MAX_EXAMPLES)
            printf("  %s fn%d x=%.9g (0x%08X): got %.9g error %.3g\n", ops->name, (int)fn, (double)x[i],
                   (unsigned)bits_of(x[i]), (double)y[i], error);
        if (!(apart <= 2 * limit) && versus->bad++ < MAX_EXAMPLES)
            printf("  %s vs generic fn%d x=%.9g: %.9g vs %.9g\n", ops->name, (int)fn, (double)x[i], (double)y[i],
                   (double)g[i]);
    }
}

/* Sweeps fn over: every 61st binary32 pattern of [-20, 20], random patterns, tails up to 1e30,
 * subnormals and the special values; checks and prints the largest errors. */
static void test_function(const cvf_cpu_vec_ops *ops, const cvf_cpu_vec_ops *generic, sweep_fn fn)
{
    static const char *const names[] = {"tanh", "gelu", "gelu'", "gelu_erf", "gelu_erf'"};
    error_stats st = {0}, versus = {0};
    float x[BLOCK];
    int64_t n = 0;
    uint64_t rng = 0xF00D + (uint64_t)fn;
    uint32_t top = bits_of(20.0f);
    /* dense sweep, both signs */
    for (uint32_t b = 0; b <= top; b += 61) {
        x[n++] = float_of(b);
        x[n++] = float_of(b | 0x80000000u);
        if (n == BLOCK) {
            check_block(ops, generic, fn, x, n, &st, &versus);
            n = 0;
        }
    }
    /* random patterns over the whole range; tails |x| in [5, 1e30]; subnormals */
    for (int i = 0; i < RANDOM_PATTERNS / 4; i++) {
        uint64_t r = next_random(&rng);
        float sign = (r & 1) ? -1.0f : 1.0f;
        x[n++] = float_of((uint32_t)r);
        x[n++] = float_of((uint32_t)(r >> 32));
        x[n++] = sign * (float)(5.0 * pow(2e29, (double)((r >> 8) & 0xFFFFFF) / 16777216.0));
        x[n++] = float_of((uint32_t)(r >> 40) & 0x807FFFFFu);
        if (n == BLOCK) {
            check_block(ops, generic, fn, x, n, &st, &versus);
            n = 0;
        }
    }
    float specials[] = {0.0f,         -0.0f,         INFINITY, -INFINITY, NAN,    -NAN,   FLT_MIN,    -FLT_MIN,
                        FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX,  -FLT_MAX,  1e10f,  -1e10f, 1.0001e10f, -1.0001e10f,
                        1e-20f,       -1e-20f,       9.0f,     -9.0f,     88.0f,  -88.0f, 100.0f,     -100.0f,
                        -0.7517916f,  -0.75f,        -13.0f,   -14.0f,    -14.5f, -15.0f, -15.5f,     15.5f};
    int count = (int)(sizeof specials / sizeof specials[0]);
    if (n + count > BLOCK) {
        check_block(ops, generic, fn, x, n, &st, &versus);
        n = 0;
    }
    for (int i = 0; i < count; i++)
        x[n++] = specials[i];
    check_block(ops, generic, fn, x, n, &st, &versus);
    double limit = fn_limit(fn);
    CHECK(st.bad == 0, "%s %s: %lld of %lld values beyond the bound %g (worst %.3g at x=%.9g)", ops->name, names[fn],
          (long long)st.bad, (long long)st.count, limit, st.worst, (double)st.worst_x);
    CHECK(versus.bad == 0, "%s %s vs generic: %lld values apart by more than both bounds", ops->name, names[fn],
          (long long)versus.bad);
    if (fn_in_ulp(fn))
        printf("  %-12s %-9s max %.3f ulp (at x=%.9g); max rel error %.3g (results >= 1e-30)\n", ops->name, names[fn],
               st.worst, (double)st.worst_x, st.worst_rel);
    else
        printf("  %-12s %-9s max %.3f bound units (at x=%.9g); max rel error %.3g where 2u >= -8, %.3g overall "
               "(results >= 1e-30)\n",
               ops->name, names[fn], st.worst, (double)st.worst_x, st.worst_rel_u, st.worst_rel);
}

/* tanh's special values exactly: signed zeros, +-1 at the infinities, x for subnormals, NaN. */
static void test_tanh_specials(const cvf_cpu_vec_ops *ops)
{
    float x[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f}, y[6];
    ops->tanh(x, y, 6);
    CHECK(bits_of(y[0]) == 0 && bits_of(y[1]) == 0x80000000u, "%s tanh(+-0) keeps the sign", ops->name);
    CHECK(y[2] == 1.0f && y[3] == -1.0f, "%s tanh(+-Inf) = +-1", ops->name);
    CHECK(isnan(y[4]), "%s tanh(NaN) is NaN", ops->name);
    CHECK(y[5] == 1e-40f, "%s tanh(subnormal) = x", ops->name);
}

/* gelu / gelu' special values: gelu(+Inf) = +Inf, gelu(-Inf) = NaN, gelu(NaN) = NaN, gelu(-1e30) =
 * -0, gelu'(+-Inf) = 1 / 0, gelu'(NaN) = NaN. */
static void test_gelu_specials(const cvf_cpu_vec_ops *ops)
{
    float x[5] = {INFINITY, -INFINITY, NAN, -1e30f, 1e30f};
    float y[5];
    memcpy(y, x, sizeof y);
    ops->activate(CVF_ACTIVATION_GELU_TANH, y, NULL, 5);
    CHECK(y[0] == INFINITY && isnan(y[1]) && isnan(y[2]) && y[3] == 0.0f && y[4] == 1e30f,
          "%s gelu specials: %g %g %g %g %g", ops->name, (double)y[0], (double)y[1], (double)y[2], (double)y[3],
          (double)y[4]);
    for (int i = 0; i < 5; i++)
        y[i] = 2.0f;
    ops->activate(CVF_ACTIVATION_DGELU_TANH, y, x, 5);
    CHECK(y[0] == 2.0f && y[1] == 0.0f && isnan(y[2]) && y[3] == 0.0f && y[4] == 2.0f,
          "%s dgelu specials: %g %g %g %g %g", ops->name, (double)y[0], (double)y[1], (double)y[2], (double)y[3],
          (double)y[4]);
}

/* gelu_erf / gelu_erf' special values: gelu_erf(+Inf) = +Inf, gelu_erf(-Inf) = 0 (either sign),
 * NaN stays NaN, gelu_erf(-1e30) = 0, gelu_erf(1e30) = 1e30, gelu_erf(-0) = -0; gelu_erf'(+-Inf) =
 * 1 / 0, gelu_erf'(NaN) = NaN, gelu_erf'(0) = 1/2. */
static void test_gelu_erf_specials(const cvf_cpu_vec_ops *ops)
{
    float x[7] = {INFINITY, -INFINITY, NAN, -1e30f, 1e30f, -0.0f, 0.0f};
    float y[7];
    memcpy(y, x, sizeof y);
    ops->activate(CVF_ACTIVATION_GELU_ERF, y, NULL, 7);
    CHECK(y[0] == INFINITY && y[1] == 0.0f && isnan(y[2]) && y[3] == 0.0f && y[4] == 1e30f &&
              bits_of(y[5]) == 0x80000000u && bits_of(y[6]) == 0,
          "%s gelu_erf specials: %g %g %g %g %g %g %g", ops->name, (double)y[0], (double)y[1], (double)y[2],
          (double)y[3], (double)y[4], (double)y[5], (double)y[6]);
    for (int i = 0; i < 7; i++)
        y[i] = 2.0f;
    ops->activate(CVF_ACTIVATION_DGELU_ERF, y, x, 7);
    CHECK(y[0] == 2.0f && y[1] == 0.0f && isnan(y[2]) && y[3] == 0.0f && y[4] == 2.0f && y[5] == 1.0f && y[6] == 1.0f,
          "%s dgelu_erf specials: %g %g %g %g %g %g %g", ops->name, (double)y[0], (double)y[1], (double)y[2],
          (double)y[3], (double)y[4], (double)y[5], (double)y[6]);
}

/* The error measures must be able to fail: a result a few ulp off, the tanh GELU in place of the
 * erf one, a far tail flushed to zero or a NaN are each rejected, while the exact value passes. */
static void test_erf_measure_rejects(void)
{
    double rel;
    float x = -2.5f, want = (float)ref_gelu_erf((double)x);
    float off = want;
    for (int i = 0; i < 6; i++)
        off = nextafterf(off, 0.0f);
    CHECK(fn_error(FN_GELU_ERF, x, want, &rel) <= 0.5, "self-check: the rounded truth passes");
    CHECK(fn_error(FN_GELU_ERF, x, off, &rel) > ERF_MAX_ULP, "self-check: 6 ulp off is rejected");
    CHECK(fn_error(FN_GELU_ERF, x, (float)ref_gelu((double)x), &rel) > ERF_MAX_ULP,
          "self-check: gelu_tanh in place of gelu_erf is rejected");
    float far = -13.0f;
    CHECK(fn_error(FN_GELU_ERF, far, 0.0f, &rel) > ERF_MAX_ULP, "self-check: a flushed tail (gelu_erf(-13) = 0)");
    CHECK(fn_error(FN_DGELU_ERF, far, 0.0f, &rel) > ERF_MAX_ULP, "self-check: a flushed tail (gelu_erf'(-13) = 0)");
    CHECK(fn_error(FN_DGELU_ERF, 1.0f, NAN, &rel) > ERF_MAX_ULP, "self-check: NaN for gelu_erf'(1)");
    double scale;
    float d = (float)ref_gelu_erf_derivative(1.0, &scale);
    CHECK(fn_error(FN_DGELU_ERF, 1.0f, d, &rel) <= 0.5 &&
              fn_error(FN_DGELU_ERF, 1.0f,
                       nextafterf(nextafterf(nextafterf(nextafterf(nextafterf(d, 2.0f), 2.0f), 2.0f), 2.0f), 2.0f),
                       &rel) > ERF_MAX_ULP,
          "self-check: gelu_erf'(1) exact passes, 5 ulp off is rejected");
}

/* DGELU multiplies the gradient by gelu'(aux) with one rounding: x * (1 * gelu'(aux)) bit for
 * bit; relu is x < 0 ? 0 : x bit for bit; add and accumulate are exact float sums. */
static void test_exact_ops(const cvf_cpu_vec_ops *ops)
{
    enum { N = 100003 };
    float *x = checked_malloc(N * sizeof(float)), *aux = checked_malloc(N * sizeof(float));
    float *y = checked_malloc(N * sizeof(float)), *d = checked_malloc(N * sizeof(float));
    uint64_t rng = 0xABCDu;
    for (int i = 0; i < N; i++) {
        uint64_t r = next_random(&rng);
        x[i] = (i % 3 == 0) ? float_of((uint32_t)r) : (float)((double)(int32_t)r / 4e8);
        aux[i] = (i % 5 == 0) ? float_of((uint32_t)(r >> 32)) : (float)((double)(int32_t)(r >> 32) / 3e8);
    }
    x[0] = -0.0f, x[1] = NAN, x[2] = -INFINITY, x[3] = INFINITY, x[4] = -1e-40f;
    int64_t bad_dgelu = 0, bad_relu = 0, bad_add = 0, bad_acc = 0;
    for (int i = 0; i < N; i++)
        d[i] = 1.0f;
    ops->activate(CVF_ACTIVATION_DGELU_TANH, d, aux, N);
    memcpy(y, x, N * sizeof(float));
    ops->activate(CVF_ACTIVATION_DGELU_TANH, y, aux, N);
    for (int i = 0; i < N; i++) {
        float want = x[i] * d[i];
        bad_dgelu += bits_of(y[i]) != bits_of(want) && !(isnan(y[i]) && isnan(want));
    }
    memcpy(y, x, N * sizeof(float));
    ops->activate(CVF_ACTIVATION_RELU, y, NULL, N);
    for (int i = 0; i < N; i++)
        bad_relu += bits_of(y[i]) != bits_of(x[i] < 0.0f ? 0.0f : x[i]);
    memcpy(y, x, N * sizeof(float));
    ops->activate(CVF_ACTIVATION_NONE, y, NULL, N);
    CHECK(memcmp(x, y, N * sizeof(float)) == 0, "%s activation NONE changes nothing", ops->name);
    ops->add(y, aux, N);
    for (int i = 0; i < N; i++) {
        float want = x[i] + aux[i];
        bad_add += bits_of(y[i]) != bits_of(want) && !(isnan(y[i]) && isnan(want));
    }
    memcpy(y, x, N * sizeof(float));
    ops->accumulate(y, aux, N);
    for (int i = 0; i < N; i++) {
        float want = x[i] + aux[i];
        bad_acc += bits_of(y[i]) != bits_of(want) && !(isnan(y[i]) && isnan(want));
    }
    CHECK(bad_dgelu == 0, "%s dgelu: %lld results are not x * gelu'(aux)", ops->name, (long long)bad_dgelu);
    int64_t bad_dgelu_erf = 0;
    for (int i = 0; i < N; i++)
        d[i] = 1.0f;
    ops->activate(CVF_ACTIVATION_DGELU_ERF, d, aux, N);
    memcpy(y, x, N * sizeof(float));
    ops->activate(CVF_ACTIVATION_DGELU_ERF, y, aux, N);
    for (int i = 0; i < N; i++) {
        float want = x[i] * d[i];
        bad_dgelu_erf += bits_of(y[i]) != bits_of(want) && !(isnan(y[i]) && isnan(want));
    }
    CHECK(bad_dgelu_erf == 0, "%s dgelu_erf: %lld results are not x * gelu_erf'(aux)", ops->name,
          (long long)bad_dgelu_erf);
    CHECK(bad_relu == 0, "%s relu: %lld results are not x < 0 ? 0 : x", ops->name, (long long)bad_relu);
    CHECK(bad_add == 0, "%s add: %lld results differ", ops->name, (long long)bad_add);
    CHECK(bad_acc == 0, "%s accumulate: %lld results differ", ops->name, (long long)bad_acc);
    free(x);
    free(aux);
    free(y);
    free(d);
}

/* ---- tails and bounds ---------------------------------------------------------------------- */

/* Every operation on count elements, arrays ending at an inaccessible page (an access past the
 * end faults); results compared with the same elements of a long run. */
static void test_fenced(const cvf_cpu_vec_ops *ops, int count, const float *values, const float *long_gelu,
                        const float *long_tanh, const float *long_erf)
{
    fenced a, b, c, d;
    fenced_create(&a);
    fenced_create(&b);
    fenced_create(&c);
    fenced_create(&d);
    size_t fbytes = (size_t)count * sizeof(float), hbytes = (size_t)count * sizeof(uint16_t);
    float *fa = (float *)(a.end - fbytes), *fb = (float *)(b.end - fbytes);
    uint16_t *ha = (uint16_t *)(c.end - hbytes), *hb = (uint16_t *)(d.end - hbytes);
    bool ok = true;
    /* conversions */
    cvf_dtype dtypes[3] = {CVF_F32, CVF_F16, CVF_BF16};
    for (int k = 0; k < 3; k++) {
        if (dtypes[k] == CVF_F32) {
            memcpy(fa, values, fbytes);
            ops->store(fb, CVF_F32, count, fa);
            ok &= memcmp(fa, fb, fbytes) == 0;
            ops->load(fb, CVF_F32, count, fa);
            ok &= memcmp(values, fa, fbytes) == 0;
            continue;
        }
        memcpy(fa, values, fbytes);
        ops->store(hb, dtypes[k], count, fa);
        for (int i = 0; i < count; i++)
            ok &= hb[i] == scalar_to16(dtypes[k], values[i]);
        ops->load(hb, dtypes[k], count, fa);
        for (int i = 0; i < count; i++)
            ok &= bits_of(fa[i]) == bits_of(scalar_from16(dtypes[k], hb[i]));
        memcpy(ha, hb, hbytes);
        ops->load(ha, dtypes[k], count, fb);
        ok &= memcmp(fa, fb, fbytes) == 0;
    }
    /* activations, add, accumulate, tanh */
    memcpy(fa, values, fbytes);
    ops->activate(CVF_ACTIVATION_GELU_TANH, fa, NULL, count);
    ok &= memcmp(fa, long_gelu, fbytes) == 0;
    memcpy(fa, values, fbytes);
    ops->activate(CVF_ACTIVATION_GELU_ERF, fa, NULL, count);
    ok &= memcmp(fa, long_erf, fbytes) == 0;
    memcpy(fa, values, fbytes);
    ops->tanh(fa, fb, count);
    ok &= memcmp(fb, long_tanh, fbytes) == 0;
    for (int i = 0; i < count; i++)
        fb[i] = 1.0f;
    ops->activate(CVF_ACTIVATION_DGELU_TANH, fb, fa, count);
    ops->activate(CVF_ACTIVATION_DGELU_ERF, fb, fa, count);
    ops->activate(CVF_ACTIVATION_RELU, fb, NULL, count);
    ops->add(fb, fa, count);
    ops->accumulate(fb, fa, count);
    CHECK(ok, "%s count %d at a page end: results differ", ops->name, count);
    fenced_destroy(&a);
    fenced_destroy(&b);
    fenced_destroy(&c);
    fenced_destroy(&d);
}

/* Every operation on count elements starting at element shift of ordinary buffers: the results
 * match a long run and the guard elements after the end (and before the start) do not change. */
static void test_guards(const cvf_cpu_vec_ops *ops, int count, int shift, const float *values, const float *long_gelu,
                        const float *long_tanh, const float *long_erf)
{
    enum { GUARD = 40, ROOM = 68 + 2 * GUARD + 8 };
    const uint32_t poison = 0x7FA5A5A5u;
    float f[ROOM], g[ROOM], aux[ROOM];
    uint16_t h[2 * ROOM];
    bool ok = true, intact = true;
    for (int i = 0; i < ROOM; i++)
        f[i] = g[i] = aux[i] = float_of(poison);
    for (int i = 0; i < 2 * ROOM; i++)
        h[i] = 0x7D5A;
    float *x = f + GUARD + shift, *y = g + GUARD + shift, *a = aux + GUARD + shift;
    uint16_t *hx = h + GUARD + shift;
    cvf_dtype dtypes[3] = {CVF_F32, CVF_F16, CVF_BF16};
    for (int d = 0; d < 3; d++) {
        memcpy(x, values, (size_t)count * sizeof(float));
        void *store_to = dtypes[d] == CVF_F32 ? (void *)y : (void *)hx;
        ops->store(store_to, dtypes[d], count, x);
        ops->load(store_to, dtypes[d], count, x);
        for (int i = 0; i < count; i++) {
            float want = dtypes[d] == CVF_F32 ? values[i] : scalar_from16(dtypes[d], scalar_to16(dtypes[d], values[i]));
            ok &= bits_of(x[i]) == bits_of(want);
        }
    }
    memcpy(x, values, (size_t)count * sizeof(float));
    ops->activate(CVF_ACTIVATION_GELU_ERF, x, NULL, count);
    ok &= memcmp(x, long_erf, (size_t)count * sizeof(float)) == 0;
    memcpy(x, values, (size_t)count * sizeof(float));
    ops->activate(CVF_ACTIVATION_GELU_TANH, x, NULL, count);
    ok &= memcmp(x, long_gelu, (size_t)count * sizeof(float)) == 0;
    memcpy(a, values, (size_t)count * sizeof(float));
    ops->tanh(a, y, count);
    ok &= memcmp(y, long_tanh, (size_t)count * sizeof(float)) == 0;
    ops->activate(CVF_ACTIVATION_DGELU_TANH, x, a, count);
    ops->activate(CVF_ACTIVATION_DGELU_ERF, x, a, count);
    ops->activate(CVF_ACTIVATION_RELU, x, NULL, count);
    ops->add(x, a, count);
    ops->accumulate(y, a, count);
    ops->tanh(x, x, count);
    for (int i = 0; i < ROOM; i++) {
        bool inside = i >= GUARD + shift && i < GUARD + shift + count;
        if (!inside)
            intact &= bits_of(f[i]) == poison && bits_of(g[i]) == poison && bits_of(aux[i]) == poison;
    }
    for (int i = 0; i < 2 * ROOM; i++) {
        bool inside = i >= GUARD + shift && i < GUARD + shift + count;
        if (!inside)
            intact &= h[i] == 0x7D5A;
    }
    CHECK(ok, "%s count %d shift %d: results differ from a long run", ops->name, count, shift);
    CHECK(intact, "%s count %d shift %d: an element outside the run changed", ops->name, count, shift);
}

/* Counts 0..67 with page fences and with guard elements at four misalignments. */
static void test_tails(const cvf_cpu_vec_ops *ops)
{
    enum { MAXN = 68 };
    float values[MAXN], long_gelu[MAXN], long_tanh[MAXN], long_erf[MAXN];
    uint64_t rng = 0x7A11u;
    for (int i = 0; i < MAXN; i++) {
        uint64_t r = next_random(&rng);
        values[i] = (i % 7 == 3) ? float_of((uint32_t)r) : (float)((double)(int32_t)r / 2.5e8);
    }
    memcpy(long_gelu, values, sizeof values);
    ops->activate(CVF_ACTIVATION_GELU_TANH, long_gelu, NULL, MAXN);
    memcpy(long_erf, values, sizeof values);
    ops->activate(CVF_ACTIVATION_GELU_ERF, long_erf, NULL, MAXN);
    ops->tanh(values, long_tanh, MAXN);
    for (int count = 0; count < MAXN; count++) {
        test_fenced(ops, count, values, long_gelu, long_tanh, long_erf);
        for (int shift = 0; shift < 4; shift++)
            test_guards(ops, count, shift, values, long_gelu, long_tanh, long_erf);
    }
}

/* ---- the tile epilogue ------------------------------------------------------------------- */

/* Bytes of one element of dtype (f32, f16, bf16). */
static size_t elt_size(cvf_dtype dtype)
{
    return dtype == CVF_F32 ? 4 : 2;
}

/* finish_tile against its definition (vec.h): per row, the level's own members in order (add the
 * bias, store aux_out, load aux_in, activate, store c, sums = row 0 + row 1 + ...), compared bit for
 * bit: every activation, c / aux_out / aux_in in each dtype, with and without bias and sums, m rows
 * of every width n up to 67 (full blocks and tails), rows of c and aux_out longer than n whose
 * elements past n must not change, and x rows ldx apart; also in pieces of rows with the sums
 * continued (sums_continue), which must give the same bits. */
static void test_finish_tile(const cvf_cpu_vec_ops *ops)
{
    enum { M = 6, W = 67, LD = 80, LDX = 72 };
    const cvf_dtype dtypes[3] = {CVF_F32, CVF_F16, CVF_BF16};
    static float x[M * LDX], work[M * LDX], bias[W], ain[M * LD], sums[W + 8], want_sums[W + 8], row[W], aux[W];
    static unsigned char c[M * LD * 4], want_c[M * LD * 4], aout[M * LD * 4], want_aout[M * LD * 4], aux_in[M * LD * 4];
    uint64_t rng = 0xF1u;
    for (int i = 0; i < M * LDX; i++)
        x[i] = (float)((double)(int32_t)next_random(&rng) / 4e8);
    for (int i = 0; i < W; i++)
        bias[i] = (float)((double)(int32_t)next_random(&rng) / 1e9);
    for (int i = 0; i < M * LD; i++)
        ain[i] = (float)((double)(int32_t)next_random(&rng) / 3e8);
    long long bad = 0, cases = 0;
    for (int act = 0; act <= CVF_ACTIVATION_DGELU_ERF; act++)
        for (int ci = 0; ci < 3; ci++)
            for (int ao = 0; ao < 4; ao++) /* aux_out: none, or in dtype ao - 1 */
                for (int flags = 0; flags < 4; flags++) {
                    bool with_bias = flags & 1, with_sums = flags & 2;
                    bool needs_aux = act == CVF_ACTIVATION_DGELU_TANH || act == CVF_ACTIVATION_DGELU_ERF;
                    cvf_dtype cd = dtypes[ci], od = dtypes[ao > 0 ? ao - 1 : 0], id = dtypes[(ci + ao + flags) % 3];
                    ops->store(aux_in, id, M * LD, ain);
                    for (int m = 1; m <= M; m += M - 1)
                        for (int n = 1; n <= W; n++) {
                            memset(want_c, 0xA5, sizeof want_c);
                            memset(want_aout, 0x5A, sizeof want_aout);
                            for (int j = 0; j < W + 8; j++)
                                want_sums[j] = -7.0f;
                            /* the definition, member by member */
                            for (int r = 0; r < m; r++) {
                                memcpy(row, x + r * LDX, (size_t)n * sizeof(float));
                                if (with_bias)
                                    ops->add(row, bias, n);
                                if (ao)
                                    ops->store(want_aout + (size_t)r * LD * elt_size(od), od, n, row);
                                if (needs_aux)
                                    ops->load(aux_in + (size_t)r * LD * elt_size(id), id, n, aux);
                                ops->activate((cvf_activation)act, row, aux, n);
                                ops->store(want_c + (size_t)r * LD * elt_size(cd), cd, n, row);
                                if (with_sums) {
                                    if (r == 0)
                                        memcpy(want_sums, row, (size_t)n * sizeof(float));
                                    else
                                        ops->accumulate(want_sums, row, n);
                                }
                            }
                            /* in one call, then (m > 1) in pieces of rows [0, 2), [2, m - 1), [m - 1, m)
                             * with the sums continued, as the AMX driver finishes a tile */
                            for (int split = 0; split <= (m > 1); split++) {
                                memset(c, 0xA5, sizeof c);
                                memset(aout, 0x5A, sizeof aout);
                                for (int j = 0; j < W + 8; j++)
                                    sums[j] = -7.0f;
                                memcpy(work, x, sizeof work);
                                int cuts[4] = {0, split ? 2 : m, split ? m - 1 : m, m};
                                for (int piece = 0; piece < 3; piece++) {
                                    int r0 = cuts[piece], r1 = cuts[piece + 1];
                                    if (r0 >= r1)
                                        continue;
                                    cvf_cpu_tile_epilogue e = {
                                        .activation = (cvf_activation)act,
                                        .bias = with_bias ? bias : NULL,
                                        .aux_out = ao ? aout + (size_t)r0 * LD * elt_size(od) : NULL,
                                        .aux_out_dtype = od,
                                        .aux_out_ld = LD,
                                        .aux_out_size = (int64_t)elt_size(od),
                                        .aux_in = needs_aux ? aux_in + (size_t)r0 * LD * elt_size(id) : NULL,
                                        .aux_in_dtype = id,
                                        .aux_in_ld = LD,
                                        .aux_in_size = (int64_t)elt_size(id),
                                        .c = c + (size_t)r0 * LD * elt_size(cd),
                                        .c_dtype = cd,
                                        .c_ld = LD,
                                        .c_size = (int64_t)elt_size(cd),
                                        .sums = with_sums ? sums : NULL,
                                        .sums_continue = r0 > 0,
                                        .scratch = aux};
                                    ops->finish_tile(&e, work + r0 * LDX, LDX, r1 - r0, n);
                                }
                                cases++;
                                bool same = memcmp(c, want_c, sizeof c) == 0 &&
                                            memcmp(aout, want_aout, sizeof aout) == 0 &&
                                            memcmp(sums, want_sums, sizeof sums) == 0;
                                if (!same && bad++ < MAX_EXAMPLES)
                                    printf("  %s finish_tile: act %d c %s aux_out %d bias %d sums %d m %d n %d split "
                                           "%d differs\n",
                                           ops->name, act, cvf_dtype_name(cd), ao, with_bias, with_sums, m, n, split);
                            }
                        }
                }
    CHECK(bad == 0, "%s finish_tile: %lld of %lld tiles differ from the members in order", ops->name, bad, cases);
}

/* ---- main ---------------------------------------------------------------------------------- */

int main(void)
{
    const cvf_cpu_vec_ops *generic = cvf_cpu_vec_ops_for(CVF_CPU_ISA_GENERIC);
    test_erf_measure_rejects();
    CHECK(cvf_cpu_vec_ops_active() == cvf_cpu_vec_ops_for(cvf_cpu_isa_active()), "active ops follow the active isa");
    for (int level = 0; level < CVF_CPU_ISA_COUNT; level++) {
        cvf_cpu_isa isa = (cvf_cpu_isa)level;
        if (!cvf_cpu_isa_supported(isa)) {
            printf("SKIP %s\n", cvf_cpu_isa_name(isa));
            continue;
        }
        const cvf_cpu_vec_ops *ops = cvf_cpu_vec_ops_for(isa);
        printf("level %s (ops %s)\n", cvf_cpu_isa_name(isa), ops->name);
        test_load_all_patterns(ops);
        test_store_patterns(ops);
        test_tails(ops);
        test_tanh_specials(ops);
        test_gelu_specials(ops);
        test_gelu_erf_specials(ops);
        test_exact_ops(ops);
        test_finish_tile(ops);
        test_function(ops, generic, FN_TANH);
        test_function(ops, generic, FN_GELU);
        test_function(ops, generic, FN_DGELU);
        test_function(ops, generic, FN_GELU_ERF);
        test_function(ops, generic, FN_DGELU_ERF);
        fflush(stdout);
    }
    return test_report("test_vec");
}

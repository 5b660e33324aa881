/*
 * The CPU micro-kernels of src/cpu/kernels against a float64 reference, at every ISA level this
 * CPU supports (levels it lacks are reported as SKIP lines): for each level and dtype pair
 * (f32 x f32, bf16 x bf16) the kernel of cvf_cpu_kernel_for gets packed panels built from random
 * A and B (bf16 values exactly representable for the bf16 kernel) for several kc (0, odd, around
 * the unrolling and 256), every corner m x n of its tile (edge tiles), storing and accumulating,
 * with a C row stride larger than NR and an unaligned C. Everything in C outside the m x n corner
 * holds a poison pattern that must survive bit for bit, and a NaN placed in the corner must stay
 * NaN when accumulating. Also checks the dispatch table itself.
 */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS (the direct corner test's guard pages) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "cpu/isa.h"
#include "cpu/kernels/kernels.h"
#include "harness.h"
#include "support.h"

/* Largest kc tested. */
#define KC_MAX 384

/* Extra floats of C row stride beyond NR, rows of C past MR, and the misalignment of C. */
#define LDC_EXTRA 5
#define C_EXTRA_ROWS 2
#define C_SHIFT 1

/* Error bound relative to sum |a||b| (+ |c| when accumulating) per element. */
#define TOLERANCE 1e-6

/* Failures printed per kernel before only counting. */
#define MAX_EXAMPLES 5

static const int64_t kc_values[] = {0, 1, 2, 3, 7, 16, 255, 256, 257, 384};

/* The operands of one kc: values (as floats, exactly the packed ones), the packed micro-panels
 * and the float64 answer with its error scale. */
typedef struct operands {
    int64_t kc;
    float a[CVF_CPU_MR_MAX][KC_MAX];
    float b[KC_MAX][CVF_CPU_NR_MAX];
    void *a_panel, *b_panel;
    double want[CVF_CPU_MR_MAX][CVF_CPU_NR_MAX];
    double scale[CVF_CPU_MR_MAX][CVF_CPU_NR_MAX]; /* sum over p of |a||b| */
} operands;

/* Returns bits as a float. */
static float float_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Returns the bits of a float. */
static uint32_t bits_of(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* Allocates size bytes (rounded up to 64, at least 64) aligned to 64 bytes, zeroed. */
static void *alloc_aligned(size_t size)
{
    size_t rounded = (size + 63) / 64 * 64;
    if (rounded == 0)
        rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (p)
        memset(p, 0, rounded);
    return p;
}

/* A random value in [-1, 1), rounded to bf16 when bf16 is set. */
static float random_value(cvft_rng *rng, bool bf16)
{
    float v = (float)cvft_rng_uniform(rng, -1.0, 1.0);
    return bf16 ? cvf_bf16_to_f32(cvf_f32_to_bf16(v)) : v;
}

/* Packs the values of ops into micro-panels of kernel k's layout (zero in the second half of the
 * last bf16 pair when kc is odd). Returns 0, or -1 when out of memory. */
static int pack_operands(operands *ops, const cvf_cpu_kernel *k)
{
    int64_t mr = k->mr, nr = k->nr, kc = ops->kc;
    if (k->format == CVF_CPU_PACK_F32) {
        float *a = alloc_aligned((size_t)(mr * kc) * sizeof(float));
        float *b = alloc_aligned((size_t)(nr * kc) * sizeof(float));
        ops->a_panel = a;
        ops->b_panel = b;
        if (!a || !b)
            return -1;
        for (int64_t p = 0; p < kc; p++) {
            for (int64_t i = 0; i < mr; i++)
                a[p * mr + i] = ops->a[i][p];
            for (int64_t j = 0; j < nr; j++)
                b[p * nr + j] = ops->b[p][j];
        }
        return 0;
    }
    /* pairs (BF16), or pairs up to the AMX tile depth; the padding stays zero (alloc_aligned) */
    int64_t depth = cvf_cpu_pack_depth(k->format, kc), kt = CVF_CPU_TILE_DEPTH;
    uint16_t *a = alloc_aligned((size_t)(mr * depth) * sizeof(uint16_t));
    uint16_t *b = alloc_aligned((size_t)(nr * depth) * sizeof(uint16_t));
    ops->a_panel = a;
    ops->b_panel = b;
    if (!a || !b)
        return -1;
    for (int64_t p = 0; p < kc; p++) {
        for (int64_t i = 0; i < mr; i++)
            a[k->format == CVF_CPU_PACK_BF16_TILES ? ((p / kt) * mr + i) * kt + p % kt
                                                   : ((p / 2) * mr + i) * 2 + p % 2] = cvf_f32_to_bf16(ops->a[i][p]);
        for (int64_t j = 0; j < nr; j++)
            b[((p / 2) * nr + j) * 2 + p % 2] = cvf_f32_to_bf16(ops->b[p][j]);
    }
    return 0;
}

/* Fills ops with random values for kernel k and kc (every row and column of the tile, so rows
 * and columns outside a corner carry data the kernel must not store), packs them and computes
 * the float64 answer. Returns 0, or -1 when out of memory. */
static int make_operands(operands *ops, const cvf_cpu_kernel *k, int64_t kc, cvft_rng *rng)
{
    bool bf16 = k->format != CVF_CPU_PACK_F32;
    ops->kc = kc;
    for (int64_t i = 0; i < k->mr; i++)
        for (int64_t p = 0; p < kc; p++)
            ops->a[i][p] = random_value(rng, bf16);
    for (int64_t p = 0; p < kc; p++)
        for (int64_t j = 0; j < k->nr; j++)
            ops->b[p][j] = random_value(rng, bf16);
    for (int64_t i = 0; i < k->mr; i++)
        for (int64_t j = 0; j < k->nr; j++) {
            double sum = 0, scale = 0;
            for (int64_t p = 0; p < kc; p++) {
                sum += (double)ops->a[i][p] * (double)ops->b[p][j];
                scale += fabs((double)ops->a[i][p] * (double)ops->b[p][j]);
            }
            ops->want[i][j] = sum;
            ops->scale[i][j] = scale;
        }
    return pack_operands(ops, k);
}

/* Frees the packed panels of ops. */
static void free_operands(operands *ops)
{
    free(ops->a_panel);
    free(ops->b_panel);
    ops->a_panel = ops->b_panel = NULL;
}

/* What a kernel's side work saw: the parts run, in order, and whether any came twice or early. */
typedef struct side_record {
    int64_t next, parts;
    bool out_of_order;
} side_record;

/* Side work for run_overlapped: records part `part` of `parts`. */
static void record_part(void *arg, int64_t part, int64_t parts)
{
    side_record *r = arg;
    r->out_of_order |= part != r->next || parts != r->parts;
    r->next++;
}

/* Runs kernel k on ops for the m x n corner into a poisoned C (initial corner values when
 * accumulating, one of them NaN) and checks every element of the C allocation; with overlapped,
 * through run_overlapped with side work of a few parts (each must run once, in order). Returns the
 * number of wrong elements (a wrong side work counts as one); describes the first in *example (when
 * non-empty, untouched). */
static int64_t run_corner(const cvf_cpu_kernel *k, const operands *ops, int64_t m, int64_t n, int accumulate,
                          bool overlapped, float *buffer, size_t buffer_floats, cvft_rng *rng, char *example,
                          size_t example_size)
{
    const int64_t ldc = k->nr + LDC_EXTRA;
    const int64_t nan_i = (m * 5 + n) % m, nan_j = (m + n * 3) % n;
    float *c = buffer + C_SHIFT;
    float init[CVF_CPU_MR_MAX][CVF_CPU_NR_MAX];
    for (size_t e = 0; e < buffer_floats; e++)
        buffer[e] = float_of(SUPPORT_POISON_F32);
    if (accumulate)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] = init[i][j] = i == nan_i && j == nan_j ? NAN : (float)cvft_rng_uniform(rng, -1, 1);
    if (k->begin) /* per-thread state (AMX tiles) around the run, as the driver does */
        k->begin();
    side_record record = {0, 1 + (m * 7 + n + ops->kc) % 40, false};
    cvf_cpu_side_work side = {record_part, &record, record.parts};
    if (overlapped)
        k->run_overlapped(ops->kc, ops->a_panel, ops->b_panel, c, ldc, m, n, accumulate, &side);
    else
        k->run(ops->kc, ops->a_panel, ops->b_panel, c, ldc, m, n, accumulate);
    if (k->end)
        k->end();
    int64_t wrong = 0;
    if (overlapped && (record.out_of_order || record.next != record.parts)) {
        wrong++;
        if (!example[0])
            snprintf(example, example_size, "%s kc=%lld m=%lld n=%lld: run_overlapped ran %lld of %lld side parts%s",
                     k->name, (long long)ops->kc, (long long)m, (long long)n, (long long)record.next,
                     (long long)record.parts, record.out_of_order ? ", out of order" : "");
    }
    for (size_t e = 0; e < buffer_floats; e++) {
        int64_t offset = (int64_t)e - C_SHIFT, i = offset >= 0 ? offset / ldc : -1, j = offset >= 0 ? offset % ldc : -1;
        bool in_corner = i >= 0 && i < m && j < n;
        float got = buffer[e];
        bool ok;
        double want = 0, bound = 0;
        if (!in_corner) {
            ok = bits_of(got) == SUPPORT_POISON_F32;
        } else if (accumulate && i == nan_i && j == nan_j) {
            ok = isnan(got);
            want = NAN;
        } else {
            double base = accumulate ? (double)init[i][j] : 0.0;
            want = base + ops->want[i][j];
            bound = TOLERANCE * (ops->scale[i][j] + fabs(base));
            ok = fabs((double)got - want) <= bound;
        }
        if (!ok && wrong++ == 0 && !example[0])
            snprintf(example, example_size,
                     "%s%s kc=%lld m=%lld n=%lld accumulate=%d: c[%lld][%lld] (%s) = %.9g (0x%08X), want %.9g +- %.3g",
                     k->name, overlapped ? " (overlapped)" : "", (long long)ops->kc, (long long)m, (long long)n,
                     accumulate, (long long)i, (long long)j, in_corner ? "corner" : "outside the corner", (double)got,
                     (unsigned)bits_of(got), want, bound);
    }
    return wrong;
}

/* Tests kernel k over every kc of kc_values, every m x n corner and both store modes (and through
 * run_overlapped, where the kernel has it). */
static void test_kernel(const cvf_cpu_kernel *k, uint64_t seed)
{
    static operands ops;
    cvft_rng rng = cvft_rng_make(seed);
    size_t buffer_floats = (size_t)((k->mr + C_EXTRA_ROWS) * (k->nr + LDC_EXTRA) + 2 * C_SHIFT);
    float *buffer = alloc_aligned(buffer_floats * sizeof(float));
    int64_t cases = 0, failed_cases = 0;
    char example[512] = "";
    CHECK(buffer != NULL, "out of memory");
    for (size_t t = 0; buffer && t < sizeof kc_values / sizeof kc_values[0]; t++) {
        if (!CHECK(make_operands(&ops, k, kc_values[t], &rng) == 0, "out of memory")) {
            free_operands(&ops);
            break;
        }
        for (int overlapped = 0; overlapped <= (k->run_overlapped != NULL); overlapped++)
            for (int accumulate = 0; accumulate <= 1; accumulate++)
                for (int64_t m = 1; m <= k->mr; m++)
                    for (int64_t n = 1; n <= k->nr; n++) {
                        cases++;
                        if (run_corner(k, &ops, m, n, accumulate, overlapped, buffer, buffer_floats, &rng, example,
                                       sizeof example))
                            failed_cases++;
                    }
        free_operands(&ops);
    }
    free(buffer);
    CHECK(failed_cases == 0, "%s: %lld of %lld cases wrong; first: %s", k->name, (long long)failed_cases,
          (long long)cases, example);
    printf("  %-26s %lld cases (kc x m x n x accumulate%s), %lld wrong\n", k->name, (long long)cases,
           k->run_overlapped ? " x overlapped" : "", (long long)failed_cases);
}

/* Checks the descriptor that cvf_cpu_kernel_for returns for level isa and dtypes a, b. */
static void check_descriptor(const cvf_cpu_kernel *k, cvf_cpu_isa isa, cvf_dtype a, cvf_dtype b)
{
    const char *level = cvf_cpu_isa_name(isa);
    if (!CHECK(k != NULL, "cvf_cpu_kernel_for(%s, %s, %s) is NULL", level, cvf_dtype_name(a), cvf_dtype_name(b)))
        return;
    bool bf16 = a == CVF_BF16 && b == CVF_BF16;
    cvf_cpu_pack_format want = bf16 && isa == CVF_CPU_ISA_AMX           ? CVF_CPU_PACK_BF16_TILES
                               : bf16 && isa == CVF_CPU_ISA_AVX512_BF16 && cvf_cpu_bf16_dot_pays() ? CVF_CPU_PACK_BF16
                                                                        : CVF_CPU_PACK_F32;
    CHECK(k->name && k->name[0] && k->run, "%s: kernel without a name or a function", level);
    CHECK(!k->begin == !k->end, "%s: %s has one of the begin / end hooks only", level, k->name);
    CHECK(k->mr >= 1 && k->mr <= CVF_CPU_MR_MAX && k->nr >= 1 && k->nr <= CVF_CPU_NR_MAX,
          "%s: %s has MR x NR %d x %d outside 1..%d x 1..%d", level, k->name, k->mr, k->nr, CVF_CPU_MR_MAX,
          CVF_CPU_NR_MAX);
    CHECK(k->isa <= isa && cvf_cpu_isa_supported(k->isa), "%s: %s needs level %s", level, k->name,
          cvf_cpu_isa_name(k->isa));
    CHECK(k->format == want, "%s, %s x %s: %s has the wrong pack format",
          level, cvf_dtype_name(a), cvf_dtype_name(b), k->name);
}

/* The dispatch table at one supported level: every dtype pair gets a kernel of the right format. */
static void test_dispatch(cvf_cpu_isa isa)
{
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_F16, CVF_BF16};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++)
            check_descriptor(cvf_cpu_kernel_for(isa, dtypes[i], dtypes[j]), isa, dtypes[i], dtypes[j]);
}

/* Values whose rounding to f16 and bf16 is delicate: ties of both formats, subnormal and
 * overflowing f16 values, Inf, NaN payloads, signed zeros, plus random bit patterns. */
static uint32_t rounding_case(int index, cvft_rng *rng)
{
    static const uint32_t fixed[] = {
        0x3F808000u, 0x3F818000u, 0x3F80C000u, 0x3F807FFFu, 0x3F808001u, /* bf16 ties and neighbours */
        0x3F801000u, 0x3F803000u, 0x3F800FFFu, 0x3F801001u,              /* f16 ties and neighbours */
        0x477FF000u, 0x477FF001u, 0x477FEFFFu, 0x47800000u,              /* around the f16 maximum */
        0x33800000u, 0x33000000u, 0x33000001u, 0x387FC000u, 0x38800000u, /* f16 subnormals */
        0x7F7FFFFFu, 0x7F7F8000u, 0x7F800000u, 0xFF800000u,              /* bf16 overflow, +-Inf */
        0x7FC00000u, 0x7F800001u, 0xFFBFFFFFu, 0x7FFFFFFFu,              /* NaNs, quiet and signalling */
        0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu,              /* zeros, f32 subnormals */
    };
    int count = (int)(sizeof fixed / sizeof fixed[0]);
    return index < count ? fixed[index] : (uint32_t)cvft_rng_next(rng);
}

/* The fused store of kernels that have one (the packed kernel's run_fused, or with `direct` the
 * direct kernel, whose A rows 1 float apart and single B row are the same buffers): with k = 1, A
 * = 1 and B = crafted values, each output must be exactly relu?(b + bias) rounded by the scalar
 * conversions of cvfuse.h (bit for bit, NaN and -0 kept), every corner m x n stored and nothing
 * outside it. */
static void test_fused_store(const cvf_cpu_kernel *k, uint64_t seed, bool direct)
{
    if (direct ? !k->direct : (!k->run_fused || k->format != CVF_CPU_PACK_F32))
        return;
    cvft_rng rng = cvft_rng_make(seed);
    int64_t mr = k->mr, nr = k->nr, ldc = nr + 3;
    float *a = alloc_aligned(sizeof(float) * (size_t)mr), *b = alloc_aligned(sizeof(float) * (size_t)nr);
    float *bias = alloc_aligned(sizeof(float) * (size_t)nr);
    uint32_t *out = alloc_aligned(sizeof(uint32_t) * (size_t)(mr * ldc));
    if (!CHECK(a && b && bias && out, "out of memory")) {
        free(a), free(b), free(bias), free(out);
        return;
    }
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_F16, CVF_BF16};
    int failures = 0, index = 0;
    for (int round = 0; round < 40; round++)
        for (int d = 0; d < 3; d++)
            for (int relu = 0; relu < 2; relu++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    int64_t m = 1 + (round * 5) % mr, n = round < 4 ? nr : 1 + (round * 7) % nr;
                    for (int64_t i = 0; i < mr; i++)
                        a[i] = 1.0f;
                    for (int64_t j = 0; j < nr; j++) {
                        b[j] = float_of(rounding_case(index++ % 64, &rng));
                        bias[j] = with_bias ? (float)cvft_rng_uniform(&rng, -1.0, 1.0) : 0.0f;
                    }
                    memset(out, 0xA5, sizeof(uint32_t) * (size_t)(mr * ldc));
                    size_t size = cvf_dtype_size(dtypes[d]);
                    cvf_cpu_fused_store spec = {out, ldc * 4 / (int64_t)size, dtypes[d], with_bias ? bias : NULL, relu};
                    if (direct)
                        k->direct(1, a, 1, b, nr, &spec, m, n);
                    else
                        k->run_fused(1, a, b, &spec, m, n);
                    const unsigned char *bytes = (const unsigned char *)out;
                    for (int64_t i = 0; i < mr; i++)
                        for (int64_t j = 0; j < ldc * 4 / (int64_t)size; j++) {
                            const unsigned char *at = bytes + (size_t)(i * ldc * 4) + (size_t)j * size;
                            uint32_t got = 0, want;
                            memcpy(&got, at, size);
                            if (i < m && j < n) {
                                float x = b[j] + bias[j];
                                if (relu)
                                    x = x < 0.0f ? 0.0f : x;
                                want = dtypes[d] == CVF_F32   ? bits_of(x)
                                       : dtypes[d] == CVF_F16 ? cvf_f32_to_f16(x)
                                                              : cvf_f32_to_bf16(x);
                            } else {
                                want = size == 4 ? 0xA5A5A5A5u : 0xA5A5u; /* untouched */
                            }
                            if (got != want && failures++ < 5)
                                CHECK(false,
                                      "%s %s store %s relu=%d bias=%d m=%lld n=%lld (%lld,%lld): got 0x%x want 0x%x",
                                      k->name, direct ? "direct" : "fused", cvf_dtype_name(dtypes[d]), relu, with_bias,
                                      (long long)m, (long long)n, (long long)i, (long long)j, got, want);
                        }
                }
    CHECK(failures == 0, "%s %s store: %d wrong elements", k->name, direct ? "direct" : "fused", failures);
    free(a), free(b), free(bias), free(out);
}

/* The next count of rows test_interleave tries after count: every one up to 16 rows, then the
 * edges (1, 2, half, the last two) of wider panels. */
static int64_t next_count(int64_t count, int64_t width)
{
    if (width <= 16 || count < 2 || count >= width - 2)
        return count + 1;
    return count < width / 2 ? width / 2 : width - 1;
}

/* The panel interleave of kernels that have one, against the definition in kernels.h: every width
 * up to CVF_CPU_NR_MAX (MR and NR are the ones used today; a partial 8-lane group after full ones,
 * width 14, once clobbered the first group), every count of rows, kc around the 8-step blocks,
 * rows at odd addresses; the floats after the panel must keep their poison. */
static void test_interleave(const cvf_cpu_kernel *k, uint64_t seed)
{
    if (!k->interleave)
        return;
    static const int64_t kcs[] = {0, 1, 3, 7, 8, 9, 16, 17, 63, 64, 65, 255};
    enum { GUARD = 16 };
    cvft_rng rng = cvft_rng_make(seed);
    float *source = alloc_aligned(sizeof(float) * (size_t)(CVF_CPU_NR_MAX * (KC_MAX + 1)));
    float *dst = alloc_aligned(sizeof(float) * (size_t)(CVF_CPU_NR_MAX * KC_MAX + GUARD));
    if (!CHECK(source && dst, "out of memory")) {
        free(source), free(dst);
        return;
    }
    int failures = 0;
    for (int64_t width = 1; width <= CVF_CPU_NR_MAX; width++)
        for (size_t t = 0; t < sizeof kcs / sizeof kcs[0]; t++)
            for (int64_t count = 1; count <= width; count = next_count(count, width)) {
                int64_t kc = kcs[t];
                const float *rows[CVF_CPU_NR_MAX];
                for (int64_t r = 0; r < count; r++) {
                    float *row = source + r * (KC_MAX + 1) + (r % 2); /* odd rows start one float later */
                    for (int64_t p = 0; p < kc; p++)
                        row[p] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
                    rows[r] = row;
                }
                for (int64_t e = 0; e < width * kc + GUARD; e++)
                    dst[e] = float_of(SUPPORT_POISON_F32);
                k->interleave(rows, count, width, kc, dst);
                for (int64_t e = 0; e < width * kc + GUARD; e++) {
                    int64_t p = e / width, r = e % width;
                    uint32_t want = e >= width * kc ? SUPPORT_POISON_F32 : r < count ? bits_of(rows[r][p]) : 0u;
                    if (bits_of(dst[e]) != want && failures++ < MAX_EXAMPLES)
                        CHECK(false, "%s interleave width=%lld count=%lld kc=%lld: dst[%lld] = 0x%08X, want 0x%08X",
                              k->name, (long long)width, (long long)count, (long long)kc, (long long)e,
                              (unsigned)bits_of(dst[e]), (unsigned)want);
                }
            }
    CHECK(failures == 0, "%s interleave: %d wrong elements", k->name, failures);
    free(source), free(dst);
}

/* An m x n product a kernel wrote into the corner of a poisoned buffer: A (m x k, row stride lda)
 * times B, whose element (p, j) is b[p * b_ps + j * b_js]. */
typedef struct corner_product {
    const float *a;
    int64_t lda;
    const float *b;
    int64_t b_ps, b_js;
    int64_t k, m, n;
} corner_product;

/* Checks the `size` floats of c, whose element c[1 + i * ldc + j] holds (i, j) of the product:
 * the m x n corner within TOLERANCE of float64, everything else still poison. Returns the wrong
 * elements; reports them while the count, from `reported` before, is under MAX_EXAMPLES. */
static int check_corner(const cvf_cpu_kernel *k, const char *what, const corner_product *x, const float *c,
                        int64_t size, int64_t ldc, int reported)
{
    int wrong = 0;
    for (int64_t e = 0; e < size; e++) {
        int64_t i = (e - 1) / ldc, j = (e - 1) % ldc;
        bool corner = e >= 1 && i < x->m && j < x->n;
        double want = 0, scale = 0;
        for (int64_t p = 0; corner && p < x->k; p++) {
            double term = (double)x->a[i * x->lda + p] * (double)x->b[p * x->b_ps + j * x->b_js];
            want += term;
            scale += fabs(term);
        }
        bool ok = corner ? fabs((double)c[e] - want) <= TOLERANCE * scale : bits_of(c[e]) == SUPPORT_POISON_F32;
        if (!ok && reported + wrong++ < MAX_EXAMPLES)
            CHECK(false, "%s %s k=%lld m=%lld n=%lld: c[%lld][%lld] (%s) = %.9g, want %.9g", k->name, what,
                  (long long)x->k, (long long)x->m, (long long)x->n, (long long)i, (long long)j,
                  corner ? "corner" : "outside the corner", (double)c[e], want);
    }
    return wrong;
}

/* Which tiles test_tiles checks. */
typedef enum tile_kind { TILES_DOT, TILES_ROWS, TILES_STREAM } tile_kind;

/* The columns test_tiles tries for the row and stream tiles (all up to 17 besides): around their
 * 8- and 16-wide steps and the planner's NR_MAX (row tiles) and STREAM_COLS (stream tiles). */
static bool tiles_width(tile_kind kind, int64_t n, int64_t widest)
{
    if (kind == TILES_DOT || n <= 17 || n == widest)
        return true;
    if (kind == TILES_ROWS)
        return n == 23 || n == 32 || n == 33 || n == 47;
    return n == 31 || n == 33 || n == 64 || n == 1024 || n == 1025;
}

/* The dot tiles of kernels that have them (kernels.h, cvf_cpu_dot_fn), B^T, their row tiles
 * (cvf_cpu_rows_fn), B row-major, and their stream tiles (cvf_cpu_stream_fn), the same for 1-4 rows,
 * against float64, for B in f32, f16 and bf16 (converted as it is loaded; the reference reads B's
 * rounded values). The dot tiles: every m x n corner of 33 x NR (past MR, and past the two groups
 * of 16 rows that the planner passes at most, as the contract allows). The row tiles (16 columns
 * a chunk, 6 rows a group, the planner's NR_MAX columns a call): widths 1-17, 23, 32, 33, 47 and
 * NR_MAX, rows 1-13 and around the later groups. The stream tiles (four B rows at a time, 8
 * columns a step): rows 1-4, widths 1-17, 31, 33, 64 and around 1024. K around the 8-wide
 * and 4-deep steps (1, odd, exact) and past the K blocks (long, odd), rows of A and B at odd
 * addresses and strides; C outside the corner must keep its poison. */
#define DOT_ROWS_MAX 33
#define DOT_K_MAX 1031
#define STREAM_WIDEST 1031
static void test_tiles(const cvf_cpu_kernel *k, tile_kind kind, uint64_t seed)
{
    cvf_cpu_dot_fn tiles = kind == TILES_DOT ? k->dot : kind == TILES_ROWS ? k->rows : k->stream;
    if (!tiles)
        return;
    static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 255, 520, DOT_K_MAX};
    static const cvf_dtype b_dtypes[] = {CVF_F32, CVF_F16, CVF_BF16};
    static const int64_t more_rows[] = {17, 18, 19, 24, 31, 33};
    const bool row_major = kind != TILES_DOT;
    const int64_t widest = kind == TILES_DOT ? k->nr : kind == TILES_ROWS ? CVF_CPU_NR_MAX : STREAM_WIDEST;
    /* B^T: NR rows of K (ldb apart); row-major B: K rows of NR_MAX columns (ldb apart) */
    const int64_t rows = DOT_ROWS_MAX, lda = DOT_K_MAX + 3, ldb = row_major ? widest + 5 : DOT_K_MAX + 5,
                  ldc = widest + LDC_EXTRA;
    const int64_t b_count = (row_major ? DOT_K_MAX : k->nr) * ldb + 1;
    const char *what = kind == TILES_DOT ? "dot" : kind == TILES_ROWS ? "row tiles" : "stream tiles";
    cvft_rng rng = cvft_rng_make(seed);
    float *a = alloc_aligned(sizeof(float) * (size_t)(rows * lda + 1));
    float *b = alloc_aligned(sizeof(float) * (size_t)b_count);       /* B as the kernel reads it (f32) */
    float *b_ref = alloc_aligned(sizeof(float) * (size_t)b_count);   /* B's values, for the reference */
    uint16_t *b16 = alloc_aligned(sizeof(uint16_t) * (size_t)b_count); /* B as the kernel reads it (16-bit) */
    float *c = alloc_aligned(sizeof(float) * (size_t)(rows * ldc + 1));
    if (!CHECK(a && b && b_ref && b16 && c, "out of memory")) {
        free(a), free(b), free(b_ref), free(b16), free(c);
        return;
    }
    for (int64_t e = 0; e < rows * lda + 1; e++)
        a[e] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
    for (int64_t e = 0; e < b_count; e++)
        b[e] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
    for (size_t d = 0; d < sizeof b_dtypes / sizeof b_dtypes[0]; d++) {
        cvf_dtype bt = b_dtypes[d];
        for (int64_t e = 0; e < b_count; e++) {
            b16[e] = bt == CVF_F16 ? cvf_f32_to_f16(b[e]) : cvf_f32_to_bf16(b[e]);
            b_ref[e] = bt == CVF_F32 ? b[e] : bt == CVF_F16 ? cvf_f16_to_f32(b16[e]) : cvf_bf16_to_f32(b16[e]);
        }
        const void *b_in = bt == CVF_F32 ? (const void *)(b + 1) : (const void *)(b16 + 1);
        int failures = 0;
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++)
            for (int64_t mi = 0; mi < rows; mi++) {
                /* the dot tiles: every count; the row tiles: 1-13 and more_rows; the stream tiles: 1-4 */
                int64_t m = kind == TILES_DOT    ? mi + 1
                            : kind == TILES_STREAM ? (mi < CVF_CPU_STREAM_MAX_ROWS ? mi + 1 : 0)
                            : mi < 13              ? mi + 1
                            : mi - 13 < 6          ? more_rows[mi - 13]
                                                   : 0;
                for (int64_t n = 1; m > 0 && n <= widest; n++) {
                    if (!tiles_width(kind, n, widest))
                        continue;
                    for (int64_t e = 0; e < rows * ldc + 1; e++)
                        c[e] = float_of(SUPPORT_POISON_F32);
                    tiles(ks[t], a + 1, lda, m, b_in, bt, ldb, n, c + 1, ldc);
                    const corner_product prod = {a + 1, lda, b_ref + 1, row_major ? ldb : 1, row_major ? 1 : ldb,
                                                 ks[t], m, n};
                    failures += check_corner(k, what, &prod, c, rows * ldc + 1, ldc, failures);
                }
            }
        CHECK(failures == 0, "%s %s, B %s: %d wrong elements", k->name, what, cvf_dtype_name(bt), failures);
    }
    free(a), free(b), free(b_ref), free(b16), free(c);
}

/* The direct kernel of kernels that have one (kernels.h, cvf_cpu_direct_fn) against float64:
 * every m x n corner, k = 0, 1, odd, around the 4-step unrolling and long, A and B read in place
 * with odd strides and addresses, f32 output with poison outside the corner. */
static void test_direct(const cvf_cpu_kernel *k, uint64_t seed)
{
    if (!k->direct)
        return;
    static const int64_t ks[] = {0, 1, 2, 3, 4, 5, 7, 16, 255};
    const int64_t lda = KC_MAX + 3, ldb = k->nr + 5, ldc = k->nr + LDC_EXTRA;
    cvft_rng rng = cvft_rng_make(seed);
    float *a = alloc_aligned(sizeof(float) * (size_t)(k->mr * lda + 1));
    float *b = alloc_aligned(sizeof(float) * (size_t)(KC_MAX * ldb + 1));
    float *c = alloc_aligned(sizeof(float) * (size_t)(k->mr * ldc + 1));
    if (!CHECK(a && b && c, "out of memory")) {
        free(a), free(b), free(c);
        return;
    }
    for (int64_t e = 0; e < k->mr * lda + 1; e++)
        a[e] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
    for (int64_t e = 0; e < KC_MAX * ldb + 1; e++)
        b[e] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
    int failures = 0;
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++)
        for (int64_t m = 1; m <= k->mr; m++)
            for (int64_t n = 1; n <= k->nr; n++) {
                for (int64_t e = 0; e < k->mr * ldc + 1; e++)
                    c[e] = float_of(SUPPORT_POISON_F32);
                cvf_cpu_fused_store out = {c + 1, ldc, CVF_F32, NULL, 0};
                k->direct(ks[t], a + 1, lda, b + 1, ldb, &out, m, n);
                const corner_product prod = {a + 1, lda, b + 1, ldb, 1, ks[t], m, n};
                failures += check_corner(k, "direct", &prod, c, k->mr * ldc + 1, ldc, failures);
            }
    CHECK(failures == 0, "%s direct: %d wrong elements", k->name, failures);
    free(a), free(b), free(c);
}

#if defined(__linux__) && defined(MAP_ANONYMOUS)
/* Room for `floats` floats that ends at an unreadable page: a read at or past `end` faults. */
typedef struct tail_buffer {
    char *map;
    size_t bytes;
    float *end;
} tail_buffer;

static bool tail_buffer_make(size_t floats, tail_buffer *t)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), room = (floats * sizeof(float) + page - 1) / page * page;
    t->bytes = room + page;
    t->map = mmap(NULL, t->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t->map == MAP_FAILED)
        return false;
    if (mprotect(t->map + room, page, PROT_NONE) != 0) {
        munmap(t->map, t->bytes);
        return false;
    }
    t->end = (float *)(t->map + room);
    return true;
}

/* A direct kernel reads only the m x n corner's rows and columns (kernels.h, cvf_cpu_direct_fn),
 * checked where reading more would fault: A's row m - 1, B's row k - 1 and the bias (zeros: the values
 * stay plain sums) end at an unreadable page (row m, or columns n .. NR - 1 of B's last row or of
 * the bias, lie past it), every m x n corner, k = 1, 5 and 64, with and without the ReLU. */
static void test_direct_corner(const cvf_cpu_kernel *k, uint64_t seed)
{
    if (!k->direct)
        return;
    static const int64_t ks[] = {1, 5, 64};
    const int64_t lda = 64 + 3, ldb = k->nr + 5, ldc = k->nr + LDC_EXTRA;
    tail_buffer ta, tb, tbias;
    float *c = alloc_aligned(sizeof(float) * (size_t)(k->mr * ldc + 1));
    if (!CHECK(c && tail_buffer_make((size_t)(k->mr * lda), &ta), "memory for the direct corner test")) {
        free(c);
        return;
    }
    if (!CHECK(tail_buffer_make((size_t)(64 * ldb), &tb), "memory for the direct corner test")) {
        munmap(ta.map, ta.bytes), free(c);
        return;
    }
    if (!CHECK(tail_buffer_make((size_t)k->nr, &tbias), "memory for the direct corner test")) {
        munmap(ta.map, ta.bytes), munmap(tb.map, tb.bytes), free(c);
        return;
    }
    memset(tbias.map, 0, tbias.bytes - (size_t)sysconf(_SC_PAGESIZE)); /* the bias: zeros */
    cvft_rng rng = cvft_rng_make(seed);
    int failures = 0;
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++)
        for (int64_t m = 1; m <= k->mr; m++)
            for (int64_t n = 1; n <= k->nr; n++) {
                float *a = ta.end - ((m - 1) * lda + ks[t]), *b = tb.end - ((ks[t] - 1) * ldb + n);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t p = 0; p < ks[t]; p++)
                        a[i * lda + p] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
                for (int64_t p = 0; p < ks[t]; p++)
                    for (int64_t j = 0; j < n; j++)
                        b[p * ldb + j] = (float)cvft_rng_uniform(&rng, -1.0, 1.0);
                for (int64_t e = 0; e < k->mr * ldc + 1; e++)
                    c[e] = float_of(SUPPORT_POISON_F32);
                const int relu = (int)((m + n) % 2); /* on half the corners: positive sums only then */
                if (relu)
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t p = 0; p < ks[t]; p++)
                            a[i * lda + p] = fabsf(a[i * lda + p]);
                if (relu)
                    for (int64_t p = 0; p < ks[t]; p++)
                        for (int64_t j = 0; j < n; j++)
                            b[p * ldb + j] = fabsf(b[p * ldb + j]);
                cvf_cpu_fused_store out = {c + 1, ldc, CVF_F32, tbias.end - n, relu};
                k->direct(ks[t], a, lda, b, ldb, &out, m, n);
                const corner_product prod = {a, lda, b, ldb, 1, ks[t], m, n};
                failures += check_corner(k, "direct corner", &prod, c, k->mr * ldc + 1, ldc, failures);
            }
    CHECK(failures == 0, "%s direct, corner only: %d wrong elements", k->name, failures);
    munmap(ta.map, ta.bytes), munmap(tb.map, tb.bytes), munmap(tbias.map, tbias.bytes), free(c);
}
#else
static void test_direct_corner(const cvf_cpu_kernel *k, uint64_t seed)
{
    (void)k, (void)seed; /* no guard pages here: test_direct alone checks the values */
}
#endif

int main(void)
{
    static const cvf_dtype pairs[][2] = {{CVF_F32, CVF_F32}, {CVF_BF16, CVF_BF16}};
    const cvf_cpu_kernel *tested[2 * CVF_CPU_ISA_COUNT] = {NULL};
    int tested_count = 0;
    for (int level = 0; level < CVF_CPU_ISA_COUNT; level++) {
        cvf_cpu_isa isa = (cvf_cpu_isa)level;
        if (!cvf_cpu_isa_supported(isa)) {
            printf("SKIP %s: not supported by this CPU\n", cvf_cpu_isa_name(isa));
            continue;
        }
        test_dispatch(isa);
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            const cvf_cpu_kernel *k = cvf_cpu_kernel_for(isa, pairs[p][0], pairs[p][1]);
            if (!k)
                continue;
            bool seen = false;
            for (int t = 0; t < tested_count; t++)
                seen = seen || tested[t] == k;
            printf("%s %s x %s: kernel \"%s\" (%d x %d)%s\n", cvf_cpu_isa_name(isa), cvf_dtype_name(pairs[p][0]),
                   cvf_dtype_name(pairs[p][1]), k->name, k->mr, k->nr, seen ? ", tested above" : "");
            if (!seen) {
                tested[tested_count++] = k;
                test_kernel(k, 0x6B3Eu + (uint64_t)level * 16 + p);
                test_fused_store(k, 0xF05Eu + (uint64_t)level, false);
                test_fused_store(k, 0xD05Eu + (uint64_t)level, true);
                test_interleave(k, 0x1A7Eu + (uint64_t)level);
                test_tiles(k, TILES_DOT, 0xD07u + (uint64_t)level);
                test_tiles(k, TILES_ROWS, 0x2D07u + (uint64_t)level);
                test_tiles(k, TILES_STREAM, 0x5D07u + (uint64_t)level);
                test_direct(k, 0xD12Eu + (uint64_t)level);
                test_direct_corner(k, 0xC02Eu + (uint64_t)level);
            }
        }
    }
    return test_report("test_kernels");
}

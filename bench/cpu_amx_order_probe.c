/*
 * The AMX kernel's instruction order (PERF.md, 2026-12-07 sixteenth session): the library's 32 x 32
 * kernel beside copies of its loop with the tile loads and tdpbf16ps in other orders, and two
 * bounds, on the same packed panels, each timed by thread CPU time. Why: from L1 the kernel reaches
 * ~54% of the tile unit's rate (PERF.md, 2026-12-06 seventh session), while its four loads of a
 * 32-deep block (4 KB) take far less than the block's four tdpbf16ps (~64 cycles). One suspect: the
 * eight tile registers leave no spare ones, so the next block's first load must wait for the last
 * product that reads the tile it overwrites; the order decides how long.
 *
 *   lib       the library's kernel (cvf_cpu_kernel_for(amx, bf16, bf16)->run), through its pointer
 *   v0        a copy of its loop: A0 B0 | C00 | B1 | C01 | A1 | C10 C11
 *   pingpong  even blocks end on B0's last product (..., C11, C10) and odd blocks load that tile
 *             second and end on B1's (A0 B1 | C01 | B0 | C00 | A1 | C10 C11): each block first
 *             loads the tiles the previous block freed first
 *   loads1st  the four loads, then the four products
 *   32x16     two accumulators, the operands double-buffered in the spare tiles (half the products)
 *   peak      the four products alone on operands loaded once (the unit's rate)
 *   peak6     six accumulators on one A and one B tile: whether four chains keep the unit busy
 *   loads     the four loads alone (counted as if the products ran: their bound)
 *   .../cB    the same with B's two tiles of a block in the compact layout (b_layout): a public
 *             AMX study (usstq/mm_amx's README) found strided tile loads from L2 slower than
 *             dense ones, ~66% of a tile per tdpbf16ps with one operand strided against ~75%
 *             with both dense; the library's B tiles are strided (64 of every 128 bytes)
 *
 * Not part of the build; on a CPU with AMX (the library built first):
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -mavx512f -mamx-tile -mamx-bf16 -Iinclude -Isrc \
 *       bench/cpu_amx_order_probe.c build/libcvfuse.a -lpthread -lm -o build/amx_order
 *   taskset -c 3 build/amx_order kc [b_panels] [a_panels] [rounds]    (e.g. 256 1 1: in L1;
 *                                                                      2048 1 8: in L2)
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "cpu/isa.h"
#include "cpu/kernels/kernels.h"

#define MR 32
#define NR 32
#define KT 32
#define A_STRIDE (KT * 2) /* bytes from one A row of a block to the next */

/* Where B's two tiles of a block lie: the library's layout interleaves them row by row (B1 32
 * elements into each 128-byte row); the compact one puts B0's 16 rows of 64 bytes first, then
 * B1's, so that each tile load reads 1 KB in a row. */
typedef struct b_layout {
    long stride;    /* bytes from one row of a tile to the next */
    long b1_offset; /* elements from B0's first row to B1's */
} b_layout;

typedef void (*order_fn)(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay, float *c);

/* The four loads of block t: A rows 0-15 and 16-31, B columns 0-15 and 16-31. */
#define LOAD_A0(tile, t) _tile_loadd(tile, a + (t)*MR * KT, A_STRIDE)
#define LOAD_A1(tile, t) _tile_loadd(tile, a + (t)*MR * KT + 16 * KT, A_STRIDE)
#define LOAD_B0(tile, t) _tile_loadd(tile, b + (t) * (KT / 2) * NR * 2, lay.stride)
#define LOAD_B1(tile, t) _tile_loadd(tile, b + (t) * (KT / 2) * NR * 2 + lay.b1_offset, lay.stride)

static inline void zero_accumulators(void)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

static inline void store_accumulators(float *c)
{
    _tile_stored(0, c, NR * 4);
    _tile_stored(1, c + 16, NR * 4);
    _tile_stored(2, c + 16 * NR, NR * 4);
    _tile_stored(3, c + 16 * NR + 16, NR * 4);
}

/* The four loads of block t: both A tiles, then both B tiles. */
static inline __attribute__((always_inline)) void load_operands(long t, const uint16_t *a, const uint16_t *b,
                                                                b_layout lay)
{
    LOAD_A0(4, t);
    LOAD_A1(5, t);
    LOAD_B0(6, t);
    LOAD_B1(7, t);
}

/* The four products of a block on the loaded tiles: C00, C01, C10, C11. */
static inline __attribute__((always_inline)) void products_2x2(void)
{
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
}

/* One block in the library's order. */
static inline __attribute__((always_inline)) void block_v0(long t, const uint16_t *a, const uint16_t *b, b_layout lay)
{
    LOAD_A0(4, t);
    LOAD_B0(6, t);
    _tile_dpbf16ps(0, 4, 6);
    LOAD_B1(7, t);
    _tile_dpbf16ps(1, 4, 7);
    LOAD_A1(5, t);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
}

__attribute__((noinline)) static void order_v0(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                               float *c)
{
    zero_accumulators();
    for (long t = 0; t < blocks; t++)
        block_v0(t, a, b, lay);
    store_accumulators(c);
}

__attribute__((noinline)) static void order_pingpong(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                                     float *c)
{
    zero_accumulators();
    long t = 0;
    for (; t + 1 < blocks; t += 2) {
        LOAD_A0(4, t); /* even: B0 (tile 6) read last */
        LOAD_B0(6, t);
        _tile_dpbf16ps(0, 4, 6);
        LOAD_B1(7, t);
        _tile_dpbf16ps(1, 4, 7);
        LOAD_A1(5, t);
        _tile_dpbf16ps(3, 5, 7);
        _tile_dpbf16ps(2, 5, 6);
        LOAD_A0(4, t + 1); /* odd: tile 7 was freed before tile 6, so it is loaded first */
        LOAD_B1(7, t + 1);
        _tile_dpbf16ps(1, 4, 7);
        LOAD_B0(6, t + 1);
        _tile_dpbf16ps(0, 4, 6);
        LOAD_A1(5, t + 1);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    for (; t < blocks; t++)
        block_v0(t, a, b, lay);
    store_accumulators(c);
}

__attribute__((noinline)) static void order_loads_first(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                                        float *c)
{
    zero_accumulators();
    for (long t = 0; t < blocks; t++) {
        load_operands(t, a, b, lay);
        products_2x2();
    }
    store_accumulators(c);
}

/* C columns 0-15 only; blocks in pairs, the odd block's operands in tiles 4, 5 and 7. */
__attribute__((noinline)) static void order_32x16(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                                  float *c)
{
    _tile_zero(0);
    _tile_zero(1);
    for (long t = 0; t + 1 < blocks; t += 2) {
        LOAD_A0(2, t);
        LOAD_B0(6, t);
        LOAD_A1(3, t);
        _tile_dpbf16ps(0, 2, 6);
        _tile_dpbf16ps(1, 3, 6);
        LOAD_A0(4, t + 1);
        LOAD_B0(7, t + 1);
        LOAD_A1(5, t + 1);
        _tile_dpbf16ps(0, 4, 7);
        _tile_dpbf16ps(1, 5, 7);
    }
    _tile_stored(0, c, NR * 4);
    _tile_stored(1, c + 16 * NR, NR * 4);
}

__attribute__((noinline)) static void order_peak(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                                 float *c)
{
    zero_accumulators();
    load_operands(0, a, b, lay);
    for (long t = 0; t < blocks; t++)
        products_2x2();
    store_accumulators(c);
}

/* Six accumulators on one A and one B tile (6 products a block, counted as 1.5 tiles): whether
 * four chains of tdpbf16ps are enough to keep the unit busy, or its latency shows through them. */
__attribute__((noinline)) static void order_peak6(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                                  float *c)
{
    zero_accumulators();
    _tile_zero(4);
    _tile_zero(5);
    LOAD_A0(6, 0);
    LOAD_B0(7, 0);
    for (long t = 0; t < blocks; t++) {
        _tile_dpbf16ps(0, 6, 7);
        _tile_dpbf16ps(1, 6, 7);
        _tile_dpbf16ps(2, 6, 7);
        _tile_dpbf16ps(3, 6, 7);
        _tile_dpbf16ps(4, 6, 7);
        _tile_dpbf16ps(5, 6, 7);
    }
    store_accumulators(c);
    _tile_stored(4, c, NR * 4); /* into the first tile's rows: only the time matters */
    _tile_stored(5, c, NR * 4);
}

__attribute__((noinline)) static void order_loads(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay,
                                                  float *c)
{
    zero_accumulators();
    for (long t = 0; t < blocks; t++) {
        LOAD_A0(4, t);
        LOAD_B0(6, t);
        LOAD_B1(7, t);
        LOAD_A1(5, t);
    }
    store_accumulators(c);
}

static const cvf_cpu_kernel *library_kernel;

/* The library's kernel on one full tile (the same arguments as cpu_amx_kernel_probe.c's). */
static void order_library(long blocks, const uint16_t *a, const uint16_t *b, b_layout lay, float *c)
{
    (void)lay; /* always its own layout */
    library_kernel->run(blocks * KT, a, b, c, NR, MR, NR, 0);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        order_fn fn;
        double share; /* of a 32 x 32 tile's products */
        int compact;  /* B in the compact layout */
    } orders[] = {
        {"lib", order_library, 1, 0},          {"v0", order_v0, 1, 0},          {"pingpong", order_pingpong, 1, 0},
        {"loads1st", order_loads_first, 1, 0}, {"32x16", order_32x16, 0.5, 0},  {"peak", order_peak, 1, 0},
        {"peak6", order_peak6, 1.5, 0},        {"loads", order_loads, 1, 0},    {"v0/cB", order_v0, 1, 1},
        {"pingpong/cB", order_pingpong, 1, 1}, {"loads/cB", order_loads, 1, 1},
    };
    long kc = argc > 1 ? atol(argv[1]) : 256, b_panels = argc > 2 ? atol(argv[2]) : 1;
    long a_panels = argc > 3 ? atol(argv[3]) : 1;
    int rounds = argc > 4 ? atoi(argv[4]) : 3;
    if (kc < 2 * KT || kc % (2 * KT) || b_panels < 1 || a_panels < 1 || rounds < 1) {
        fprintf(stderr, "usage: %s kc (a multiple of 64) [b_panels] [a_panels] [rounds]\n", argv[0]);
        return 2;
    }
    if (!cvf_cpu_isa_supported(CVF_CPU_ISA_AMX)) { /* also asks Linux for the tile state */
        fprintf(stderr, "no usable AMX here\n");
        return 77;
    }
    library_kernel = cvf_cpu_kernel_for(CVF_CPU_ISA_AMX, CVF_BF16, CVF_BF16);
    const long blocks = kc / KT;
    const size_t a_elts = (size_t)MR * (size_t)kc, b_elts = (size_t)NR * (size_t)kc,
                 tiles = (size_t)(a_panels * b_panels);
    uint16_t *a = aligned_alloc(64, a_elts * 2 * (size_t)a_panels),
             *b = aligned_alloc(64, b_elts * 2 * (size_t)b_panels);
    float *c = aligned_alloc(64, sizeof(float) * MR * NR * tiles);
    if (!a || !b || !c)
        return 1;
    memset(a, 0x3c, a_elts * 2 * (size_t)a_panels); /* bf16 values near 0.01: no subnormals */
    memset(b, 0x3c, b_elts * 2 * (size_t)b_panels);
    memset(c, 0, sizeof(float) * MR * NR * tiles);
    const long calls = 10000000000L / (kc * MR * NR * a_panels * b_panels) + 1; /* ~20 GFLOP a variant */
    library_kernel->begin(); /* the library's tile configuration: 8 tiles of 16 x 64 bytes */
    for (int r = 0; r < rounds; r++)
        for (size_t v = 0; v < sizeof orders / sizeof orders[0]; v++) {
            const b_layout lay = orders[v].compact ? (b_layout){64, 16 * NR} : (b_layout){NR * 4, 32};
            double t = bench_thread_seconds();
            for (long x = 0; x < calls; x++)
                for (long j = 0; j < b_panels; j++)
                    for (long i = 0; i < a_panels; i++)
                        orders[v].fn(blocks, a + (size_t)i * a_elts, b + (size_t)j * b_elts, lay,
                                     c + (size_t)(j * a_panels + i) * MR * NR);
            t = bench_thread_seconds() - t;
            double flops = orders[v].share * 2.0 * MR * NR * (double)kc * (double)tiles * (double)calls;
            printf("kc=%ld b_panels=%ld a_panels=%ld round %d %-11s %7.1f GFLOP/s\n", kc, b_panels, a_panels, r,
                   orders[v].name, flops / t * 1e-9);
        }
    library_kernel->end();
    free(a), free(b), free(c);
    return 0;
}

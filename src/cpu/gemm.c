/*
 * The CPU GEMM with a fused epilogue, in the five loops of BLIS:
 *
 *   for jc over N in NC columns                      B block (KC x NC) lives in L3
 *     for pc over K in KC panels                     packed once per (jc, pc), shared by the threads
 *       for ic over M in MC rows      (parallel)     A block (MC x KC) packed per task, lives in L2
 *         for jr over NC in NR columns               one B micro-panel (KC x NR) stays in L1
 *           for ir over MC in MR rows                micro-kernel: MR x NR fp32 tile in registers
 *
 * Packing converts f16/bf16 to fp32 (or keeps bf16 pairs for the vdpbf16ps kernel) and reads any
 * strided or transposed view in place. The micro-kernel comes from the active ISA level
 * (kernels/kernels.h). When K fits in one panel, the tile goes straight from the kernel to the
 * epilogue; otherwise the passes accumulate in an fp32 block and the last one hands each finished
 * tile to the epilogue. The epilogue — the "vector" side — runs per tile while it is in L1: bias,
 * aux_out, activation (GELU' reading the matching aux_in tile), conversion, store, and the
 * bias-gradient partial sum of the tile's rows. Partials are kept per MR-row tile and combined in
 * tile order, so bias gradients are bit-identical for any thread count.
 *
 * Block sizes come from the cache sizes read at run time (once per process), so the same binary
 * fits other CPUs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "cpu/convert.h"
#include "cpu/cpu.h"
#include "cpu/kernels/kernels.h"
#include "cpu/vec.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Cache sizes in bytes (per core for L1/L2, whole cache for L3), read once. */
typedef struct cache_sizes {
    int64_t l1, l2, l3;
} cache_sizes;

/* Reads a cache size from sysconf, or returns fallback when the system does not say. */
static int64_t cache_size(int name, int64_t fallback)
{
    long bytes = sysconf(name);
    return bytes > 0 ? (int64_t)bytes : fallback;
}

/* The size of the L3 this CPU shares, from sysfs (e.g. "32768K"), or 0. sysconf reports the
 * whole package's L3 on some machines (384 MB on a 2-core VM of a large EPYC here). */
static int64_t shared_l3_size(void)
{
    FILE *file = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long long kib = 0;
    if (!file)
        return 0;
    if (fscanf(file, "%lldK", &kib) != 1)
        kib = 0;
    fclose(file);
    return (int64_t)kib << 10;
}

/* The machine's cache sizes from sysconf and sysfs. */
static cache_sizes read_caches(void)
{
    cache_sizes caches = {cache_size(_SC_LEVEL1_DCACHE_SIZE, 32 << 10), cache_size(_SC_LEVEL2_CACHE_SIZE, 1 << 20),
                          cache_size(_SC_LEVEL3_CACHE_SIZE, 8 << 20)};
    int64_t l3 = shared_l3_size();
    if (l3 > 0 && l3 < caches.l3)
        caches.l3 = l3;
    if (caches.l3 < caches.l2)
        caches.l3 = caches.l2;
    return caches;
}

/* Block sizes forced by CVF_CPU_BLOCKS (zeros when unset; chunks 0 when not given). */
typedef struct forced_blocks {
    int64_t kc, mc, nc, chunks;
} forced_blocks;

/*
 * Block sizes forced by the environment variable CVF_CPU_BLOCKS="kc,mc,nc[,chunks]" (for tests: tiny
 * blocks drive every loop and edge of the driver on small shapes; for tuning). With chunks, M is cut
 * into MC blocks only (not into at least one block per thread) and each NC block's panels into that
 * many column chunks: the tasks are then blocks x chunks, a 2-D split (tests: the chunk path on
 * every shape; tuning: fewer, taller blocks on many threads). A field of 0 keeps that size's default
 * ("0,192,0": only the MC blocks forced, for an A/B of the M split in one binary; "0,0,0,3": only
 * the chunks); only a forced kc puts the planner in the tests' mode (every thread, no direct
 * kernel). Zeros when unset.
 */
static forced_blocks read_forced_blocks(void)
{
    forced_blocks forced = {0, 0, 0, 0};
    const char *text = getenv("CVF_CPU_BLOCKS");
    long long k = 0, m = 0, n = 0, chunks = 0;
    int fields = text ? sscanf(text, "%lld,%lld,%lld,%lld", &k, &m, &n, &chunks) : 0;
    if ((fields == 3 || (fields == 4 && chunks > 0 && chunks <= 64)) && k >= 0 && m >= 0 && n >= 0 && k <= 4096 &&
        m <= 65536 && n <= 65536 && (k > 0 || m > 0 || n > 0 || fields == 4)) {
        forced.kc = k, forced.mc = m, forced.nc = n, forced.chunks = fields == 4 ? chunks : 0;
    }
    return forced;
}

/* What the planner reads from the machine and the environment: process-wide read-only
 * configuration, detected once (pthread_once) on the first call. Reading it per call cost two
 * sysconf calls, an open/read/close of a sysfs file and two getenv per plan, twice per call
 * (workspace query and run): about 7 us of a 13 us 64^3 product on a 2-core VM. */
typedef struct cpu_config {
    cache_sizes caches;
    forced_blocks forced;
    cvf_cpu_isa isa;
    const cvf_cpu_vec_ops *vec;
    bool kernels_daz;      /* cvf_cpu_kernels_daz */
    bool subnormals_slow;  /* cvf_cpu_subnormals_slow */
} cpu_config;

static cpu_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* Fills config (run once by pthread_once). */
static void detect_config(void)
{
    config.caches = read_caches();
    config.forced = read_forced_blocks();
    config.isa = cvf_cpu_isa_active();
    config.vec = cvf_cpu_vec_ops_for(config.isa);
    config.kernels_daz = cvf_cpu_kernels_daz();
    config.subnormals_slow = cvf_cpu_subnormals_slow();
}

/* The process-wide configuration, detected on first use. */
static const cpu_config *cpu_configuration(void)
{
    pthread_once(&config_once, detect_config);
    return &config;
}

/* Everything one GEMM call decides before it runs: the kernel, block sizes, workspace layout. */
typedef struct gemm_plan {
    const cvf_cpu_kernel *kernel;
    const cvf_cpu_vec_ops *vec; /* the level's vector operations (conversions, epilogue) */
    int64_t mr, nr, m, n, k;
    int64_t kc, mc, nc;          /* block sizes; kc even for bf16 pairs */
    int64_t mc_max;              /* the tallest MC block the L2 (or a forced MC) allows */
    int64_t balance_mc;          /* the tallest MC block balance_tiles may choose (the kernel's
                                  * balance_l2_16ths of L2, else mc_max) */
    int64_t ic_blocks;           /* MC-row blocks of M */
    int64_t jr_chunks;           /* column chunks of one NC block per task (when M alone has too few blocks) */
    int64_t elt;                 /* bytes of one packed element */
    int64_t row_tiles;           /* MR-row tiles of M (bias-gradient partials) */
    bool multi_pass;             /* K > KC: passes accumulate in an fp32 block */
    bool direct_c;               /* multi-pass into C itself (f32 C, nothing to finish): no fp32 block */
    bool direct;                 /* tiny product: the kernel reads A and B in place, nothing packed */
    bool dot;                    /* short product with B^T: the kernel's dot tiles, nothing packed
                                  * (unless scan_a finds subnormals; the rest of the plan is the packed one) */
    bool dot_rows;               /* short product with a row-major B: the kernel's row tiles, the same way */
    int64_t dot_cols;            /* dot, dot_rows: columns of C per task */
    bool stream;                 /* dot_rows for 1-4 rows: the stream tiles, K slices x column chunks */
    int64_t stream_slices;       /* stream: K slices (from the shape alone), summed in slice order */
    int64_t stream_chunks;       /* stream: column chunks of stream_cols (the last one shorter) */
    int64_t stream_cols;         /* stream: columns of a chunk */
    bool scan_a;                 /* dot: A is scanned for subnormals, which would cost assists */
    bool daz;                    /* the kernels run with subnormal operands read as zero (kernels_begin) */
    int64_t dot_a_ld;            /* > 0: the dot tiles read a copy of A, rows this many floats apart */
    int64_t splits;              /* K slices computed in parallel and summed in order (small M x N, long K) */
    int64_t packers;             /* tasks that pack one B block together */
    int32_t threads;             /* threads the phases can use (slots of per-thread scratch) */
    size_t thread_stride;        /* bytes of per-thread scratch */
    size_t b_stride, acc_stride; /* bytes of one slice's packed B block and fp32 block */
    int64_t acc_ld;              /* row stride of the fp32 block, in floats */
    size_t off_b, off_bias, off_acc, off_partials, off_dot_a, off_stream, off_threads, total;
} gemm_plan;

/* Per-thread scratch, in bytes: packed A block, tile, converted run, aux_in row. */
typedef struct thread_layout {
    size_t a, tile, run, aux, total;
} thread_layout;

static int64_t ceil_div(int64_t x, int64_t y)
{
    return (x + y - 1) / y;
}

static int64_t round_up(int64_t x, int64_t y)
{
    return ceil_div(x, y) * y;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Columns of a transposed A packed together (pack_a_f32); the run scratch holds as many columns
 * of an MC block (thread_scratch). */
#define TRANSPOSED_A_DEPTH 16

/* Per-thread scratch layout for a plan's block sizes (a direct plan packs nothing: tile and aux
 * only). */
static thread_layout thread_scratch(const gemm_plan *plan)
{
    thread_layout t;
    t.a = 0;
    const int64_t packed_a = plan->direct ? 0 : plan->mc * cvf_cpu_pack_depth(plan->kernel->format, plan->kc);
    t.tile = t.a + cvf_round_up_64((size_t)(packed_a * plan->elt));
    t.run = t.tile + cvf_round_up_64(sizeof(float) * CVF_CPU_MR_MAX * CVF_CPU_NR_MAX);
    /* run: one converted row of a block, the converted runs of one micro-panel, or the converted
     * columns of a transposed A that are packed together */
    int64_t run =
        plan->direct ? 0 : max64(max64(plan->nc, TRANSPOSED_A_DEPTH * plan->mc), max64(plan->mr, plan->nr) * plan->kc);
    t.aux = t.run + cvf_round_up_64(sizeof(float) * (size_t)run);
    t.total = t.aux + cvf_round_up_64(sizeof(float) * CVF_CPU_MR_MAX * CVF_CPU_NR_MAX);
    return t;
}

/* The fewest MR panels, and rows, of an MC block when M is cut into more blocks than the L2 needs
 * (16 AVX2 panels are only 96 rows: 768 x 3072 x 2048 ran 5% slower in 8 blocks of 96 than in 4
 * of 192 on 2 threads, as AVX-512's 7 blocks of 112 did against 4 of 192), and the blocks per
 * thread aimed for then; a kernel may set its own (cvf_cpu_kernel's min_block_panels and
 * blocks_per_thread: the AMX kernel's 2 and 2, dispatch.c). */
#define MIN_BLOCK_PANELS 16
#define MIN_BLOCK_ROWS 192
#define BLOCKS_PER_THREAD 4

/*
 * The deepest K panel of the AMX kernel. Its 2 x 2 tiles need 4 KB of operands per 64 cycles of
 * tdpbf16ps, more than L1 can hold for long: the A and B micro-panels stream from L2 whatever KC
 * is, so KC is chosen to spare the fp32 block instead: one pass up to K = 2048 (2048^3 on one thread:
 * 24.4 ms with KC 2048, 26.4 with 1024, 29.7 with 512; CPU time, PERF.md issue 15).
 */
#define AMX_KC_MAX 2048

/* Tiles (MR panels x NR panels) on the busiest thread when `panels` x `columns` are cut into blocks
 * x chunks tasks that threads take in rounds. */
static int64_t busiest_thread(int64_t panels, int64_t columns, int64_t blocks, int64_t chunks, int64_t threads)
{
    return ceil_div(panels, blocks) * ceil_div(columns, chunks) * ceil_div(blocks * chunks, threads);
}

/*
 * For few MR panels per thread (under 8 each): M blocks x column chunks that share the MR panels
 * and NR panels of one NC block out evenly among the threads. The M split alone can leave some
 * threads twice the work of others (AMX, K2-2 of the MLP, M = 768: 24 panels on 16 threads, blocks
 * of 2 and 1 panels; AVX2, 40 x 3072 x 768 on 2 threads: blocks of 4 and 3 panels, 1.21x
 * OpenBLAS's time, one block in 2 chunks 1.07x). Every split of up to `threads` blocks (within
 * the plan's balance_mc: mc_max, or more of L2 where the kernel asks for it, as the AMX kernel
 * does, dispatch.c) by 1 to 8 chunks is costed, the largest task round kept smallest: on 3, 6 or 12 threads
 * the best split is in 3 or 6 chunks (7 panels on 3 threads: one block in 3 chunks, an even share,
 * where blocks of 3, 2 and 2 panels give one thread 9/7 of it; test_plan). Among splits of the same
 * cost, the one whose busiest thread moves the least: each of its tasks packs its block's rows of
 * A and reads its chunk's columns of B, so rounds x (rows + columns) is kept smallest (on a
 * complete tie the split choose_blocks made stays, else the fewest chunks, then blocks). 256 rows
 * on 16 AMX threads are 8 panels: 8 blocks x 2 chunks, 4 x 4 and 2 x 8 cost the same, but each
 * task of the first reads half of B's columns, of the last an eighth (PERF.md). An even split of
 * one task per thread is reshaped the same way, among splits of one task per thread: 256 rows on 8
 * AMX threads (8 blocks of one panel, each reading all of B) took twice as long as on 16 (PERF.md).
 */
static int64_t busiest_traffic(const gemm_plan *plan, int64_t panels, int64_t columns, int64_t blocks, int64_t chunks,
                               int64_t threads)
{
    return ceil_div(blocks * chunks, threads) *
           (ceil_div(panels, blocks) * plan->mr + ceil_div(columns, chunks) * plan->nr);
}

static void balance_tiles(gemm_plan *plan, int64_t threads)
{
    int64_t panels = ceil_div(max64(plan->m, 1), plan->mr), columns = ceil_div(plan->nc, plan->nr);
    if (panels >= 8 * threads)
        return; /* enough blocks per thread for the imbalance not to matter */
    /* an even split already: only the shape of its tasks is reconsidered, where it has one task per
     * thread (a plan of several rounds keeps them, so that a slowed core sheds work) */
    const bool even = panels % threads == 0;
    if (even && plan->ic_blocks * plan->jr_chunks > threads)
        return;
    int64_t best_cost = busiest_thread(panels, columns, plan->ic_blocks, plan->jr_chunks, threads);
    int64_t best_traffic = busiest_traffic(plan, panels, columns, plan->ic_blocks, plan->jr_chunks, threads);
    for (int64_t chunks = 1; chunks <= 8 && chunks <= columns; chunks++) {
        for (int64_t blocks = 1; blocks <= threads && blocks <= panels; blocks++) {
            if (ceil_div(panels, blocks) * plan->mr > plan->balance_mc || (even && blocks * chunks > threads))
                continue;
            int64_t cost = busiest_thread(panels, columns, blocks, chunks, threads);
            int64_t traffic = busiest_traffic(plan, panels, columns, blocks, chunks, threads);
            if (cost < best_cost || (cost == best_cost && traffic < best_traffic)) {
                best_cost = cost;
                best_traffic = traffic;
                plan->ic_blocks = blocks;
                plan->jr_chunks = chunks;
                plan->mc = ceil_div(panels, blocks) * plan->mr;
            }
        }
    }
}

/*
 * A count of MC blocks that the threads finish in whole rounds: they take the blocks in turn, so
 * a count that is not a multiple of theirs leaves all but a few idle at the end of every pass
 * (2048^3 on 2 threads: 9 blocks of 228 rows ran 1.07-1.11x OpenBLAS's time, 10 blocks of 204-210
 * rows 1.00-1.02, 8 of 258 0.99-1.02; PERF.md, issue 16). The next multiple while the blocks keep
 * min_panels panels (more, smaller blocks leave a slowed thread less to hold up), else the
 * previous one (blocks a little over half of L2: 22 blocks on 16 threads, one round and a sixth,
 * become 16 rather than 32 of 11 panels).
 */
static int64_t whole_rounds(int64_t blocks, int64_t threads, int64_t panels, int64_t min_panels)
{
    if (blocks % threads == 0 || blocks >= panels)
        return blocks;
    int64_t more = round_up(blocks, threads), fewer = blocks / threads * threads;
    if (fewer == 0 || panels / more >= min_panels)
        return min64(more, panels);
    return fewer;
}

/*
 * Chooses block sizes for the kernel and the caches:
 *   KC: a B micro-panel (KC x NR) fills about half of L1, the rest holds A and C traffic (but
 *       a K whose micro-panel fits in 3/4 of L1 runs as one pass: no fp32 block, and the tile
 *       goes from the kernel's registers to the epilogue; so does one within 2 x L1 when the
 *       output needs the block, i.e. is not a plain f32 product accumulating in C);
 *   MC: the packed A block (MC x KC) takes about half of L2;
 *   NC: the packed B block (KC x NC) takes about a quarter of L3 (shared by the cores);
 * then M is cut into at least a few MC blocks per thread
 * (or, when M is short, the NC block's panels into chunks) so that the threads share the work.
 * choose_kc is the first of these (the direct kernel's test needs it alone).
 */
static int64_t choose_kc(const gemm_plan *plan, const cpu_config *cfg, bool plain)
{
    const cache_sizes *caches = &cfg->caches;
    int64_t l1_16ths = plan->kernel->kc_l1_16ths > 0 ? plan->kernel->kc_l1_16ths : 8;
    int64_t kc = caches->l1 * l1_16ths / 16 / (plan->nr * plan->elt);
    kc = min64(max64(kc & ~(int64_t)15, 64), 512);
    int64_t forced_kc = cfg->forced.kc;
    if (forced_kc > 0)
        kc = forced_kc;
    else if (plan->kernel->format == CVF_CPU_PACK_BF16_TILES)
        kc = ceil_div(max64(plan->k, 1), ceil_div(max64(plan->k, 1), AMX_KC_MAX)); /* equal passes, <= AMX_KC_MAX */
    else if (plan->k * plan->nr * plan->elt <= caches->l1 * 3 / 4) /* one pass: no fp32 block */
        kc = max64(plan->k, 1);
    else if (!plain && plan->k * plan->nr * plan->elt <= caches->l1 * 2)
        kc = plan->k; /* one pass with the B micro-panel streamed from L2: cheaper than writing,
                       * reading back and finishing an fp32 block (K = 768 on AVX2: 87.9 ms against
                       * 97.8 for two passes through the block, 2048 x 3072 on one thread) */
    else              /* equal passes: K = 400 runs as 2 x 200, not 192 + 192 + 16 */
        kc = ceil_div(plan->k, ceil_div(plan->k, kc));
    /* whole pack units (bf16 pairs; AMX tiles, unless forced: the tests' tiny kc then drive the
     * zero-padded tile depth) */
    return forced_kc > 0 ? round_up(kc, 2) : cvf_cpu_pack_depth(plan->kernel->format, kc);
}

/* choose_kc, then MC and NC for the caches and the threads (see above). */
static void choose_blocks(gemm_plan *plan, const cpu_config *cfg, int32_t pool_threads, bool plain)
{
    const cache_sizes *caches = &cfg->caches;
    const int64_t panels = ceil_div(max64(plan->m, 1), plan->mr); /* MR panels of M */
    int64_t forced_mc = cfg->forced.mc, forced_nc = cfg->forced.nc;
    plan->kc = choose_kc(plan, cfg, plain);
    plan->multi_pass = plan->k > plan->kc;

    int64_t mc_max = forced_mc > 0 ? forced_mc : caches->l2 / 2 / (plan->kc * plan->elt);
    mc_max = max64(plan->mr, mc_max / plan->mr * plan->mr);
    plan->mc_max = mc_max;
    plan->balance_mc = mc_max;
    if (forced_mc <= 0 && plan->kernel->balance_l2_16ths > 0)
        plan->balance_mc = max64(mc_max, caches->l2 * plan->kernel->balance_l2_16ths / 16 / (plan->kc * plan->elt) /
                                             plan->mr * plan->mr);
    int64_t blocks = ceil_div(max64(plan->m, 1), mc_max);
    int64_t threads = pool_threads;
    /* a few blocks per thread, so that a thread slowed by other work on its core does not hold up
     * the others at the end of each pass; but no fewer than MIN_BLOCK_PANELS MR panels each, or
     * each B micro-panel brought to L1 serves too few kernel calls (768 rows in 7 blocks of 112
     * ran at 70% of the speed of 4 blocks of 192); a kernel may set its own (the AMX kernel) */
    const cvf_cpu_kernel *kernel = plan->kernel;
    const int64_t min_panels = kernel->min_block_panels > 0 ? kernel->min_block_panels : MIN_BLOCK_PANELS;
    const int64_t min_rows = max64(min_panels * plan->mr, kernel->min_block_panels > 0 ? 0 : MIN_BLOCK_ROWS);
    const int64_t per_thread = kernel->blocks_per_thread > 0 ? kernel->blocks_per_thread : BLOCKS_PER_THREAD;
    if (forced_mc <= 0)
        blocks = max64(blocks, min64(per_thread * threads, ceil_div(max64(plan->m, 1), min_rows)));
    if (cfg->forced.chunks > 0) { /* a forced 2-D split: MC blocks x chunks */
        plan->jr_chunks = cfg->forced.chunks;
    } else {
        blocks = max64(blocks, min64(threads, panels));
        plan->jr_chunks = blocks < threads ? ceil_div(threads, blocks) : 1;
        if (plan->jr_chunks == 1 && forced_mc <= 0)
            blocks = whole_rounds(blocks, threads, panels, min_panels);
    }
    blocks = min64(blocks, panels);
    plan->ic_blocks = blocks; /* block_rows shares the MR panels out evenly */
    plan->mc = ceil_div(panels, blocks) * plan->mr; /* the largest block */

    int64_t nc = forced_nc > 0 ? forced_nc : caches->l3 / 4 / (plan->kc * plan->elt);
    if (plan->multi_pass) /* the fp32 block (M x NC) within 64 MiB, down to NR columns for huge M */
        nc = min64(nc, (64 << 20) / (4 * max64(plan->m, 1)));
    nc = max64(plan->nr, nc / plan->nr * plan->nr);
    plan->nc = min64(nc, round_up(max64(plan->n, 1), plan->nr));
    plan->jr_chunks = min64(plan->jr_chunks, ceil_div(plan->nc, plan->nr));
    if (forced_mc <= 0 && cfg->forced.chunks <= 0 && threads > 1) /* every kernel: PERF.md, issue 16 */
        balance_tiles(plan, threads);
}

/*
 * Splits K for products whose output is too small to share among threads but whose K is long
 * (weight gradients of a small layer over many tokens): up to 8 slices, each computed into its own
 * fp32 block, then summed in slice order. The split depends on the shape alone, never on the
 * thread count, so results (bias gradients included) are the same for any number of threads.
 */
static void choose_splits(gemm_plan *plan)
{
    plan->splits = 1;
    const int64_t small_output = 64 * 256, min_slice = 4 * plan->kc;
    if (plan->m * plan->n > small_output || plan->k < 2 * min_slice)
        return;
    plan->splits = min64(8, plan->k / min_slice);
    plan->multi_pass = true;
    plan->nc = round_up(plan->n, plan->nr); /* one column block: the whole output per slice */
    plan->jr_chunks = 1;
}

/* The most rows of a product that the dot tiles take (kernels.h, cvf_cpu_dot_fn): the MLP's
 * tokens at S = 1..32 (the kernel runs them in groups of 16, the later groups finding the task's
 * B rows in L1/L2). At S = 8, 8 x 3072 x 768 through W^T took 0.74 ms instead of 1.41 ms packed
 * (one thread, AVX2); 17-32 rows through the ViT-B weights 0.68-1.08x OpenBLAS's time where
 * packing took 0.95-1.49x (2 threads, Zen 1; PERF.md, issue 16). */
#define DOT_MAX_ROWS 32

/* The same under a bf16 kernel (vdpbf16ps, AMX), whose packed path computes many times faster
 * than fp32 FMAs: the MLP forward bf16 at S = 32 took 0.78-0.83 ms through the tiles on the
 * 16-core host's AMX level against 0.72 packed, at S = 16 0.85-0.94 against 1.02 (PERF.md). */
#define DOT_MAX_ROWS_BF16_KERNEL 16

/* The stream tiles' work (1-4 rows through a row-major B): K in slices of at least
 * STREAM_SLICE_ROWS rows (at most STREAM_MAX_SLICES, from the shape alone: the sums are the same
 * for any thread count) by chunks of at most STREAM_COLS columns (a 4 KB page of each f32 B row),
 * each task's sums in L1. */
#define STREAM_SLICE_ROWS 128
#define STREAM_MAX_SLICES 8
#define STREAM_COLS 1024

/*
 * Columns of the stream tiles' chunks: STREAM_COLS, or narrower where the slices x chunks tasks
 * would not fill the threads' rounds (a chunk changes no sum). The widest chunks (c0 of at most
 * STREAM_COLS, in whole lines of 64 columns) are kept when their tasks are a whole number of
 * rounds; otherwise each width down to a quarter of it is costed as rounds x width (every chunk
 * counted at full width), the widest kept on a tie. One token through 5120 x 4096 on 16 threads is
 * 8 slices x 5 chunks of 1024, 40 tasks in 3 rounds (3072 columns' time); 8 chunks of 640 make 64
 * tasks in 4 rounds (2560). One token through 3072 x 768 keeps 3 chunks of 1024 on 1, 2, 3 or 9
 * threads (18 tasks) and takes 4 of 768 on 4 threads (f16/bf16 weights: 24 tasks, 6 rounds, where
 * 18 took 5 rounds of 1024).
 */
static int64_t stream_chunk_cols(int64_t n, int64_t slices, int64_t threads)
{
    int64_t fewest = max64(ceil_div(n, STREAM_COLS), 1);
    int64_t best_cols = round_up(ceil_div(n, fewest), 64), best_cost = INT64_MAX;
    if ((slices * fewest) % threads == 0)
        return best_cols;
    for (int64_t chunks = fewest; chunks <= 4 * fewest; chunks++) {
        int64_t cols = round_up(ceil_div(n, chunks), 64);
        int64_t cost = ceil_div(slices * ceil_div(n, cols), threads) * cols;
        if (cost < best_cost) {
            best_cost = cost;
            best_cols = cols;
        }
    }
    return best_cols;
}
_Static_assert(DOT_MAX_ROWS <= CVF_CPU_MR_MAX, "dot_task computes all rows in the MR_MAX x NR_MAX tile");

/*
 * Row stride, in floats, of the copy of A that the dot tiles read when A's own rows are a multiple
 * of 2 KB apart (0: none, A read in place). Such rows fall on the same few L1 sets at every k
 * (a 32 KB 8-way L1 repeats its sets every 4 KB), so a block's 16 A rows and the B rows beside
 * them evicted one another: 16 x 768 x 3072 (A rows 12 KB apart) took 0.71-0.74 ms against
 * 0.60-0.63 with the rows 64 bytes further apart (AVX2, 2 threads; PERF.md, issue 16). The copy,
 * m x K floats once per call, is a small fraction of the weight the tiles stream.
 */
static int64_t dot_copy_stride(const cvf_matrix *a)
{
    bool converted = a->dtype != CVF_F32; /* the tiles read fp32 A: a 16-bit A is copied converted */
    if (!converted && (a->rows < 2 || (a->row_stride * (int64_t)sizeof(float)) % 2048 != 0))
        return 0;
    return (a->cols + 15) / 16 * 16 + 16; /* whole lines, and one line more */
}

/* The largest M x N x K run by the direct kernel (kernels.h, cvf_cpu_direct_fn): below about
 * this, packing A and B costs more than it saves (AVX2, one thread, CPU time against
 * OpenBLAS-Haswell: 64^3 1.17x packed, 0.93x direct; 128^3 1.02-1.03x packed, 0.97x direct). */
#define DIRECT_MAX_VOLUME (128 * 128 * 128)

/* Operand bytes that make a second thread worth waking even for few FLOPs: a core streams about a
 * megabyte from memory in the ~80 us that 8 MFLOP take it. A few tokens through a weight matrix
 * (S = 1, 2 of the MLP: 4.7 MFLOP over 9.4 MB) are bound by reading it, and one core reads at
 * about half the rate two do. */
#define BYTES_PER_THREAD ((double)(1 << 20))

/* FLOPs that make another thread worth waking: 2 MFLOP each (25-55 us of a core's work, against
 * a wake-up of a few us from its spin, tens from its futex; the shared task counter gives a late
 * worker fewer tasks). 128^3 and 144^3 ran 1.5x faster on two threads than on one (Zen, 2 threads);
 * on the 16-core host 256^3 took 0.142-0.153 ms at the old 8 MFLOP a thread (4 threads) and
 * 0.106-0.114 at 2 (16), 384^3 0.262-0.280 against 0.227-0.232 (PERF.md, 2026-12-05). A build may
 * set another (-DCVF_FLOPS_PER_THREAD=...) to measure the rule. */
#ifdef CVF_FLOPS_PER_THREAD
#define FLOPS_PER_THREAD ((double)(CVF_FLOPS_PER_THREAD))
#else
#define FLOPS_PER_THREAD 2e6
#endif

/* Threads worth waking for a product: one per FLOPS_PER_THREAD, or per megabyte of operands, at
 * least one, at most the pool. */
static int32_t useful_threads(const cvf_context *ctx, const cpu_config *cfg, const cvf_matrix *a, const cvf_matrix *b,
                              const cvf_matrix *c)
{
    if (cfg->forced.kc > 0) /* forced (test) blocks: every thread, so small shapes exercise them all */
        return cvf_threadpool_size(ctx->pool);
    double m = (double)c->rows, n = (double)c->cols, k = (double)(a->cols > 0 ? a->cols : 1);
    double flops = 2.0 * m * n * k;
    double bytes = m * k * (double)cvf_dtype_size(a->dtype) + k * n * (double)cvf_dtype_size(b->dtype) +
                   m * n * (double)cvf_dtype_size(c->dtype);
    double threads = flops / FLOPS_PER_THREAD;
    if (bytes / BYTES_PER_THREAD > threads)
        threads = bytes / BYTES_PER_THREAD;
    int32_t pool = cvf_threadpool_size(ctx->pool);
    return threads < 1.0 ? 1 : threads > (double)pool ? pool : (int32_t)threads;
}

/* Tiny f32 products (at most DIRECT_MAX_VOLUME, K in one pass), which the direct kernel reads in
 * place; not with forced blocks (the tests drive the blocked loops with those). */
static bool takes_direct(const gemm_plan *plan, const cpu_config *cfg, const cvf_matrix *a, const cvf_matrix *b,
                         bool plain)
{
    if (!plan->kernel->direct || cfg->forced.kc > 0 || plan->k < 1 || a->dtype != CVF_F32 || b->dtype != CVF_F32 ||
        a->col_stride != 1 || b->col_stride != 1)
        return false;
    if (plan->m > DIRECT_MAX_VOLUME || plan->n > DIRECT_MAX_VOLUME || plan->k > DIRECT_MAX_VOLUME ||
        plan->m * plan->n > DIRECT_MAX_VOLUME || plan->m * plan->n * plan->k > DIRECT_MAX_VOLUME)
        return false; /* (each product is tested only once its factors are small: no overflow) */
    return choose_kc(plan, cfg, plain) >= plan->k;
}

/* Where a plan's workspace pieces lie (offsets from the call's workspace, and the total). */
static void lay_out_workspace(gemm_plan *plan, const cvf_epilogue *ep)
{
    plan->b_stride = plan->direct ? 0 /* B is read in place */
                                  : cvf_round_up_64((size_t)(cvf_cpu_pack_depth(plan->kernel->format, plan->kc) *
                                                             round_up(plan->nc, plan->nr) * plan->elt));
    /* rows of the fp32 block one cache line longer than NC: a power-of-two row length would put
     * the MR rows of a tile in one L1 set */
    plan->acc_ld = plan->nc + 16;
    plan->acc_stride =
        plan->multi_pass && !plan->direct_c ? cvf_round_up_64(sizeof(float) * (size_t)(plan->m * plan->acc_ld)) : 0;
    size_t b_bytes = plan->b_stride * (size_t)max64(plan->splits, 2); /* a buffer per slice, or two */
    size_t bias_bytes = ep->bias ? sizeof(float) * (size_t)plan->n : 0;
    size_t acc_bytes = plan->acc_stride * (size_t)plan->splits;
    size_t partial_bytes = ep->bias_grad ? sizeof(float) * (size_t)(plan->row_tiles * plan->n) : 0;
    size_t dot_a_bytes = sizeof(float) * (size_t)(plan->m * plan->dot_a_ld);
    size_t stream_bytes = sizeof(float) * (size_t)(plan->stream_slices * plan->m * plan->n);
    plan->thread_stride = thread_scratch(plan).total;
    plan->off_b = 0;
    plan->off_bias = plan->off_b + cvf_round_up_64(b_bytes);
    plan->off_acc = plan->off_bias + cvf_round_up_64(bias_bytes);
    plan->off_partials = plan->off_acc + cvf_round_up_64(acc_bytes);
    plan->off_dot_a = plan->off_partials + cvf_round_up_64(partial_bytes);
    plan->off_stream = plan->off_dot_a + cvf_round_up_64(dot_a_bytes);
    plan->off_threads = plan->off_stream + cvf_round_up_64(stream_bytes);
    plan->total = plan->off_threads + plan->thread_stride * (size_t)max64(plan->threads, 1);
}

/* The plan of a product that takes_direct: one pass, no packing (the kernel reads A and B in
 * place, an edge tile's rows and columns alone), a task per MR rows. Planned without the
 * blocking's divisions: a 64^3 call, planned twice (workspace query and run), spent ~0.2 us
 * there. */
static void plan_direct(gemm_plan *plan, const cvf_context *ctx, const cpu_config *cfg, const cvf_epilogue *ep,
                        int32_t useful)
{
    plan->direct = true;
    plan->kc = plan->k;
    plan->mc = plan->mr;
    plan->nc = round_up(plan->n, plan->nr);
    plan->ic_blocks = plan->row_tiles;
    plan->jr_chunks = 1;
    plan->splits = 1;
    plan->daz = cfg->kernels_daz; /* the level's fp32 FMAs */
    plan->threads = (int32_t)min64(useful, cvf_threadpool_threads_for(ctx->pool, plan->row_tiles));
    lay_out_workspace(plan, ep);
}

/* Plans a call into *plan: same result for the workspace query and the run. */
static void make_plan(gemm_plan *plan, const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                      const cvf_matrix *c, const cvf_epilogue *ep)
{
    memset(plan, 0, sizeof *plan);
    const cpu_config *cfg = cpu_configuration();
    plan->vec = cfg->vec;
    plan->kernel = cvf_cpu_kernel_for(cfg->isa, a->dtype, b->dtype);
    plan->mr = plan->kernel->mr;
    plan->nr = plan->kernel->nr;
    plan->m = c->rows;
    plan->n = c->cols;
    plan->k = a->cols;
    plan->elt = plan->kernel->format == CVF_CPU_PACK_F32 ? 4 : 2;
    plan->row_tiles = ceil_div(plan->m, plan->mr);
    int32_t useful = useful_threads(ctx, cfg, a, b, c);
    /* a plain f32 product can accumulate its passes in C itself (direct_c below) */
    bool plain = c->dtype == CVF_F32 && c->col_stride == 1 && ep->activation == CVF_ACTIVATION_NONE && !ep->bias &&
                 !ep->aux_out && !ep->aux_in && !ep->bias_grad;
    if (takes_direct(plan, cfg, a, b, plain)) {
        plan_direct(plan, ctx, cfg, ep, useful);
        return;
    }
    choose_blocks(plan, cfg, useful, plain);
    choose_splits(plan);
    /* a few rows through a transposed f32 B (tokens through a PyTorch Linear weight): packing B
     * would read and write all of it for a handful of rows; the dot tiles read it once, in place */
    /* any dtypes: B (f32, f16, bf16) is converted as the tiles load it, A copied converted first */
    int64_t dot_max_rows = plan->kernel->format == CVF_CPU_PACK_F32 ? DOT_MAX_ROWS : DOT_MAX_ROWS_BF16_KERNEL;
    bool few_rows = plan->m <= dot_max_rows && plan->k >= 1 && a->col_stride == 1;
    plan->dot = plan->kernel->dot && few_rows && b->row_stride == 1 && b->col_stride != 1;
    /* the same with B row-major (weights stored in x out): row tiles read each B row's columns once */
    plan->dot_rows = !plan->dot && plan->kernel->rows && few_rows && b->col_stride == 1;
    /* the row tiles: 64 columns a task, 4 lines of each B row (2 lines: 1.0x OpenBLAS at 16 rows
     * against 0.91-0.97) */
    plan->dot_cols = plan->dot_rows ? CVF_CPU_NR_MAX : plan->nr;
    plan->stream = plan->dot_rows && plan->kernel->stream && plan->m <= CVF_CPU_STREAM_MAX_ROWS;
    plan->stream_slices = plan->stream ? min64(max64(plan->k / STREAM_SLICE_ROWS, 1), STREAM_MAX_SLICES) : 0;
    plan->stream_cols = plan->stream ? stream_chunk_cols(plan->n, plan->stream_slices, useful) : 0;
    plan->stream_chunks = plan->stream ? ceil_div(plan->n, plan->stream_cols) : 0;
    plan->dot_a_ld = plan->dot || plan->dot_rows ? dot_copy_stride(a) : 0;
    /* subnormals read as zero in the fp32 FMA code: the level's fp32 kernel, or the tiles that a
     * bf16 kernel's calls of a few rows take (the bf16 hardware, tdpbf16ps and vdpbf16ps, reads
     * them as zero too, so its packed path needs nothing); f16 inputs never become subnormal fp32
     * values */
    bool fp32_fma = plan->kernel->format == CVF_CPU_PACK_F32 || plan->dot || plan->dot_rows; /* stream too */
    plan->daz = cfg->kernels_daz && fp32_fma && (a->dtype != CVF_F16 || b->dtype != CVF_F16);
    /* subnormals in A send the dot tiles to microcode assists only where the CPU has them and the
     * kernels keep subnormals: on a Zen core the scan would turn the MLP forward's fc2 at a few
     * tokens (GELU outputs near -10 are subnormal) to the packed kernel for nothing, 2x slower */
    plan->scan_a = plan->dot && !plan->daz && cfg->subnormals_slow && a->dtype != CVF_F16; /* f16: never */
    /* split K: the slices, then the row tiles summed and finished, each on threads_for(tasks) */
    int64_t tasks = plan->splits > 1 ? max64(plan->splits, plan->row_tiles) : plan->ic_blocks * plan->jr_chunks;
    /* B blocks are packed in a few tasks per thread, for the same reason as the MC blocks */
    plan->packers = min64(4 * (int64_t)useful, ceil_div(plan->nc, plan->nr));
    /* the stream tiles run their own tasks (and pack nothing): the threads their chunks were cut for */
    int64_t runnable = plan->stream ? plan->stream_slices * plan->stream_chunks : max64(tasks, plan->packers);
    plan->threads = (int32_t)min64(useful, cvf_threadpool_threads_for(ctx->pool, runnable));

    /* a plain f32 product accumulates its passes in C: no fp32 block to write, read back and copy
     * (the copy cost 9% of a 2048 x 3072 x 768 product on one thread) */
    plan->direct_c = plan->multi_pass && plan->splits == 1 && plain;
    lay_out_workspace(plan, ep);
}

/* ---- packing -------------------------------------------------------------------------------- */

/* The fp32 values of a run of x: straight from x when it is f32 and contiguous, else converted
 * into run. */
static const float *source_run(const cvf_cpu_vec_ops *vec, const cvf_matrix *x, int64_t offset, int64_t stride,
                               int64_t count, float *run)
{
    if (x->dtype == CVF_F32 && stride == 1)
        return (const float *)x->data + offset;
    if (stride == 1) /* the plan's vector conversion, without a table look-up per run */
        vec->load((const char *)x->data + offset * (int64_t)cvf_dtype_size(x->dtype), x->dtype, count, run);
    else
        cvf_cpu_load_run(x->data, x->dtype, offset, stride, count, run);
    return run;
}

/* dst[i] = src[i] for i < n: short copies inline (a library call per micro-panel row costs more;
 * gcc turns a plain loop into a memmove call, 2% of a 2048 x 3072 x 768 product on one thread,
 * so the kernels' widths are copied with fixed-size memcpy, which it expands in place). */
static inline void copy_floats(float *restrict dst, const float *restrict src, int64_t n)
{
    switch (n) {
    case 6: memcpy(dst, src, 6 * sizeof(float)); break;
    case 8: memcpy(dst, src, 8 * sizeof(float)); break;
    case 12: memcpy(dst, src, 12 * sizeof(float)); break;
    case 14: memcpy(dst, src, 14 * sizeof(float)); break;
    case 16: memcpy(dst, src, 16 * sizeof(float)); break;
    case 32: memcpy(dst, src, 32 * sizeof(float)); break;
    default:
        for (int64_t i = 0; i < n; i++)
            dst[i] = src[i];
    }
}

/* dst[p * width + r] = rows[r][p] for r < count, p < kc, and 0 for count <= r < width: one
 * micro-panel from `count` source runs. The runs are read 16 values (a cache line) at a time,
 * all rows side by side with the lines four ahead prefetched, so the misses of the rows overlap
 * instead of each short row waiting for its own. */
static void interleave_rows(const float *const *rows, int64_t count, int64_t width, int64_t kc, float *dst)
{
    for (int64_t p0 = 0; p0 < kc; p0 += 16) {
        int64_t p1 = min64(p0 + 16, kc);
        for (int64_t r = 0; r < count; r++) {
            if (p0 + 64 < kc)
                __builtin_prefetch(rows[r] + p0 + 64);
            const float *src = rows[r];
            for (int64_t p = p0; p < p1; p++)
                dst[p * width + r] = src[p];
        }
        for (int64_t r = count; r < width; r++)
            for (int64_t p = p0; p < p1; p++)
                dst[p * width + r] = 0.0f;
    }
}

/* Prefetches the cache lines of `count` contiguous 16-bit runs of kc elements at offsets (the next
 * micro-panel's rows, converted one run at a time: without this each short run waits for its own
 * misses). Nothing to do for f32 runs (interleave_rows prefetches) or strided ones. */
static void prefetch_runs(const cvf_matrix *x, const int64_t *offsets, int64_t stride, int64_t count, int64_t kc)
{
    if (x->dtype == CVF_F32 || stride != 1)
        return;
    int64_t size = (int64_t)cvf_dtype_size(x->dtype), bytes = kc * size;
    for (int64_t r = 0; r < count; r++)
        for (int64_t byte = 0; byte < bytes; byte += 64)
            __builtin_prefetch((const char *)x->data + offsets[r] * size + byte);
}

/* One micro-panel from `count` runs of x that start at offsets[r] and advance by `stride`:
 * contiguous f32 runs are read in place, others converted into run (room for count x kc). */
static void pack_panel(const gemm_plan *plan, const cvf_matrix *x, const int64_t *offsets, int64_t stride,
                       int64_t count, int64_t width, int64_t kc, float *dst, float *run)
{
    const float *rows[CVF_CPU_NR_MAX];
    for (int64_t r = 0; r < count; r++)
        rows[r] = source_run(plan->vec, x, offsets[r], stride, kc, run + r * kc);
    if (plan->kernel->interleave) /* the level's vector transposes */
        plan->kernel->interleave(rows, count, width, kc, dst);
    else
        interleave_rows(rows, count, width, kc, dst);
}

/* fp32 A micro-panels: packed[(i / MR) * MR * kc + p * MR + i % MR] = A[i0 + i, p0 + p]. */
static void pack_a_f32(const gemm_plan *plan, const cvf_matrix *a, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                       float *packed, float *run)
{
    if (kc == 0) /* empty panels (and no address arithmetic on a view whose data may be NULL) */
        return;
    const int64_t mr = plan->mr;
    if (a->col_stride <= a->row_stride) { /* rows contiguous: MR rows side by side per panel */
        int64_t offsets[CVF_CPU_NR_MAX], next[CVF_CPU_NR_MAX];
        for (int64_t i = 0; i < mc; i += mr) {
            int64_t count = min64(mr, mc - i), next_count = min64(mr, mc - i - mr);
            for (int64_t r = 0; r < count; r++)
                offsets[r] = (i0 + i + r) * a->row_stride + p0 * a->col_stride;
            for (int64_t r = 0; r < next_count; r++)
                next[r] = (i0 + i + mr + r) * a->row_stride + p0 * a->col_stride;
            prefetch_runs(a, next, a->col_stride, next_count, kc);
            pack_panel(plan, a, offsets, a->col_stride, count, mr, kc, packed + i * kc, run);
        }
        return;
    }
    /* columns contiguous (a transposed view): each column converted (or read in place), copied MR
     * at a time; TRANSPOSED_A_DEPTH columns at once, so that each panel receives that many MR-wide
     * rows in a row (contiguous lines) rather than one row per panel in turn (MC / MR store
     * streams 24 bytes apart in time) */
    for (int64_t q = 0; q < kc; q += TRANSPOSED_A_DEPTH) {
        int64_t depth = min64(TRANSPOSED_A_DEPTH, kc - q);
        const float *src[TRANSPOSED_A_DEPTH];
        for (int64_t p = 0; p < depth; p++)
            src[p] = source_run(plan->vec, a, i0 * a->row_stride + (p0 + q + p) * a->col_stride, a->row_stride, mc,
                                run + p * mc);
        for (int64_t i = 0; i < mc; i += mr) {
            float *panel = packed + i * kc + q * mr;
            int64_t count = min64(mr, mc - i);
            for (int64_t p = 0; p < depth; p++)
                copy_floats(panel + p * mr, src[p] + i, count);
        }
    }
    int64_t last = (mc - 1) / mr * mr; /* zero rows of the last panel */
    for (int64_t p = 0; p < kc; p++)
        for (int64_t i = mc; i < last + mr; i++)
            packed[last * kc + p * mr + (i - last)] = 0.0f;
}

/* fp32 B micro-panels: packed[(j / NR) * NR * kc + p * NR + j % NR] = B[p0 + p, j0 + j]. */
static void pack_b_f32(const gemm_plan *plan, const cvf_matrix *b, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                       float *packed, float *run)
{
    if (kc == 0) /* empty panels (and no address arithmetic on a view whose data may be NULL) */
        return;
    const int64_t nr = plan->nr;
    if (b->col_stride > b->row_stride) { /* columns contiguous (e.g. a PyTorch weight read as W^T) */
        int64_t offsets[CVF_CPU_NR_MAX], next[CVF_CPU_NR_MAX];
        for (int64_t j = 0; j < nc; j += nr) {
            int64_t count = min64(nr, nc - j), next_count = min64(nr, nc - j - nr);
            for (int64_t r = 0; r < count; r++)
                offsets[r] = p0 * b->row_stride + (j0 + j + r) * b->col_stride;
            for (int64_t r = 0; r < next_count; r++)
                next[r] = p0 * b->row_stride + (j0 + j + nr + r) * b->col_stride;
            prefetch_runs(b, next, b->row_stride, next_count, kc);
            pack_panel(plan, b, offsets, b->row_stride, count, nr, kc, packed + j * kc, run);
        }
        return;
    }
    if (b->dtype == CVF_F32 && b->col_stride == 1) {
        /* f32 rows read in place, 16 rows at a time, panel by panel: each panel gets 16 x NR
         * contiguous floats in a row instead of one line in each of nc / NR panels per row (one
         * write stream per panel cost 2.7% of a 768 x 3072 x 2048 product, 6x OpenBLAS's copy) */
        const float *base = (const float *)b->data + p0 * b->row_stride + j0;
        for (int64_t q = 0; q < kc; q += 16)
            for (int64_t j = 0; j < nc; j += nr)
                for (int64_t p = q; p < min64(q + 16, kc); p++)
                    copy_floats(packed + j * kc + p * nr, base + p * b->row_stride + j, min64(nr, nc - j));
    } else { /* rows contiguous: convert each row of the block, copy NR at a time */
        for (int64_t p = 0; p < kc; p++) {
            const float *src =
                source_run(plan->vec, b, (p0 + p) * b->row_stride + j0 * b->col_stride, b->col_stride, nc, run);
            for (int64_t j = 0; j < nc; j += nr)
                copy_floats(packed + j * kc + p * nr, src + j, min64(nr, nc - j));
        }
    }
    int64_t last = (nc - 1) / nr * nr; /* zero columns of the last panel */
    for (int64_t p = 0; p < kc; p++)
        for (int64_t j = nc; j < last + nr; j++)
            packed[last * kc + p * nr + (j - last)] = 0.0f;
}

/* d[2 r] = even[r], d[2 r + 1] = odd[r] for r < rows: two contiguous source lines interleaved into
 * pairs (8 pairs per SSE2 step on x86-64, where SSE2 is the baseline). */
static void interleave_lines(const uint16_t *even, const uint16_t *odd, int64_t rows, uint16_t *d)
{
    int64_t r = 0;
#if defined(__SSE2__)
    for (; r + 8 <= rows; r += 8) {
        __m128i e = _mm_loadu_si128((const __m128i *)(even + r)), o = _mm_loadu_si128((const __m128i *)(odd + r));
        _mm_storeu_si128((__m128i *)(d + 2 * r), _mm_unpacklo_epi16(e, o));
        _mm_storeu_si128((__m128i *)(d + 2 * r + 8), _mm_unpackhi_epi16(e, o));
    }
#endif
    for (; r < rows; r++) {
        d[2 * r] = even[r];
        d[2 * r + 1] = odd[r];
    }
}

/*
 * One bf16-pair micro-panel of width w: dst[((p / 2) * w + r) * 2 + p % 2] = src[r * rs + p * ps] for
 * r < rows, p < kc; zero for r >= rows and for the odd last p. Bits are copied, nothing rounds.
 * The loop runs along whichever of r and p is contiguous in the source.
 */
static void pack_pairs(const uint16_t *src, int64_t rs, int64_t ps, int64_t rows, int64_t w, int64_t kc, uint16_t *dst)
{
    static const uint16_t zeros[CVF_CPU_NR_MAX] = {0};
    int64_t pairs = ceil_div(kc, 2), full = kc / 2;
    if (ps == 1) { /* each source row holds its pairs: 32-bit words, transposed into the panel */
        for (int64_t r = 0; r < rows; r++) {
            const uint16_t *row = src + r * rs;
            uint16_t *d = dst + r * 2;
            for (int64_t q = 0; q < full; q++)
                memcpy(d + q * w * 2, row + 2 * q, 2 * sizeof(uint16_t));
            if (kc % 2) {
                d[full * w * 2] = row[2 * full];
                d[full * w * 2 + 1] = 0;
            }
        }
    } else if (rs != 1 && ps < rs) { /* neither contiguous: p along the nearer stride */
        for (int64_t r = 0; r < rows; r++) {
            const uint16_t *row = src + r * rs;
            uint16_t *d = dst + r * 2;
            for (int64_t q = 0; q < full; q++) {
                d[q * w * 2] = row[2 * q * ps];
                d[q * w * 2 + 1] = row[(2 * q + 1) * ps];
            }
            if (kc % 2) {
                d[full * w * 2] = row[2 * full * ps];
                d[full * w * 2 + 1] = 0;
            }
        }
    } else { /* r contiguous (or the nearer stride): two source lines (p, p + 1) interleaved at a time */
        for (int64_t q = 0; q < pairs; q++) {
            const uint16_t *even = src + 2 * q * ps;
            bool has_odd = 2 * q + 1 < kc;
            const uint16_t *odd = has_odd ? even + ps : even; /* no pointer past the source */
            uint16_t *d = dst + q * w * 2;
            if (rs == 1 && rows <= CVF_CPU_NR_MAX) {
                interleave_lines(even, has_odd ? odd : zeros, rows, d);
                continue;
            }
            for (int64_t r = 0; r < rows; r++) {
                d[r * 2] = even[r * rs];
                d[r * 2 + 1] = has_odd ? odd[r * rs] : 0;
            }
        }
    }
    for (int64_t q = 0; q < pairs; q++) /* rows of the panel past the edge */
        for (int64_t r = rows; r < w; r++)
            dst[(q * w + r) * 2] = dst[(q * w + r) * 2 + 1] = 0;
}

/*
 * The bf16-pair micro-panels of a row-major block (rows p of kc, columns j < nc contiguous, rows
 * ps apart), as pack_pairs would make them one panel at a time: panel j / w at dst + (j / w) *
 * panel_stride. Each pair of source rows is read once, along its whole length, and dealt out to
 * the panels (one panel at a time read 64 bytes from each row, a cache miss per row, 4 KB apart).
 */
static void pack_pair_rows(const uint16_t *src, int64_t ps, int64_t nc, int64_t w, int64_t kc, uint16_t *dst,
                           int64_t panel_stride)
{
    static const uint16_t zeros[CVF_CPU_NR_MAX] = {0};
    int64_t pairs = ceil_div(kc, 2), edge = nc % w;
    for (int64_t q = 0; q < pairs; q++) {
        const uint16_t *even = src + 2 * q * ps;
        bool has_odd = 2 * q + 1 < kc;
        for (int64_t j = 0; j < nc; j += w) {
            uint16_t *d = dst + (j / w) * panel_stride + q * w * 2;
            int64_t cols = min64(w, nc - j);
            interleave_lines(even + j, has_odd ? even + ps + j : zeros, cols, d);
        }
        if (edge) /* the last panel's columns past nc */
            memset(dst + (nc / w) * panel_stride + q * w * 2 + edge * 2, 0, sizeof(uint16_t) * (size_t)((w - edge) * 2));
    }
}

/* bf16-pair A micro-panels (kernels.h): element (i, p) at ((p / 2) * MR + i) * 2 + p % 2 of its panel. */
static void pack_a_bf16(const gemm_plan *plan, const cvf_matrix *a, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                        uint16_t *packed)
{
    if (kc == 0) /* empty panels (and no address arithmetic on a view whose data may be NULL) */
        return;
    const int64_t mr = plan->mr, panel = mr * round_up(kc, 2);
    const uint16_t *base = (const uint16_t *)a->data + p0 * a->col_stride;
    for (int64_t i = 0; i < mc; i += mr)
        pack_pairs(base + (i0 + i) * a->row_stride, a->row_stride, a->col_stride, min64(mr, mc - i), mr, kc,
                   packed + (i / mr) * panel);
}

/* bf16-pair B micro-panels (the BF16 and the AMX formats): element (p, j) at ((p / 2) * NR + j) * 2 +
 * p % 2 of its panel, and zero pairs up to the format's depth (AMX: the tile depth). */
static void pack_b_bf16(const gemm_plan *plan, const cvf_matrix *b, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                        uint16_t *packed)
{
    if (kc == 0) /* empty panels (and no address arithmetic on a view whose data may be NULL) */
        return;
    const int64_t nr = plan->nr, depth = cvf_cpu_pack_depth(plan->kernel->format, kc);
    const int64_t pairs = ceil_div(kc, 2), panel = nr * depth;
    const uint16_t *base = (const uint16_t *)b->data + p0 * b->row_stride;
    if (b->col_stride == 1)
        pack_pair_rows(base + j0, b->row_stride, nc, nr, kc, packed, panel);
    for (int64_t j = 0; j < nc; j += nr) {
        uint16_t *dst = packed + (j / nr) * panel;
        if (b->col_stride != 1)
            pack_pairs(base + (j0 + j) * b->col_stride, b->col_stride, b->row_stride, min64(nr, nc - j), nr, kc, dst);
        if (depth / 2 > pairs)
            memset(dst + pairs * nr * 2, 0, sizeof(uint16_t) * (size_t)((depth / 2 - pairs) * nr * 2));
    }
}

#if defined(__SSE2__)
/* Transposes the 8 x 8 block of 16-bit values at src (rows ss elements apart) into dst (rows ds
 * apart): dst[c][r] = src[r][c]. */
static inline void transpose_8x8(const uint16_t *src, int64_t ss, uint16_t *dst, int64_t ds)
{
    __m128i r[8], t[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm_loadu_si128((const __m128i *)(src + k * ss));
    for (int k = 0; k < 4; k++) { /* pairs of rows: 16-bit interleaves */
        t[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) { /* quads: 32-bit interleaves */
        r[4 * k] = _mm_unpacklo_epi32(t[4 * k], t[4 * k + 2]);
        r[4 * k + 1] = _mm_unpackhi_epi32(t[4 * k], t[4 * k + 2]);
        r[4 * k + 2] = _mm_unpacklo_epi32(t[4 * k + 1], t[4 * k + 3]);
        r[4 * k + 3] = _mm_unpackhi_epi32(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int k = 0; k < 4; k++) { /* halves: 64-bit interleaves give columns 2k and 2k + 1 */
        _mm_storeu_si128((__m128i *)(dst + (2 * k) * ds), _mm_unpacklo_epi64(r[k], r[k + 4]));
        _mm_storeu_si128((__m128i *)(dst + (2 * k + 1) * ds), _mm_unpackhi_epi64(r[k], r[k + 4]));
    }
}
#endif

/*
 * One AMX A micro-panel from a view whose rows are not contiguous: A[r][p] = src[r * rs + p * ps]
 * (r < rows, p < kc) into panel[((p / KT) * mr + r) * KT + p % KT], zero for p in [kc, depth); rows
 * past `rows` are the caller's. A transposed view (rs == 1, A^T stored) goes by SSE2 8 x 8
 * transposes, the rest one column of A at a time.
 */
static void transpose_tiles(const uint16_t *src, int64_t rs, int64_t ps, int64_t rows, int64_t kc, int64_t depth,
                            int64_t mr, uint16_t *panel)
{
    const int64_t kt = CVF_CPU_TILE_DEPTH;
    int64_t p = 0;
#if defined(__SSE2__)
    for (; rs == 1 && p + 8 <= kc; p += 8) { /* 8 values of K for 8 rows at a time */
        uint16_t *d = panel + (p / kt) * mr * kt + p % kt;
        int64_t r = 0;
        for (; r + 8 <= rows; r += 8)
            transpose_8x8(src + p * ps + r, ps, d + r * kt, kt);
        for (; r < rows; r++)
            for (int64_t u = 0; u < 8; u++)
                d[r * kt + u] = src[(p + u) * ps + r];
    }
#endif
    for (; p < depth; p++) {
        uint16_t *d = panel + (p / kt) * mr * kt + p % kt;
        const uint16_t *column = src + min64(p, kc - 1) * ps; /* no pointer past A */
        for (int64_t r = 0; r < rows; r++)
            d[r * kt] = p < kc ? column[r * rs] : 0;
    }
}

/*
 * AMX A micro-panels (kernels.h, CVF_CPU_PACK_BF16_TILES): element (i, p) at
 * ((p / KT) * MR + i) * KT + p % KT of its panel, zero for i >= mc and for p >= kc up to the tile
 * depth. Bits are copied, nothing rounds.
 */
static void pack_a_tiles(const gemm_plan *plan, const cvf_matrix *a, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                         uint16_t *packed)
{
    if (kc == 0) /* empty panels (and no address arithmetic on a view whose data may be NULL) */
        return;
    const int64_t mr = plan->mr, kt = CVF_CPU_TILE_DEPTH, depth = cvf_cpu_pack_depth(CVF_CPU_PACK_BF16_TILES, kc);
    const int64_t rs = a->row_stride, ps = a->col_stride;
    const uint16_t *base = (const uint16_t *)a->data + i0 * rs + p0 * ps;
    for (int64_t i = 0; ps == 1 && i < mc; i += mr) { /* rows of A contiguous: 64-byte runs */
        uint16_t *panel = packed + (i / mr) * mr * depth;
        for (int64_t t = 0; t < depth / kt; t++) {
            int64_t width = min64(kt, kc - t * kt);
            for (int64_t r = 0; r < min64(mr, mc - i); r++) {
                uint16_t *d = panel + (t * mr + r) * kt;
                if (width == kt) { /* a whole tile row: a fixed-size copy, inlined */
                    memcpy(d, base + (i + r) * rs + t * kt, sizeof(uint16_t) * CVF_CPU_TILE_DEPTH);
                    continue;
                }
                memcpy(d, base + (i + r) * rs + t * kt, sizeof(uint16_t) * (size_t)width);
                memset(d + width, 0, sizeof(uint16_t) * (size_t)(kt - width));
            }
        }
    }
    /* otherwise one tile depth of K at a time across all the panels: each source line (A^T stored:
     * mc values of A's column p) is then read whole, its lines one after another, instead of a
     * 64-byte piece of it per panel, each piece a miss from another row */
    for (int64_t t = 0; ps != 1 && t < depth / kt; t++)
        for (int64_t i = 0; i < mc; i += mr)
            transpose_tiles(base + i * rs + t * kt * ps, rs, ps, min64(mr, mc - i), min64(kt, kc - t * kt), kt, mr,
                            packed + (i / mr) * mr * depth + t * mr * kt);
    for (int64_t i = 0; i < mc; i += mr) { /* rows past the edge */
        int64_t rows = min64(mr, mc - i);
        for (int64_t t = 0; t < depth / kt; t++)
            memset(packed + (i / mr) * mr * depth + (t * mr + rows) * kt, 0,
                   sizeof(uint16_t) * (size_t)((mr - rows) * kt));
    }
}

/* ---- the job ------------------------------------------------------------------------------- */

/* One (jc, pc) pass: the NC-column block and the KC panel of K it covers. */
typedef struct gemm_pass {
    int64_t j0, nc, p0, kc;
    bool first, last; /* first / last panel of K for this column block */
    char *packed_b;   /* where its B block is packed */
} gemm_pass;

/* One call in flight: the views, the plan, the workspace and the passes in flight. */
typedef struct gemm_job {
    const cvf_matrix *a, *b, *c;
    const cvf_epilogue *ep;
    const cvf_cpu_vec_ops *vec;
    gemm_plan plan;
    char *workspace;
    char *packed_b[2];  /* the packed B blocks, used by alternate passes (the slice's own when K is split) */
    float *acc;         /* the fp32 block of multi-pass products (the slice's own when K is split) */
    gemm_pass compute;  /* the pass the compute tasks run */
    gemm_pass pack;     /* the pass whose B block the pack tasks prepare (the next one) */
    int64_t pack_tasks; /* pack tasks in front of the compute tasks of one pool run (0: none) */
    bool finish;        /* the last pass runs the epilogue (false for K slices: summed first) */
    bool unit_columns;  /* C, aux_out, aux_in all have unit column stride */
    bool fused_store;   /* the kernel stores the finished tile itself */
    cvf_cpu_tile_epilogue tile_epilogue; /* the per-call part of the tile epilogue */
    int64_t packers;                     /* tasks that share the packing of the B block */
} gemm_job;

/*
 * The fp32 FMA kernels read subnormal operands as zero where cvf_cpu_kernels_daz says so (Intel):
 * x86's DAZ bit is set in the calling thread's MXCSR around each run of kernel calls and restored
 * before the tile epilogue, which keeps its subnormal results (the GELU tails). Why: an Intel core
 * sends each FMA with a subnormal operand to a microcode assist, and the MLP forward's fc2 reads a
 * GELU output that holds subnormals wherever the pre-activation is near -10 (docs/PERF.md,
 * "subnormal inputs on Intel cores"). The operands are the inputs (a change below K x 2^-126 x the
 * largest other factor), the accumulators (a subnormal partial sum read as zero: below K x 2^-126
 * per output) and, in a kernel's fused store (bias, ReLU) or its accumulation into C, those values.
 * The kernels are opaque calls (function pointers), so the compiler cannot move their arithmetic
 * across the MXCSR writes. The plan decides (plan.daz: not for f16 inputs, never subnormal as fp32).
 */
typedef unsigned int kernel_fp_mode;

static inline kernel_fp_mode kernels_begin(const gemm_job *job)
{
#if defined(__SSE2__)
    if (!job->plan.daz)
        return 0;
    const kernel_fp_mode saved = _mm_getcsr();
    _mm_setcsr(saved | 0x0040u); /* DAZ: denormal operands read as zero */
    return saved;
#else
    (void)job;
    return 0;
#endif
}

/* Restores the caller's MXCSR after kernels_begin, keeping the exception flags the kernels raised. */
static inline void kernels_end(const gemm_job *job, kernel_fp_mode saved)
{
#if defined(__SSE2__)
    if (job->plan.daz)
        _mm_setcsr(saved | (_mm_getcsr() & 0x3Fu));
#else
    (void)job, (void)saved;
#endif
}

/* Elements of one packed micro-panel (A: MR rows, B: NR columns) for a panel kc deep. */
static int64_t panel_elements(const gemm_plan *plan, int64_t kc, int64_t width)
{
    return width * cvf_cpu_pack_depth(plan->kernel->format, kc);
}

/* Packs share `task` of the packers' shares of pass's B block (its NR panels, cut evenly). */
static void pack_b_share(const gemm_job *job, const gemm_pass *pass, int64_t task, int32_t thread)
{
    const gemm_plan *plan = &job->plan;
    int64_t panels = ceil_div(pass->nc, plan->nr);
    int64_t first = panels * task / job->packers, last = panels * (task + 1) / job->packers;
    if (first >= last)
        return;
    int64_t j = first * plan->nr, width = min64(last * plan->nr, pass->nc) - j;
    char *packed = pass->packed_b + (size_t)(first * panel_elements(plan, pass->kc, plan->nr) * plan->elt);
    if (plan->kernel->format != CVF_CPU_PACK_F32) {
        pack_b_bf16(plan, job->b, pass->p0, pass->kc, pass->j0 + j, width, (uint16_t *)packed);
    } else {
        float *run = (float *)(job->workspace + plan->off_threads + plan->thread_stride * (size_t)thread +
                               thread_scratch(plan).run);
        pack_b_f32(plan, job->b, pass->p0, pass->kc, pass->j0 + j, width, (float *)packed, run);
    }
}

/* Address of element (i, j) of x. */
static void *element_at(const cvf_matrix *x, int64_t i, int64_t j)
{
    return (char *)x->data + (i * x->row_stride + j * x->col_stride) * (int64_t)cvf_dtype_size(x->dtype);
}

/* Stores n fp32 values as row i, columns j0.., of x (any dtype, any column stride). */
static void store_row(const cvf_cpu_vec_ops *vec, const cvf_matrix *x, int64_t i, int64_t j0, int64_t n,
                      const float *values)
{
    int64_t offset = i * x->row_stride + j0 * x->col_stride;
    if (x->col_stride == 1) /* the common layout: straight to the level's vector store */
        vec->store((char *)x->data + offset * (int64_t)cvf_dtype_size(x->dtype), x->dtype, n, values);
    else
        cvf_cpu_store_run(x->data, x->dtype, offset, x->col_stride, n, values);
}

/* Loads row i, columns j0.., of x as n fp32 values. */
static void load_row(const cvf_cpu_vec_ops *vec, const cvf_matrix *x, int64_t i, int64_t j0, int64_t n, float *values)
{
    int64_t offset = i * x->row_stride + j0 * x->col_stride;
    if (x->col_stride == 1)
        vec->load((const char *)x->data + offset * (int64_t)cvf_dtype_size(x->dtype), x->dtype, n, values);
    else
        cvf_cpu_load_run(x->data, x->dtype, offset, x->col_stride, n, values);
}

/* The tile epilogue (unit column strides) of the tile whose element (0, 0) is (i0, j0) of C: its
 * rows of C, aux_out and aux_in, its bias and its bias-gradient partial; aux is the scratch row. */
static cvf_cpu_tile_epilogue tile_epilogue_at(const gemm_job *job, int64_t i0, int64_t j0, float *aux)
{
    const cvf_epilogue *ep = job->ep;
    cvf_cpu_tile_epilogue e = job->tile_epilogue;
    e.bias = ep->bias ? (const float *)(job->workspace + job->plan.off_bias) + j0 : NULL;
    e.c = element_at(job->c, i0, j0);
    e.aux_out = ep->aux_out ? element_at(ep->aux_out, i0, j0) : NULL;
    e.aux_in = ep->aux_in ? element_at(ep->aux_in, i0, j0) : NULL;
    if (ep->bias_grad)
        e.sums = (float *)(job->workspace + job->plan.off_partials) + (i0 / job->plan.mr) * job->plan.n + j0;
    e.scratch = aux;
    return e;
}

/* e moved down by `rows` rows (its C, aux_out and aux_in rows; the bias and the tile's partial stay). */
static cvf_cpu_tile_epilogue tile_epilogue_rows_down(cvf_cpu_tile_epilogue e, int64_t rows)
{
    e.c = (char *)e.c + rows * e.c_ld * e.c_size;
    if (e.aux_out)
        e.aux_out = (char *)e.aux_out + rows * e.aux_out_ld * e.aux_out_size;
    if (e.aux_in)
        e.aux_in = (const char *)e.aux_in + rows * e.aux_in_ld * e.aux_in_size;
    return e;
}

/*
 * The vector side for m finished rows of a tile at (i0, j0) of C, rows ldt floats apart, while they
 * are in L1: bias, aux_out, activation (GELU' with the matching aux_in rows), store, and the tile's
 * bias-gradient partial sums (continued from the tile's earlier rows when more_rows: a tile may be
 * finished in pieces of rows, in order, with the same sums as in one piece). aux has room for an
 * MR_MAX x NR_MAX tile. When the rows are dense (ldt == n) the activation runs once over all of them.
 */
static void finish_rows(const gemm_job *job, float *tile, int64_t ldt, int64_t i0, int64_t m, int64_t j0, int64_t n,
                        float *aux, bool more_rows)
{
    const cvf_epilogue *ep = job->ep;
    const cvf_cpu_vec_ops *vec = job->vec;
    if (job->unit_columns) { /* the common layouts: the whole tile in one call of the level's code */
        cvf_cpu_tile_epilogue e = tile_epilogue_at(job, i0, j0, aux);
        e.sums_continue = more_rows;
        vec->finish_tile(&e, tile, ldt, m, n);
        return;
    }
    if (ep->bias) {
        const float *bias = (const float *)(job->workspace + job->plan.off_bias) + j0;
        for (int64_t r = 0; r < m; r++)
            vec->add(tile + r * ldt, bias, n);
    }
    if (ep->aux_out)
        for (int64_t r = 0; r < m; r++)
            store_row(vec, ep->aux_out, i0 + r, j0, n, tile + r * ldt);
    if (ep->activation != CVF_ACTIVATION_NONE) {
        int64_t lda = ldt == n ? n : CVF_CPU_NR_MAX; /* aux rows: dense like the tile, or NR_MAX apart */
        if (ep->aux_in)
            for (int64_t r = 0; r < m; r++)
                load_row(vec, ep->aux_in, i0 + r, j0, n, aux + r * lda);
        if (ldt == n) {
            vec->activate(ep->activation, tile, aux, m * n);
        } else {
            for (int64_t r = 0; r < m; r++)
                vec->activate(ep->activation, tile + r * ldt, aux + r * lda, n);
        }
    }
    for (int64_t r = 0; r < m; r++)
        store_row(vec, job->c, i0 + r, j0, n, tile + r * ldt);
    if (ep->bias_grad) { /* rows summed in order into this MR-row tile's partial */
        float *partial = (float *)(job->workspace + job->plan.off_partials) + (i0 / job->plan.mr) * job->plan.n + j0;
        if (!more_rows)
            memcpy(partial, tile, sizeof(float) * (size_t)n);
        for (int64_t r = more_rows ? 0 : 1; r < m; r++)
            vec->accumulate(partial, tile + r * ldt, n);
    }
}

/* finish_rows for a whole m x n tile at (i0, j0). */
static void finish_tile(const gemm_job *job, float *tile, int64_t ldt, int64_t i0, int64_t m, int64_t j0, int64_t n,
                        float *aux)
{
    finish_rows(job, tile, ldt, i0, m, j0, n, aux, false);
}

/* Requests every cache line of the m rows of x at (i0 .. i0 + m, j0 .. j0 + n), for writing or
 * for reading: all of them (the wide tiles' rows of 64 values span four or five lines; asking for
 * the first and the last alone left the middle ones to a miss each). prefetch_tile_rows asks for
 * the same lines from a tile epilogue; routing prefetch_epilogue through it measured 5% slower on
 * the AMX GELU' GEMM (it is then no longer overlap_part's alone, and no longer inlined there). */
static inline void prefetch_rows(const cvf_matrix *x, int64_t i0, int64_t m, int64_t j0, int64_t n, int write)
{
    int64_t size = (int64_t)cvf_dtype_size(x->dtype);
    int64_t span = (n - 1) * x->col_stride * size; /* bytes from the first to the last element of a row */
    for (int64_t r = 0; r < m; r++) {
        const char *first = element_at(x, i0 + r, j0), *last = first + span;
        const char *line = (const char *)((uintptr_t)first & ~(uintptr_t)63);
        for (; line <= last; line += 64) {
            if (write)
                __builtin_prefetch(line, 1, 3);
            else
                __builtin_prefetch(line, 0, 3);
        }
    }
    __asm__ __volatile__(""); /* keeps the prefetches: see prefetch_tile_rows */
}

/* Asks for the lines the epilogue of the m x n tile at (i0, j0) will touch in memory (C and
 * aux_out written, aux_in read) before the kernel computes it, so that they arrive during the
 * kernel instead of stalling the epilogue: the MLP backward's GELU' GEMM read fc1_output and
 * wrote grad_fc1_output a miss per tile row (its epilogue took longer than its product). */
static void prefetch_epilogue(const gemm_job *job, int64_t i0, int64_t m, int64_t j0, int64_t n)
{
    const cvf_epilogue *ep = job->ep;
    if (!job->unit_columns) /* strided rows: a line per element, not worth asking for */
        return;
    prefetch_rows(job->c, i0, m, j0, n, 1);
    if (ep->aux_in)
        prefetch_rows(ep->aux_in, i0, m, j0, n, 0);
    if (ep->aux_out)
        prefetch_rows(ep->aux_out, i0, m, j0, n, 1);
}

/* Fills the parts of the tile epilogue that are the same for every tile, and whether the
 * one-call path applies (unit column strides). */
static void prepare_tile_epilogue(gemm_job *job)
{
    const cvf_epilogue *ep = job->ep;
    cvf_cpu_tile_epilogue *e = &job->tile_epilogue;
    memset(e, 0, sizeof *e);
    e->activation = ep->activation;
    e->c_dtype = job->c->dtype;
    e->c_ld = job->c->row_stride;
    e->c_size = (int64_t)cvf_dtype_size(job->c->dtype);
    job->unit_columns = job->c->col_stride == 1 || job->c->cols == 1;
    if (ep->aux_out) {
        e->aux_out_dtype = ep->aux_out->dtype;
        e->aux_out_ld = ep->aux_out->row_stride;
        e->aux_out_size = (int64_t)cvf_dtype_size(ep->aux_out->dtype);
        job->unit_columns = job->unit_columns && (ep->aux_out->col_stride == 1 || ep->aux_out->cols == 1);
    }
    if (ep->aux_in) {
        e->aux_in_dtype = ep->aux_in->dtype;
        e->aux_in_ld = ep->aux_in->row_stride;
        e->aux_in_size = (int64_t)cvf_dtype_size(ep->aux_in->dtype);
        job->unit_columns = job->unit_columns && (ep->aux_in->col_stride == 1 || ep->aux_in->cols == 1);
    }
    /* bias and ReLU on the kernel's registers, stored by the kernel: for one-pass products with
     * nothing else to do (MatMul + ReLU, a plain GEMM) */
    job->fused_store = job->plan.kernel->run_fused && !job->plan.multi_pass && job->finish && job->unit_columns &&
                       (ep->activation == CVF_ACTIVATION_NONE || ep->activation == CVF_ACTIVATION_RELU) &&
                       !ep->aux_out && !ep->aux_in && !ep->bias_grad;
}

/* The rows [*i0, *i0 + *mc) of MC block `block`: the MR-row panels of M shared out evenly, so
 * that blocks differ by one panel at most. */
static void block_rows(const gemm_plan *plan, int64_t block, int64_t *i0, int64_t *mc)
{
    int64_t panels = ceil_div(plan->m, plan->mr);
    *i0 = panels * block / plan->ic_blocks * plan->mr;
    *mc = min64(panels * (block + 1) / plan->ic_blocks * plan->mr, plan->m) - *i0;
}

/* The one-pass products whose epilogue runs in the vector code (everything but the fused store):
 * for each MR-row panel, up to NR_MAX columns (several NR panels) are computed side by side into
 * the tile and finished in one call, so the epilogue's per-row work (a load of aux_in, the
 * activation, a store, each a call) is paid once per NR_MAX columns instead of once per NR. For
 * kernels with NR <= NR_MAX / 4 only: with AVX2's NR = 16 the MLP backward gained ~1.5%; with
 * AVX-512's 32 (groups of 2 panels of 96 KB at K = 768) it lost ~4%. */
static void compute_wide_tiles(const gemm_job *job, const gemm_pass *pass, int64_t i0, int64_t mc, int64_t jr_first,
                               int64_t jr_last, const char *packed_a, float *tile, float *aux)
{
    const gemm_plan *plan = &job->plan;
    size_t a_panel = (size_t)(panel_elements(plan, pass->kc, plan->mr) * plan->elt);
    size_t b_panel = (size_t)(panel_elements(plan, pass->kc, plan->nr) * plan->elt);
    int64_t group = CVF_CPU_NR_MAX / plan->nr * plan->nr; /* columns finished together */
    for (int64_t jg = jr_first; jg < jr_last; jg += group) {
        int64_t width = min64(group, jr_last - jg);
        for (int64_t ir = 0; ir < mc; ir += plan->mr) {
            int64_t m = min64(plan->mr, mc - ir);
            const char *a = packed_a + (size_t)(ir / plan->mr) * a_panel;
            prefetch_epilogue(job, i0 + ir, m, pass->j0 + jg, width);
            kernel_fp_mode mode = kernels_begin(job);
            for (int64_t jr = jg; jr < jg + width; jr += plan->nr) {
                const char *b = pass->packed_b + (size_t)(jr / plan->nr) * b_panel;
                plan->kernel->run(pass->kc, a, b, tile + (jr - jg), width, m, min64(plan->nr, jg + width - jr), 0);
            }
            kernels_end(job, mode);
            finish_tile(job, tile, width, i0 + ir, m, pass->j0 + jg, width, aux);
        }
    }
}

/* The 32-deep blocks of an overlapped kernel call per part of its side work (a part: a row or more
 * of the previous tile's epilogue): the MLP backward's GELU' GEMM (2048 x 3072 x 768, one thread)
 * took 22.6 ms with a part per block, 22.5 with one per 2 blocks, 25.2 per 4, 27.0 not overlapped
 * (PERF.md, issue 15). */
#define BLOCKS_PER_SIDE_PART 2

/* The side work of one kernel call in compute_overlapped: the epilogue of the tile before (if
 * any) and the prefetch of what the epilogue of the tile being computed will touch. */
typedef struct overlap_work {
    const gemm_job *job;
    float *tile, *aux;              /* the finished tile (NULL: none), rows ldt floats apart */
    int64_t ldt, i0, m, j0, n;      /* its place in C */
    cvf_cpu_tile_epilogue epilogue; /* its tile epilogue, made once (unit column strides) */
    cvf_cpu_tile_epilogue next;     /* the same for the tile being computed, */
    int64_t next_m, next_n;         /* m x n */
} overlap_work;

/* Asks for the lines of rows [r0, r1) of n columns that the tile epilogue e will touch (C and
 * aux_out written, aux_in read), as prefetch_epilogue does, from e's row pointers. The empty
 * volatile asm keeps the function: gcc counts prefetches as no effect at all, so a function of
 * prefetches alone is "const" to it and its calls were deleted (the GELU' GEMM ran 2x slower). */
static void prefetch_tile_rows(const cvf_cpu_tile_epilogue *e, int64_t r0, int64_t r1, int64_t n)
{
    for (int64_t r = r0; r < r1; r++) {
        const char *c = (const char *)e->c + r * e->c_ld * e->c_size;
        for (int64_t byte = -(int64_t)((uintptr_t)c & 63); byte < n * e->c_size; byte += 64)
            __builtin_prefetch(c + byte, 1, 3);
        const char *in = e->aux_in ? (const char *)e->aux_in + r * e->aux_in_ld * e->aux_in_size : NULL;
        for (int64_t byte = in ? -(int64_t)((uintptr_t)in & 63) : 0; in && byte < n * e->aux_in_size; byte += 64)
            __builtin_prefetch(in + byte, 0, 3);
        const char *out = e->aux_out ? (const char *)e->aux_out + r * e->aux_out_ld * e->aux_out_size : NULL;
        for (int64_t byte = out ? -(int64_t)((uintptr_t)out & 63) : 0; out && byte < n * e->aux_out_size; byte += 64)
            __builtin_prefetch(out + byte, 1, 3);
    }
    __asm__ __volatile__("");
}

/* Side work part `part` of `parts`: the epilogue lines of the same share of the computed tile's
 * rows asked for, then the same share of the finished tile's rows finished. */
static void overlap_part(void *arg, int64_t part, int64_t parts)
{
    const overlap_work *w = arg;
    int64_t p0 = w->next_m * part / parts, p1 = w->next_m * (part + 1) / parts;
    if (w->job->unit_columns) /* (strided rows: a line per element, not asked for, as in prefetch_epilogue) */
        prefetch_tile_rows(&w->next, p0, p1, w->next_n);
    if (!w->tile)
        return;
    int64_t r0 = w->m * part / parts, r1 = w->m * (part + 1) / parts;
    if (r0 >= r1)
        return;
    if (!w->job->unit_columns) {
        finish_rows(w->job, w->tile + r0 * w->ldt, w->ldt, w->i0 + r0, r1 - r0, w->j0, w->n, w->aux, r0 > 0);
        return;
    }
    /* finish_rows' call, its tile epilogue set up once per tile: calling finish_rows here (which sets
     * it up per part) made the AMX GELU' GEMM 5-10% slower (22.0 -> 23.5-24 ms, one thread) */
    cvf_cpu_tile_epilogue e = tile_epilogue_rows_down(w->epilogue, r0);
    e.sums_continue = r0 > 0;
    w->job->vec->finish_tile(&e, w->tile + r0 * w->ldt, w->ldt, r1 - r0, w->n);
}

/* Whether a pass's tiles go through compute_overlapped: a kernel with run_overlapped, tiles that the
 * epilogue finishes (one pass, or the last of several into the fp32 block) and room for two tiles in
 * the tile buffer. */
static bool overlaps_epilogue(const gemm_job *job, const gemm_pass *pass)
{
    const gemm_plan *plan = &job->plan;
    return plan->kernel->run_overlapped && !job->fused_store && !plan->direct_c &&
           (!plan->multi_pass || (pass->last && job->finish)) &&
           2 * plan->mr * plan->nr <= CVF_CPU_MR_MAX * CVF_CPU_NR_MAX;
}

/*
 * The tiles of a compute share with the epilogue of each tile run during the next tile's kernel
 * call, in pieces of rows between its tile operations (run_overlapped): the AMX unit computes the
 * next tile while the vector units finish the last one, instead of each waiting for the other. One-pass
 * tiles alternate between the two halves of the tile buffer (the kernel writes one while the
 * epilogue reads the other); tiles of the fp32 block stay where they are. The last tile is finished
 * after its call. Each tile's epilogue is the same arithmetic as finish_tile's, rows in order.
 */
static void compute_overlapped(const gemm_job *job, const gemm_pass *pass, int64_t i0, int64_t mc, int64_t jr_first,
                               int64_t jr_last, const char *packed_a, float *tiles, float *aux)
{
    const gemm_plan *plan = &job->plan;
    const cvf_cpu_kernel *kernel = plan->kernel;
    size_t a_panel = (size_t)(panel_elements(plan, pass->kc, plan->mr) * plan->elt);
    size_t b_panel = (size_t)(panel_elements(plan, pass->kc, plan->nr) * plan->elt);
    int64_t blocks = cvf_cpu_pack_depth(kernel->format, pass->kc) / CVF_CPU_TILE_DEPTH; /* the kernel's K steps */
    int64_t parts = min64(plan->mr, max64(blocks / BLOCKS_PER_SIDE_PART, 1));
    overlap_work work;
    memset(&work, 0, sizeof work);
    work.job = job, work.aux = aux;
    int64_t count = 0;
    for (int64_t jr = jr_first; jr < jr_last; jr += plan->nr) {
        int64_t n = min64(plan->nr, pass->nc - jr);
        const char *b = pass->packed_b + (size_t)(jr / plan->nr) * b_panel;
        for (int64_t ir = 0; ir < mc; ir += plan->mr, count++) {
            int64_t m = min64(plan->mr, mc - ir);
            const char *a = packed_a + (size_t)(ir / plan->mr) * a_panel;
            float *out = tiles + (count % 2) * plan->mr * plan->nr;
            int64_t ld = n;
            if (plan->multi_pass) {
                out = job->acc + (i0 + ir) * plan->acc_ld + jr;
                ld = plan->acc_ld;
            }
            if (job->unit_columns)
                work.next = tile_epilogue_at(job, i0 + ir, pass->j0 + jr, aux);
            work.next_m = m, work.next_n = n;
            cvf_cpu_side_work side = {overlap_part, &work, parts};
            kernel->run_overlapped(pass->kc, a, b, out, ld, m, n, !pass->first, &side);
            work.tile = out, work.ldt = ld, work.i0 = i0 + ir, work.m = m, work.j0 = pass->j0 + jr, work.n = n;
            work.epilogue = work.next;
        }
    }
    if (work.tile)
        finish_tile(job, work.tile, work.ldt, work.i0, work.m, work.j0, work.n, aux);
}

/* Compute share `task` of a pass: one MC block of rows against one chunk of the B block's panels. */
static void compute_share_kernels(const gemm_job *job, const gemm_pass *pass, int64_t task, int32_t thread)
{
    const gemm_plan *plan = &job->plan;
    const cvf_cpu_kernel *kernel = plan->kernel;
    int64_t block = task / plan->jr_chunks, chunk = task % plan->jr_chunks;
    int64_t i0, mc;
    block_rows(plan, block, &i0, &mc);
    int64_t panels = ceil_div(pass->nc, plan->nr);
    int64_t jr_first = panels * chunk / plan->jr_chunks * plan->nr;
    int64_t jr_last = min64(panels * (chunk + 1) / plan->jr_chunks * plan->nr, pass->nc);
    if (mc <= 0 || jr_first >= jr_last)
        return;

    char *scratch = job->workspace + plan->off_threads + plan->thread_stride * (size_t)thread;
    thread_layout layout = thread_scratch(plan);
    char *packed_a = scratch + layout.a;
    float *tile = (float *)(scratch + layout.tile), *aux = (float *)(scratch + layout.aux);
    if (kernel->format == CVF_CPU_PACK_BF16_TILES)
        pack_a_tiles(plan, job->a, i0, mc, pass->p0, pass->kc, (uint16_t *)packed_a);
    else if (kernel->format == CVF_CPU_PACK_BF16)
        pack_a_bf16(plan, job->a, i0, mc, pass->p0, pass->kc, (uint16_t *)packed_a);
    else
        pack_a_f32(plan, job->a, i0, mc, pass->p0, pass->kc, (float *)packed_a, (float *)(scratch + layout.run));

    if (!plan->multi_pass && !job->fused_store && plan->nr * 4 <= CVF_CPU_NR_MAX) {
        compute_wide_tiles(job, pass, i0, mc, jr_first, jr_last, packed_a, tile, aux);
        return;
    }
    if (overlaps_epilogue(job, pass)) {
        compute_overlapped(job, pass, i0, mc, jr_first, jr_last, packed_a, tile, aux);
        return;
    }
    const char *packed_b = pass->packed_b;
    float *acc = job->acc;
    size_t a_panel = (size_t)(panel_elements(plan, pass->kc, plan->mr) * plan->elt);
    size_t b_panel = (size_t)(panel_elements(plan, pass->kc, plan->nr) * plan->elt);
    /* the next B micro-panel is asked for into L2 a slice per kernel call, so that the first call
     * on it does not wait for the L3 (the B block is larger than L2) */
    int64_t calls = ceil_div(mc, plan->mr), lines = (int64_t)b_panel / 64, per_call = ceil_div(lines, calls);
    /* (not the AMX kernel's deep panels, which stream from L2 by design: hundreds of prefetches per
     * call, as much time as they saved) */
    for (int64_t jr = jr_first; jr < jr_last; jr += plan->nr) {
        int64_t n = min64(plan->nr, pass->nc - jr);
        const char *b = packed_b + (size_t)(jr / plan->nr) * b_panel;
        const char *next_b = jr + plan->nr < jr_last ? b + b_panel : NULL;
        for (int64_t ir = 0; ir < mc; ir += plan->mr) {
            int64_t m = min64(plan->mr, mc - ir);
            const char *a = packed_a + (size_t)(ir / plan->mr) * a_panel;
            if (next_b && kernel->format != CVF_CPU_PACK_BF16_TILES)
                for (int64_t l = ir / plan->mr * per_call, end = min64(l + per_call, lines); l < end; l++)
                    __builtin_prefetch(next_b + l * 64, 0, 2);
            if (job->fused_store) {
                const float *bias = job->ep->bias ? (const float *)(job->workspace + plan->off_bias) : NULL;
                cvf_cpu_fused_store out = {element_at(job->c, i0 + ir, pass->j0 + jr), job->c->row_stride,
                                           job->c->dtype, bias ? bias + pass->j0 + jr : NULL,
                                           job->ep->activation == CVF_ACTIVATION_RELU};
                kernel_fp_mode mode = kernels_begin(job);
                kernel->run_fused(pass->kc, a, b, &out, m, n);
                kernels_end(job, mode);
                continue;
            }
            if (!plan->multi_pass) {
                prefetch_epilogue(job, i0 + ir, m, pass->j0 + jr, n);
                kernel_fp_mode mode = kernels_begin(job);
                kernel->run(pass->kc, a, b, tile, n, m, n, 0); /* a dense m x n tile */
                kernels_end(job, mode);
                finish_tile(job, tile, n, i0 + ir, m, pass->j0 + jr, n, aux);
                continue;
            }
            if (plan->direct_c) {
                kernel_fp_mode mode = kernels_begin(job);
                kernel->run(pass->kc, a, b, element_at(job->c, i0 + ir, pass->j0 + jr), job->c->row_stride, m, n,
                            !pass->first);
                kernels_end(job, mode);
                continue;
            }
            float *block_tile = acc + (i0 + ir) * plan->acc_ld + jr;
            if (pass->last && job->finish)
                prefetch_epilogue(job, i0 + ir, m, pass->j0 + jr, n);
            kernel_fp_mode mode = kernels_begin(job);
            kernel->run(pass->kc, a, b, block_tile, plan->acc_ld, m, n, !pass->first);
            kernels_end(job, mode);
            if (pass->last && job->finish)
                finish_tile(job, block_tile, plan->acc_ld, i0 + ir, m, pass->j0 + jr, n, aux);
        }
    }
}

/* compute_share_kernels between the kernel's begin and end hooks (AMX: the tile configuration,
 * about 200 cycles, once per share rather than per kernel call). */
static void compute_share(const gemm_job *job, const gemm_pass *pass, int64_t task, int32_t thread)
{
    const cvf_cpu_kernel *kernel = job->plan.kernel;
    if (kernel->begin)
        kernel->begin();
    compute_share_kernels(job, pass, task, thread);
    if (kernel->end)
        kernel->end();
}

/* Task of one pool run: the first pack_tasks tasks pack the next pass's B block, the others
 * compute the current pass (their B block was packed by the previous run). */
static void pass_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    if (task < job->pack_tasks)
        pack_b_share(job, &job->pack, task, thread);
    else
        compute_share(job, &job->compute, task - job->pack_tasks, thread);
}

/* The pass after `pass` over [p_begin, p_end) of K (passes walk K within a column block, then
 * the column blocks); false after the last. */
static bool next_pass(const gemm_job *job, const gemm_pass *pass, int64_t p_begin, int64_t p_end, gemm_pass *next)
{
    const gemm_plan *plan = &job->plan;
    *next = *pass;
    if (pass->last) {
        next->j0 = pass->j0 + plan->nc;
        if (next->j0 >= plan->n)
            return false;
        next->p0 = p_begin;
    } else {
        next->p0 = pass->p0 + plan->kc;
    }
    next->nc = min64(plan->nc, plan->n - next->j0);
    next->kc = min64(plan->kc, p_end - next->p0); /* K == 0: one pass of kc 0 (zero panels) */
    next->first = next->p0 == p_begin;
    next->last = next->p0 + plan->kc >= p_end;
    return true;
}

/*
 * The five loops over [p_begin, p_end) of K. With the pool: each pool run computes one pass while
 * it packs the next pass's B block into the other buffer, so there is one barrier per pass and the
 * packing overlaps the compute. Without (pool == NULL): everything on the calling task's thread.
 */
static void run_loops(cvf_threadpool *pool, gemm_job *job, int64_t p_begin, int64_t p_end, int32_t thread)
{
    const gemm_plan *plan = &job->plan;
    int64_t tasks = plan->ic_blocks * plan->jr_chunks;
    gemm_pass pass = {0,    min64(plan->nc, plan->n),    p_begin,         min64(plan->kc, p_end - p_begin),
                      true, p_begin + plan->kc >= p_end, job->packed_b[0]};
    if (!pool) {
        for (bool more = true; more;) {
            pack_b_share(job, &pass, 0, thread);
            for (int64_t task = 0; task < tasks; task++)
                compute_share(job, &pass, task, thread);
            gemm_pass next;
            more = next_pass(job, &pass, p_begin, p_end, &next);
            pass = next;
        }
        return;
    }
    job->pack = pass;
    job->pack_tasks = job->packers;
    cvf_threadpool_run_on(pool, plan->threads, job->pack_tasks, pass_task, job); /* the first B block */
    for (int64_t index = 0;; index++) {
        job->compute = pass;
        gemm_pass next;
        bool more = next_pass(job, &pass, p_begin, p_end, &next);
        if (more) {
            next.packed_b = job->packed_b[(index + 1) % 2];
            job->pack = pass = next;
        }
        job->pack_tasks = more ? job->packers : 0;
        cvf_threadpool_run_on(pool, plan->threads, job->pack_tasks + tasks, pass_task, job);
        if (!more)
            break;
    }
}

/* The dot, row and stream tiles' fp32 A: the copy of a's rows that copy_dot_a makes where the plan
 * says so (dot_copy_stride), else a itself; *ld gets its row stride. */
static const float *dot_a(const gemm_job *job, int64_t *ld)
{
    const gemm_plan *plan = &job->plan;
    if (plan->dot_a_ld == 0) {
        *ld = job->a->row_stride;
        return job->a->data;
    }
    *ld = plan->dot_a_ld;
    return (const float *)(job->workspace + plan->off_dot_a);
}

/* Copies a's rows for the tiles (converted from 16 bits, or moved apart) where the plan says so. */
static void copy_dot_a(const gemm_job *job)
{
    const gemm_plan *plan = &job->plan;
    const cvf_matrix *a = job->a;
    if (plan->dot_a_ld == 0)
        return;
    float *copy = (float *)(job->workspace + plan->off_dot_a);
    for (int64_t i = 0; i < plan->m; i++) /* the level's vector load: a copy for f32, else converted */
        cvf_cpu_load_run(a->data, a->dtype, i * a->row_stride, 1, plan->k, copy + i * plan->dot_a_ld);
}

/* The tiles' stride of B: B^T's column j is B's row j (col_stride apart); a row-major B's rows are
 * row_stride apart (any stride is valid for one row, and the tiles multiply it out: 0 then). */
static int64_t dot_b_stride(const gemm_plan *plan, const cvf_matrix *b)
{
    if (!plan->dot_rows)
        return b->col_stride;
    return plan->k > 1 ? b->row_stride : 0;
}

/* Task of a dot-tile product: dot_cols columns of C, all its rows, from A and B^T (dot tiles) or
 * a row-major B (row tiles) in place, each tile then finished by the epilogue. B's values for the
 * columns are read from memory once (the later row groups find them in L1/L2). */
static void dot_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    const cvf_matrix *b = job->b;
    int64_t j0 = task * plan->dot_cols, n = min64(plan->dot_cols, plan->n - j0);
    char *scratch = job->workspace + plan->off_threads + plan->thread_stride * (size_t)thread;
    thread_layout layout = thread_scratch(plan);
    float *tile = (float *)(scratch + layout.tile), *aux = (float *)(scratch + layout.aux);
    int64_t ldb = dot_b_stride(plan, b);
    const char *columns = (const char *)b->data + j0 * (plan->dot_rows ? 1 : ldb) * (int64_t)cvf_dtype_size(b->dtype);
    cvf_cpu_dot_fn tiles = plan->dot_rows ? plan->kernel->rows : plan->kernel->dot;
    /* all rows at once (at most DOT_MAX_ROWS x NR: within the MR_MAX x NR_MAX tile), so that B's
     * columns are read once; finished an MR-row tile at a time (the bias-gradient partials' rows) */
    int64_t lda;
    const float *a = dot_a(job, &lda);
    kernel_fp_mode mode = kernels_begin(job);
    tiles(plan->k, a, lda, plan->m, columns, b->dtype, ldb, n, tile, n);
    kernels_end(job, mode);
    for (int64_t i0 = 0; i0 < plan->m; i0 += plan->mr)
        finish_tile(job, tile + i0 * n, n, i0, min64(plan->mr, plan->m - i0), j0, n, aux);
}

/* Task of a stream product: K slice task / stream_chunks of the chunk's columns, into the slice's
 * m x n sums (no epilogue yet). */
static void stream_task(void *arg, int64_t task, int32_t thread)
{
    (void)thread;
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    const cvf_matrix *b = job->b;
    int64_t slice = task / plan->stream_chunks, chunk = task % plan->stream_chunks;
    int64_t p0 = plan->k * slice / plan->stream_slices, p1 = plan->k * (slice + 1) / plan->stream_slices;
    int64_t j0 = chunk * plan->stream_cols, n = min64(plan->stream_cols, plan->n - j0);
    int64_t size = (int64_t)cvf_dtype_size(b->dtype);
    int64_t ldb = dot_b_stride(plan, b), lda;
    const char *rows = (const char *)b->data + (p0 * ldb + j0) * size;
    const float *a = dot_a(job, &lda);
    float *sums = (float *)(job->workspace + plan->off_stream) + slice * plan->m * plan->n + j0;
    kernel_fp_mode mode = kernels_begin(job);
    plan->kernel->stream(p1 - p0, a + p0, lda, plan->m, rows, b->dtype, ldb, n, sums, plan->n);
    kernels_end(job, mode);
}

/* Task after the stream tasks: NR_MAX columns of the slices' sums added in slice order, then
 * finished by the epilogue. */
static void stream_finish_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    int64_t j0 = task * CVF_CPU_NR_MAX, n = min64(CVF_CPU_NR_MAX, plan->n - j0);
    float *first = (float *)(job->workspace + plan->off_stream) + j0;
    for (int64_t s = 1; s < plan->stream_slices; s++)
        for (int64_t r = 0; r < plan->m; r++)
            job->vec->add(first + r * plan->n, first + (s * plan->m + r) * plan->n, n);
    char *scratch = job->workspace + plan->off_threads + plan->thread_stride * (size_t)thread;
    finish_tile(job, first, plan->n, 0, plan->m, j0, n, (float *)(scratch + thread_scratch(plan).aux));
}

/* Task of a direct product: one MR-row panel of C against all of B, both read in place (the
 * kernel reads an edge tile's own rows and columns only). */
static void direct_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    const cvf_matrix *a = job->a, *b = job->b;
    int64_t i0 = task * plan->mr, m = min64(plan->mr, plan->m - i0), k = plan->k;
    char *scratch = job->workspace + plan->off_threads + plan->thread_stride * (size_t)thread;
    thread_layout layout = thread_scratch(plan);
    float *tile = (float *)(scratch + layout.tile), *aux = (float *)(scratch + layout.aux);
    const float *rows = (const float *)a->data + i0 * a->row_stride;
    const int64_t lda = a->row_stride, ldb = b->row_stride;
    const float *bias = job->ep->bias ? (const float *)(job->workspace + plan->off_bias) : NULL;
    for (int64_t j0 = 0; j0 < plan->n; j0 += plan->nr) {
        int64_t n = min64(plan->nr, plan->n - j0);
        const float *columns = (const float *)b->data + j0;
        kernel_fp_mode mode = kernels_begin(job);
        if (job->fused_store) {
            cvf_cpu_fused_store out = {element_at(job->c, i0, j0), job->c->row_stride, job->c->dtype,
                                       bias ? bias + j0 : NULL, job->ep->activation == CVF_ACTIVATION_RELU};
            plan->kernel->direct(k, rows, lda, columns, ldb, &out, m, n);
            kernels_end(job, mode);
        } else {
            cvf_cpu_fused_store out = {tile, n, CVF_F32, NULL, 0};
            plan->kernel->direct(k, rows, lda, columns, ldb, &out, m, n);
            kernels_end(job, mode);
            finish_tile(job, tile, n, i0, m, j0, n, aux);
        }
    }
}

/* True when the rows x cols fp32 values at x (rows ld floats apart) hold a subnormal. */
static bool has_subnormal(const float *x, int64_t rows, int64_t cols, int64_t ld)
{
    uint32_t found = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) { /* exponent 0, mantissa not 0 */
            uint32_t bits;
            memcpy(&bits, x + i * ld + j, sizeof bits);
            found |= (uint32_t)((bits & 0x7F800000u) == 0 && (bits & 0x007FFFFFu) != 0);
        }
    return found != 0;
}

/* All of K on the pool. */
static void run_blocks(cvf_context *ctx, gemm_job *job)
{
    run_loops(ctx->pool, job, 0, job->plan.k, 0);
}

/* Task: one K slice, computed into its own fp32 block on one thread (no epilogue yet). */
static void slice_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    gemm_job slice = *job;
    int64_t unit = cvf_cpu_pack_depth(plan->kernel->format, 1); /* pairs, tiles: whole units per slice */
    int64_t units = ceil_div(plan->k, unit);
    int64_t p_begin = units * task / plan->splits * unit,
            p_end = min64(units * (task + 1) / plan->splits * unit, plan->k);
    slice.packed_b[0] = slice.packed_b[1] = job->workspace + plan->off_b + plan->b_stride * (size_t)task;
    slice.acc = (float *)(job->workspace + plan->off_acc + plan->acc_stride * (size_t)task);
    slice.finish = false;
    slice.packers = 1;
    run_loops(NULL, &slice, p_begin, p_end, thread);
}

/* Task: one MR-row tile of the output: the K slices summed in slice order, then the epilogue. */
static void sum_slices_task(void *arg, int64_t task, int32_t thread)
{
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    int64_t i0 = task * plan->mr, m = min64(plan->mr, plan->m - i0);
    float *first = job->acc + i0 * plan->acc_ld;
    for (int64_t s = 1; s < plan->splits; s++) {
        const float *other = (const float *)((const char *)job->acc + plan->acc_stride * (size_t)s) + i0 * plan->acc_ld;
        for (int64_t r = 0; r < m; r++)
            job->vec->add(first + r * plan->acc_ld, other + r * plan->acc_ld, plan->n);
    }
    char *scratch = job->workspace + plan->off_threads + plan->thread_stride * (size_t)thread;
    float *aux = (float *)(scratch + thread_scratch(plan).aux);
    for (int64_t j0 = 0; j0 < plan->n; j0 += plan->nr)
        finish_tile(job, first + j0, plan->acc_ld, i0, m, j0, min64(plan->nr, plan->n - j0), aux);
}

/* Task: bias_grad[j] for the NR_MAX columns of chunk `task`: the MR-row tiles' partial sums added
 * in tile order, in double (each column's order is fixed, so the chunks may run on any thread;
 * on the caller's thread alone this pass was ~1% of the MLP's GELU' GEMM, the other thread idle). */
static void combine_task(void *arg, int64_t task, int32_t thread)
{
    (void)thread;
    const gemm_job *job = arg;
    const gemm_plan *plan = &job->plan;
    const float *partials = (const float *)(job->workspace + plan->off_partials);
    const cvf_vector *out = job->ep->bias_grad;
    int64_t j0 = task * CVF_CPU_NR_MAX, n = min64(CVF_CPU_NR_MAX, plan->n - j0);
    double sums[CVF_CPU_NR_MAX];
    for (int64_t j = 0; j < n; j++)
        sums[j] = 0.0;
    for (int64_t r = 0; r < plan->row_tiles; r++)
        for (int64_t j = 0; j < n; j++)
            sums[j] += partials[r * plan->n + j0 + j];
    float values[CVF_CPU_NR_MAX];
    for (int64_t j = 0; j < n; j++)
        values[j] = (float)sums[j];
    cvf_cpu_store_run(out->data, out->dtype, j0 * out->stride, out->stride, n, values);
}

/* bias_grad of an empty product (M == 0): zeros. */
static void zero_bias_grad(const cvf_vector *out)
{
    float zero = 0.0f;
    for (int64_t j = 0; j < out->length; j++)
        cvf_cpu_store_run(out->data, out->dtype, j * out->stride, 1, 1, &zero);
}

/* The path of a plan (cvf_cpu_path), the dot, row and stream tiles only when tiles (A was not
 * found to hold subnormals that would cost them assists). */
static cvf_cpu_path plan_path(const gemm_plan *plan, bool tiles)
{
    if (plan->direct)
        return CVF_CPU_PATH_DIRECT;
    if (tiles && plan->stream)
        return CVF_CPU_PATH_STREAM;
    if (tiles && plan->dot)
        return CVF_CPU_PATH_DOT;
    if (tiles && plan->dot_rows)
        return CVF_CPU_PATH_ROWS;
    return plan->splits > 1 ? CVF_CPU_PATH_SPLIT_K : CVF_CPU_PATH_BLOCKED;
}

cvf_cpu_plan_info cvf_cpu_plan_describe(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b,
                                        const cvf_matrix *c, const cvf_epilogue *ep)
{
    if (c->rows == 0 || c->cols == 0) /* cvf_cpu_matmul plans nothing */
        return (cvf_cpu_plan_info){.path = CVF_CPU_PATH_NONE, .splits = 1};
    gemm_plan plan;
    make_plan(&plan, ctx, a, b, c, ep);
    cvf_cpu_path path = plan_path(&plan, plan.dot || plan.dot_rows);
    cvf_cpu_plan_info info = {
        .path = path,
        .threads = plan.threads,
        .mr = plan.mr,
        .nr = plan.nr,
        .kc = plan.kc,
        .mc = plan.mc,
        .mc_max = plan.mc_max,
        .balance_mc = plan.balance_mc,
        .nc = plan.nc,
        .ic_blocks = plan.ic_blocks,
        .jr_chunks = plan.jr_chunks,
        .splits = path == CVF_CPU_PATH_SPLIT_K ? plan.splits : 1,
        .stream_slices = plan.stream_slices,
        .stream_chunks = plan.stream_chunks,
        .stream_cols = plan.stream_cols,
    };
    return info;
}

size_t cvf_cpu_matmul_workspace(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                                const cvf_epilogue *ep)
{
    if (c->rows == 0 || c->cols == 0)
        return 0;
    gemm_plan plan;
    make_plan(&plan, ctx, a, b, c, ep);
    return plan.total;
}

cvf_status cvf_cpu_matmul(cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c,
                          const cvf_epilogue *ep, void *workspace)
{
    if (c->rows == 0 || c->cols == 0) {
        if (ep->bias_grad)
            zero_bias_grad(ep->bias_grad);
        return CVF_STATUS_SUCCESS;
    }
    gemm_job job = {.a = a, .b = b, .c = c, .ep = ep, .workspace = workspace};
    make_plan(&job.plan, ctx, a, b, c, ep); /* in place: the plan is a few hundred bytes */
    const gemm_plan *plan = &job.plan;
    job.vec = plan->vec;
    job.packed_b[0] = job.workspace + plan->off_b; /* two buffers: B blocks of alternate passes */
    job.packed_b[1] = job.workspace + plan->off_b + plan->b_stride;
    job.acc = (float *)(job.workspace + plan->off_acc);
    job.finish = true;
    job.packers = plan->packers;
    prepare_tile_epilogue(&job);
    if (ep->bias)
        cvf_cpu_load_run(ep->bias->data, ep->bias->dtype, 0, ep->bias->stride, plan->n,
                         (float *)(job.workspace + plan->off_bias));
    /* the dot tiles multiply vectors of A along K: where subnormals are kept (plan.daz false), an
     * Intel core sends the whole FMA to a microcode assist for a subnormal in any of 8 lanes, so 1%
     * of subnormals in A (GELU outputs of very negative inputs) made them 7x slower, and the packed
     * kernel, which broadcasts A elements, meets 8x fewer assists. With DAZ, or on cores without
     * assists (plan.scan_a false), they cost nothing and A is not scanned (the scan costs under 1%
     * of the product). */
    bool tiles = plan->dot || plan->dot_rows;
    if (tiles) {
        int64_t ld;
        copy_dot_a(&job);
        const float *a32 = dot_a(&job, &ld);
        tiles = !plan->scan_a || !has_subnormal(a32, plan->m, plan->k, ld);
    }
    switch (plan_path(plan, tiles)) {
    case CVF_CPU_PATH_DIRECT:
        cvf_threadpool_run_on(ctx->pool, plan->threads, plan->row_tiles, direct_task, &job);
        break;
    case CVF_CPU_PATH_STREAM:
        cvf_threadpool_run_on(ctx->pool, plan->threads, plan->stream_slices * plan->stream_chunks, stream_task, &job);
        cvf_threadpool_run_on(ctx->pool, plan->threads, ceil_div(plan->n, CVF_CPU_NR_MAX), stream_finish_task, &job);
        break;
    case CVF_CPU_PATH_DOT:
    case CVF_CPU_PATH_ROWS:
        cvf_threadpool_run_on(ctx->pool, plan->threads, ceil_div(plan->n, plan->dot_cols), dot_task, &job);
        break;
    case CVF_CPU_PATH_SPLIT_K:
        cvf_threadpool_run_on(ctx->pool, plan->threads, plan->splits, slice_task, &job);
        cvf_threadpool_run_on(ctx->pool, plan->threads, plan->row_tiles, sum_slices_task, &job);
        break;
    case CVF_CPU_PATH_BLOCKED:
        run_blocks(ctx, &job);
        break;
    case CVF_CPU_PATH_NONE: /* returned above */
        break;
    }
    if (ep->bias_grad)
        cvf_threadpool_run_on(ctx->pool, plan->threads, ceil_div(plan->n, CVF_CPU_NR_MAX), combine_task, &job);
    return CVF_STATUS_SUCCESS;
}

/*
 * The CPU planner's choices (src/cpu/gemm.c, through cvf_cpu_plan_describe), at the level this CPU
 * runs and on pools of 1, 2, 3 and 16 threads: which path a product takes (direct, stream, dot, row
 * tiles, split K, blocked), and the rules of the blocked path that the op tests cannot see because
 * any blocking gives correct results:
 *   - whole rounds: MC blocks are a multiple of the threads (or one per MR panel);
 *   - balance: few MR panels per thread are cut into blocks x column chunks whose busiest thread
 *     has little more than its share of tiles, and of the splits that give it as few, the one
 *     whose tasks pack the fewest rows of A plus columns of B;
 *   - sums that do not depend on the threads: the stream tiles' and split K's slices are the same
 *     on every pool (the stream tiles' column chunks, which change no sum, fill the rounds).
 * Cache sizes come from this machine, so the checks are invariants, not fixed block sizes. With
 * CVF_CPU_BLOCKS set (forced blocks) the planner's rules are off and the test skips, except for
 * "0,MC,0" (only the MC blocks forced), whose plans it checks instead.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"
#include "cpu/cpu.h"
#include "cpu/isa.h"
#include "cpu/kernels/kernels.h"
#include "support.h"

#define POOLS 4
static const int32_t pool_threads[POOLS] = {1, 2, 3, 16};

static const char *path_name(cvf_cpu_path path)
{
    switch (path) {
    case CVF_CPU_PATH_DIRECT: return "direct";
    case CVF_CPU_PATH_STREAM: return "stream";
    case CVF_CPU_PATH_DOT: return "dot";
    case CVF_CPU_PATH_ROWS: return "rows";
    case CVF_CPU_PATH_SPLIT_K: return "split-k";
    case CVF_CPU_PATH_BLOCKED: return "blocked";
    case CVF_CPU_PATH_NONE: return "none";
    }
    return "?";
}

/* The plan of C (m x n, dtype) = A (m x k) @ B (k x n) on ctx; B transposed (a view of an n x k
 * row-major matrix) when b_transposed. Nothing is read: the views point at no data. */
static cvf_cpu_plan_info plan_of(const cvf_context *ctx, int64_t m, int64_t n, int64_t k, cvf_dtype dtype,
                                 bool b_transposed)
{
    static char dummy[64];
    cvf_matrix a = {dummy, dtype, m, k, k, 1};
    cvf_matrix b = b_transposed ? (cvf_matrix){dummy, dtype, k, n, 1, k} : (cvf_matrix){dummy, dtype, k, n, n, 1};
    cvf_matrix c = {dummy, dtype, m, n, n, 1};
    cvf_epilogue ep = {.activation = CVF_ACTIVATION_RELU};
    return cvf_cpu_plan_describe(ctx, &a, &b, &c, &ep);
}

static int64_t ceil_div(int64_t x, int64_t y)
{
    return (x + y - 1) / y;
}

/* The path a few rows take, from the level's kernel: the tiles it has, else the packed loops. */
static cvf_cpu_path expected_few_rows_path(const cvf_cpu_kernel *kernel, int64_t m, bool b_transposed)
{
    if (b_transposed)
        return kernel->dot ? CVF_CPU_PATH_DOT : CVF_CPU_PATH_BLOCKED;
    if (kernel->stream && m <= CVF_CPU_STREAM_MAX_ROWS)
        return CVF_CPU_PATH_STREAM;
    return kernel->rows ? CVF_CPU_PATH_ROWS : CVF_CPU_PATH_BLOCKED;
}

/* Rounds x columns of the stream tiles' tasks: the time of the busiest thread, in columns. */
static int64_t stream_cost(int64_t slices, int64_t chunks, int64_t cols, int32_t threads)
{
    return ceil_div(slices * chunks, threads) * cols;
}

/* The stream tiles' chunks cover n in whole lines of at most 1024 columns, cost no more than the
 * fewest chunks of 1024 would, and are those where they fill whole rounds. */
static bool stream_chunks_ok(const cvf_cpu_plan_info *info, int64_t n)
{
    int64_t fewest = ceil_div(n, 1024), cols = info->stream_cols, chunks = info->stream_chunks;
    int64_t widest = ceil_div(ceil_div(n, fewest), 64) * 64;
    bool covers = cols % 64 == 0 && cols <= 1024 && cols * chunks >= n && cols * (chunks - 1) < n;
    bool no_slower = stream_cost(info->stream_slices, chunks, cols, info->threads) <=
                     stream_cost(info->stream_slices, fewest, widest, info->threads);
    bool whole = (info->stream_slices * fewest) % info->threads != 0 || chunks == fewest;
    return covers && no_slower && whole;
}

/* Tokens through a weight (the MLP's inference shapes): the tiles, sums independent of threads. */
static void check_few_rows(cvf_context *const *pools)
{
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_BF16, CVF_F16};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        const cvf_cpu_kernel *kernel = cvf_cpu_kernel_for(cvf_cpu_isa_active(), dtypes[d], dtypes[d]);
        for (int64_t m = 1; m <= 6; m++) {
            for (int transposed = 0; transposed <= 1; transposed++) {
                cvf_cpu_path want = expected_few_rows_path(kernel, m, transposed);
                cvf_cpu_plan_info first = plan_of(pools[0], m, 3072, 768, dtypes[d], transposed);
                for (int p = 0; p < POOLS; p++) {
                    cvf_cpu_plan_info info = plan_of(pools[p], m, 3072, 768, dtypes[d], transposed);
                    CHECK(info.path == want, "%s, %lld x 3072 x 768, B %s, %d threads: path %s, expected %s",
                          kernel->name, (long long)m, transposed ? "transposed" : "row-major", pool_threads[p],
                          path_name(info.path), path_name(want));
                    if (want != CVF_CPU_PATH_STREAM)
                        continue;
                    /* K = 768: six slices of 128 rows; 3072 columns: chunks of at most 1024 in whole
                     * lines, no slower than three of 1024 (and those where 18 tasks fill whole rounds) */
                    CHECK(info.stream_slices == 6 && stream_chunks_ok(&info, 3072),
                          "%s, %lld rows, %d threads (%d used): %lld slices x %lld chunks of %lld columns",
                          kernel->name, (long long)m, pool_threads[p], info.threads, (long long)info.stream_slices,
                          (long long)info.stream_chunks, (long long)info.stream_cols);
                    CHECK(info.stream_slices == first.stream_slices,
                          "%s, %lld rows: %lld slices on %d threads, %lld on 1 (sums would differ)", kernel->name,
                          (long long)m, (long long)info.stream_slices, pool_threads[p],
                          (long long)first.stream_slices);
                }
            }
        }
        /* 1 x 5120 x 4096 on 16 threads: 8 slices x 5 chunks of 1024 are 40 tasks, 3 rounds with
         * the last half full; narrower chunks fill the rounds */
        if (kernel->stream && dtypes[d] == CVF_F32) {
            cvf_cpu_plan_info wide = plan_of(pools[POOLS - 1], 1, 5120, 4096, dtypes[d], false);
            CHECK(wide.path == CVF_CPU_PATH_STREAM && wide.threads == 16 && wide.stream_slices == 8 &&
                      stream_chunks_ok(&wide, 5120) &&
                      stream_cost(8, wide.stream_chunks, wide.stream_cols, 16) < stream_cost(8, 5, 1024, 16),
                  "%s, 1 x 5120 x 4096 on %d threads: %lld slices x %lld chunks of %lld columns", kernel->name,
                  wide.threads, (long long)wide.stream_slices, (long long)wide.stream_chunks,
                  (long long)wide.stream_cols);
        }
        /* widths that do not divide into lines of 64 (the last chunk shorter), on every pool; K =
         * 16411 (8 slices, as any K from 1024) keeps 2 x 100 x K above the direct kernel's 128^3,
         * which takes tiny f32 products before the stream tiles wherever K fits one pass */
        static const int64_t widths[] = {100, 1000, 1700, 2049, 5000};
        for (size_t w = 0; kernel->stream && w < sizeof widths / sizeof widths[0]; w++)
            for (int p = 0; p < POOLS; p++) {
                cvf_cpu_plan_info info = plan_of(pools[p], 2, widths[w], 16411, dtypes[d], false);
                CHECK(info.path == CVF_CPU_PATH_STREAM && stream_chunks_ok(&info, widths[w]),
                      "%s, 2 x %lld x 16411 on %d threads (%d used): path %s, %lld chunks of %lld columns",
                      kernel->name, (long long)widths[w], pool_threads[p], info.threads, path_name(info.path),
                      (long long)info.stream_chunks, (long long)info.stream_cols);
            }
        /* test_ops' case for chunks that differ with the thread count (its sums must not): 4 x 1025
         * x 2000 in 2 chunks on 1 and 2 threads, 3 on 3 */
        for (int p = 0; kernel->stream && p < 3; p++) {
            cvf_cpu_plan_info info = plan_of(pools[p], 4, 1025, 2000, dtypes[d], false);
            int64_t want = pool_threads[p] == 3 ? 3 : 2;
            CHECK(info.path == CVF_CPU_PATH_STREAM && info.stream_chunks == want,
                  "%s, 4 x 1025 x 2000 on %d threads: path %s, %lld chunks, test_ops expects %lld", kernel->name,
                  pool_threads[p], path_name(info.path), (long long)info.stream_chunks, (long long)want);
        }
        /* the slices' bounds: at least one, at most eight (32768 columns: too large a product for
         * the direct kernel, which takes tiny f32 ones before the stream tiles) */
        const cvf_cpu_plan_info shallow = plan_of(pools[1], 1, 32768, 100, dtypes[d], false);
        const cvf_cpu_plan_info deep = plan_of(pools[1], 1, 2048, 8192, dtypes[d], false);
        if (kernel->stream)
            CHECK(shallow.stream_slices == 1 && deep.stream_slices == 8,
                  "%s: K = 100 in %lld slices (expected 1), K = 8192 in %lld (expected 8)", kernel->name,
                  (long long)shallow.stream_slices, (long long)deep.stream_slices);
    }
}

/* An empty output plans nothing (cvf_cpu_matmul returns before planning). */
static void check_empty(cvf_context *const *pools)
{
    for (int p = 0; p < POOLS; p++) {
        cvf_cpu_plan_info no_cols = plan_of(pools[p], 3, 0, 768, CVF_F32, false);
        cvf_cpu_plan_info no_rows = plan_of(pools[p], 0, 3072, 768, CVF_F32, true);
        CHECK(no_cols.path == CVF_CPU_PATH_NONE && no_rows.path == CVF_CPU_PATH_NONE && no_cols.threads == 0,
              "empty outputs on %d threads: paths %s and %s", pool_threads[p], path_name(no_cols.path),
              path_name(no_rows.path));
    }
}

/* Tiny products run direct on one thread, where the level has the direct kernel. */
static void check_tiny(cvf_context *const *pools)
{
    const cvf_cpu_kernel *kernel = cvf_cpu_kernel_for(cvf_cpu_isa_active(), CVF_F32, CVF_F32);
    for (int p = 0; p < POOLS; p++) {
        for (int64_t size = 8; size <= 64; size *= 2) {
            cvf_cpu_plan_info info = plan_of(pools[p], size, size, size, CVF_F32, false);
            CHECK(info.threads == 1, "%lld^3 on a pool of %d: %d threads, expected 1", (long long)size,
                  pool_threads[p], info.threads);
            if (kernel->direct)
                CHECK(info.path == CVF_CPU_PATH_DIRECT, "%s, %lld^3: path %s, expected direct", kernel->name,
                      (long long)size, path_name(info.path));
        }
    }
}

/* Small outputs with a long K split K into the same slices on every pool. */
static void check_split_k(cvf_context *const *pools)
{
    cvf_cpu_plan_info first = plan_of(pools[0], 64, 128, 16384, CVF_F32, false);
    CHECK(first.path == CVF_CPU_PATH_SPLIT_K && first.splits > 1, "64 x 128 x 16384: path %s, %lld splits",
          path_name(first.path), (long long)first.splits);
    for (int p = 1; p < POOLS; p++) {
        cvf_cpu_plan_info info = plan_of(pools[p], 64, 128, 16384, CVF_F32, false);
        CHECK(info.path == first.path && info.splits == first.splits,
              "64 x 128 x 16384 on %d threads: %s in %lld slices, on 1 thread %s in %lld", pool_threads[p],
              path_name(info.path), (long long)info.splits, path_name(first.path), (long long)first.splits);
    }
}

/* Tiles of the busiest thread when the threads take blocks x chunks tasks in rounds. */
static int64_t busiest_tiles(const cvf_cpu_plan_info *info, int64_t m, int32_t threads)
{
    int64_t panels = ceil_div(m, info->mr), columns = ceil_div(info->nc, info->nr);
    return ceil_div(panels, info->ic_blocks) * ceil_div(columns, info->jr_chunks) *
           ceil_div(info->ic_blocks * info->jr_chunks, threads);
}

/* Large M: the blocks come in whole rounds of the threads. */
static void check_whole_rounds(cvf_context *const *pools)
{
    static const int64_t rows[] = {768, 1000, 2048, 3072, 4096, 8192, 12608};
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_BF16};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            for (int p = 1; p < POOLS; p++) {
                int64_t m = rows[r];
                cvf_cpu_plan_info info = plan_of(pools[p], m, 2048, 2048, dtypes[d], false);
                int64_t panels = ceil_div(m, info.mr);
                if (info.threads != pool_threads[p] || panels < 8 * info.threads)
                    continue; /* few panels: balanced instead (check_balance) */
                CHECK(info.path == CVF_CPU_PATH_BLOCKED && info.jr_chunks == 1,
                      "%lld x 2048 x 2048 (%s) on %d threads: path %s, %lld chunks", (long long)m,
                      cvf_dtype_name(dtypes[d]), info.threads, path_name(info.path), (long long)info.jr_chunks);
                CHECK(info.ic_blocks % info.threads == 0 || info.ic_blocks == panels,
                      "%lld x 2048 x 2048 (%s) on %d threads: %lld MC blocks, not whole rounds", (long long)m,
                      cvf_dtype_name(dtypes[d]), info.threads, (long long)info.ic_blocks);
                /* the panels are shared out evenly: mc is the largest block's rows */
                CHECK(info.ic_blocks <= panels && info.mc == ceil_div(panels, info.ic_blocks) * info.mr,
                      "%lld rows (%lld panels): %lld blocks of up to %lld rows", (long long)m, (long long)panels,
                      (long long)info.ic_blocks, (long long)info.mc);
            }
        }
    }
}

/* Few MR panels per thread: M blocks x column chunks within 10% of an even share on 2 and 3
 * threads, 25% on 16 (the M split alone leaves 7 panels on 2 threads 14% over it, on 3 threads 29%,
 * 5 panels on 16 threads 60%). K = 256 keeps the A blocks small enough for any L2 (from 256 KB) to
 * allow the even splits. */
static void check_balance(cvf_context *const *pools)
{
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_BF16};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (int p = 1; p < POOLS; p++) {
            const int32_t threads = pool_threads[p];
            const cvf_cpu_kernel *kernel = cvf_cpu_kernel_for(cvf_cpu_isa_active(), dtypes[d], dtypes[d]);
            for (int64_t panels = 40 / kernel->mr + 1; panels < 8 * threads; panels += 3) {
                if (panels % threads == 0)
                    continue;
                int64_t m = panels * kernel->mr;
                cvf_cpu_plan_info info = plan_of(pools[p], m, 3072, 256, dtypes[d], false);
                if (info.path != CVF_CPU_PATH_BLOCKED || info.threads != threads)
                    continue; /* tiles, or too little work for the pool */
                int64_t columns = ceil_div(info.nc, info.nr);
                int64_t even = ceil_div(panels * columns, threads);
                int64_t busiest = busiest_tiles(&info, m, threads);
                double limit = threads <= 3 ? 1.10 : 1.25;
                CHECK((double)busiest <= limit * (double)even,
                      "%s, %lld x 3072 x 256 on %d threads: %lld blocks x %lld chunks, busiest thread %lld tiles, an "
                      "even share %lld",
                      kernel->name, (long long)m, threads, (long long)info.ic_blocks, (long long)info.jr_chunks,
                      (long long)busiest, (long long)even);
            }
        }
    }
}

/* Rows of A packed plus columns of B read by the busiest thread's tasks, per row of K. */
static int64_t busiest_traffic(int64_t panels, int64_t columns, int64_t mr, int64_t nr, int64_t blocks, int64_t chunks,
                               int32_t threads)
{
    return ceil_div(blocks * chunks, threads) * (ceil_div(panels, blocks) * mr + ceil_div(columns, chunks) * nr);
}

/* Few panels (40-256 rows): among the splits of up to `threads` blocks (of at most balance_mc rows,
 * what this machine's L2 allows the kernel) by 1-8 chunks, none has a busiest thread with fewer tiles, nor as
 * many tiles and less A and B to move (256 rows on 16 threads of the AMX kernel: 2 blocks x 8
 * chunks, each task reading an eighth of B, where 8 x 2 read half of it). */
static void check_balance_traffic(cvf_context *const *pools)
{
    static const cvf_dtype dtypes[] = {CVF_F32, CVF_BF16};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (int p = 1; p < POOLS; p++) {
            const int32_t threads = pool_threads[p];
            for (int64_t m = 40; m <= 256; m += 9) {
                cvf_cpu_plan_info info = plan_of(pools[p], m, 3072, 256, dtypes[d], false);
                int64_t panels = ceil_div(m, info.mr), columns = ceil_div(info.nc, info.nr);
                const bool even = panels % threads == 0; /* then only one-task-per-thread splits compete */
                if (info.path != CVF_CPU_PATH_BLOCKED || info.threads != threads || panels >= 8 * threads ||
                    (even && info.ic_blocks * info.jr_chunks > threads))
                    continue; /* the tiles, or a split that needs no balance */
                int64_t cost = busiest_tiles(&info, m, threads);
                int64_t traffic =
                    busiest_traffic(panels, columns, info.mr, info.nr, info.ic_blocks, info.jr_chunks, threads);
                for (int64_t chunks = 1; chunks <= 8 && chunks <= columns; chunks++) {
                    for (int64_t blocks = 1; blocks <= threads && blocks <= panels; blocks++) {
                        if (ceil_div(panels, blocks) * info.mr > info.balance_mc ||
                            (even && blocks * chunks > threads))
                            continue; /* a block taller than the L2 allows, or a second round: not a candidate */
                        int64_t alt_cost =
                            ceil_div(panels, blocks) * ceil_div(columns, chunks) * ceil_div(blocks * chunks, threads);
                        int64_t alt_traffic =
                            busiest_traffic(panels, columns, info.mr, info.nr, blocks, chunks, threads);
                        if (!CHECK(alt_cost > cost || (alt_cost == cost && alt_traffic >= traffic),
                                   "%s, %lld x 3072 x 256 on %d threads: %lld blocks x %lld chunks (%lld tiles, "
                                   "%lld rows + columns), but %lld x %lld gives %lld tiles, %lld rows + columns",
                                   cvf_dtype_name(dtypes[d]), (long long)m, threads, (long long)info.ic_blocks,
                                   (long long)info.jr_chunks, (long long)cost, (long long)traffic, (long long)blocks,
                                   (long long)chunks, (long long)alt_cost, (long long)alt_traffic))
                            chunks = blocks = 1 << 20; /* one report per shape */
                    }
                }
            }
        }
    }
}

/* The AMX kernel (bf16 tiles; only where the CPU has AMX, else said and skipped): two blocks per
 * thread, of at least 2 panels, so that a slowed core sheds work (2048 rows on 16 threads: 32
 * blocks of 64 rows, where one block per thread made it hold up every pass). Where the panels are
 * too few for that, one task per thread, shaped by check_balance_traffic's rule (1024 rows on 16
 * threads: 4 blocks x 4 chunks rather than 16 blocks, each reading all of B). */
static void check_amx_blocks(cvf_context *const *pools)
{
    const cvf_cpu_kernel *kernel = cvf_cpu_kernel_for(cvf_cpu_isa_active(), CVF_BF16, CVF_BF16);
    if (kernel->format != CVF_CPU_PACK_BF16_TILES) {
        printf("skipped: AMX blocks (the bf16 kernel here is %s)\n", kernel->name);
        return;
    }
    static const int64_t rows[] = {1024, 2048, 3072, 4096};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int p = 1; p < POOLS; p++) {
            cvf_cpu_plan_info info = plan_of(pools[p], rows[r], 2048, 2048, CVF_BF16, false);
            int64_t panels = ceil_div(rows[r], info.mr), threads = info.threads;
            if (info.path != CVF_CPU_PATH_BLOCKED || threads != pool_threads[p])
                continue;
            int64_t want = 2 * threads < panels / 2 ? 2 * threads : panels / 2;
            /* too few panels for two blocks per thread: one task per thread, no fewer (fewer tasks
             * would leave a thread idle and give the others more tiles) */
            bool one_task_each = info.ic_blocks * info.jr_chunks == threads && want < 2 * threads;
            CHECK((info.ic_blocks >= want || one_task_each) && ceil_div(panels, info.ic_blocks) >= 2,
                  "AMX, %lld x 2048 x 2048 on %d threads: %lld blocks x %lld chunks of up to %lld rows (want >= %lld "
                  "blocks of >= 2 panels, or one task per thread)",
                  (long long)rows[r], (int)threads, (long long)info.ic_blocks, (long long)info.jr_chunks,
                  (long long)info.mc, (long long)want);
        }
    }
    /* K2-1 of the MLP backward at S = 2048 (24 panels, KC 2048) on 16 threads: where the kernel's
     * share of L2 holds a block of 384 rows and B's 3072 columns are one NC block (through NC the
     * split depends on the L3 too), 2 blocks x 8 chunks (768 rows and columns a task) rather than
     * the 4 x 4 (960) that half of a 2 MB L2 allowed (PERF.md, 2026-12-06 eighth session) */
    cvf_cpu_plan_info k21 = plan_of(pools[POOLS - 1], 768, 3072, 2048, CVF_BF16, false);
    if (k21.threads == 16 && k21.kc == 2048 && k21.balance_mc >= 384 && k21.nc == 3072) /* B in one NC block */
        CHECK(k21.ic_blocks == 2 && k21.jr_chunks == 8 && k21.mc == 384,
              "AMX, 768 x 3072 x 2048 on 16 threads: %lld blocks x %lld chunks of %lld rows (balance_mc %lld; want 2 "
              "x 8 of 384)",
              (long long)k21.ic_blocks, (long long)k21.jr_chunks, (long long)k21.mc, (long long)k21.balance_mc);
    else
        printf("skipped: AMX K2-1 split (%d threads, kc %lld, balance_mc %lld, nc %lld)\n", (int)k21.threads,
               (long long)k21.kc, (long long)k21.balance_mc, (long long)k21.nc);
}

/* CVF_CPU_BLOCKS="0,MC,0" (ctest's test_plan_forced_mc): only the MC blocks are forced, to at most
 * MC rows (whole MR panels, at least one) and at least one block per thread, with no other rule
 * adding or balancing blocks (few blocks: column chunks fill the threads); kc and nc keep
 * their defaults (a kc as wide as K = 256 fits any L1 of this kernel's micro-panel, and NC covers
 * 512 columns). */
static void check_forced_mc(cvf_context *const *pools, int64_t forced_mc)
{
    static const int64_t rows[] = {1, 100, 768, 2048, 4096};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int p = 0; p < POOLS; p++) {
            cvf_cpu_plan_info info = plan_of(pools[p], rows[r], 512, 256, CVF_F32, false);
            if (info.path != CVF_CPU_PATH_BLOCKED)
                continue; /* tiles for a few rows, direct for tiny products */
            int64_t mc_max = forced_mc / info.mr * info.mr, panels = ceil_div(rows[r], info.mr);
            if (mc_max < info.mr)
                mc_max = info.mr;
            int64_t blocks = ceil_div(rows[r], mc_max), threads = info.threads;
            if (blocks < threads) /* at least one block per thread, then column chunks fill the rest */
                blocks = threads < panels ? threads : panels;
            int64_t chunks = blocks < threads ? ceil_div(threads, blocks) : 1;
            if (chunks > ceil_div(info.nc, info.nr))
                chunks = ceil_div(info.nc, info.nr);
            CHECK(info.ic_blocks == blocks && info.mc == ceil_div(panels, blocks) * info.mr && info.mc <= mc_max &&
                      info.jr_chunks == chunks,
                  "forced mc %lld, %lld rows on %d threads: %lld blocks of up to %lld rows, %lld chunks",
                  (long long)forced_mc, (long long)rows[r], pool_threads[p], (long long)info.ic_blocks,
                  (long long)info.mc, (long long)info.jr_chunks);
            CHECK(info.kc == 256 && info.nc == 512, "forced mc only: kc %lld (K 256), nc %lld (N 512)",
                  (long long)info.kc, (long long)info.nc);
        }
    }
}

int main(void)
{
    const char *forced = getenv("CVF_CPU_BLOCKS");
    long long forced_mc = 0;
    int end = -1; /* "0,MC,0" and nothing after it, with MC in the planner's range */
    if (forced && !(sscanf(forced, "0,%lld,0%n", &forced_mc, &end) == 1 && end >= 0 && forced[end] == '\0' &&
                    forced_mc > 0 && forced_mc <= 65536)) {
        printf("SKIP test_plan: CVF_CPU_BLOCKS forces the blocks\n");
        return 77;
    }
    cvf_context *pools[POOLS] = {NULL};
    for (int p = 0; p < POOLS; p++) {
        cvf_context_options options = {.device = CVF_DEVICE_CPU, .threads = pool_threads[p]};
        if (!CHECK(cvf_context_create(&options, &pools[p]) == CVF_STATUS_SUCCESS, "a CPU context of %d threads",
                   pool_threads[p]))
            return test_report("test_plan");
    }
    printf("level %s, f32 kernel %s\n", cvf_cpu_isa_name(cvf_cpu_isa_active()),
           cvf_cpu_kernel_for(cvf_cpu_isa_active(), CVF_F32, CVF_F32)->name);
    if (forced_mc > 0) {
        check_forced_mc(pools, forced_mc);
        for (int p = 0; p < POOLS; p++)
            cvf_context_destroy(pools[p]);
        return test_report("test_plan");
    }
    check_few_rows(pools);
    check_empty(pools);
    check_tiny(pools);
    check_split_k(pools);
    check_whole_rounds(pools);
    check_balance(pools);
    check_balance_traffic(pools);
    check_amx_blocks(pools);
    for (int p = 0; p < POOLS; p++)
        cvf_context_destroy(pools[p]);
    return test_report("test_plan");
}

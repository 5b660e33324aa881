/* The Hopper GEMM kernel template (see gemm_sm90.cu); instantiated per dtype in
 * gemm_sm90_f16.cu and gemm_sm90_bf16.cu so that the two compile in parallel. */
#ifndef CVF_CUDA_GEMM_SM90_CUH
#define CVF_CUDA_GEMM_SM90_CUH

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/device.cuh"

namespace sm90 {


/* Tiles of BM x N, N = 256, 192 or 128 (chosen per product by cvf_cuda_sm90_schedule; BN_MAX the
 * widest), K-slices of BK. */
constexpr int BM = 128, BN_MAX = 256, BK = 64;
constexpr int GROUP_M = 16;
constexpr int THREADS = 384;
constexpr int A_STAGE = BM * BK * 2; /* 16 KB */
constexpr int CHUNK = 32;            /* epilogue columns per chunk */
/* Output staging for the TMA stores: per consumer warpgroup a ring of slots (tile_cfg::SLOTS), each
 * a 64-row x 64-byte box (32 16-bit or 16 f32 columns) in the 64-byte swizzle of the TMA, so that
 * the fragment writes are free of bank conflicts. */
constexpr int SLOT_BYTES = 64 * 64;
constexpr int MAX_SLOTS = 16;        /* two f16 tiles' boxes of a warpgroup */
constexpr int SMEM_LIMIT = 227 * 1024; /* the most dynamic shared memory a Hopper CTA may opt in to */

constexpr int max_int(int a, int b)
{
    return a > b ? a : b;
}
constexpr int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* The epilogue warpgroup's kernel (EPI_WARPGROUP, see epilogue_warps): 512 threads. */
constexpr int THREADS_EW = 512;
/* Where a kernel instance runs its epilogue (its template parameter EPI): in the consumers
 * (EPI_CONSUMERS), in the epilogue warpgroup (EPI_WARPGROUP, 512 threads, epilogue_warps), or
 * relayed (EPI_RELAY, 384 threads): the consumers round the tile into the same handoff as for the
 * epilogue warpgroup and a spare warp of the producer's warpgroup stores it (relay_warp). The
 * last two share the handoff's geometry (tile_cfg's HANDOFF: a 3-stage ring). */
constexpr int EPI_CONSUMERS = 0, EPI_WARPGROUP = 1, EPI_RELAY = 2;
/* With a handoff (EPI_WARPGROUP, EPI_RELAY), per consumer warpgroup the [tm, tn] of the half tile
 * handed off and of the one it multiplies now (announced, in the epilogue warpgroup's kernel only). */
constexpr int HANDOFF_FIXED_BYTES = 8 * 4;
constexpr int HANDOFF_SLOTS = BN_MAX / CHUNK; /* a half tile's boxes */
/* The rows of a bias-gradient slab in the epilogue warpgroup's kernel (a half tile; the others:
 * CVF_CUDA_SM90_SLAB). */
constexpr int EW_SLAB = 64;

/* The geometry of a tile N columns wide (HANDOFF: with the handoff, for the epilogue warpgroup's and the
 * relay kernel): R accumulators per consumer thread (its 64 rows x N), the
 * B stage, the ring's depth, the output slots per consumer warpgroup, and the shared memory: 1 KB
 * alignment slack, the ring, the output staging, then the ring's "full", "empty" and (2-CTA
 * clusters) "mail" mbarriers, the unit id of each stage (set by the producer with the first K-slice
 * of a unit, -1: no more work), one exchange word per consumer warpgroup (cut tiles) and the mailbox
 * of each stage (the unit the cluster's first CTA took, sent to the second). Narrower tiles get a
 * deeper ring in the same ~227 KB; the output staging takes what the ring leaves, up to MAX_SLOTS
 * (a ring of 3 stages with 10 slots a warpgroup measured no faster than 4 and 4 at 128 x 256, even
 * at K = 64: docs/PERF.md issue 12 part 3). */
template <int N, bool HANDOFF = false>
struct tile_cfg {
    static_assert(N == 128 || N == 192 || N == 256, "tile width");
    static_assert(!HANDOFF || N == 256, "the handoff's kernels are 256 wide");
    static constexpr int R = N / 2;
    static constexpr int B_STAGE = N * BK * 2;
    static constexpr int STAGES = HANDOFF ? 3 : N == 128 ? 6 : 4;
    static constexpr int FIXED_BYTES =
        1024 + 3 * STAGES * 8 + 4 * STAGES + 8 + 4 * STAGES + (HANDOFF ? HANDOFF_FIXED_BYTES : 0);
    static constexpr int RING_BYTES = STAGES * (A_STAGE + B_STAGE);
    static constexpr int SLOTS =
        HANDOFF ? HANDOFF_SLOTS : min_int(MAX_SLOTS, (SMEM_LIMIT - FIXED_BYTES - RING_BYTES) / (2 * SLOT_BYTES));
    static constexpr int STAGE_BYTES = SLOTS * SLOT_BYTES; /* a warpgroup's output staging (or its handoff) */
    static constexpr int SMEM_BYTES = FIXED_BYTES + RING_BYTES + 2 * STAGE_BYTES;
    static_assert(HANDOFF || SLOTS >= 4, "output staging");
    static_assert(SMEM_BYTES <= SMEM_LIMIT, "shared memory");
};
/* The epilogue warpgroup's kernel (EPI_WARPGROUP) adds, after the handoff kernels' layout, one
 * aux_in box per epilogue warp (a chunk of 64 rows x 32 columns in the C boxes' geometry, its two
 * parts of 32 rows loaded by TMA half a chunk ahead: aux_box) and the parts' mbarriers: the offsets
 * from the 1 KB aligned base. */
constexpr int EW_WARPS = 4;
struct ew_layout {
    static constexpr int USED = tile_cfg<BN_MAX, true>::SMEM_BYTES - 1024; /* ring, handoffs, barriers */
    static constexpr int BARS = (USED + 7) / 8 * 8;
    static constexpr int BOXES = (BARS + EW_WARPS * 16 + 1023) / 1024 * 1024;
    static constexpr int SMEM_BYTES = 1024 + BOXES + EW_WARPS * SLOT_BYTES;
    static_assert(SMEM_BYTES <= SMEM_LIMIT, "shared memory");
};
/* The most shared memory any width takes (the device must offer it). */
constexpr int SMEM_BYTES_MAX =
    max_int(max_int(tile_cfg<128>::SMEM_BYTES, tile_cfg<192>::SMEM_BYTES),
            max_int(max_int(tile_cfg<256>::SMEM_BYTES, tile_cfg<256, true>::SMEM_BYTES), ew_layout::SMEM_BYTES));
static_assert(SMEM_BYTES_MAX <= SMEM_LIMIT, "shared memory");
/* An exchange slot: the accumulators of a whole tile of the widest width (narrower ones use the
 * start of it); within it, consumer warpgroup wg's half at wg x 128 x R. */
constexpr int TILE_FLOATS = BM * BN_MAX;

#include "cuda/wgmma_sm90.inc"

/* One output of the epilogue (C or aux_out). */
struct out_desc {
    void *data;
    int32_t dtype;
    int64_t rs, cs;
    int32_t tma; /* row-major, 16-byte aligned rows: a tensor map exists, TMA stores from shared memory */
};

struct sm90_params {
    int64_t m, n, k;
    int32_t tiles_m, tiles_n, k_tiles;
    int32_t activation;
    dev_vec bias;
    dev_mat aux_in;
    out_desc c, aux_out;
    float *partials;
    /* The work: iters = tiles x k_tiles K-slices, cut into `units` handed out in order by an
     * atomic counter (dynamic persistent scheduling, so that CTAs that start late, behind another
     * stream's kernel, take less work). By mode:
     *   CVF_SM90_WHOLE_TILES: unit u is tile u (of the grouped order), all its K-slices.
     *   CVF_SM90_STREAM_K: the slices tile after tile (each tile's in K order) cut into `units` runs of
     *     equal length (unit u: [u iters / units, (u + 1) iters / units), iters x units < 2^32):
     *     a unit may hold the end of one tile, whole tiles and the start of another, and walks them
     *     last first (first_segment).
     *   CVF_SM90_SPLIT_K: unit u is K part u / tiles (of `splits` equal parts) of tile u % tiles: the
     *     tiles' first parts are handed out first, so that the tiles that share A rows or B
     *     columns read the same K range at the same time (L2 reuse, unlike stream-K's runs).
     * A tile cut into pieces is finished by whichever piece finishes last (piece_exchange).
     * ("tiles" above: tiles_v.) With 2-CTA clusters the counter hands out units of the pair
     * (whole tiles or split-K), and each CTA works on its tile of it (cta_unit). */
    int64_t iters;
    int32_t units;
    int32_t mode;   /* a cvf_sm90_mode (cuda.h), as cvf_cuda_sm90_schedule chose it */
    int32_t splits; /* CVF_SM90_SPLIT_K: the K parts of each tile */
    int32_t aux_packed;  /* aux_in is f16/bf16 with unit column stride, even row stride, 4-byte aligned,
                            and the activation is GELU': the epilogue prefetches it as 16-bit pairs
                            (see load_aux_chunk) */
    int32_t bias_packed; /* bias is f16/bf16, unit stride, 4-byte aligned, and aux_in is not prefetched:
                            the epilogue prefetches it as 16-bit pairs (see load_bias_chunk) */
    int32_t tile_n;  /* the tile's width N: 256, 192 or 128 */
    int32_t lean;    /* 0: the general epilogue (epilogue_tile); else the lean one's recipe (a lean_kind,
                        see lean_tile): every output and operand of the epilogue in the
                        operands' 16-bit dtype, C and aux_out by TMA, aux_in and bias prefetched */
    int32_t cluster; /* 1; or 2: CTA pairs on tiles (2 i, j) and (2 i + 1, j), each loading half of
                        their shared B slice into both by TMA multicast (a third less L2 -> SM
                        traffic per tile); units then number pairs of tiles (see cta_unit) */
    int32_t tiles_v; /* the schedule's unit_tiles: tiles_m x tiles_n, or with pairs
                        2 x ceil(tiles_m / 2) x tiles_n (an odd tiles_m leaves a tile row past m,
                        computed on zeros and not stored) */
    int32_t *sync;        /* [0] next unit, [1] CTAs done, then for the cut tile whose first piece is
                             unit f: [SYNC_SEMS + 4 f + 2 wg], [.. + 1]: consumer wg's half tile's
                             arrival count and count of pieces stored. Zero at launch; the kernel
                             leaves it zero. */
    float *split_partial; /* stream-K: [2 units][TILE_FLOATS], a piece's accumulators (slot_of) */
};

/* Layout of a lane's sync block (ints): two counters, then four words per unit. */
constexpr int SYNC_SEMS = 32;
static_assert(CVF_CUDA_SYNC_INTS == SYNC_SEMS + 4 * CVF_CUDA_MAX_UNITS, "sync block layout");
static_assert(BM == CVF_CUDA_SM90_TILE_M && BK == CVF_CUDA_SM90_TILE_K, "tile");

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* Waits for the phase of the given parity of a barrier of this CTA; CLUSTER: with acquire
 * semantics at cluster scope (what another CTA wrote before its release arrive is visible after),
 * else at CTA scope. */
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        if (CLUSTER)
            asm volatile("{\n"
                         ".reg .pred p;\n"
                         "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, p;\n"
                         "}\n"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
        else
            asm volatile("{\n"
                         ".reg .pred p;\n"
                         "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, p;\n"
                         "}\n"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
    } while (!done);
}

/* The same shared-memory offset (a barrier, a buffer) in the cluster's CTA of that rank. */
__device__ __forceinline__ uint32_t peer_addr(uint32_t local, uint32_t rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    return remote;
}

/* Arrives on an mbarrier of a CTA of the cluster (an address from peer_addr), with release
 * semantics at cluster scope. */
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t remote_bar)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

/* All threads of the cluster's CTAs meet (release / acquire at cluster scope). */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                     dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* tma_load_2d issued only once dep is in a register (dep: an input the instruction does not use,
 * a value read last from dst, so that the issuing thread's read completes first). */
__device__ __forceinline__ void tma_load_2d_after(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1,
                                                  uint32_t bar, uint32_t dep)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "r"(dep)
                 : "memory");
}

/* A box loaded into the same offset of every CTA of the cluster in mask, each CTA's transaction
 * bytes completed on its barrier at offset bar. */
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1,
                                                      uint32_t bar, uint16_t mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}

/* The bulk tensor store of one staged box (bounds clipped by the hardware), in its own bulk group. */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, uint32_t src, int32_t c0, int32_t c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* Waits until at most N bulk groups of this thread still read shared memory. */
template <int N>
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void bulk_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* A wgmma shared-memory descriptor: 128-byte swizzle, start address, leading / stride byte
 * offsets (all in 16-byte units). */
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accumulator reads / writes across the asynchronous wgmma. */
template <int R>
__device__ __forceinline__ void fence_acc(float (&acc)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(acc[i])::"memory");
}

__device__ __forceinline__ int32_t ld_acquire(const int32_t *p)
{
    int32_t v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Adds v to *p with release semantics at GPU scope (what this thread and, through the barrier
 * before it, its warpgroup wrote is visible to whoever acquires the new value). */
__device__ __forceinline__ void red_add_release(int32_t *p, int32_t v)
{
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* A piece of a unit: its output tile (index in the grouped order, and coordinates) and K-slice
 * range [kt0, kt1). */
struct segment {
    int32_t tile, tm, tn, kt0, kt1;
};

/* The tile at position t of the grouped order (groups of `group` row tiles). */
__device__ __forceinline__ void tile_coords(int32_t t, int32_t tiles_m, int32_t tiles_n, int32_t group_m, int32_t *tm,
                                            int32_t *tn)
{
    int32_t per_group = group_m * tiles_n;
    int32_t group = t / per_group;
    int32_t first = group * group_m;
    int32_t rows = tiles_m - first < group_m ? tiles_m - first : group_m;
    int32_t in_group = t - group * per_group;
    *tm = first + in_group % rows;
    *tn = in_group / rows;
}

/* The coordinates of tile t of the units' numbering: the grouped order of the tiles, or with 2-CTA
 * clusters the grouped order of the pairs of row tiles (GROUP_M rows a group either way), t = 2 x
 * pair + the CTA's rank. */
__device__ __forceinline__ void tile_at(const sm90_params &p, int32_t t, int32_t *tm, int32_t *tn)
{
    if (p.cluster == 2) {
        int32_t pair_m;
        tile_coords(t >> 1, (p.tiles_m + 1) >> 1, p.tiles_n, GROUP_M / 2, &pair_m, tn);
        *tm = 2 * pair_m + (t & 1);
    } else {
        tile_coords(t, p.tiles_m, p.tiles_n, GROUP_M, tm, tn);
    }
}

/* This CTA's unit of the cluster's unit cu: cu itself, or with pairs (rank 0 or 1) its tile of
 * the pair: tile 2 x pair + rank of the same K part (whole tiles: part 0). */
__device__ __forceinline__ int32_t cta_unit(const sm90_params &p, int32_t cu, uint32_t rank)
{
    if (p.cluster == 1)
        return cu;
    const int32_t pairs = p.tiles_v >> 1, part = cu / pairs;
    return part * p.tiles_v + 2 * (cu - part * pairs) + (int32_t)rank;
}

/* The first K-slice of stream-K unit u; unit_begin(units) = iters. 32-bit arithmetic (the host
 * keeps iters x units under 2^32): a 64-bit division would be a call, and the consumers run it
 * with 128 live accumulators. */
__device__ __forceinline__ uint32_t unit_begin(const sm90_params &p, int32_t u)
{
    return (uint32_t)u * (uint32_t)p.iters / (uint32_t)p.units;
}

/* The stream-K unit that holds K-slice i: the largest u with unit_begin(u) <= i. */
__device__ __forceinline__ int32_t unit_of_slice(const sm90_params &p, uint32_t i)
{
    return (int32_t)(((i + 1) * (uint32_t)p.units - 1) / (uint32_t)p.iters);
}

/* Where a unit's walk over its segments stands (stream-K; zeros otherwise): the first K-slice of the
 * segment just taken (segment_begin) and the unit's first slice (unit_begin), where the walk down
 * ends. Slices are counted over all tiles: tile t's K-slice k is t x k_tiles + k. */
struct unit_cursor {
    uint32_t segment_begin, unit_begin;
};

/* The first segment of unit u, and the cursor after it: the whole tile u, its K part, or
 * (stream-K) the unit's last piece: a stream-K unit walks its segments last first, so that it
 * starts at K = 0 of the tile it ends in (or, inside one tile, at its own offset) and ends with the
 * tail of the tile it starts in. Every unit then moves up K at the same pace, and at any time the
 * running units read their operands within a window of k_tiles - run slices (run: iters / units)
 * rather than anywhere in K: with long K the tiles that share A rows or B columns still meet in L2. */
__device__ __forceinline__ segment first_segment(const sm90_params &p, int32_t u, unit_cursor *c)
{
    segment g;
    if (p.mode == CVF_SM90_WHOLE_TILES) {
        g.tile = u;
        g.kt0 = 0;
        g.kt1 = p.k_tiles;
        c->segment_begin = c->unit_begin = 0;
    } else if (p.mode == CVF_SM90_SPLIT_K) {
        const int32_t tiles = p.tiles_v, part = u / tiles;
        g.tile = u - part * tiles;
        g.kt0 = part * p.k_tiles / p.splits;
        g.kt1 = (part + 1) * p.k_tiles / p.splits;
        c->segment_begin = c->unit_begin = 0;
    } else {
        const uint32_t begin = unit_begin(p, u), end = unit_begin(p, u + 1);
        g.tile = (int32_t)((end - 1) / (uint32_t)p.k_tiles);
        const uint32_t start = (uint32_t)g.tile * (uint32_t)p.k_tiles;
        g.kt0 = begin > start ? (int32_t)(begin - start) : 0;
        g.kt1 = (int32_t)(end - start);
        c->segment_begin = start + (uint32_t)g.kt0; /* the walk goes down to the unit's first slice */
        c->unit_begin = begin;
    }
    tile_at(p, g.tile, &g.tm, &g.tn);
    return g;
}

/* The segment after g in its unit (stream-K: the tile before, down to the unit's first slice), or
 * false at the unit's end. */
__device__ __forceinline__ bool next_segment(const sm90_params &p, unit_cursor *c, segment *g)
{
    if (c->segment_begin <= c->unit_begin)
        return false;
    g->tile -= 1;
    const uint32_t start = (uint32_t)g->tile * (uint32_t)p.k_tiles;
    g->kt0 = c->unit_begin > start ? (int32_t)(c->unit_begin - start) : 0;
    g->kt1 = p.k_tiles;
    c->segment_begin = start + (uint32_t)g->kt0;
    tile_at(p, g->tile, &g->tm, &g->tn);
    return true;
}

/* The units that hold the pieces of a cut tile, in the order they are added: first, first +
 * stride, ... (count of them). */
struct piece_set {
    int32_t first, count, stride;
};

/* The accumulators a thread reads from each piece's slot at a time in piece_exchange (as many
 * values in flight; it divides R at every width). */
constexpr int EXCHANGE_GROUP = 32;

/* The pieces of segment g's tile: the consecutive stream-K units that meet it, or its K parts. */
__device__ __forceinline__ piece_set pieces_of(const sm90_params &p, const segment &g)
{
    piece_set ps;
    if (p.mode == CVF_SM90_SPLIT_K) {
        ps.first = g.tile;
        ps.count = p.splits;
        ps.stride = p.tiles_v;
    } else {
        const uint32_t first_slice = (uint32_t)g.tile * (uint32_t)p.k_tiles;
        ps.first = unit_of_slice(p, first_slice);
        ps.count = unit_of_slice(p, first_slice + p.k_tiles - 1) - ps.first + 1;
        ps.stride = 1;
    }
    return ps;
}

/* The exchange slot of unit v's piece of a cut tile whose first piece is unit `first`. Split-K:
 * v (one piece per unit). Stream-K: units + first for that one (the last piece of its unit), v
 * for the others (the first piece of theirs), so that no two pieces of any tiles share one. */
__device__ __forceinline__ float *slot_of(const sm90_params &p, int32_t v, int32_t first)
{
    const int32_t slot = p.mode == CVF_SM90_STREAM_K && v == first ? p.units + v : v;
    return p.split_partial + (size_t)slot * TILE_FLOATS;
}

/*
 * The exchange of one consumer warpgroup's half of a cut tile (this thread's 128 accumulators
 * hold unit u's piece of g.tile): each piece but the last to arrive stores its
 * accumulators in its slot and counts itself stored; the last to arrive waits until all others
 * are stored, adds the pieces in unit order and returns true: it runs the epilogue. It resets the
 * words for the next launch. The others return false. Only pieces that have arrived, and so are
 * running, are ever waited for, so no launch order or residency can deadlock it.
 * The sum is ((p0 + p1) + p2) + ... whichever piece finished last: when that piece is p0 or p1
 * its registers are added to the other of the two (one commutative addition), else it stores
 * them too and the sum is made from memory. The registers hold the running sum: no second array.
 * A slot holds a thread's accumulators 4 at a time (float4 q of thread t at q x 128 + t), so that
 * the last piece's reads, which wait on L2's latency, move 16 bytes a load (docs/PERF.md issue 12
 * part 9).
 */
template <int R>
__device__ __forceinline__ bool piece_exchange(const sm90_params &p, float (&acc)[R], const segment &g, int32_t u,
                                               int wg, int t, volatile int32_t *xchg)
{
    const piece_set ps = pieces_of(p, g);
    const int32_t u_first = ps.first, pieces = ps.count;
    int32_t *count = p.sync + SYNC_SEMS + 4 * u_first + 2 * wg, *stored = count + 1;
    if (t == 0)
        xchg[wg] = atomicAdd(count, 1);
    named_barrier(1 + wg, 128);
    const bool last = xchg[wg] == pieces - 1;
    const int32_t mine = (u - u_first) / ps.stride; /* this piece's place in the sum */
    if (!last || mine >= 2) {
        float4 *part = reinterpret_cast<float4 *>(slot_of(p, u, u_first) + wg * 128 * R);
#pragma unroll
        for (int q = 0; q < R / 4; q++)
            __stcg(part + q * 128 + t, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
    }
    if (!last) {
        __threadfence();
        named_barrier(1 + wg, 128);
        if (t == 0)
            red_add_release(stored, 1);
        return false;
    }
    if (t == 0)
        while (ld_acquire(stored) < pieces - 1)
            ;
    named_barrier(1 + wg, 128);
    __threadfence();
    /* EXCHANGE_GROUP accumulators at a time over the pieces (as many loaded values in flight per
     * piece): a loop over the pieces around all 128 made the compiler spill. */
    constexpr int G = EXCHANGE_GROUP;
    static_assert(R % G == 0 && G % 4 == 0, "exchange groups");
#pragma unroll
    for (int grp = 0; grp < R / G; grp++) {
        for (int32_t i = 0, v = u_first; i < pieces; i++, v += ps.stride) {
            if (v == u && mine < 2)
                continue; /* in the registers already */
            const float4 *part =
                reinterpret_cast<const float4 *>(slot_of(p, v, u_first) + wg * 128 * R) + grp * (G / 4) * 128 + t;
            const bool overwrite = mine >= 2 && v == u_first;
            float4 x[G / 4];
#pragma unroll
            for (int e = 0; e < G / 4; e++)
                x[e] = __ldcg(part + e * 128);
#pragma unroll
            for (int e = 0; e < G / 4; e++) {
                float *a = &acc[grp * G + 4 * e];
                a[0] = overwrite ? x[e].x : a[0] + x[e].x;
                a[1] = overwrite ? x[e].y : a[1] + x[e].y;
                a[2] = overwrite ? x[e].z : a[2] + x[e].z;
                a[3] = overwrite ? x[e].w : a[3] + x[e].w;
            }
        }
    }
    if (t == 0) {
        *count = 0;
        *stored = 0;
    }
    return true;
}

/* A consumer warpgroup's output staging: its ring of SLOTS boxes in shared memory and the slot
 * of the next box (the same in all 128 threads). */
template <int SLOTS>
struct stager {
    unsigned char *buf;
    int slot;
};

/* The address of the current slot of st. */
template <int SLOTS>
__device__ __forceinline__ unsigned char *slot_buf(const stager<SLOTS> &st)
{
    return st.buf + st.slot * SLOT_BYTES;
}

/* The slot is 64 rows of 64 bytes; the 64-byte swizzle XORs the 16-byte unit index with
 * (row / 2) % 4, which for this thread's rows (r_local, r_local + 8 of the fragment) is
 * (lane / 8) % 4. */
__device__ __forceinline__ int swizzle_of(int lane)
{
    return (lane >> 3) & 3;
}

/* Writes the 16-bit pairs of one 32-column chunk ([8-column block jb][row half h]) of consumer
 * thread t into a box (64 rows x 64 bytes), in the TMA's 64-byte swizzle (bank-conflict free): row
 * r's 16-byte unit u (its columns 8 u .. 8 u + 7) at r x 64 + ((u ^ ((r / 2) % 4)) x 16). */
__device__ __forceinline__ void stage_pairs_at(unsigned char *box, const uint32_t (&bits)[4][2], int t)
{
    const int warp = t / 32, lane = t % 32, sw = swizzle_of(lane);
    unsigned char *row = box + (warp * 16 + lane / 4) * 64 + 4 * (lane % 4);
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            *reinterpret_cast<uint32_t *>(row + h * 512 + ((jb ^ sw) << 4)) = bits[jb][h];
}

/* stage_pairs_at the slot `ahead` places after st's current one. */
template <int SLOTS>
__device__ __forceinline__ void stage_pairs(const stager<SLOTS> &st, const uint32_t (&bits)[4][2], int t,
                                            int ahead = 0)
{
    stage_pairs_at(slot_buf(st) + ahead * SLOT_BYTES, bits, t);
}

/* Hands the B boxes just written to the current slot and the B - 1 after it to the TMA, as one
 * bulk group: every thread's writes made visible to the async proxy; thread 0 waits until at most
 * SLOTS / B - 2 earlier groups of B still read shared memory (the next B slots, last used SLOTS
 * boxes ago, are then free); the warpgroup syncs; thread 0 stores box q through maps[q] at row r,
 * column cols[q] (clipped to m x n by the hardware). One fence and one barrier for B boxes (the
 * general epilogue puts one box at a time, the lean one two). */
template <int B, int SLOTS>
__device__ __forceinline__ void put_group(const CUtensorMap *const (&maps)[B], const int64_t (&cols)[B],
                                          stager<SLOTS> &st, int wg, int t, int64_t r, int64_t m, int64_t n)
{
    static_assert(SLOTS % B == 0 && SLOTS / B >= 2, "slots in whole groups, two groups at least");
    fence_proxy_async();
    if (t == 0)
        bulk_wait_read<SLOTS / B - 2>();
    named_barrier(1 + wg, 128);
    if (t == 0) {
#pragma unroll
        for (int q = 0; q < B; q++)
            if (r < m && cols[q] < n)
                tma_store_2d(maps[q], smem_addr(slot_buf(st) + q * SLOT_BYTES), (int32_t)cols[q], (int32_t)r);
        bulk_commit();
    }
    st.slot = st.slot + B == SLOTS ? 0 : st.slot + B;
}

/* put_group of one box through map at row r, column c. */
template <int SLOTS>
__device__ __forceinline__ void put_box(const CUtensorMap *map, stager<SLOTS> &st, int wg, int t, int64_t r,
                                        int64_t c, int64_t m, int64_t n)
{
    const CUtensorMap *const maps[1] = {map};
    const int64_t cols[1] = {c};
    put_group<1>(maps, cols, st, wg, t, r, m, n);
}

/* Rounds x and y (columns j, j + 1) to a 16-bit pair of dtype DT (0 f16, 1 bf16), x in the low
 * half; RELU: negative results to 0 in the same instruction (NaN stays NaN). */
template <int DT, bool RELU>
__device__ __forceinline__ uint32_t pack_pair(float x, float y)
{
    uint32_t d;
    if (DT == 0 && RELU)
        asm volatile("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x));
    else if (DT == 0)
        asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x));
    else if (RELU)
        asm volatile("cvt.rn.relu.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x));
    else
        asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x));
    return d;
}

/* Element e (0: column j, 1: j + 1) of a packed pair of dtype DT (0 f16, 1 bf16) as fp32. */
template <int DT>
__device__ __forceinline__ float unpack_pair(uint32_t pair, int e)
{
    if (DT == 1)
        return __uint_as_float(e ? pair & 0xFFFF0000u : pair << 16);
    return __half2float(__ushort_as_half((unsigned short)(e ? pair >> 16 : pair & 0xFFFFu)));
}

/* Chunk CH of acc rounded (RELU: and clamped) to 16-bit pairs of dtype DT, as stage_pairs takes
 * them: bits[8-column block][row half]. */
template <int DT, bool RELU, int CH, int R>
__device__ __forceinline__ void pack_chunk(const float (&acc)[R], uint32_t (&bits)[4][2])
{
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            bits[jb][h] = pack_pair<DT, RELU>(acc[CH * 16 + jb * 4 + 2 * h], acc[CH * 16 + jb * 4 + 2 * h + 1]);
}

/* Rounds (RELU: and clamps) chunk CH of acc to 16-bit pairs of dtype DT and writes them into the
 * slot `ahead` places after st's current one. */
template <int DT, bool RELU, int CH, int R, int SLOTS>
__device__ __forceinline__ void stage_chunk(const stager<SLOTS> &st, const float (&acc)[R], int t, int ahead)
{
    uint32_t bits[4][2];
    pack_chunk<DT, RELU, CH>(acc, bits);
    stage_pairs(st, bits, t, ahead);
}

/* Stores 32 columns (acc[0..16) of the chunk CH) of this warpgroup's 64 rows to out. */
template <int CH, int R, int SLOTS>
__device__ __forceinline__ void store_chunk(const out_desc &out, const CUtensorMap *map, const float (&acc)[R],
                                            stager<SLOTS> &st, int wg, int t, int64_t row0, int64_t col0, int64_t m,
                                            int64_t n)
{
    const int warp = t / 32, lane = t % 32;
    const int r_local = warp * 16 + lane / 4;
    const int c_local = 2 * (lane % 4);
    if (!out.tma) { /* any strides: element stores straight from the fragment */
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                int64_t i = row0 + r_local + 8 * (q / 2), j = col0 + CH * CHUNK + jb * 8 + c_local + (q & 1);
                if (i < m && j < n)
                    dev_store(out.data, out.dtype, i * out.rs + j * out.cs, acc[CH * 16 + jb * 4 + q]);
            }
        return;
    }
    const int sw = swizzle_of(lane);
    if (out.dtype != CVF_F32) {
        uint32_t bits[4][2];
        if (out.dtype == CVF_F16)
            pack_chunk<0, false, CH>(acc, bits);
        else
            pack_chunk<1, false, CH>(acc, bits);
        stage_pairs(st, bits, t);
        put_box(map, st, wg, t, row0, col0 + CH * CHUNK, m, n);
    } else { /* f32: two boxes of 16 columns */
#pragma unroll
        for (int half = 0; half < 2; half++) {
            unsigned char *row = slot_buf(st) + r_local * 64 + 8 * (lane & 1);
#pragma unroll
            for (int jj = 0; jj < 2; jj++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int jb = 2 * half + jj;
                    float2 v = make_float2(acc[CH * 16 + jb * 4 + 2 * h], acc[CH * 16 + jb * 4 + 2 * h + 1]);
                    *reinterpret_cast<float2 *>(row + h * 512 + (((2 * jj + (lane % 4) / 2) ^ sw) << 4)) = v;
                }
            put_box(map, st, wg, t, row0, col0 + CH * CHUNK + 16 * half, m, n);
        }
    }
}

/*
 * aux_in (GELU''s saved input) for one 32-column chunk (at column colc) of this thread's fragment,
 * as packed 16-bit pairs v[2 jb + h] ([8-column block jb][row half h]; the pair is columns j, j + 1
 * of one row). The loads are issued ahead of their use (the first before the tile's last wgmma
 * completes), so the epilogue waits for memory once per tile, not once per element.
 */
__device__ __forceinline__ void load_aux_chunk(const sm90_params &p, uint32_t *v, int64_t row0, int64_t colc, int t)
{
    const int warp = t / 32, lane = t % 32;
    const int64_t i0 = row0 + warp * 16 + lane / 4, j0 = colc + 2 * (lane % 4);
    const unsigned short *row = static_cast<const unsigned short *>(p.aux_in.data) + i0 * p.aux_in.rs + j0;
    if (row0 + 64 <= p.m && colc + CHUNK <= p.n) { /* inside: 8 loads off two row pointers */
        const unsigned short *row8 = row + 8 * p.aux_in.rs;
#pragma unroll
        for (int jb = 0; jb < 4; jb++) {
            v[jb * 2] = __ldg(reinterpret_cast<const unsigned int *>(row + jb * 8));
            v[jb * 2 + 1] = __ldg(reinterpret_cast<const unsigned int *>(row8 + jb * 8));
        }
        return;
    }
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t i = i0 + 8 * h, j = j0 + jb * 8;
            uint32_t x = 0;
            if (i < p.m && j < p.n) {
                const unsigned short *e = row + 8 * h * p.aux_in.rs + jb * 8;
                x = j + 1 < p.n ? __ldg(reinterpret_cast<const unsigned int *>(e)) : (uint32_t)__ldg(e);
            }
            v[jb * 2 + h] = x;
        }
}

/* The bias of this thread's columns in one chunk (at column colc) as packed 16-bit pairs, in the
 * slots of the aux pairs of row half 0 (v[2 jb]); prefetched like aux_in, since a dependent load per
 * chunk of a vector every tile reads would make the epilogue wait on L2 once per chunk. */
__device__ __forceinline__ void load_bias_chunk(const sm90_params &p, uint32_t *v, int64_t colc, int t)
{
    const int lane = t % 32;
    const unsigned short *base = static_cast<const unsigned short *>(p.bias.data);
#pragma unroll
    for (int jb = 0; jb < 4; jb++) {
        const int64_t j = colc + jb * 8 + 2 * (lane % 4);
        uint32_t x = 0;
        if (j + 1 < p.n)
            x = __ldg(reinterpret_cast<const unsigned int *>(base + j));
        else if (j < p.n)
            x = __ldg(base + j);
        v[jb * 2] = x;
    }
}

/* What the epilogue of the chunk at (row0, colc) reads, aux_in or bias pairs, into v[0..8). */
__device__ __forceinline__ void prefetch_chunk(const sm90_params &p, uint32_t *v, int64_t row0, int64_t colc, int t)
{
    if (p.aux_packed)
        load_aux_chunk(p, v, row0, colc, t);
    else if (p.bias_packed)
        load_bias_chunk(p, v, colc, t);
}

/* Prefetches what the epilogue of the two chunks at (row0, col0) reads: v[8 c .. 8 c + 8) for
 * chunk c. */
__device__ __forceinline__ void prefetch_pairs(const sm90_params &p, uint32_t (&v)[16], int64_t row0, int64_t col0,
                                               int t)
{
    prefetch_chunk(p, v, row0, col0, t);
    prefetch_chunk(p, v + 8, row0, col0 + CHUNK, t);
}

/* Element e (0: column j, 1: j + 1) of a packed pair of dtype (f16 or bf16) as fp32. */
__device__ __forceinline__ float unpack_aux(uint32_t pair, int e, int32_t dtype)
{
    return dtype == CVF_BF16 ? unpack_pair<1>(pair, e) : unpack_pair<0>(pair, e);
}

/* The GELU backward of one 32-column chunk: acc *= gelu'(aux_in), aux_in from the prefetched
 * pairs when p.aux_packed (which implies a GELU' activation), else loaded per element. */
template <int CH, bool ERF, int R>
__device__ __forceinline__ void dgelu_chunk(const sm90_params &p, float (&acc)[R], const uint32_t (&aux)[16],
                                            int64_t i0, int64_t col0, int lane)
{
    if (p.aux_packed) {
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float z = unpack_aux(aux[CH * 8 + jb * 2 + q / 2], q & 1, p.aux_in.dtype);
                acc[CH * 16 + jb * 4 + q] *= ERF ? dev_gelu_erf_derivative(z) : dev_gelu_derivative(z);
            }
        return;
    }
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            int64_t i = i0 + 8 * (q / 2), j = col0 + CH * CHUNK + jb * 8 + 2 * (lane % 4) + (q & 1);
            float z = i < p.m && j < p.n ? dev_load(p.aux_in.data, p.aux_in.dtype, i * p.aux_in.rs + j * p.aux_in.cs)
                                         : 0.0f;
            acc[CH * 16 + jb * 4 + q] *= ERF ? dev_gelu_erf_derivative(z) : dev_gelu_derivative(z);
        }
}

/* The epilogue of one 32-column chunk: bias, aux_out, activation, partial sums, C. aux: the
 * prefetched aux_in pairs of this chunk and the next (used when p.aux_packed). */
template <int CH, int R, int SLOTS>
__device__ __forceinline__ void epilogue_chunk(const sm90_params &p, const CUtensorMap *map_c,
                                               const CUtensorMap *map_aux, float (&acc)[R], stager<SLOTS> &st, int wg,
                                               int t, int64_t row0, int64_t col0, const uint32_t (&aux)[16])
{
    const int warp = t / 32, lane = t % 32;
    const int64_t i0 = row0 + warp * 16 + lane / 4;
    if (p.bias_packed) {
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float b = unpack_aux(aux[CH * 8 + jb * 2], e, p.bias.dtype);
                acc[CH * 16 + jb * 4 + e] += b;
                acc[CH * 16 + jb * 4 + 2 + e] += b;
            }
    } else if (p.bias.data) {
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int64_t j = col0 + CH * CHUNK + jb * 8 + 2 * (lane % 4) + e;
                float b = j < p.n ? dev_load(p.bias.data, p.bias.dtype, j * p.bias.stride) : 0.0f;
                acc[CH * 16 + jb * 4 + e] += b;
                acc[CH * 16 + jb * 4 + 2 + e] += b;
            }
    }
    if (p.aux_out.data)
        store_chunk<CH>(p.aux_out, map_aux, acc, st, wg, t, row0, col0, p.m, p.n);
    /* One uniform branch per activation, so that each loop holds only its own arithmetic (a
     * per-element switch gets if-converted: every element then pays for GELU's expf). */
    switch (p.activation) {
    case CVF_ACTIVATION_RELU:
#pragma unroll
        for (int q = 0; q < 16; q++) {
            float &v = acc[CH * 16 + q];
            v = v < 0.0f ? 0.0f : v; /* NaN stays NaN */
        }
        break;
    case CVF_ACTIVATION_GELU_TANH:
#pragma unroll
        for (int q = 0; q < 16; q++)
            acc[CH * 16 + q] = dev_gelu(acc[CH * 16 + q]);
        break;
    case CVF_ACTIVATION_GELU_ERF:
#pragma unroll
        for (int q = 0; q < 16; q++)
            acc[CH * 16 + q] = dev_gelu_erf(acc[CH * 16 + q]);
        break;
    case CVF_ACTIVATION_DGELU_TANH: dgelu_chunk<CH, false>(p, acc, aux, i0, col0, lane); break;
    case CVF_ACTIVATION_DGELU_ERF: dgelu_chunk<CH, true>(p, acc, aux, i0, col0, lane); break;
    default: break;
    }
    if (p.partials) { /* this warp's 16 rows, per column, in a fixed shuffle order */
        const int64_t slab_row = row0 + warp * 16;
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float s = (i0 < p.m ? acc[CH * 16 + jb * 4 + e] : 0.0f) +
                          (i0 + 8 < p.m ? acc[CH * 16 + jb * 4 + 2 + e] : 0.0f);
                s += __shfl_xor_sync(0xFFFFFFFFu, s, 4);
                s += __shfl_xor_sync(0xFFFFFFFFu, s, 8);
                s += __shfl_xor_sync(0xFFFFFFFFu, s, 16);
                int64_t j = col0 + CH * CHUNK + jb * 8 + 2 * (lane % 4) + e;
                if (lane < 4 && slab_row < p.m && j < p.n)
                    p.partials[(slab_row / CVF_CUDA_SM90_SLAB) * p.n + j] = s;
            }
    }
    store_chunk<CH>(p.c, map_c, acc, st, wg, t, row0, col0, p.m, p.n);
}

/* One step of a tile's epilogue: the two 32-column chunks at col0 of this warpgroup's rows, on
 * acc[0..32). aux_next holds their prefetched pairs and, when more, gets the next step's; the
 * accumulators then shift down by 32 registers (moves with compile-time indices), so that every
 * step runs the same code on acc[0..32). */
template <int R, int SLOTS>
__device__ __forceinline__ void epilogue_step(const sm90_params &p, const CUtensorMap *map_c,
                                              const CUtensorMap *map_aux, float (&acc)[R], stager<SLOTS> &st, int wg,
                                              int t, int64_t row0, int64_t col0, uint32_t (&aux_next)[16], bool more)
{
    uint32_t aux[16];
#pragma unroll
    for (int i = 0; i < 16; i++)
        aux[i] = aux_next[i];
    if ((p.aux_packed || p.bias_packed) && more)
        prefetch_pairs(p, aux_next, row0, col0 + 2 * CHUNK, t);
    epilogue_chunk<0>(p, map_c, map_aux, acc, st, wg, t, row0, col0, aux);
    epilogue_chunk<1>(p, map_c, map_aux, acc, st, wg, t, row0, col0, aux);
    if (more) {
#pragma unroll
        for (int i = 0; i < R - 32; i++)
            acc[i] = acc[i + 32];
    }
}

/* The whole epilogue of a tile: a run-time loop over its steps, whose body is compiled once.
 * Unrolling the 8 chunks instead made ~1 MB of SASS per kernel, and the epilogue
 * ran at a quarter of the store bandwidth (instruction fetch). Two chunks per step: 3 x 96
 * register moves per tile, not 7 x 112. The accumulators are dead afterwards: the next
 * tile's first wgmma does not read them (scale-d 0). */
template <int R, int SLOTS>
__device__ __forceinline__ void epilogue_tile(const sm90_params &p, const CUtensorMap *map_c,
                                              const CUtensorMap *map_aux, float (&acc)[R], stager<SLOTS> &st, int wg,
                                              int t, int64_t row0, int64_t col0, uint32_t (&aux_next)[16])
{
    constexpr int CHUNKS = 2 * R / CHUNK;
    static_assert(CHUNKS % 2 == 0, "two chunks a step");
#pragma unroll 1
    for (int ch = 0; ch < CHUNKS; ch += 2)
        epilogue_step(p, map_c, map_aux, acc, st, wg, t, row0, col0 + ch * CHUNK, aux_next, ch + 2 < CHUNKS);
}

/* The lean epilogue's recipes: a compile-time set of steps (LEAN_ON always set, so that 0 means
 * the general epilogue). The activation is in bits 4-5. */
constexpr int LEAN_ON = 1, LEAN_BIAS = 2, LEAN_AUX_OUT = 4, LEAN_SUMS = 8;
constexpr int LEAN_RELU = 1 << 4, LEAN_GELU = 2 << 4, LEAN_DGELU = 3 << 4, LEAN_ACT_MASK = 3 << 4;
/* Beside a recipe: it runs in the epilogue warpgroup's kernel (epilogue_warps), not in the
 * consumers (the host sets it for GELU' +- sums, 256-wide tiles, aux_in rows 16-byte aligned);
 * or, LEAN_RELAY, in the relay kernel (plain and ReLU, 256-wide tiles: relay_warp). */
constexpr int LEAN_WARPS = 1 << 6, LEAN_RELAY = 1 << 7;
static_assert(LEAN_WARPS == CVF_CUDA_LEAN_WARPS && LEAN_RELAY == CVF_CUDA_LEAN_RELAY, "the tests' names of them");
/* The recipes compiled into every EPI_CONSUMERS kernel, lean_kind(0 .. LEAN_KIND_COUNT) (the host
 * picks one of them or the general epilogue):
 * plain and ReLU, with and without bias (MatMul+ReLU, the plain GEMMs, fc2); bias + GELU with and
 * without aux_out (fc1 in training and in inference); GELU' with and without the bias-gradient
 * sums (K1). */
__host__ __device__ constexpr int lean_kind(int i)
{
    switch (i) {
    case 0: return LEAN_ON;
    case 1: return LEAN_ON | LEAN_RELU;
    case 2: return LEAN_ON | LEAN_BIAS;
    case 3: return LEAN_ON | LEAN_BIAS | LEAN_RELU;
    case 4: return LEAN_ON | LEAN_BIAS | LEAN_GELU;
    case 5: return LEAN_ON | LEAN_BIAS | LEAN_GELU | LEAN_AUX_OUT;
    case 6: return LEAN_ON | LEAN_DGELU;
    case 7: return LEAN_ON | LEAN_DGELU | LEAN_SUMS;
    default: return -1;
    }
}
constexpr int LEAN_KIND_COUNT = 8;

/* Whether recipe f is one of the lean kinds (host and device). */
__host__ __device__ constexpr bool lean_supported(int f)
{
    for (int i = 0; i < LEAN_KIND_COUNT; i++)
        if (lean_kind(i) == f)
            return true;
    return false;
}

/* The sums, over the 8 lanes that share lane % 4 (lane / 4 = 0..7), of the 8 values s8 each holds:
 * they halve them three times, each keeping one half and sending the other (xor 16, 8, 4: 7
 * shuffles, where a full butterfly per value takes 24); lane then holds the sum of value lane / 4
 * (= 4 (lane & 16) / 16 + 2 (lane & 8) / 8 + (lane & 4) / 4). The bias-gradient slab sums of the
 * consumers (column_sums) and of the epilogue warps (ew_chunk_end). */
__device__ __forceinline__ float halve_sums8(const float (&s8)[8], int lane)
{
    float s4[4], s2[2];
    bool up = lane & 16; /* keeps the upper half, sends the lower */
#pragma unroll
    for (int i = 0; i < 4; i++)
        s4[i] = (up ? s8[i + 4] : s8[i]) + __shfl_xor_sync(0xFFFFFFFFu, up ? s8[i] : s8[i + 4], 16);
    up = lane & 8;
#pragma unroll
    for (int i = 0; i < 2; i++)
        s2[i] = (up ? s4[i + 2] : s4[i]) + __shfl_xor_sync(0xFFFFFFFFu, up ? s4[i] : s4[i + 2], 8);
    up = lane & 4;
    return (up ? s2[1] : s2[0]) + __shfl_xor_sync(0xFFFFFFFFu, up ? s2[0] : s2[1], 4);
}

/* The bias-gradient partial sums of chunk CH (columns from colc): per column, the sum over this
 * warp's 16 rows, stored to its slab's row of p.partials. Each lane adds its two rows of its 8
 * columns, halve_sums8 reduces them over the 8 lanes that share them, and lane then holds the sum
 * of column lane / 4 (= 2 jb + e): the warp's 32 lanes store the chunk's 32 columns at once. */
template <int CH, int R>
__device__ __forceinline__ void column_sums(const sm90_params &p, const float (&acc)[R], int t, int64_t row0,
                                            int64_t colc)
{
    const int warp = t / 32, lane = t % 32;
    float s8[8];
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            s8[jb * 2 + e] = acc[CH * 16 + jb * 4 + e] + acc[CH * 16 + jb * 4 + 2 + e];
    const float s = halve_sums8(s8, lane);
    const int f = lane >> 2;
    const int64_t slab_row = row0 + warp * 16, j = colc + (f >> 1) * 8 + 2 * (lane % 4) + (f & 1);
    if (slab_row < p.m && j < p.n)
        p.partials[(slab_row / CVF_CUDA_SM90_SLAB) * p.n + j] = s;
}

/* The chunk's bias (pairs in ld[2 jb]) added to both row halves. */
template <int DT, int CH, int R>
__device__ __forceinline__ void add_bias(float (&acc)[R], const uint32_t (&ld)[8])
{
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float b = unpack_pair<DT>(ld[jb * 2], e);
            acc[CH * 16 + jb * 4 + e] += b;
            acc[CH * 16 + jb * 4 + 2 + e] += b;
        }
}

/* The lean epilogue's activation of chunk CH (ReLU is left to the rounding cvt); ld: aux_in's
 * pairs (GELU'). */
template <int DT, int ACT, int CH, int R>
__device__ __forceinline__ void lean_activation(float (&acc)[R], const uint32_t (&ld)[8])
{
#pragma unroll
    for (int jb = 0; jb < 4; jb++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float &v = acc[CH * 16 + jb * 4 + q];
            if (ACT == LEAN_GELU)
                v = dev_gelu(v);
            else if (ACT == LEAN_DGELU)
                v *= dev_gelu_derivative(unpack_pair<DT>(ld[jb * 2 + q / 2], q & 1));
        }
}

/* The accumulators of this thread's rows at or past m set to 0, so that the column sums see only
 * rows of C (a row past m is computed on A's zero fill, which an inf in B makes NaN). */
template <int R>
__device__ __forceinline__ void zero_rows_past_m(const sm90_params &p, float (&acc)[R], int t, int64_t row0)
{
    const int64_t i0 = row0 + (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
    for (int i = 0; i < R; i++)
        if (i0 + 8 * ((i % 4) / 2) >= p.m)
            acc[i] = 0.0f;
}

/* One chunk of the lean epilogue F (a lean_kind): bias, aux_out, activation, column sums,
 * C. Without aux_out two chunks share one bulk group (one fence and barrier); with it, each chunk's
 * aux_out and C boxes do. */
template <int DT, int F, int CH, int R, int SLOTS>
__device__ __forceinline__ void lean_chunk(const sm90_params &p, const CUtensorMap *map_c,
                                           const CUtensorMap *map_aux, float (&acc)[R], stager<SLOTS> &st, int wg,
                                           int t, int64_t row0, int64_t col0, const uint32_t (&ld)[8])
{
    constexpr int ACT = F & LEAN_ACT_MASK;
    const int64_t colc = col0 + CH * CHUNK;
    if (F & LEAN_BIAS)
        add_bias<DT, CH>(acc, ld);
    if (F & LEAN_AUX_OUT)
        stage_chunk<DT, false, CH>(st, acc, t, 0);
    lean_activation<DT, ACT, CH>(acc, ld);
    if (F & LEAN_SUMS)
        column_sums<CH>(p, acc, t, row0, colc);
    if (F & LEAN_AUX_OUT) {
        stage_chunk<DT, ACT == LEAN_RELU, CH>(st, acc, t, 1);
        const CUtensorMap *const maps[2] = {map_aux, map_c};
        const int64_t cols[2] = {colc, colc};
        put_group<2>(maps, cols, st, wg, t, row0, p.m, p.n);
    } else {
        stage_chunk<DT, ACT == LEAN_RELU, CH>(st, acc, t, CH % 2);
        if (CH % 2 == 1) {
            const CUtensorMap *const maps[2] = {map_c, map_c};
            const int64_t cols[2] = {colc - CHUNK, colc};
            put_group<2>(maps, cols, st, wg, t, row0, p.m, p.n);
        }
    }
}

/* What chunk (row0, colc) of recipe F reads, into v: aux_in pairs (GELU'), or bias pairs (in v[2 jb]
 * only, so that the odd slots take no registers). */
template <int F>
__device__ __forceinline__ void lean_prefetch(const sm90_params &p, uint32_t (&v)[8], int64_t row0, int64_t colc,
                                              int t)
{
    if constexpr ((F & LEAN_ACT_MASK) == LEAN_DGELU)
        load_aux_chunk(p, v, row0, colc, t);
    else if constexpr ((F & LEAN_BIAS) != 0)
        load_bias_chunk(p, v, colc, t);
}

/* The lean epilogue's chunks from CH on, each loading the aux_in or bias pairs of the chunk AHEAD
 * places after it (ld[c % AHEAD] holds chunk c's) before its own work; compile-time recursion, so
 * that every accumulator index is a constant (no register shifts, no loop). */
template <int DT, int F, int CH, int AHEAD, int R, int SLOTS>
__device__ __forceinline__ void lean_chunks(const sm90_params &p, const CUtensorMap *map_c,
                                            const CUtensorMap *map_aux, float (&acc)[R], stager<SLOTS> &st, int wg,
                                            int t, int64_t row0, int64_t col0, uint32_t (&ld)[AHEAD][8])
{
    constexpr int CHUNKS = 2 * R / CHUNK;
    if constexpr (CH < CHUNKS) {
        uint32_t cur[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            cur[i] = ld[CH % AHEAD][i];
        if (CH + AHEAD < CHUNKS)
            lean_prefetch<F>(p, ld[CH % AHEAD], row0, col0 + (CH + AHEAD) * CHUNK, t);
        lean_chunk<DT, F, CH>(p, map_c, map_aux, acc, st, wg, t, row0, col0, cur);
        lean_chunks<DT, F, CH + 1, AHEAD>(p, map_c, map_aux, acc, st, wg, t, row0, col0, ld);
    }
}

/*
 * The lean epilogue (p.lean: recipe F, a lean_kind; outputs in the operands' 16-bit dtype, C and
 * aux_out by TMA, bias and aux_in as prefetched pairs): every chunk unrolled with compile-time
 * indices, each value rounded (and ReLU-clamped) by one cvt per pair, the bias-gradient sums by
 * halving exchanges, aux_in / bias loaded 4 chunks ahead, one fence and barrier per two boxes.
 * pre: chunks 0 and 1's pairs, loaded by the consumer before the tile's last wgmma completed. The
 * general epilogue (epilogue_tile) runs ~1900 instructions per warp and tile at no epilogue, 384 of
 * them the if-converted register shifts of its loop (H200 ncu, MatMul+ReLU K = 64), ~5750 for fc1's
 * bias + GELU + aux_out; MatMul+ReLU 16384 x 8192 x 64 took 0.217 ms general, 0.089 lean.
 */
template <int DT, int F, int R, int SLOTS>
__device__ __forceinline__ void lean_tile(const sm90_params &p, const CUtensorMap *map_c, const CUtensorMap *map_aux,
                                          float (&acc)[R], stager<SLOTS> &st, int wg, int t, int64_t row0,
                                          int64_t col0, const uint32_t (&pre)[16])
{
    constexpr int AHEAD = 4, CHUNKS = 2 * R / CHUNK;
    static_assert(CHUNKS % 2 == 0 && CHUNKS >= AHEAD, "chunks in pairs");
    /* the rows past m are zeroed before the bias and the sums take the values before the rounding
     * cvt's ReLU: right for GELU' alone (gelu'(0) x 0 = 0), not for a bias or a ReLU */
    static_assert(!(F & LEAN_SUMS) || (F & ~LEAN_SUMS) == (LEAN_ON | LEAN_DGELU), "sums only with GELU' alone");
    uint32_t ld[AHEAD][8];
#pragma unroll
    for (int c = 0; c < AHEAD; c++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            ld[c][i] = c < 2 ? pre[c * 8 + i] : 0u;
#pragma unroll
    for (int c = 2; c < AHEAD; c++)
        lean_prefetch<F>(p, ld[c], row0, col0 + c * CHUNK, t);
    if ((F & LEAN_SUMS) && row0 + 64 > p.m)
        zero_rows_past_m(p, acc, t, row0);
    lean_chunks<DT, F, 0, AHEAD>(p, map_c, map_aux, acc, st, wg, t, row0, col0, ld);
}

/* lean_tile with the recipe p.lean, found among lean_kind(I ..) (each a compiled variant). */
template <int DT, int I = 0, int R, int SLOTS>
__device__ __forceinline__ void lean_dispatch(const sm90_params &p, const CUtensorMap *map_c,
                                              const CUtensorMap *map_aux, float (&acc)[R], stager<SLOTS> &st,
                                              int wg, int t, int64_t row0, int64_t col0, const uint32_t (&pre)[16])
{
    if constexpr (I < LEAN_KIND_COUNT) {
        if (p.lean == lean_kind(I))
            lean_tile<DT, lean_kind(I)>(p, map_c, map_aux, acc, st, wg, t, row0, col0, pre);
        else
            lean_dispatch<DT, I + 1>(p, map_c, map_aux, acc, st, wg, t, row0, col0, pre);
    }
}

/* The shared-memory ring: STAGES stages of A (BM x BK) and B (BK x N), each with a "full"
 * mbarrier (the copy engine completes its bytes on it) and an "empty" one (both consumers
 * arrive when their wgmmas have read the stage; with pairs, the consumers of both CTAs, since
 * either producer's multicast writes the stage in both), and the unit id the producer published
 * with a unit's first stage. With pairs each stage also has a mailbox and its "mail" mbarrier:
 * the first CTA's producer sends the unit it took to the second's. */
struct ring {
    uint32_t a, b; /* shared-memory addresses of stage 0's A and B */
    uint32_t full0, empty0, mail_bar0;
    int32_t *stage_unit;
    int32_t *mail;
    uint32_t rank; /* this CTA's rank in its cluster */
};

/* A position in the ring: the stage and the parity of its current use. */
struct ring_pos {
    int stage;
    uint32_t phase;
};

template <int STAGES>
__device__ __forceinline__ void advance(ring_pos &r)
{
    if (++r.stage == STAGES) {
        r.stage = 0;
        r.phase ^= 1;
    }
}

/* The producer's copies of one K-slice kt of segment g into stage r (whose "empty" wait is done):
 * its A rows, and B: all of it, or with pairs this CTA's share (the 64-column boxes q of an N-major
 * B with q % 2 = rank, rows [N/2 rank, N/2 rank + N/2) of a K-major one), multicast into both. The
 * stage's "full" barrier expects all of A and B either way; the peer's half completes on it. */
template <int N, int A_MN, int B_MN>
__device__ __forceinline__ void load_slice(const sm90_params &p, const ring &rg, const ring_pos &r,
                                           const CUtensorMap *map_a, const CUtensorMap *map_b, const segment &g,
                                           int32_t kt)
{
    constexpr int B_STAGE = tile_cfg<N>::B_STAGE, BOXES = N / 64;
    const uint32_t full = rg.full0 + 8 * r.stage;
    mbar_expect_tx(full, A_STAGE + B_STAGE);
    const uint32_t a_dst = rg.a + r.stage * A_STAGE;
    const uint32_t b_dst = rg.b + r.stage * B_STAGE;
    if (A_MN) {
        tma_load_2d(a_dst, map_a, g.tm * BM, kt * BK, full);
        tma_load_2d(a_dst + 8192, map_a, g.tm * BM + 64, kt * BK, full);
    } else {
        tma_load_2d(a_dst, map_a, kt * BK, g.tm * BM, full);
    }
    if (p.cluster == 2) {
        const int32_t h = (int32_t)rg.rank;
        if (B_MN) { /* the 64-column boxes q with q % 2 == rank */
#pragma unroll
            for (int q = 0; q < BOXES; q++)
                if (q % 2 == h)
                    tma_load_2d_multicast(b_dst + q * 8192, map_b, g.tn * N + q * 64, kt * BK, full, 3);
        } else {
            tma_load_2d_multicast(b_dst + h * (B_STAGE / 2), map_b, kt * BK, g.tn * N + h * (N / 2), full, 3);
        }
        return;
    }
    if (B_MN) {
#pragma unroll
        for (int q = 0; q < BOXES; q++)
            tma_load_2d(b_dst + q * 8192, map_b, g.tn * N + q * 64, kt * BK, full);
    } else { /* boxes of N / 2 rows (the map's box, for the pairs' halves) */
        tma_load_2d(b_dst, map_b, kt * BK, g.tn * N, full);
        tma_load_2d(b_dst + B_STAGE / 2, map_b, kt * BK, g.tn * N + N / 2, full);
    }
}

/* The producer's next unit of the cluster, taken when stage r is free: from the counter; with
 * pairs, the first CTA takes it and sends it through the stage's mailbox to the second, which
 * waits for it (mail_phase: the parity of each stage's mail barrier, one bit a stage). */
__device__ __forceinline__ int32_t take_unit(const sm90_params &p, const ring &rg, const ring_pos &r,
                                             uint32_t *mail_phase)
{
    if (p.cluster == 1)
        return atomicAdd(p.sync, 1);
    const uint32_t mail = smem_addr(rg.mail + r.stage), bar = rg.mail_bar0 + 8 * r.stage;
    if (rg.rank == 0) {
        const int32_t cu = atomicAdd(p.sync, 1);
        asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(peer_addr(mail, 1)), "r"(cu) : "memory");
        mbar_arrive_cluster(peer_addr(bar, 1));
        return cu;
    }
    mbar_wait<true>(bar, (*mail_phase >> r.stage) & 1);
    *mail_phase ^= 1u << r.stage;
    int32_t cu;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(cu) : "r"(mail) : "memory");
    return cu;
}

/*
 * The producer (one thread): takes units from the counter, one only once a stage is free for
 * it (a CTA never holds work it cannot start, so CTAs that start late, behind another stream's
 * kernel, take less), publishes each unit's id with its first stage, and loads the unit's
 * K-slices, segment after segment. A -1 unit id tells the consumers to stop. The last CTA to
 * finish resets the counters for the next launch.
 */
template <int N, int A_MN, int B_MN, bool HANDOFF>
__device__ __forceinline__ void producer(const sm90_params &p, const ring &rg, const CUtensorMap *map_a,
                                         const CUtensorMap *map_b)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_b)) : "memory");
    ring_pos r = {0, 0};
    uint32_t mail_phase = 0;
    for (;;) {
        mbar_wait(rg.empty0 + 8 * r.stage, r.phase ^ 1);
        const int32_t cu = take_unit(p, rg, r, &mail_phase);
        /* The unit id is published by the arrive on the stage's full barrier (release.cta; the
         * consumers' wait acquires). Shared atomics, so that racecheck, which does not follow
         * mbarriers, sees no plain-store hazard. */
        if (cu >= p.units) {
            atomicExch(rg.stage_unit + r.stage, -1);
            mbar_arrive(rg.full0 + 8 * r.stage);
            break;
        }
        const int32_t u = cta_unit(p, cu, rg.rank);
        atomicExch(rg.stage_unit + r.stage, u);
        unit_cursor c;
        segment g = first_segment(p, u, &c);
        bool waited = true; /* the unit's first stage is free already */
        do {
            for (int32_t kt = g.kt0; kt < g.kt1; kt++) {
                if (!waited)
                    mbar_wait(rg.empty0 + 8 * r.stage, r.phase ^ 1);
                waited = false;
                load_slice<N, A_MN, B_MN>(p, rg, r, map_a, map_b, g, kt);
                advance<tile_cfg<N, HANDOFF>::STAGES>(r);
            }
        } while (next_segment(p, &c, &g));
    }
    __threadfence();
    if (atomicAdd(p.sync + 1, 1) == (int32_t)gridDim.x - 1) {
        p.sync[0] = 0;
        p.sync[1] = 0;
    }
}

/* A consumer warpgroup's wgmmas have read stage s: one arrive on its "empty" barrier, or with pairs
 * on that of both CTAs (either producer's multicast writes the stage in both). */
__device__ __forceinline__ void release_stage(const sm90_params &p, const ring &rg, int s)
{
    const uint32_t bar = rg.empty0 + 8 * s;
    mbar_arrive(bar);
    if (p.cluster == 2) /* release at CTA scope, as the local arrive: a cluster-scope release here,
                           once a K-slice, made the pairs 1.5-2x slower (H200) */
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(peer_addr(bar, rg.rank ^ 1)) : "memory");
}

/* One m64nNk16 wgmma of dtype DT (0 f16, 1 bf16) into acc (N = 2 R). */
template <int DT, int A_MN, int B_MN, int R>
__device__ __forceinline__ void wgmma_k16(float (&acc)[R], uint64_t da, uint64_t db, int scale_d)
{
    if (DT == 0)
        wgmma_m64k16_f16<A_MN, B_MN>(acc, da, db, scale_d);
    else
        wgmma_m64k16_bf16<A_MN, B_MN>(acc, da, db, scale_d);
}

/* Issues this warpgroup's wgmmas of the K-slice in stage r (its 64 rows of A, all of B) into acc,
 * as one committed group; accumulate: add to acc (else overwrite it). HALVES: each k16 step as two
 * m64n(N/2) wgmmas on the two column halves (acc[0, R/2) and acc[R/2, R) in the fragment layout; B's
 * half starts N/2 x 128 bytes in, for either layout): at 512 threads ptxas checks every
 * instruction against the 128 registers a thread has at entry, which an m64n256 wgmma's 128
 * accumulators exceed, whatever setmaxnreg gives the code around it. */
template <int DT, int A_MN, int B_MN, bool HALVES, int R>
__device__ __forceinline__ void issue_slice(const ring &rg, const ring_pos &r, float (&acc)[R], int wg,
                                            bool accumulate)
{
    constexpr int B_STAGE = tile_cfg<2 * R>::B_STAGE;
    /* MN-major operands: 64-element blocks along M/N 8 KB apart (LBO), 8-row K groups 1 KB apart (SBO) */
    const uint32_t mn_lbo = 8192, mn_sbo = 1024;
    const uint32_t a_base = rg.a + r.stage * A_STAGE + wg * 8192;
    const uint32_t b_base = rg.b + r.stage * B_STAGE;
    fence_acc(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
        uint64_t da = A_MN ? make_desc(a_base + kk * 2048, mn_lbo, mn_sbo) : make_desc(a_base + kk * 32, 16, 1024);
        uint64_t db = B_MN ? make_desc(b_base + kk * 2048, mn_lbo, mn_sbo) : make_desc(b_base + kk * 32, 16, 1024);
        if constexpr (HALVES) {
            float(&lo)[R / 2] = *reinterpret_cast<float(*)[R / 2]>(&acc[0]);
            float(&hi)[R / 2] = *reinterpret_cast<float(*)[R / 2]>(&acc[R / 2]);
            const uint64_t db_hi = B_MN ? make_desc(b_base + R * 128 + kk * 2048, mn_lbo, mn_sbo)
                                        : make_desc(b_base + R * 128 + kk * 32, 16, 1024);
            wgmma_k16<DT, A_MN, B_MN>(lo, da, db, accumulate || kk > 0);
            wgmma_k16<DT, A_MN, B_MN>(hi, da, db_hi, accumulate || kk > 0);
        } else {
            wgmma_k16<DT, A_MN, B_MN>(acc, da, db, accumulate || kk > 0);
        }
    }
    wgmma_commit();
    fence_acc(acc);
}

/*
 * A consumer warpgroup's mainloop over the K-slices of segment g: its 64 rows of the tile into
 * acc (the first slice overwrites). One wgmma group stays in flight: a stage is given back once
 * the next slice's wgmmas are issued; the last one is handed back in *last, still in use (the
 * caller waits for the wgmmas, then arrives on it). first_waited: the first slice's "full" wait
 * is done (a unit's first slice, waited on to read the unit id).
 */
template <int DT, int A_MN, int B_MN, bool HANDOFF, bool HALVES, int R>
__device__ __forceinline__ void mainloop(const sm90_params &p, const ring &rg, ring_pos &r, const segment &g,
                                         bool first_waited, float (&acc)[R], int wg, int t, int *last)
{
    int prev = -1;
    for (int32_t kt = g.kt0; kt < g.kt1; kt++) {
        if (kt != g.kt0 || !first_waited)
            mbar_wait(rg.full0 + 8 * r.stage, r.phase);
        issue_slice<DT, A_MN, B_MN, HALVES>(rg, r, acc, wg, kt > g.kt0);
        if (prev >= 0) { /* the previous slice's wgmmas are done: give its stage back */
            wgmma_wait<1>();
            fence_acc(acc);
            if (t == 0)
                release_stage(p, rg, prev);
        }
        prev = r.stage;
        advance<tile_cfg<2 * R, HANDOFF>::STAGES>(r);
    }
    *last = prev;
}

/* A consumer warpgroup's output staging (its ring of SLOTS boxes), the output maps prefetched. */
template <int SLOTS>
__device__ __forceinline__ stager<SLOTS> consumer_stager(const sm90_params &p, const CUtensorMap *map_c,
                                                         const CUtensorMap *map_aux, unsigned char *staging, int wg,
                                                         int t)
{
    stager<SLOTS> st;
    st.buf = staging + wg * SLOTS * SLOT_BYTES;
    st.slot = 0;
    if (t == 0) {
        if (p.c.tma)
            asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_c)) : "memory");
        if (p.aux_out.tma)
            asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_aux)) : "memory");
    }
    return st;
}

/*
 * The handoff of the epilogue warpgroup's kernel and of the relay kernel: per consumer warpgroup,
 * its finished 64 x 256 half tile rounded to 16 bits, chunk c (32 columns) in box c of buf in the
 * TMA's 64-byte swizzle (stage_pairs_at), with [tm, tn] of the tile, or tm = -1: no more. Two
 * named barriers of the 128 consumer threads and the 64 of the two epilogue warps (the 32 of the
 * relay warp) serving the warpgroup order it
 * (bar.arrive releases, bar.sync acquires; no spinning, unlike an mbarrier's try_wait): "full",
 * which the consumers arrive on once written and the epilogue (relay) warps sync on, and "empty",
 * the other way round once those warps' TMA stores have read the boxes (and once at the start:
 * the buffer starts empty). compute-sanitizer's racecheck does not follow this arrive / sync
 * ordering (nor the mbarrier one it replaced) and reports the boxes' writes and reads as hazards:
 * docs/PERF.md, issue 12 part 6. One half at a time: the consumers finish a tile's mainloop about
 * when the epilogue of the one before ends.
 */
constexpr int HANDOFF_BARRIER = 3; /* full: 3 + 2 wg, empty: 4 + 2 wg (1, 2: put_group's and piece_exchange's) */

/*
 * A shared word that every lane of a warp needs (a stage's unit id, a handed-off tile's
 * coordinates): lane 0 reads it with a shared atomic, which racecheck follows where it does not
 * follow the mbarriers and named barriers that order the write, and a shuffle hands it to the
 * other lanes. Thirty-two lanes' atomics on one word would run as 32 shared-memory wavefronts
 * (docs/PERF.md, 2026-12-06 second session, step 6). The whole warp must call it.
 */
__device__ __forceinline__ int32_t warp_read_word(int32_t *word)
{
    int32_t v = 0;
    if ((threadIdx.x & 31) == 0)
        v = atomicOr(word, 0);
    return __shfl_sync(0xffffffffu, v, 0);
}

struct handoff {
    unsigned char *buf;
    int full, empty; /* named barrier ids */
    int threads;     /* of each barrier: the consumer warpgroup and the warps it hands off to */
    int32_t *tile;
    int32_t *next; /* [tm, tn] of the tile whose mainloop the warpgroup runs now (a hint), or -1 */
};

__device__ __forceinline__ void named_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ handoff handoff_of(unsigned char *buf, int32_t *tiles, int wg, int epi)
{
    handoff h;
    h.threads = 128 + (epi == EPI_RELAY ? 1 : 2) * 32;
    h.buf = buf + wg * tile_cfg<BN_MAX, true>::STAGE_BYTES;
    h.full = HANDOFF_BARRIER + 2 * wg;
    h.empty = HANDOFF_BARRIER + 2 * wg + 1;
    h.tile = tiles + 2 * wg;
    h.next = tiles + 4 + 2 * wg;
    return h;
}

/* Chunks CH.. of acc rounded to 16-bit pairs of dtype DT (RELU: clamped at 0 in the same
 * conversion) into the handoff's boxes. */
template <int DT, bool RELU, int CH, int R>
__device__ __forceinline__ void handoff_chunks(unsigned char *buf, const float (&acc)[R], int t)
{
    if constexpr (CH < 2 * R / CHUNK) {
        uint32_t bits[4][2];
        pack_chunk<DT, RELU, CH>(acc, bits);
        stage_pairs_at(buf + CH * SLOT_BYTES, bits, t);
        handoff_chunks<DT, RELU, CH + 1>(buf, acc, t);
    }
}

/* A consumer warpgroup hands its half of tile (tm, tn) (tm = -1: the end) to the epilogue or
 * relay warps, once they are done with the one before. For the relay's recipes (p.lean: none or
 * ReLU) the boxes are C's final values, which the relay warp's TMA stores read as they are: each
 * writer orders its shared-memory writes before them (fence.proxy.async, then the arrive). */
template <int DT, int R>
__device__ __forceinline__ void handoff_put(const sm90_params &p, const handoff &h, const float (&acc)[R], int t,
                                            int32_t tm, int32_t tn)
{
    named_barrier(h.empty, h.threads);
    if (tm >= 0) {
        const int act = p.lean & LEAN_ACT_MASK;
        if (act == LEAN_RELU)
            handoff_chunks<DT, true, 0>(h.buf, acc, t);
        else
            handoff_chunks<DT, false, 0>(h.buf, acc, t);
        if (act != LEAN_DGELU)
            fence_proxy_async();
    }
    if (t == 0) {
        atomicExch(h.tile, tm);
        atomicExch(h.tile + 1, tn);
    }
    named_arrive(h.full, h.threads);
}

/*
 * A consumer warpgroup (rows [64 wg, 64 wg + 64) of each tile): for every unit, every segment:
 * the mainloop, then the epilogue of a whole tile (EPI_WARPGROUP, EPI_RELAY: the handoff), or the
 * stream-K exchange of a piece of a cut tile (the last piece to finish runs the epilogue).
 */
template <int N, int DT, int A_MN, int B_MN, int EPI>
__device__ __forceinline__ void consumer(const sm90_params &p, const ring &rg, const CUtensorMap *map_c,
                                         const CUtensorMap *map_aux, unsigned char *staging, int wg, int t,
                                         volatile int32_t *xchg, const handoff &h)
{
    constexpr bool HANDOFF = EPI != EPI_CONSUMERS;
    using CFG = tile_cfg<N, HANDOFF>;
    stager<CFG::SLOTS> st = consumer_stager<CFG::SLOTS>(p, map_c, map_aux, staging, wg, t);
    const bool prefetch = !HANDOFF && (p.aux_packed || p.bias_packed);
    float acc[CFG::R];
#pragma unroll
    for (int i = 0; i < CFG::R; i++)
        acc[i] = 0.0f;
    ring_pos r = {0, 0};
    for (;;) {
        mbar_wait(rg.full0 + 8 * r.stage, r.phase); /* the next unit's first K-slice, or the stop */
        const int32_t u = warp_read_word(rg.stage_unit + r.stage);
        if (u < 0)
            break;
        unit_cursor c;
        segment g = first_segment(p, u, &c);
        bool first_waited = true;
        do {
            int last;
            /* announce the tile (the epilogue warps' first aux_in loads) */
            if (EPI == EPI_WARPGROUP && t == 0) {
                atomicExch(h.next, g.tm);
                atomicExch(h.next + 1, g.tn);
            }
            mainloop<DT, A_MN, B_MN, HANDOFF, EPI == EPI_WARPGROUP>(p, rg, r, g, first_waited, acc, wg, t, &last);
            first_waited = false;
            const int64_t row0 = (int64_t)g.tm * BM + wg * 64, col0 = (int64_t)g.tn * N;
            const bool whole = g.kt0 == 0 && g.kt1 == p.k_tiles;
            const bool past_m = g.tm >= p.tiles_m; /* a pair's second tile past an odd tiles_m */
            uint32_t aux[16]; /* the first two chunks' aux_in, loaded while the last wgmmas run */
#pragma unroll
            for (int q = 0; q < 16; q++)
                aux[q] = 0;
            if (prefetch && whole && !past_m)
                prefetch_pairs(p, aux, row0, col0, t);
            wgmma_wait<0>();
            fence_acc(acc);
            if (t == 0)
                release_stage(p, rg, last);
            if (past_m)
                continue; /* all of its pieces skip the exchange alike */
            if (!whole) {
                if (!piece_exchange(p, acc, g, u, wg, t, xchg))
                    continue; /* to next_segment */
                if (prefetch)
                    prefetch_pairs(p, aux, row0, col0, t);
            }
            if constexpr (HANDOFF)
                handoff_put<DT>(p, h, acc, t, g.tm, g.tn);
            else if (p.lean)
                lean_dispatch<DT>(p, map_c, map_aux, acc, st, wg, t, row0, col0, aux);
            else
                epilogue_tile(p, map_c, map_aux, acc, st, wg, t, row0, col0, aux);
        } while (next_segment(p, &c, &g));
    }
    if constexpr (HANDOFF)
        handoff_put<DT>(p, h, acc, t, -1, 0);
    else if (t == 0)
        bulk_wait_all(); /* the staging buffers stay until the last stores have read them */
}

/* aux_in's 8 columns [col, col + 8) of row i (16-byte aligned: aux_in's rows are, in the epilogue warpgroup's kernel)
 * as packed 16-bit values; inside: all of them in the matrix, else those outside read as 0. The
 * whole units bypass L1 (read once; the ring and the handoffs leave L1 ~28 KB, worked out, not
 * measured): 2-5% off K1 at 16448 x 4096 x 1024 and 16448 x 5120 x 1280, even at ViT-B
 * (docs/PERF.md, 2026-12-06 fourth session, step 5). */
__device__ __forceinline__ uint4 load_aux8(const sm90_params &p, int64_t i, int64_t col, bool inside)
{
    const unsigned short *e = static_cast<const unsigned short *>(p.aux_in.data) + i * p.aux_in.rs + col;
    if (inside) {
        uint4 v;
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(e));
        return v;
    }
    unsigned short v[8];
#pragma unroll
    for (int q = 0; q < 8; q++)
        v[q] = i < p.m && col + q < p.n ? __ldg(e + q) : (unsigned short)0;
    return make_uint4(v[0] | (uint32_t)v[1] << 16, v[2] | (uint32_t)v[3] << 16, v[4] | (uint32_t)v[5] << 16,
                      v[6] | (uint32_t)v[7] << 16);
}

/* Word w of a uint4. */
__device__ __forceinline__ uint32_t word_of(const uint4 &v, int w)
{
    return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

/* One 16-byte unit of an epilogue warp's chunk (ew_chunk, ew_chunk_boxed): the rounded product in
 * cell (8 values of row `row`), aux_in's 8 values in a; C's 16-bit values written back in place
 * and, with sums, added to s8 (unit i of the chunk: the first sets it). INSIDE: row is in the
 * matrix. */
template <int DT, bool INSIDE>
__device__ __forceinline__ void ew_unit(const sm90_params &p, uint4 *cell, const uint4 &a, int64_t row, int i,
                                        bool sums, float (&s8)[8])
{
    const uint4 v = *cell;
    float x[8], y[8];
    uint32_t out[4];
#pragma unroll
    for (int q = 0; q < 8; q++)
        x[q] = unpack_pair<DT>(word_of(a, q / 2), q % 2);
    dev_gelu_derivative_n(x, y);
#pragma unroll
    for (int q = 0; q < 8; q++)
        y[q] *= unpack_pair<DT>(word_of(v, q / 2), q % 2);
#pragma unroll
    for (int w = 0; w < 4; w++)
        out[w] = pack_pair<DT, false>(y[2 * w], y[2 * w + 1]);
    *cell = make_uint4(out[0], out[1], out[2], out[3]);
    if (sums) {
        const bool row_in = INSIDE || row < p.m; /* a row past m is A's zero fill (NaN with an inf in B) */
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const float y_in = row_in ? y[q] : 0.0f;
            s8[q] = i ? s8[q] + y_in : y_in;
        }
    }
}

/* The end of an epilogue warp's chunk: the bias-gradient sums of its 64 rows (one slab of EW_SLAB
 * rows: one reduction over the lanes a chunk) and the box's TMA store. */
template <bool INSIDE>
__device__ __forceinline__ void ew_chunk_end(const sm90_params &p, const CUtensorMap *map_c, unsigned char *box,
                                             int64_t row0, int64_t colc, const float (&s8)[8], bool sums, int lane)
{
    if (sums) {
        const float s = halve_sums8(s8, lane); /* of column 8 u + lane / 4 */
        const int64_t j = colc + 8 * (lane & 3) + (lane >> 2);
        if (INSIDE || (row0 < p.m && j < p.n))
            p.partials[(row0 / EW_SLAB) * p.n + j] = s;
    }
    fence_proxy_async();
    __syncwarp();
    if (lane == 0 && colc < p.n) {
        tma_store_2d(map_c, smem_addr(box), (int32_t)colc, (int32_t)row0);
        bulk_commit();
    }
}

/*
 * One epilogue warp's GELU' of a handed-off chunk (64 rows x 32 columns at (row0, colc), in box)
 * with aux_in loaded by the warp: lane takes 16-byte unit u = lane % 4 (columns 8 u ..) of rows
 * lane / 4 + 8 i, i = 0..7 (ew_unit), then ew_chunk_end. aux_in is loaded 4 units ahead: av[i % 4]
 * holds unit i's on entry to unit i, which then loads unit i + 4's (units 8..11 being units 0..3 of
 * the chunk at next_colc, if next). INSIDE: every row and column of this chunk and the next is in
 * the matrix (no bounds checks).
 */
template <int DT, bool INSIDE>
__device__ __forceinline__ void ew_chunk(const sm90_params &p, const CUtensorMap *map_c, unsigned char *box,
                                         int64_t row0, int64_t colc, uint4 (&av)[4], bool next, int64_t next_colc,
                                         bool sums, int lane)
{
    const int u = lane & 3, rq = lane >> 2, sw = (lane >> 3) & 3;
    unsigned char *cell0 = box + rq * 64 + ((u ^ sw) << 4);
    float s8[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int64_t row = row0 + rq + 8 * i;
        const uint4 a = av[i % 4];
        if (i < 4)
            av[i % 4] = load_aux8(p, row + 32, colc + 8 * u, INSIDE);
        else if (next)
            av[i % 4] = load_aux8(p, row - 32, next_colc + 8 * u, INSIDE);
        ew_unit<DT, INSIDE>(p, reinterpret_cast<uint4 *>(cell0 + i * 512), a, row, i, sums, s8);
    }
    ew_chunk_end<INSIDE>(p, map_c, box, row0, colc, s8, sums, lane);
}

/* aux_in of the first 4 units of an epilogue warp's chunk c of the half tile at (row0, col0). */
__device__ __forceinline__ void ew_first_aux(const sm90_params &p, uint4 (&av)[4], int64_t row0, int64_t col0, int c,
                                             bool inside, int lane)
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        av[i] = load_aux8(p, row0 + (lane >> 2) + 8 * i, col0 + c * CHUNK + 8 * (lane & 3), inside);
}

/* An epilogue warp's chunks e, e + 2, e + 4, e + 6 of a half tile at the matrix's edge (at (row0,
 * col0)), aux_in loaded by the warp; av: the first chunk's first aux_in (ew_first_aux). */
template <int DT>
__device__ __forceinline__ void ew_half_edge(const sm90_params &p, const CUtensorMap *map_c, unsigned char *buf,
                                             int64_t row0, int64_t col0, int e, bool sums, int lane, uint4 (&av)[4])
{
#pragma unroll 1
    for (int c = e; c < BN_MAX / CHUNK; c += 2)
        ew_chunk<DT, false>(p, map_c, buf + c * SLOT_BYTES, row0, col0 + c * CHUNK, av, c + 2 < BN_MAX / CHUNK,
                            col0 + (c + 2) * CHUNK, sums, lane);
}

/*
 * An epilogue warp's aux_in box (ew_layout): one chunk of aux_in (64 rows x 32 columns) in two
 * parts of 32 rows, in the C boxes' geometry and swizzle (a lane's unit of aux_in sits where its
 * unit of C does), each loaded by TMA (the aux_in map, in the slot of aux_out's, which GELU'
 * recipes never have) with an mbarrier of its own. The warp reads a part's units one ahead of their
 * use; once it has read a part, the part takes the next chunk's rows, half a chunk before they are
 * needed. The loads join the SM's bulk traffic, where a warp's own global loads wait 2.5-5 us
 * behind the TMA's ring loads (docs/PERF.md, 2026-12-06 fourth session, step 10). The tile and
 * chunk the box holds or is loading (chunk -1: none) are checked before use.
 */
constexpr int AUX_PART_BYTES = 32 * 64;
struct aux_box {
    unsigned char *buf;
    uint32_t bar;          /* part q's mbarrier (q = 0: rows 0-31, 1: rows 32-63): bar + 8 q */
    uint32_t phase;        /* bit q: the parity of part q's next completion */
    uint32_t pending;      /* bit q: part q's load issued and not yet waited for */
    int32_t tm, tn, chunk; /* what both parts hold or are loading: set with part 0's load, which
                              part 1's always follows with the same chunk before any check */
};

/* Waits for the load of the box's part `part` (0: rows 0-31, 1: rows 32-63), if one is pending. */
__device__ __forceinline__ void box_wait(aux_box &b, int part)
{
    if (b.pending & (1u << part)) {
        mbar_wait(b.bar + 8 * part, (b.phase >> part) & 1u);
        b.phase ^= 1u << part;
        b.pending &= ~(1u << part);
    }
}

/* Loads part `part` (32 rows) of aux_in's chunk `chunk` of the half tile (tm, tn) into the warp's
 * box, once that part's previous load (if not waited for) has landed. Every lane's reads of the
 * part are ordered before the TMA's write by its fence.proxy.async and the __syncwarp; dep (a value
 * the lane read last from the part) also makes lane 0 wait for its own read before it issues. The
 * whole warp calls it. */
__device__ __forceinline__ void box_load(const CUtensorMap *map_aux, aux_box &b, int part, int32_t tm, int32_t tn,
                                         int chunk, int half, uint32_t dep, int lane)
{
    box_wait(b, part);
    fence_proxy_async();
    __syncwarp();
    if (lane == 0) {
        mbar_expect_tx(b.bar + 8 * part, AUX_PART_BYTES);
        tma_load_2d_after(smem_addr(b.buf + part * AUX_PART_BYTES), map_aux, tn * BN_MAX + chunk * CHUNK,
                          tm * BM + half * 64 + part * 32, b.bar + 8 * part, dep);
    }
    b.pending |= 1u << part;
    if (part == 0) {
        b.tm = tm;
        b.tn = tn;
        b.chunk = chunk;
    }
}

/* Unit i of this lane's aux_in (unit lane % 4 of row lane / 4 + 8 i) in the warp's box. */
__device__ __forceinline__ uint4 box_unit(const aux_box &b, int i, int lane)
{
    const int u = lane & 3, rq = lane >> 2, sw = (lane >> 3) & 3;
    return *reinterpret_cast<const uint4 *>(b.buf + (i >> 2) * AUX_PART_BYTES + rq * 64 + ((u ^ sw) << 4) +
                                            (i & 3) * 512);
}

/* The next chunk an epilogue warp's box takes (if valid): chunk `chunk` of the half tile (tm, tn). */
struct box_next {
    bool valid;
    int32_t tm, tn, chunk;
};

/* ew_chunk with aux_in from the warp's box, which holds this chunk's: unit i + 1's read during unit
 * i; after unit 3 (7) the part of rows 0-31 (32-63) takes the next chunk's (nt). */
template <int DT>
__device__ __forceinline__ void
ew_chunk_boxed(const sm90_params &p, const CUtensorMap *map_c, const CUtensorMap *map_aux, unsigned char *box,
               aux_box &b, const box_next &nt, int half, int64_t row0, int64_t colc, bool sums, int lane)
{
    const int u = lane & 3, rq = lane >> 2, sw = (lane >> 3) & 3;
    unsigned char *cell0 = box + rq * 64 + ((u ^ sw) << 4);
    float s8[8];
    box_wait(b, 0);
    uint4 a = box_unit(b, 0, lane);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        uint4 an = a;
        if (i < 7) {
            if (i == 3)
                box_wait(b, 1);
            an = box_unit(b, i + 1, lane);
        }
        if ((i == 3 || i == 7) && nt.valid) /* the part's last unit is in a */
            box_load(map_aux, b, i / 4, nt.tm, nt.tn, nt.chunk, half, a.x ^ a.w, lane);
        ew_unit<DT, true>(p, reinterpret_cast<uint4 *>(cell0 + i * 512), a, row0 + rq + 8 * i, i, sums, s8);
        a = an;
    }
    ew_chunk_end<true>(p, map_c, box, row0, colc, s8, sums, lane);
}

/* Whether the half tile at (row0, col0) is whole in the matrix. */
__device__ __forceinline__ bool half_inside(const sm90_params &p, int64_t row0, int64_t col0)
{
    return row0 + 64 <= p.m && col0 + BN_MAX <= p.n;
}

/*
 * An epilogue warp's chunks e, e + 2, e + 4, e + 6 of a half tile whole in the matrix, aux_in from
 * its box (ew_chunk_boxed), which takes the next one's as it goes (chunk c + 2, or after the last
 * the first chunk of the tile the consumers announced next, if it is another and whole in the
 * matrix). A chunk the box does not hold (the first of a tile announced too late, or of the tile
 * handed off after a cut tile's piece whose announcement took the box) loads its aux_in from global
 * memory.
 */
template <int DT>
__device__ __forceinline__ void ew_half_boxed(const sm90_params &p, const CUtensorMap *map_c,
                                              const CUtensorMap *map_aux, const handoff &h, aux_box &b, int32_t tm,
                                              int32_t tn, int half, int e, bool sums, int lane)
{
    const int64_t row0 = (int64_t)tm * BM + half * 64, col0 = (int64_t)tn * BN_MAX;
#pragma unroll 1
    for (int c = e; c < BN_MAX / CHUNK; c += 2) {
        box_next nt = {true, tm, tn, c + 2};
        if (c + 2 >= BN_MAX / CHUNK) {
            nt.tm = warp_read_word(h.next);
            nt.tn = warp_read_word(h.next + 1);
            nt.chunk = e;
            nt.valid = nt.tm >= 0 && (nt.tm != tm || nt.tn != tn) &&
                       half_inside(p, (int64_t)nt.tm * BM + half * 64, (int64_t)nt.tn * BN_MAX);
        }
        unsigned char *box = h.buf + c * SLOT_BYTES;
        if (b.chunk == c && b.tm == tm && b.tn == tn) {
            b.chunk = -1;
            ew_chunk_boxed<DT>(p, map_c, map_aux, box, b, nt, half, row0, col0 + c * CHUNK, sums, lane);
        } else { /* this chunk's aux_in asked for first: the box's loads may wait for a stale one */
            uint4 av[4];
            ew_first_aux(p, av, row0, col0, c, true, lane);
            if (nt.valid)
                for (int part = 0; part < 2; part++)
                    box_load(map_aux, b, part, nt.tm, nt.tn, nt.chunk, half, 0, lane);
            ew_chunk<DT, true>(p, map_c, box, row0, col0 + c * CHUNK, av, false, 0, sums, lane);
        }
    }
}

/*
 * An epilogue warp of the epilogue warpgroup's kernel: warps 2 h and 2 h + 1 of the fourth warpgroup serve consumer
 * warpgroup h, one warp on each of the SM's four schedulers. For each half tile handed off, warp e
 * (0 or 1) runs the GELU' of chunks e, e + 2, e + 4, e + 6 (ew_unit) while the consumers already
 * multiply the next tile; once its stores have read the boxes it hands the buffer back. aux_in
 * comes from the warp's box (ew_half_boxed) for half tiles whole in the matrix, else from its own
 * loads (ew_half_edge). The
 * recipe GELU' (p.lean: LEAN_DGELU, +- LEAN_SUMS) with 16-bit C by TMA and aux_in rows 16-byte
 * aligned runs here, its product rounded to 16 bits before the GELU' (the cublaslt+pass rule: C is
 * rounded from the fp32 product of that value and fp32 gelu'(aux_in)).
 */
template <int DT>
__device__ __forceinline__ void epilogue_warps(const sm90_params &p, const CUtensorMap *map_c,
                                               const CUtensorMap *map_aux, const handoff &h, aux_box b, int half, int e,
                                               int lane)
{
    const bool sums = (p.lean & LEAN_SUMS) != 0;
    if (lane == 0) {
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_c)) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_aux)) : "memory");
    }
    named_arrive(h.empty, h.threads); /* the buffer starts empty */
    int32_t done_tm = -1, done_tn = 0; /* the tile handed off last (each is handed off once) */
    for (;;) {
        /* the tile the consumers announced when they started its mainloop: its first chunk's
         * aux_in is asked for before it is handed off: into the box, if the box is free (the
         * first tile, or the last chunk found no other tile announced), or by global loads for a
         * half tile at the edge (loaded again after the handoff if another tile came). Not if the
         * announcement still names the tile just finished (no other announced yet; a CTA's end). */
        const int32_t next_tm = warp_read_word(h.next), next_tn = warp_read_word(h.next + 1);
        int64_t row0 = (int64_t)next_tm * BM + half * 64, col0 = (int64_t)next_tn * BN_MAX;
        uint4 av[4];
        bool av_for_next = false;
        if (next_tm >= 0 && row0 < p.m && (next_tm != done_tm || next_tn != done_tn)) {
            if (!half_inside(p, row0, col0)) {
                ew_first_aux(p, av, row0, col0, e, false, lane);
                av_for_next = true;
            } else if (b.chunk < 0 && !b.pending) { /* free */
                box_load(map_aux, b, 0, next_tm, next_tn, e, half, 0, lane);
                box_load(map_aux, b, 1, next_tm, next_tn, e, half, 0, lane);
            }
        }
        named_barrier(h.full, h.threads);
        const int32_t tm = warp_read_word(h.tile), tn = warp_read_word(h.tile + 1);
        if (tm < 0)
            break;
        row0 = (int64_t)tm * BM + half * 64;
        col0 = (int64_t)tn * BN_MAX;
        if (half_inside(p, row0, col0)) {
            ew_half_boxed<DT>(p, map_c, map_aux, h, b, tm, tn, half, e, sums, lane);
        } else if (row0 < p.m) {
            if (!av_for_next || tm != next_tm || tn != next_tn)
                ew_first_aux(p, av, row0, col0, e, false, lane);
            ew_half_edge<DT>(p, map_c, h.buf, row0, col0, e, sums, lane, av);
        }
        done_tm = tm;
        done_tn = tn;
        if (lane == 0)
            bulk_wait_read<0>();
        __syncwarp();
        named_arrive(h.empty, h.threads);
    }
    box_wait(b, 0); /* no load may land in shared memory after the CTA ends */
    box_wait(b, 1);
    if (lane == 0)
        bulk_wait_all();
}

/*
 * A relay warp (EPI_RELAY: the plain and ReLU recipes, C by TMA; warp 1 + half of the producer's
 * warpgroup, 40 registers) serves consumer warpgroup `half`: the boxes it hands off are C
 * already, so lane 0 stores the 8 boxes of each half tile from the handoff and hands the buffer
 * back once the stores have read it. The consumers' epilogue is then only the rounding into
 * shared memory; the stores and their waits run under the next tile's mainloop (docs/PERF.md
 * issue 12 part 8).
 */
__device__ __forceinline__ void relay_warp(const sm90_params &p, const CUtensorMap *map_c, const handoff &h, int half,
                                           int lane)
{
    if (lane == 0)
        asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_c)) : "memory");
    named_arrive(h.empty, h.threads); /* the buffer starts empty */
    for (;;) {
        named_barrier(h.full, h.threads);
        const int32_t tm = warp_read_word(h.tile), tn = warp_read_word(h.tile + 1);
        if (tm < 0)
            break;
        const int64_t row0 = (int64_t)tm * BM + half * 64, col0 = (int64_t)tn * BN_MAX;
        if (lane == 0 && row0 < p.m) {
#pragma unroll 1
            for (int c = 0; c < BN_MAX / CHUNK; c++)
                if (col0 + c * CHUNK < p.n)
                    tma_store_2d(map_c, smem_addr(h.buf + c * SLOT_BYTES), (int32_t)(col0 + c * CHUNK),
                                 (int32_t)row0);
            bulk_commit();
            bulk_wait_read<0>();
        }
        __syncwarp();
        named_arrive(h.empty, h.threads);
    }
    if (lane == 0)
        bulk_wait_all();
}

/* N: the tile's width. DT: 0 f16, 1 bf16. A_MN: A is M-contiguous (column-major). B_MN: B is
 * N-contiguous (row-major). Warpgroup 0 is the producer (one thread, 40 registers; 32 in the
 * epilogue warpgroup's kernel), warpgroups 1
 * and 2 the consumers (232 registers). EPI (where the epilogue runs): EPI_WARPGROUP: a fourth
 * warpgroup runs it (epilogue_warps, keeping the 128 registers of entry, where the producer's
 * warpgroup gives up to 32; the consumers get 176, which holds their 128 accumulators, and issue
 * each k16 step as two m64n128 wgmmas); EPI_RELAY: warps 1 and 2 of the
 * producer's warpgroup store what the consumers hand off (relay_warp). */
template <int N, int DT, int A_MN, int B_MN, int EPI>
__global__ void __launch_bounds__(EPI == EPI_WARPGROUP ? THREADS_EW : THREADS, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_c, const __grid_constant__ CUtensorMap map_aux,
                     const sm90_params p)
{
    constexpr bool HANDOFF = EPI != EPI_CONSUMERS;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem =
        smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023); /* 1024-aligned: the swizzle atom */
    using CFG = tile_cfg<N, HANDOFF>;
    constexpr int STAGES = CFG::STAGES;
    ring rg;
    rg.a = smem_addr(smem);
    rg.b = rg.a + STAGES * A_STAGE;
    unsigned char *staging = smem + CFG::RING_BYTES;
    uint64_t *bars = reinterpret_cast<uint64_t *>(staging + 2 * CFG::STAGE_BYTES);
    rg.full0 = smem_addr(bars);
    rg.empty0 = smem_addr(bars + STAGES);
    rg.mail_bar0 = smem_addr(bars + 2 * STAGES);
    rg.stage_unit = reinterpret_cast<int32_t *>(bars + 3 * STAGES);
    volatile int32_t *xchg = rg.stage_unit + STAGES;
    rg.mail = rg.stage_unit + STAGES + 2;
    rg.rank = p.cluster == 2 ? cluster_rank() : 0;
    /* with a handoff: the handoffs' tiles after the mailboxes */
    int32_t *handoff_tiles = rg.mail + STAGES;

    const int warpgroup = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(rg.full0 + 8 * s, 1);
            mbar_init(rg.empty0 + 8 * s, 2 * p.cluster);
            mbar_init(rg.mail_bar0 + 8 * s, 1);
        }
        if (HANDOFF)
            for (int wg = 0; wg < 2; wg++) { /* no tile announced yet (tn too: a torn read is a real tile) */
                handoff_tiles[4 + 2 * wg] = -1;
                handoff_tiles[5 + 2 * wg] = 0;
            }
        if (EPI == EPI_WARPGROUP)
            for (int w = 0; w < 2 * EW_WARPS; w++)
                mbar_init(smem_addr(smem + ew_layout::BARS) + 8 * w, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    if (p.cluster == 2)
        cluster_sync(); /* the peer's barriers are initialised before any multicast or arrive */
    else
        __syncthreads();

    if (warpgroup == 0) {
        if (EPI == EPI_WARPGROUP) /* the epilogue warps keep the 128 registers of entry */
            asm volatile("setmaxnreg.dec.sync.aligned.u32 32;");
        else
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0)
            producer<N, A_MN, B_MN, HANDOFF>(p, rg, &map_a, &map_b);
        else if (EPI == EPI_RELAY && threadIdx.x >= 32 && threadIdx.x < 96)
            relay_warp(p, &map_c, handoff_of(staging, handoff_tiles, threadIdx.x / 32 - 1, EPI), threadIdx.x / 32 - 1,
                       threadIdx.x % 32);
    } else if (EPI == EPI_WARPGROUP && warpgroup == 3) {
        const int warp = (threadIdx.x - 384) / 32;
        aux_box b = {smem + ew_layout::BOXES + warp * SLOT_BYTES,
                     smem_addr(smem + ew_layout::BARS) + 16 * warp,
                     0,
                     0,
                     -1,
                     0,
                     -1};
        epilogue_warps<DT>(p, &map_c, &map_aux, handoff_of(staging, handoff_tiles, warp / 2, EPI), b, warp / 2,
                           warp % 2, threadIdx.x % 32);
    } else {
        if (EPI == EPI_WARPGROUP)
            asm volatile("setmaxnreg.inc.sync.aligned.u32 176;");
        else
            asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        consumer<N, DT, A_MN, B_MN, EPI>(p, rg, &map_c, &map_aux, staging, warpgroup - 1,
                                         threadIdx.x - 128 * warpgroup, xchg,
                                         handoff_of(staging, handoff_tiles, warpgroup - 1, EPI));
    }
    if (p.cluster == 2)
        cluster_sync(); /* no CTA leaves while its peer may still multicast into it or arrive on it */
}

template <int N, int DT, int A_MN, int B_MN, int EPI>
cvf_status launch(cvf_context *ctx, cudaStream_t stream, const CUtensorMap *maps, const sm90_params &p, int grid)
{
    constexpr int SMEM_BYTES =
        EPI == EPI_WARPGROUP ? ew_layout::SMEM_BYTES : tile_cfg<N, EPI != EPI_CONSUMERS>::SMEM_BYTES;
    static bool configured = false; /* per instantiation */
    auto kernel = sm90_gemm_kernel<N, DT, A_MN, B_MN, EPI>;
    if (!configured) {
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (err != cudaSuccess)
            return cvf_cuda_check(ctx, err, "sm90 GEMM: cudaFuncSetAttribute(shared memory)");
        configured = true;
    }
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute attr[1];
    config.gridDim = dim3((unsigned)grid);
    config.blockDim = dim3(EPI == EPI_WARPGROUP ? THREADS_EW : THREADS);
    config.dynamicSmemBytes = SMEM_BYTES;
    config.stream = stream;
    if (p.cluster == 2) {
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 2;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        config.attrs = attr;
        config.numAttrs = 1;
    }
    cudaError_t err = cudaLaunchKernelEx(&config, kernel, maps[0], maps[1], maps[2], maps[3], p);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    return cvf_cuda_check(ctx, err, "sm90 GEMM kernel launch");
}

template <int N, int DT, int EPI = EPI_CONSUMERS>
cvf_status launch_width(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                        const sm90_params &p, int grid)
{
    if (la == 0 && lb == 0)
        return launch<N, DT, 0, 0, EPI>(ctx, stream, maps, p, grid);
    if (la == 0 && lb == 1)
        return launch<N, DT, 0, 1, EPI>(ctx, stream, maps, p, grid);
    if (la == 1 && lb == 0)
        return launch<N, DT, 1, 0, EPI>(ctx, stream, maps, p, grid);
    return launch<N, DT, 1, 1, EPI>(ctx, stream, maps, p, grid);
}

/* The instantiation for p.tile_n, the epilogue warpgroup (LEAN_WARPS in p.lean, 256 wide only) or
 * the relay (LEAN_RELAY, 256 wide only), and
 * the operand layouts la, lb. */
template <int DT>
cvf_status launch_layout(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                         const sm90_params &p, int grid)
{
    if (p.lean & LEAN_WARPS)
        return launch_width<256, DT, EPI_WARPGROUP>(ctx, stream, la, lb, maps, p, grid);
    if (p.lean & LEAN_RELAY)
        return launch_width<256, DT, EPI_RELAY>(ctx, stream, la, lb, maps, p, grid);
    if (p.tile_n == 128)
        return launch_width<128, DT>(ctx, stream, la, lb, maps, p, grid);
    if (p.tile_n == 192)
        return launch_width<192, DT>(ctx, stream, la, lb, maps, p, grid);
    return launch_width<256, DT>(ctx, stream, la, lb, maps, p, grid);
}


} /* namespace sm90 */

/* Launches the kernel for dtype DT (0 f16, 1 bf16) and operand layouts la, lb (0 K-major,
 * 1 MN-major) on stream; maps: A, B, C, aux_out (the last two used only where p says tma; under
 * LEAN_WARPS the fourth is aux_in's, for the epilogue warps' boxes). */
cvf_status cvf_sm90_launch_f16(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                               const sm90::sm90_params &p, int grid);
cvf_status cvf_sm90_launch_bf16(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                                const sm90::sm90_params &p, int grid);

#endif /* CVF_CUDA_GEMM_SM90_CUH */

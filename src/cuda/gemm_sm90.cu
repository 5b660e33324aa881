/*
 * The Hopper (sm_90a) GEMM with the fused epilogue: "cube" = wgmma, "vector" = the epilogue on
 * the accumulator registers.
 *
 * One CTA per SM (persistent), 384 threads in three warpgroups:
 *   warpgroup 0, the producer: one thread issues the TMA copies (cp.async.bulk.tensor) of each
 *     A (128 x 64) and B (64 x N) K-slice into a STAGES-deep shared-memory ring; each stage
 *     has a "full" mbarrier (the copy engine completes its transaction bytes on it) and an
 *     "empty" mbarrier (both consumers arrive when their wgmmas have read it). It keeps 40
 *     registers (setmaxnreg.dec).
 *   warpgroups 1 and 2, the consumers: each owns 64 rows of the 128 x N output tile, issues
 *     wgmma.m64nNk16 from the stage (B shared, A its half), N / 2 fp32 accumulators per thread
 *     (setmaxnreg.inc to 232). The tile width N is 256, 192 or 128, chosen per product by the
 *     wave model of cvf_cuda_sm90_schedule (one kernel instantiation per width). After the last
 *     K-slice the epilogue runs on those registers:
 *     bias, aux_out, activation (aux_in for GELU'), bias-gradient partial sums, rounding to the
 *     output dtype, and the stores, 32 columns at a time through a per-warpgroup shared buffer
 *     so that global stores are 16-byte and coalesced. The producer meanwhile fills the ring
 *     with the next tile's slices.
 *   or, on 256-wide tiles, the consumers round the tile to 16 bits into a shared-memory handoff
 *     and go on with the next tile while other warps finish it (gemm_sm90.cuh, EPI):
 *     for GELU' (K1 of the MLP backward) the epilogue warpgroup's kernel (epilogue_warps; 512
 *     threads), whose fourth warpgroup runs the GELU', the bias-gradient sums and the stores;
 *     for the plain and ReLU recipes the relay kernel (relay_warp; 384 threads), whose warps 1
 *     and 2 of warpgroup 0 store the boxes by TMA.
 * The work is the tiles' K-slices, tile after tile in a grouped order (GROUP_M row tiles per
 * group, then along N, so that the CTAs running at one time share A rows and B columns in L2),
 * cut into units handed out by an atomic counter the producer reads when a stage is free: CTAs
 * that start late, behind another stream's kernel, take fewer. A unit is one whole tile; or,
 * when whole tiles would leave SMs idle in the last wave (cvf_cuda_sm90_schedule), one of 2-8
 * equal K parts of a tile (split-K, when the tiles fit in one wave), or one of sm_count equal runs
 * of K-slices that may cut tiles (stream-K, for K up to 96 slices). The pieces of a cut tile meet
 * in piece_exchange (gemm_sm90.cuh): the last to finish adds the others' accumulators in K order,
 * so the result does not depend on which finished when. Under CVF_CUDA_CLUSTER=2 the CTAs run in
 * 2-CTA clusters on pairs of row tiles that share their B columns: each producer loads its A and
 * half of the B slice, multicast into both CTAs' rings; the first CTA's producer takes the pair's
 * unit from the counter and mails it to the second's.
 *
 * Operands are read in place: A row-major (K contiguous, "K-major") or column-major (M
 * contiguous), B column-major (K-major) or row-major (N contiguous): the TMA box follows the
 * contiguous direction and wgmma's transpose bits say which. Tails in M, N and K come from the
 * TMA's zero fill (K) and masked stores (M, N). What this kernel cannot take (f32 or mixed
 * inputs, strides that are not multiples of 16 bytes, misaligned pointers, no unit stride)
 * returns UNSUPPORTED before anything is enqueued and runs on the simple kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gemm_sm90.cuh"

using namespace sm90;

namespace {

/* The driver's tensor-map encoder, reached through the runtime (no link against libcuda). */
typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

encode_tiled_fn get_encoder(void)
{
    static encode_tiled_fn fn = NULL;
    static bool tried = false;
    if (!tried) {
        void *ptr = NULL;
        cudaDriverEntryPointQueryResult query;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &query) ==
                cudaSuccess &&
            query == cudaDriverEntryPointSuccess)
            fn = (encode_tiled_fn)ptr;
        else
            cudaGetLastError();
        tried = true;
    }
    return fn;
}

/* A 2-D tensor map over a matrix of dt (0 f16, 1 bf16, 2 f32): inner (contiguous) extent, outer
 * extent and stride in elements, box inner x outer, the swizzle of the box's row bytes (128: the
 * operand boxes, 64: the output boxes and the epilogue warps' aux_in boxes), zero fill outside. */
bool encode(CUtensorMap *map, int dt, const void *data, int64_t inner, int64_t outer, int64_t stride, int box_inner,
            int box_outer)
{
    encode_tiled_fn fn = get_encoder();
    if (!fn)
        return false;
    cuuint64_t dims[2] = {(cuuint64_t)inner, (cuuint64_t)outer};
    const int esize = dt == 2 ? 4 : 2;
    cuuint64_t strides[1] = {(cuuint64_t)stride * esize};
    cuuint32_t box[2] = {(cuuint32_t)box_inner, (cuuint32_t)box_outer};
    cuuint32_t elem[2] = {1, 1};
    CUtensorMapDataType type = dt == 2   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                               : dt == 1 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                         : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUtensorMapSwizzle swizzle = box_inner * esize == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    CUresult r = fn(map, type, 2, const_cast<void *>(data), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

/* Tensor maps already encoded on this context, looked up before encoding again: the driver's
 * encoder costs host time on every call otherwise. A small round-robin table per context. */
struct tmap_key {
    const void *data;
    int64_t inner, outer, stride;
    int32_t dt, box_inner, box_outer;
};

struct tmap_cache {
    tmap_key key[CVF_CUDA_TMAP_CACHE];
    CUtensorMap map[CVF_CUDA_TMAP_CACHE];
    int used, next;
};

bool encode_cached(cvf_context *ctx, CUtensorMap *map, int dt, const void *data, int64_t inner, int64_t outer,
                   int64_t stride, int box_inner, int box_outer)
{
    tmap_cache *cache = (tmap_cache *)cvf_cuda_state_of(ctx)->tmap_cache;
    tmap_key key;
    memset(&key, 0, sizeof key);
    key.data = data;
    key.inner = inner;
    key.outer = outer;
    key.stride = stride;
    key.dt = dt;
    key.box_inner = box_inner;
    key.box_outer = box_outer;
    if (cache)
        for (int i = 0; i < cache->used; i++)
            if (memcmp(&cache->key[i], &key, sizeof key) == 0) {
                *map = cache->map[i];
                return true;
            }
    if (!encode(map, dt, data, inner, outer, stride, box_inner, box_outer))
        return false;
    if (cache) {
        int slot = cache->next;
        cache->key[slot] = key;
        cache->map[slot] = *map;
        cache->next = (slot + 1) % CVF_CUDA_TMAP_CACHE;
        if (cache->used < CVF_CUDA_TMAP_CACHE)
            cache->used++;
    }
    return true;
}

/* The layouts the TMA can read: a unit stride, the other a multiple of 16 bytes covering the
 * contiguous extent, a 16-byte aligned start. */
bool tma_stride_ok(int64_t stride, int64_t inner)
{
    return stride % 8 == 0 && stride >= inner && stride > 0 && stride < (INT64_C(1) << 36);
}

/* 0: K-major (row-major A / column-major B), 1: MN-major, -1: neither. */
int operand_layout(const cvf_matrix *x, bool is_a)
{
    if ((uintptr_t)x->data % 16 != 0)
        return -1;
    /* For A (M x K) the K-major layout is col_stride 1; for B (K x N) it is row_stride 1. */
    int64_t k_stride = is_a ? x->col_stride : x->row_stride;
    int64_t other = is_a ? x->row_stride : x->col_stride;
    int64_t k_extent = is_a ? x->cols : x->rows, mn_extent = is_a ? x->rows : x->cols;
    /* A K-major view of a wider tensor (K not a multiple of 8, lines padded): the TMA's loads
     * zero-fill past K element by element (H200 probe, docs/PERF.md issue 12 part 8), so K's tail
     * reads as zeros, as the product needs, whatever the padding holds. */
    if (k_stride == 1 && tma_stride_ok(other, k_extent))
        return 0;
    if (other == 1 && tma_stride_ok(k_stride, mn_extent))
        return 1;
    return -1;
}

/* The epilogue's view of an output; row-major outputs with 16-byte aligned rows of whole 16-byte
 * units get a tensor map (boxes of 64 rows x 64 bytes) and TMA stores, the others element stores.
 * (The H200's tensor stores write whole 16-byte units: a row whose last unit is partly past the
 * view, n x size not a multiple of 16 in a padded stride, would have the padding after its last
 * element overwritten, a probe found (docs/PERF.md issue 12 part 8); so such rows take the
 * element stores. test_cuda's cut tiles, SUPPORT_ROWS_16B.) */
out_desc make_out(cvf_context *ctx, const cvf_matrix *x, CUtensorMap *map)
{
    out_desc o;
    o.data = x ? x->data : NULL;
    o.dtype = x ? (int32_t)x->dtype : 0;
    o.rs = x ? x->row_stride : 0;
    o.cs = x ? x->col_stride : 0;
    size_t esize = x ? cvf_dtype_size(x->dtype) : 0;
    o.tma = x && x->col_stride == 1 && (uintptr_t)x->data % 16 == 0 && ((size_t)x->row_stride * esize) % 16 == 0 &&
            ((size_t)x->cols * esize) % 16 == 0 && x->row_stride >= x->cols && x->row_stride < (INT64_C(1) << 34);
    if (o.tma) {
        int dt = x->dtype == CVF_F32 ? 2 : x->dtype == CVF_BF16 ? 1 : 0;
        o.tma = encode_cached(ctx, map, dt, x->data, x->cols, x->rows, x->row_stride, 64 / (int)esize, 64);
    }
    return o;
}

} /* namespace */

void *cvf_cuda_tmap_cache_create(void)
{
    return calloc(1, sizeof(tmap_cache));
}

/* Costs in K-slices of mainloop time: a tile's epilogue (an estimate: a slice, 128 x 256 x 64,
 * takes about 0.65 us on an H200 SM, 8192^3 in 1.65 ms; the K = 64 kernel's epilogue 3-6 us a
 * tile, PERF.md CUDA part 2), and each piece of a cut tile beyond its first (see piece_slices). */
#define EPILOGUE_SLICES 6.0
#define PIECE_SLICES_IDLE 2.0
#define PIECE_SLICES_FULL 12.0
/* Stream-K only up to this K (slices). With longer K it lost to whole tiles: first DRAM-bound,
 * its runs starting at arbitrary K offsets (H200: 768 x 3072 x 12608 0.123 -> 0.147 ms); with the
 * units walking last first, in step up K, still 1.04-1.26x whole tiles' time at the ViT weight
 * gradients over 132 units at 256 wide (1.09-1.54x at 192) (H100, docs/PERF.md 2026-12-06 eighth session). */
#define STREAM_K_MAX_SLICES 96
/* Stream-K's modelled time is scaled by this: on the H200 it ran 25% over the model (12608 x 768
 * x 3072 at 256 wide: modelled 124.5 slices, ~81 us; measured 0.103 ms), while whole 192-wide
 * tiles in three full waves took 0.088 ms (docs/PERF.md issue 12 part 2). */
#define STREAM_K_OVERHEAD 1.25

/* What each piece of a cut tile beyond its first costs, in slices, when `units` units run on
 * `slots` SMs: PIECE_SLICES_IDLE on an idle GPU, rising with the square of the load to
 * PIECE_SLICES_FULL once the units fill it, when every SM's finisher exchanges at about the same
 * time. Fitted to 19 shapes measured with every candidate cut forced (bench/sm90_cuts.sh; H100,
 * bf16, docs/PERF.md 2026-12-06 third session): the former constant 3 cut the ViT-B weight
 * gradients into 4 K parts, 16% slower than whole tiles, while products of 4-24 tiles ran
 * fastest in as many parts as filled half to three quarters of the SMs. */
static double piece_slices(int64_t units, int64_t slots)
{
    const double load = units >= slots ? 1.0 : (double)units / (double)slots;
    return PIECE_SLICES_IDLE + (PIECE_SLICES_FULL - PIECE_SLICES_IDLE) * load * load;
}

/* Waves of `units` equal units on sms SMs. */
static double waves(int64_t units, int64_t sms)
{
    return (double)((units + sms - 1) / sms);
}

/* A way to deal out the tiles (or pairs of tiles) and its modelled time in slices. */
struct cut_choice {
    cvf_sm90_mode mode;
    int64_t units;
    int splits;
    double time;
};

/* Whole tiles: `tiles` units on `slots` SMs (or clusters), an epilogue after each tile's slices. */
static cut_choice whole_tiles(int64_t tiles, int64_t k_tiles, int64_t slots)
{
    cut_choice c = {CVF_SM90_WHOLE_TILES, tiles, 1, waves(tiles, slots) * ((double)k_tiles + EPILOGUE_SLICES)};
    return c;
}

/* The best of whole tiles, K parts of every tile (split-K) and, where stream_k, stream-K runs, for
 * `tiles` tiles (or pairs of tiles) of k_tiles slices on `slots` SMs (or clusters), by a model of
 * their time in slices; a split must beat whole tiles and a smaller split by 2%, stream-K whole
 * tiles by 5% (H200, docs/PERF.md issue 12: 16448 x 1280 x 5120 was predicted 2% faster in
 * stream-K and measured 1% and 8% slower in the two bench/sm90_probe.sh calls). Beside other
 * lanes: whole tiles. */
static cut_choice best_cut(int64_t tiles, int64_t k_tiles, int64_t slots, bool beside, bool stream_k)
{
    cut_choice best = whole_tiles(tiles, k_tiles, slots);
    if (beside || k_tiles < 2)
        return best;
    const double whole = best.time;
    /* Split-K only when all tiles' first parts run in the first wave: with more tiles, the waves
     * mix K parts, the tiles that share operands stop reading them at the same time, and the
     * products got slower (H200: 1280 x 5120 x 16448, 200 tiles: 0.330 -> 0.346 ms in 3 parts). */
    for (int64_t parts = 2; parts <= 8 && k_tiles / parts >= 4 && tiles <= slots; parts++) {
        const double t = waves(tiles * parts, slots) * ((double)k_tiles / (double)parts + EPILOGUE_SLICES) +
                         piece_slices(tiles * parts, slots) * (double)(parts - 1);
        if (t < 0.98 * best.time)
            best = cut_choice{CVF_SM90_SPLIT_K, tiles * parts, (int)parts, t};
    }
    const int64_t iters = tiles * k_tiles;
    const int64_t cap = iters < CVF_CUDA_MAX_UNITS ? iters : CVF_CUDA_MAX_UNITS;
    if (stream_k && k_tiles >= 8 && k_tiles <= STREAM_K_MAX_SLICES && slots <= cap &&
        iters * slots < (INT64_C(1) << 32)) {
        const double run = (double)iters / (double)slots; /* slices per unit */
        const double pieces = ceil((double)k_tiles / run) + 1.0;
        const double t = STREAM_K_OVERHEAD *
                         (run + EPILOGUE_SLICES * (double)tiles / (double)slots +
                          PIECE_SLICES_FULL * (pieces - 1.0)); /* its units fill the GPU */
        if (t < 0.98 * best.time && t < 0.95 * whole)
            best = cut_choice{CVF_SM90_STREAM_K, slots, 1, t};
    }
    return best;
}

/* What the environment forces on a schedule (experiments and tests), read once per schedule:
 * CVF_CUDA_SPLITK (the cut, NULL when unset), CVF_CUDA_TILE_N ("256", "192" or "128": the width, 0
 * when unset or another value) and CVF_CUDA_CLUSTER ("2": pairs). */
struct schedule_forcing {
    const char *split;
    int width;
    bool pairs;
};

static schedule_forcing read_forcing(void)
{
    schedule_forcing f;
    f.split = getenv("CVF_CUDA_SPLITK");
    if (f.split && !*f.split)
        f.split = NULL;
    const char *width = getenv("CVF_CUDA_TILE_N");
    const int w = width ? atoi(width) : 0;
    f.width = w == 256 || w == 192 || w == 128 ? w : 0;
    const char *cluster = getenv("CVF_CUDA_CLUSTER");
    f.pairs = cluster && strcmp(cluster, "2") == 0;
    return f;
}

/* The cut CVF_CUDA_SPLITK (force, not NULL) asks for: "1" whole tiles, "kN" N K parts, "N" N
 * stream-K units (only where stream_k, and where there are 2 slices or more to share: at K = 0 the
 * schedule divided by zero units); a value it cannot take leaves whole tiles. */
static cut_choice forced_cut(const char *force, int64_t tiles, int64_t k_tiles, bool stream_k)
{
    cut_choice c;
    c = whole_tiles(tiles, k_tiles, 1);
    const bool parts = force[0] == 'k';
    char *end = NULL;
    long long v = strtoll(force + (parts ? 1 : 0), &end, 10);
    if (!end || *end != '\0' || v <= 1)
        return c;
    const int64_t iters = tiles * k_tiles;
    const int64_t cap = iters < CVF_CUDA_MAX_UNITS ? iters : CVF_CUDA_MAX_UNITS;
    if (parts && tiles <= CVF_CUDA_MAX_UNITS / 2 && v <= k_tiles && tiles * v <= INT32_MAX / 4)
        c = cut_choice{CVF_SM90_SPLIT_K, tiles * v, (int)v, 0.0};
    else if (!parts && stream_k && cap >= 2) {
        const int64_t units = v < cap ? (int64_t)v : cap; /* iters x units in 32 bits (the kernel's) */
        if (iters * units < (INT64_C(1) << 32))
            c = cut_choice{CVF_SM90_STREAM_K, units, 1, 0.0};
    }
    return c;
}

/* A narrower tile must be modelled this much faster than a wider one to be chosen: it moves more
 * operand bytes per FLOP. */
#define NARROW_MARGIN 0.97

/* The time of a K-slice of a tile w wide, in slices of the widest: w / 256, and for 128 a quarter
 * more (H200, 8192^3: 2.10 ms in 128-wide tiles, 1.68 in 256, 1.70 in 192; docs/PERF.md issue 12
 * part 2: m64n128k16 reads as many A bytes from shared memory as n256 for half the FLOPs). */
static double slice_cost(int w)
{
    return (double)w / (double)BN_MAX * (w == 128 ? 1.25 : 1.0);
}

/* The cut of the tiles of width w on single CTAs and, under CVF_CUDA_CLUSTER=2, on pairs (*paired);
 * its time, modelled in slices of the widest tile (slice_cost). Pairs
 * only on request for now: at the 128 x 256 tile they move a third less from L2 per tile but
 * measured no faster (H200, docs/PERF.md issue 12 part 2: 0.98-1.04x of single CTAs across the
 * targets' shapes), so the products are not L2-bound there. */
static cut_choice cut_for_width(const schedule_forcing &f, int64_t m, int64_t n, int64_t k_tiles, int64_t sms,
                                bool beside, int w, bool *paired)
{
    const int64_t tiles_m = (m + BM - 1) / BM, tiles_n = (n + w - 1) / w;
    const int64_t tiles = tiles_m * tiles_n, pairs = (tiles_m + 1) / 2 * tiles_n;
    *paired = tiles_m >= 2 && sms >= 2 && f.pairs;
    cut_choice c;
    if (f.split) {
        c = forced_cut(f.split, tiles, k_tiles, true);
        if (c.mode == CVF_SM90_STREAM_K)
            *paired = false; /* forced stream-K runs on single CTAs, even under CVF_CUDA_CLUSTER=2 */
        else if (*paired)
            c = forced_cut(f.split, pairs, k_tiles, false);
    } else {
        c = *paired ? best_cut(pairs, k_tiles, sms / 2, beside, false) : best_cut(tiles, k_tiles, sms, beside, true);
    }
    c.time *= slice_cost(w);
    return c;
}

cvf_sm90_schedule cvf_cuda_sm90_schedule(int32_t sm_count, int64_t m, int64_t n, int64_t k, bool beside)
{
    cvf_sm90_schedule s;
    const int64_t k_tiles = (k + BK - 1) / BK;
    const int64_t sms = sm_count > 0 ? sm_count : 1;
    s.tile_n = BN_MAX;
    s.tiles = ((m + BM - 1) / BM) * ((n + BN_MAX - 1) / BN_MAX);
    s.unit_tiles = s.tiles;
    s.mode = CVF_SM90_WHOLE_TILES;
    s.units = s.tiles;
    s.splits = 1;
    s.cluster = 1;
    s.split_bytes = 0;
    if (s.tiles < 1)
        return s;
    /* The width: forced, or the fastest by the model, from the widest down, a narrower one only
     * when clearly faster (NARROW_MARGIN). Forced cuts (CVF_CUDA_SPLITK) keep the widest. */
    static const int widths[] = {256, 192, 128};
    const schedule_forcing f = read_forcing();
    s.tile_n = f.width ? f.width : BN_MAX;
    bool paired = false;
    cut_choice best = cut_for_width(f, m, n, k_tiles, sms, beside, s.tile_n, &paired);
    if (!f.width && !f.split)
        for (int i = 1; i < 3; i++) {
            bool p2;
            const cut_choice c = cut_for_width(f, m, n, k_tiles, sms, beside, widths[i], &p2);
            if (c.time < NARROW_MARGIN * best.time) {
                best = c;
                paired = p2;
                s.tile_n = widths[i];
            }
        }
    const int64_t tiles_m = (m + BM - 1) / BM, tiles_n = (n + s.tile_n - 1) / s.tile_n;
    s.tiles = tiles_m * tiles_n;
    s.unit_tiles = paired ? 2 * ((tiles_m + 1) / 2 * tiles_n) : s.tiles;
    s.mode = best.mode;
    s.units = best.units;
    s.splits = best.splits;
    s.cluster = paired ? 2 : 1;
    if (s.mode == CVF_SM90_SPLIT_K) {
        /* a slot per CTA unit: every tile (of the units' numbering) times the parts */
        s.split_bytes = sizeof(float) * (size_t)TILE_FLOATS * (size_t)s.unit_tiles * (size_t)s.splits;
    } else if (s.mode == CVF_SM90_STREAM_K) {
        /* A tile of k_tiles slices meets at most ceil(k_tiles / shortest unit) + 1 units. */
        const int64_t shortest = s.tiles * k_tiles / s.units;
        const int64_t pieces = (k_tiles + shortest - 1) / shortest + 1;
        s.splits = (int)(pieces < k_tiles ? pieces : k_tiles);
        s.split_bytes = sizeof(float) * (size_t)TILE_FLOATS * 2 * (size_t)s.units; /* first and last pieces */
    }
    return s;
}


bool cvf_cuda_sm90_eligible(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    if (!st->fast || !st->sync || st->max_smem_optin < SMEM_BYTES_MAX)
        return false;
    if (a->dtype != b->dtype || (a->dtype != CVF_F16 && a->dtype != CVF_BF16))
        return false;
    int64_t m = c->rows, n = c->cols, k = a->cols;
    if (m < 1 || n < 1 || k < 1 || m > (INT64_C(1) << 31) - BM || n > (INT64_C(1) << 31) - BN_MAX ||
        k > (INT64_C(1) << 31) - BK)
        return false;
    int64_t tiles = ((m + BM - 1) / BM) * ((n + 127) / 128); /* the narrowest width's count */
    if (tiles > INT32_MAX - 4096)
        return false;
    return operand_layout(a, true) >= 0 && operand_layout(b, false) >= 0;
}

/* The lean epilogue's recipe for this call (a lean_kind), or 0 for the general epilogue:
 * every tensor of the epilogue in the operands' dtype dt (16-bit), C and aux_out stored by TMA,
 * bias and aux_in prefetched as pairs, and a combination one of the recipes covers. p: the
 * parameters with the outputs and the packed flags set. */
static int32_t lean_recipe(const sm90_params *p, cvf_dtype dt, const cvf_matrix *c, const cvf_epilogue *ep)
{
    if (!p->c.tma || c->dtype != dt)
        return 0;
    int f = LEAN_ON;
    if (ep->bias) {
        if (!p->bias_packed || ep->bias->dtype != dt)
            return 0;
        f |= LEAN_BIAS;
    }
    if (ep->aux_out) {
        if (!p->aux_out.tma || ep->aux_out->dtype != dt)
            return 0;
        f |= LEAN_AUX_OUT;
    }
    if (p->partials)
        f |= LEAN_SUMS;
    switch (ep->activation) {
    case CVF_ACTIVATION_NONE: break;
    case CVF_ACTIVATION_RELU: f |= LEAN_RELU; break;
    case CVF_ACTIVATION_GELU_TANH: f |= LEAN_GELU; break;
    case CVF_ACTIVATION_DGELU_TANH:
        if (!p->aux_packed || ep->aux_in->dtype != dt)
            return 0;
        f |= LEAN_DGELU;
        break;
    default: return 0;
    }
    if (ep->aux_in && (f & LEAN_ACT_MASK) != LEAN_DGELU)
        return 0;
    return lean_supported(f) ? f : 0;
}

/* Where the recipe of p (set) runs its epilogue beside the consumers, on 256-wide tiles (0: in
 * the consumers): GELU' +- the bias-gradient sums in the epilogue warpgroup's kernel
 * (LEAN_WARPS), aux_in's rows 16-byte aligned (the epilogue warps load 8 values at once); plain
 * and ReLU in the relay kernel (LEAN_RELAY: a spare warp stores C from the handoff; at no K slower
 * than the consumers' epilogue on the H200, docs/PERF.md issue 12 part 8); unless
 * CVF_CUDA_EPI_WARPS=0 (kept for measurements and tests). */
static int32_t epilogue_beside(const sm90_params *p, const cvf_epilogue *ep)
{
    if (p->tile_n != 256)
        return 0;
    const char *env = getenv("CVF_CUDA_EPI_WARPS");
    if (env && strcmp(env, "0") == 0)
        return 0;
    if (p->lean == LEAN_ON || p->lean == (LEAN_ON | LEAN_RELU))
        return LEAN_RELAY;
    if ((p->lean & ~LEAN_SUMS) == (LEAN_ON | LEAN_DGELU) && ep->aux_in->row_stride % 8 == 0 &&
        (uintptr_t)ep->aux_in->data % 16 == 0)
        return LEAN_WARPS;
    return 0;
}

cvf_status cvf_cuda_sm90_matmul(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                                const cvf_matrix *c, const cvf_epilogue *ep, float *partials, float *split_partial)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    int64_t m = c->rows, n = c->cols, k = a->cols;
    int la = operand_layout(a, true), lb = operand_layout(b, false);
    int dt = a->dtype == CVF_BF16 ? 1 : 0;
    const cvf_sm90_schedule sched = cvf_cuda_sm90_schedule(st->sm_count, m, n, k, launch.beside != 0);
    CUtensorMap maps[4]; /* A, B, C, aux_out (or, under LEAN_WARPS, aux_in) */
    memset(maps, 0, sizeof maps);
    bool ok = la == 0 ? encode_cached(ctx, &maps[0], dt, a->data, k, m, a->row_stride, BK, BM)
                      : encode_cached(ctx, &maps[0], dt, a->data, m, k, a->col_stride, 64, BK);
    ok = ok && (lb == 0 ? encode_cached(ctx, &maps[1], dt, b->data, k, n, b->col_stride, BK, sched.tile_n / 2)
                        : encode_cached(ctx, &maps[1], dt, b->data, n, k, b->row_stride, 64, BK));
    if (!ok)
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "sm90 GEMM: the driver refused a tensor map");
    sm90_params p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.n = n;
    p.k = k;
    p.tiles_m = (int32_t)((m + BM - 1) / BM);
    p.tiles_n = (int32_t)((n + sched.tile_n - 1) / sched.tile_n);
    p.tile_n = sched.tile_n;
    p.k_tiles = (int32_t)((k + BK - 1) / BK);
    p.activation = (int32_t)ep->activation;
    p.bias = dev_vec_of(ep->bias);
    p.aux_in = dev_mat_of(ep->aux_in);
    p.aux_packed = (ep->activation == CVF_ACTIVATION_DGELU_TANH || ep->activation == CVF_ACTIVATION_DGELU_ERF) &&
                   ep->aux_in &&
                   (ep->aux_in->dtype == CVF_F16 || ep->aux_in->dtype == CVF_BF16) &&
                   ep->aux_in->col_stride == 1 && ep->aux_in->row_stride % 2 == 0 &&
                   (uintptr_t)ep->aux_in->data % 4 == 0;
    p.bias_packed = !p.aux_packed && ep->bias && (ep->bias->dtype == CVF_F16 || ep->bias->dtype == CVF_BF16) &&
                    ep->bias->stride == 1 &&
                    (uintptr_t)ep->bias->data % 4 == 0;
    p.c = make_out(ctx, c, &maps[2]);
    p.aux_out = make_out(ctx, ep->aux_out, &maps[3]);
    p.partials = partials;
    p.lean = lean_recipe(&p, a->dtype, c, ep);
    p.lean |= epilogue_beside(&p, ep);
    /* the epilogue warps' aux_in boxes: aux_in's map (boxes of C's geometry) in the slot of
     * aux_out's, which the GELU' recipes never have; without it, the recipe runs in the consumers */
    if ((p.lean & LEAN_WARPS) && !encode_cached(ctx, &maps[3], dt, ep->aux_in->data, ep->aux_in->cols, ep->aux_in->rows,
                                                ep->aux_in->row_stride, CHUNK, 32))
        p.lean &= ~LEAN_WARPS;
    cvf_cuda_state_of(ctx)->last_lean = p.lean;
    /* (the workspace after the partials holds the exchange whenever the schedule cuts tiles: it is
     * sized by the schedule of the product alone, which cuts at least as much as any launch's) */
    p.iters = sched.tiles * p.k_tiles;
    p.units = (int32_t)sched.units;
    p.mode = (int32_t)sched.mode;
    p.splits = sched.mode == CVF_SM90_SPLIT_K ? sched.splits : 1;
    p.cluster = sched.cluster;
    p.tiles_v = (int32_t)sched.unit_tiles;
    p.sync = st->sync + (size_t)launch.lane * CVF_CUDA_SYNC_INTS;
    p.split_partial = split_partial;
    const int slots = st->sm_count / p.cluster; /* CTAs or pairs */
    int grid = p.cluster * (int)(p.units < slots ? p.units : slots);
    cudaStream_t stream = (cudaStream_t)launch.stream;
    cvf_status status = dt ? cvf_sm90_launch_bf16(ctx, stream, la, lb, maps, p, grid)
                           : cvf_sm90_launch_f16(ctx, stream, la, lb, maps, p, grid);
    const int64_t slab = (p.lean & LEAN_WARPS) ? EW_SLAB : CVF_CUDA_SM90_SLAB;
    if (status == CVF_STATUS_SUCCESS && ep->bias_grad)
        status = cvf_cuda_combine_partials(ctx, launch, partials, (m + slab - 1) / slab, n, ep->bias_grad);
    return status;
}

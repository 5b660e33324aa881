/* The Hopper GEMM kernel template (see gemm_sm90.cu); instantiated per dtype in
 * gemm_sm90_f16.cu and gemm_sm90_bf16.cu so that the two compile in parallel. */
#ifndef CVF_CUDA_GEMM_SM90_CUH
#define CVF_CUDA_GEMM_SM90_CUH

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/device.cuh"

namespace sm90 {


constexpr int BM = 128, BN = 256, BK = 64;
constexpr int STAGES = 4;
constexpr int GROUP_M = 16;
constexpr int THREADS = 384;
constexpr int A_STAGE = BM * BK * 2; /* 16 KB */
constexpr int B_STAGE = BN * BK * 2; /* 32 KB */
constexpr int CHUNK = 32;            /* epilogue columns per chunk */
/* Output staging for the TMA stores: per consumer warpgroup a ring of SLOTS slots, each a 64-row
 * x 64-byte box (32 16-bit or 16 f32 columns) in the 64-byte swizzle of the TMA, so that the
 * fragment writes are free of bank conflicts. */
constexpr int SLOT_BYTES = 64 * 64;
constexpr int SLOTS = 4;
constexpr int STAGE_BYTES = SLOTS * SLOT_BYTES; /* per warpgroup: 16 KB */
/* After the barriers: the unit id of each stage (set by the producer with the first K-slice of a
 * unit, -1: no more work) and one exchange word per consumer warpgroup (split-K). */
constexpr int SMEM_BYTES = 1024 /* alignment slack */ + STAGES * (A_STAGE + B_STAGE) + 2 * STAGE_BYTES +
                           2 * STAGES * 8 + 4 * STAGES + 8;
/* Accumulators of one consumer warpgroup's half tile, as the split-K exchange stores them. */
constexpr int HALF_TILE_FLOATS = 128 * 128;

#include "cuda/wgmma_n256.inc"

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
    /* Work units: tiles x splits, handed out in order by an atomic counter (dynamic persistent
     * scheduling, so that CTAs that start late, behind another stream's kernel, take less work).
     * splits 2: each tile's K range in two halves; the half that finishes second adds the first
     * one's accumulators (one IEEE addition, commutative: bit-identical whichever finished first)
     * and runs the epilogue. */
    int32_t splits, units;
    int32_t aux_packed;  /* aux_in is f16/bf16 with unit column stride, even row stride, 4-byte aligned,
                            and the activation is GELU': the epilogue prefetches it as 16-bit pairs
                            (see load_aux_pairs) */
    int32_t bias_packed; /* bias is f16/bf16, unit stride, 4-byte aligned, and aux_in is not prefetched:
                            the epilogue prefetches it as 16-bit pairs (see load_bias_pairs) */
    int32_t *sync;        /* [0] next unit, [1] CTAs done, [SYNC_SEMS + 2 h], [.. + 1]: half tile h's
                             arrival count and ready flag. Zero at launch; the kernel leaves it zero. */
    float *split_partial; /* [tile][2 halves][HALF_TILE_FLOATS] when splits == 2 */
};

/* Layout of a lane's sync block (ints): two counters, then two words per half tile. */
constexpr int SYNC_SEMS = 32;
static_assert(CVF_CUDA_SYNC_INTS == SYNC_SEMS + 2 * 2 * CVF_CUDA_MAX_SPLIT_TILES, "sync block layout");
static_assert(BM == CVF_CUDA_SM90_TILE_M && BN == CVF_CUDA_SM90_TILE_N && BK == CVF_CUDA_SM90_TILE_K, "tile");

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

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
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

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                     dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
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
__device__ __forceinline__ void fence_acc(float (&acc)[128])
{
#pragma unroll
    for (int i = 0; i < 128; i++)
        asm volatile("" : "+f"(acc[i])::"memory");
}

__device__ __forceinline__ int32_t ld_acquire(const int32_t *p)
{
    int32_t v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release(int32_t *p, int32_t v)
{
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* A work unit: its output tile and K-slice range [kt0, kt1). */
struct unit_work {
    int32_t tm, tn, kt0, kt1, tile, split;
};

/* The tile at position t of the grouped order. */
__device__ __forceinline__ void tile_coords(int32_t t, int32_t tiles_m, int32_t tiles_n, int32_t *tm, int32_t *tn)
{
    int32_t per_group = GROUP_M * tiles_n;
    int32_t group = t / per_group;
    int32_t first = group * GROUP_M;
    int32_t rows = tiles_m - first < GROUP_M ? tiles_m - first : GROUP_M;
    int32_t in_group = t - group * per_group;
    *tm = first + in_group % rows;
    *tn = in_group / rows;
}

/* Unit u: tile u / splits (both halves of a tile are handed out one after the other, so they run
 * at the same time and the second waits little for the first's accumulators), K half u % splits. */
__device__ __forceinline__ unit_work unit_of(const sm90_params &p, int32_t u)
{
    unit_work w;
    w.tile = u / p.splits;
    w.split = u - w.tile * p.splits;
    tile_coords(w.tile, p.tiles_m, p.tiles_n, &w.tm, &w.tn);
    int32_t half = p.k_tiles / 2;
    w.kt0 = p.splits == 1 ? 0 : w.split == 0 ? 0 : half;
    w.kt1 = p.splits == 1 ? p.k_tiles : w.split == 0 ? half : p.k_tiles;
    return w;
}

/*
 * Split-K exchange of one consumer warpgroup's half tile h (this thread's 128 accumulators):
 * the first of the two K halves to finish stores its accumulators and raises the ready flag;
 * the second waits for the flag, adds them into its own and returns true (it runs the
 * epilogue), resetting the words for the next launch. The first returns false. Only the writer
 * (running) is ever waited for, so no launch order or residency can deadlock it.
 */
__device__ __forceinline__ bool split_exchange(const sm90_params &p, float (&acc)[128], int32_t h, int wg, int t,
                                               volatile int32_t *xchg)
{
    int32_t *count = p.sync + SYNC_SEMS + 2 * h, *ready = count + 1;
    float *part = p.split_partial + (size_t)h * HALF_TILE_FLOATS;
    if (t == 0)
        xchg[wg] = atomicAdd(count, 1);
    named_barrier(1 + wg, 128);
    const bool first = xchg[wg] == 0;
    if (first) {
#pragma unroll
        for (int i = 0; i < 128; i++)
            __stcg(part + i * 128 + t, acc[i]);
        __threadfence();
        named_barrier(1 + wg, 128);
        if (t == 0)
            st_release(ready, 1);
        return false;
    }
    if (t == 0)
        while (ld_acquire(ready) == 0)
            ;
    named_barrier(1 + wg, 128);
    __threadfence();
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc[i] += __ldcg(part + i * 128 + t);
    if (t == 0) {
        *count = 0;
        *ready = 0;
    }
    return true;
}

/* A consumer warpgroup's output staging: its ring of SLOTS boxes in shared memory and the count
 * of boxes put so far (the same in all 128 threads). */
struct stager {
    unsigned char *buf;
    uint32_t seq;
};

/* Hands the box just written to slot (seq % SLOTS) to the TMA: every thread's writes are made
 * visible to the async proxy; thread 0 waits until at most SLOTS - 2 earlier stores still read
 * shared memory, so that the slot of the next box (last used SLOTS boxes ago) is free; the
 * warpgroup syncs (this box complete, the next slot free); thread 0 issues the store of the box
 * at row r, column c (clipped to m x n by the hardware) as its own bulk group. */
__device__ __forceinline__ void put_box(const CUtensorMap *map, stager &st, int wg, int t, int64_t r, int64_t c,
                                        int64_t m, int64_t n)
{
    fence_proxy_async();
    if (t == 0)
        bulk_wait_read<SLOTS - 2>();
    named_barrier(1 + wg, 128);
    if (t == 0) {
        if (r < m && c < n)
            tma_store_2d(map, smem_addr(st.buf + (st.seq % SLOTS) * SLOT_BYTES), (int32_t)c, (int32_t)r);
        bulk_commit();
    }
    st.seq++;
}

/* Stores 32 columns (acc[0..16) of the chunk CH) of this warpgroup's 64 rows to out. */
template <int CH>
__device__ __forceinline__ void store_chunk(const out_desc &out, const CUtensorMap *map, const float (&acc)[128],
                                            stager &st, int wg, int t, int64_t row0, int64_t col0, int64_t m,
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
    /* The slot is 64 rows of 64 bytes; the 64-byte swizzle XORs the 16-byte unit index with
     * (row / 2) % 4, which for this thread's rows (r_local, r_local + 8) is (lane / 8) % 4. */
    const int sw = (lane >> 3) & 3;
    if (out.dtype != CVF_F32) {
        uint32_t bits[4][2]; /* [8-column block][row half]: the rounded pairs of this thread */
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float x = acc[CH * 16 + jb * 4 + 2 * h], y = acc[CH * 16 + jb * 4 + 2 * h + 1];
                if (out.dtype == CVF_F16) {
                    __half2 v = __floats2half2_rn(x, y);
                    bits[jb][h] = *reinterpret_cast<uint32_t *>(&v);
                } else {
                    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
                    bits[jb][h] = *reinterpret_cast<uint32_t *>(&v);
                }
            }
        {
            unsigned char *row = st.buf + (st.seq % SLOTS) * SLOT_BYTES + r_local * 64 + 4 * (lane % 4);
#pragma unroll
            for (int jb = 0; jb < 4; jb++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    *reinterpret_cast<uint32_t *>(row + h * 512 + ((jb ^ sw) << 4)) = bits[jb][h];
        }
        put_box(map, st, wg, t, row0, col0 + CH * CHUNK, m, n);
    } else { /* f32: two boxes of 16 columns */
#pragma unroll
        for (int half = 0; half < 2; half++) {
            unsigned char *row = st.buf + (st.seq % SLOTS) * SLOT_BYTES + r_local * 64 + 8 * (lane & 1);
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
 * aux_in (GELU''s saved input) for two chunks of this thread's fragment, as packed 16-bit pairs
 * [chunk][8-column block jb][row half h] (the pair is columns j, j + 1 of one row). All 16 loads
 * are issued together, one chunk pair ahead of their use (and the first pair before the tile's
 * last wgmma completes), so the epilogue waits for memory once per tile, not once per element.
 */
__device__ __forceinline__ void load_aux_pairs(const sm90_params &p, uint32_t (&v)[16], int64_t row0, int64_t col0,
                                               int t)
{
    const int warp = t / 32, lane = t % 32;
    const int64_t i0 = row0 + warp * 16 + lane / 4, j0 = col0 + 2 * (lane % 4);
    const unsigned short *row = static_cast<const unsigned short *>(p.aux_in.data) + i0 * p.aux_in.rs + j0;
    if (row0 + 64 <= p.m && col0 + 2 * CHUNK <= p.n) { /* inside: 16 loads off two row pointers */
        const unsigned short *row8 = row + 8 * p.aux_in.rs;
#pragma unroll
        for (int c = 0; c < 2; c++)
#pragma unroll
            for (int jb = 0; jb < 4; jb++) {
                v[c * 8 + jb * 2] = __ldg(reinterpret_cast<const unsigned int *>(row + c * CHUNK + jb * 8));
                v[c * 8 + jb * 2 + 1] = __ldg(reinterpret_cast<const unsigned int *>(row8 + c * CHUNK + jb * 8));
            }
        return;
    }
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
        for (int jb = 0; jb < 4; jb++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t i = i0 + 8 * h, j = j0 + c * CHUNK + jb * 8;
                uint32_t x = 0;
                if (i < p.m && j < p.n) {
                    const unsigned short *e = row + 8 * h * p.aux_in.rs + c * CHUNK + jb * 8;
                    x = j + 1 < p.n ? __ldg(reinterpret_cast<const unsigned int *>(e)) : (uint32_t)__ldg(e);
                }
                v[c * 8 + jb * 2 + h] = x;
            }
}

/* The bias of this thread's columns in two chunks as packed 16-bit pairs, in the slots of the aux
 * pairs of row half 0 ([chunk][jb][0]); prefetched like aux_in, since a dependent load per chunk
 * of a vector every tile reads would make the epilogue wait on L2 eight times per tile. */
__device__ __forceinline__ void load_bias_pairs(const sm90_params &p, uint32_t (&v)[16], int64_t col0, int t)
{
    const int lane = t % 32;
    const unsigned short *base = static_cast<const unsigned short *>(p.bias.data);
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
        for (int jb = 0; jb < 4; jb++) {
            const int64_t j = col0 + c * CHUNK + jb * 8 + 2 * (lane % 4);
            uint32_t x = 0;
            if (j + 1 < p.n)
                x = __ldg(reinterpret_cast<const unsigned int *>(base + j));
            else if (j < p.n)
                x = __ldg(base + j);
            v[c * 8 + jb * 2] = x;
        }
}

/* Prefetches what the epilogue of the two chunks at (row0, col0) reads: aux_in or bias pairs. */
__device__ __forceinline__ void prefetch_pairs(const sm90_params &p, uint32_t (&v)[16], int64_t row0, int64_t col0,
                                               int t)
{
    if (p.aux_packed)
        load_aux_pairs(p, v, row0, col0, t);
    else if (p.bias_packed)
        load_bias_pairs(p, v, col0, t);
}

/* Element e (0: column j, 1: j + 1) of a packed pair of dtype (f16 or bf16) as fp32. */
__device__ __forceinline__ float unpack_aux(uint32_t pair, int e, int32_t dtype)
{
    const unsigned short bits = (unsigned short)(e ? pair >> 16 : pair & 0xFFFFu);
    return dtype == CVF_BF16 ? __uint_as_float((uint32_t)bits << 16) : __half2float(__ushort_as_half(bits));
}

/* The GELU backward of one 32-column chunk: acc *= gelu'(aux_in), aux_in from the prefetched
 * pairs when p.aux_packed (which implies a GELU' activation), else loaded per element. */
template <int CH, bool ERF>
__device__ __forceinline__ void dgelu_chunk(const sm90_params &p, float (&acc)[128], const uint32_t (&aux)[16],
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
template <int CH>
__device__ __forceinline__ void epilogue_chunk(const sm90_params &p, const CUtensorMap *map_c,
                                               const CUtensorMap *map_aux, float (&acc)[128], stager &st, int wg,
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

/* The whole epilogue of a tile: a run-time loop over the 8 chunks whose body is compiled once,
 * always on acc[0..15]; after each chunk the accumulators shift down by 16 registers (moves with
 * compile-time indices). Unrolling the 8 chunks instead made ~1 MB of SASS per kernel, and
 * the epilogue ran at a quarter of the store bandwidth (instruction fetch). The accumulators
 * are dead afterwards: the next tile's first wgmma does not read them (scale-d 0). */
__device__ __forceinline__ void epilogue_tile(const sm90_params &p, const CUtensorMap *map_c,
                                              const CUtensorMap *map_aux, float (&acc)[128], stager &st, int wg,
                                              int t, int64_t row0, int64_t col0, uint32_t (&aux_next)[16])
{
    const bool prefetch = p.aux_packed || p.bias_packed;
#pragma unroll 1
    for (int ch = 0; ch < BN / CHUNK; ch += 2) { /* two chunks per iteration: 3 x 96 moves, not 7 x 112 */
        uint32_t aux[16];
#pragma unroll
        for (int i = 0; i < 16; i++)
            aux[i] = aux_next[i];
        if (prefetch && ch + 2 < BN / CHUNK)
            prefetch_pairs(p, aux_next, row0, col0 + (ch + 2) * CHUNK, t);
        epilogue_chunk<0>(p, map_c, map_aux, acc, st, wg, t, row0, col0 + ch * CHUNK, aux);
        epilogue_chunk<1>(p, map_c, map_aux, acc, st, wg, t, row0, col0 + ch * CHUNK, aux);
        if (ch + 2 < BN / CHUNK) {
#pragma unroll
            for (int i = 0; i < 128 - 32; i++)
                acc[i] = acc[i + 32];
        }
    }
}

/* DT: 0 f16, 1 bf16. A_MN: A is M-contiguous (column-major). B_MN: B is N-contiguous (row-major). */
template <int DT, int A_MN, int B_MN>
__global__ void __launch_bounds__(THREADS, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_c, const __grid_constant__ CUtensorMap map_aux,
                     const sm90_params p)
{
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem =
        smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023); /* 1024-aligned: the swizzle atom */
    unsigned char *ring_a = smem;
    unsigned char *ring_b = smem + STAGES * A_STAGE;
    unsigned char *staging = ring_b + STAGES * B_STAGE;
    uint64_t *bars = reinterpret_cast<uint64_t *>(staging + 2 * STAGE_BYTES);
    const uint32_t full0 = smem_addr(bars), empty0 = smem_addr(bars + STAGES);
    int32_t *stage_unit = reinterpret_cast<int32_t *>(bars + 2 * STAGES);
    volatile int32_t *xchg = stage_unit + STAGES;

    const int warpgroup = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 2);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
            int stage = 0;
            uint32_t phase = 0;
            for (;;) {
                /* A unit is taken only once a stage is free for it: a CTA never holds work it
                 * cannot start, so CTAs that start late (behind another stream's kernel) take less. */
                mbar_wait(empty0 + 8 * stage, phase ^ 1);
                const int32_t u = atomicAdd(p.sync, 1);
                /* The unit id is published by the arrive on the stage's full barrier (release.cta;
                 * the consumers' wait acquires). Shared atomics, so that racecheck, which does not
                 * follow mbarriers, sees no plain-store hazard. */
                if (u >= p.units) {
                    atomicExch(stage_unit + stage, -1);
                    mbar_arrive(full0 + 8 * stage); /* the consumers read -1 and stop */
                    break;
                }
                atomicExch(stage_unit + stage, u);
                const unit_work w = unit_of(p, u);
                const int32_t tm = w.tm, tn = w.tn;
                for (int32_t kt = w.kt0; kt < w.kt1; kt++) {
                    if (kt != w.kt0)
                        mbar_wait(empty0 + 8 * stage, phase ^ 1);
                    uint32_t full = full0 + 8 * stage;
                    mbar_expect_tx(full, A_STAGE + B_STAGE);
                    uint32_t a_dst = smem_addr(ring_a + stage * A_STAGE);
                    uint32_t b_dst = smem_addr(ring_b + stage * B_STAGE);
                    if (A_MN) {
                        tma_load_2d(a_dst, &map_a, tm * BM, kt * BK, full);
                        tma_load_2d(a_dst + 8192, &map_a, tm * BM + 64, kt * BK, full);
                    } else {
                        tma_load_2d(a_dst, &map_a, kt * BK, tm * BM, full);
                    }
                    if (B_MN) {
#pragma unroll
                        for (int q = 0; q < 4; q++)
                            tma_load_2d(b_dst + q * 8192, &map_b, tn * BN + q * 64, kt * BK, full);
                    } else {
                        tma_load_2d(b_dst, &map_b, kt * BK, tn * BN, full);
                    }
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
            }
            /* The last CTA to finish taking units resets the counters for the next launch. */
            __threadfence();
            if (atomicAdd(p.sync + 1, 1) == (int32_t)gridDim.x - 1) {
                p.sync[0] = 0;
                p.sync[1] = 0;
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int wg = warpgroup - 1; /* consumer 0 or 1: rows [64 wg, 64 wg + 64) of the tile */
    const int t = threadIdx.x - 128 * warpgroup;
    stager st;
    st.buf = staging + wg * STAGE_BYTES;
    st.seq = 0;
    if (t == 0) {
        if (p.c.tma)
            asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_c)) : "memory");
        if (p.aux_out.tma)
            asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map_aux)) : "memory");
    }
    /* MN-major operands: 64-element blocks along M/N 8 KB apart (LBO), 8-row K groups 1 KB apart (SBO) */
    const uint32_t mn_lbo = 8192, mn_sbo = 1024;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (;;) {
        mbar_wait(full0 + 8 * stage, phase); /* the next unit's first K-slice, or the stop */
        const int32_t u = atomicOr(stage_unit + stage, 0);
        if (u < 0)
            break;
        const unit_work w = unit_of(p, u);
        const int32_t tm = w.tm, tn = w.tn;
        int prev = -1;
        for (int32_t kt = w.kt0; kt < w.kt1; kt++) {
            if (kt != w.kt0)
                mbar_wait(full0 + 8 * stage, phase);
            uint32_t a_base = smem_addr(ring_a + stage * A_STAGE) + wg * 8192;
            uint32_t b_base = smem_addr(ring_b + stage * B_STAGE);
            fence_acc(acc);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                uint64_t da = A_MN ? make_desc(a_base + kk * 2048, mn_lbo, mn_sbo) : make_desc(a_base + kk * 32, 16, 1024);
                uint64_t db = B_MN ? make_desc(b_base + kk * 2048, mn_lbo, mn_sbo) : make_desc(b_base + kk * 32, 16, 1024);
                if (DT == 0)
                    wgmma_m64n256k16_f16<A_MN, B_MN>(acc, da, db, kt > w.kt0 || kk > 0);
                else
                    wgmma_m64n256k16_bf16<A_MN, B_MN>(acc, da, db, kt > w.kt0 || kk > 0);
            }
            wgmma_commit();
            fence_acc(acc);
            if (prev >= 0) { /* the previous slice's wgmmas are done: give its stage back */
                wgmma_wait<1>();
                fence_acc(acc);
                if (t == 0)
                    mbar_arrive(empty0 + 8 * prev);
            }
            prev = stage;
            if (++stage == STAGES) {
                stage = 0;
                phase ^= 1;
            }
        }
        uint32_t aux[16]; /* the first two chunks' aux_in, loaded while the last wgmmas run */
#pragma unroll
        for (int i = 0; i < 16; i++)
            aux[i] = 0;
        const bool prefetch = p.aux_packed || p.bias_packed;
        if (prefetch && p.splits == 1)
            prefetch_pairs(p, aux, (int64_t)tm * BM + wg * 64, (int64_t)tn * BN, t);
        wgmma_wait<0>();
        fence_acc(acc);
        if (t == 0)
            mbar_arrive(empty0 + 8 * prev);
        if (p.splits > 1) { /* whichever K half finishes second runs the epilogue */
            if (!split_exchange(p, acc, 2 * w.tile + wg, wg, t, xchg))
                continue;
            if (prefetch)
                prefetch_pairs(p, aux, (int64_t)tm * BM + wg * 64, (int64_t)tn * BN, t);
        }
        epilogue_tile(p, &map_c, &map_aux, acc, st, wg, t, (int64_t)tm * BM + wg * 64, (int64_t)tn * BN, aux);
    }
    if (t == 0)
        bulk_wait_all(); /* the staging buffers stay until the last stores have read them */
}

template <int DT, int A_MN, int B_MN>
cvf_status launch(cvf_context *ctx, cudaStream_t stream, const CUtensorMap *maps, const sm90_params &p, int grid)
{
    static bool configured = false; /* per instantiation */
    auto kernel = sm90_gemm_kernel<DT, A_MN, B_MN>;
    if (!configured) {
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (err != cudaSuccess)
            return cvf_cuda_check(ctx, err, "sm90 GEMM: cudaFuncSetAttribute(shared memory)");
        configured = true;
    }
    kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(maps[0], maps[1], maps[2], maps[3], p);
    return cvf_cuda_check(ctx, cudaGetLastError(), "sm90 GEMM kernel launch");
}

template <int DT>
cvf_status launch_layout(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                         const sm90_params &p, int grid)
{
    if (la == 0 && lb == 0)
        return launch<DT, 0, 0>(ctx, stream, maps, p, grid);
    if (la == 0 && lb == 1)
        return launch<DT, 0, 1>(ctx, stream, maps, p, grid);
    if (la == 1 && lb == 0)
        return launch<DT, 1, 0>(ctx, stream, maps, p, grid);
    return launch<DT, 1, 1>(ctx, stream, maps, p, grid);
}


} /* namespace sm90 */

/* Launches the kernel for dtype DT (0 f16, 1 bf16) and operand layouts la, lb (0 K-major,
 * 1 MN-major) on stream; maps: A, B, C, aux_out (the last two used only where p says tma). */
cvf_status cvf_sm90_launch_f16(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                               const sm90::sm90_params &p, int grid);
cvf_status cvf_sm90_launch_bf16(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                                const sm90::sm90_params &p, int grid);

#endif /* CVF_CUDA_GEMM_SM90_CUH */

/*
 * The Hopper (sm_90a) GEMM with the fused epilogue: "cube" = wgmma, "vector" = the epilogue on
 * the accumulator registers.
 *
 * One CTA per SM (persistent), 384 threads in three warpgroups:
 *   warpgroup 0, the producer: one thread issues the TMA copies (cp.async.bulk.tensor) of each
 *     A (128 x 64) and B (64 x 256) K-slice into a STAGES-deep shared-memory ring; each stage
 *     has a "full" mbarrier (the copy engine completes its transaction bytes on it) and an
 *     "empty" mbarrier (both consumers arrive when their wgmmas have read it). It keeps 40
 *     registers (setmaxnreg.dec).
 *   warpgroups 1 and 2, the consumers: each owns 64 rows of the 128 x 256 output tile, issues
 *     wgmma.m64n256k16 from the stage (B shared, A its half), 128 fp32 accumulators per thread
 *     (setmaxnreg.inc to 232). After the last K-slice the epilogue runs on those registers:
 *     bias, aux_out, activation (aux_in for GELU'), bias-gradient partial sums, rounding to the
 *     output dtype, and the stores, 32 columns at a time through a per-warpgroup shared buffer
 *     so that global stores are 16-byte and coalesced. The producer meanwhile fills the ring
 *     with the next tile's slices.
 * Work units (tiles, or half-K slices of tiles when few tiles would leave SMs idle) are handed
 * out in a grouped order (GROUP_M row tiles per group, then along N, so that the CTAs running at
 * one time share A rows and B columns in L2) by an atomic counter the producer reads when a stage
 * is free: CTAs that start late, behind another stream's kernel, take fewer. The two halves of a
 * split tile meet in split_exchange (gemm_sm90.cuh): the second to finish adds the first's
 * accumulators, one commutative addition, so the result does not depend on which was first.
 *
 * Operands are read in place: A row-major (K contiguous, "K-major") or column-major (M
 * contiguous), B column-major (K-major) or row-major (N contiguous): the TMA box follows the
 * contiguous direction and wgmma's transpose bits say which. Tails in M, N and K come from the
 * TMA's zero fill (K) and masked stores (M, N). What this kernel cannot take (f32 or mixed
 * inputs, strides that are not multiples of 16 bytes, misaligned pointers, no unit stride)
 * returns UNSUPPORTED before anything is enqueued and runs on the simple kernel.
 */
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
 * operand boxes, 64: the output boxes), zero fill outside. */
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
    if (k_stride == 1 && tma_stride_ok(other, k_extent))
        return 0;
    if (other == 1 && tma_stride_ok(k_stride, mn_extent))
        return 1;
    return -1;
}

/* The epilogue's view of an output; row-major outputs with 16-byte aligned rows get a tensor map
 * (boxes of 64 rows x 64 bytes) and TMA stores, the others element stores. */
out_desc make_out(cvf_context *ctx, const cvf_matrix *x, CUtensorMap *map)
{
    out_desc o;
    o.data = x ? x->data : NULL;
    o.dtype = x ? (int32_t)x->dtype : 0;
    o.rs = x ? x->row_stride : 0;
    o.cs = x ? x->col_stride : 0;
    size_t esize = x ? cvf_dtype_size(x->dtype) : 0;
    o.tma = x && x->col_stride == 1 && (uintptr_t)x->data % 16 == 0 && ((size_t)x->row_stride * esize) % 16 == 0 &&
            x->row_stride >= x->cols && x->row_stride < (INT64_C(1) << 34);
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

int cvf_cuda_sm90_splits(const cvf_context *ctx, int64_t m, int64_t n, int64_t k)
{
    int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN), k_tiles = (k + BK - 1) / BK;
    if (k_tiles < 2 || tiles > CVF_CUDA_MAX_SPLIT_TILES || tiles < 1)
        return 1;
    const char *force = getenv("CVF_CUDA_SPLITK"); /* "1" or "2": experiments and tests */
    if (force && (force[0] == '1' || force[0] == '2') && force[1] == '\0')
        return force[0] - '0';
    if (k_tiles < 16)
        return 1;
    int64_t sms = cvf_cuda_state_of(ctx)->sm_count > 0 ? cvf_cuda_state_of(ctx)->sm_count : 1;
    /* Time in whole-tile units: waves of tiles, or waves of half tiles counted as halves. */
    double one = (double)((tiles + sms - 1) / sms), two = 0.5 * (double)((2 * tiles + sms - 1) / sms);
    return two < 0.9 * one ? 2 : 1;
}

size_t cvf_cuda_sm90_split_bytes(int64_t m, int64_t n, int splits)
{
    if (splits < 2)
        return 0;
    int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
    return sizeof(float) * (size_t)tiles * 2 * HALF_TILE_FLOATS;
}


bool cvf_cuda_sm90_eligible(const cvf_context *ctx, const cvf_matrix *a, const cvf_matrix *b, const cvf_matrix *c)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    if (!st->fast || !st->sync || st->max_smem_optin < SMEM_BYTES)
        return false;
    if (a->dtype != b->dtype || (a->dtype != CVF_F16 && a->dtype != CVF_BF16))
        return false;
    int64_t m = c->rows, n = c->cols, k = a->cols;
    if (m < 1 || n < 1 || k < 1 || m > (INT64_C(1) << 31) - BM || n > (INT64_C(1) << 31) - BN ||
        k > (INT64_C(1) << 31) - BK)
        return false;
    int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
    if (tiles * 2 > INT32_MAX - 4096)
        return false;
    return operand_layout(a, true) >= 0 && operand_layout(b, false) >= 0;
}

cvf_status cvf_cuda_sm90_matmul(cvf_context *ctx, cvf_cuda_launch launch, const cvf_matrix *a, const cvf_matrix *b,
                                const cvf_matrix *c, const cvf_epilogue *ep, float *partials, float *split_partial)
{
    const cvf_cuda_state *st = cvf_cuda_state_of(ctx);
    int64_t m = c->rows, n = c->cols, k = a->cols;
    int la = operand_layout(a, true), lb = operand_layout(b, false);
    int dt = a->dtype == CVF_BF16 ? 1 : 0;
    CUtensorMap maps[4]; /* A, B, C, aux_out */
    memset(maps, 0, sizeof maps);
    bool ok = la == 0 ? encode_cached(ctx, &maps[0], dt, a->data, k, m, a->row_stride, BK, BM)
                      : encode_cached(ctx, &maps[0], dt, a->data, m, k, a->col_stride, 64, BK);
    ok = ok && (lb == 0 ? encode_cached(ctx, &maps[1], dt, b->data, k, n, b->col_stride, BK, BN)
                        : encode_cached(ctx, &maps[1], dt, b->data, n, k, b->row_stride, 64, BK));
    if (!ok)
        return cvf_fail(ctx, CVF_STATUS_INTERNAL_ERROR, "sm90 GEMM: the driver refused a tensor map");
    sm90_params p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.n = n;
    p.k = k;
    p.tiles_m = (int32_t)((m + BM - 1) / BM);
    p.tiles_n = (int32_t)((n + BN - 1) / BN);
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
    int64_t tiles = (int64_t)p.tiles_m * p.tiles_n;
    p.splits = split_partial ? cvf_cuda_sm90_splits(ctx, m, n, k) : 1;
    p.units = (int32_t)(tiles * p.splits);
    p.sync = st->sync + (size_t)launch.lane * CVF_CUDA_SYNC_INTS;
    p.split_partial = split_partial;
    int grid = (int)(p.units < st->sm_count ? p.units : st->sm_count);
    cudaStream_t stream = (cudaStream_t)launch.stream;
    cvf_status status = dt ? cvf_sm90_launch_bf16(ctx, stream, la, lb, maps, p, grid)
                           : cvf_sm90_launch_f16(ctx, stream, la, lb, maps, p, grid);
    if (status == CVF_STATUS_SUCCESS && ep->bias_grad)
        status = cvf_cuda_combine_partials(ctx, launch, partials, (m + CVF_CUDA_SM90_SLAB - 1) / CVF_CUDA_SM90_SLAB, n,
                                           ep->bias_grad);
    return status;
}

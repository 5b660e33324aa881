/*
 * sm90_load_probe: how long does a warp's 16-byte global load take to return on a Hopper SM while
 * the SM's bulk-copy (TMA) engine streams other data? The sm90 kernel's epilogue warps wait on
 * their aux_in loads for a quarter of their time, and a load issued ~1.5 us before its first use
 * still stalls there (docs/PERF.md, 2026-12-06 fourth session, step 8), while L2 prefetches did
 * not help (steps 3 and 9). This probe separates the causes on one GPU, one CTA per SM:
 *   - 4 loader warps read a large tensor (far bigger than L2, read once, like aux_in) in the
 *     epilogue warps' pattern: each lane 16 bytes of a 64-byte row segment, 8 rows a load
 *     instruction, D loads in flight per warp (D = 1: pure latency; D = 4: the kernel's depth);
 *     each load's issue-to-use time is read with clock64 (the use: a dependent add); and the same
 *     bytes as 4 rows of 128 bytes a load instruction (whole lines: "4 x 128 B");
 *   - optionally, warp 0 streams bulk copies (cp.async.bulk, global -> shared, 16 KB each, a ring
 *     of 3 x 48 KB as the kernel's) from a buffer that fits L2, as the mainloop's TMA loads do;
 *   - optionally, it also stores each chunk it loaded back out by bulk copy (shared -> global) into
 *     a large buffer: as many bytes stored as loaded, where the kernel's C stores are about a
 *     ninth of its ring's loads at K = 768 (so this mode bounds that traffic's effect from above).
 * Output per mode: the loaders' median and 90th-percentile issue-to-use cycles, their read
 * bandwidth, and the bulk traffic's. Not part of the build.
 *
 *   nvcc -std=c++17 -O3 -arch=sm_90a bench/sm90_load_probe.cu -o build/sm90_load_probe
 *   build/sm90_load_probe
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK_CUDA(x)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                                \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

constexpr int LOADERS = 4;                        /* loader warps */
constexpr int ITERS = 2048;                       /* loads per loader warp */
constexpr int SAMPLES = 256;                      /* of them timed (the last ones, after the ramp) */
constexpr int CHUNK = 16384;                      /* bytes of one bulk copy */
constexpr int RING = 9;                           /* chunks in shared memory: 3 stages x 48 KB */
constexpr size_t STREAM_BYTES = (size_t)24 << 20; /* the bulk loads' source (fits L2) */
constexpr size_t STORE_BYTES = (size_t)512 << 20; /* the bulk stores' target */
constexpr size_t READ_BYTES = (size_t)1024 << 20; /* the loaders' tensor (read once) */
/* Where each CTA's bulk streams start, in chunks of its index (so that CTAs do not move in step);
 * offsets wrap within the buffers, which get one chunk of slack past their ends. */
constexpr size_t SRC_SPREAD = 7, DST_SPREAD = 64;

struct probe_out {
    unsigned long long *cycles; /* [blocks][LOADERS][SAMPLES] issue-to-use cycles */
    unsigned long long *bulk;   /* [blocks] bulk copies completed */
    unsigned long long *sink;   /* keeps the loads alive */
};

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Waits until the mbarrier at bar completes the phase of the given parity. */
__device__ __forceinline__ void wait_parity(uint32_t bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra W;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* Warp 0, lane 0: bulk loads (and, with stores, bulk stores) until the loaders are done. */
__device__ void bulk_streamer(const unsigned char *src, unsigned char *dst, bool stores, unsigned char *ring,
                              uint64_t *bars, volatile int *done, unsigned long long *count)
{
    unsigned long long n = 0;
    uint32_t phase[RING] = {};
    size_t src_off = blockIdx.x * SRC_SPREAD * CHUNK % STREAM_BYTES,
           dst_off = blockIdx.x * DST_SPREAD * CHUNK % STORE_BYTES;
    for (int s = 0; !*done; s = (s + 1) % RING) {
        const uint32_t bar = smem_u32(&bars[s]), buf = smem_u32(ring + (size_t)s * CHUNK);
        if (n >= RING) { /* the slot's previous copy has landed */
            wait_parity(bar, phase[s]);
            phase[s] ^= 1;
            if (stores) {
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + dst_off),
                             "r"(buf), "r"(CHUNK)
                             : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                dst_off = (dst_off + CHUNK) % STORE_BYTES;
            }
        }
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(CHUNK) : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(buf),
            "l"(src + src_off), "r"(CHUNK), "r"(bar)
            : "memory");
        src_off = (src_off + CHUNK) % STREAM_BYTES;
        n++;
    }
    for (int s = 0; s < RING && (unsigned long long)s < n; s++) /* drain */
        wait_parity(smem_u32(&bars[s]), phase[s]);
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    *count = n;
}

/* The sm90 kernel's aux_in load (load_aux8): 16 bytes, read-only, not allocated in L1. */
__device__ __forceinline__ uint4 load_past_l1(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* A loader warp: D loads in flight, each 8 rows x 64 bytes (lane: row lane / 4, 16 bytes at
 * 16 (lane % 4)), or with WIDE 4 rows x 128 bytes (row lane / 8, 16 bytes at 16 (lane % 8)): the
 * same 512 bytes in 8 half lines or in 4 whole 128-byte lines; rows 512 bytes apart as in a
 * 256-column bf16 matrix; the last SAMPLES loads' issue-to-use cycles recorded by lane 0. */
template <int D, int WIDE>
__device__ void loader(const uint4 *base, size_t rows_total, int warp, unsigned long long *cycles,
                       unsigned long long *sink)
{
    const int lane = threadIdx.x & 31;
    const size_t row_stride = 512 / sizeof(uint4);
    const int rq = WIDE ? lane / 8 : lane / 4, u = WIDE ? lane & 7 : lane & 3, rows_a_load = WIDE ? 4 : 8;
    size_t row = ((size_t)blockIdx.x * LOADERS + warp) * 8 * ITERS % rows_total;
    uint4 v[D];
    long long t0[D];
    uint32_t acc = 0;
#pragma unroll
    for (int d = 0; d < D; d++) {
        t0[d] = clock64();
        v[d] = load_past_l1(base + (row + rq) * row_stride + u);
        row = (row + rows_a_load) % rows_total;
    }
    for (int i0 = 0; i0 < ITERS; i0 += D) { /* unrolled by D: v and t0 stay in registers */
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int i = i0 + d;
            acc += v[d].x ^ v[d].w; /* the use: waits for the load */
            const long long t1 = clock64();
            if (lane == 0 && i >= ITERS - SAMPLES)
                cycles[i - (ITERS - SAMPLES)] = (unsigned long long)(t1 - t0[d]);
            t0[d] = clock64();
            v[d] = load_past_l1(base + (row + rq) * row_stride + u);
            row = (row + rows_a_load) % rows_total;
        }
    }
    if (acc == 0x9e3779b9u)
        *sink = acc;
}

template <int D, int WIDE>
__global__ void __launch_bounds__(32 * (1 + LOADERS), 1)
    probe(const uint4 *read, const unsigned char *stream_src, unsigned char *store_dst, int mode, probe_out out)
{
    extern __shared__ __align__(1024) unsigned char ring[];
    __shared__ uint64_t bars[RING];
    __shared__ int finished;
    __shared__ volatile int done;
    const int warp = threadIdx.x / 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < RING; s++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bars[s])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        done = 0;
        finished = 0;
    }
    __syncthreads();
    if (warp == 0) {
        if (threadIdx.x == 0 && mode > 0)
            bulk_streamer(stream_src, store_dst, mode > 1, ring, bars, &done, out.bulk + blockIdx.x);
    } else {
        const size_t rows = READ_BYTES / 512 - 8; /* a load reads 8 rows from its first */
        loader<D, WIDE>(read, rows, warp - 1, out.cycles + ((size_t)blockIdx.x * LOADERS + warp - 1) * SAMPLES,
                        out.sink);
        if ((threadIdx.x & 31) == 0 && atomicAdd(&finished, 1) == LOADERS - 1)
            done = 1;
    }
}

template <int D, int WIDE>
static int run_mode(int mode, int sms, const uint4 *read, const unsigned char *src, unsigned char *dst, probe_out out,
                    std::vector<unsigned long long> &h_cycles, std::vector<unsigned long long> &h_bulk)
{
    const int smem = RING * CHUNK;
    CHECK_CUDA(cudaFuncSetAttribute(probe<D, WIDE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CHECK_CUDA(cudaMemset(out.bulk, 0, sizeof(unsigned long long) * sms));
    probe<D, WIDE><<<sms, 32 * (1 + LOADERS), smem>>>(read, src, dst, mode, out); /* warm-up */
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventRecord(e0));
    probe<D, WIDE><<<sms, 32 * (1 + LOADERS), smem>>>(read, src, dst, mode, out);
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaDeviceSynchronize());
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    const size_t n = h_cycles.size();
    CHECK_CUDA(cudaMemcpy(h_cycles.data(), out.cycles, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(h_bulk.data(), out.bulk, sms * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::sort(h_cycles.begin(), h_cycles.end());
    unsigned long long bulk = 0;
    for (int i = 0; i < sms; i++)
        bulk += h_bulk[i];
    const double read_bytes = (double)sms * LOADERS * ITERS * 512;
    static const char *names[] = {"loads alone", "+ bulk loads from L2", "+ bulk loads and stores"};
    printf(
        "D=%d %s %-26s issue-to-use cycles median %6llu p90 %6llu | loaders %7.1f GB/s | bulk %7.1f GB/s | %.3f ms\n",
        D, WIDE ? "4 x 128 B" : "8 x 64 B ", names[mode], h_cycles[n / 2], h_cycles[n * 9 / 10], read_bytes / ms / 1e6,
        (double)bulk * CHUNK * (mode > 1 ? 2 : 1) / ms / 1e6, ms);
    return 0;
}

int main()
{
    int sms = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    uint4 *read = nullptr;
    unsigned char *src = nullptr, *dst = nullptr;
    probe_out out = {};
    CHECK_CUDA(cudaMalloc(&read, READ_BYTES));
    CHECK_CUDA(cudaMalloc(&src, STREAM_BYTES + CHUNK));
    CHECK_CUDA(cudaMalloc(&dst, STORE_BYTES + CHUNK));
    CHECK_CUDA(cudaMemset(read, 1, READ_BYTES));
    CHECK_CUDA(cudaMemset(src, 2, STREAM_BYTES));
    const size_t n = (size_t)sms * LOADERS * SAMPLES;
    CHECK_CUDA(cudaMalloc(&out.cycles, n * sizeof(unsigned long long)));
    CHECK_CUDA(cudaMalloc(&out.bulk, sms * sizeof(unsigned long long)));
    CHECK_CUDA(cudaMalloc(&out.sink, sizeof(unsigned long long)));
    std::vector<unsigned long long> h_cycles(n), h_bulk(sms);
    for (int mode = 0; mode < 3; mode++)
        if (run_mode<1, 0>(mode, sms, read, src, dst, out, h_cycles, h_bulk) ||
            run_mode<4, 0>(mode, sms, read, src, dst, out, h_cycles, h_bulk) ||
            run_mode<1, 1>(mode, sms, read, src, dst, out, h_cycles, h_bulk) ||
            run_mode<4, 1>(mode, sms, read, src, dst, out, h_cycles, h_bulk))
            return 1;
    return 0;
}

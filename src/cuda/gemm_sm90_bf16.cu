/* The Hopper GEMM kernel for bf16 operands (the four operand layouts). */
#include "cuda/gemm_sm90.cuh"

cvf_status cvf_sm90_launch_bf16(cvf_context *ctx, cudaStream_t stream, int la, int lb, const CUtensorMap *maps,
                               const sm90::sm90_params &p, int grid)
{
    return sm90::launch_layout<1>(ctx, stream, la, lb, maps, p, grid);
}

/* The CUDA backend table: fp32 accumulation on an NVIDIA GPU (fast path: Hopper, sm_90a). */
#include "cuda/cuda.h"

/* f32, f16 and bf16 in any mix, like the CPU; the fast engines take f16/bf16 A and B of one
 * dtype, everything else runs on the simple kernel. */
static bool cuda_supports_dtype(cvf_dtype dtype)
{
    return dtype == CVF_F32 || dtype == CVF_F16 || dtype == CVF_BF16;
}

/* Calls are queued on the caller's stream. */
static bool cuda_has_streams(void)
{
    return true;
}

const cvf_backend cvf_cuda_backend = {
    .name = "cuda",
    .accumulate_dtype = CVF_F32,
    .supports_dtype = cuda_supports_dtype,
    .init = cvf_cuda_init,
    .release = cvf_cuda_release,
    .has_streams = cuda_has_streams,
    .workspace_alloc = cvf_cuda_workspace_alloc,
    .workspace_free = cvf_cuda_workspace_free,
    .matmul_workspace = cvf_cuda_matmul_workspace,
    .matmul = cvf_cuda_matmul,
    .column_sum_workspace = cvf_cuda_column_sum_workspace,
    .column_sum = cvf_cuda_column_sum,
    .mlp_intermediate_dtype = cvf_cuda_mlp_intermediate_dtype,
    .plan_steps = cvf_cuda_plan_steps,
    .run_steps = cvf_cuda_run_steps,
#ifdef CVF_HAVE_NCCL
    .tp_check_comm = cvf_cuda_tp_check_comm,
    .tp_agree = cvf_cuda_tp_agree,
#endif
};

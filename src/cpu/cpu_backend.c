/* The CPU backend table: fp32 accumulation on the context's thread pool. */
#include "cpu/cpu.h"
#include "cpu/isa.h"
#include "cpu/kernels/kernels.h"

/* The CPU reads and writes f32, f16 and bf16, in any mix; f64 belongs to the reference device. */
static bool cpu_supports_dtype(cvf_dtype dtype)
{
    return dtype == CVF_F32 || dtype == CVF_F16 || dtype == CVF_BF16;
}

/* grad_fc1_output stays fp32, except for bf16 tensors where the dispatcher gives bf16 x bf16
 * products a bf16 kernel (cvf_cpu_kernel_for: AMX; vdpbf16ps where it pays, on AMD): there it is
 * kept in bf16 (as the CUDA backend and PyTorch keep it) so that the two GEMMs reading it run on
 * that kernel too; an fp32 operand would send them to the fp32 kernel, ~6x slower than AMX and,
 * on a 2-core Zen 4, the whole backward at S = 2048 from 104.5 ms (its four GEMMs) to 144
 * (docs/PERF.md, 2026-12-06 fifth session). */
static cvf_dtype cpu_mlp_intermediate_dtype(cvf_dtype storage)
{
    if (storage != CVF_BF16)
        return CVF_F32;
    const cvf_cpu_kernel *kernel = cvf_cpu_kernel_for(cvf_cpu_isa_active(), CVF_BF16, CVF_BF16);
    return kernel && kernel->format != CVF_CPU_PACK_F32 ? CVF_BF16 : CVF_F32;
}

const cvf_backend cvf_cpu_backend = {
    .name = "cpu",
    .accumulate_dtype = CVF_F32,
    .supports_dtype = cpu_supports_dtype,
    .workspace_alloc = cvf_host_workspace_alloc,
    .workspace_free = cvf_host_workspace_free,
    .matmul_workspace = cvf_cpu_matmul_workspace,
    .matmul = cvf_cpu_matmul,
    .column_sum_workspace = cvf_cpu_column_sum_workspace,
    .column_sum = cvf_cpu_column_sum,
    .mlp_intermediate_dtype = cpu_mlp_intermediate_dtype,
};

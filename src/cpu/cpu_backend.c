/* The CPU backend table: fp32 accumulation on the context's thread pool. */
#include "cpu/cpu.h"

/* The CPU reads and writes f32, f16 and bf16, in any mix; f64 belongs to the reference device. */
static bool cpu_supports_dtype(cvf_dtype dtype)
{
    return dtype == CVF_F32 || dtype == CVF_F16 || dtype == CVF_BF16;
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
};

/* Picks the vector operations of an instruction-set level; see vec.h. */
#include <stddef.h>

#include "cpu/vec.h"

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_for(cvf_cpu_isa isa)
{
    const cvf_cpu_vec_ops *ops = NULL;
    switch (isa) {
    case CVF_CPU_ISA_AVX2: ops = cvf_cpu_vec_ops_avx2(); break;
    case CVF_CPU_ISA_AVX512: /* the AVX-512 code rounds bf16 with integer ops: it serves the three levels */
    case CVF_CPU_ISA_AVX512_BF16:
    case CVF_CPU_ISA_AMX: ops = cvf_cpu_vec_ops_avx512(); break;
    default: break;
    }
    return ops ? ops : cvf_cpu_vec_ops_generic();
}

const cvf_cpu_vec_ops *cvf_cpu_vec_ops_active(void)
{
    return cvf_cpu_vec_ops_for(cvf_cpu_isa_active());
}

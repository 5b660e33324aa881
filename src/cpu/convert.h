/*
 * Strided runs of elements converted to and from fp32: the only place the CPU backend touches
 * the storage dtypes. Packing, the epilogue's loads (bias, aux_in) and its stores (C, aux_out)
 * all go through these.
 */
#ifndef CVF_CPU_CONVERT_H
#define CVF_CPU_CONVERT_H

#include <stdint.h>

#include "cvfuse.h"

/* dst[i] = element (offset + i * stride) of base, for i < count; dtype is f32, f16 or bf16. */
void cvf_cpu_load_run(const void *base, cvf_dtype dtype, int64_t offset, int64_t stride, int64_t count, float *dst);

/* Element (offset + i * stride) of base = src[i] rounded to dtype, for i < count. */
void cvf_cpu_store_run(void *base, cvf_dtype dtype, int64_t offset, int64_t stride, int64_t count, const float *src);

#endif /* CVF_CPU_CONVERT_H */

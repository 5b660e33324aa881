/* Strided fp32 <-> storage-dtype runs; see convert.h. Unit-stride runs go to the active level's
 * vector conversions (bit-identical to the scalar ones below). */
#include "cpu/convert.h"

#include "cpu/vec.h"

void cvf_cpu_load_run(const void *base, cvf_dtype dtype, int64_t offset, int64_t stride, int64_t count, float *dst)
{
    if (stride == 1 && dtype != CVF_F64) {
        const char *start = (const char *)base + offset * (int64_t)cvf_dtype_size(dtype);
        cvf_cpu_vec_ops_active()->load(start, dtype, count, dst);
        return;
    }
    switch (dtype) {
    case CVF_F32: {
        const float *src = (const float *)base + offset;
        for (int64_t i = 0; i < count; i++)
            dst[i] = src[i * stride];
        break;
    }
    case CVF_F16: {
        const uint16_t *src = (const uint16_t *)base + offset;
        for (int64_t i = 0; i < count; i++)
            dst[i] = cvf_f16_to_f32(src[i * stride]);
        break;
    }
    case CVF_BF16: {
        const uint16_t *src = (const uint16_t *)base + offset;
        for (int64_t i = 0; i < count; i++)
            dst[i] = cvf_bf16_to_f32(src[i * stride]);
        break;
    }
    case CVF_F64: /* rejected by validation on this device */ break;
    }
}

void cvf_cpu_store_run(void *base, cvf_dtype dtype, int64_t offset, int64_t stride, int64_t count, const float *src)
{
    if (stride == 1 && dtype != CVF_F64) {
        char *start = (char *)base + offset * (int64_t)cvf_dtype_size(dtype);
        cvf_cpu_vec_ops_active()->store(start, dtype, count, src);
        return;
    }
    switch (dtype) {
    case CVF_F32: {
        float *dst = (float *)base + offset;
        for (int64_t i = 0; i < count; i++)
            dst[i * stride] = src[i];
        break;
    }
    case CVF_F16: {
        uint16_t *dst = (uint16_t *)base + offset;
        for (int64_t i = 0; i < count; i++)
            dst[i * stride] = cvf_f32_to_f16(src[i]);
        break;
    }
    case CVF_BF16: {
        uint16_t *dst = (uint16_t *)base + offset;
        for (int64_t i = 0; i < count; i++)
            dst[i * stride] = cvf_f32_to_bf16(src[i]);
        break;
    }
    case CVF_F64: break;
    }
}

/*
 * The epilogue of one output tile in one call (the "vector" side of a tile), shared by every level:
 * each level includes this file after defining VEC_LOAD, VEC_STORE, VEC_ACTIVATE, VEC_ADD and
 * VEC_ACCUMULATE as its own static functions, so the per-row work inlines into one function and a
 * tile costs one indirect call instead of several per row.
 */
#ifndef CVF_CPU_VEC_FINISH_H
#define CVF_CPU_VEC_FINISH_H

/* See cvf_cpu_vec_ops.finish_tile in vec.h. */
static void vec_finish_tile(const cvf_cpu_tile_epilogue *e, float *x, int64_t ldx, int64_t m, int64_t n)
{
    for (int64_t r = 0; r < m; r++) {
        float *row = x + r * ldx;
        if (e->bias)
            VEC_ADD(row, e->bias, n);
        if (e->aux_out)
            VEC_STORE((char *)e->aux_out + r * e->aux_out_ld * e->aux_out_size, e->aux_out_dtype, n, row);
        if (e->aux_in)
            VEC_LOAD((const char *)e->aux_in + r * e->aux_in_ld * e->aux_in_size, e->aux_in_dtype, n, e->scratch);
        VEC_ACTIVATE(e->activation, row, e->scratch, n);
        VEC_STORE((char *)e->c + r * e->c_ld * e->c_size, e->c_dtype, n, row);
        if (e->sums) {
            if (r == 0 && !e->sums_continue)
                for (int64_t j = 0; j < n; j++) /* short: inline, not a library call */
                    e->sums[j] = row[j];
            else
                VEC_ACCUMULATE(e->sums, row, n);
        }
    }
}

#endif /* CVF_CPU_VEC_FINISH_H */

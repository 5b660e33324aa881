/*
 * The tile epilogue in one sweep per row, for the vector levels: each level includes this file
 * after vec_simd.h, vec_finish.h (the fallback) and its own
 *   vf load_lanes(const void *row, cvf_dtype dtype, int64_t i, int count)   (count values of a row at
 *       element i as fp32 lanes, zeros after: its load's conversion of one block),
 *   void store_lanes(void *row, cvf_dtype dtype, int64_t i, vf y, int count)  (its store's),
 * and uses vec_sweep_finish_tile as its finish_tile.
 */
#ifndef CVF_CPU_VEC_SWEEP_H
#define CVF_CPU_VEC_SWEEP_H

/* One row of the tile as finish_rows sweeps it: its pointers, and the descriptor's members copied
 * out (in registers, where the stores through c and sums would make the compiler reload them). */
typedef struct finish_row {
    const float *x, *bias;
    char *c, *aux_out;
    const char *aux_in;
    float *sums;
    cvf_dtype c_dtype, aux_out_dtype, aux_in_dtype;
    bool add_sums; /* sums += y; else sums = y (the tile's first row, not continued) */
} finish_row;

/* count lanes of a row at element i through bias, aux_out, the activation (reading aux_in in place),
 * the store and the column sums. count is a constant in each caller (VEC_WIDTH in a row's body), so
 * the loads' and stores' tests of it fold away there. */
static inline __attribute__((always_inline)) void finish_vector(const finish_row *f, int64_t i, int count,
                                                                cvf_activation act)
{
    vf y = vf_load_n(f->x + i, count);
    if (f->bias)
        y = vf_add(y, vf_load_n(f->bias + i, count));
    if (f->aux_out)
        store_lanes(f->aux_out, f->aux_out_dtype, i, y, count);
    switch (act) {
    case CVF_ACTIVATION_NONE: break;
    case CVF_ACTIVATION_RELU: y = vf_max(vf_set(0.0f), y); break;
    case CVF_ACTIVATION_GELU_TANH: y = vec_gelu(y); break;
    case CVF_ACTIVATION_DGELU_TANH:
        y = vf_mul(y, vec_gelu_derivative(load_lanes(f->aux_in, f->aux_in_dtype, i, count)));
        break;
    case CVF_ACTIVATION_GELU_ERF: y = vec_gelu_erf(y); break;
    case CVF_ACTIVATION_DGELU_ERF:
        y = vf_mul(y, vec_gelu_erf_derivative(load_lanes(f->aux_in, f->aux_in_dtype, i, count)));
        break;
    }
    store_lanes(f->c, f->c_dtype, i, y, count);
    if (f->sums)
        vf_store_n(f->sums + i, f->add_sums ? vf_add(vf_load_n(f->sums + i, count), y) : y, count);
}

/*
 * vec_finish_tile (vec_finish.h) in one sweep per row: each vector of values goes from the tile's
 * registers through bias, aux_out, the activation (reading aux_in in place), the store and the
 * column sums, instead of one pass per member with aux_in copied into scratch and the row copied
 * out (the MLP backward's GELU' tile spent 40% of its epilogue in those copies). The same
 * operations on the same lanes as the members, so the results are bit-identical (test_vec checks
 * it). act is a constant in each caller, so the activation's switch folds away; a row's whole
 * vectors and its tail are separate loops, so the body tests no lane count.
 */
static inline __attribute__((always_inline)) void finish_rows(const cvf_cpu_tile_epilogue *e, const float *x,
                                                              int64_t ldx, int64_t m, int64_t n, cvf_activation act)
{
    const int64_t body = n / VEC_WIDTH * VEC_WIDTH;
    for (int64_t r = 0; r < m; r++) {
        const finish_row f = {
            x + r * ldx,
            e->bias,
            (char *)e->c + r * e->c_ld * e->c_size,
            e->aux_out ? (char *)e->aux_out + r * e->aux_out_ld * e->aux_out_size : NULL,
            e->aux_in ? (const char *)e->aux_in + r * e->aux_in_ld * e->aux_in_size : NULL,
            e->sums,
            e->c_dtype,
            e->aux_out_dtype,
            e->aux_in_dtype,
            r > 0 || e->sums_continue,
        };
        for (int64_t i = 0; i < body; i += VEC_WIDTH)
            finish_vector(&f, i, VEC_WIDTH, act);
        if (body < n)
            finish_vector(&f, body, (int)(n - body), act);
    }
}

/* See cvf_cpu_vec_ops.finish_tile: finish_rows with the activation as a constant. An activation
 * that needs aux_in without one (the callers never pass that) takes the members' path. */
static void vec_sweep_finish_tile(const cvf_cpu_tile_epilogue *e, float *x, int64_t ldx, int64_t m, int64_t n)
{
    switch (e->activation) {
    case CVF_ACTIVATION_NONE: finish_rows(e, x, ldx, m, n, CVF_ACTIVATION_NONE); return;
    case CVF_ACTIVATION_RELU: finish_rows(e, x, ldx, m, n, CVF_ACTIVATION_RELU); return;
    case CVF_ACTIVATION_GELU_TANH: finish_rows(e, x, ldx, m, n, CVF_ACTIVATION_GELU_TANH); return;
    case CVF_ACTIVATION_GELU_ERF: finish_rows(e, x, ldx, m, n, CVF_ACTIVATION_GELU_ERF); return;
    case CVF_ACTIVATION_DGELU_TANH:
        if (e->aux_in) {
            finish_rows(e, x, ldx, m, n, CVF_ACTIVATION_DGELU_TANH);
            return;
        }
        break;
    case CVF_ACTIVATION_DGELU_ERF:
        if (e->aux_in) {
            finish_rows(e, x, ldx, m, n, CVF_ACTIVATION_DGELU_ERF);
            return;
        }
        break;
    }
    vec_finish_tile(e, x, ldx, m, n);
}

#endif /* CVF_CPU_VEC_SWEEP_H */

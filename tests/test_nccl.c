/*
 * The tensor-parallel MLP on a GPU (issue 14), what one GPU can check:
 *  - partial mode (nccl_comm NULL) on the CUDA device: P = 2, 3 ranks simulated one after another,
 *    their summed output / grad_hidden_state and their slices of the other outputs equal the full
 *    single-GPU result and the float64 reference of the full MLP within the dtype tolerance;
 *  - with NCCL (a CVF_HAVE_NCCL build): a 1-rank communicator (ncclCommInitAll over GPU 0): the TP
 *    call (all-reduce steps, the ranks' agreement, and without it) gives the same bits as the plain
 *    call; a communicator that does not match args.tp, a padded output to all-reduce and a bad
 *    slice fail with their status, nothing written, no hang (the agreement still runs).
 * Exit 77 (skipped, with the reason printed) without CUDA or a GPU. The P = 2, 4 runs over real
 * ranks need a multi-GPU machine (not covered here).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#ifdef CVF_HAVE_CUDA
#include <cuda_runtime.h>
#ifdef CVF_HAVE_NCCL
#include <nccl.h>
#endif

static cvf_context *gpu, *ref;

/* A device copy of a dense host matrix (same shape, dtype, row-major). */
static cvf_matrix upload(const cvf_matrix *h)
{
    cvf_matrix d = *h;
    size_t bytes = (size_t)(h->rows * h->cols) * cvf_dtype_size(h->dtype);
    d.data = NULL;
    if (cudaMalloc(&d.data, bytes ? bytes : 1) != cudaSuccess ||
        cudaMemcpy(d.data, h->data, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        d.data = NULL;
    return d;
}

/* A device matrix filled with the byte 0x7E (a NaN in every dtype: unwritten elements show). */
static cvf_matrix device_poisoned(cvf_dtype dtype, int64_t rows, int64_t cols)
{
    cvf_matrix d = cvf_matrix_row_major(NULL, dtype, rows, cols);
    size_t bytes = (size_t)(rows * cols) * cvf_dtype_size(dtype);
    if (cudaMalloc(&d.data, bytes ? bytes : 1) != cudaSuccess || cudaMemset(d.data, 0x7E, bytes) != cudaSuccess)
        d.data = NULL;
    return d;
}

/* A dense host copy of a dense device matrix. */
static cvf_matrix download(const cvf_matrix *d)
{
    cvf_matrix h;
    if (cvft_matrix_alloc(d->dtype, d->rows, d->cols, &h))
        return (cvf_matrix){0};
    size_t bytes = (size_t)(d->rows * d->cols) * cvf_dtype_size(d->dtype);
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(h.data, d->data, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h.data);
        return (cvf_matrix){0};
    }
    return h;
}

static cvf_vector as_vector(const cvf_matrix *m)
{
    return cvf_vector_dense(m->data, m->dtype, m->rows * m->cols);
}

/* The MLP's tensors: host inputs, their device copies, and the answers. Index names below. */
enum { X, W1, B1, W2, B2, GO, FC1IN, GELUIN, INPUTS };
enum { Y, FC1, GELU, GX, GW1, GB1, GW2, GB2, OUTPUTS };
static const char *const out_names[OUTPUTS] = {"output",          "fc1_output",    "gelu_output",
                                               "grad_hidden_state", "grad_fc1_weight", "grad_fc1_bias",
                                               "grad_fc2_weight", "grad_fc2_bias"};

typedef struct mlp {
    int64_t S, H, I;
    cvf_dtype e;
    cvf_matrix host[INPUTS], dev[INPUTS]; /* vectors as (1 x n) rows */
    cvf_matrix want[OUTPUTS];             /* f64 reference of the full MLP */
    cvf_matrix plain[OUTPUTS];            /* the GPU's plain (unsplit) call, on the host */
} mlp;

/* Output shapes for a rank holding len rows of I (len = I: the full MLP). */
static void out_shape(const mlp *m, int o, int64_t len, int64_t *rows, int64_t *cols)
{
    const int64_t S = m->S, H = m->H;
    const int64_t shapes[OUTPUTS][2] = {{S, H}, {S, len}, {S, len}, {S, H}, {len, H}, {1, len}, {H, len}, {1, H}};
    *rows = shapes[o][0];
    *cols = shapes[o][1];
}

/* Runs forward and backward on ctx for rank r of P (P = 0: unsplit) with tp's communicator, into
 * fresh poisoned device outputs; downloads them into got[]. Returns the worse status. */
static cvf_status run_rank(const mlp *m, cvf_context *ctx, int32_t P, int32_t r, void *comm, uint32_t flags,
                           cvf_matrix got[OUTPUTS])
{
    int64_t off = 0, len = m->I;
    if (P > 0)
        cvf_tensor_parallel_slice(m->I, P, r, &off, &len);
    cvf_matrix d[OUTPUTS];
    for (int o = 0; o < OUTPUTS; o++) {
        int64_t rows, cols;
        out_shape(m, o, len, &rows, &cols);
        d[o] = device_poisoned(m->e, rows, cols);
    }
    cvf_tensor_parallel tp = {0};
    if (P > 0)
        tp = (cvf_tensor_parallel){.size = P, .rank = r, .intermediate = m->I, .nccl_comm = comm, .flags = flags};
    cvf_matrix b1 = support_col_slice(&m->dev[B1], off, len);
    cvf_mlp_forward_args fa = {.hidden_state = m->dev[X],
                               .fc1_weight = support_row_slice(&m->dev[W1], off, len),
                               .fc1_bias = as_vector(&b1),
                               .fc2_weight = support_col_slice(&m->dev[W2], off, len),
                               .fc2_bias = as_vector(&m->dev[B2]),
                               .fc1_output = d[FC1],
                               .gelu_output = d[GELU],
                               .output = d[Y],
                               .gelu = CVF_GELU_ERF,
                               .tp = tp};
    cvf_status fs = cvf_mlp_forward(ctx, &fa);
    if (fs != CVF_STATUS_SUCCESS)
        fprintf(stderr, "  forward: %s: %s\n", cvf_status_string(fs), cvf_context_last_error(ctx));
    cvf_mlp_backward_args ba = {.grad_output = m->dev[GO],
                                .hidden_state = m->dev[X],
                                .fc1_weight = support_row_slice(&m->dev[W1], off, len),
                                .fc2_weight = support_col_slice(&m->dev[W2], off, len),
                                .fc1_output = support_col_slice(&m->dev[FC1IN], off, len),
                                .gelu_output = support_col_slice(&m->dev[GELUIN], off, len),
                                .grad_hidden_state = d[GX],
                                .grad_fc1_weight = d[GW1],
                                .grad_fc1_bias = as_vector(&d[GB1]),
                                .grad_fc2_weight = d[GW2],
                                .grad_fc2_bias = as_vector(&d[GB2]),
                                .gelu = CVF_GELU_ERF,
                                .tp = tp};
    cvf_status bs = cvf_mlp_backward(ctx, &ba);
    if (bs != CVF_STATUS_SUCCESS)
        fprintf(stderr, "  backward: %s: %s\n", cvf_status_string(bs), cvf_context_last_error(ctx));
    for (int o = 0; o < OUTPUTS; o++) {
        got[o] = download(&d[o]);
        cudaFree(d[o].data);
    }
    return fs != CVF_STATUS_SUCCESS ? fs : bs;
}

static void free_all(cvf_matrix *ms, int n)
{
    for (int i = 0; i < n; i++) {
        free(ms[i].data);
        ms[i].data = NULL;
    }
}

static int mlp_create(mlp *m, int64_t S, int64_t H, int64_t I, cvf_dtype e, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->S = S, m->H = H, m->I = I, m->e = e;
    const int64_t shapes[INPUTS][2] = {{S, H}, {I, H}, {1, I}, {H, I}, {1, H}, {S, H}, {S, I}, {S, I}};
    const double range[INPUTS] = {support_gelu_a_range(H), 1, 1, 1, 1, 1, 4, 2};
    cvft_rng rng = cvft_rng_make(seed);
    for (int i = 0; i < INPUTS; i++) {
        if (cvft_matrix_alloc(e, shapes[i][0], shapes[i][1], &m->host[i]))
            return -1;
        cvft_matrix_fill_uniform(&m->host[i], &rng, -range[i], range[i]);
        m->dev[i] = upload(&m->host[i]);
        if (!m->dev[i].data)
            return -1;
    }
    /* the float64 reference of the full MLP */
    cvf_matrix h64[INPUTS];
    for (int i = 0; i < INPUTS; i++)
        if (cvft_matrix_to_f64(&m->host[i], &h64[i]))
            return -1;
    for (int o = 0; o < OUTPUTS; o++) {
        int64_t rows, cols;
        out_shape(m, o, I, &rows, &cols);
        if (cvft_matrix_alloc(CVF_F64, rows, cols, &m->want[o]))
            return -1;
    }
    cvf_mlp_forward_args fa = {.hidden_state = h64[X], .fc1_weight = h64[W1], .fc1_bias = as_vector(&h64[B1]),
                               .fc2_weight = h64[W2], .fc2_bias = as_vector(&h64[B2]), .fc1_output = m->want[FC1],
                               .gelu_output = m->want[GELU], .output = m->want[Y], .gelu = CVF_GELU_ERF};
    cvf_mlp_backward_args ba = {.grad_output = h64[GO], .hidden_state = h64[X], .fc1_weight = h64[W1],
                                .fc2_weight = h64[W2], .fc1_output = h64[FC1IN], .gelu_output = h64[GELUIN],
                                .grad_hidden_state = m->want[GX], .grad_fc1_weight = m->want[GW1],
                                .grad_fc1_bias = as_vector(&m->want[GB1]), .grad_fc2_weight = m->want[GW2],
                                .grad_fc2_bias = as_vector(&m->want[GB2]), .gelu = CVF_GELU_ERF};
    int bad = cvf_mlp_forward(ref, &fa) != CVF_STATUS_SUCCESS || cvf_mlp_backward(ref, &ba) != CVF_STATUS_SUCCESS;
    free_all(h64, INPUTS);
    if (bad)
        return -1;
    return run_rank(m, gpu, 0, 0, NULL, 0, m->plain) == CVF_STATUS_SUCCESS ? 0 : -1;
}

static void mlp_free(mlp *m)
{
    free_all(m->host, INPUTS);
    for (int i = 0; i < INPUTS; i++)
        cudaFree(m->dev[i].data);
    free_all(m->want, OUTPUTS);
    free_all(m->plain, OUTPUTS);
}

/* Section: partial mode on the GPU, P ranks simulated in turn. */
static void test_partial(const mlp *m, int32_t P)
{
    const double tol = cvft_tolerance(m->e);
    char label[160];
    snprintf(label, sizeof label, "cuda partial %s S=%lld H=%lld I=%lld P=%d", cvf_dtype_name(m->e), (long long)m->S,
             (long long)m->H, (long long)m->I, (int)P);
    cvf_matrix y_sum, gx_sum;
    if (!CHECK(!cvft_matrix_alloc(CVF_F64, m->S, m->H, &y_sum) && !cvft_matrix_alloc(CVF_F64, m->S, m->H, &gx_sum),
               "%s: out of memory", label))
        return;
    for (int32_t r = 0; r < P; r++) {
        int64_t off, len;
        cvf_tensor_parallel_slice(m->I, P, r, &off, &len);
        cvf_matrix got[OUTPUTS];
        cvf_status st = run_rank(m, gpu, P, r, NULL, 0, got);
        CHECK(st == CVF_STATUS_SUCCESS, "%s rank %d: %s", label, (int)r, cvf_status_string(st));
        for (int o = 0; o < OUTPUTS; o++) {
            if (!CHECK(got[o].data != NULL, "%s rank %d: output %d was not read back", label, (int)r, o))
                continue;
            if (o == Y || o == GX) {
                cvf_matrix *sum = o == Y ? &y_sum : &gx_sum;
                for (int64_t i = 0; i < m->S * m->H; i++)
                    ((double *)sum->data)[i] += cvft_matrix_get(&got[o], i / m->H, i % m->H);
                continue;
            }
            /* this rank's slice of the full answers (grad_fc2_bias: the whole, on every rank) */
            cvf_matrix want = m->want[o], plain = m->plain[o];
            if (o == FC1 || o == GELU || o == GB1 || o == GW2)
                want = support_col_slice(&want, off, len), plain = support_col_slice(&plain, off, len);
            else if (o == GW1)
                want = support_row_slice(&want, off, len), plain = support_row_slice(&plain, off, len);
            double er = cvft_matrix_rel_error(&got[o], &want), ep = cvft_matrix_rel_error(&got[o], &plain);
            CHECK(er <= tol && ep <= tol, "%s rank %d: %s: relative error %.3g (reference), %.3g (single GPU) > %.3g",
                  label, (int)r, out_names[o], er, ep, tol);
        }
        free_all(got, OUTPUTS);
    }
    for (int k = 0; k < 2; k++) {
        cvf_matrix *sum = k ? &gx_sum : &y_sum;
        int o = k ? GX : Y;
        double er = cvft_matrix_rel_error(sum, &m->want[o]), ep = cvft_matrix_rel_error(sum, &m->plain[o]);
        CHECK(er <= tol && ep <= tol, "%s: %s summed over the ranks: relative error %.3g (reference), %.3g (single "
              "GPU) > %.3g", label, out_names[o], er, ep, tol);
    }
    free(y_sum.data);
    free(gx_sum.data);
}

#ifdef CVF_HAVE_NCCL
/* Whether every output of two runs has the same bits. */
static bool same_bits(const cvf_matrix a[OUTPUTS], const cvf_matrix b[OUTPUTS], const char **which)
{
    for (int o = 0; o < OUTPUTS; o++) {
        size_t bytes = (size_t)(a[o].rows * a[o].cols) * cvf_dtype_size(a[o].dtype);
        if (!a[o].data || !b[o].data || memcmp(a[o].data, b[o].data, bytes) != 0) {
            *which = out_names[o];
            return false;
        }
    }
    return true;
}

/* Section: a 1-rank communicator: the TP path gives the plain path's bits; bad uses fail cleanly. */
static void test_one_rank_comm(const mlp *m)
{
    ncclComm_t comm;
    int devs[1] = {0};
    ncclResult_t r = ncclCommInitAll(&comm, 1, devs);
    if (!CHECK(r == ncclSuccess, "ncclCommInitAll(1 rank, GPU 0): %s", ncclGetErrorString(r)))
        return;
    char label[120];
    snprintf(label, sizeof label, "cuda nccl 1 rank %s S=%lld H=%lld I=%lld", cvf_dtype_name(m->e), (long long)m->S,
             (long long)m->H, (long long)m->I);
    static const uint32_t flag_sets[2] = {0, CVF_TP_SKIP_AGREEMENT};
    for (int f = 0; f < 2; f++) {
        cvf_matrix got[OUTPUTS];
        cvf_status st = run_rank(m, gpu, 1, 0, comm, flag_sets[f], got);
        const char *which = "";
        CHECK(st == CVF_STATUS_SUCCESS, "%s flags %u: %s (%s)", label, (unsigned)flag_sets[f], cvf_status_string(st),
              cvf_context_last_error(gpu));
        CHECK(same_bits(got, m->plain, &which), "%s flags %u: %s differs from the plain call's", label,
              (unsigned)flag_sets[f], which);
        double e = got[Y].data ? cvft_matrix_rel_error(&got[Y], &m->want[Y]) : 1.0;
        CHECK(e <= cvft_tolerance(m->e), "%s: output against the reference: %.3g", label, e);
        free_all(got, OUTPUTS);
    }
    /* failures: status named, nothing written (outputs stay poisoned), and no hang */
    struct {
        const char *what;
        int32_t P, r;
        int64_t I;
        cvf_status want;
    } bad[] = {
        {"tp.size 2 on a 1-rank communicator", 2, 0, 0, CVF_STATUS_INVALID_VALUE},
        {"a slice of the wrong size (agreement still runs)", 1, 0, 1, CVF_STATUS_SHAPE_MISMATCH},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        mlp mm = *m;
        mm.I = m->I + bad[b].I; /* tp.intermediate off by one: the slice no longer matches */
        cvf_tensor_parallel tp = {.size = bad[b].P, .rank = bad[b].r, .intermediate = mm.I, .nccl_comm = comm};
        cvf_matrix y = device_poisoned(m->e, m->S, m->H);
        cvf_matrix b1 = m->dev[B1];
        cvf_mlp_forward_args fa = {.hidden_state = m->dev[X], .fc1_weight = m->dev[W1], .fc1_bias = as_vector(&b1),
                                   .fc2_weight = m->dev[W2], .fc2_bias = as_vector(&m->dev[B2]), .output = y,
                                   .tp = tp};
        if (bad[b].P == 2)
            fa.tp.intermediate = 2 * m->I, fa.fc1_weight = m->dev[W1]; /* slice of 2 I over 2 ranks: I */
        cvf_status st = cvf_mlp_forward(gpu, &fa);
        CHECK(st == bad[b].want, "%s: %s: %s, expected %s (%s)", label, bad[b].what, cvf_status_string(st),
              cvf_status_string(bad[b].want), cvf_context_last_error(gpu));
        cvf_matrix h = download(&y);
        bool untouched = h.data != NULL;
        for (int64_t i = 0; untouched && i < (int64_t)((size_t)(m->S * m->H) * cvf_dtype_size(m->e)); i++)
            untouched = ((unsigned char *)h.data)[i] == 0x7E;
        CHECK(untouched, "%s: %s: output written", label, bad[b].what);
        free(h.data);
        cudaFree(y.data);
    }
    /* a padded output cannot be all-reduced in place */
    cvf_matrix y = device_poisoned(m->e, m->S, m->H + 8);
    y.cols = m->H;
    cvf_matrix b1 = m->dev[B1];
    cvf_mlp_forward_args fa = {.hidden_state = m->dev[X], .fc1_weight = m->dev[W1], .fc1_bias = as_vector(&b1),
                               .fc2_weight = m->dev[W2], .fc2_bias = as_vector(&m->dev[B2]), .output = y,
                               .tp = {.size = 1, .rank = 0, .intermediate = m->I, .nccl_comm = comm}};
    cvf_status st = cvf_mlp_forward(gpu, &fa);
    CHECK(st == CVF_STATUS_UNSUPPORTED && strstr(cvf_context_last_error(gpu), "dense"), "%s: padded output: %s (%s)",
          label, cvf_status_string(st), cvf_context_last_error(gpu));
    cudaFree(y.data);
    ncclCommDestroy(comm);
}
#endif

int main(void)
{
    cvf_context_options go = {.device = CVF_DEVICE_CUDA}, ro = {.device = CVF_DEVICE_REFERENCE};
    if (cvf_context_create(&go, &gpu) != CVF_STATUS_SUCCESS) {
        printf("SKIPPED: no usable GPU (%s)\n", cvf_context_create_error());
        return 77;
    }
    if (cvf_context_create(&ro, &ref) != CVF_STATUS_SUCCESS)
        return 1;
#ifndef CVF_HAVE_NCCL
    printf("NOTE: built without NCCL: only the partial mode is tested (the 1-rank communicator checks are skipped)\n");
#endif
    static const struct {
        int64_t S, H, I;
    } shapes[] = {{64, 128, 320}, {197, 384, 1536}, {33, 72, 100}};
    static const cvf_dtype dtypes[] = {CVF_F16, CVF_BF16, CVF_F32};
    uint64_t seed = 1401;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            mlp m;
            if (!CHECK(mlp_create(&m, shapes[s].S, shapes[s].H, shapes[s].I, dtypes[d], seed++) == 0,
                       "setting up %s S=%lld failed", cvf_dtype_name(dtypes[d]), (long long)shapes[s].S)) {
                mlp_free(&m);
                continue;
            }
            test_partial(&m, 2);
            test_partial(&m, 3);
#ifdef CVF_HAVE_NCCL
            test_one_rank_comm(&m);
#endif
            mlp_free(&m);
        }
    cvf_context_destroy(gpu);
    cvf_context_destroy(ref);
    return test_report("test_nccl");
}

#else

int main(void)
{
    printf("SKIPPED: built without CUDA (the tensor-parallel partial mode is tested on the CPU by test_tp)\n");
    return 77;
}

#endif

/*
 * The API a framework needs (issue 11), on the devices every machine has (cpu, reference):
 * the run-time version, why a context could not be made, the caller's stream, caller-owned
 * workspace (size queries, too small -> a named status and nothing written, exactly enough ->
 * the same bits as the context's own workspace), the inference forward without saved tensors,
 * the GELU kind of the MLP, the forward plan, and the pool's spin setting (CVF_CPU_SPIN_US,
 * cvf_context_park_threads). (The same calls on a GPU: test_cuda.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static cvf_context *cpu_ctx, *ref_ctx;

/* Section: cvf_version agrees with the header the test was compiled against. */
static void test_version(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", CVF_VERSION_MAJOR, CVF_VERSION_MINOR, CVF_VERSION_PATCH);
    CHECK(strcmp(cvf_version(), want) == 0, "cvf_version() = '%s', expected '%s'", cvf_version(), want);
}

/* Section: a failed cvf_context_create says why, without CVF_DEBUG; a success clears it. */
static void test_create_error(void)
{
    cvf_context *ctx = (cvf_context *)&ctx; /* must become NULL */
    cvf_context_options bad = {.device = (cvf_device)7};
    CHECK(cvf_context_create(&bad, &ctx) == CVF_STATUS_INVALID_VALUE && ctx == NULL, "device 7 accepted");
    CHECK(strstr(cvf_context_create_error(), "options.device") != NULL, "device 7: reason '%s'",
          cvf_context_create_error());
    cvf_context_options threads = {.device = CVF_DEVICE_CPU, .threads = -3};
    CHECK(cvf_context_create(&threads, &ctx) == CVF_STATUS_INVALID_VALUE, "threads -3 accepted");
    CHECK(strstr(cvf_context_create_error(), "options.threads") != NULL, "threads -3: reason '%s'",
          cvf_context_create_error());
    CHECK(cvf_context_create(NULL, NULL) == CVF_STATUS_NULL_POINTER && cvf_context_create_error()[0],
          "NULL out: no reason");
    cvf_context_options cuda = {.device = CVF_DEVICE_CUDA, .device_index = 1000};
    cvf_status status = cvf_context_create(&cuda, &ctx);
    CHECK(status == CVF_STATUS_UNSUPPORTED, "cuda device 1000: %s", cvf_status_string(status));
    CHECK(strstr(cvf_context_create_error(), "cuda device 1000") != NULL, "cuda device 1000: reason '%s'",
          cvf_context_create_error());
    if (status == CVF_STATUS_SUCCESS)
        cvf_context_destroy(ctx);
    CHECK(cvf_context_create(NULL, &ctx) == CVF_STATUS_SUCCESS, "default context");
    CHECK(cvf_context_create_error()[0] == '\0', "a success left the reason '%s'", cvf_context_create_error());
    cvf_context_destroy(ctx);
}

/* Section: streams on devices without them: NULL is accepted, anything else is UNSUPPORTED. */
static void test_stream(void)
{
    cvf_context *ctxs[2] = {cpu_ctx, ref_ctx};
    for (int i = 0; i < 2; i++) {
        CHECK(cvf_context_set_stream(ctxs[i], NULL) == CVF_STATUS_SUCCESS, "set_stream(NULL) refused");
        CHECK(cvf_context_stream(ctxs[i]) == NULL, "stream not NULL");
        int dummy;
        CHECK(cvf_context_set_stream(ctxs[i], &dummy) == CVF_STATUS_UNSUPPORTED, "a stream accepted on %s",
              cvf_device_name(cvf_context_device(ctxs[i])));
        CHECK(strstr(cvf_context_last_error(ctxs[i]), "stream") != NULL, "message '%s'",
              cvf_context_last_error(ctxs[i]));
    }
    CHECK(cvf_context_set_stream(NULL, NULL) == CVF_STATUS_NULL_POINTER, "NULL ctx accepted");
}

/* The inputs and outputs of one matmul: A (m x k) @ B (k x n) + bias, GELU, aux_out, bias_grad. */
typedef struct mm {
    support_matrix a, b, c, aux;
    support_vector bias, grad;
    cvf_epilogue ep;
} mm;

static bool mm_create(mm *t, cvf_dtype dtype, int64_t m, int64_t n, int64_t k, uint64_t seed)
{
    support_layout dense = {false, 0, 0};
    memset(t, 0, sizeof *t);
    if (support_matrix_create(&t->a, dtype, m, k, dense) || support_matrix_create(&t->b, dtype, k, n, dense) ||
        support_matrix_create(&t->c, dtype, m, n, dense) || support_matrix_create(&t->aux, dtype, m, n, dense) ||
        support_vector_create(&t->bias, dtype, n, 1, 0) || support_vector_create(&t->grad, CVF_F32, n, 1, 0))
        return false;
    cvft_rng rng = cvft_rng_make(seed);
    support_matrix_fill(&t->a, &rng, -1.0, 1.0);
    support_matrix_fill(&t->b, &rng, -1.0, 1.0);
    support_vector_fill(&t->bias, &rng, -1.0, 1.0);
    t->ep = (cvf_epilogue){.activation = CVF_ACTIVATION_GELU_ERF,
                           .bias = &t->bias.view,
                           .aux_out = &t->aux.view,
                           .bias_grad = &t->grad.view};
    return true;
}

static void mm_destroy(mm *t)
{
    support_matrix_destroy(&t->a);
    support_matrix_destroy(&t->b);
    support_matrix_destroy(&t->c);
    support_matrix_destroy(&t->aux);
    support_vector_destroy(&t->bias);
    support_vector_destroy(&t->grad);
}

static cvf_status mm_run(mm *t, cvf_context *ctx)
{
    return cvf_matmul(ctx, &t->a.view, &t->b.view, &t->c.view, &t->ep);
}

/* True when every output byte is what it was when saved. */
static bool mm_outputs_unchanged(const mm *t)
{
    return support_buffer_unchanged(&t->c.buffer) && support_buffer_unchanged(&t->aux.buffer) &&
           support_buffer_unchanged(&t->grad.buffer);
}

/* Saves every output's bytes. */
static bool mm_save_outputs(mm *t)
{
    return !support_buffer_save(&t->c.buffer) && !support_buffer_save(&t->aux.buffer) &&
           !support_buffer_save(&t->grad.buffer);
}

/* Section: caller-owned workspace for a matmul on the CPU: the size query, a workspace one byte
 * short (WORKSPACE_TOO_SMALL, outputs untouched), exactly enough (the same bits as the
 * context's own), bad arguments, and the return to the context's own. */
static void test_matmul_workspace(void)
{
    mm own, callers;
    if (!CHECK(mm_create(&own, CVF_BF16, 67, 45, 300, 11) && mm_create(&callers, CVF_BF16, 67, 45, 300, 11),
               "out of memory")) {
        mm_destroy(&own);
        mm_destroy(&callers);
        return;
    }
    CHECK(mm_run(&own, cpu_ctx) == CVF_STATUS_SUCCESS, "own workspace: %s", cvf_context_last_error(cpu_ctx));
    cvf_context *ctx = NULL;
    cvf_context_options two = {.device = CVF_DEVICE_CPU, .threads = 2};
    size_t need = 0;
    if (CHECK(cvf_context_create(&two, &ctx) == CVF_STATUS_SUCCESS, "context") &&
        CHECK(cvf_matmul_workspace_size(ctx, &callers.a.view, &callers.b.view, &callers.c.view, &callers.ep, &need) ==
                  CVF_STATUS_SUCCESS,
              "size query: %s", cvf_context_last_error(ctx))) {
        CHECK(need > 0, "a packed CPU product needs workspace, the query says 0");
        unsigned char *memory = aligned_alloc(256, (need + 511) / 256 * 256);
        if (CHECK(memory != NULL, "out of memory")) {
            CHECK(cvf_context_set_workspace(ctx, memory + 1, need) == CVF_STATUS_INVALID_VALUE, "misaligned accepted");
            CHECK(cvf_context_set_workspace(ctx, memory, 0) == CVF_STATUS_INVALID_VALUE, "memory without bytes");
            CHECK(cvf_context_set_workspace(ctx, NULL, 64) == CVF_STATUS_INVALID_VALUE, "bytes without memory");
            CHECK(cvf_context_set_workspace(ctx, memory, need - 1) == CVF_STATUS_SUCCESS, "set_workspace refused");
            CHECK(mm_save_outputs(&callers), "out of memory");
            cvf_status status = mm_run(&callers, ctx);
            CHECK(status == CVF_STATUS_WORKSPACE_TOO_SMALL, "one byte short: %s (%s)", cvf_status_string(status),
                  cvf_context_last_error(ctx));
            CHECK(strstr(cvf_context_last_error(ctx), "bytes") != NULL, "message '%s' names no size",
                  cvf_context_last_error(ctx));
            CHECK(mm_outputs_unchanged(&callers), "a too-small workspace still wrote an output");
            CHECK(cvf_context_set_workspace(ctx, memory, need) == CVF_STATUS_SUCCESS, "set_workspace refused");
            status = mm_run(&callers, ctx);
            CHECK(status == CVF_STATUS_SUCCESS, "exactly enough: %s", cvf_context_last_error(ctx));
            CHECK(memcmp(callers.c.buffer.bytes, own.c.buffer.bytes, own.c.buffer.size) == 0 &&
                      memcmp(callers.aux.buffer.bytes, own.aux.buffer.bytes, own.aux.buffer.size) == 0 &&
                      memcmp(callers.grad.buffer.bytes, own.grad.buffer.bytes, own.grad.buffer.size) == 0,
                  "the caller's workspace gave other bits than the context's own");
            CHECK(cvf_context_set_workspace(ctx, NULL, 0) == CVF_STATUS_SUCCESS, "back to the own workspace");
            CHECK(mm_run(&callers, ctx) == CVF_STATUS_SUCCESS, "own again: %s", cvf_context_last_error(ctx));
            free(memory);
        }
    }
    cvf_context_destroy(ctx);
    mm_destroy(&own);
    mm_destroy(&callers);
}

/* One MLP's tensors (f32, dense) for the forward and the backward. */
typedef struct mlp {
    int64_t S, H, I;
    support_matrix x, w1, w2, fc1, gelu, y, go, gx, gw1, gw2;
    support_vector b1, b2, gb1, gb2;
} mlp;

static bool mlp_create(mlp *t, cvf_dtype e, int64_t S, int64_t H, int64_t I, uint64_t seed)
{
    support_layout d = {false, 0, 0};
    memset(t, 0, sizeof *t);
    t->S = S, t->H = H, t->I = I;
    if (support_matrix_create(&t->x, e, S, H, d) || support_matrix_create(&t->w1, e, I, H, d) ||
        support_matrix_create(&t->w2, e, H, I, d) || support_matrix_create(&t->fc1, e, S, I, d) ||
        support_matrix_create(&t->gelu, e, S, I, d) || support_matrix_create(&t->y, e, S, H, d) ||
        support_matrix_create(&t->go, e, S, H, d) || support_matrix_create(&t->gx, e, S, H, d) ||
        support_matrix_create(&t->gw1, e, I, H, d) || support_matrix_create(&t->gw2, e, H, I, d) ||
        support_vector_create(&t->b1, e, I, 1, 0) || support_vector_create(&t->b2, e, H, 1, 0) ||
        support_vector_create(&t->gb1, e, I, 1, 0) || support_vector_create(&t->gb2, e, H, 1, 0))
        return false;
    cvft_rng rng = cvft_rng_make(seed);
    support_matrix_fill(&t->x, &rng, -1.0, 1.0);
    support_matrix_fill(&t->w1, &rng, -0.2, 0.2);
    support_matrix_fill(&t->w2, &rng, -0.2, 0.2);
    support_matrix_fill(&t->go, &rng, -1.0, 1.0);
    support_vector_fill(&t->b1, &rng, -1.0, 1.0);
    support_vector_fill(&t->b2, &rng, -1.0, 1.0);
    return true;
}

static void mlp_destroy(mlp *t)
{
    support_matrix *ms[] = {&t->x, &t->w1, &t->w2, &t->fc1, &t->gelu, &t->y, &t->go, &t->gx, &t->gw1, &t->gw2};
    support_vector *vs[] = {&t->b1, &t->b2, &t->gb1, &t->gb2};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        support_matrix_destroy(ms[i]);
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        support_vector_destroy(vs[i]);
}

static cvf_mlp_forward_args forward_of(const mlp *t, cvf_gelu gelu, bool saved)
{
    cvf_mlp_forward_args a = {.hidden_state = t->x.view,
                              .fc1_weight = t->w1.view,
                              .fc1_bias = t->b1.view,
                              .fc2_weight = t->w2.view,
                              .fc2_bias = t->b2.view,
                              .output = t->y.view,
                              .gelu = gelu};
    if (saved) {
        a.fc1_output = t->fc1.view;
        a.gelu_output = t->gelu.view;
    }
    return a;
}

static cvf_mlp_backward_args backward_of(const mlp *t, cvf_gelu gelu)
{
    cvf_mlp_backward_args a = {.grad_output = t->go.view,
                               .hidden_state = t->x.view,
                               .fc1_weight = t->w1.view,
                               .fc2_weight = t->w2.view,
                               .fc1_output = t->fc1.view,
                               .gelu_output = t->gelu.view,
                               .grad_hidden_state = t->gx.view,
                               .grad_fc1_weight = t->gw1.view,
                               .grad_fc1_bias = t->gb1.view,
                               .grad_fc2_weight = t->gw2.view,
                               .grad_fc2_bias = t->gb2.view,
                               .gelu = gelu};
    return a;
}

/* Section: the inference forward (no fc1_output, no gelu_output) gives the training forward's
 * output bit for bit, on the CPU and the reference device, for both GELU kinds; the saved
 * tensors' buffers stay untouched when absent. */
static void test_inference_forward(void)
{
    cvf_context *ctxs[2] = {cpu_ctx, ref_ctx};
    for (int c = 0; c < 2; c++)
        for (int g = 0; g < 2; g++) {
            mlp full, infer;
            const cvf_dtype e = c == 0 ? CVF_BF16 : CVF_F32;
            if (!CHECK(mlp_create(&full, e, 37, 24, 72, 5) && mlp_create(&infer, e, 37, 24, 72, 5), "out of memory"))
                goto next;
            cvf_mlp_forward_args fa = forward_of(&full, (cvf_gelu)g, true), ia = forward_of(&infer, (cvf_gelu)g, false);
            CHECK(cvf_mlp_forward(ctxs[c], &fa) == CVF_STATUS_SUCCESS, "training forward: %s",
                  cvf_context_last_error(ctxs[c]));
            support_buffer_save(&infer.fc1.buffer);
            support_buffer_save(&infer.gelu.buffer);
            size_t need = 1;
            CHECK(cvf_mlp_forward_workspace_size(ctxs[c], &ia, &need) == CVF_STATUS_SUCCESS, "size query: %s",
                  cvf_context_last_error(ctxs[c]));
            CHECK(c == 1 || need >= (size_t)(37 * 72 * 2), "inference forward needs %zu bytes, less than gelu_output",
                  need);
            CHECK(cvf_mlp_forward(ctxs[c], &ia) == CVF_STATUS_SUCCESS, "inference forward: %s",
                  cvf_context_last_error(ctxs[c]));
            CHECK(memcmp(full.y.buffer.bytes, infer.y.buffer.bytes, full.y.buffer.size) == 0,
                  "%s gelu %d: the inference forward's output differs from the training forward's",
                  cvf_device_name(cvf_context_device(ctxs[c])), g);
            CHECK(support_buffer_unchanged(&infer.fc1.buffer) && support_buffer_unchanged(&infer.gelu.buffer),
                  "absent outputs were written");
            fa.gelu = (cvf_gelu)2;
            CHECK(cvf_mlp_forward(ctxs[c], &fa) == CVF_STATUS_INVALID_VALUE, "gelu 2 accepted");
            CHECK(strstr(cvf_context_last_error(ctxs[c]), "gelu") != NULL, "gelu 2: '%s'",
                  cvf_context_last_error(ctxs[c]));
        next:
            mlp_destroy(&full);
            mlp_destroy(&infer);
        }
}

/* Section: the MLP backward with caller workspace: too small -> WORKSPACE_TOO_SMALL with every
 * output untouched; exactly the queried size -> the same bits as the context's own. */
static void test_mlp_workspace(void)
{
    mlp own, callers;
    cvf_context *ctx = NULL;
    cvf_context_options two = {.device = CVF_DEVICE_CPU, .threads = 2};
    if (!CHECK(mlp_create(&own, CVF_F32, 50, 32, 96, 9) && mlp_create(&callers, CVF_F32, 50, 32, 96, 9) &&
                   cvf_context_create(&two, &ctx) == CVF_STATUS_SUCCESS,
               "setup"))
        goto done;
    cvf_mlp_forward_args f = forward_of(&own, CVF_GELU_ERF, true), f2 = forward_of(&callers, CVF_GELU_ERF, true);
    CHECK(cvf_mlp_forward(ctx, &f) == CVF_STATUS_SUCCESS && cvf_mlp_forward(ctx, &f2) == CVF_STATUS_SUCCESS,
          "forward: %s", cvf_context_last_error(ctx));
    cvf_mlp_backward_args b = backward_of(&own, CVF_GELU_ERF), b2 = backward_of(&callers, CVF_GELU_ERF);
    CHECK(cvf_mlp_backward(ctx, &b) == CVF_STATUS_SUCCESS, "backward: %s", cvf_context_last_error(ctx));
    cvf_context *fresh = NULL;
    size_t need = 0;
    if (!CHECK(cvf_context_create(&two, &fresh) == CVF_STATUS_SUCCESS &&
                   cvf_mlp_backward_workspace_size(fresh, &b2, &need) == CVF_STATUS_SUCCESS,
               "size query: %s", fresh ? cvf_context_last_error(fresh) : "no context"))
        goto done2;
    CHECK(need >= (size_t)(50 * 96 * 4), "backward needs %zu bytes, less than grad_fc1_output", need);
    unsigned char *memory = aligned_alloc(256, (need + 255) / 256 * 256);
    if (!CHECK(memory != NULL, "out of memory"))
        goto done2;
    support_matrix *outs[] = {&callers.gx, &callers.gw1, &callers.gw2};
    for (int i = 0; i < 3; i++)
        support_buffer_save(&outs[i]->buffer);
    support_buffer_save(&callers.gb1.buffer);
    support_buffer_save(&callers.gb2.buffer);
    cvf_context_set_workspace(fresh, memory, need - 256);
    cvf_status status = cvf_mlp_backward(fresh, &b2);
    CHECK(status == CVF_STATUS_WORKSPACE_TOO_SMALL, "256 bytes short: %s", cvf_status_string(status));
    bool untouched = support_buffer_unchanged(&callers.gb1.buffer) && support_buffer_unchanged(&callers.gb2.buffer);
    for (int i = 0; i < 3; i++)
        untouched = untouched && support_buffer_unchanged(&outs[i]->buffer);
    CHECK(untouched, "a too-small workspace still wrote an output");
    cvf_context_set_workspace(fresh, memory, need);
    CHECK(cvf_mlp_backward(fresh, &b2) == CVF_STATUS_SUCCESS, "exactly enough: %s", cvf_context_last_error(fresh));
    CHECK(memcmp(own.gx.buffer.bytes, callers.gx.buffer.bytes, own.gx.buffer.size) == 0 &&
              memcmp(own.gw1.buffer.bytes, callers.gw1.buffer.bytes, own.gw1.buffer.size) == 0 &&
              memcmp(own.gw2.buffer.bytes, callers.gw2.buffer.bytes, own.gw2.buffer.size) == 0 &&
              memcmp(own.gb1.buffer.bytes, callers.gb1.buffer.bytes, own.gb1.buffer.size) == 0 &&
              memcmp(own.gb2.buffer.bytes, callers.gb2.buffer.bytes, own.gb2.buffer.size) == 0,
          "the caller's workspace gave other bits than the context's own");
    cvf_context_destroy(fresh); /* the caller's memory is not freed by the context */
    fresh = NULL;
    free(memory);
done2:
    cvf_context_destroy(fresh);
done:
    cvf_context_destroy(ctx);
    mlp_destroy(&own);
    mlp_destroy(&callers);
}

/* Section: the forward plan: two kernels, fc1 fused with bias + GELU, the GELU kind named. */
static void test_forward_plan(void)
{
    cvf_mlp_shape shape = {.tokens = 197, .hidden = 768, .intermediate = 3072, .dtype = CVF_BF16, .gelu = CVF_GELU_ERF};
    cvf_mlp_plan plan;
    if (!CHECK(cvf_mlp_forward_plan(cpu_ctx, &shape, &plan) == CVF_STATUS_SUCCESS, "forward plan: %s",
               cvf_context_last_error(cpu_ctx)))
        return;
    CHECK(plan.forward == 1 && plan.kernel_count == 2, "forward plan: forward %d, %d kernels", (int)plan.forward,
          (int)plan.kernel_count);
    CHECK(strcmp(plan.kernels[0].name, "fc1") == 0 && plan.kernels[0].kind == CVF_KERNEL_FUSED_GEMM &&
              strstr(plan.kernels[0].computes, "gelu_erf") != NULL,
          "fc1: %s %s", plan.kernels[0].name, plan.kernels[0].computes);
    CHECK(plan.kernels[0].flops == 2ull * 197 * 768 * 3072, "fc1 flops %llu", (unsigned long long)plan.kernels[0].flops);
    char text[4096];
    cvf_mlp_plan_describe(&plan, text, sizeof text);
    CHECK(strstr(text, "MLP forward (GELU erf)") != NULL, "description:\n%s", text);
    shape.gelu = (cvf_gelu)5;
    CHECK(cvf_mlp_forward_plan(cpu_ctx, &shape, &plan) == CVF_STATUS_INVALID_VALUE, "gelu 5 accepted");
    CHECK(cvf_mlp_backward_plan(cpu_ctx, &shape, &plan) == CVF_STATUS_INVALID_VALUE, "gelu 5 accepted (backward)");
}

/* Section: the pool's spin setting. Every CVF_CPU_SPIN_US value, good ones and ones reported and
 * replaced by the default, gives a working context whose products have the same bits, with its
 * workers parked between calls or not; cvf_context_park_threads is a no-op on NULL and on the
 * reference device. (What the setting and the park do to a context's workers: test_threadpool.) */
static void test_spin_setting(void)
{
    mm want, got;
    if (!CHECK(mm_create(&want, CVF_F32, 37, 29, 64, 5) && mm_create(&got, CVF_F32, 37, 29, 64, 5), "out of memory")) {
        mm_destroy(&want);
        mm_destroy(&got);
        return;
    }
    cvf_context_options two = {.device = CVF_DEVICE_CPU, .threads = 2};
    CHECK(mm_run(&want, cpu_ctx) == CVF_STATUS_SUCCESS, "matmul: %s", cvf_context_last_error(cpu_ctx));
    const char *values[] = {"0", "1", "700", "1000000", "", "abc", "-1", "1000001", "12x"};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        setenv("CVF_CPU_SPIN_US", values[v], 1);
        cvf_context *ctx = NULL;
        if (!CHECK(cvf_context_create(&two, &ctx) == CVF_STATUS_SUCCESS, "CVF_CPU_SPIN_US='%s': %s", values[v],
                   cvf_context_create_error()))
            continue;
        for (int call = 0; call < 3; call++) {
            cvf_status status = mm_run(&got, ctx);
            CHECK(status == CVF_STATUS_SUCCESS, "CVF_CPU_SPIN_US='%s', call %d: %s", values[v], call,
                  cvf_context_last_error(ctx));
            CHECK(memcmp(got.c.buffer.bytes, want.c.buffer.bytes, got.c.buffer.size) == 0,
                  "CVF_CPU_SPIN_US='%s', call %d: other bits than the default context's", values[v], call);
            if (call == 1)
                cvf_context_park_threads(ctx);
        }
        cvf_context_destroy(ctx);
    }
    unsetenv("CVF_CPU_SPIN_US");
    cvf_context_park_threads(NULL);
    cvf_context_park_threads(ref_ctx);
    mm_destroy(&want);
    mm_destroy(&got);
}

int main(void)
{
    cvf_context_options ref = {.device = CVF_DEVICE_REFERENCE};
    if (cvf_context_create(NULL, &cpu_ctx) || cvf_context_create(&ref, &ref_ctx)) {
        printf("FAIL: context creation: %s\n", cvf_context_create_error());
        return 1;
    }
    test_version();
    test_create_error();
    test_stream();
    test_matmul_workspace();
    test_inference_forward();
    test_mlp_workspace();
    test_forward_plan();
    test_spin_setting();
    cvf_context_destroy(cpu_ctx);
    cvf_context_destroy(ref_ctx);
    return test_report("test_api");
}

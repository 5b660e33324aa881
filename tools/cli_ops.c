/*
 * The op table of the cvfuse CLI: for gemm, matmul-relu, mlp-forward and mlp-backward, the dimension
 * names and defaults, every parameter with its shape (the .npy file names are the parameter
 * names), the FLOP count and the binding of the tensors to the library call. Everything else
 * (loading, random inputs, checking, reporting) is generic over this table.
 */
#include <math.h>
#include <string.h>

#include "cli.h"

/* Dimension indices of gemm and matmul-relu. */
enum { MM_M, MM_N, MM_K };
/* Dimension indices of the MLP ops. */
enum { MLP_S, MLP_H, MLP_I };

/* Tensor indices of each op, in table order (inputs first). */
enum { MM_A, MM_B, MM_C };
enum { FW_HIDDEN, FW_FC1_W, FW_FC1_B, FW_FC2_W, FW_FC2_B, FW_FC1_OUT, FW_GELU_OUT, FW_OUTPUT };
enum {
    BW_GRAD_OUT,
    BW_HIDDEN,
    BW_FC1_W,
    BW_FC2_W,
    BW_FC1_OUT,
    BW_GELU_OUT,
    BW_GRAD_HIDDEN,
    BW_GRAD_FC1_W,
    BW_GRAD_FC1_B,
    BW_GRAD_FC2_W,
    BW_GRAD_FC2_B
};

/* Runs C = A @ B (an empty epilogue). */
static cvf_status run_gemm(cvf_context *ctx, const cli_tensor_set *set)
{
    return cvf_matmul(ctx, cli_set_matrix(set, MM_A), cli_set_matrix(set, MM_B), cli_set_matrix(set, MM_C), NULL);
}

/* Runs C = relu(A @ B). */
static cvf_status run_matmul_relu(cvf_context *ctx, const cli_tensor_set *set)
{
    return cvf_matmul_relu(ctx, cli_set_matrix(set, MM_A), cli_set_matrix(set, MM_B), cli_set_matrix(set, MM_C));
}

/* Runs the MLP forward. */
static cvf_status run_mlp_forward(cvf_context *ctx, const cli_tensor_set *set)
{
    cvf_mlp_forward_args args = {
        .hidden_state = *cli_set_matrix(set, FW_HIDDEN),
        .fc1_weight = *cli_set_matrix(set, FW_FC1_W),
        .fc1_bias = cli_set_vector(set, FW_FC1_B),
        .fc2_weight = *cli_set_matrix(set, FW_FC2_W),
        .fc2_bias = cli_set_vector(set, FW_FC2_B),
        .fc1_output = *cli_set_matrix(set, FW_FC1_OUT),
        .gelu_output = *cli_set_matrix(set, FW_GELU_OUT),
        .output = *cli_set_matrix(set, FW_OUTPUT),
    };
    return cvf_mlp_forward(ctx, &args);
}

/* Runs the MLP GELU backward. */
static cvf_status run_mlp_backward(cvf_context *ctx, const cli_tensor_set *set)
{
    cvf_mlp_backward_args args = {
        .grad_output = *cli_set_matrix(set, BW_GRAD_OUT),
        .hidden_state = *cli_set_matrix(set, BW_HIDDEN),
        .fc1_weight = *cli_set_matrix(set, BW_FC1_W),
        .fc2_weight = *cli_set_matrix(set, BW_FC2_W),
        .fc1_output = *cli_set_matrix(set, BW_FC1_OUT),
        .gelu_output = *cli_set_matrix(set, BW_GELU_OUT),
        .grad_hidden_state = *cli_set_matrix(set, BW_GRAD_HIDDEN),
        .grad_fc1_weight = *cli_set_matrix(set, BW_GRAD_FC1_W),
        .grad_fc1_bias = cli_set_vector(set, BW_GRAD_FC1_B),
        .grad_fc2_weight = *cli_set_matrix(set, BW_GRAD_FC2_W),
        .grad_fc2_bias = cli_set_vector(set, BW_GRAD_FC2_B),
    };
    return cvf_mlp_backward(ctx, &args);
}

/* The parameters of each op (gemm shares matmul-relu's), indexed by the tensor indices above; shapes use the dimension
 * indices (a 1-D tensor uses the first only). */
static const cli_tensor_spec MATMUL_RELU_TENSORS[] = {
    {"a", CLI_IN, 2, {MM_M, MM_K}},
    {"b", CLI_IN, 2, {MM_K, MM_N}},
    {"c", CLI_OUT, 2, {MM_M, MM_N}},
};

static const cli_tensor_spec MLP_FORWARD_TENSORS[] = {
    {"hidden_state", CLI_IN, 2, {MLP_S, MLP_H}}, {"fc1_weight", CLI_IN, 2, {MLP_I, MLP_H}},
    {"fc1_bias", CLI_IN, 1, {MLP_I, 0}},         {"fc2_weight", CLI_IN, 2, {MLP_H, MLP_I}},
    {"fc2_bias", CLI_IN, 1, {MLP_H, 0}},         {"fc1_output", CLI_OUT, 2, {MLP_S, MLP_I}},
    {"gelu_output", CLI_OUT, 2, {MLP_S, MLP_I}}, {"output", CLI_OUT, 2, {MLP_S, MLP_H}},
};

static const cli_tensor_spec MLP_BACKWARD_TENSORS[] = {
    {"grad_output", CLI_IN, 2, {MLP_S, MLP_H}},        {"hidden_state", CLI_IN, 2, {MLP_S, MLP_H}},
    {"fc1_weight", CLI_IN, 2, {MLP_I, MLP_H}},         {"fc2_weight", CLI_IN, 2, {MLP_H, MLP_I}},
    {"fc1_output", CLI_IN, 2, {MLP_S, MLP_I}},         {"gelu_output", CLI_IN, 2, {MLP_S, MLP_I}},
    {"grad_hidden_state", CLI_OUT, 2, {MLP_S, MLP_H}}, {"grad_fc1_weight", CLI_OUT, 2, {MLP_I, MLP_H}},
    {"grad_fc1_bias", CLI_OUT, 1, {MLP_I, 0}},         {"grad_fc2_weight", CLI_OUT, 2, {MLP_H, MLP_I}},
    {"grad_fc2_bias", CLI_OUT, 1, {MLP_H, 0}},
};

#define COUNT_OF(array) ((int)(sizeof(array) / sizeof((array)[0])))

_Static_assert(COUNT_OF(MATMUL_RELU_TENSORS) <= CLI_MAX_TENSORS, "raise CLI_MAX_TENSORS");
_Static_assert(COUNT_OF(MLP_FORWARD_TENSORS) <= CLI_MAX_TENSORS, "raise CLI_MAX_TENSORS");
_Static_assert(COUNT_OF(MLP_BACKWARD_TENSORS) <= CLI_MAX_TENSORS, "raise CLI_MAX_TENSORS");

static const cli_op GEMM = {
    .name = "gemm",
    .summary = "C = A @ B, fp32 accumulation, no epilogue (the plain GEMM)",
    .call = "cvf_matmul",
    .inputs_help = "a and b uniform in [-1, 1)",
    .dim_names = {"m", "n", "k"},
    .dim_opts = {CLI_OPT_M, CLI_OPT_N, CLI_OPT_K},
    .dim_defaults = {1024, 1024, 1024},
    .default_dtype = CVF_F32,
    .flops_per_mnk = 2.0,
    .tensor_count = COUNT_OF(MATMUL_RELU_TENSORS),
    .tensors = MATMUL_RELU_TENSORS,
    .run = run_gemm,
    .generate = NULL,
};

static const cli_op MATMUL_RELU = {
    .name = "matmul-relu",
    .summary = "C = relu(A @ B), fp32 accumulation, one fused kernel",
    .call = "cvf_matmul_relu",
    .inputs_help = "a and b uniform in [-1, 1)",
    .dim_names = {"m", "n", "k"},
    .dim_opts = {CLI_OPT_M, CLI_OPT_N, CLI_OPT_K},
    .dim_defaults = {1024, 1024, 1024},
    .default_dtype = CVF_F16,
    .flops_per_mnk = 2.0,
    .tensor_count = COUNT_OF(MATMUL_RELU_TENSORS),
    .tensors = MATMUL_RELU_TENSORS,
    .run = run_matmul_relu,
    .generate = NULL,
};

static const cli_op MLP_FORWARD = {
    .name = "mlp-forward",
    .summary = "vision-MLP forward: fc1 + bias + GELU(tanh) fused, then fc2 + bias",
    .call = "cvf_mlp_forward",
    .inputs_help = "every input uniform in [-1, 1)",
    .dim_names = {"S", "H", "I"},
    .dim_opts = {CLI_OPT_S, CLI_OPT_H, CLI_OPT_I},
    .dim_defaults = {197, 768, 3072},
    .default_dtype = CVF_F32,
    .flops_per_mnk = 4.0,
    .tensor_count = COUNT_OF(MLP_FORWARD_TENSORS),
    .tensors = MLP_FORWARD_TENSORS,
    .run = run_mlp_forward,
    .generate = NULL,
};

/*
 * The saved tensors of a backward come from a forward: hidden_state, the weights and biases are
 * uniform in [-1, 1) except fc1_weight, uniform in [-3/sqrt(H), 3/sqrt(H)) so that fc1_output
 * has a standard deviation near 1.15 and spans about [-4, 4) (GELU's curved part); the forward
 * then runs on ctx to produce fc1_output and gelu_output = gelu_tanh(fc1_output) exactly as the
 * library computes them (on CUDA through device copies: cli_set_run), and grad_output is uniform
 * in [-1, 1).
 */
static int generate_mlp_backward(cvf_context *ctx, cli_tensor_set *set, cvft_rng *rng)
{
    static const char *const taken[] = {"hidden_state", "fc1_weight", "fc2_weight", "fc1_output", "gelu_output"};
    cli_tensor_set fw;
    cli_set_init(&fw, &MLP_FORWARD, set->command, set->dtype, set->dims);
    int rc = cli_set_alloc(&fw, CLI_ALL);
    if (rc != CLI_EXIT_OK) {
        cli_set_free(&fw);
        return rc;
    }
    double weight_range = 3.0 / sqrt((double)set->dims[MLP_H]);
    for (int i = 0; i < MLP_FORWARD.tensor_count && !MLP_FORWARD.tensors[i].is_output; i++) {
        double r = i == FW_FC1_W ? weight_range : 1.0;
        cli_tensor_fill(&fw.tensors[i], rng, -r, r);
    }
    rc = cli_set_run(ctx, &fw, "cvf_mlp_forward (generating the saved tensors)", NULL);
    if (rc != CLI_EXIT_OK) {
        cli_set_free(&fw);
        return rc;
    }
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        cli_set_take(set, &fw, taken[i]);
    cli_set_free(&fw);
    cli_tensor_fill(&set->tensors[BW_GRAD_OUT], rng, -1.0, 1.0);
    return CLI_EXIT_OK;
}

static const cli_op MLP_BACKWARD = {
    .name = "mlp-backward",
    .summary = "vision-MLP GELU backward: K1 fused (grad_gelu_output never stored)",
    .call = "cvf_mlp_backward",
    .inputs_help = "hidden_state, fc2_weight, grad_output and the forward's biases uniform in [-1, 1);\n"
                   "  fc1_weight uniform in [-3/sqrt(H), 3/sqrt(H)), so that fc1_output spans about [-4, 4);\n"
                   "  fc1_output and gelu_output come from running mlp-forward on the chosen device",
    .dim_names = {"S", "H", "I"},
    .dim_opts = {CLI_OPT_S, CLI_OPT_H, CLI_OPT_I},
    .dim_defaults = {197, 768, 3072},
    .default_dtype = CVF_F32,
    .flops_per_mnk = 8.0,
    .tensor_count = COUNT_OF(MLP_BACKWARD_TENSORS),
    .tensors = MLP_BACKWARD_TENSORS,
    .run = run_mlp_backward,
    .generate = generate_mlp_backward,
};

/* Every op, in the order of the help texts and of bench. */
static const cli_op *const OPS[] = {&GEMM, &MATMUL_RELU, &MLP_FORWARD, &MLP_BACKWARD};

#define OP_COUNT COUNT_OF(OPS)

const cli_op *cli_op_find(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(OPS[i]->name, name) == 0)
            return OPS[i];
    return NULL;
}

int cli_op_count(void)
{
    return OP_COUNT;
}

const cli_op *cli_op_at(int index)
{
    return OPS[index];
}

uint32_t cli_op_dim_mask(const cli_op *op)
{
    uint32_t mask = 0;
    for (int d = 0; d < CLI_DIMS; d++)
        mask |= CLI_BIT(op->dim_opts[d]);
    return mask;
}

double cli_op_flops(const cli_op *op, const int64_t *dims)
{
    return op->flops_per_mnk * (double)dims[0] * (double)dims[1] * (double)dims[2];
}

void cli_op_dims(const cli_op *op, const cli_args *args, int64_t *dims)
{
    for (int d = 0; d < CLI_DIMS; d++)
        dims[d] = cli_num(args, op->dim_opts[d], op->dim_defaults[d]);
}

void cli_op_shape_text(const cli_op *op, const int64_t *dims, char *buf, size_t size)
{
    snprintf(buf, size, "%s=%lld %s=%lld %s=%lld", op->dim_names[0], (long long)dims[0], op->dim_names[1],
             (long long)dims[1], op->dim_names[2], (long long)dims[2]);
}

/* Prints the files of op that are inputs (is_output 0) or outputs (1), with their shapes. */
static void print_file_group(FILE *out, const cli_op *op, int is_output)
{
    int column = 0;
    for (int i = 0; i < op->tensor_count; i++) {
        const cli_tensor_spec *t = &op->tensors[i];
        if (t->is_output != is_output)
            continue;
        char item[64];
        if (t->ndim == 1)
            snprintf(item, sizeof item, "%s.npy (%s,)", t->name, op->dim_names[t->dims[0]]);
        else
            snprintf(item, sizeof item, "%s.npy (%s, %s)", t->name, op->dim_names[t->dims[0]],
                     op->dim_names[t->dims[1]]);
        if (column > 0 && column + (int)strlen(item) > 84) {
            fputs(",\n           ", out);
            column = 0;
        } else if (column > 0) {
            fputs(", ", out);
        }
        fputs(item, out);
        column += (int)strlen(item) + 2;
    }
    fputc('\n', out);
}

void cli_op_print_files(FILE *out, const cli_op *op)
{
    fputs("  inputs:  ", out);
    print_file_group(out, op, 0);
    fputs("  outputs: ", out);
    print_file_group(out, op, 1);
}

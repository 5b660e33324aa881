/*
 * The option table of the cvfuse CLI and its strict parser: every option is spelled "--name VALUE"
 * or "--name=VALUE", integers must be whole decimal strings within the option's range, unknown
 * options and options that do not apply to the subcommand are usage errors. Also the error
 * reporters shared by every subcommand.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The largest dimension the options accept. */
#define CLI_DIM_MAX (INT64_C(1) << 30)

/* How an option's value is read. */
typedef enum cli_value_kind {
    CLI_VALUE_FLAG,  /* no value */
    CLI_VALUE_INT,   /* a decimal integer in [min, max] */
    CLI_VALUE_TEXT,  /* any non-empty string */
    CLI_VALUE_DTYPE, /* f32, f16 or bf16 */
    CLI_VALUE_DEVICE /* cpu, cuda or reference */
} cli_value_kind;

/* One entry of the option table. */
typedef struct cli_option_spec {
    const char *name;  /* "--m" */
    const char *alias; /* another spelling ("-h"), or NULL */
    cli_value_kind kind;
    const char *metavar; /* the value's placeholder in the help */
    const char *help;
    int64_t min, max; /* range of an integer */
} cli_option_spec;

/* Every option, indexed by cli_opt. */
static const cli_option_spec OPTIONS[CLI_OPT_COUNT] = {
    [CLI_OPT_M] = {"--m", NULL, CLI_VALUE_INT, "M", "rows of A and C", 1, CLI_DIM_MAX},
    [CLI_OPT_N] = {"--n", NULL, CLI_VALUE_INT, "N", "columns of B and C", 1, CLI_DIM_MAX},
    [CLI_OPT_K] = {"--k", NULL, CLI_VALUE_INT, "K", "columns of A = rows of B (the reduction)", 1, CLI_DIM_MAX},
    [CLI_OPT_S] = {"--S", NULL, CLI_VALUE_INT, "S", "tokens (batch x (patches + 1))", 1, CLI_DIM_MAX},
    [CLI_OPT_H] = {"--H", NULL, CLI_VALUE_INT, "H", "hidden size", 1, CLI_DIM_MAX},
    [CLI_OPT_I] = {"--I", NULL, CLI_VALUE_INT, "I", "intermediate size", 1, CLI_DIM_MAX},
    [CLI_OPT_DTYPE] = {"--dtype", NULL, CLI_VALUE_DTYPE, "T", "storage dtype of every tensor: f32, f16 or bf16", 0, 0},
    [CLI_OPT_DEVICE] = {"--device", NULL, CLI_VALUE_DEVICE, "D",
                        "cpu, cuda (GPU 0), or reference (the float64 oracle: slow, for checking)", 0, 0},
    [CLI_OPT_THREADS] = {"--threads", NULL, CLI_VALUE_INT, "N", "worker threads; 0 = one per core", 0, 1024},
    [CLI_OPT_SEED] = {"--seed", NULL, CLI_VALUE_INT, "N", "seed of the random inputs", 0, INT64_MAX},
    [CLI_OPT_INPUTS] = {"--inputs", NULL, CLI_VALUE_TEXT, "DIR",
                        "read every input from DIR/NAME.npy; shape and (without --dtype) dtype from the files", 0, 0},
    [CLI_OPT_OUTPUTS] = {"--outputs", NULL, CLI_VALUE_TEXT, "DIR",
                         "write the outputs (and generated random inputs) to DIR/NAME.npy", 0, 0},
    [CLI_OPT_CHECK] = {"--check", NULL, CLI_VALUE_FLAG, NULL, "compare every output with the float64 reference device",
                       0, 0},
    [CLI_OPT_JSON] = {"--json", NULL, CLI_VALUE_FLAG, NULL, "print one JSON object per result line", 0, 0},
    [CLI_OPT_OP] = {"--op", NULL, CLI_VALUE_TEXT, "OP", "gemm, matmul-relu, mlp-forward, mlp-backward or all", 0, 0},
    [CLI_OPT_REPEAT] = {"--repeat", NULL, CLI_VALUE_INT, "N", "timed runs per op", 1, 1000000},
    [CLI_OPT_WARMUP] = {"--warmup", NULL, CLI_VALUE_INT, "N", "untimed warm-up runs per op", 0, 1000000},
    [CLI_OPT_SUITE] = {"--suite", NULL, CLI_VALUE_TEXT, "NAME",
                       "a fixed list of cases instead of --op and shapes: cpu (the CPU targets)", 0, 0},
    [CLI_OPT_JSON_OUT] = {"--json-out", NULL, CLI_VALUE_TEXT, "FILE",
                          "also write one JSON object per case to FILE (the table still goes to stdout)", 0, 0},
    [CLI_OPT_HELP] = {"--help", "-h", CLI_VALUE_FLAG, NULL, "show this help and exit", 0, 0},
};

/* Prints "cvfuse COMMAND: " and the formatted message to stderr. */
static void vreport(const char *command, const char *format, va_list args)
{
    fprintf(stderr, "cvfuse%s%s: ", command ? " " : "", command ? command : "");
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
}

int cli_usage_error(const char *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vreport(command, format, args);
    va_end(args);
    fprintf(stderr, "try 'cvfuse%s%s --help'\n", command ? " " : "", command ? command : "");
    return CLI_EXIT_USAGE;
}

int cli_runtime_error(const char *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vreport(command, format, args);
    va_end(args);
    return CLI_EXIT_RUNTIME;
}

int cli_library_error(const char *command, const char *call, cvf_status status, const cvf_context *ctx)
{
    const char *detail = ctx ? cvf_context_last_error(ctx) : "";
    return cli_runtime_error(command, "%s failed: %s%s%s", call, cvf_status_string(status), detail[0] ? ": " : "",
                             detail);
}

int cli_context_create(const char *command, cvf_device device, int64_t threads, cvf_context **ctx)
{
    cvf_context_options options = {device, (int32_t)threads, 0, NULL};
    cvf_status status = cvf_context_create(&options, ctx);
    if (status == CVF_STATUS_SUCCESS)
        return CLI_EXIT_OK;
    const char *why = cvf_context_create_error(); /* e.g. "cuda device 0: no CUDA device (...)" */
    return cli_runtime_error(command, "%scvf_context_create failed: %s%s%s",
                             device == CVF_DEVICE_CUDA ? "--device cuda: " : "", cvf_status_string(status),
                             why[0] ? ": " : "", why);
}

int cli_given(const cli_args *args, cli_opt opt)
{
    return (args->given & CLI_BIT(opt)) != 0;
}

int64_t cli_num(const cli_args *args, cli_opt opt, int64_t fallback)
{
    return cli_given(args, opt) ? args->num[opt] : fallback;
}

const char *cli_opt_name(cli_opt opt)
{
    return OPTIONS[opt].name;
}

void cli_print_options(FILE *out, uint32_t allowed)
{
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        if (!(allowed & CLI_BIT(i)))
            continue;
        const cli_option_spec *o = &OPTIONS[i];
        char left[48];
        snprintf(left, sizeof left, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
                 o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(out, "  %-16s %s\n", left, o->help);
    }
}

/* Returns the option whose spelling is the first length characters of word, or -1. */
static int find_option(const char *word, size_t length)
{
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        const cli_option_spec *o = &OPTIONS[i];
        if (strlen(o->name) == length && strncmp(o->name, word, length) == 0)
            return i;
        if (o->alias && strlen(o->alias) == length && strncmp(o->alias, word, length) == 0)
            return i;
    }
    return -1;
}

/* Parses text as a whole decimal integer in [min, max] into *value. Returns 0, or prints a
 * usage error and returns CLI_EXIT_USAGE. */
static int parse_int(const char *command, const char *name, const char *text, int64_t min, int64_t max, int64_t *value)
{
    /* strtoll skips leading blanks and accepts '+': demand a digit or a '-' followed by one */
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (digits[0] < '0' || digits[0] > '9')
        return cli_usage_error(command, "%s: '%s' is not an integer", name, text);
    errno = 0;
    char *end = NULL;
    long long parsed = strtoll(text, &end, 10);
    if (*end != '\0')
        return cli_usage_error(command, "%s: '%s' is not an integer", name, text);
    if (errno == ERANGE || parsed < min || parsed > max)
        return cli_usage_error(command, "%s: %s is out of range [%" PRId64 ", %" PRId64 "]", name, text, min, max);
    *value = parsed;
    return CLI_EXIT_OK;
}

/* Parses a --device value into args: cuda sets args->cuda, and except for bench also the device
 * (bench keeps the CPU device and hands the run to its CUDA bench; the op subcommands copy their
 * host tensors to the GPU, tools/cli_device.c). Returns a CLI_EXIT_* code. */
static int parse_device(const char *command, const char *name, const char *value, cli_args *args)
{
    if (strcmp(value, "cpu") == 0)
        args->device = CVF_DEVICE_CPU;
    else if (strcmp(value, "reference") == 0)
        args->device = CVF_DEVICE_REFERENCE;
    else if (strcmp(value, "cuda") == 0) {
        args->cuda = 1;
        if (strcmp(command, "bench") != 0)
            args->device = CVF_DEVICE_CUDA;
    } else
        return cli_usage_error(command, "%s: '%s' is not one of cpu, reference, cuda", name, value);
    return CLI_EXIT_OK;
}

/* Stores the value of option opt (already known to take one) into args. Returns a CLI_EXIT_*
 * code. */
static int store_value(const char *command, int opt, const char *value, cli_args *args)
{
    const cli_option_spec *o = &OPTIONS[opt];
    if (value[0] == '\0')
        return cli_usage_error(command, "%s: empty value", o->name);
    switch (o->kind) {
    case CLI_VALUE_INT: return parse_int(command, o->name, value, o->min, o->max, &args->num[opt]);
    case CLI_VALUE_TEXT: args->text[opt] = value; return CLI_EXIT_OK;
    case CLI_VALUE_DTYPE:
        if (cvft_dtype_parse(value, &args->dtype) != 0 || args->dtype == CVF_F64)
            return cli_usage_error(command, "%s: '%s' is not one of f32, f16, bf16", o->name, value);
        return CLI_EXIT_OK;
    case CLI_VALUE_DEVICE: return parse_device(command, o->name, value, args);
    case CLI_VALUE_FLAG: break;
    }
    return cli_usage_error(command, "%s takes no value", o->name);
}

/* Parses the option word at argv[*i] (and its value, advancing *i past it). Returns a CLI_EXIT_*
 * code. */
static int parse_one(const char *command, uint32_t allowed, int argc, char **argv, int *i, cli_args *args)
{
    const char *word = argv[*i];
    if (word[0] != '-' || word[1] == '\0')
        return cli_usage_error(command, "unexpected argument '%s'", word);
    const char *equals = strchr(word, '=');
    size_t length = equals ? (size_t)(equals - word) : strlen(word);
    int opt = find_option(word, length);
    if (opt < 0)
        return cli_usage_error(command, "unknown option '%.*s'", (int)length, word);
    const cli_option_spec *o = &OPTIONS[opt];
    if (!(allowed & CLI_BIT(opt)))
        return cli_usage_error(command, "option '%s' does not apply to this command", o->name);
    if (args->given & CLI_BIT(opt))
        return cli_usage_error(command, "option '%s' given twice", o->name);
    args->given |= CLI_BIT(opt);
    if (o->kind == CLI_VALUE_FLAG)
        return equals ? cli_usage_error(command, "%s takes no value", o->name) : CLI_EXIT_OK;
    if (equals)
        return store_value(command, opt, equals + 1, args);
    if (*i + 1 >= argc)
        return cli_usage_error(command, "%s: missing value (%s)", o->name, o->metavar);
    *i += 1;
    return store_value(command, opt, argv[*i], args);
}

int cli_parse(const char *command, uint32_t allowed, int argc, char **argv, cli_args *args)
{
    *args = (cli_args){0};
    args->command = command;
    args->dtype = CVF_F32;
    args->device = CVF_DEVICE_CPU;
    for (int i = 0; i < argc; i++) {
        int rc = parse_one(command, allowed, argc, argv, &i, args);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (cli_given(args, CLI_OPT_HELP))
            return CLI_EXIT_OK; /* help wins over whatever follows */
    }
    return CLI_EXIT_OK;
}

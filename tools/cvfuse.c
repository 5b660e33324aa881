/*
 * cvfuse: the command-line tool of the library. Runs the fused ops on random or .npy inputs,
 * checks them against the float64 reference device, benchmarks them and explains the MLP
 * backward plan. This file holds main, the subcommand table and the top-level help; the
 * subcommands live in tools/cli_*.c (see tools/cli.h).
 */
#include <string.h>

#include "cli.h"

/* A subcommand that is not an op. */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* The subcommands besides the ops of the op table. */
static const cli_command COMMANDS[] = {
    {"bench", "time the ops: median and min of repeated runs, warm-up excluded", cli_cmd_bench},
    {"explain", "print the MLP backward plan: kernels, fused epilogues, bytes saved", cli_cmd_explain},
};

#define COMMAND_COUNT (sizeof COMMANDS / sizeof COMMANDS[0])

/* Prints the top-level help. */
static void print_help(FILE *out)
{
    fprintf(out,
            "usage: cvfuse COMMAND [OPTIONS]\n"
            "       cvfuse help [COMMAND]\n\n"
            "cvfuse %d.%d.%d: fused matrix-multiply + vector-epilogue operators, run from the command line.\n"
            "Inputs are random (deterministic from --seed) or read from .npy files; --check compares every\n"
            "output with the float64 reference device.\n\n"
            "commands:\n",
            CVF_VERSION_MAJOR, CVF_VERSION_MINOR, CVF_VERSION_PATCH);
    for (int i = 0; i < cli_op_count(); i++)
        fprintf(out, "  %-13s %s\n", cli_op_at(i)->name, cli_op_at(i)->summary);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-13s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(out, "  %-13s %s\n", "help", "show this help, or the help of a command");
    fprintf(out,
            "\nRun 'cvfuse COMMAND --help' for the options of a command.\n\n"
            "exit status:\n"
            "  0  success (with --check: every output within tolerance)\n"
            "  1  runtime failure: a library call failed (its status and message are printed),\n"
            "     out of memory, or a file could not be written\n"
            "  2  usage error: unknown command or option, bad value, or a missing, malformed or\n"
            "     mismatched .npy input\n"
            "  3  --check found an output outside the tolerance of its dtype\n\n"
            "notes:\n"
            "  numpy has no bfloat16: bf16 tensors are written to .npy files as '<f4' (exact widening);\n"
            "  --inputs DIR takes the dtype from the files, so a bf16 run is rerun with --dtype bf16.\n\n"
            "examples:\n"
            "  cvfuse matmul-relu --check\n"
            "  cvfuse mlp-backward --S 12608 --dtype bf16 --check --json\n"
            "  cvfuse mlp-forward --S 13 --H 24 --I 40 --outputs run1 && cvfuse mlp-forward --inputs run1 --check\n"
            "  cvfuse bench --op all --repeat 20\n"
            "  cvfuse explain --S 12608 --dtype bf16\n");
}

/* Runs the subcommand name with the words that follow it. Returns the exit code, or -1 when
 * name is no subcommand. */
static int dispatch(const char *name, int argc, char **argv)
{
    const cli_op *op = cli_op_find(name);
    if (op)
        return cli_cmd_op(op, argc, argv);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(COMMANDS[i].name, name) == 0)
            return COMMANDS[i].run(argc, argv);
    return -1;
}

/* Handles "cvfuse help [COMMAND]". */
static int help_command(int argc, char **argv)
{
    if (argc == 0) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (argc > 1)
        return cli_usage_error(NULL, "help: expected at most one command, got %d words", argc);
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    char flag[] = "--help";
    char *words[] = {flag};
    int rc = dispatch(argv[0], 1, words);
    return rc >= 0 ? rc : cli_usage_error(NULL, "unknown command '%s'", argv[0]);
}

/* Entry point: cvfuse COMMAND [OPTIONS]. */
int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(NULL, "missing command");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0)
        return help_command(argc - 2, argv + 2);
    if (strcmp(name, "--version") == 0) {
        printf("cvfuse %d.%d.%d\n", CVF_VERSION_MAJOR, CVF_VERSION_MINOR, CVF_VERSION_PATCH);
        return CLI_EXIT_OK;
    }
    int rc = dispatch(name, argc - 2, argv + 2);
    if (rc >= 0)
        return rc;
    if (name[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s' (options follow a command)", name);
    return cli_usage_error(NULL, "unknown command '%s'", name);
}

/*
 * Results of the cvfuse CLI: an aligned, titled table for people (and `make run`), or one JSON
 * object per line for scripts. JSON keys: "op", "device", "dtype", "shape", "threads", "ms",
 * "gflops"; with --check "rel_err" (output name -> number) and "ok"; bench adds "min_ms",
 * "repeat", "warmup", the baseline ("baseline", "baseline_ms", "baseline_min_ms", "ratio" =
 * ms / baseline_ms, "baseline_check") and the peak ("peak_gflops", "peak_fraction" = gflops /
 * peak_gflops). Non-finite numbers are written as null.
 */
#include <math.h>

#include "cli.h"

/* Column layout shared by the header and the rows of the tables. */
#define ROW_FORMAT "  %-13s %-9s %-6s %-22s %7s %11s %11s\n"
#define BENCH_FORMAT "  %-12s %-5s %-20s %10s %10s %9s %6s %10s %6s %8s\n"
#define CHECK_FORMAT "  %-18s %11s %10s  %s\n"

void cli_result_init(cli_result *result, const cli_op *op, const cvf_context *ctx, const cli_tensor_set *set)
{
    *result = (cli_result){0};
    result->op = op;
    result->device = cvf_context_device(ctx);
    result->threads = cvf_context_threads(ctx);
    result->dtype = set->dtype;
    for (int d = 0; d < CLI_DIMS; d++)
        result->dims[d] = set->dims[d];
}

double cli_gflops(const cli_op *op, const int64_t *dims, double ms)
{
    return ms > 0.0 ? cli_op_flops(op, dims) / (ms * 1e6) : INFINITY;
}

void cli_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void cli_json_number(FILE *out, double value)
{
    if (isfinite(value))
        fprintf(out, "%.6g", value);
    else
        fputs("null", out);
}

/* Prints "key":value for a number, preceded by a comma. */
static void json_field(FILE *out, const char *key, double value)
{
    fprintf(out, ",\"%s\":", key);
    cli_json_number(out, value);
}

/* Prints the "shape" object of a result: {"m":..,"n":..,"k":..} or {"S":..,"H":..,"I":..}. */
static void json_shape(FILE *out, const cli_result *r)
{
    fputs(",\"shape\":{", out);
    for (int d = 0; d < CLI_DIMS; d++)
        fprintf(out, "%s\"%s\":%lld", d ? "," : "", r->op->dim_names[d], (long long)r->dims[d]);
    fputc('}', out);
}

/* Prints the "rel_err" object and "ok" of a checked result. */
static void json_check(FILE *out, const cli_check *check)
{
    fputs(",\"rel_err\":{", out);
    for (int i = 0; i < check->count; i++) {
        if (i)
            fputc(',', out);
        cli_json_string(out, check->names[i]);
        fputc(':', out);
        cli_json_number(out, check->rel_err[i]);
    }
    fprintf(out, "},\"ok\":%s", check->ok ? "true" : "false");
}

void cli_report_json(FILE *out, const cli_result *r)
{
    fputs("{\"op\":", out);
    cli_json_string(out, r->op->name);
    fprintf(out, ",\"device\":\"%s\",\"dtype\":\"%s\"", cvf_device_name(r->device), cvf_dtype_name(r->dtype));
    json_shape(out, r);
    fprintf(out, ",\"threads\":%d", (int)r->threads);
    json_field(out, "ms", r->ms);
    json_field(out, "gflops", r->gflops);
    if (r->is_bench) {
        json_field(out, "min_ms", r->min_ms);
        fprintf(out, ",\"repeat\":%lld,\"warmup\":%lld,\"baseline\":", (long long)r->repeat, (long long)r->warmup);
        cli_json_string(out, r->baseline ? r->baseline : "none");
        json_field(out, "baseline_ms", r->baseline_ms);
        json_field(out, "baseline_min_ms", r->baseline_min_ms);
        json_field(out, "ratio", r->ms / r->baseline_ms);
        json_field(out, "baseline_check", r->baseline_check);
        json_field(out, "peak_gflops", r->peak_gflops);
        json_field(out, "peak_fraction", r->gflops / r->peak_gflops);
    }
    if (r->check)
        json_check(out, r->check);
    fputs("}\n", out);
}

/* Formats a number for a table cell with format, or "-" when it is not finite. */
static const char *cell(char *buf, size_t size, const char *format, double value)
{
    if (isfinite(value))
        snprintf(buf, size, format, value);
    else
        snprintf(buf, size, "-");
    return buf;
}

/* Prints the check table of a result: one row per output, then a summary line. */
static void table_check(FILE *out, const cli_check *check)
{
    fprintf(out, "  check against the float64 reference device (relative Frobenius error):\n");
    fprintf(out, CHECK_FORMAT, "output", "rel_err", "tolerance", "result");
    int failed = 0;
    for (int i = 0; i < check->count; i++) {
        char err[32], tol[32];
        int ok = check->rel_err[i] <= check->tolerance;
        failed += !ok;
        snprintf(err, sizeof err, "%.3e", check->rel_err[i]);
        snprintf(tol, sizeof tol, "%.1e", check->tolerance);
        fprintf(out, CHECK_FORMAT, check->names[i], err, tol, ok ? "ok" : "FAIL");
    }
    if (failed)
        fprintf(out, "  FAILED: %d of %d outputs out of tolerance\n", failed, check->count);
    else
        fprintf(out, "  ok: %d of %d outputs within tolerance\n", check->count, check->count);
}

void cli_report_table(FILE *out, const cli_result *r, const char *inputs_from)
{
    char shape[96], threads[16], ms[32], gflops[32];
    cli_op_shape_text(r->op, r->dims, shape, sizeof shape);
    snprintf(threads, sizeof threads, "%d", (int)r->threads);
    fprintf(out, "%s: %s; %s\n", r->op->name, r->op->summary, inputs_from);
    fprintf(out, ROW_FORMAT, "op", "device", "dtype", "shape", "threads", "ms", "GFLOP/s");
    fprintf(out, ROW_FORMAT, r->op->name, cvf_device_name(r->device), cvf_dtype_name(r->dtype), shape, threads,
            cell(ms, sizeof ms, "%.3f", r->ms), cell(gflops, sizeof gflops, "%.2f", r->gflops));
    if (r->check)
        table_check(out, r->check);
}

void cli_report_bench_header(FILE *out, cvf_device device, int threads, int64_t repeat, int64_t warmup,
                             const char *notes)
{
    fprintf(out,
            "bench: %s device, %d threads; ours and the baseline alternate on the same inputs, median and min\n"
            "  of %lld timed runs each after %lld warm-up run(s) each; ratio = ours / baseline (< 1: ours faster)\n",
            cvf_device_name(device), threads, (long long)repeat, (long long)warmup);
    fputs(notes, out);
    fprintf(out, BENCH_FORMAT, "op", "dtype", "shape", "median ms", "min ms", "GFLOP/s", "%peak", "base ms", "ratio",
            "base err");
}

void cli_report_bench_row(FILE *out, const cli_result *r)
{
    char shape[96], median[32], min[32], gflops[32], peak[32], base[32], ratio[32], err[32];
    cli_op_shape_text(r->op, r->dims, shape, sizeof shape);
    fprintf(out, BENCH_FORMAT, r->op->name, cvf_dtype_name(r->dtype), shape, cell(median, sizeof median, "%.3f", r->ms),
            cell(min, sizeof min, "%.3f", r->min_ms), cell(gflops, sizeof gflops, "%.1f", r->gflops),
            cell(peak, sizeof peak, "%.1f", 100.0 * r->gflops / r->peak_gflops),
            cell(base, sizeof base, "%.3f", r->baseline_ms), cell(ratio, sizeof ratio, "%.3f", r->ms / r->baseline_ms),
            cell(err, sizeof err, "%.1e", r->baseline_check));
}

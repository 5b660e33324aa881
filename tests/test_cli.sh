#!/usr/bin/env bash
# Tests of the cvfuse command-line tool. Usage: test_cli.sh PATH_TO_CVFUSE
#
# Covers help texts and exit codes (0 help, 1 runtime failure, 2 usage error, 3 check failure),
# strict option parsing, small checked runs of every op in every dtype, the --json format,
# .npy round trips (--outputs then --inputs, the dtype taken from the files), hand-written .npy
# files (Fortran order, '<f8'), malformed, mismatched and mixed-dtype files, a failed library call,
# bench (its baseline, or "none" in a build without OpenBLAS; the peak), explain (also
# --device cuda: the CUDA plan with a GPU, a one-line runtime failure without one) and the op
# subcommands' --device cuda (checked runs through device copies where `explain --device cuda`
# finds a GPU, else a one-line runtime failure naming the reason). Small shapes only: runs in
# seconds, also under AddressSanitizer. Prints
# "test_cli: N passed, M failed" last; exits 1 on any failure.
set -u
# CVF_DEBUG makes the library print on stderr, which several checks demand be empty.
unset CVF_DEBUG

CLI=${1:?usage: test_cli.sh PATH_TO_CVFUSE}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PASSED=0
FAILED=0
HAVE_PYTHON=0
command -v python3 >/dev/null 2>&1 && HAVE_PYTHON=1

# The keys of every bench JSON object.
BENCH_KEYS="op device dtype shape threads ms gflops min_ms repeat warmup baseline baseline_ms baseline_min_ms ratio
baseline_check peak_gflops peak_fraction"

# Small shapes used throughout.
MM=(--m 33 --n 17 --k 65)
MLP=(--S 13 --H 24 --I 40)

# pass / fail DESCRIPTION: count one check.
pass() { PASSED=$((PASSED + 1)); }
fail() {
    FAILED=$((FAILED + 1))
    echo "FAIL: $*" >&2
}

# run ARGS...: runs the CLI; sets RC, OUT (stdout) and ERR (stderr).
run() {
    "$CLI" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# expect_rc WANT DESCRIPTION: the last run exited with WANT.
expect_rc() {
    if [ "$RC" -eq "$1" ]; then pass; else fail "$2: exit $RC, expected $1 (stderr: $ERR)"; fi
}

# expect_has TEXT HAYSTACK DESCRIPTION: HAYSTACK contains TEXT.
expect_has() {
    case "$2" in
    *"$1"*) pass ;;
    *) fail "$3: '$1' not found in: $2" ;;
    esac
}

# expect_true DESCRIPTION COMMAND...: COMMAND succeeds.
expect_true() {
    local what=$1
    shift
    if "$@"; then pass; else fail "$what"; fi
}

# expect_usage DESCRIPTION COMMAND_NAME TEXT ARGS...: the CLI run with ARGS is a usage error:
# exit 2, nothing on stdout, a message containing TEXT and the "try" line on stderr.
expect_usage() {
    local what=$1 command=$2 text=$3
    shift 3
    run "$@"
    expect_rc 2 "$what"
    expect_has "$text" "$ERR" "$what: message"
    expect_has "try 'cvfuse${command:+ $command} --help'" "$ERR" "$what: try line"
    if [ -z "$OUT" ]; then pass; else fail "$what: stdout not empty: $OUT"; fi
}

# json_lines KEYS...: every line of the last stdout is a JSON object with exactly KEYS (python3),
# or at least looks like one and has them (without python3).
json_lines() {
    if [ "$HAVE_PYTHON" = 1 ]; then
        python3 - "$TMP/out" "$@" <<'EOF'
import json, sys
def reject(name):
    raise ValueError("non-standard JSON constant " + name)
path, keys = sys.argv[1], sorted(sys.argv[2:])
lines = open(path).read().splitlines()
if not lines:
    sys.exit("no output")
for line in lines:
    obj = json.loads(line, parse_constant=reject)
    if not isinstance(obj, dict) or sorted(obj) != keys:
        sys.exit("keys %s, expected %s" % (sorted(obj), keys))
EOF
        return $?
    fi
    [ -s "$TMP/out" ] || return 1
    grep -qvE '^\{.*\}$' "$TMP/out" && return 1
    grep -qiE '(nan|inf)[,}]' "$TMP/out" && return 1
    local key
    for key in "$@"; do grep -q "\"$key\":" "$TMP/out" || return 1; done
    return 0
}

# write_npy PATH DESCR FORTRAN SHAPE BYTES: writes a version 1.0 .npy file by hand; BYTES is a
# printf string of the little-endian data.
write_npy() {
    local dict="{'descr': '$2', 'fortran_order': $3, 'shape': $4, }"
    local total=$(((10 + ${#dict} + 1 + 63) / 64 * 64))
    local hlen=$((total - 10))
    local pad=$((hlen - ${#dict} - 1))
    {
        printf '\x93NUMPY\x01\x00'
        printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
        printf '%s%*s\n' "$dict" "$pad" ''
        printf "$5"
    } >"$1"
}

# ---- help and exit codes ----------------------------------------------------------------------

test_help() {
    run --help
    expect_rc 0 "--help"
    expect_has "exit status" "$OUT" "--help lists exit codes"
    expect_has "3  --check" "$OUT" "--help documents exit 3"
    expect_has "'<f4'" "$OUT" "--help documents bf16 files"
    expect_has "a bf16 run is rerun with --dtype bf16" "$OUT" "--help says how to rerun a bf16 run"
    run help
    expect_rc 0 "help"
    expect_has "mlp-backward" "$OUT" "help lists the subcommands"
    local command
    for command in gemm matmul-relu mlp-forward mlp-backward bench explain; do
        run "$command" --help
        expect_rc 0 "$command --help"
        expect_has "usage: cvfuse $command" "$OUT" "$command --help usage line"
        run help "$command"
        expect_rc 0 "help $command"
    done
    run matmul-relu -h
    expect_rc 0 "matmul-relu -h"
    expect_has "a.npy (m, k)" "$OUT" "matmul-relu --help names the files"
    expect_has "a bf16 run is rerun with '--inputs DIR --dtype bf16'" "$OUT" "matmul-relu --help on bf16 reruns"
    run mlp-backward --help
    expect_has "grad_fc1_bias.npy (I,)" "$OUT" "mlp-backward --help names the files"
    run --version
    expect_rc 0 "--version"
}

test_usage_errors() {
    expect_usage "no command" "" "missing command"
    expect_usage "unknown command" "" "unknown command 'frobnicate'" frobnicate
    expect_usage "help of an unknown command" "" "unknown command 'frobnicate'" help frobnicate
    expect_usage "unknown option" matmul-relu "unknown option '--frob'" matmul-relu --frob
    expect_usage "option of another command" matmul-relu "'--S'" matmul-relu --S 5
    expect_usage "stray argument" mlp-forward "unexpected argument 'extra'" mlp-forward extra
    expect_usage "--m abc" matmul-relu "--m: 'abc' is not an integer" matmul-relu --m abc
    expect_usage "--m -1" matmul-relu "--m: -1 is out of range" matmul-relu --m -1
    expect_usage "--m 12x" matmul-relu "--m: '12x' is not an integer" matmul-relu --m 12x
    expect_usage "--m ' 7'" matmul-relu "is not an integer" matmul-relu --m ' 7'
    expect_usage "--m=" matmul-relu "--m: empty value" matmul-relu --m=
    expect_usage "--m huge" matmul-relu "out of range" matmul-relu --m 99999999999999999999
    expect_usage "--m missing value" matmul-relu "--m: missing value" matmul-relu --m
    expect_usage "--S 0" mlp-backward "--S: 0 is out of range" mlp-backward --S 0
    expect_usage "--threads -1" mlp-forward "--threads: -1 is out of range" mlp-forward --threads -1
    expect_usage "--seed x" matmul-relu "--seed: 'x' is not an integer" matmul-relu --seed x
    expect_usage "--dtype f8" matmul-relu "--dtype: 'f8' is not one of f32, f16, bf16" matmul-relu --dtype f8
    expect_usage "--dtype f64" mlp-backward "--dtype: 'f64'" mlp-backward --dtype f64
    expect_usage "--device gpu" matmul-relu "--device: 'gpu'" matmul-relu --device gpu
    expect_usage "flag with a value" matmul-relu "--check takes no value" matmul-relu --check=yes
    expect_usage "option twice" matmul-relu "'--m' given twice" matmul-relu --m 4 --m 5
    expect_usage "bench --repeat 0" bench "--repeat: 0 is out of range" bench --repeat 0
    expect_usage "bench --op bad" bench "--op: 'matmul'" bench --op matmul
    expect_usage "bench shape of another op" bench "--S does not apply to --op matmul-relu" \
        bench --op matmul-relu --S 4
    expect_usage "explain --check" explain "'--check'" explain --check
    expect_usage "--device bad on an op" matmul-relu "--device: 'tpu' is not one of cpu, reference, cuda" \
        matmul-relu --device tpu
    expect_usage "bench --device bad" bench "--device: 'tpu' is not one of cpu, reference, cuda" bench --device tpu
    expect_usage "explain --device bad" explain "--device: 'tpu' is not one of cpu, reference, cuda" explain --device tpu
    expect_usage "--gelu bad" mlp-forward "--gelu: 'exact' is not one of tanh, erf" mlp-forward --gelu exact
    expect_usage "--gelu on gemm" gemm "option '--gelu' does not apply to this command" gemm --gelu erf
    expect_usage "bench --suite bad" bench "--suite: 'gpu' is not one of cpu" bench --suite gpu
    expect_usage "bench --suite with --op" bench "--op does not apply to --suite" bench --suite cpu --op gemm
    expect_usage "bench --suite with a shape" bench "--m does not apply to --suite" bench --suite cpu --m 4
    expect_usage "bench --suite with --dtype" bench "--dtype does not apply to --suite" bench --suite cpu --dtype f16
    run matmul-relu --frob
    local lines
    lines=$(printf '%s\n' "$ERR" | wc -l)
    if [ "$lines" -eq 2 ]; then pass; else fail "usage error is not two lines: $ERR"; fi
}

# ---- checked runs -------------------------------------------------------------------------------

test_checked_runs() {
    local dtype
    for dtype in f32 f16 bf16; do
        run matmul-relu "${MM[@]}" --dtype "$dtype" --check
        expect_rc 0 "matmul-relu $dtype --check"
        expect_has "ok: 1 of 1 outputs within tolerance" "$OUT" "matmul-relu $dtype check row"
        run mlp-forward "${MLP[@]}" --dtype "$dtype" --check
        expect_rc 0 "mlp-forward $dtype --check"
        expect_has "gelu_output" "$OUT" "mlp-forward $dtype reports gelu_output"
        run mlp-backward "${MLP[@]}" --dtype "$dtype" --check --threads 1
        expect_rc 0 "mlp-backward $dtype --check"
        expect_has "ok: 5 of 5 outputs within tolerance" "$OUT" "mlp-backward $dtype check rows"
    done
    run mlp-backward --S 5 --H 8 --I 16 --device reference --dtype f16 --check
    expect_rc 0 "mlp-backward on the reference device"
    expect_has "reference" "$OUT" "reference device in the table"
    expect_has "note: --check with --device reference compares the float64 reference with itself" "$ERR" \
        "--check on the reference device says it checks the oracle against itself"
    expect_has "rounding of the outputs to f16" "$ERR" "the reference self-check note names the dtype"
    run matmul-relu --m 5 --n 4 --k 3 --device reference --check --json
    expect_rc 0 "matmul-relu --device reference --check --json"
    expect_true "reference --check --json keys" json_lines op device dtype shape threads ms gflops rel_err ok
    expect_has "compares the float64 reference with itself" "$ERR" "the self-check note goes to stderr with --json"
    run mlp-forward "${MLP[@]}" --device reference
    expect_rc 0 "mlp-forward on the reference device without --check"
    if [ -z "$ERR" ]; then pass; else fail "reference device without --check wrote to stderr: $ERR"; fi
    run gemm "${MM[@]}" --check
    expect_rc 0 "gemm --check"
    expect_has "ok: 1 of 1 outputs within tolerance" "$OUT" "gemm check row"
    run gemm "${MM[@]}" --dtype bf16 --check --json
    expect_rc 0 "gemm bf16 --check --json"
    expect_has '"op":"gemm","device":"cpu","dtype":"bf16"' "$OUT" "gemm --json op and dtype"
    run matmul-relu --m=7 --n=5 --k=3 --check
    expect_rc 0 "--name=value spelling"
    expect_has "m=7 n=5 k=3" "$OUT" "--name=value sets the shape"
}

test_json() {
    run matmul-relu "${MM[@]}" --check --json
    expect_rc 0 "matmul-relu --json --check"
    expect_true "matmul-relu --json keys" json_lines op device dtype shape threads ms gflops rel_err ok
    expect_has '"shape":{"m":33,"n":17,"k":65}' "$OUT" "matmul-relu --json shape"
    expect_has '"ok":true' "$OUT" "matmul-relu --json ok"
    if [ -z "$ERR" ]; then pass; else fail "--json wrote to stderr: $ERR"; fi
    run mlp-backward "${MLP[@]}" --json
    expect_rc 0 "mlp-backward --json"
    expect_true "mlp-backward --json keys (no check)" json_lines op device dtype shape threads ms gflops
    expect_has '"shape":{"S":13,"H":24,"I":40}' "$OUT" "mlp-backward --json shape"
    run mlp-forward "${MLP[@]}" --json --check --dtype bf16
    expect_true "mlp-forward --json --check keys" json_lines op device dtype shape threads ms gflops rel_err ok
    # the exact GELU: checked runs pass, and its gelu_output differs from the tanh GELU's
    run mlp-forward "${MLP[@]}" --gelu erf --check --outputs "$TMP/gelu_erf"
    expect_rc 0 "mlp-forward --gelu erf --check"
    run mlp-backward "${MLP[@]}" --gelu=erf --check --dtype f16
    expect_rc 0 "mlp-backward --gelu erf --check"
    run mlp-forward "${MLP[@]}" --gelu tanh --outputs "$TMP/gelu_tanh"
    if cmp -s "$TMP/gelu_erf/gelu_output.npy" "$TMP/gelu_tanh/gelu_output.npy"; then
        fail "mlp-forward --gelu erf wrote the same gelu_output as --gelu tanh"
    else pass; fi
    run mlp-forward "${MLP[@]}" --json --check --dtype bf16
    expect_true "mlp-forward --json --check keys" json_lines op device dtype shape threads ms gflops rel_err ok
    expect_has '"gelu_output":' "$OUT" "mlp-forward rel_err names gelu_output"
    run bench "${MM[@]}" "${MLP[@]}" --repeat 2 --warmup 1 --json
    expect_rc 0 "bench --json"
    expect_true "bench --json keys" json_lines $BENCH_KEYS
    local lines
    lines=$(wc -l <"$TMP/out")
    if [ "$lines" -eq 4 ]; then pass; else fail "bench --op all printed $lines JSON lines, expected 4"; fi
    run explain --json
    expect_rc 0 "explain --json"
    expect_true "explain --json keys" json_lines op device dtype workspace_dtype shape kernels bytes_total savings \
        bytes_saved
    expect_has '"name":"K1","kind":"fused_gemm"' "$OUT" "explain --json K1"
}

# ---- files ----------------------------------------------------------------------------------------

test_round_trips() {
    local d1=$TMP/d1 d2=$TMP/d2 d3=$TMP/d3 d4=$TMP/d4 f
    run matmul-relu "${MM[@]}" --outputs "$d1"
    expect_rc 0 "matmul-relu --outputs"
    for f in a b c; do expect_true "matmul-relu wrote $f.npy" test -s "$d1/$f.npy"; done
    run matmul-relu --inputs "$d1" --outputs "$d2" --check --json
    expect_rc 0 "matmul-relu --inputs (its own outputs)"
    expect_has '"shape":{"m":33,"n":17,"k":65}' "$OUT" "shape read from the files"
    expect_true "rerun from the files gives the same c.npy" cmp -s "$d1/c.npy" "$d2/c.npy"
    expect_true "--inputs does not rewrite the inputs" test ! -e "$d2/a.npy"
    run matmul-relu --m 17 --n 9 --k 5 --outputs "$d3"
    mkdir -p "$d4"
    cp "$d1/c.npy" "$d4/a.npy"
    cp "$d3/c.npy" "$d4/b.npy"
    run matmul-relu --inputs "$d4" --check --json
    expect_rc 0 "outputs of two runs as the inputs of a third"
    expect_has '"shape":{"m":33,"n":9,"k":17}' "$OUT" "chained run shape"
    run matmul-relu --inputs "$d4" --m 33 --k 17
    expect_rc 0 "--inputs with agreeing shape options"
    expect_usage "--inputs with a disagreeing shape option" matmul-relu "--m 34 does not match" \
        matmul-relu --inputs "$d4" --m 34

    local fw=$TMP/fw
    run mlp-forward "${MLP[@]}" --dtype f16 --outputs "$fw"
    expect_rc 0 "mlp-forward --outputs"
    for f in hidden_state fc1_weight fc1_bias fc2_weight fc2_bias fc1_output gelu_output output; do
        expect_true "mlp-forward wrote $f.npy" test -s "$fw/$f.npy"
    done
    cp "$fw/output.npy" "$fw/grad_output.npy"
    run mlp-backward --inputs "$fw" --check --json
    expect_rc 0 "mlp-backward on mlp-forward's files"
    expect_has '"shape":{"S":13,"H":24,"I":40}' "$OUT" "mlp-backward shape from the files"
    expect_has '"ok":true' "$OUT" "mlp-backward on files checks"
    run mlp-backward --inputs "$fw" --dtype bf16 --check --outputs "$TMP/bw"
    expect_rc 0 "mlp-backward converts f2 files to bf16"
    expect_true "bf16 outputs written as <f4" grep -q "'descr': '<f4'" "$TMP/bw/grad_fc1_weight.npy"

    test_dtype_round_trip matmul-relu f32 c "${MM[@]}"
    test_dtype_round_trip mlp-forward f16 "fc1_output gelu_output output" "${MLP[@]}"
    local grads="grad_hidden_state grad_fc1_weight grad_fc1_bias grad_fc2_weight grad_fc2_bias"
    test_dtype_round_trip mlp-backward f16 "$grads" "${MLP[@]}"

    run mlp-backward "${MLP[@]}" --seed 5 --outputs "$TMP/s5a"
    run mlp-backward "${MLP[@]}" --seed 5 --outputs "$TMP/s5b"
    run mlp-backward "${MLP[@]}" --seed 6 --outputs "$TMP/s6"
    expect_true "same seed, same inputs" cmp -s "$TMP/s5a/gelu_output.npy" "$TMP/s5b/gelu_output.npy"
    expect_true "other seed, other inputs" test -s "$TMP/s6/grad_output.npy"
    expect_true "other seed, other inputs" bash -c "! cmp -s '$TMP/s5a/grad_output.npy' '$TMP/s6/grad_output.npy'"
}

# test_dtype_round_trip OP DTYPE "OUTPUTS" SHAPE...: OP run in DTYPE (not OP's default) with
# --outputs, then rerun with --inputs and no --dtype, runs in DTYPE again (taken from the files)
# and writes byte-identical OUTPUTS.
test_dtype_round_trip() {
    local op=$1 dtype=$2 outputs=$3 first=$TMP/rt_$1_$2 second=$TMP/rt_$1_$2_again f
    shift 3
    run "$op" "$@" --dtype "$dtype" --threads 2 --outputs "$first"
    expect_rc 0 "$op --dtype $dtype --outputs"
    run "$op" --inputs "$first" --threads 2 --outputs "$second" --check --json
    expect_rc 0 "$op --inputs of a $dtype run"
    expect_has "\"dtype\":\"$dtype\"" "$OUT" "$op --inputs takes the dtype $dtype from the files"
    for f in $outputs; do
        expect_true "$op $dtype rerun from the files gives the same $f.npy" cmp -s "$first/$f.npy" "$second/$f.npy"
    done
}

test_handmade_files() {
    local fo=$TMP/fortran
    mkdir -p "$fo"
    # a = [[1, -2, 3], [4, 5, 6]] stored column by column; b = [[1, 0], [0, 1], [0, 0]] as '<f8'.
    write_npy "$fo/a.npy" '<f4' True '(2, 3)' \
        '\x00\x00\x80\x3f\x00\x00\x80\x40\x00\x00\x00\xc0\x00\x00\xa0\x40\x00\x00\x40\x40\x00\x00\xc0\x40'
    write_npy "$fo/b.npy" '<f8' False '(3, 2)' \
        '\0\0\0\0\0\0\xf0\x3f\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\xf0\x3f\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'
    run matmul-relu --inputs "$fo" --dtype f32 --check --outputs "$TMP/fout"
    expect_rc 0 "Fortran-order '<f4' and C-order '<f8' inputs"
    local values
    values=$(tail -c 16 "$TMP/fout/c.npy" | od -An -tf4 | tr -s ' ' | sed 's/^ //;s/ $//')
    if [ "$values" = "1 0 4 5" ]; then pass; else fail "relu(a @ b) from hand-made files: got '$values'"; fi
    run matmul-relu --inputs "$fo" --dtype bf16 --check
    expect_rc 0 "Fortran-order file converted to bf16"
    expect_usage "'<f8' file without --dtype" matmul-relu "$fo/b.npy: a '<f8' (float64) file needs --dtype" \
        matmul-relu --inputs "$fo"

    # 300 * 300 overflows f16: the check must fail with exit 3 and null in the JSON.
    local ov=$TMP/overflow
    mkdir -p "$ov"
    write_npy "$ov/a.npy" '<f4' False '(1, 1)' '\x00\x00\x96\x43'
    cp "$ov/a.npy" "$ov/b.npy"
    run matmul-relu --inputs "$ov" --dtype f16 --check --json
    expect_rc 3 "out-of-tolerance output"
    expect_has '"rel_err":{"c":null},"ok":false' "$OUT" "non-finite rel_err written as null"
    expect_true "failing check JSON parses" json_lines op device dtype shape threads ms gflops rel_err ok
    expect_has "check failed" "$ERR" "check failure message"
    run matmul-relu --inputs "$ov" --dtype f16 --check
    expect_rc 3 "out-of-tolerance output (table)"
    expect_has "FAIL" "$OUT" "FAIL row"
}

test_bad_files() {
    local good=$TMP/good bad=$TMP/bad size
    run matmul-relu --m 6 --n 5 --k 4 --outputs "$good"
    mkdir -p "$bad"
    cp "$good/b.npy" "$bad/b.npy"
    head -c 60 "$good/a.npy" >"$bad/a.npy"
    expect_usage "truncated header" matmul-relu "a.npy" matmul-relu --inputs "$bad"
    size=$(wc -c <"$good/a.npy")
    head -c $((size - 6)) "$good/a.npy" >"$bad/a.npy"
    expect_usage "truncated data" matmul-relu "a.npy" matmul-relu --inputs "$bad"
    printf 'NOTNUMPY-this-is-not-an-npy-file-at-all\n' >"$bad/a.npy"
    expect_usage "wrong magic" matmul-relu "a.npy" matmul-relu --inputs "$bad"
    rm -f "$bad/a.npy"
    expect_usage "missing file" matmul-relu "a.npy" matmul-relu --inputs "$bad"
    cp "$good/a.npy" "$bad/a.npy"
    cp "$good/c.npy" "$bad/b.npy"
    expect_usage "mismatched shape" matmul-relu "b.npy: shape (6, 5) does not match a.npy (6, 4): expected (4, n)" \
        matmul-relu --inputs "$bad"
    local fw=$TMP/fw_bad
    run mlp-forward --S 5 --H 8 --I 16 --outputs "$fw"
    cp "$fw/fc2_bias.npy" "$fw/fc1_bias.npy"
    expect_usage "mismatched vector" mlp-forward "fc1_bias.npy: shape (8,) does not match fc1_weight.npy (16, 8)" \
        mlp-forward --inputs "$fw"
    cp "$fw/hidden_state.npy" "$fw/fc1_bias.npy"
    expect_usage "matrix where a vector belongs" mlp-forward "fc1_bias.npy: expected 1 dimension" \
        mlp-forward --inputs "$fw"
    local mixed=$TMP/mixed
    run mlp-forward --S 5 --H 8 --I 16 --dtype f16 --outputs "$mixed"
    cp "$fw/fc2_weight.npy" "$mixed/fc2_weight.npy"
    expect_usage "files of mixed dtypes" mlp-forward \
        "$mixed/fc2_weight.npy: dtype '<f4' (f32) does not match hidden_state.npy '<f2' (f16)" \
        mlp-forward --inputs "$mixed"
    run mlp-forward --inputs "$mixed" --dtype f32 --check
    expect_rc 0 "files of mixed dtypes with --dtype"
    : >"$TMP/not_a_dir"
    run matmul-relu --m 4 --n 4 --k 4 --outputs "$TMP/not_a_dir/sub"
    expect_rc 1 "unwritable --outputs is a runtime failure"
    expect_has "not_a_dir/sub" "$ERR" "unwritable --outputs names the directory"
}

# ---- a failed library call -------------------------------------------------------------------------

# glibc gives each new thread a stack as large as the stack limit: with a 1 TiB limit, 1023
# worker stacks do not fit in a 47-bit address space, so cvf_context_create cannot start its
# workers and fails (out of memory) after a few hundred threads at most. Other C libraries (musl)
# ignore the limit for threads, so the test runs on glibc only.
test_library_failure() {
    if ! ldd --version 2>&1 | grep -qiE 'glibc|gnu libc'; then
        echo "test_cli: not glibc; the failed library call is not tested" >&2
        return
    fi
    if ! (ulimit -s 1073741824) 2>/dev/null; then
        echo "test_cli: cannot raise the stack limit; the failed library call is not tested" >&2
        return
    fi
    local json
    for json in "" --json; do
        run_limited matmul-relu --m 4 --n 4 --k 4 --threads 1024 $json
        expect_rc 1 "cvf_context_create failing ${json:-(table)}"
        expect_has "cvfuse matmul-relu: cvf_context_create failed: out of memory" "$ERR" \
            "a failed library call prints its status ${json:-(table)}"
        if [ -z "$OUT" ]; then pass; else fail "a failed library call wrote to stdout: $OUT"; fi
    done
}

# run_limited ARGS...: run with the stack limit of test_library_failure.
run_limited() {
    (
        ulimit -s 1073741824
        run "$@"
        printf '%s' "$RC" >"$TMP/rc"
    )
    RC=$(cat "$TMP/rc")
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# ---- bench and explain ----------------------------------------------------------------------------

# bench_json_check WANT: checks the bench JSON objects of the last stdout with python3 (skipped
# without it): WANT "openblas" or "none" is the baseline of every object; ratio = ms / baseline_ms
# and a baseline_check within the dtype's tolerance with a baseline (the outputs may differ by one
# rounding to f16 / bf16), nulls without; peak_fraction = gflops / peak_gflops; 3 timed runs after
# 1 warm-up run.
bench_json_check() {
    [ "$HAVE_PYTHON" = 1 ] || return 0
    python3 - "$TMP/out" "$1" <<'EOF'
import json, sys
path, want = sys.argv[1], sys.argv[2]
tolerance = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}
def close(a, b):
    return abs(a - b) <= 1e-3 * abs(b)
for line in open(path).read().splitlines():
    o = json.loads(line)
    if o["baseline"] != want:
        sys.exit("baseline %r, expected %r: %s" % (o["baseline"], want, line))
    if want == "none":
        if any(o[k] is not None for k in ("baseline_ms", "baseline_min_ms", "ratio", "baseline_check")):
            sys.exit("baseline none with numbers: " + line)
    else:
        if not (o["baseline_ms"] > 0 and o["baseline_min_ms"] <= o["baseline_ms"]):
            sys.exit("bad baseline times: " + line)
        if not close(o["ratio"], o["ms"] / o["baseline_ms"]):
            sys.exit("ratio is not ms / baseline_ms: " + line)
        if not (0 <= o["baseline_check"] <= tolerance[o["dtype"]]):
            sys.exit("baseline outputs do not match ours: " + line)
    if o["peak_gflops"] is not None:
        if not (o["peak_gflops"] > 0 and close(o["peak_fraction"], o["gflops"] / o["peak_gflops"])):
            sys.exit("bad peak: " + line)
    if not (o["min_ms"] <= o["ms"] and o["repeat"] == 3 and o["warmup"] == 1):
        sys.exit("bad times or counts: " + line)
EOF
}

test_bench_explain() {
    run bench --op matmul-relu --m 16 --n 16 --k 16 --repeat 3 --warmup 1
    expect_rc 0 "bench --op matmul-relu"
    expect_has "median ms" "$OUT" "bench table header"
    expect_has "m=16 n=16 k=16" "$OUT" "bench row"
    expect_has "base ms" "$OUT" "bench table has the baseline column"
    expect_has "peak on " "$OUT" "bench table states the peak"
    local baseline=none
    case "$OUT" in
    *"baseline: openblas ("*) baseline=openblas ;;
    *) expect_has "baseline: none (OpenBLAS not found at build time)" "$OUT" "bench says why there is no baseline" ;;
    esac
    echo "test_cli: bench baseline: $baseline" >&2

    # gemm and matmul-relu in every dtype and the MLP ops in f32: the OpenBLAS baseline (if built)
    run bench --op gemm --m 33 --n 17 --k 65 --repeat 3 --warmup 1 --threads 2 --json
    expect_rc 0 "bench --op gemm --json"
    expect_true "bench gemm JSON keys" json_lines $BENCH_KEYS
    expect_true "bench gemm baseline fields" bench_json_check "$baseline"
    expect_has '"threads":2' "$OUT" "bench --threads 2"
    local dtype
    for dtype in f16 bf16; do
        run bench --op matmul-relu --m 37 --n 19 --k 23 --dtype "$dtype" --repeat 3 --warmup 1 --json
        expect_rc 0 "bench matmul-relu $dtype"
        expect_true "bench matmul-relu $dtype baseline fields" bench_json_check "$baseline"
    done
    run bench --op mlp-backward "${MLP[@]}" --repeat 3 --warmup 1 --json
    expect_rc 0 "bench mlp-backward"
    expect_true "bench mlp-backward baseline fields" bench_json_check "$baseline"
    run bench --op mlp-forward "${MLP[@]}" --repeat 3 --warmup 1 --json
    expect_rc 0 "bench mlp-forward"
    expect_true "bench mlp-forward baseline fields" bench_json_check "$baseline"
    # the MLP baselines are f32 only: "none" in f16 whatever the build
    run bench --op mlp-forward "${MLP[@]}" --dtype f16 --repeat 3 --warmup 1 --json
    expect_rc 0 "bench mlp-forward f16"
    expect_true "bench mlp-forward f16 has no baseline" bench_json_check none
    expect_has '"baseline":"none","baseline_ms":null' "$OUT" "no baseline: nulls in the JSON"

    # --json-out: the table on stdout, the JSON objects in the file
    run bench --op gemm --m 8 --n 8 --k 8 --repeat 3 --warmup 1 --json-out "$TMP/bench.jsonl"
    expect_rc 0 "bench --json-out"
    expect_has "median ms" "$OUT" "bench --json-out keeps the table"
    cp "$TMP/bench.jsonl" "$TMP/out"
    expect_true "bench --json-out file keys" json_lines $BENCH_KEYS
    run bench --op gemm --m 8 --n 8 --k 8 --json-out "$TMP/no_such_dir/b.jsonl"
    expect_rc 1 "bench --json-out into a missing directory"

    run bench --device cuda --op gemm --m 8 --n 8 --k 8
    if [ "$RC" -eq 2 ]; then
        expect_has "cvfuse bench: built without CUDA" "$ERR" "bench --device cuda without CUDA"
    fi
    run bench --op gemm --m 8 --n 8 --k 8 --device reference --repeat 3 --warmup 1 --json
    expect_rc 0 "bench on the reference device"
    expect_has '"device":"reference"' "$OUT" "bench --device reference"
    run explain
    expect_rc 0 "explain"
    expect_has "K1" "$OUT" "explain mentions K1"
    expect_has "fused" "$OUT" "explain mentions fusion"
    expect_has "S=197 H=768 I=3072" "$OUT" "explain default shape"
    run explain --S 64 --H 32 --I 128 --dtype bf16
    expect_rc 0 "explain with a shape"
    expect_has "S=64 H=32 I=128, bf16" "$OUT" "explain shape and dtype"
    run explain --json
    expect_true "explain --json kernel keys (cpu: no schedule)" explain_kernels_check cpu
    test_explain_cuda
}

# explain_kernels_check DEVICE: the kernels of the explain JSON object in the last stdout have
# exactly the documented keys (python3; skipped without it). DEVICE cpu: no schedule (engine "",
# zeros); cuda: 5 kernels, every GEMM with an engine, tiles, units = tiles x splits, splits 1 or 2,
# and every kernel on stream 0, 1 or 2.
explain_kernels_check() {
    [ "$HAVE_PYTHON" = 1 ] || return 0
    python3 - "$TMP/out" "$1" <<'EOF'
import json, sys
path, device = sys.argv[1], sys.argv[2]
o = json.loads(open(path).read())
keys = sorted("name kind computes fused m n k flops bytes engine tile_m tile_n tile_k splits units stream choice candidates".split())
if o["device"] != device:
    sys.exit("device %r, expected %r" % (o["device"], device))
for k in o["kernels"]:
    if sorted(k) != keys:
        sys.exit("kernel keys %s, expected %s" % (sorted(k), keys))
    schedule = (k["engine"], k["tile_m"], k["tile_n"], k["tile_k"], k["splits"], k["units"], k["stream"])
    if device == "cpu":
        if schedule != ("", 0, 0, 0, 0, 0, 0) or k["choice"] != "" or k["candidates"] != []:
            sys.exit("a cpu kernel with a schedule: %s" % k)
        continue
    if not 0 <= k["stream"] <= 2:
        sys.exit("stream out of 0..2: %s" % k)
    if k["kind"] == "reduction":
        continue
    if not k["choice"] or not all(c["engine"] for c in k["candidates"]):
        sys.exit("a GEMM without its engine choice: %s" % k)
    if k["engine"].startswith("cublaslt") and k["tile_m"] == 0 and k["units"] == 0:
        continue  # the vendor's kernel: no tiles of ours
    tiles = -(-k["m"] // max(k["tile_m"], 1)) * -(-k["n"] // max(k["tile_n"], 1))
    if not (k["engine"] and k["tile_m"] > 0 and k["tile_n"] > 0 and k["tile_k"] > 0 and k["splits"] in (1, 2)
            and k["units"] == tiles * k["splits"]):
        sys.exit("a GEMM without a consistent schedule: %s" % k)
if device == "cuda" and len(o["kernels"]) != 5:
    sys.exit("%d kernels, expected 5" % len(o["kernels"]))
EOF
}

# explain --device cuda: with a GPU, the CUDA plan with its schedule ("runs on:" lines, the JSON
# fields); without one, or in a build without CUDA, exit 1 with the reason on one line of stderr and
# nothing on stdout (CVF_DEBUG=1 adds the library's own line).
test_explain_cuda() {
    run explain --device cuda --S 12608 --dtype bf16
    if [ "$RC" -eq 0 ]; then
        echo "test_cli: explain --device cuda: a GPU is present, checking the CUDA plan" >&2
        expect_has "on the cuda device: S=12608 H=768 I=3072, bf16" "$OUT" "explain --device cuda: device and shape"
        expect_has "runs on: " "$OUT" "explain --device cuda: the schedule lines"
        run explain --device cuda --S 12608 --dtype bf16 --json
        expect_rc 0 "explain --device cuda --json"
        expect_has '"device":"cuda"' "$OUT" "explain --device cuda --json device"
        expect_true "explain --device cuda --json schedule" explain_kernels_check cuda
        return
    fi
    echo "test_cli: explain --device cuda: no usable GPU, checking the failure" >&2
    expect_rc 1 "explain --device cuda without a usable GPU is a runtime failure"
    expect_has "cvfuse explain: --device cuda: cvf_context_create failed: unsupported: " "$ERR" \
        "explain --device cuda: the failed call and its status"
    case "$ERR" in
    *"built without CUDA"* | *"CUDA device"*) pass ;;
    *) fail "explain --device cuda: no reason named: $ERR" ;;
    esac
    local lines
    lines=$(printf '%s\n' "$ERR" | wc -l)
    if [ "$lines" -eq 1 ]; then pass; else fail "explain --device cuda: the failure is not one line: $ERR"; fi
    if [ -z "$OUT" ]; then pass; else fail "explain --device cuda failing wrote to stdout: $OUT"; fi
    run explain --device cuda --json
    expect_rc 1 "explain --device cuda --json without a usable GPU"
    if [ -z "$OUT" ]; then pass; else fail "explain --device cuda --json failing wrote to stdout: $OUT"; fi
    CVF_DEBUG=1 run explain --device cuda
    expect_rc 1 "explain --device cuda under CVF_DEBUG"
    expect_has "cvf_context_create: cuda device 0: " "$ERR" "CVF_DEBUG=1: the library says why"
}

# ---- the op subcommands on --device cuda ----------------------------------------------------------

# --device cuda on gemm, matmul-relu, mlp-forward and mlp-backward. With a GPU (`explain --device
# cuda` exits 0): small checked runs through device copies, also of a Fortran-order (strided) file
# of test_handmade_files and with --outputs read back on the cpu. Without one: exit 1, nothing on
# stdout, one line on stderr with the failed cvf_context_create and the same reason explain gives
# ("built without CUDA" in a build without CUDA).
test_op_cuda() {
    run explain --device cuda --S 64 --H 32 --I 128
    if [ "$RC" -eq 0 ]; then
        echo "test_cli: op subcommands --device cuda: a GPU is present, running checked runs on it" >&2
        test_op_cuda_runs
        return
    fi
    echo "test_cli: op subcommands --device cuda: SKIPPED the GPU runs (explain --device cuda exits $RC:" \
        "no usable GPU); checking the failure" >&2
    local reason=${ERR#cvfuse explain: } built_without=0 op lines
    case "$reason" in *"built without CUDA"*) built_without=1 ;; esac
    run bench --device cuda --op gemm --m 8 --n 8 --k 8
    if [ "$RC" -eq 2 ] && [ "$built_without" -eq 0 ]; then
        fail "a build without CUDA (bench says so) but explain's reason is not 'built without CUDA': $reason"
    fi
    for op in gemm matmul-relu mlp-forward mlp-backward; do
        case "$op" in
        gemm | matmul-relu) run "$op" "${MM[@]}" --device cuda --check ;;
        *) run "$op" "${MLP[@]}" --device cuda --check ;;
        esac
        expect_rc 1 "$op --device cuda without a usable GPU is a runtime failure"
        expect_has "cvfuse $op: --device cuda: cvf_context_create failed: unsupported: " "$ERR" \
            "$op --device cuda: the failed call and its status"
        if [ "${ERR#cvfuse "$op": }" = "$reason" ]; then
            pass
        else
            fail "$op --device cuda: the reason differs from explain's: '$ERR' vs '$reason'"
        fi
        if [ "$built_without" -eq 1 ]; then
            expect_has "built without CUDA" "$ERR" "$op --device cuda in a build without CUDA"
        else
            expect_has "CUDA device" "$ERR" "$op --device cuda: the library's reason"
        fi
        lines=$(printf '%s\n' "$ERR" | wc -l)
        if [ "$lines" -eq 1 ]; then pass; else fail "$op --device cuda: the failure is not one line: $ERR"; fi
        if [ -z "$OUT" ]; then pass; else fail "$op --device cuda failing wrote to stdout: $OUT"; fi
    done
    run mlp-forward "${MLP[@]}" --device cuda --json --outputs "$TMP/cuda_none"
    expect_rc 1 "mlp-forward --device cuda --json --outputs without a usable GPU"
    expect_true "nothing written without a GPU" test ! -e "$TMP/cuda_none"
}

# The checked runs of test_op_cuda on a GPU.
test_op_cuda_runs() {
    run matmul-relu "${MM[@]}" --device cuda --check
    expect_rc 0 "matmul-relu --device cuda --check"
    expect_has "cuda" "$OUT" "matmul-relu --device cuda: the table names the device"
    run mlp-backward "${MLP[@]}" --device cuda --check --dtype bf16
    expect_rc 0 "mlp-backward --device cuda --check --dtype bf16"
    run mlp-forward "${MLP[@]}" --device cuda --check
    expect_rc 0 "mlp-forward --device cuda --check"
    local dtype
    for dtype in f16 bf16 f32; do
        run gemm "${MM[@]}" --device cuda --dtype "$dtype" --check --json
        expect_rc 0 "gemm --device cuda --dtype $dtype --check"
        expect_has '"device":"cuda"' "$OUT" "gemm --device cuda --json device"
        expect_has '"ok":true' "$OUT" "gemm --device cuda --dtype $dtype within tolerance"
    done
    run mlp-backward "${MLP[@]}" --device cuda --check --dtype f16 --json
    expect_rc 0 "mlp-backward --device cuda --check --dtype f16"
    expect_true "mlp-backward --device cuda --json keys" json_lines op device dtype shape threads ms gflops rel_err ok
    run matmul-relu --inputs "$TMP/fortran" --dtype f32 --device cuda --check --outputs "$TMP/cuda_fout"
    expect_rc 0 "matmul-relu --device cuda on a Fortran-order file (a strided view)"
    expect_true "the strided run on the GPU gives the cpu's c.npy" cmp -s "$TMP/fout/c.npy" "$TMP/cuda_fout/c.npy"
    run mlp-forward "${MLP[@]}" --device cuda --dtype bf16 --outputs "$TMP/cuda_fw"
    expect_rc 0 "mlp-forward --device cuda --outputs"
    run mlp-forward --inputs "$TMP/cuda_fw" --dtype bf16 --outputs "$TMP/cuda_fw_cpu" --check
    expect_rc 0 "the GPU's inputs rerun on the cpu"
    cp "$TMP/cuda_fw/output.npy" "$TMP/cuda_fw/grad_output.npy"
    run mlp-backward --inputs "$TMP/cuda_fw" --dtype bf16 --device cuda --check
    expect_rc 0 "mlp-backward --device cuda on the GPU forward's files"
}

test_help
test_usage_errors
test_checked_runs
test_json
test_round_trips
test_handmade_files
test_bad_files
test_library_failure
test_bench_explain
test_op_cuda

echo "test_cli: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]

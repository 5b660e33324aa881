# Sourced by the device scripts (run_device.sh, sm90_probe.sh): the log helpers. LOG names the
# log file.

# say TEXT...: prints the text and appends it to the log.
say() { echo "$*" | tee -a "$LOG"; }

# step NAME SECONDS COMMAND...: runs the command under timeout, output to the log, and says how it ended.
step() {
  local name=$1 limit=$2 start rc
  shift 2
  say "== $name (limit ${limit}s): $*"
  start=$SECONDS
  timeout "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  say "-- $name: rc=$rc, $((SECONDS - start)) s"
  return $rc
}

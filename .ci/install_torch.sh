#!/usr/bin/env bash
# Usage: install_torch.sh PYTHON PACKAGE...  (from .ci/run: PyTorch, torchvision and timm)
# Installs PACKAGE... and what they depend on into PYTHON's environment with the least disk at any
# moment: pip resolves the whole set once (--dry-run --report), then every resolved package is
# downloaded and installed by its own pip call (pinned to the resolved version, --no-deps), so at
# most one wheel waits in a temporary file beside what is already installed. triton is left out:
# it is 1 GB, and only torch.compile uses it. If any step fails, what this script installed is
# removed again (a half-installed torch would fail the tests at import, where a missing one makes
# them skip), and the exit status is 1.
set -euo pipefail
py="$1"
shift
report="$(mktemp)"
trap 'rm -f "$report"' EXIT

"$py" -m pip install -q --dry-run --report "$report" "$@"
mapfile -t pins < <("$py" -c '
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    meta = item["metadata"]
    if meta["name"].lower() != "triton":
        print(meta["name"] + "==" + meta["version"])
' "$report")
echo "install_torch.sh: ${#pins[@]} packages, one pip call each (triton left out)"

installed=()
for pin in "${pins[@]}"; do
    if ! "$py" -m pip install -q --no-deps "$pin"; then
        echo "install_torch.sh: installing $pin failed; removing the ${#installed[@]} packages installed before it"
        [ "${#installed[@]}" -eq 0 ] || "$py" -m pip uninstall -q -y "${installed[@]%%==*}" || true
        exit 1
    fi
    installed+=("$pin")
done

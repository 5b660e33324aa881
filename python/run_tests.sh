#!/usr/bin/env bash
# The Python package's tests, as one ctest test (tests/CMakeLists.txt: test_python). Runs pytest
# on python/tests with the interpreter in $CVF_PYTHON (default: python3 on PATH, e.g. an activated
# virtual environment). Exit 77 (ctest: skipped) when that interpreter cannot import cvfuse and
# pytest: install them first with `pip install ./python pytest` (see the README, "Python").
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${CVF_PYTHON:-python3}"
if ! command -v "$py" > /dev/null 2>&1; then
    echo "SKIPPED: no Python interpreter '$py' (set CVF_PYTHON)"
    exit 77
fi
# from a directory outside python/, so that `import cvfuse` finds the installed package
cd "$here/tests" || exit 1
if ! "$py" -c "import cvfuse, pytest" > /dev/null 2>&1; then
    echo "SKIPPED: '$py' cannot import cvfuse and pytest; install them with: $py -m pip install ./python pytest"
    exit 77
fi
"$py" -c "import cvfuse; print('cvfuse', cvfuse.__version__, 'from', cvfuse.__file__, '(library', cvfuse.version() + ')')"
exec "$py" -m pytest -p no:cacheprovider -q -rs "$here/tests"

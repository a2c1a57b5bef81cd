#!/usr/bin/env bash
# The project's test command: installs the environment when needed, then runs pytest on every core.
# Extra arguments go to pytest, e.g. tools/run_tests.sh -m "not slow" (the fast unit suite).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
  -h|--help)
    cat <<USAGE
Usage: tools/run_tests.sh [pytest arguments]  (installs tools/venv first if needed)
Runs pytest with a worker per core (pytest-xdist, at most 8; a test file's tests stay on one worker, so its
module fixtures are built once), each worker and the tools it starts computing in one thread.
Give -n N (or -n 0: one process, as plain pytest) to choose otherwise.
USAGE
    exit 0 ;;
esac
"$root/tools/install.sh"
python="${VIRTUAL_ENV:-$root/tools/venv}/bin/python"
cd "$root"
export RNNT_TEST_DATA="${RNNT_TEST_DATA:-$root/../shared/data}"

parallel=()
case " $* " in
  *" -n"*|*" --numprocesses"*|*" -p no:xdist "*) ;;  # the caller chose
  *)
    cores=$(nproc)
    [ "$cores" -gt 8 ] && cores=8
    # in collection order, where the slow tests come first (tests/conftest.py), not xdist's largest file first
    [ "$cores" -gt 1 ] && parallel=(-n "$cores" --dist loadfile --no-loadscope-reorder) ;;
esac
exec "$python" -m pytest "${parallel[@]}" "$@"

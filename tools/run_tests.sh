#!/usr/bin/env bash
# The project's test command: installs the environment when needed, then runs pytest.
# Extra arguments go to pytest, e.g. tools/run_tests.sh -m "not slow" (the fast unit suite).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
  -h|--help) echo "Usage: tools/run_tests.sh [pytest arguments]  (installs tools/venv first if needed)"; exit 0 ;;
esac
"$root/tools/install.sh"
python="${VIRTUAL_ENV:-$root/tools/venv}/bin/python"
cd "$root"
export RNNT_TEST_DATA="${RNNT_TEST_DATA:-$root/../shared/data}"
exec "$python" -m pytest "$@"

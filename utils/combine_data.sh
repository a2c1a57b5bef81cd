#!/usr/bin/env bash
# Combine data dirs into one; duplicate keys are an error (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.combine import main as m; sys.argv[0] = 'combine_data.sh'; sys.exit(m(sys.argv[1:]))" "$@"

#!/usr/bin/env bash
# Copy part of a data dir: first/last/random/spread N, or a key list (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.subset import main
sys.argv[0] = 'subset_data_dir.sh'; sys.exit(main(sys.argv[1:]))" "$@"

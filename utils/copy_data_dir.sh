#!/usr/bin/env bash
# Copy a data dir, optionally prefixing or suffixing utterance and speaker ids (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.copy_dir import main
sys.argv[0] = 'copy_data_dir.sh'; sys.exit(main(sys.argv[1:]))" "$@"

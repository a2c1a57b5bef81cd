#!/usr/bin/env bash
# Check a Kaldi data dir with Kaldi's rules (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.validate import main
sys.argv[0] = 'validate_data_dir.sh'; sys.exit(main(sys.argv[1:]))" "$@"

#!/usr/bin/env bash
# Check a Kaldi data dir with Kaldi's rules (see --help).
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)  # the repo: the tool runs without path.sh, as Kaldi's
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec python3 -c "import sys; from rnnt.datadir.validate import main
from rnnt.cli import exit_from; sys.argv[0] = 'validate_data_dir.sh'; exit_from(main, sys.argv[1:])" "$@"

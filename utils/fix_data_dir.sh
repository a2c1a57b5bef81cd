#!/usr/bin/env bash
# Repair a Kaldi data dir in place: sort, intersect, rebuild spk2utt (see --help).
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)  # the repo: the tool runs without path.sh, as Kaldi's
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec python3 -c "import sys; from rnnt.datadir.fix import main
from rnnt.cli import exit_from; sys.argv[0] = 'fix_data_dir.sh'; exit_from(main, sys.argv[1:])" "$@"

#!/usr/bin/env bash
# Combine data dirs into one; an utterance in two, or a recording of two files, is an error (see --help).
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)  # the repo: the tool runs without path.sh, as Kaldi's
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec python3 -c "import sys; from rnnt.datadir.combine import main
from rnnt.cli import exit_from; sys.argv[0] = 'combine_data.sh'; exit_from(main, sys.argv[1:])" "$@"

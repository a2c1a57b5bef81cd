#!/usr/bin/env bash
# Write a data dir's utt2dur from its segments or recordings, as Kaldi's utils/data/get_utt2dur.sh (see --help).
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)  # the repo: the tool runs without path.sh, as Kaldi's
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec python3 -c "import sys; from rnnt.datadir.durations import main
from rnnt.cli import exit_from; sys.argv[0] = 'get_utt2dur.sh'; exit_from(main, sys.argv[1:])" "$@"

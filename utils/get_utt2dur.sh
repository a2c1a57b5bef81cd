#!/usr/bin/env bash
# Write a data dir's utt2dur from its segments or recordings, as Kaldi's utils/data/get_utt2dur.sh (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.durations import main
sys.argv[0] = 'get_utt2dur.sh'; sys.exit(main(sys.argv[1:]))" "$@"

#!/usr/bin/env bash
# Repair a Kaldi data dir in place: sort, intersect, rebuild spk2utt (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.fix import main as m; sys.argv[0] = 'fix_data_dir.sh'; sys.exit(m(sys.argv[1:]))" "$@"

#!/usr/bin/env bash
# Repair a Kaldi data dir in place: sort, intersect, rebuild spk2utt (see --help).
set -euo pipefail
exec python3 -c "import sys; from rnnt.datadir.fix import main
sys.argv[0] = 'fix_data_dir.sh'; sys.exit(main(sys.argv[1:]))" "$@"

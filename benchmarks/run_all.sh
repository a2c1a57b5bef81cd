#!/usr/bin/env bash
# Runs the CPU benchmarks in turn and writes their tables to benchmarks/RESULTS.generated.md (and stdout):
# RESULTS.md is kept by hand (the GPU runs, DDP scaling, notes), its tables copied from such a file.
# Run it on an otherwise idle machine: timings are whole-process and the machine's two cores are shared.
set -euo pipefail
time_to_accuracy=false
case "${1:-}" in
  -h|--help) echo "Usage: benchmarks/run_all.sh [--time-to-accuracy]"
             echo "  (builds benchmarks/venv-torchaudio first if missing; --time-to-accuracy adds the AN4 trainings"
             echo "  of benchmarks/time_to_accuracy.py, about 40 minutes)"; exit 0 ;;
  --time-to-accuracy) time_to_accuracy=true ;;
  "") ;;
  *) echo "run_all.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. ./path.sh
# torchaudio is the loss benchmark's peer; offline (about 7 GB from PyPI) that row is left out
benchmarks/make_torchaudio_venv.sh || echo "run_all.sh: no torchaudio venv; the loss table goes without it" >&2
out=benchmarks/RESULTS.generated.md
{
  echo "# Benchmark results"
  echo
  echo "$(python benchmarks/machine.py), $(free -g | awk '/Mem:/ {print $2}') GB."  # each table says it again
  for bench in loss lattice shards pipeline train_step decode search_growth dropout; do
    echo
    echo "## $bench"
    echo
    python "benchmarks/$bench.py"
  done
  if [ -f egs/an4/exp/deploy/config.yaml ]; then  # needs egs/an4's deployable model (docs/deploy.md)
    echo
    echo "## deploy (egs/an4 exp/deploy, test set, in sherpa-onnx)"
    echo
    python benchmarks/deploy.py egs/an4/exp/deploy egs/an4/data/test/data.list
  fi
  if $time_to_accuracy; then
    echo
    echo "## time_to_accuracy (egs/an4)"
    echo
    tuned=egs/an4/exp/tune_time_to_accuracy/best.yaml  # the search for minutes to a WER (docs/training.md)
    python benchmarks/time_to_accuracy.py $([ -f $tuned ] && echo --tuned $tuned)
  fi
} | tee "$out"
echo "run_all.sh: wrote $out"

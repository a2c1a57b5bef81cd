#!/usr/bin/env bash
# One call's worth of GPU checks on a lent CUDA machine (see benchmarks/README.md), most needed first, each
# part under its own time limit (under 10 minutes in all): the fused loss's kernels' tests on CUDA; the loss
# benchmark against torchaudio at the three shapes (each row printed as it is measured: a part cut by its limit
# keeps the rows before); the other loss tests; a loss step's launches against its device's busy time; the tiny
# model's training step with the full and the fused loss; the fused loss's time and tensor peak at B8 by block
# size (the 5% memory goal against the 1.3x time goal); the lattice's forward-backward alone, PyTorch's two
# schedules and the Triton kernels. The parts' limits add up to 565 s, under one call of 10 minutes: with the
# machine's start (1-2 minutes of the session's 15) there is no room for a second whole run, so the limits are
# those the parts were measured to need on an H200 (2026-11-28: the loss benchmark's largest shape was cut at
# 150 s and ended within 220 s), not cut to leave room for one.
# benchmarks/row_kernels.py and joint_kernels.py --device cuda (the Triton kernels at several launch shapes)
# run alone.
# Uses the machine's python3 (its own torch, torchaudio and Triton); writes its logs under $OUT when set,
# else under /tmp.
set -euo pipefail
case "${1:-}" in
  -h|--help) echo "Usage: benchmarks/gpu_check.sh [METHOD ...]"
             echo "  (benchmarks/loss.py's methods; default: torchaudio padded fused pruned)"
             exit 0 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
methods=("$@")
[ ${#methods[@]} -gt 0 ] || methods=(torchaudio padded fused pruned)
failed=()  # the logs of the parts that failed or ran out of time
parts=0
part() {  # part SECONDS LOG COMMAND...: runs COMMAND, its output to the terminal and LOG, for at most SECONDS
  local seconds=$1 log=$2; shift 2
  parts=$((parts + 1))
  timeout "$seconds" "$@" 2>&1 | tee "$out/$log" || {
    echo "gpu_check.sh: '$*' failed or ran out of time ($log)"
    failed+=("$out/$log")
  }
}
# what the machine has, said, not a stop: a machine without torchaudio or Triton still runs the other parts
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt" || true
python3 -c "
import importlib, importlib.util, torch
print('torch', torch.__version__, *(f'{m} ' + (getattr(importlib.import_module(m), '__version__', '?')
      if importlib.util.find_spec(m) else 'missing') for m in ('triton', 'torchaudio')))" | tee -a "$out/device.txt" ||
  true
if ! python3 -c "import torchaudio" 2> /dev/null; then  # its loss rows left out, the others measured
  methods=("${methods[@]/torchaudio}")
  read -ra methods <<< "${methods[*]}"
  echo "gpu_check.sh: no torchaudio here: benchmarks/loss.py runs ${methods[*]} alone" >&2
fi
part 50 tests_joint.log python3 -m pytest -q -p no:cacheprovider -m "not slow" tests/rnnt/loss/test_joint_triton.py
if [ ${#methods[@]} -gt 0 ]; then  # torchaudio alone asked for, and none here: nothing to measure
  # issue 37's third shape first: the one the part's limit would cut, the only one the 5% memory goal met at
  part 220 loss.md python3 benchmarks/loss.py --device cuda --runs 10 --methods "${methods[@]}" \
    --shapes B30-T440-U104-V500 B4-T400-U100-V1000 B8-T200-U50-V500
fi
part 150 tests.log python3 -m pytest -q -p no:cacheprovider tests/rnnt/loss tests/rnnt/test_host_reads.py \
  --ignore tests/rnnt/loss/test_joint_triton.py
launch_methods=()  # those of loss.py's methods launches.py counts (without torchaudio where it is missing here)
for method in "${methods[@]}"; do
  case $method in padded|fused|pruned|torchaudio) launch_methods+=("$method") ;; esac
done
part 45 launches.md python3 benchmarks/launches.py --device cuda --shapes B8-T200-U50-V500 B4-T400-U100-V1000 \
  ${launch_methods[@]+--methods "${launch_methods[@]}"}
part 45 train_step.md python3 benchmarks/train_step.py --device cuda --batch-scale 4 --runs 5 \
  --configs "tiny (full loss)" "tiny (fused loss)"
part 30 fused_chunks.md python3 benchmarks/fused_chunks.py --device cuda --shapes B8-T200-U50-V500 --runs 10 \
  --chunks 2097152 3145728 4194304 8388608 --no-profile
part 25 lattice.md python3 benchmarks/lattice.py --device cuda --runs 5 --shapes AN4 B8-T200-U50 B30-T440-U104
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_check.sh: ${#failed[@]} of $parts parts failed or ran out of time: ${failed[*]}" >&2
  exit 1
fi
echo "gpu_check.sh: all $parts parts ended well; their logs are in $out"

#!/usr/bin/env bash
# One call's worth of GPU checks on a lent CUDA machine (see benchmarks/README.md): the fused joiner +
# loss by chunk size, the loss tests on CUDA, the loss benchmark against torchaudio at the three shapes,
# and the tiny model's training step with the full and the fused loss. Uses the machine's python3
# (its own torch, torchaudio and Triton); writes its logs under $OUT when set, else under /tmp.
set -euo pipefail
case "${1:-}" in
  -h|--help) echo "Usage: benchmarks/gpu_check.sh [METHOD ...]   (loss.py methods; default: torchaudio padded fused pruned)"
             exit 0 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
export PYTHONPATH=$root PYTHONUNBUFFERED=1
methods=("$@")
[ ${#methods[@]} -gt 0 ] || methods=(torchaudio padded fused pruned)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
python3 -c "import torch, triton, torchaudio; print('torch', torch.__version__, 'triton', triton.__version__,
'torchaudio', torchaudio.__version__)" | tee -a "$out/device.txt"
python3 benchmarks/fused_chunks.py --device cuda --shapes B8-T200-U50-V500 B30-T440-U104-V500 \
  --chunks 1048576 8388608 33554432 2>&1 | tee "$out/fused_chunks.md"
python3 -m pytest -q -p no:cacheprovider tests/rnnt/loss/test_loss_devices.py tests/rnnt/test_host_reads.py \
  2>&1 | tee "$out/tests.log" | tail -3 || echo "gpu_check.sh: some CUDA tests failed (tests.log)"
python3 benchmarks/loss.py --device cuda --runs 10 --methods "${methods[@]}" 2>&1 | tee "$out/loss.md"
python3 benchmarks/train_step.py --device cuda --batch-scale 4 --runs 3 --configs "tiny (full loss)" \
  "tiny (fused loss)" 2>&1 | tee "$out/train_step.md"

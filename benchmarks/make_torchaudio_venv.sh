#!/usr/bin/env bash
# Builds benchmarks/venv-torchaudio: torch 2.9.1 + torchaudio 2.9 (about 7 GB), the peer that
# benchmarks/loss.py compares with. Never part of install or CI; run it by hand when you benchmark.
set -euo pipefail
case "${1:-}" in
  -h|--help) echo "Usage: benchmarks/make_torchaudio_venv.sh  (builds benchmarks/venv-torchaudio)"; exit 0 ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv="$here/venv-torchaudio"
if "$venv/bin/python" -c 'import torchaudio.functional, soundfile' 2>/dev/null; then
  echo "make_torchaudio_venv.sh: $venv is ready"; exit 0
fi
python3 -m venv "$venv"
# a build that failed (offline) leaves no venv that benchmarks/loss.py and pipeline.py would take for a peer
trap 'rm -rf "$venv"; echo "make_torchaudio_venv.sh: the build failed: $venv removed" >&2' ERR
# Two steps, as torchaudio's wheel otherwise pulls a different torch.
"$venv/bin/pip" install -q torch==2.9.1 torchvision==0.24.1
"$venv/bin/pip" install -q torch==2.9.1 'torchaudio==2.9.*'
"$venv/bin/pip" install -q soundfile==0.14.0 kaldi-native-fbank==1.22.4  # to read audio and compare fbank
"$venv/bin/python" -c 'import torch, torchaudio.functional, soundfile
print("make_torchaudio_venv.sh: torch", torch.__version__, "torchaudio", torchaudio.__version__)'

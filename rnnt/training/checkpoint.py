"""Checkpoints: written atomically (temporary file + rename), found by step, loaded with weights_only.

Their names are known here alone: epoch-N.pt (the end of epoch N), step-N.pt (every save_every steps,
the newest few kept) and avg-N.pt (steps/average_checkpoints.py: N epochs averaged), which decoding
prefers. utils/decoding.sh follows the same names.
"""

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


KINDS = {"epoch": "epoch-{}.pt", "step": "step-{}.pt", "average": "avg-{}.pt"}


def name(kind: str, number: int) -> str:
    """The file name of a checkpoint: name("epoch", 3) == "epoch-3.pt"."""
    return KINDS[kind].format(number)


def numbered(exp_dir: str, kind: str) -> list[str]:
    """The checkpoints of one kind in exp_dir, in the order of their numbers."""
    pattern = re.compile(re.escape(KINDS[kind]).replace(r"\{\}", r"(\d+)") + "$")
    found = [(int(m.group(1)), path) for path in glob.glob(os.path.join(exp_dir, KINDS[kind].format("*")))
             if (m := pattern.search(os.path.basename(path)))]
    return [path for _, path in sorted(found)]


def for_decoding(exp_dir: str) -> str:
    """What decoding uses by default: the newest avg-N.pt, else the checkpoint with the most steps."""
    averaged = sorted(numbered(exp_dir, "average"), key=os.path.getmtime)
    path = averaged[-1] if averaged else latest(exp_dir)
    if path is None:
        raise FileNotFoundError(f"{exp_dir}: no checkpoint ({', '.join(k.format('*') for k in KINDS.values())})")
    return path


def latest(exp_dir: str) -> str | None:
    """The checkpoint with the most optimiser steps among step-N.pt and epoch-N.pt."""
    best, best_step = None, -1
    for path in numbered(exp_dir, "step") + numbered(exp_dir, "epoch"):
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
    steps = numbered(exp_dir, "step")
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

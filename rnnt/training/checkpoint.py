"""Checkpoints: written atomically (temporary file + rename), found by step, loaded with weights_only.

Their names (epoch-N.pt, step-N.pt, avg-N.pt) and the model tags come from rnnt.training.checkpoint_names.
"""

from __future__ import annotations

import logging
import os
import random
import zipfile

import torch

from rnnt.atomic_write import write_atomically
from rnnt.training.checkpoint_names import KINDS, MODEL_LINK, name, numbered

log = logging.getLogger(__name__)

__all__ = ["UnreadableCheckpoint", "for_decoding", "latest", "load", "load_meta", "name", "numbered",
           "prune_step_checkpoints", "rng_state", "save", "set_rng_state", "slim_old_epochs"]


def save(path: str, state: dict) -> None:
    """Writes state to path whole or not at all; a write that fails (a full disk, a quota, a file-size limit) is an
    OSError naming path and why (torch.save's own is a RuntimeError of its zip writer: 'unexpected pos')."""
    def write(f) -> None:
        sink = _WriteErrors(f)
        try:
            torch.save(state, sink)
        except RuntimeError:
            if sink.error is None:
                raise
            raise OSError(sink.error.errno, sink.error.strerror, path) from None

    write_atomically(path, write, "wb")


class _WriteErrors:
    """A file, keeping the OSError a write raised for whoever called what wrapped it."""

    def __init__(self, f):
        self.f, self.error = f, None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as error:
            self.error = error
            raise

    def __getattr__(self, name):  # the file's own name, fileno, tell, flush ...
        return getattr(self.f, name)


class UnreadableCheckpoint(ValueError):
    """A file that torch.load cannot read as a checkpoint (truncated, damaged, or something else)."""


def damage(path: str) -> str | None:
    """Why the checkpoint's bytes are not those written ('<member> fails its CRC-32'), or None: torch.load does not
    check the CRCs its zip archive records, so a bit flipped in the weights (a disk, a copy) loaded silently. Read
    whole once (a file checked before, of the same size and time, is not read again)."""
    stat = os.stat(path)
    if (path, stat.st_size, stat.st_mtime_ns) in _sound or not zipfile.is_zipfile(path):  # (not a zip: torch says)
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            member = archive.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as error:
        return f"its zip archive is damaged ({error})"
    if member is not None:
        return f"{member} fails its CRC-32"
    _sound.add((path, stat.st_size, stat.st_mtime_ns))
    return None


_sound: set[tuple[str, int, int]] = set()  # (path, size, time) of checkpoints damage() read whole and found sound


def damaged(path: str, why: str) -> str:
    return f"{path}: damaged: {why} (its bytes are not those written: a disk or copy error)"


def load(path: str, mmap: bool = False) -> dict:
    """The whole checkpoint, its bytes checked (damage()); with mmap, memory-mapped and not checked (what is not
    touched is not read: a checkpoint's meta). A missing file raises FileNotFoundError, one that is not a readable
    checkpoint of ours (a bare state_dict saved elsewhere too, a damaged one) UnreadableCheckpoint naming it."""
    if not mmap and os.path.isfile(path) and (why := damage(path)):
        raise UnreadableCheckpoint(damaged(path, why))
    if why := not_saved_by_torch(path):  # (torch's reason was of mmap and '_use_new_zipfile_serialization', or '101')
        raise UnreadableCheckpoint(f"{path}: not a readable checkpoint ({why})")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError, ... for a bad file
        reason = str(error).strip().splitlines()[0].split(". ")[0] if str(error).strip() else type(error).__name__
        raise UnreadableCheckpoint(f"{path}: not a readable checkpoint ({reason})") from error
    if not (isinstance(state, dict) and isinstance(state.get("model"), dict) and isinstance(state.get("meta"), dict)):
        raise UnreadableCheckpoint(f"{path}: not a checkpoint of this project (a dict with 'model' and 'meta'; "
                                   f"a bare state_dict or another tool's file is not one)")
    return state


def not_saved_by_torch(path: str) -> str | None:
    """Why a file's first bytes are not those torch.save writes (a zip archive's, or a pickle's of torch's old
    format), or None (a file it cannot open: torch.load names that)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return None
    if not head:
        return "an empty file (0 bytes)"
    return None if head.startswith((b"PK\x03\x04", b"\x80")) else "not a file torch.save writes"


def for_decoding(exp_dir: str) -> str:
    """What decoding uses by default: model.pt's checkpoint (the model the recipe's result lines name, or the
    average written last), else the newest avg-N.pt, else the checkpoint with the most steps; and that checkpoint
    where it trained past the one chosen (more epochs decoded with --average 0 left an average of older ones that
    transcription and export would have taken)."""
    linked = os.path.join(exp_dir, MODEL_LINK)
    newest = latest(exp_dir)
    if os.path.exists(linked):  # (a link whose checkpoint was removed is none)
        path = os.path.join(exp_dir, os.readlink(linked)) if os.path.islink(linked) else linked
    else:  # an experiment of steps/train.py alone, or from before model.pt
        averaged = sorted(numbered(exp_dir, "average"), key=os.path.getmtime)
        path = averaged[-1] if averaged else newest
        if os.path.islink(linked):  # (another model than the one the results named, silently)
            log.warning("%s links to %s, which is gone; taking %s", linked, os.readlink(linked), path)
    if path not in (None, newest) and newest is not None and \
            load_meta(newest)["step"] > load_meta(path).get("step", 0):
        path = newest
    if path is None:
        for unread in reversed(numbered(exp_dir, "step") + numbered(exp_dir, "epoch")):
            load_meta(unread)  # the newest that latest() passed over, named with why (it was 'no checkpoint')
            if why := damage(unread):
                raise UnreadableCheckpoint(damaged(unread, why))
        raise FileNotFoundError(f"{exp_dir}: no checkpoint ({', '.join(k.format('*') for k in KINDS.values())})")
    return path


def latest(exp_dir: str) -> str | None:
    """The sound checkpoint (damage()) with the most optimiser steps among step-N.pt and epoch-N.pt (on a tie,
    the later epoch: an epoch of no steps leaves the one before it slimmed)."""
    found = []
    for order, path in enumerate(numbered(exp_dir, "step") + numbered(exp_dir, "epoch")):
        try:
            found.append((int(load_meta(path)["step"]), order, path))
        except Exception as error:  # an unreadable file is not a checkpoint to resume from: said (a resume from an
            log.warning("%s; passed over", error if isinstance(error, UnreadableCheckpoint) else  # older one went
                        f"{path}: not a checkpoint ({type(error).__name__}: {error})")  # without a word)
    for _, _, path in sorted(found, reverse=True):
        if not (why := damage(path)):
            return path
        log.warning("%s; passed over", damaged(path, why))
    return None


def holds_ema(path: str) -> bool:
    """Whether the checkpoint keeps EMA weights beside its raw ones (memory-mapped: the weights not read)."""
    return load(path, mmap=True).get("ema") is not None


def load_meta(path: str) -> dict:
    """The meta entry alone: the file is memory-mapped, so weights and optimiser state are not read."""
    return load(path, mmap=True)["meta"]


def prune_step_checkpoints(exp_dir: str, keep: int) -> None:
    """Keeps the newest `keep` step-N.pt files."""
    steps = numbered(exp_dir, "step")
    for path in steps[:-keep]:
        os.remove(path)


def slim_old_epochs(exp_dir: str, keep_whole: int) -> None:
    """All but the newest `keep_whole` epoch-N.pt files rewritten with the weights alone (model, EMA and
    meta: what averaging and decoding read): Adam's two moments, needed only to resume, which starts from
    the newest, are half a checkpoint with EMA and two thirds without. keep_whole 0: all kept whole. A file
    that cannot be read is left as it is, with a warning."""
    epochs = numbered(exp_dir, "epoch")
    for path in epochs[:-keep_whole] if keep_whole > 0 else []:
        try:
            if load_meta(path).get("slimmed"):
                continue
            state = load(path)
        except Exception as error:  # noqa: BLE001 -- a damaged old epoch must not stop the training
            log.warning("%s: cannot be read (%s); left as it is", path, error)
            continue
        save(path, {"model": state["model"], "ema": state.get("ema"), "meta": {**state["meta"], "slimmed": True}})


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
    if torch.cuda.is_available():  # this rank's device's alone (each rank's state is kept): a resume on a machine
        state["cuda"] = torch.cuda.get_rng_state()  # with fewer devices visible restores it all the same
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if isinstance(cuda, (list, tuple)):  # saved before: one state per device the saving rank saw
            device = torch.cuda.current_device()
            if device >= len(cuda):
                return
            cuda = cuda[device]
        torch.cuda.set_rng_state(cuda)

"""Argument checks for the transducer losses: every mistake gets a message that says what to fix."""

from __future__ import annotations

import operator

import torch

from rnnt import host_reads
from rnnt.loss.lattice_triton import bookkeeping_in_triton, lengths_on

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
REDUCTIONS = ("mean", "sum", "none")
INTS = (torch.int32, torch.int64)


def check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got '{reduction}'")


def check_lengths(targets, logit_lengths, target_lengths, batch: int | None = None) -> int:
    """Checks dtypes and shapes of targets and lengths; returns the batch size."""
    if targets.dtype not in INTS or logit_lengths.dtype not in INTS or target_lengths.dtype not in INTS:
        raise TypeError(f"targets, logit_lengths and target_lengths must be int32 or int64, got "
                        f"{targets.dtype}, {logit_lengths.dtype}, {target_lengths.dtype}")
    if targets.dim() != 2 or logit_lengths.dim() != 1 or target_lengths.dim() != 1:
        raise ValueError(f"expected targets (B, U), logit_lengths (B,), target_lengths (B,); got shapes "
                         f"{tuple(targets.shape)}, {tuple(logit_lengths.shape)}, {tuple(target_lengths.shape)}")
    B = targets.shape[0]
    if logit_lengths.shape[0] != B or target_lengths.shape[0] != B or (batch is not None and batch != B):
        logits = f", logits {batch}" if batch is not None else ""
        raise ValueError(f"batch sizes differ: targets {B}, logit_lengths {logit_lengths.shape[0]}, "
                         f"target_lengths {target_lengths.shape[0]}{logits}")
    if B == 0:
        raise ValueError("empty batch")
    return B


def check_length_pair(logit_lengths, target_lengths, batch: int) -> None:
    """The two lengths, int32 or int64, each (batch,): float ones failed in torch's calls, fewer than the batch
    left utterances out in silence."""
    if logit_lengths.dtype not in INTS or target_lengths.dtype not in INTS:
        raise TypeError(f"logit_lengths and target_lengths must be int32 or int64, got {logit_lengths.dtype} and "
                        f"{target_lengths.dtype}")
    if tuple(logit_lengths.shape) != (batch,) or tuple(target_lengths.shape) != (batch,):
        raise ValueError(f"expected logit_lengths and target_lengths ({batch},), got {tuple(logit_lengths.shape)} and "
                         f"{tuple(target_lengths.shape)}")


def check_values(targets, logit_lengths, target_lengths, vocab: int, blank: int, frames: tuple[int, str] | None,
                 positions: tuple[int, str] | None = None, one_sym_per_frame: bool = False,
                 backend: str = "auto") -> int:
    """Checks the values of targets and lengths (check_lengths took their dtypes and shapes): logit_lengths >= 1
    and at most frames, target_lengths in [0, targets.shape[1]] and, + 1, at most positions (frames and
    positions: (size, name of the dimension), or None), at most the logit_lengths with one_sym_per_frame, and
    the targets inside their lengths in the vocabulary and not the blank. Returns the blank normalised
    (normalise_blank). Off the CPU, in one launch where Triton runs (rnnt.loss.check_kernel), else through
    require."""
    blank = normalise_blank(blank, vocab)
    if bookkeeping_in_triton(targets.device, backend):
        _launch_check_kernel(targets, logit_lengths, target_lengths, vocab, blank, frames, positions,
                             one_sym_per_frame)
        return blank
    require(logit_lengths.min() >= 1, "logit_lengths must be >= 1",
            lambda: f"logit_lengths must be >= 1, got {logit_lengths.tolist()}")
    require(target_lengths.min() >= 0, "target_lengths must be >= 0",
            lambda: f"target_lengths must be >= 0, got {target_lengths.tolist()}")
    check_inside(target_lengths, "target_lengths", targets.shape[1], "targets.shape[1]")
    if frames is not None:
        check_inside(logit_lengths, "logit_lengths", *frames)
    if positions is not None:
        check_inside(target_lengths, "target_lengths", *positions, extra=1)
    if one_sym_per_frame:
        check_one_symbol_per_frame(logit_lengths, target_lengths)
    return check_symbols(targets, target_lengths, blank, vocab)


def _launch_check_kernel(targets, logit_lengths, target_lengths, vocab: int, blank: int, frames, positions,
                         one_sym_per_frame: bool) -> None:
    from rnnt.loss.check_kernel import check_kernel

    (frames_size, frames_name), (positions_size, positions_name) = frames or (0, ""), positions or (0, "")
    width, device = targets.shape[1], targets.device
    check_kernel[(targets.shape[0],)](
        targets, *(targets.stride() if width else (0, 0)), *lengths_on(logit_lengths, target_lengths, device),
        width, frames_size,
        positions_size, vocab, blank, CHECK_FRAMES=frames is not None, CHECK_POSITIONS=positions is not None,
        ONE_SYM=one_sym_per_frame, BLOCK=64, FRAMES_MESSAGE=f"logit_lengths exceed {frames_name}",
        POSITIONS_MESSAGE=f"target_lengths + 1 exceed {positions_name}",
        VOCAB_MESSAGE=f"targets must lie in [0, {vocab})",
        BLANK_MESSAGE=f"the blank symbol {blank} appears inside the targets", num_warps=1)


def require(condition: torch.Tensor, message: str, detailed=None) -> None:
    """Raises ValueError where condition (a one-element tensor) is false: detailed() (or message) on the CPU.

    On an accelerator the host never waits for the device to read the condition (a step keeps its launches
    queued): the device asserts it, and the error, with message, comes at the next synchronisation.
    """
    if not host_reads.free(condition.device):
        torch._assert_async(condition, message)
    elif not bool(condition):
        raise ValueError(detailed() if detailed else message)


def check_host_lengths(host_lengths, logit_lengths: torch.Tensor, target_lengths: torch.Tensor) -> None:
    """host_lengths, the two lengths as lists the host holds (what a caller passes to spare reading the device),
    against the tensors where reading them is free (the CPU): lists that disagree would leave cells of the
    lattice uncomputed, or reach past it. Elsewhere the caller vouches for them, as reading is what they spare."""
    if host_lengths is None or not host_reads.free(logit_lengths.device):
        return
    given, want = tuple(list(lengths) for lengths in host_lengths), (logit_lengths.tolist(), target_lengths.tolist())
    if given != want:
        raise ValueError(f"host_lengths give {given[0]} and {given[1]} where the lengths are {want[0]} and {want[1]}")


def check_inside(lengths: torch.Tensor, name: str, size: int, dim_name: str, extra: int = 0) -> None:
    """Every length + extra fits in a tensor dimension of size (named dim_name)."""
    if extra:
        require(lengths.max() + extra <= size, f"{name} + {extra} exceed {dim_name} = {size}",
                lambda: f"{name} max {int(lengths.max())} needs {dim_name} >= {int(lengths.max()) + extra}, "
                        f"got {size}")
    else:
        require(lengths.max() <= size, f"{name} exceed {dim_name} = {size}",
                lambda: f"{name} max {int(lengths.max())} exceeds {dim_name} = {size}")


def normalise_blank(blank: int, vocab: int) -> int:
    """The blank as a Python int (a numpy integer or a 0-d integer tensor too: one the torch backend took, and
    Triton's kernels refused as a pointer); a negative blank counts from the end (-1: the last symbol)."""
    try:
        blank = operator.index(blank)
    except TypeError:
        raise TypeError(f"blank must be a whole number (a symbol's index), got {blank!r}") from None
    if not -vocab <= blank < vocab:
        raise ValueError(f"blank {blank} is out of range for a vocabulary of {vocab}")
    return blank % vocab


def check_symbols(targets, target_lengths, blank: int, vocab: int) -> int:
    """Normalises the blank (normalise_blank) and checks the targets; returns blank."""
    blank = normalise_blank(blank, vocab)
    if targets.shape[1] == 0:
        return blank
    inside = torch.arange(targets.shape[1], device=targets.device)[None, :] < target_lengths[:, None]
    outside_vocab = ((targets < 0) | (targets >= vocab)) & inside

    def value_range():
        used = targets[inside]
        return f"targets must lie in [0, {vocab}), got values from {int(used.min())} to {int(used.max())}"
    require(~outside_vocab.any(), f"targets must lie in [0, {vocab})", value_range)
    blanks = ((targets == blank) & inside).any(1)
    require(~blanks.any(), f"the blank symbol {blank} appears inside the targets",
            lambda: f"the blank symbol {blank} appears inside the targets of utterance {int(blanks.nonzero()[0])}")
    return blank


def check_one_symbol_per_frame(logit_lengths, target_lengths) -> None:
    too_long = target_lengths > logit_lengths

    def first():
        b = int(too_long.nonzero()[0])
        return (f"one_sym_per_frame needs target_length <= logit_length; utterance {b} has "
                f"{int(target_lengths[b])} targets for {int(logit_lengths[b])} frames")
    require(~too_long.any(), "one_sym_per_frame needs target_length <= logit_length", first)


def check_logits(logits, targets, logit_lengths, target_lengths, blank: int, one_sym_per_frame: bool,
                 backend: str = "auto") -> int:
    """Checks logits (padded 4-D or packed 2-D) against targets and lengths; returns the normalised blank."""
    if not isinstance(logits, torch.Tensor) or logits.dtype not in FLOATS:
        raise TypeError(f"logits must be a float16, bfloat16, float32 or float64 tensor, got "
                        f"{getattr(logits, 'dtype', type(logits))}")
    for name, tensor in (("targets", targets), ("logit_lengths", logit_lengths), ("target_lengths", target_lengths)):
        if tensor.device != logits.device:
            raise ValueError(f"{name} is on {tensor.device} but logits are on {logits.device}")
    if logits.dim() == 4:
        check_lengths(targets, logit_lengths, target_lengths, logits.shape[0])
        return check_values(targets, logit_lengths, target_lengths, logits.shape[-1], blank,
                            (logits.shape[1], "logits.shape[1]"), (logits.shape[2], "logits.shape[2]"),
                            one_sym_per_frame, backend)
    if logits.dim() != 2:
        raise ValueError(f"logits must be padded (B, T, U+1, V) or packed (sum T_b*(U_b+1), V); "
                         f"got shape {tuple(logits.shape)}")
    check_lengths(targets, logit_lengths, target_lengths)
    rows = (logit_lengths.long() * (target_lengths.long() + 1)).sum()
    require(rows == logits.shape[0], f"packed logits need sum(T_b * (U_b + 1)) rows, got {logits.shape[0]}",
            lambda: f"packed logits need sum(T_b * (U_b + 1)) = {int(rows)} rows, got {logits.shape[0]}")
    return check_values(targets, logit_lengths, target_lengths, logits.shape[-1], blank, None, None,
                        one_sym_per_frame, backend)

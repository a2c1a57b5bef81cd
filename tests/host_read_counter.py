"""Counts the host's reads of tensor values, the operations that synchronise host and device on a GPU
(a Python bool, int or float of a tensor, .item(), .tolist(), .nonzero(), a boolean index, ...), so that
a CPU test can check a code path that must not stall a GPU; so is PyTorch's CTC loss given its lengths as
tensors, which it copies to the host (lists it takes as they are). Reads made inside Triton's interpreter
(it runs kernels on the host) are not counted."""

from __future__ import annotations

import sys

import torch
from torch.overrides import TorchFunctionMode

READS = {"__bool__", "__int__", "__float__", "__index__", "item", "tolist", "nonzero", "argwhere", "masked_select",
         "unique", "numpy", "__array__"}


def _boolean_index(args) -> bool:
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


def _in_triton() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if "/triton/" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class HostReads(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        counted = name in READS or (name in ("__getitem__", "__setitem__") and _boolean_index(args)) \
            or (name == "repeat_interleave" and "output_size" not in (kwargs or {}) and len(args) > 1
                and isinstance(args[1], torch.Tensor)) \
            or (name == "ctc_loss" and any(isinstance(a, torch.Tensor) for a in args[2:4]))
        if counted and not _in_triton():
            self.reads.append(name)
        return func(*args, **(kwargs or {}))

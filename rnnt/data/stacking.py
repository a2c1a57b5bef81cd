"""Frame stacking and subsampling: frame i of the output is frames i*s .. i*s+k-1 of the input side by side.

With k = s = 3 (the MLPerf RNN-T front end) 80-dim features at 10 ms become 240-dim at 30 ms. The last
output frames are completed with zeros; T frames give ceil(T / s) output frames.
"""

from __future__ import annotations

import math

import torch


def stacked_length(frames: int, subsample: int) -> int:
    return math.ceil(frames / subsample)


def stack_frames(feats: torch.Tensor, stack: int, subsample: int) -> torch.Tensor:
    """(T, D) -> (ceil(T / subsample), stack * D)."""
    if stack == 1 and subsample == 1:
        return feats
    frames, dim = feats.shape
    out_frames = stacked_length(frames, subsample)
    needed = (out_frames - 1) * subsample + stack
    padded = torch.nn.functional.pad(feats, (0, 0, 0, max(0, needed - frames)))
    return padded.unfold(0, stack, subsample)[:out_frames].transpose(1, 2).reshape(out_frames, stack * dim)

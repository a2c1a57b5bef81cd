"""A depthwise convolution over time on frames laid out (B, T, C), as every encoder holds them.

`torch.nn.Conv1d` wants (B, C, T): the transposes around it make two copies, and its grouped kernel over that
layout is slow on the CPU (oneDNN: 2.4 ms forward, 7.5 ms forward + backward for 8 x 300 frames x 144
channels, kernel 15). The same weights run as a 1 x K Conv2d over (B, C, 1, T) viewed from (B, T, C) are
channels-last without a copy, the layout oneDNN's depthwise kernel is fast in (0.09 ms and 1.8 ms), and give
the same numbers. The parameters stay the Conv1d's, so checkpoints and exports are unchanged."""

from __future__ import annotations

import torch


def depthwise_over_time(conv: torch.nn.Conv1d, frames: torch.Tensor, history: int = 0) -> torch.Tensor:
    """conv (groups == channels, stride 1, no dilation) over frames (B, T, C) -> (B, T', C), with `history`
    zero frames before the first as well as conv's own symmetric padding."""
    if history:
        frames = torch.nn.functional.pad(frames, (0, 0, history, 0))
    image = frames.transpose(1, 2).unsqueeze(2)  # (B, C, 1, T): channels-last, a view
    out = torch.nn.functional.conv2d(image, conv.weight.unsqueeze(2), conv.bias, padding=(0, conv.padding[0]),
                                     groups=conv.groups)
    return out.squeeze(2).transpose(1, 2)

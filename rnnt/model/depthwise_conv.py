"""A depthwise convolution over time on frames laid out (B, T, C), as every encoder holds them.

`torch.nn.Conv1d` wants (B, C, T): the transposes around it make two copies, and its grouped kernel over that
layout is slow on the CPU (oneDNN: 2.4 ms forward, 7.5 ms forward + backward for 8 x 300 frames x 144
channels, kernel 15). The same weights run as a 1 x K Conv2d over (B, C, 1, T) viewed from (B, T, C) are
channels-last without a copy, the layout oneDNN's depthwise kernel is fast in (0.09 ms and 1.8 ms), and give
the same numbers to rounding (5e-7). The parameters stay the Conv1d's, so checkpoints and exports are unchanged.

That is done in float32 on the CPU alone. In bfloat16 (autocast) on more than one thread, oneDNN 3.12's
channels-last depthwise kernel can take minutes to build for one utterance of some lengths (86 or 128 frames
of 144 channels, kernel 15; 100 is instant), and it is built anew for each shape: training stalled. Float32 was
checked at every batch of 1, 2, 3 and 8 utterances of 1 to 419 frames, forward and backward, centred and
causal. Elsewhere (bfloat16, CUDA) it is the Conv1d (benchmarks/RESULTS.md, "The Conformer")."""

from __future__ import annotations

import torch


def depthwise_over_time(conv: torch.nn.Conv1d, frames: torch.Tensor, history: int = 0) -> torch.Tensor:
    """conv (groups == channels, stride 1, no dilation) over frames (B, T, C) -> (B, T', C), with `history`
    zero frames before the first as well as conv's own symmetric padding."""
    if history:
        frames = torch.nn.functional.pad(frames, (0, 0, history, 0))
    if frames.device.type != "cpu" or frames.dtype != torch.float32 or torch.is_autocast_enabled("cpu"):
        return conv(frames.transpose(1, 2)).transpose(1, 2)
    image = frames.transpose(1, 2).unsqueeze(2)  # (B, C, 1, T): channels-last, a view
    out = torch.nn.functional.conv2d(image, conv.weight.unsqueeze(2), conv.bias, padding=(0, conv.padding[0]),
                                     groups=conv.groups)
    return out.squeeze(2).transpose(1, 2)

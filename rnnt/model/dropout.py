"""Dropout in a quarter to two thirds of torch's time on the CPU; torch's own elsewhere.

On the CPU torch draws a dropout mask one float at a time (bernoulli_: about 6 ns an element on one
core), which made dropout 13% of a Conformer's training step. Here one 64-bit draw of the same
generator gives four elements their 15 random bits each (the low 15 of each 16-bit quarter: torch's
int64 random_ leaves the sign bit 0), an element is dropped where its bits are under p x 2^15, and the
kept ones are scaled by 2^15 / (2^15 - dropped): the rate is p rounded to 1/32768 (0.1 drops
3277/32768 = 0.100006), the expectation unchanged (in bfloat16 the scale rounds, 1.109375 for 1 / 0.9, as
torch's own does; a rate that rounds to 0 or to 1 is left to torch). The comparison writes the mask's floats at once (a
bool mask converted after costs 6 times more), and the product saves the mask for the backward pass, as
torch's CPU dropout saves its own. Forward and backward of 8 x 150 x 576 floats: 2.0 ms against 5.2 on
one core, and a Conformer's training step 1.09x faster (benchmarks/dropout.py). Seeded runs stay
reproducible: every bit comes from torch's default generator.

On a CUDA device torch's fused kernel is faster than anything assembled from tensor ops, so the module
calls it there; in eval mode (and at p = 0) it is the identity, so exports and decoding never see it.
Dropout inside torch's own modules stays torch's: between a multi-layer nn.LSTM's layers (the LSTM
prediction network's). The Conformer's attention weights are dropped by this module while training on the CPU
(rnnt.model.rotary_attention), by scaled_dot_product_attention elsewhere.
"""

from __future__ import annotations

import math

import torch

RESOLUTION = 1 << 15  # the random bits an element gets: its drop probability is a multiple of 1/RESOLUTION


def keep_scale_mask(shape: torch.Size, dropped: int, dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of `shape` holding 0 where an element is dropped (with probability dropped / RESOLUTION,
    0 < dropped < RESOLUTION) and RESOLUTION / (RESOLUTION - dropped) where it is kept."""
    count = math.prod(shape)
    words = torch.empty((count + 3) // 4, dtype=torch.int64).random_()  # 63 random bits each
    bits = words.view(torch.int16)[:count].view(shape) & (RESOLUTION - 1)
    mask = torch.ge(bits, dropped, out=torch.empty(shape, dtype=dtype))  # straight to floats: 6x faster than bool
    return mask.mul_(RESOLUTION / (RESOLUTION - dropped))


class Dropout(torch.nn.Dropout):
    """torch.nn.Dropout's drop-in (the same `p`, the same state: none), its CPU mask drawn as above."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        dropped = round(self.p * RESOLUTION)
        if x.device.type != "cpu" or self.inplace or not 0 < dropped < RESOLUTION:
            return super().forward(x)
        return x * keep_scale_mask(x.shape, dropped, x.dtype)

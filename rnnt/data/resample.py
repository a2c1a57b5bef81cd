"""Band-limited resampling by a rational factor: a Hann-windowed sinc filter applied polyphase.

Output sample n sits at input position n * orig / new. Writing n = q * new + i, every phase i uses
one fixed kernel over the input samples around q * orig, so the whole job is one conv1d with stride
orig and new output channels, interleaved afterwards.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

ZERO_CROSSINGS = 16  # filter half-width, in zero crossings of the low-pass sinc
ROLLOFF = 0.95  # cut-off as a share of the lower Nyquist frequency


@lru_cache(maxsize=32)
def _kernels(orig: int, new: int, dtype: torch.dtype) -> tuple[torch.Tensor, int]:
    cutoff = 0.5 * ROLLOFF * min(1.0, new / orig)  # cycles per input sample
    half_width = ZERO_CROSSINGS / (2 * cutoff)  # input samples
    margin = math.ceil(half_width)
    m = torch.arange(-margin, margin + orig, dtype=torch.float64)  # input offsets covered by any phase
    phases = torch.arange(new, dtype=torch.float64)[:, None] * orig / new
    d = m[None, :] - phases  # distance of each tap from the output sample, in input samples
    window = torch.where(d.abs() <= half_width, torch.cos(math.pi * d / (2 * half_width)) ** 2, 0.0)
    kernels = 2 * cutoff * torch.sinc(2 * cutoff * d) * window
    return kernels.to(dtype)[:, None, :], margin


def resampled_length(samples: int, orig_rate: int, new_rate: int) -> int:
    """How many samples resample gives for `samples` at orig_rate: ceil(samples * new_rate / orig_rate)."""
    return -(-samples * new_rate // orig_rate)


def resample(waveform: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """waveform (..., samples) at orig_rate -> (..., resampled_length(samples, ...)) at new_rate."""
    if orig_rate <= 0 or new_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_rate} -> {new_rate}")
    if orig_rate == new_rate:
        return waveform
    g = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // g, new_rate // g
    kernels, margin = _kernels(orig, new, waveform.dtype if waveform.is_floating_point() else torch.float32)
    kernels = kernels.to(waveform.device)
    shape = waveform.shape
    x = waveform.reshape(-1, 1, shape[-1]).to(kernels.dtype)
    length = shape[-1]
    out_length = resampled_length(length, orig, new)
    frames = math.ceil(length / orig)
    x = torch.nn.functional.pad(x, (margin, margin + frames * orig - length + orig))
    y = torch.nn.functional.conv1d(x, kernels, stride=orig)[..., :frames]  # (batch, new, frames)
    y = y.transpose(1, 2).reshape(x.shape[0], -1)[:, :out_length]
    return y.reshape(*shape[:-1], out_length)


class StreamingResampler:
    """resample over audio that comes in blocks (a long file read block by block), in memory of a block and the
    filter's width: the blocks' outputs joined are the whole audio's resample (each output sample reads the same
    input samples, through the same kernel)."""

    def __init__(self, orig_rate: int, new_rate: int):
        if orig_rate <= 0 or new_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {orig_rate} -> {new_rate}")
        g = math.gcd(orig_rate, new_rate)
        self.orig, self.new = orig_rate // g, new_rate // g
        self.kernels, self.margin = _kernels(self.orig, self.new, torch.float32)
        self.pending = torch.zeros(self.margin)  # the input not yet used up, after resample's left padding
        self.consumed = self.emitted = 0  # input samples taken, output samples given

    def accept(self, block: torch.Tensor) -> torch.Tensor:
        """A mono block (samples,) -> the output samples it completes."""
        self.consumed += block.shape[-1]
        return self._convolve(torch.cat([self.pending, block.float()]))

    def finish(self) -> torch.Tensor:
        """The output samples left once the audio has ended (its right padding read)."""
        total = resampled_length(self.consumed, self.orig, self.new)
        tail = self._convolve(torch.cat([self.pending, torch.zeros(self.margin + 2 * self.orig)]))
        return tail[:max(0, total - (self.emitted - tail.shape[0]))]

    def _convolve(self, x: torch.Tensor) -> torch.Tensor:
        width = 2 * self.margin + self.orig  # the input a group of `new` output samples reads
        frames = (x.shape[0] - width) // self.orig + 1 if x.shape[0] >= width else 0
        y = torch.nn.functional.conv1d(x[None, None, :(frames - 1) * self.orig + width], self.kernels,
                                       stride=self.orig) if frames else torch.zeros(1, self.new, 0)
        self.pending = x[frames * self.orig:]
        y = y.transpose(1, 2).reshape(-1)
        self.emitted += y.shape[0]
        return y

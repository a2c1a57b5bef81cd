"""Band-limited resampling by a rational factor: a Hann-windowed sinc filter applied polyphase.

Output sample n sits at input position n * orig / new. Writing n = q * new + i, every phase i uses
one fixed kernel over the input samples around q * orig, so the whole job is one conv1d with stride
orig and new output channels, interleaved afterwards. Where the phases are too many for that (rates sharing
little, 11127 Hz to 8000), each output sample is summed over its own taps instead (the same filter).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

ZERO_CROSSINGS = 16  # filter half-width, in zero crossings of the low-pass sinc
ROLLOFF = 0.95  # cut-off as a share of the lower Nyquist frequency


MAX_KERNEL_TAPS = 1 << 22  # the polyphase kernels' size at most (16 MB in float32); rarer rates go output by output


def _filter(orig: int, new: int) -> tuple[float, float, int]:
    """The low-pass filter: its cut-off (cycles per input sample), half width and that rounded up (input samples)."""
    cutoff = 0.5 * ROLLOFF * min(1.0, new / orig)
    half_width = ZERO_CROSSINGS / (2 * cutoff)
    return cutoff, half_width, math.ceil(half_width)


def _taps(d: torch.Tensor, cutoff: float, half_width: float) -> torch.Tensor:
    """The filter's weight at distances d (input samples) from an output sample."""
    window = torch.where(d.abs() <= half_width, torch.cos(math.pi * d / (2 * half_width)) ** 2, 0.0)
    return 2 * cutoff * torch.sinc(2 * cutoff * d) * window


def polyphase(orig: int, new: int) -> bool:
    """Whether the one-conv1d form fits MAX_KERNEL_TAPS: its kernels hold a phase an output of the new phases
    (new / gcd of them: 11127 Hz to 8000, 8000 phases of 11173 taps, took 3 GB)."""
    return new * (2 * _filter(orig, new)[2] + orig) <= MAX_KERNEL_TAPS


@lru_cache(maxsize=32)
def _kernels(orig: int, new: int, dtype: torch.dtype) -> tuple[torch.Tensor, int]:
    cutoff, half_width, margin = _filter(orig, new)
    m = torch.arange(-margin, margin + orig, dtype=torch.float64)  # input offsets covered by any phase
    phases = torch.arange(new, dtype=torch.float64)[:, None] * orig / new
    kernels = _taps(m[None, :] - phases, cutoff, half_width)  # by each tap's distance from the output sample
    return kernels.to(dtype)[:, None, :], margin


def _direct(x: torch.Tensor, start: int, orig: int, new: int, first: int, end: int) -> torch.Tensor:
    """Outputs first .. end - 1 (batch, end - first), each from the input samples within the filter's width of it,
    where x (batch, samples) holds the input from sample `start` on (zeros elsewhere), a few thousand at a time."""
    cutoff, half_width, margin = _filter(orig, new)
    offsets = torch.arange(-margin, margin + 2, device=x.device)
    parts = []
    for chunk in range(first, end, 4096):
        n = torch.arange(chunk, min(chunk + 4096, end), dtype=torch.float64, device=x.device)
        position = n * orig / new
        index = torch.floor(position).long()[:, None] + offsets  # absolute input samples
        weights = _taps(index - position[:, None], cutoff, half_width).to(x.dtype)
        local = index - start
        inside = (local >= 0) & (local < x.shape[-1])
        samples = x[:, local.clamp(0, max(x.shape[-1] - 1, 0))] * inside if x.shape[-1] else weights[None] * 0
        parts.append((samples * weights).sum(-1))
    return torch.cat(parts, dim=-1) if parts else x.new_zeros(x.shape[0], 0)


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
    shape, length = waveform.shape, waveform.shape[-1]
    out_length = resampled_length(length, orig, new)
    dtype = waveform.dtype if waveform.is_floating_point() else torch.float32
    if length == 0:  # no samples (reshape(-1, 0) cannot infer the rows): none out, as the streaming resampler
        return waveform.new_zeros((*shape[:-1], 0), dtype=dtype)
    if not polyphase(orig, new):
        x = waveform.reshape(-1, length).to(dtype)
        return _direct(x, 0, orig, new, 0, out_length).reshape(*shape[:-1], out_length)
    kernels, margin = _kernels(orig, new, dtype)
    kernels = kernels.to(waveform.device)
    x = waveform.reshape(-1, 1, length).to(kernels.dtype)
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
        self.polyphase = polyphase(self.orig, self.new)
        if self.polyphase:
            self.kernels, self.margin = _kernels(self.orig, self.new, torch.float32)
            self.pending = torch.zeros(self.margin)  # the input not yet used up, after resample's left padding
        else:  # output by output (_direct): the input kept from sample `start` on
            self.margin, self.pending, self.start = _filter(self.orig, self.new)[2], torch.zeros(0), 0
        self.consumed = self.emitted = 0  # input samples taken, output samples given

    def accept(self, block: torch.Tensor) -> torch.Tensor:
        """A mono block (samples,) -> the output samples it completes (the block itself at equal rates, as
        resample gives it)."""
        self.consumed += block.shape[-1]
        if self.orig == self.new:
            return block
        if not self.polyphase:
            self.pending = torch.cat([self.pending, block.float()])
            ready = -(-(self.consumed - self.margin - 1) * self.new // self.orig)  # all of their input here
            return self._direct_until(max(self.emitted, ready))
        return self._convolve(torch.cat([self.pending, block.float()]))

    def finish(self) -> torch.Tensor:
        """The output samples left once the audio has ended (its right padding read)."""
        total = resampled_length(self.consumed, self.orig, self.new)
        if self.orig == self.new:
            return torch.zeros(0)
        if not self.polyphase:
            return self._direct_until(total)
        tail = self._convolve(torch.cat([self.pending, torch.zeros(self.margin + 2 * self.orig)]))
        return tail[:max(0, total - (self.emitted - tail.shape[0]))]

    def _direct_until(self, end: int) -> torch.Tensor:
        y = _direct(self.pending[None], self.start, self.orig, self.new, self.emitted, end)[0]
        self.emitted = end
        needed = end * self.orig // self.new - self.margin  # the first input sample the next output reads
        drop = min(max(0, needed - self.start), self.pending.shape[0])
        self.pending, self.start = self.pending[drop:], self.start + drop
        return y

    def _convolve(self, x: torch.Tensor) -> torch.Tensor:
        width = 2 * self.margin + self.orig  # the input a group of `new` output samples reads
        frames = (x.shape[0] - width) // self.orig + 1 if x.shape[0] >= width else 0
        y = torch.nn.functional.conv1d(x[None, None, :(frames - 1) * self.orig + width], self.kernels,
                                       stride=self.orig) if frames else torch.zeros(1, self.new, 0)
        self.pending = x[frames * self.orig:]
        y = y.transpose(1, 2).reshape(-1)
        self.emitted += y.shape[0]
        return y

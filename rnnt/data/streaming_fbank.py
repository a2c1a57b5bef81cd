"""fbank of a signal that arrives in pieces: every frame as soon as the samples under its window are
there, the same numbers as rnnt.data.features.fbank of the whole signal.

For the Kaldi presets (kaldi, sherpa_onnx): their frames are processed one by one, so a frame computed
from the samples under it alone is the frame of the whole signal. Without snip-edges the first frame
mirrors the signal's first samples and the last ones its last samples, which only finish() knows.
Only the samples of frames not yet computed are kept: memory does not grow with the signal.
"""

from __future__ import annotations

import dataclasses

import torch

from rnnt.data.features import PRESETS, fbank, frame_samples, mirror_index, num_frames


class StreamingFbank:
    def __init__(self, preset: str, sample_rate: int, num_mel_bins: int = 80):
        p = PRESETS[preset]
        if p.framing == "stft" or p.normalize_per_utterance:
            raise ValueError(f"fbank preset {preset} cannot stream: it needs the whole utterance "
                             "(centred STFT frames or per-utterance normalisation); use kaldi or sherpa_onnx")
        self.preset, self.rate, self.bins = preset, sample_rate, num_mel_bins
        self.snip = dataclasses.replace(p, framing="snip")  # applied to exactly the samples of the frames asked
        self.frame, self.shift = frame_samples(p, sample_rate)
        self.first = 0 if p.framing == "snip" else self.shift // 2 - self.frame // 2  # where frame 0 starts
        self.buffer = torch.zeros(0)
        self.offset = 0  # the position in the signal of buffer[0]
        self.samples = 0  # received so far
        self.done = 0  # frames returned so far

    def accept(self, samples: torch.Tensor) -> torch.Tensor:
        """Mono samples in [-1, 1] -> the frames (n, bins) they complete."""
        self.buffer = torch.cat([self.buffer, samples.float()])
        self.samples += samples.shape[0]
        return self._frames(max(0, (self.samples - self.frame - self.first) // self.shift + 1))

    def finish(self) -> torch.Tensor:
        """The frames that need the end of the signal: the last ones, mirrored past it."""
        return self._frames(num_frames(self.samples, self.rate, self.preset))

    def _frames(self, upto: int) -> torch.Tensor:
        if upto <= self.done:
            return torch.zeros(0, self.bins)
        start = self.first + self.done * self.shift
        index = torch.arange(start, self.first + (upto - 1) * self.shift + self.frame)
        feats = fbank(self.buffer[mirror_index(index, self.samples) - self.offset], self.rate, self.snip, self.bins)
        self.done = upto
        # from a window before the next frame's start: the last frames mirror the signal's last samples
        keep_from = max(0, self.first + upto * self.shift - self.frame)
        if keep_from > self.offset:
            self.buffer = self.buffer[keep_from - self.offset:]
            self.offset = keep_from
        return feats

"""Decoding audio of a record (bytes or a path, optionally a segment) to a mono float waveform."""

from __future__ import annotations

import io

import numpy as np
import soundfile
import torch


class AudioError(RuntimeError):
    pass


def load_audio(audio, start: float | None = None, end: float | None = None) -> tuple[torch.Tensor, int]:
    """(waveform (channels, samples) float32 in [-1, 1], sample rate) of bytes or a file path."""
    source = io.BytesIO(audio) if isinstance(audio, (bytes, bytearray)) else audio
    try:
        if start is None and (end is None or end < 0):
            samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
        else:
            rate = soundfile.info(source).samplerate
            if isinstance(source, io.BytesIO):
                source.seek(0)
            stop = None if end is None or end < 0 else round(end * rate)
            samples, rate = soundfile.read(source, start=round((start or 0.0) * rate), stop=stop, dtype="float32",
                                           always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise AudioError(str(error)) from None
    if samples.shape[0] == 0:
        raise AudioError("no samples")
    return torch.from_numpy(np.ascontiguousarray(samples.T)), rate


def to_mono(waveform: torch.Tensor) -> torch.Tensor:
    """(channels, samples) -> (samples,), averaging the channels."""
    return waveform.mean(dim=0) if waveform.shape[0] > 1 else waveform[0]

"""Decoding audio of a record (bytes or a path, optionally a segment) to a mono float waveform."""

from __future__ import annotations

import io
import os

import numpy as np
import soundfile
import torch


class AudioError(RuntimeError):
    pass


MAX_OVERSHOOT = 0.5  # seconds a segment may end past its recording, cut there (Kaldi's extract-segments)


def segment_samples(info, start: float | None, end: float | None) -> tuple[int, int | None]:
    """The first and end sample of a segment [start, end) seconds (end None or negative: the recording's end)
    in a recording of info.frames samples, under Kaldi's extract-segments rules: a segment that starts past
    the recording, or ends more than MAX_OVERSHOOT after it, is refused; one ending less past it is cut."""
    rate, duration = info.samplerate, info.frames / info.samplerate
    first = round((start or 0.0) * rate)
    if first < 0 or first >= info.frames:
        raise AudioError(f"the segment starts at {start} s, outside the recording's {duration:.3f} s")
    if end is None or end < 0:
        return first, None
    if end > duration + MAX_OVERSHOOT:
        raise AudioError(f"the segment ends at {end} s, more than {MAX_OVERSHOOT} s past the recording's "
                         f"{duration:.3f} s")
    return first, min(round(end * rate), info.frames)


def check_finite(waveform: torch.Tensor) -> torch.Tensor:
    """The waveform, refused where a sample is NaN or infinite (a float file's: it would make every feature,
    CMVN sum and loss it enters NaN)."""
    if waveform.is_floating_point() and not bool(torch.isfinite(waveform).all()):
        raise AudioError("some of its samples are not finite (NaN or inf)")
    return waveform


def load_audio(audio, start: float | None = None, end: float | None = None) -> tuple[torch.Tensor, int]:
    """(waveform (channels, samples) float32 in [-1, 1], sample rate) of bytes or a file path, or of the
    segment [start, end) seconds of it (segment_samples)."""
    # a path as the file system's bytes (soundfile encodes a str as strict UTF-8: a Latin-1 name would fail)
    source = io.BytesIO(audio) if isinstance(audio, (bytes, bytearray)) else os.fsencode(audio)
    try:
        if start is None and (end is None or end < 0):
            samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
        else:
            info = soundfile.info(source)
            if isinstance(source, io.BytesIO):
                source.seek(0)
            first, stop = segment_samples(info, start, end)
            samples, rate = soundfile.read(source, start=first, stop=stop, dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError, TypeError) as error:  # TypeError: headerless (a .raw path)
        raise AudioError(str(error)) from None
    if samples.shape[0] == 0:
        raise AudioError("no samples")
    return check_finite(torch.from_numpy(np.ascontiguousarray(samples.T))), rate


def to_mono(waveform: torch.Tensor) -> torch.Tensor:
    """(channels, samples) -> (samples,), averaging the channels."""
    return waveform.mean(dim=0) if waveform.shape[0] > 1 else waveform[0]

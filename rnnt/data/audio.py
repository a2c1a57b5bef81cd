"""Decoding audio of a record (bytes or a path, optionally a segment) to a mono float waveform."""

from __future__ import annotations

import numpy as np
import torch

from rnnt.data.audio_header import AudioError, audio_errors, counts_exactly, open_audio, readable_once
from rnnt.data.cut_short import MP3_FRAME_SAMPLES, mp3_counts_its_samples

MAX_OVERSHOOT = 0.5  # seconds a segment may end past its recording, cut there (Kaldi's extract-segments)


def segment_samples(info, start: float | None, end: float | None) -> tuple[int, int | None]:
    """The first and end sample of a segment [start, end) seconds (end None or negative: the recording's end)
    in a recording of info.frames samples, under Kaldi's extract-segments rules: a segment that starts past
    the recording, or ends more than MAX_OVERSHOOT after it, is refused; one ending less past it is cut."""
    rate, duration = info.samplerate, info.frames / info.samplerate
    first = round(min((start or 0.0) * rate, info.frames))  # (a start of 1e308 s: inf samples, round's OverflowError)
    if first < 0 or first >= info.frames:
        raise AudioError(f"the segment starts at {start} s, outside the recording's {duration:.3f} s")
    if end is None or end < 0:
        return first, None
    if end > duration + MAX_OVERSHOOT:
        raise AudioError(f"the segment ends at {end} s, more than {MAX_OVERSHOOT} s past the recording's "
                         f"{duration:.3f} s")
    return first, min(round(end * rate), info.frames)


def decodes_in_one_read(opened) -> bool:
    """Whether libsndfile decodes the file right only in one read from its start: MP3 (libsndfile 1.2's mpg123
    decodes a second read, or one after a seek, off by up to 0.28 of full scale, and says 'part2_3_length too
    large')."""
    return opened.format == "MP3"


def check_finite(waveform: torch.Tensor) -> torch.Tensor:
    """The waveform, refused where a sample is NaN or infinite (a float file's: it would make every feature,
    CMVN sum and loss it enters NaN)."""
    if waveform.is_floating_point() and not bool(torch.isfinite(waveform).all()):
        raise AudioError("some of its samples are not finite (NaN or inf)")
    return waveform


def _span(info, start: float | None, end: float | None) -> tuple[int, int]:
    """The first and end sample of [start, end) (segment_samples), the whole recording without a segment."""
    first, stop = (0, None) if start is None and (end is None or end < 0) else segment_samples(info, start, end)
    return first, info.frames if stop is None else stop


def audio_length(audio, start: float | None = None, end: float | None = None) -> tuple[int, int, int] | None:
    """(samples, sample rate, channels) that load_audio gives for the same arguments, read from the header
    alone; None where the header cannot count them exactly (counts_exactly): decode to know."""
    with audio_errors(), open_audio(audio) as opened:
        if not counts_exactly(opened) or opened.frames == 0:
            return None
        first, stop = _span(opened, start, end)
    if stop <= first:
        raise AudioError("no samples")
    return stop - first, opened.samplerate, opened.channels


def measured_length(audio) -> tuple[int, int, int]:
    """(samples, sample rate, channels) of a whole recording: from its header, or decoded where the header cannot
    count them (Ogg Vorbis, MP3); AudioError where it cannot be read."""
    counted = audio_length(audio)
    if counted is not None:
        return counted
    waveform, rate = load_audio(audio)
    return waveform.shape[1], rate, waveform.shape[0]


def load_audio(audio, start: float | None = None, end: float | None = None) -> tuple[torch.Tensor, int]:
    """(waveform (channels, samples) float32 in [-1, 1], sample rate) of bytes or a file path, or of the
    segment [start, end) seconds of it (segment_samples). An MP3 whose Xing or Info frame counts more samples than
    it decodes to (by more than a frame) is cut short (mp3_counts_its_samples)."""
    audio = readable_once(audio)  # (a pipe's bytes: read again where an MP3's tag is looked at)
    with audio_errors(), open_audio(audio) as opened:
        first, stop = _span(opened, start, end)
        skipped = first if decodes_in_one_read(opened) else 0  # decoded from the start, and dropped
        if first > skipped:
            opened.seek(first)
        samples = read_whole(opened, audio, max(stop - first, 0) + skipped)[skipped:]
    if samples.shape[0] == 0:
        raise AudioError("no samples")
    return check_finite(torch.from_numpy(np.ascontiguousarray(samples.T))), opened.samplerate


def read_whole(opened, audio, frames: int) -> np.ndarray:
    """frames (-1: all) (samples, channels) read from an open file of audio (bytes or a regular file's path:
    readable_once), float32; an MP3 whose Xing or Info frame counts more samples than it decodes to, by more than
    a frame, is cut short (libsndfile decodes what is there, and a transcript went with part of its audio)."""
    samples = opened.read(frames, dtype="float32", always_2d=True)
    counted = opened.frames if frames < 0 else min(frames, opened.frames)
    if decodes_in_one_read(opened) and samples.shape[0] + MP3_FRAME_SAMPLES < counted and \
            mp3_counts_its_samples(audio):
        raise AudioError(f"cut short: its header gives {opened.frames / opened.samplerate:.2f} s of audio, the file "
                         f"decodes to {samples.shape[0] / opened.samplerate:.2f} s")
    return samples


PCM_FULL_SCALE = {torch.int8: 128.0, torch.int16: 32768.0, torch.int32: 2.0 ** 31}  # signed PCM: -full to full


def float_samples(samples) -> torch.Tensor:
    """Samples given in memory (a tensor or a numpy array: 1-D, (channels, samples), or soundfile's (samples,
    channels), whose shorter side is the channels) as float32 (channels, samples) or (samples,) in [-1, 1]: integer
    samples (16- or 32-bit PCM; 8-bit, unsigned around 128, as WAV holds them) are scaled to that range. Samples
    that are not finite, or of a type PCM is not (int64, as a list of ints becomes, would be scaled by 2^63 into
    silence; other unsigned types than 8-bit have no middle to scale around) are refused (AudioError)."""
    waveform = torch.as_tensor(samples)
    if waveform.dim() == 2 and waveform.shape[0] > waveform.shape[1]:
        waveform = waveform.T
    if waveform.dim() not in (1, 2):
        raise AudioError(f"audio samples of shape {tuple(waveform.shape)}: want (samples,) or (channels, samples)")
    if waveform.dtype == torch.uint8:
        return (waveform.float() - 128) / 128
    if waveform.dtype in PCM_FULL_SCALE:
        return waveform.float() / PCM_FULL_SCALE[waveform.dtype]
    if not waveform.is_floating_point() or waveform.is_complex():
        raise AudioError(f"audio samples of type {str(waveform.dtype).removeprefix('torch.')}: want float in [-1, 1]"
                         " or PCM (int16, int32, int8 or uint8; e.g. numpy's .astype(np.int16) of 16-bit samples)")
    return check_finite(waveform.float())


def to_mono(waveform: torch.Tensor) -> torch.Tensor:
    """(channels, samples) -> (samples,), averaging the channels."""
    return waveform.mean(dim=0) if waveform.shape[0] > 1 else waveform[0]

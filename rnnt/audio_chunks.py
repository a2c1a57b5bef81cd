"""Audio as it comes, in chunks at the model's rate: a file cut up block by block (resampled), or raw 16-bit PCM
(or a WAV stream of any PCM or float samples, channels and rate: mixed down and resampled) read from standard
input or a pipe as it arrives; steps/transcribe.py --stream's input."""

import contextlib
import math
import os
import stat
import sys
from typing import NamedTuple

import numpy as np
import torch

from rnnt.data.audio import AudioError, float_samples
from rnnt.data.cut_short import riff_chunks
from rnnt.data.resample import StreamingResampler
from rnnt.segmenting import file_blocks


def chunks(audio, rate: int, seconds: float):
    """Mono float chunks at the model's rate: a file (its path or bytes; resampled) cut up, or raw PCM read as it
    comes from stdin (audio "-") or a pipe's path."""
    size = max(1, round(rate * seconds))
    if isinstance(audio, str) and (audio == "-" or is_pipe(audio)):
        with contextlib.nullcontext(sys.stdin.buffer) if audio == "-" else open(audio, "rb") as source:
            yield from pcm_chunks(source, rate, size, "standard input" if audio == "-" else audio)
        return
    blocks, file_rate = file_blocks(audio, seconds)  # a block at a time: an hour-long file never sits in memory whole
    if file_rate == rate:
        yield from blocks
        return
    resampler = StreamingResampler(file_rate, rate)
    for block in blocks:
        yield resampler.accept(block)
    yield resampler.finish()


def is_pipe(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


class PcmFormat(NamedTuple):
    """How a stream's samples are written: numpy's dtype of one sample ('<i3': 24-bit), channels interleaved, rate."""
    dtype: str
    channels: int
    rate: int


def pcm_chunks(source, rate: int, size: int, name: str):
    """Chunks of about size samples at rate of the PCM on source as it comes: raw 16-bit mono at rate, or after a
    WAV header (pcm_after_header), in its format (its channels averaged, its rate resampled) to the end of its data
    chunk where the header gives its size."""
    odd, left, form = pcm_after_header(source, rate, name)  # bytes of a frame split between reads: the header's rest
    frame = form.channels * (3 if form.dtype == "<i3" else np.dtype(form.dtype).itemsize)
    resampler = StreamingResampler(form.rate, rate) if form.rate != rate else None
    while left > 0 and (data := source.read(min(frame * max(1, size * form.rate // rate), left))):
        left -= len(data)
        data = odd + data
        whole = len(data) // frame * frame
        data, odd = data[:whole], data[whole:]
        samples = float_samples_of(data, form.dtype).reshape(-1, form.channels).mean(dim=1)
        yield resampler.accept(samples) if resampler else samples
    if resampler:
        yield resampler.finish()


def float_samples_of(data: bytes, dtype: str) -> torch.Tensor:
    """Samples written as dtype ('<i3': 24-bit) as float32 in [-1, 1], scaled as float_samples scales them."""
    if dtype == "<i3":  # each sample's 3 bytes under a fourth, as a 32-bit one's high bytes
        data = np.frombuffer(data, dtype=np.uint8).reshape(-1, 3)
        data = np.concatenate([np.zeros((len(data), 1), np.uint8), data], axis=1).tobytes()
        dtype = "<i4"
    return float_samples(np.frombuffer(data, dtype=dtype).copy())


UNKNOWN_SIZES = (0, 0x7FFFFFFF, 0xFFFFFFFF)  # a data chunk's size a writer to a pipe gives before it knows it
CONTAINERS = {b"fLaC": "a FLAC", b"OggS": "an Ogg", b"ID3": "an MP3", b".snd": "an AU (sox -t au)",
              b"FORM": "an AIFF", b"caff": "a CAF", b"riff": "a Wave64", b"RIFX": "a big-endian WAV"}  # first bytes
WAV_SAMPLES = {(1, 8): "u1", (1, 16): "<i2", (1, 24): "<i3", (1, 32): "<i4", (3, 32): "<f4", (3, 64): "<f8"}


def pcm_after_header(source, rate: int, name: str) -> tuple[bytes, float, PcmFormat]:
    """The first bytes of PCM on source, past a WAV header if it begins with one (arecord's default, ffmpeg's -f wav),
    the bytes of PCM left after them (a WAV's data chunk's size where its header gives one: the chunks after it, a
    LIST of tags, were decoded as audio; else to the end, inf) and their format: a WAV's, else 16-bit mono at rate.
    Another container, or a WAV of another coding (mu-law), is an AudioError (its bytes were decoded as noise)."""
    head = source.read(4)
    for magic, kind in CONTAINERS.items():
        if head.startswith(magic):
            raise AudioError(f"{name} holds {kind} stream, not raw PCM: give the file's path instead")
    if head[:1] == b"\xff" and len(head) > 1 and head[1] & 0xE0 == 0xE0:  # an MPEG audio frame's sync bits
        head += source.read(40)
        if b"Xing" in head or b"Info" in head:  # the first frame's tag, as LAME writes it (lame, ffmpeg, libsndfile)
            raise AudioError(f"{name} holds an MP3 stream, not raw PCM: give the file's path instead")
    if head not in (b"RIFF", b"RF64"):  # RF64: a WAV past 4 GB, whose data size 0xFFFFFFFF says 'read to the end'
        return head, math.inf, PcmFormat("<i2", 1, rate)
    source.read(8)  # the RIFF size and WAVE
    form = None
    for chunk, size, body in riff_chunks(source):
        if chunk == b"data" and form is not None:
            return b"", math.inf if size in UNKNOWN_SIZES else size, form
        if chunk == b"fmt ":
            form = wav_format(body, name)
    raise AudioError(f"{name}: a WAV header without its " + ("format" if form is None else "data"))


def wav_format(body: bytes, name: str) -> PcmFormat:
    """A WAV fmt chunk's sample format, channels and rate; one this reader does not decode is an AudioError."""
    kind, channels = int.from_bytes(body[:2], "little"), int.from_bytes(body[2:4], "little")
    wav_rate, bits = int.from_bytes(body[4:8], "little"), int.from_bytes(body[14:16], "little")
    if kind == 0xFFFE and len(body) >= 26:  # WAVE_FORMAT_EXTENSIBLE: the coding is its sub-format's first 2 bytes
        kind = int.from_bytes(body[24:26], "little")
    dtype = WAV_SAMPLES.get((kind, bits))
    if dtype is None or not channels or not wav_rate:
        raise AudioError(f"{name} is a WAV of coding {kind}, {bits}-bit, {channels} channel(s) at {wav_rate} Hz; "
                         "--stream - reads integer PCM of 8 to 32 bits or float samples: give the file's path instead")
    return PcmFormat(dtype, channels, wav_rate)

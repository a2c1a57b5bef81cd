"""Audio as it comes, in chunks at the model's rate: a file cut up block by block (resampled), or raw 16-bit PCM
(or a WAV stream of it) read from standard input or a pipe as it arrives; steps/transcribe.py --stream's input."""

import contextlib
import math
import os
import stat
import sys

import numpy as np
import torch

from rnnt.data.audio import AudioError
from rnnt.data.audio_header import riff_chunks
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


def pcm_chunks(source, rate: int, size: int, name: str):
    """Chunks of size samples of the raw 16-bit PCM on source (after a WAV header, pcm_after_header, to the end
    of its data chunk where the header gives its size), as it comes."""
    odd, left = pcm_after_header(source, rate, name)  # a sample split between two reads, first the header's rest
    while left > 0 and (data := source.read(min(2 * size, left))):
        left -= len(data)
        data, odd = odd + data, b""
        if len(data) % 2:
            data, odd = data[:-1], data[-1:]
        yield torch.from_numpy(np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768)


UNKNOWN_SIZES = (0, 0x7FFFFFFF, 0xFFFFFFFF)  # a data chunk's size a writer to a pipe gives before it knows it
CONTAINERS = {b"fLaC": "a FLAC", b"OggS": "an Ogg", b"ID3": "an MP3", b".snd": "an AU (sox -t au)",
              b"FORM": "an AIFF", b"caff": "a CAF", b"riff": "a Wave64", b"RIFX": "a big-endian WAV"}  # first bytes


def pcm_after_header(source, rate: int, name: str) -> tuple[bytes, float]:
    """The first bytes of raw PCM on source, past a WAV header if it begins with one (arecord's default), which
    must then be 16-bit mono PCM at rate, and the bytes of PCM left after them: a WAV's data chunk's size where
    its header gives one (the chunks after it, a LIST of tags, were decoded as audio), else to the end (inf);
    another container is an AudioError (its bytes were decoded as noise)."""
    head = source.read(4)
    for magic, kind in CONTAINERS.items():
        if head.startswith(magic):
            raise AudioError(f"{name} holds {kind} stream, not raw PCM: give the file's path instead")
    if head[:1] == b"\xff" and len(head) > 1 and head[1] & 0xE0 == 0xE0:  # an MPEG audio frame's sync bits
        head += source.read(40)
        if b"Xing" in head or b"Info" in head:  # the first frame's tag, as LAME writes it (lame, ffmpeg, libsndfile)
            raise AudioError(f"{name} holds an MP3 stream, not raw PCM: give the file's path instead")
    if head not in (b"RIFF", b"RF64"):  # RF64: a WAV past 4 GB, whose data size 0xFFFFFFFF says 'read to the end'
        return head, math.inf
    source.read(8)  # the RIFF size and WAVE
    for chunk, size, body in riff_chunks(source):
        if chunk == b"data":
            return b"", math.inf if size in UNKNOWN_SIZES else size
        if chunk == b"fmt ":
            kind, channels, wav_rate = int.from_bytes(body[:2], "little"), body[2], int.from_bytes(body[4:8], "little")
            bits = int.from_bytes(body[14:16], "little")
            if kind not in (1, 0xFFFE) or (channels, wav_rate, bits) != (1, rate, 16):
                raise AudioError(f"{name} is a WAV of {channels} channel(s) at {wav_rate} Hz, {bits}-bit; "
                                 f"--stream - takes 16-bit mono PCM at the model's {rate} Hz")
    raise AudioError(f"{name}: a WAV header without its data")

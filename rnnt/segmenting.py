"""Long recordings in pieces: cut at the quietest moments into segments of at most a given length, each
decoded alone (a few at a time, in a batch), so that memory is bounded by the segments and time grows linearly
with the recording.
For any model (a bidirectional one cannot stream); a unidirectional one can also stream
(rnnt.streaming).

The audio is read block by block and only the samples of the segment being formed are kept. A segment
ends at the quietest 100 ms (mean square) in the last third of its allowed length, so that cuts fall
between words wherever the speaker pauses.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator

import numpy as np
import soundfile
import torch

from rnnt.data.audio import AudioError, decodes_in_one_read, read_whole, to_mono
from rnnt.data.audio_header import audio_errors, open_audio, readable_once
from rnnt.data.stages import TooShort


def quietest_cut(samples: torch.Tensor, rate: int, earliest: int) -> int:
    """The sample at the middle of the quietest 100 ms window starting at or after `earliest`."""
    window = max(1, rate // 10)
    tail = samples[earliest:]
    if tail.shape[0] <= window:
        return samples.shape[0]
    energy = tail.square().unfold(0, window, max(1, window // 4)).mean(dim=1)
    return earliest + int(energy.argmin()) * max(1, window // 4) + window // 2


def segments(blocks: Iterable[torch.Tensor], rate: int, max_seconds: float) -> Iterator[tuple[float, torch.Tensor]]:
    """(start in seconds, mono samples) of each segment, from blocks of mono samples. A last piece shorter than
    the 100 ms a cut is searched in joins the segment before it: alone (a limit of 0.3 s or less cuts at the
    limit) it could be a few samples, too short for one analysis window, which failed the whole recording."""
    longest = max(1, round(max_seconds * rate))
    pending, start = torch.zeros(0), 0
    held: tuple[int, torch.Tensor] | None = None  # the segment cut last, yielded once the next one is known
    for block in blocks:
        pending = torch.cat([pending, block])
        while pending.shape[0] > longest:
            cut = quietest_cut(pending[:longest], rate, longest * 2 // 3)
            if held is not None:
                yield held[0] / rate, held[1]
            held, pending, start = (start, pending[:cut]), pending[cut:], start + cut
    if held is not None and pending.shape[0] < rate // 10:
        held, pending = (held[0], torch.cat([held[1], pending])), pending[:0]
    if held is not None:
        yield held[0] / rate, held[1]
    if pending.shape[0]:
        yield start / rate, pending


def file_blocks(audio, seconds: float = 1.0) -> tuple[Iterator[torch.Tensor], int]:
    """Mono blocks of a file (a path or bytes) as read (not all in memory at once, but for a pipe's path and a WAV
    whose data size was left 0, which open_audio reads whole, and an MP3: decodes_in_one_read), and its sample
    rate; a file of no samples, or one that cannot be decoded on the way (cut short, say), is an AudioError as
    load_audio's."""
    audio = readable_once(audio)  # (a pipe's bytes: an MP3's tag read again, read_whole)
    opened = open_audio(audio)
    if opened.frames == 0:
        opened.close()
        raise AudioError("no samples")
    return _decoded_blocks(opened, audio, max(1, round(seconds * opened.samplerate))), opened.samplerate


def _decoded_blocks(opened: soundfile.SoundFile, audio, size: int) -> Iterator[torch.Tensor]:
    """Read, not SoundFile.blocks: that one refuses a file libsndfile cannot seek in (GSM 6.10, G.721 and other
    telephony codecs in WAV, AIFF or AU: 'frames must be specified for non-seekable files'), a traceback."""
    with opened:
        whole = None
        if decodes_in_one_read(opened):  # (MP3: the whole file decoded in memory, then cut up)
            with audio_errors():
                whole = read_whole(opened, audio, -1)
        for first in itertools.count(0, size):
            with audio_errors():  # the decoding's errors alone
                block = opened.read(size, dtype="float32", always_2d=True) if whole is None else \
                    whole[first:first + size]
            if not block.shape[0]:
                return
            yield to_mono(torch.from_numpy(np.ascontiguousarray(block.T)))


def transcribe_in_segments(transcriber, audio, max_seconds: float, method: str = "greedy",
                           beam: int | None = None, batch_size: int = 1):
    """The Transcript of a whole file (a path or bytes) decoded segment by segment, batch_size segments at a time
    (memory bounded by them); word times count from its start."""
    from rnnt.transcriber import Transcript

    blocks, rate = file_blocks(audio)
    texts, words, score = [], [], 0.0
    pending: list[tuple[float, tuple]] = []  # each segment's start and its features

    def decode_pending() -> None:
        nonlocal score
        results = transcriber.transcribe_prepared([prepared for _, prepared in pending], method, beam,
                                                  batch_size=batch_size, max_seconds=batch_size * max_seconds)
        for (start, (_, seconds)), result in zip(pending, results):
            texts.append(result.text)  # an end within its segment, once rounded: rounded twice (in the segment, then
            words.extend({**w, "start": round(w["start"] + start, 3),  # after it) one passed the next's start
                          "end": round(min(w["end"] + start, start + seconds), 3)} for w in result.words)
            score += result.score
        pending.clear()

    for start, samples in segments(blocks, rate, max_seconds):
        try:
            pending.append((start, transcriber.prepared((samples, rate))))
        except TooShort:  # a last piece of 100 ms or more, too short for an encoder that takes more (a conv front
            if not start:  # end of 3 layers: 150 ms) says nothing, as in the whole recording; a recording that short
                raise  # is refused
        if len(pending) == batch_size:
            decode_pending()
    decode_pending()
    return Transcript(" ".join(t for t in texts if t), words, score)

"""Recognition while the audio arrives: audio chunks in, partial results out, the final result equal to
offline greedy search over the whole audio.

Each chunk goes through fbank (rnnt.data.streaming_fbank), CMVN and frame stacking as far as whole
stacked frames allow; the encoder runs on every whole group of time_reduction of them (the conv front
end's strides times stack_time), carrying its LSTM states, a conv front end reading the frames of its
overlap again; greedy search goes on from where the last chunk left it. finish() feeds
data.tail_silence of silence, as offline decoding appends it, then runs what is left, padded with zeros
as the offline front end pads a sequence's end. Memory stays bounded however long the audio.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch

from rnnt.data.audio import AudioError, float_samples
from rnnt.data.stacking import stack_frames
from rnnt.data.streaming_fbank import StreamingFbank
from rnnt.search import Hypothesis, greedy_search, start_hypotheses


class Partial:
    """The result so far: its text, whether it is the last, and its words with their times; text and words are
    made when first read (each is O(transcript): a chunk's result costs nothing until read)."""

    def __init__(self, text: str | Callable[[], str], words: list[dict] | Callable[[], list[dict]], final: bool):
        self.final, self._text, self._words = final, text, words

    @functools.cached_property
    def text(self) -> str:
        return self._text() if callable(self._text) else self._text

    @functools.cached_property
    def words(self) -> list[dict]:
        return self._words() if callable(self._words) else self._words

    def __eq__(self, other) -> bool:
        return isinstance(other, Partial) and (self.text, self.words, self.final) == (other.text, other.words,
                                                                                      other.final)

    def __repr__(self) -> str:
        return f"Partial(text={self.text!r}, final={self.final})"


def stream_refusals(experiment, model) -> list[str]:
    """Why this encoder and front end cannot run chunk by chunk (here or exported); empty when they can."""
    data, why = experiment.data, []
    if model.encoder.stream_refusal:
        why.append(model.encoder.stream_refusal)
    if data.stack != data.subsample:
        why.append(f"data.stack {data.stack} != data.subsample {data.subsample}: overlapping stacked frames cannot "
                   "stream")
    return why


def stream_unit_and_overlap(experiment, model) -> tuple[int, int]:
    """The fbank frames a stream encodes as one (a chunk is a whole number of them): an encoder frame's, times
    the encoder's stream_chunk (a streaming Conformer's chunk_frames); and the fbank frames a chunk reads again
    from the one before (the conv front end's overlap, 0 without one)."""
    subsample, encoder = experiment.data.subsample, model.encoder
    return (subsample * model.config.encoder.time_reduction * encoder.stream_chunk,
            subsample * encoder.stream_overlap)


class Stream:
    def __init__(self, transcriber):
        why = stream_refusals(transcriber.experiment, transcriber.model)
        if not transcriber.model.is_transducer:
            why.insert(0, "streaming decodes a transducer with greedy search; this is a CTC model")
        if why:
            raise ValueError("; ".join(why))
        self.transcriber = transcriber
        data, model = transcriber.experiment.data, transcriber.model
        self.fbank = StreamingFbank(data.features.preset, data.sample_rate, data.features.num_mel_bins)
        self.unit, self.overlap = stream_unit_and_overlap(transcriber.experiment, model)
        self.pending = torch.zeros(0, data.features.num_mel_bins)  # fbank frames not yet encoded (or again)
        self.state = model.encoder.initial_state(1, transcriber.device)
        self.hypothesis = start_hypotheses(model, 1, transcriber.device)[0]
        self.encoder_frames = 0
        self.finished = False
        self.samples, self.finishing = 0, False  # the audio's samples fed, and whether finish() feeds silence now

    @property
    def sample_rate(self) -> int:
        return self.transcriber.experiment.data.sample_rate

    def accept(self, samples) -> Partial:
        """Mono samples at the model's sample rate (a tensor or numpy array; float in [-1, 1], or integer PCM,
        scaled as rnnt.data.audio.float_samples does; a block of one channel, as sounddevice gives (samples, 1),
        taken as such) -> the result so far. Samples that are not finite are refused (rnnt.data.audio.AudioError):
        they would make every later frame's features NaN."""
        if self.finished:
            raise RuntimeError("the stream is finished")
        samples = float_samples(samples)
        if samples.dim() == 2 and samples.shape[0] == 1:  # a mono device's (n, 1) blocks were refused
            samples = samples[0]
        if samples.dim() != 1:
            raise AudioError(f"a stream takes mono samples, got shape {tuple(samples.shape)}")
        self.samples += samples.shape[-1] if not self.finishing else 0
        self._add(self.fbank.accept(samples))
        whole = max(self.pending.shape[0] - self.overlap, 0) // self.unit * self.unit
        if whole:
            self._encode(self.pending[:whole + self.overlap])
            self.pending = self.pending[whole:]
        return self.result(final=False)

    def finish(self) -> Partial:
        """The end of the audio: the last frames decoded -> the final result."""
        if not self.finished:
            data = self.transcriber.experiment.data
            if data.tail_silence > 0:  # as offline decoding appends it
                self.finishing = True
                self.accept(torch.zeros(round(data.tail_silence * data.sample_rate)))
            self._add(self.fbank.finish())
            if self.pending.shape[0]:
                self._encode(self.pending)
            self.finished = True
        return self.result(final=True)

    def result(self, final: bool) -> Partial:
        hypothesis, units = self.hypothesis, len(self.hypothesis.tokens)  # as it is now: greedy search extends
        duration = self.samples / self.sample_rate  # the audio's, not the silence finish() appends

        def now() -> Hypothesis:  # its lists in place as the stream goes on
            posteriors = hypothesis.unit_posteriors[:units] if hypothesis.unit_posteriors is not None else None
            return Hypothesis(hypothesis.tokens[:units], hypothesis.frames[:units], hypothesis.score,
                              unit_posteriors=posteriors)

        return Partial(lambda: self.transcriber.tokenizer.text(now()),
                       lambda: self.transcriber.words(now(), duration), final)

    def _add(self, feats: torch.Tensor) -> None:
        cmvn = self.transcriber.cmvn
        if cmvn is not None:
            feats = (feats - cmvn[0]) / cmvn[1]
        self.pending = torch.cat([self.pending, feats])

    @torch.no_grad()
    def _encode(self, feats: torch.Tensor) -> None:
        data, model = self.transcriber.experiment.data, self.transcriber.model
        stacked = stack_frames(feats, data.stack, data.subsample).to(self.transcriber.device)
        enc, *self.state = model.encoder.stream(stacked[None], *self.state)
        if not enc.shape[1]:  # the end, too short for the conv front end: offline drops these frames too
            return
        lengths = torch.tensor([enc.shape[1]], device=enc.device)
        self.hypothesis = greedy_search(model, enc, lengths, resume=[self.hypothesis],
                                        frame_offset=self.encoder_frames)[0]
        self.encoder_frames += enc.shape[1]


class StreamLines:
    """A stream's transcript cut into lines at its pauses, as a live caption shows it: the current line grows
    with each unit, and ends where endpoint_seconds of audio brought no unit (sherpa-onnx's trailing silence
    rule), whether that pause is still going on or speech came after it within the same chunk (then it was missed,
    and where a line ended hung on the chunk size); or, speech going on without such a pause, before the first
    word that starts line_seconds or more after the line's first unit (sherpa-onnx's utterance length rule; 0: no
    bound). The next starts empty. A line's text is decoded from its own units alone, so that each chunk costs the
    same an hour in as at the start (the whole transcript's text is O(transcript))."""

    def __init__(self, stream: Stream, endpoint_seconds: float, frame_seconds: float, line_seconds: float = 20.0):
        self.stream, self.endpoint_seconds, self.frame_seconds = stream, endpoint_seconds, frame_seconds
        self.line_seconds = line_seconds
        self.first = 0  # the current line's first unit
        self.checked = 0  # the units up to which the pauses between them were looked at
        self.text_of = (0, "")  # (units, the current line's text when it had them)

    def current(self) -> str:
        """The current line's text."""
        tokens = self.stream.hypothesis.tokens
        if self.text_of[0] != len(tokens):
            self.text_of = (len(tokens), self._text(len(tokens)))
        return self.text_of[1]

    def _text(self, end: int) -> str:
        return self.stream.transcriber.tokenizer.decode(self.stream.hypothesis.tokens[self.first:end]).strip()

    def _pause(self, after_frame: int, until_frame: int) -> bool:
        return bool(self.endpoint_seconds) and (until_frame - after_frame - 1) * self.frame_seconds >= \
            self.endpoint_seconds

    def _ends_before(self, unit: int) -> bool:
        """Whether the line is long enough to end before this unit, a word's start."""
        hypothesis = self.stream.hypothesis
        return bool(self.line_seconds) and self.stream.transcriber.tokenizer.starts_word(hypothesis.tokens[unit]) \
            and (hypothesis.frames[unit] - hypothesis.frames[self.first]) * self.frame_seconds >= self.line_seconds

    def ended(self) -> list[tuple[str, float, float]]:
        """The lines (text, start, end seconds of their units) that pauses or their length have ended since the
        last call, in order (the next line starts after each); a line of no text goes on into the next."""
        hypothesis, lines = self.stream.hypothesis, []
        frames, units = hypothesis.frames, len(hypothesis.tokens)
        for unit in range(max(self.first, self.checked), units - 1):  # pauses with speech after them
            if (self._pause(frames[unit], frames[unit + 1]) or self._ends_before(unit + 1)) and \
                    (text := self._text(unit + 1)):
                lines.append((text, frames[self.first] * self.frame_seconds, (frames[unit] + 1) * self.frame_seconds))
                self.first = unit + 1
        self.checked = max(units - 1, 0)
        if units > self.first and self._pause(frames[-1], self.stream.encoder_frames) and (text := self._text(units)):
            lines.append((text, frames[self.first] * self.frame_seconds, (frames[-1] + 1) * self.frame_seconds))
            self.first = units  # the pause still going on
        if lines:
            self.text_of = (-1, "")
        return lines

"""Noise and reverberation added to training audio: recordings of noise (MUSAN's noise, music and speech, as
Kaldi's data dirs list them) mixed in at a signal-to-noise ratio drawn per utterance, and room impulse responses
(OpenSLR 26/28's) convolved with it.

Each comes as a Kaldi wav.scp of files ('<id> <path>' a line); a line whose recording cannot be read is named by
its file and line, and the utterances that draw it go without (it keeps its place in the draw, so that a process
that cannot read it draws as the others do). An utterance draws from its own generator (seed, epoch, key): the
same noise at the same offset and level on every rank and worker, and again on a resumed epoch. Reverberation
comes first, then noise, as Kaldi's wav-reverberate adds its noise to the reverberated signal.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
from collections import OrderedDict
from dataclasses import dataclass

import torch

from rnnt.data.audio import AudioError, load_audio, measured_length, to_mono
from rnnt.data.noise_config import NoiseConfig, ReverbConfig, check_noise_configs
from rnnt.data.resample import resample
from rnnt.datadir.table import read_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recording:
    path: str
    samples: int  # at its own rate
    rate: int
    unreadable: str = ""  # why its header did not read (its line named when the list was read): drawn, none


def read_recordings(wav_scp: str, key: str, warnings: list[str]) -> list[Recording]:
    """The recordings a wav.scp lists, in its order; a line whose header does not read is named by file and line in
    warnings, and kept as a Recording that says why (the utterances that draw it go without: drawn among all the
    lines, the noise of every other utterance is the same where another process reads it). ValueError where none
    reads (key: the config key or option that named the file)."""
    recordings = []
    for line in read_table(wav_scp).values():
        why = "a piped command: list files (write its output to one first)" if line.value.endswith("|") else ""
        if not why:
            try:
                samples, rate, _ = measured_length(line.value)
                recordings.append(Recording(line.value, samples, rate))
                continue
            except (AudioError, OSError) as error:
                why = f"cannot read {line.value} ({error})"
        warnings.append(f"{line.where}: {key}: {why}; the utterances that draw it go without")
        recordings.append(Recording(line.value, 0, 0, f"{line.where}: {why}"))
    bad = sum(bool(r.unreadable) for r in recordings)
    if bad == len(recordings):
        raise ValueError(f"{key} {wav_scp}: no recording it lists can be read"
                         + (f": {'; '.join(warnings[-3:])}" if bad else " (it is empty)"))
    if bad:
        warnings.append(f"{key}: {bad} of {len(recordings)} recordings cannot be read (named above)")
    return recordings


def training_augmenter(config) -> Augmenter | None:
    """The Augmenter of a DataConfig's data.noise and data.reverb (None without either); ValueError where a list
    has no readable recording. The lines its lists left out are in its warnings, for the caller to log (a trainer
    builds it before anything is set aside, and logs them once its log is set up)."""
    if config.noise is None and config.reverb is None:
        return None
    return Augmenter(config.noise, config.reverb, config.sample_rate)


class RecordingCache:
    """Recordings decoded (mono, at their own rate), the most recently used kept within a budget: an utterance's
    noise cut from memory is the same as cut from the file, only sooner (an Ogg Opus seek decodes its way there).
    A file is known by its path and what stat says of it: one written again since is decoded again."""

    def __init__(self, megabytes: int):
        self.budget, self.size = megabytes * 2**20, 0
        self.held: OrderedDict[tuple, torch.Tensor] = OrderedDict()

    def holds(self, recording: Recording) -> bool:
        """Whether the recording fits the budget: cut from memory (decoded whole the first time)."""
        return 4 * recording.samples <= self.budget

    def get(self, path: str) -> torch.Tensor:
        status = os.stat(path)
        key = path, status.st_size, status.st_mtime_ns, status.st_ino
        if key in self.held:
            self.held.move_to_end(key)
            return self.held[key]
        waveform = to_mono(load_audio(path)[0])
        self.held[key] = waveform
        self.size += 4 * waveform.shape[0]
        while self.size > self.budget:
            self.size -= 4 * self.held.popitem(last=False)[1].shape[0]
        return waveform


class Augmenter:
    """Reverberation and noise of the training utterances (data.reverb, data.noise): augment(waveform,
    generator) -> the waveform changed (or not: each has its probability), and what was done."""

    def __init__(self, noise: NoiseConfig | None, reverb: ReverbConfig | None, rate: int,
                 keys: tuple[str, str] = ("data.noise.wav_scp", "data.reverb.wav_scp")):
        """Reads the lists' headers: ValueError where one has no readable recording (named by keys); the lines
        left out are in self.warnings, for the caller to log once its log is set up."""
        check_noise_configs(noise, reverb)
        self.noise, self.reverb, self.rate = noise, reverb, rate
        self.warnings: list[str] = []
        self.noises = read_recordings(noise.wav_scp, keys[0], self.warnings) if noise else []
        self.rooms = read_recordings(reverb.wav_scp, keys[1], self.warnings) if reverb else []
        # recordings gone since, named once (those whose lines did not read were named with the lines)
        self.unreadable: set[str] = {r.unreadable for r in self.noises + self.rooms if r.unreadable}
        self.noise_cache = RecordingCache(noise.cache_mb if noise else 0)
        self.room_cache = RecordingCache(reverb.cache_mb if reverb else 0)

    def log_warnings(self) -> None:
        """The lines its lists left out, logged."""
        for warning in self.warnings:
            log.warning("%s", warning)

    def at_rate(self, rate: int) -> Augmenter:
        """This augmenter for audio at another rate: the same recordings and caches (which hold them at their own)."""
        other = copy.copy(self)
        other.rate = rate
        return other

    def augment(self, waveform: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, list[str]]:
        """A recording of noise or of a room that cannot be read now (gone since) is named, and the utterance
        goes on without it: the utterance itself is good."""
        done = []
        draws = torch.rand(2, generator=generator, dtype=torch.float64).tolist()  # one each, whether used or not
        if self.reverb and draws[0] < self.reverb.prob:
            room = self.rooms[int(torch.randint(len(self.rooms), (1,), generator=generator))]
            with self.named_if_unreadable("data.reverb.wav_scp", done):
                waveform = reverberate(waveform, self.recording(room, self.room_cache))
                done.append("reverb")
        if self.noise and draws[1] < self.noise.prob:
            low, high = self.noise.snr
            snr = low + (high - low) * float(torch.rand(1, generator=generator, dtype=torch.float64))
            count = int(torch.randint(self.noise.count[0], self.noise.count[1] + 1, (1,), generator=generator))
            picks = torch.randint(len(self.noises), (count,), generator=generator).tolist()
            with self.named_if_unreadable("data.noise.wav_scp", done):
                noise = sum(unit_power(self.noise_segment(self.noises[i], waveform.shape[0], generator))
                            for i in picks)
                noisy = add_at_snr(waveform, noise, snr)
                if noisy is not waveform:  # (silent noise, or speech: nothing added)
                    waveform = noisy
                    done.append("noise")
        return waveform, done

    @contextlib.contextmanager
    def named_if_unreadable(self, key: str, done: list[str]):
        """A recording of key's list that cannot be read now: named the first time, counted as what was not done,
        and the utterance goes on without it."""
        try:
            yield
        except (AudioError, OSError) as error:
            if str(error) not in self.unreadable:
                self.unreadable.add(str(error))
                log.warning("%s: a recording cannot be read now, left out of the utterances that draw it (%s)",
                            key, error)
            done.append(f"unreadable {key}")

    def recording(self, recording: Recording, cache: RecordingCache, first: int = 0, end: int | None = None
                  ) -> torch.Tensor:
        """The recording's samples [first, end) of its own rate (all of it by default), mono at the pipeline's
        rate: cut from the cache where it fits there, else read from the file (AudioError: one whose list line
        did not read)."""
        if recording.unreadable:
            raise AudioError(recording.unreadable)
        if cache.holds(recording):
            samples = cache.get(recording.path)[first:end]
        else:
            span = () if end is None else (first / recording.rate, end / recording.rate)
            samples = to_mono(load_audio(recording.path, *span)[0])
        return resample(samples, recording.rate, self.rate)

    def noise_segment(self, recording: Recording, samples: int, generator: torch.Generator) -> torch.Tensor:
        """`samples` of the recording at the pipeline's rate from an offset drawn in it; a recording shorter than
        that is repeated from an offset drawn, as a loop."""
        wanted = math.ceil(samples * recording.rate / self.rate) + 1  # at its own rate, a sample more to resample
        offset = int(torch.randint(max(recording.samples - wanted, 0) + 1, (1,), generator=generator))
        if recording.samples >= wanted:
            piece = self.recording(recording, self.noise_cache, offset, offset + wanted)
        else:
            whole = self.recording(recording, self.noise_cache)
            start = int(torch.randint(whole.shape[0], (1,), generator=generator))
            piece = whole.roll(-start).repeat(math.ceil(samples / whole.shape[0]))
        return torch.nn.functional.pad(piece[:samples], (0, max(samples - piece.shape[0], 0)))


def power(signal: torch.Tensor) -> float:
    """The signal's mean square, in float64."""
    return float(signal.double().pow(2).mean())


def unit_power(signal: torch.Tensor) -> torch.Tensor:
    """The signal scaled to a mean square of 1 (digital silence stays 0): recordings summed as equals."""
    mean_square = power(signal)
    return signal / math.sqrt(mean_square) if mean_square > 0 else signal


def add_at_snr(signal: torch.Tensor, noise: torch.Tensor, snr_db: float) -> torch.Tensor:
    """signal + noise scaled so that signal's power over the noise's is snr_db (either silent: signal itself, the
    same tensor)."""
    signal_power, noise_power = power(signal), power(noise)
    if signal_power == 0 or noise_power == 0:
        return signal
    return signal + noise * math.sqrt(signal_power / (noise_power * 10 ** (snr_db / 10)))


def reverberate(signal: torch.Tensor, impulse: torch.Tensor) -> torch.Tensor:
    """signal convolved with a room's impulse response, aligned on its direct path (its largest tap: the speech
    does not start later) and cut to the signal's length, at the signal's power (Kaldi's wav-reverberate
    --normalize-output)."""
    peak = int(impulse.abs().argmax())
    size = signal.shape[0] + impulse.shape[0] - 1
    length = 1 << (size - 1).bit_length()
    wet = torch.fft.irfft(torch.fft.rfft(signal.double(), length) * torch.fft.rfft(impulse.double(), length), length)
    wet = wet[peak:peak + signal.shape[0]]
    before, after = power(signal), power(wet)
    return (wet * math.sqrt(before / after) if after > 0 else wet).to(signal.dtype)

"""What one pass of the data pipeline did to the audio, logged as one line when the pass ends.

The rates it found and resampled (as read, unless data.cache_audio_mb kept them from a pass before: cheaper
done once in data preparation, steps/make_shards.py --resample), the
recordings mixed down to mono, the ones it could not decode, and those the length filters dropped, each
reason with the config key that set the limit.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

log = logging.getLogger("rnnt.data")


def rates_text(rates: Counter) -> str:
    """'4 at 8000 Hz, 1 at 22050 Hz'."""
    return ", ".join(f"{n} at {rate} Hz" for rate, n in sorted(rates.items()))


@dataclass
class DataReport:
    name: str  # which pass: 'train.list, epoch 3, rank 0 worker 1'
    target_rate: int
    read: int = 0
    rates: Counter = field(default_factory=Counter)
    mixed_down: int = 0
    from_memory: int = 0  # at another rate in the file, taken resampled from data.cache_audio_mb's memory
    undecodable: int = 0
    dropped: Counter = field(default_factory=Counter)
    shard_skips: Counter = field(default_factory=Counter)  # what reading the shards skipped, by why
    augmented: Counter = field(default_factory=Counter)  # utterances reverberated, given noise (rnnt.data.noise)
    oversized: int = 0  # utterances longer than data.batch.max_frames, each batched alone
    with_unknown: int = 0  # utterances whose units hold <unk> (rnnt.data.stages.tokenize)

    def audio_read(self, rate: int, channels: int, from_memory: bool = False) -> None:
        self.read += 1
        self.rates[rate] += 1
        self.mixed_down += channels > 1
        self.from_memory += from_memory and rate != self.target_rate

    def read_in_vain(self, rate: int, channels: int) -> None:
        """Takes back audio_read for audio whose header read but whose samples then did not decode."""
        self.read -= 1
        self.rates[rate] -= 1
        self.rates += Counter()  # drops a rate counted down to 0
        self.mixed_down -= channels > 1

    def drop(self, reason: str) -> None:
        self.dropped[reason] += 1

    def batched_alone(self) -> None:
        """An utterance longer than data.batch.max_frames, a dynamic batch of its own."""
        self.oversized += 1

    def shard_skipped(self, what: str) -> None:
        self.shard_skips[what] += 1

    def line(self) -> str:
        parts = [f"{self.read + self.undecodable} utterances: {rates_text(self.rates) or 'none decoded'}"]
        resampled = sum(n for rate, n in self.rates.items() if rate != self.target_rate) - self.from_memory
        if resampled:
            parts.append(f"{resampled} resampled to data.sample_rate {self.target_rate} Hz as read (once for all: "
                         "steps/make_shards.py --resample)")
        if self.from_memory:
            parts.append(f"{self.from_memory} at data.sample_rate {self.target_rate} Hz from memory, resampled when "
                         "first read (data.cache_audio_mb)")
        if self.mixed_down:
            parts.append(f"{self.mixed_down} mixed down to mono")
        if self.undecodable:
            parts.append(f"{self.undecodable} skipped, their audio unreadable (named above)")
        if self.shard_skips:
            parts.append("skipped reading the shards (named above): " + ", ".join(
                f"{n} {what}" for what, n in sorted(self.shard_skips.items())))
        augmented = {"reverb": "reverberated (data.reverb)", "noise": "with noise (data.noise)"}
        parts += [f"{self.augmented[key]} {what}" for key, what in augmented.items() if self.augmented[key]]
        parts += [f"{n} without the {key.removeprefix('unreadable ')} recording drawn, unreadable (named above)"
                  for key, n in sorted(self.augmented.items()) if key.startswith("unreadable ") and n]
        if self.with_unknown:
            parts.append(f"{self.with_unknown} with <unk> among their units (a word or character the units lack: "
                         "see the lang dir's units.txt or lexicon; or <unk> in the text)")
        if self.oversized:
            parts.append(f"{self.oversized} longer than data.batch.max_frames, each a batch of its own (data.filter's "
                         "max_duration drops them)")
        dropped = sum(self.dropped.values())
        reasons = "; ".join(f"{n} {why}" for why, n in sorted(self.dropped.items()))
        parts.append(f"{dropped} dropped by the filters ({reasons})" if dropped else "none dropped by the filters")
        return f"data ({self.name}): " + "; ".join(parts)

    def log(self) -> None:
        log.info("%s", self.line())

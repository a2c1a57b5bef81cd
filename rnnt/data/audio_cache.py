"""Decoded audio kept in memory from one epoch to the next (data.cache_audio_mb).

A small corpus is read, decoded (FLAC, say) and resampled again every epoch for the same samples: about a
tenth of an epoch of a 5 M-parameter model on two CPU cores. The cache keeps each utterance's waveform at
the pipeline's rate after its first pass, up to a budget of bytes; utterances beyond the budget are decoded
every time, as without it. The waveforms are those decoding gives, so training is unchanged to the bit.
"""

from __future__ import annotations

import torch


class AudioCache:
    def __init__(self, max_bytes: int):
        self.max_bytes, self.used = max_bytes, 0
        self.entries: dict[tuple, tuple[torch.Tensor, int, int]] = {}
        self.shards: dict[str, list[dict]] = {}  # a shard read whole and clean: its utterances, no audio bytes
        self.full = False  # an utterance's waveform did not fit

    @staticmethod
    def key_of(record: dict) -> tuple:
        """An utterance's identity: its key, where its audio came from (a file, a shard's member: two lists'
        shards can hold the same key) and its segment where the list names one."""
        return record["key"], record.get("source"), record.get("start"), record.get("end")

    def get(self, record: dict) -> tuple[torch.Tensor, int, int] | None:
        """(waveform at the pipeline's rate, the file's rate, its channels), or None when not kept."""
        return self.entries.get(self.key_of(record))

    def put(self, record: dict, waveform: torch.Tensor, file_rate: int, channels: int) -> None:
        size = waveform.numel() * waveform.element_size()
        key = self.key_of(record)
        if key not in self.entries and self.used + size <= self.max_bytes:
            self.entries[key] = (waveform, file_rate, channels)
            self.used += size
        elif key not in self.entries:
            self.full = True

    def shard_utterances(self, url: str) -> list[dict] | None:
        """A shard's utterances as last read whole (their audio bytes left out), where every one's waveform is
        kept: the shard need not be opened again (reading fsdd's took a tenth of its epoch). None: read it (an
        utterance the filters always drop is never decoded, and its shard is read every epoch)."""
        utterances = self.shards.get(url)
        if utterances is not None and not all(self.key_of(u) in self.entries for u in utterances):
            del self.shards[url]  # remembered again while the budget has room (and its audio may come in)
            return None
        return utterances

    def remember_shard(self, url: str, utterances: list[dict]) -> None:
        """Remembers a shard's utterances until a waveform did not fit the budget: from then on a shard not whole
        in the cache may never be, and its records would be kept for nothing."""
        if not self.full:
            self.shards[url] = utterances

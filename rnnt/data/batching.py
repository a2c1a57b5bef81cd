"""Grouping stages: shuffle buffer -> sort buffer -> batches -> padded tensors."""

from __future__ import annotations

import random
from typing import Callable, Iterable, Iterator

import torch


def shuffle_buffer(records: Iterable[dict], size: int, rng: random.Random) -> Iterator[dict]:
    """Yields records in a random order drawn from a window of `size` records (0: unchanged)."""
    if size <= 1:
        yield from records
        return
    buffer: list[dict] = []
    for record in records:
        buffer.append(record)
        if len(buffer) >= size:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


def sort_buffer(records: Iterable[dict], size: int) -> Iterator[dict]:
    """Sorts each window of `size` records by length, so batches hold similar lengths (0: unchanged).

    Windows alternate ascending and descending, so where a batch spans two windows it joins the long
    end of one to the long end of the next instead of the longest utterances to the shortest.
    """
    if size <= 1:
        yield from records
        return
    buffer: list[dict] = []
    descending = False
    for record in records:
        buffer.append(record)
        if len(buffer) >= size:
            yield from sorted(buffer, key=lambda r: r["num_frames"], reverse=descending)
            buffer, descending = [], not descending
    yield from sorted(buffer, key=lambda r: r["num_frames"], reverse=descending)


def static_batches(records: Iterable[dict], batch_size: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for record in records:
        batch.append(record)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def dynamic_batches(records: Iterable[dict], max_frames: int, max_batch_size: int,
                    oversized: Callable[[], None] = lambda: None) -> Iterator[list[dict]]:
    """Batches whose padded size (longest input frames x count) stays within max_frames, but for an utterance
    longer than that alone, a batch of its own (as WeNet's and Lhotse's dynamic batches keep one; data.filter's
    max_duration drops them), for which oversized() is called."""
    batch: list[dict] = []
    longest = 0
    for record in records:
        frames = record["input_frames"]
        if frames > max_frames:
            oversized()
        if batch and (max(longest, frames) * (len(batch) + 1) > max_frames or len(batch) == max_batch_size):
            yield batch
            batch, longest = [], 0
        batch.append(record)
        longest = max(longest, frames)
    if batch:
        yield batch


def pad_batch(keys: list[str], feats: list[torch.Tensor], tokens: list[list[int]],
              texts: list[str] | None = None, seconds: list[float] | None = None) -> dict:
    """{'keys', 'texts', 'feats' (B, T, D), 'feat_lens' (B,), 'tokens' (B, U) padded with 0, 'token_lens' (B,),
    'seconds' (each utterance's own audio, the data.tail_silence appended to it not counted: a list of floats, or
    [] where not given)}."""
    feat_lens = torch.tensor([f.shape[0] for f in feats], dtype=torch.long)
    token_lens = torch.tensor([len(t) for t in tokens], dtype=torch.long)
    padded = feats[0].new_zeros((len(feats), int(feat_lens.max()), feats[0].shape[1]))
    for i, f in enumerate(feats):
        padded[i, : f.shape[0]] = f
    token_tensor = torch.zeros((len(tokens), max(int(token_lens.max()), 1)), dtype=torch.long)
    for i, t in enumerate(tokens):
        token_tensor[i, : len(t)] = torch.tensor(t, dtype=torch.long)
    return {"keys": keys, "texts": texts or [], "feats": padded, "feat_lens": feat_lens, "tokens": token_tensor,
            "token_lens": token_lens, "seconds": seconds or []}

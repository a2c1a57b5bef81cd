"""Writing a generated recording so that a rerun that makes the same one leaves its file alone."""

from __future__ import annotations

import io
import os

import numpy as np
import soundfile


def write_unless_same(path: str, samples: np.ndarray, rate: int) -> None:
    """Writes the samples as a 16-bit wav, unless the file holds those bytes already: a rerun (the same seed, the
    same recordings) leaves it untouched, its time too, so the shards made from it are reused and nothing trains
    again (a new time is a new shard plan: every shard written again)."""
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, subtype="PCM_16", format="WAV")
    data = buffer.getvalue()
    if os.path.isfile(path) and os.path.getsize(path) == len(data):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    with open(path, "wb") as f:
        f.write(data)

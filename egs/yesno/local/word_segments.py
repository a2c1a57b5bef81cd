"""Finds the spoken words of a yesno recording by energy and splits it into silences and words.

yesno's recordings are eight words with clear pauses between them; a frame is speech when its
log energy lies above halfway between the recording's quiet and loud levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def speech_runs(samples: np.ndarray, rate: int, min_word: float = 0.15,
                min_gap: float = 0.1) -> list[tuple[float, float]]:
    """(start, end) seconds of the stretches louder than halfway between the quiet and loud levels."""
    frame, shift = int(0.025 * rate), int(0.010 * rate)
    count = 1 + (len(samples) - frame) // shift
    if count < 1:
        return []
    frames = np.lib.stride_tricks.sliding_window_view(samples, frame)[::shift][:count]
    energy = np.log(np.square(frames.astype(np.float64)).mean(axis=1) + 1e-10)
    quiet, loud = np.percentile(energy, 10), np.percentile(energy, 95)
    speech = np.convolve(energy > (quiet + loud) / 2, np.ones(5) / 5, mode="same") > 0.5
    runs, start = [], None
    for i, on in enumerate(list(speech) + [False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append([start * 0.01, i * 0.01 + 0.025])
            start = None
    merged: list[list[float]] = []
    for run in runs:
        if merged and run[0] - merged[-1][1] < min_gap:
            merged[-1][1] = run[1]
        else:
            merged.append(run)
    return [(a, b) for a, b in merged if b - a >= min_word]


@dataclass
class RecordingParts:
    """A recording cut at its word boundaries: lead + word 1 + gap 1 + ... + word N + trail."""

    lead: np.ndarray
    words: list[np.ndarray]
    gaps: list[np.ndarray]  # N - 1 pauses between the words
    trail: np.ndarray


def split_recording(samples: np.ndarray, rate: int, margin: float = 0.05) -> RecordingParts:
    """Cuts at the speech runs widened by `margin` seconds (never past the middle of a pause)."""
    runs = speech_runs(samples, rate)
    if not runs:
        raise ValueError("no speech found")
    bounds = []
    for k, (start, end) in enumerate(runs):
        before = (runs[k - 1][1] + start) / 2 if k > 0 else 0.0
        after = (end + runs[k + 1][0]) / 2 if k + 1 < len(runs) else len(samples) / rate
        bounds.append((int(max(before, start - margin) * rate), int(min(after, end + margin) * rate)))
    return RecordingParts(
        lead=samples[: bounds[0][0]],
        words=[samples[a:b] for a, b in bounds],
        gaps=[samples[bounds[k][1]:bounds[k + 1][0]] for k in range(len(bounds) - 1)],
        trail=samples[bounds[-1][1]:],
    )

"""Finds the eight spoken words of a yesno recording by energy, to cut training segments at word boundaries.

yesno's recordings are eight words with clear silence between them. A training set of whole recordings
has a fixed first word in Kaldi's split (every training file starts with "no"), which a transducer
learns as a prior; segments that start at later words break it.
"""

from __future__ import annotations

import numpy as np
import soundfile


def speech_runs(path: str, min_word: float = 0.15, min_gap: float = 0.1) -> list[tuple[float, float]]:
    """(start, end) seconds of the stretches louder than halfway between the quiet and loud levels."""
    samples, rate = soundfile.read(path, dtype="float32")
    frame, shift = int(0.025 * rate), int(0.010 * rate)
    count = 1 + (len(samples) - frame) // shift
    frames = np.lib.stride_tricks.sliding_window_view(samples, frame)[::shift][:count]
    energy = np.log(np.square(frames).mean(axis=1) + 1e-10)
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


def suffix_cuts(runs: list[tuple[float, float]], duration: float) -> list[tuple[int, float]]:
    """(first word index k >= 1, start time) for segments running from word k to the end: each starts
    halfway through the silence before word k."""
    return [(k, (runs[k - 1][1] + runs[k][0]) / 2) for k in range(1, len(runs))]

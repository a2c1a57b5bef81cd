"""Finds the eight spoken words of a yesno recording by energy, to cut training segments at word boundaries.

yesno's recordings are eight words with clear silence between them. A training set of whole recordings
has a fixed first word in Kaldi's split (every training file starts with "no"), which a transducer
learns as a prior; cuts of every span of words put every word in every position.
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


def span_cuts(runs: list[tuple[float, float]], duration: float) -> list[tuple[int, int, float, float]]:
    """(first word i, last word j, start, end) for every span of words but the whole recording: a cut
    starts halfway through the silence before word i (or at 0) and ends halfway through the silence
    after word j (or at the end)."""
    n = len(runs)
    starts = [0.0] + [(runs[k - 1][1] + runs[k][0]) / 2 for k in range(1, n)]
    ends = [(runs[k][1] + runs[k + 1][0]) / 2 for k in range(n - 1)] + [duration]
    return [(i, j, starts[i], ends[j]) for i in range(n) for j in range(i, n) if (i, j) != (0, n - 1)]

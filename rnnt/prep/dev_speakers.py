"""Choosing a dev set of whole training speakers, so that no speaker is in two sets."""

from __future__ import annotations


def pick_dev_speakers(speakers: list[str], women: set[str], count: int) -> set[str]:
    """count speakers spread evenly over the sorted women and the sorted others, half each (the odd
    one a woman); deterministic, so a rerun picks the same ones."""
    picked: set[str] = set()
    groups = [sorted(s for s in speakers if s in women), sorted(s for s in speakers if s not in women)]
    for i, group in enumerate(groups):
        n = min(len(group), count // 2 + (count % 2 if i == 0 else 0))
        picked |= {group[(k * len(group)) // n] for k in range(n)}
    return picked

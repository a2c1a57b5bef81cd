"""Choosing a dev set of whole training speakers, so that no speaker is in two sets."""

from __future__ import annotations


def pick_dev_speakers(speakers: list[str], women: set[str], count: int) -> set[str]:
    """count speakers spread evenly over the sorted women and the sorted others, half each (the odd
    one a woman; where one group is short, the other makes up the count); deterministic, so a rerun
    picks the same ones. A count that leaves no speaker to train on is a ValueError saying so (the data prep
    went on to 'train: no usable utterances')."""
    if speakers and count >= len(set(speakers)):
        raise ValueError(f"{count} dev speakers of the {len(set(speakers))} training speakers leave none to train "
                         "on: dev takes whole speakers; give fewer")
    groups = [sorted(s for s in speakers if s in women), sorted(s for s in speakers if s not in women)]
    n_women = min(len(groups[0]), (count + 1) // 2)
    n_others = min(len(groups[1]), count - n_women)
    n_women = min(len(groups[0]), count - n_others)
    picked: set[str] = set()
    for group, n in zip(groups, (n_women, n_others)):
        picked |= {group[(k * len(group)) // n] for k in range(n)}
    return picked

"""Holding out a dev or test set from one list of utterances, for a corpus that has no split of its own:
whole speakers where they are small enough to make up the set, else utterances drawn at random."""

from __future__ import annotations

import hashlib
from collections import Counter

from rnnt.prep.data_dir_writer import Utterance


def hold_out(utterances: list[Utterance], size: int, seed: int = 0,
             held_as: str = "") -> tuple[list[Utterance], list[Utterance], str]:
    """(kept, held out, how they were chosen) with about size utterances held out (never all). Whole
    speakers, taken in a seeded random order, when no speaker holds more than half of size (voices new to the
    model, as in real use); otherwise utterances at random. The same input and seed give the same
    split, and a corpus edited (recordings added, removed) the same but at its edge: each name's place in the
    order is its own (ranked), so a test set stays a test set and a model trained before is not scored on its
    own training data (a seeded shuffle of the sorted names redrew all of them). held_as ("test", "dev") gives each
    set an order of its own: a name leaving one set does not move the others' edges."""
    if size <= 0:
        return list(utterances), [], "none held out"
    if size >= len(utterances):
        raise ValueError(f"cannot hold out {size} of {len(utterances)} utterances: too few utterances")
    order = f"{seed}\0{held_as}"
    per_speaker = Counter(u.speaker for u in utterances)
    largest = max(per_speaker.values())
    if largest * 2 <= size:
        speakers = ranked(per_speaker, order)
        chosen: set[str] = set()
        count = 0
        for speaker in speakers:
            if count >= size:
                break
            if count + per_speaker[speaker] >= len(utterances):
                continue  # the rest must keep an utterance
            chosen.add(speaker)
            count += per_speaker[speaker]
        held = [u for u in utterances if u.speaker in chosen]
        how = f"utterances of {len(chosen)} whole speakers" if len(chosen) < len(held) else "utterances at random"
    else:
        picked = set(ranked((u.utt_id for u in utterances), order)[:size])
        held = [u for u in utterances if u.utt_id in picked]
        how = f"utterances at random (too few speakers for whole ones: one holds {largest} of {len(utterances)})"
    held_ids = {u.utt_id for u in held}
    kept = [u for u in utterances if u.utt_id not in held_ids]
    return kept, held, f"{len(held)} {how}, seed {seed}"


def ranked(names, seed: str) -> list[str]:
    """The names in a seeded order in which each keeps its place among the others whatever names are added or
    removed: by the SHA-256 of the seed and the name."""
    return sorted(names, key=lambda name: hashlib.sha256(f"{seed}\0{name}".encode()).digest())

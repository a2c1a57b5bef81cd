"""Error rates per speaker in the layout of Kaldi's wer_per_spk_details (a decode dir's per_spk, as Kaldi's
scoring writes wer_details/per_spk): a header, then for every speaker, in sorted order, and for all of them
(SUM) a `raw` line of counts (sentences, words, corr, sub, ins, del, errors, sentence errors) and a `sys` line
of the same as percentages of the words (of the sentences for S.Err); no `sys` line for a speaker without
reference words. Built from the report's #csid counts, as Kaldi builds it from the #csid lines.
"""

from __future__ import annotations

import sys
from collections import defaultdict

from rnnt.datadir.table import KEEP_BYTES, kaldi_fields, read_table
from rnnt.scoring import Report

WIDTH = 10  # Kaldi's --field-width
SPEAKER_WIDTH = 15  # Kaldi's --spk-field-width, widened to the longest speaker


def per_speaker_text(report: Report, utt2spk: dict[str, str]) -> str:
    """The per_spk report of the scored utterances; one that utt2spk does not name is its own speaker."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * 6)  # corr sub ins del sentences sentence-errors
    for utt, (corr, sub, ins, dele) in report.csid.items():
        row = totals[utt2spk.get(utt, utt)]
        for i, count in enumerate((corr, sub, ins, dele, 1, int(sub + ins + dele > 0))):
            row[i] += count
    width = max([SPEAKER_WIDTH] + [len(speaker) for speaker in (*totals, *utt2spk.values())])
    lines = [f"{'SPEAKER':<{width}} id  " + " ".join(f"{name:>{WIDTH}}" for name in (
        "#SENT", "#WORD", "Corr", "Sub", "Ins", "Del", "Err", "S.Err"))]
    for speaker in sorted(totals):
        lines += speaker_lines(speaker, totals[speaker], width)
    lines += speaker_lines("SUM", [sum(column) for column in zip(*totals.values())] or [0] * 6, width)
    return "\n".join(lines) + "\n"


def speaker_lines(speaker: str, row: list[int], width: int) -> list[str]:
    corr, sub, ins, dele, sentences, sentence_errors = row
    words = corr + sub + dele
    counts = (corr, sub, ins, dele, sub + ins + dele)
    lines = [f"{speaker:<{width}} raw " + " ".join(f"{n:{WIDTH}d}" for n in (sentences, words, *counts,
                                                                             sentence_errors))]
    if words:
        percentages = [100.0 * n / words for n in counts] + [100.0 * sentence_errors / sentences]
        lines.append(f"{speaker:<{width}} sys {sentences:{WIDTH}d} {words:{WIDTH}d} "
                     + " ".join(f"{p:{WIDTH}.2f}" for p in percentages))
    return lines


def unlisted_utterances(report: Report, speakers: dict[str, str], utt2spk: str) -> str | None:
    """What to say of the scored utterances utt2spk does not list (each is its own speaker in the table), or None
    where it lists them all: another set's utt2spk gave a table of one 'speaker' an utterance, without a word."""
    unlisted = sorted(set(report.csid) - set(speakers))
    if not unlisted:
        return None
    first = ", ".join(unlisted[:3]) + (", ..." if len(unlisted) > 3 else "")
    return (f"{utt2spk}: {len(unlisted)} of the {len(report.csid)} utterances scored are not in it ({first}); "
            "each is a speaker of its own in the per-speaker table" + ("" if len(unlisted) < len(report.csid) else
                                                                        ": is it the utt2spk of these references?"))


def speakers_of(utt2spk: str, tool: str) -> dict[str, str]:
    """utt2spk's speakers; a line that is not '<utterance> <speaker>' is named, its utterance its own speaker (a key
    alone was a speaker named '', two words one speaker of both)."""
    speakers = {}
    for key, line in read_table(utt2spk, errors=KEEP_BYTES).items():
        if len(fields := kaldi_fields(line.value)) == 1:
            speakers[key] = fields[0]
        else:
            print(f"{tool}: {line.where}: not '<utterance> <speaker>'; {key} scored as a speaker of its own",
                  file=sys.stderr)
            speakers[key] = key  # (named: not unlisted)
    return speakers

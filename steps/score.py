#!/usr/bin/env python3
"""Score a hypothesis Kaldi text file against a reference one: the %WER line, then details.

Utterances missing from the hypotheses mark the result [PARTIAL] and, as compute-wer's --mode, count as
empty (all deletions; "all", the default), are left out ("present", as Kaldi's score_kaldi.sh scores) or are
an error ("strict"); hypotheses without a reference are named and ignored. Writes the report to --errs
(default: standard output) and prints the %WER line; with --utt2spk, Kaldi's per-speaker table to --per-spk.
"""

import sys

from rnnt.cli import error_line, exit_with, tool_parser
from rnnt.datadir.table import KEEP_BYTES, Line, keep_bytes_on_standard_streams, read_table
from rnnt.scoring import MODES, MissingHypotheses, score
from rnnt.speaker_scoring import per_speaker_text, speakers_of, unlisted_utterances


def texts_to_score(ref: str, hyp: str) -> tuple[dict[str, Line], dict[str, Line], str]:
    """The references' and hypotheses' lines (words as bytes, as compute-wer compares them: not UTF-8, two words
    are not one U+FFFD), and why they cannot be scored ('' where they can). Each file is read once: a pipe
    (<(...), /dev/stdin) read twice, for the binary check and then the lines, was scored as empty."""
    tables = []
    for path in (ref, hyp):  # (an audio file's bytes were scored as lines of words, exit 0)
        table = read_table(path, errors=KEEP_BYTES)
        if any("\0" in line.text for line in table.values() if line.number == 1):
            return {}, {}, f"{path}: a binary file (audio?), not a Kaldi text file"
        tables.append(table)
    refs, hyps = tables
    if not refs:  # a %WER -nan [ 0 / 0 ] with every hypothesis ignored, and exit 0
        return refs, hyps, f"{ref}: no reference utterance (the reference first, then the hypotheses)"
    if hyps and not set(hyps) & set(refs):  # another set's hypotheses: %WER 100 [PARTIAL], exit 0
        return refs, hyps, f"{hyp}: none of its {len(hyps)} hypotheses has a reference in {ref} (another set's?)"
    return refs, hyps, ""


def main() -> int:
    parser = tool_parser(__doc__, "steps/score.py --errs exp/decode/errs data/test/text exp/decode/hyp")
    parser.add_argument("--errs", help="write the full report here")
    parser.add_argument("--mode", choices=MODES, default="all",
                        help="utterances without a hypothesis: all (scored as empty), present (left out), strict "
                             "(an error)")
    parser.add_argument("--utt2spk", help="the references' utt2spk: write the per-speaker table to --per-spk")
    parser.add_argument("--per-spk", help="where the per-speaker table goes (with --utt2spk)")
    parser.add_argument("ref", help="Kaldi text file: <utt> <words...>")
    parser.add_argument("hyp", help="Kaldi text file: <utt> <words...>")
    args = parser.parse_args()
    if bool(args.utt2spk) != bool(args.per_spk):
        parser.error("--utt2spk and --per-spk go together")
    try:
        ref_lines, hyp_lines, refusal = texts_to_score(args.ref, args.hyp)
        if refusal:
            print(f"score.py: {refusal}", file=sys.stderr)
            return 1
        for utt in sorted(set(hyp_lines) - set(ref_lines)):
            print(f"score.py: {hyp_lines[utt].where}: {utt} has no reference; ignored", file=sys.stderr)
        refs, hyps = ({key: line.value for key, line in lines.items()} for lines in (ref_lines, hyp_lines))
        report = score(refs, hyps, args.mode)
        if not report.sentences:  # --mode present of hypotheses of none of the references: %WER -nan, exit 0
            print(f"score.py: {args.hyp}: a hypothesis for none of the {len(refs)} reference utterances",
                  file=sys.stderr)
            return 1
        keep_bytes_on_standard_streams()
        if args.per_spk:
            speakers = speakers_of(args.utt2spk, "score.py")
            if unlisted := unlisted_utterances(report, speakers, args.utt2spk):
                print(f"score.py: {unlisted}", file=sys.stderr)
                if not set(report.csid) & set(speakers):
                    return 1
            with open(args.per_spk, "w", encoding="utf-8", errors=KEEP_BYTES) as f:
                f.write(per_speaker_text(report, speakers))
        if args.errs:
            with open(args.errs, "w", encoding="utf-8", errors=KEEP_BYTES) as f:
                f.write(report.text())
            print(report.wer_line)
        else:
            sys.stdout.write(report.text())  # its first line is the %WER line
    except MissingHypotheses as error:
        print(f"score.py: {args.hyp}: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"score.py: {error_line(error)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    exit_with(main)

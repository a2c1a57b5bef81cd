#!/usr/bin/env python3
"""Score a hypothesis Kaldi text file against a reference one: the %WER line, then details.

Utterances missing from the hypotheses mark the result [PARTIAL] and, as compute-wer's --mode, count as
empty (all deletions; "all", the default), are left out ("present", as Kaldi's score_kaldi.sh scores) or are
an error ("strict"); hypotheses without a reference are named and ignored. Writes the report to --errs
(default: standard output) and prints the %WER line; with --utt2spk, Kaldi's per-speaker table to --per-spk.
"""

import sys

from rnnt.cli import exit_with, tool_parser
from rnnt.datadir.table import KEEP_BYTES, kaldi_fields, keep_bytes_on_standard_streams, read_table
from rnnt.scoring import MODES, MissingHypotheses, score
from rnnt.speaker_scoring import per_speaker_text


def speakers_of(utt2spk: str) -> dict[str, str]:
    """utt2spk's speakers; a line that is not '<utterance> <speaker>' is named and left out (its utterance its own
    speaker: a key alone was a speaker named '')."""
    speakers = {}
    for key, line in read_table(utt2spk, errors=KEEP_BYTES).items():
        if len(fields := kaldi_fields(line.value)) == 1:
            speakers[key] = fields[0]
        else:
            print(f"score.py: {line.where}: not '<utterance> <speaker>'; {key} scored as a speaker of its own",
                  file=sys.stderr)
    return speakers


def texts_to_score(ref: str, hyp: str) -> tuple[dict[str, str], dict[str, str], str]:
    """The references and hypotheses (words as bytes, as compute-wer compares them: not UTF-8, two words are not
    one U+FFFD), and why they cannot be scored ('' where they can)."""
    for path in (ref, hyp):  # (an audio file's bytes were scored as lines of words, exit 0)
        with open(path, "rb") as f:
            if b"\0" in f.readline(65536):
                return {}, {}, f"{path}: a binary file (audio?), not a Kaldi text file"
    refs = {k: line.value for k, line in read_table(ref, errors=KEEP_BYTES).items()}
    hyps = {k: line.value for k, line in read_table(hyp, errors=KEEP_BYTES).items()}
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
        refs, hyps, refusal = texts_to_score(args.ref, args.hyp)
        if refusal:
            print(f"score.py: {refusal}", file=sys.stderr)
            return 1
        for utt in sorted(set(hyps) - set(refs)):
            print(f"score.py: {args.hyp}: {utt} has no reference; ignored", file=sys.stderr)
        report = score(refs, hyps, args.mode)
        if not report.sentences:  # --mode present of hypotheses of none of the references: %WER -nan, exit 0
            print(f"score.py: {args.hyp}: a hypothesis for none of the {len(refs)} reference utterances",
                  file=sys.stderr)
            return 1
        keep_bytes_on_standard_streams()
        if args.per_spk:
            speakers = speakers_of(args.utt2spk)
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
        print(f"score.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    exit_with(main)

#!/usr/bin/env python3
"""Score a hypothesis Kaldi text file against a reference one: the %WER line, then details.

Utterances missing from the hypotheses count as empty (all deletions) and mark the result
[PARTIAL]; hypotheses without a reference are named and ignored. Writes the report to --errs
(default: standard output) and prints the %WER line.
"""

import sys

from rnnt.cli import tool_parser
from rnnt.datadir.table import KEEP_BYTES, keep_bytes_on_standard_streams, read_table
from rnnt.scoring import score


def main() -> int:
    parser = tool_parser(__doc__, "steps/score.py --errs exp/decode/errs data/test/text exp/decode/hyp")
    parser.add_argument("--errs", help="write the full report here")
    parser.add_argument("ref", help="Kaldi text file: <utt> <words...>")
    parser.add_argument("hyp", help="Kaldi text file: <utt> <words...>")
    args = parser.parse_args()
    try:
        # words compared as bytes, as compute-wer compares them: not UTF-8, two words are not one U+FFFD
        refs = {k: line.value for k, line in read_table(args.ref, errors=KEEP_BYTES).items()}
        hyps = {k: line.value for k, line in read_table(args.hyp, errors=KEEP_BYTES).items()}
        for utt in sorted(set(hyps) - set(refs)):
            print(f"score.py: {args.hyp}: {utt} has no reference; ignored", file=sys.stderr)
        report = score(refs, hyps)
        keep_bytes_on_standard_streams()
        if args.errs:
            with open(args.errs, "w", encoding="utf-8", errors=KEEP_BYTES) as f:
                f.write(report.text())
            print(report.wer_line)
        else:
            sys.stdout.write(report.text())  # its first line is the %WER line
    except OSError as error:
        print(f"score.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Splits a table into N contiguous parts of about equal size, as many as output files are given;
with --utt2spk, all utterances of a speaker go to the same part.

Run as `utils/split_scp.py [--utt2spk FILE] <in.scp> <out1> <out2> ...`.
"""

from __future__ import annotations

import sys

from rnnt.cli import tool_parser
from rnnt.datadir.table import read_lines, read_table


def split_lines(keys: list[str], n_parts: int, groups: list[str] | None = None) -> list[list[int]]:
    """Returns the line indices of each part; lines of one group (speaker) never straddle two parts.

    Each cut is the group boundary nearest to its share k * total / n_parts, with room left for
    every later part to get at least one group. Groups are contiguous in a sorted Kaldi dir.
    """
    by_speaker = groups is not None
    groups = groups if groups is not None else keys
    starts = [i for i in range(len(groups)) if i == 0 or groups[i] != groups[i - 1]]
    if len(starts) < n_parts:
        what = "speakers" if by_speaker else "lines"
        raise ValueError(f"cannot split {len(starts)} {what} into {n_parts} non-empty parts")
    bounds = starts + [len(groups)]  # bounds[j]: lines before group j
    cuts = [0]
    for k in range(1, n_parts):
        target = k * len(groups) / n_parts
        lo, hi = cuts[-1] + 1, len(starts) - (n_parts - k)
        cuts.append(min(range(lo, hi + 1), key=lambda j: abs(bounds[j] - target)))
    cuts.append(len(starts))
    return [list(range(bounds[a], bounds[b])) for a, b in zip(cuts, cuts[1:])]


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/split_scp.py --utt2spk data/train/utt2spk data/train/wav.scp a.scp b.scp", prog="split_scp.py")
    parser.add_argument("--utt2spk", help="keep each speaker's utterances in one part")
    parser.add_argument("scp")
    parser.add_argument("outputs", nargs="+")
    args = parser.parse_args(argv)
    lines = [line for line in read_lines(args.scp) if line.text.strip()]
    keys = [line.key for line in lines]
    groups = None
    if args.utt2spk:
        utt2spk = read_table(args.utt2spk)
        unknown = [line for line in lines if line.key not in utt2spk]
        if unknown:
            print(f"split_scp.py: {unknown[0].where}: utterance '{unknown[0].key}' is not in {args.utt2spk}",
                  file=sys.stderr)
            return 1
        groups = [utt2spk[k].value for k in keys]
    try:
        parts = split_lines(keys, len(args.outputs), groups)
    except ValueError as error:
        print(f"split_scp.py: {args.scp}: {error}", file=sys.stderr)
        return 1
    for out, indices in zip(args.outputs, parts):
        with open(out, "w", encoding="utf-8") as f:
            f.writelines(lines[i].text.rstrip("\r") + "\n" for i in indices)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Splits a table into N parts of about equal size, as many as output files are given, with the parts
Kaldi's utils/split_scp.pl makes: contiguous lines; with --utt2spk, whole speakers.

Run as `utils/split_scp.py [--utt2spk FILE] <in.scp> <out1> <out2> ...`, or, for one part of N, as
`utils/split_scp.py -j N K [--one-based] [--utt2spk FILE] <in.scp> [<out>]` (K from 0, or from 1 with
--one-based; without <out>, standard output). An output named '-' is standard output. Lines are copied byte for
byte, as Kaldi's are, but for a CR at the end (dropped); blank lines are left out (Kaldi's copies them and counts
them among a part's lines, so that its parts of a table with blank lines can end elsewhere).
"""

from __future__ import annotations

import sys

from rnnt.cli import error_line, tool_parser
from rnnt.datadir.table import KEEP_BYTES, keep_bytes_on_standard_streams, read_lines, read_table, write_lines


def split_lines(keys: list[str], n_parts: int, groups: list[str] | None = None) -> list[list[int]]:
    """The line indices of each part, as Kaldi's split_scp.pl splits: without groups, contiguous parts of
    lines // n_parts lines, the first lines % n_parts of them one longer; with groups (speakers), whole
    speakers (balance_speakers)."""
    if groups is not None:
        return balance_speakers(groups, n_parts)
    per, extra = divmod(len(keys), n_parts)
    if per < 1:
        raise ValueError(f"cannot split {len(keys)} lines into {n_parts} non-empty parts")
    sizes = [per + (i < extra) for i in range(n_parts)]
    starts = [sum(sizes[:i]) for i in range(n_parts)]
    return [list(range(start, start + size)) for start, size in zip(starts, sizes)]


def balance_speakers(groups: list[str], n_parts: int) -> list[list[int]]:
    """Speakers in the order they first appear, speaker j to part j * n_parts // speakers; then, until
    nothing changes, a part's last speaker moves to the next part, or its first to the one before, when
    that brings the two parts' line counts closer. Each speaker's lines go together, in their order."""
    lines: dict[str, list[int]] = {}
    for i, speaker in enumerate(groups):
        lines.setdefault(speaker, []).append(i)
    speakers = list(lines)
    if len(speakers) < n_parts:
        raise ValueError(f"cannot split {len(speakers)} speakers into {n_parts} non-empty parts")
    parts: list[list[str]] = [[] for _ in range(n_parts)]
    for j, speaker in enumerate(speakers):
        parts[j * n_parts // len(speakers)].append(speaker)
    counts = [sum(len(lines[s]) for s in part) for part in parts]
    changed = True
    while changed:
        changed = False
        for i in range(n_parts):
            if i < n_parts - 1 and parts[i] and moving_helps(counts[i], counts[i + 1], len(lines[parts[i][-1]])):
                move = len(lines[parts[i][-1]])
                parts[i + 1].insert(0, parts[i].pop())
                counts[i], counts[i + 1], changed = counts[i] - move, counts[i + 1] + move, True
            if i > 0 and parts[i] and moving_helps(counts[i], counts[i - 1], len(lines[parts[i][0]])):
                move = len(lines[parts[i][0]])
                parts[i - 1].append(parts[i].pop(0))
                counts[i], counts[i - 1], changed = counts[i] - move, counts[i - 1] + move, True
    if not all(parts):
        raise ValueError(f"splitting {len(speakers)} speakers into {n_parts} parts leaves one empty")
    return [[i for speaker in part for i in lines[speaker]] for part in parts]


def moving_helps(source: int, dest: int, count: int) -> bool:
    """Moving count lines from a part of source lines to one of dest brings the two closer."""
    return abs((dest + count) - (source - count)) < abs(dest - source)


def parse_args(argv: list[str] | None):
    parser = tool_parser(__doc__, "utils/split_scp.py --utt2spk data/train/utt2spk data/train/wav.scp a.scp b.scp",
                         prog="split_scp.py")
    parser.add_argument("-j", nargs=2, type=int, metavar=("N", "K"), help="write part K of N parts only")
    parser.add_argument("--one-based", action="store_true", help="with -j: K counts from 1")
    parser.add_argument("--utt2spk", help="keep each speaker's utterances in one part")
    parser.add_argument("scp")
    parser.add_argument("outputs", nargs="*")
    args = parser.parse_args(argv)
    if args.j is None:
        if not args.outputs:
            parser.error("give at least one output (or -j N K)")
        return args, args.outputs
    n_jobs, job = args.j[0], args.j[1] - args.one_based
    if n_jobs < 1:
        parser.error(f"-j {args.j[0]} {args.j[1]}: the number of parts must be 1 or more")
    if not 0 <= job < n_jobs:
        parser.error(f"-j {args.j[0]} {args.j[1]}{' --one-based' if args.one_based else ''}: the part must be "
                     f"{'1' if args.one_based else '0'} to {n_jobs - 1 + args.one_based}")
    if len(args.outputs) > 1:
        parser.error("with -j, one output at most")
    return args, [(args.outputs or ["-"])[0] if j == job else None for j in range(n_jobs)]


def main(argv: list[str] | None = None) -> int:
    args, outputs = parse_args(argv)
    keep_bytes_on_standard_streams()
    try:
        lines = [line for line in read_lines(args.scp, KEEP_BYTES) if line.fields]
        utt2spk = read_table(args.utt2spk, errors=KEEP_BYTES) if args.utt2spk else None
    except OSError as error:
        print(f"split_scp.py: {error_line(error)}", file=sys.stderr)
        return 1
    keys = [line.key for line in lines]
    groups = None
    if utt2spk is not None:
        unknown = [line for line in lines if line.key not in utt2spk]
        if unknown:
            print(f"split_scp.py: {unknown[0].where}: utterance '{unknown[0].key}' is not in {args.utt2spk}",
                  file=sys.stderr)
            return 1
        if bad := next((line for line in utt2spk.values() if len(line.fields) != 2), None):  # as Kaldi's: a speaker
            print(f"split_scp.py: {bad.where}: not '<utterance> <speaker>': '{bad.text}'", file=sys.stderr)
            return 1  # of two words went whole into one part, its utterances split over parts
        groups = [utt2spk[k].fields[1] for k in keys]
    try:
        parts = split_lines(keys, len(outputs), groups)
    except ValueError as error:
        print(f"split_scp.py: {args.scp}: {error_line(error)}", file=sys.stderr)
        return 1
    try:
        for out, indices in zip(outputs, parts):
            if out is not None:
                write_lines(out, (lines[i].text.rstrip("\r") for i in indices))
    except OSError as error:
        print(f"split_scp.py: {error_line(error)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Copies part of a Kaldi data dir: first, last, evenly spaced (the default) or random N utterances,
or the utterances or speakers of a list file. Every per-utterance file is filtered and spk2utt rebuilt.

Run as `utils/subset_data_dir.sh [--first|--last|--random] <src> <N> <dest>` or
`utils/subset_data_dir.sh --utt-list FILE|--spk-list FILE <src> <dest>`.
"""

from __future__ import annotations

import random
import sys

from rnnt.cli import tool_parser
from rnnt.datadir.layout import load_dir, write_dir
from rnnt.datadir.table import read_ids


def choose(utts: list[str], n: int, how: str, seed: int = 0) -> list[str]:
    """Picks n of the sorted utterances: 'first', 'last', 'random', or 'spread' (evenly
    spaced, the utterances Kaldi's subset_data_dir.sh N picks)."""
    if n < 1:
        raise ValueError(f"asked for {n} utterances; the number must be 1 or more (as Kaldi's)")
    if n > len(utts):
        raise ValueError(f"asked for {n} utterances but the dir has only {len(utts)}")
    if how == "first":
        return utts[:n]
    if how == "last":
        return utts[len(utts) - n:]
    if how == "random":
        return sorted(random.Random(seed).sample(utts, n))
    return [utts[i] for i in spread(0, len(utts), n)]


def spread(start: int, end: int, n: int) -> list[int]:
    """n indices of [start, end) spread as Kaldi's subset_scp.pl picks them: the range halved (the first
    half the smaller when odd), the first half given half of n rounded down, each half picked the same way."""
    if n == 0:
        return []
    if end - start == 1:
        return [start]
    middle = start + (end - start) // 2
    return spread(start, middle, n // 2) + spread(middle, end, n - n // 2)


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/subset_data_dir.sh --first data/train 100 data/train_100",
                         prog="subset_data_dir.sh")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--first", dest="how", action="store_const", const="first", help="the first N utterances")
    how.add_argument("--last", dest="how", action="store_const", const="last", help="the last N utterances")
    how.add_argument("--random", dest="how", action="store_const", const="random", help="N random utterances")
    how.add_argument("--utt-list", help="file whose first field is the utterance ids to keep")
    how.add_argument("--spk-list", help="file whose first field is the speaker ids to keep")
    parser.add_argument("--seed", type=int, default=0, help="seed for --random (default 0)")
    parser.add_argument("args", nargs="+", metavar="<src> [N] <dest>")
    args = parser.parse_args(argv)
    by_list = args.utt_list or args.spk_list
    if len(args.args) != (2 if by_list else 3):
        parser.error("expected <src> <dest> with --utt-list/--spk-list, else <src> <N> <dest>")
    src, dest = args.args[0], args.args[-1]
    try:
        tables = load_dir(src)
        utts = sorted(tables["utt2spk"])
        if args.utt_list:
            wanted = read_ids(args.utt_list)
            keep = [u for u in utts if u in wanted]
        elif args.spk_list:
            wanted = read_ids(args.spk_list)
            keep = [u for u in utts if tables["utt2spk"][u] in wanted]
        else:
            keep = choose(utts, int(args.args[1]), args.how or "spread", args.seed)
    except (FileNotFoundError, ValueError) as error:
        print(f"subset_data_dir.sh: {error}", file=sys.stderr)
        return 1
    try:
        write_dir(tables, set(keep), dest)
    except (OSError, ValueError) as error:
        print(f"subset_data_dir.sh: {error}", file=sys.stderr)
        return 1
    print(f"subset_data_dir.sh: wrote {len(keep)} of {len(utts)} utterances from {src} to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

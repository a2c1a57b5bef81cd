"""Copies part of a Kaldi data dir, as Kaldi's utils/subset_data_dir.sh: N utterances evenly spaced (the
default), the first, last, random or shortest N, N a speaker (--per-spk, evenly spaced within each), whole
random speakers until N utterances; or the utterances or speakers of a list file. Every per-utterance file is
filtered, spk2utt rebuilt, stm kept to the recordings kept, frame_shift copied.

Run as `utils/subset_data_dir.sh [--first|--last|--random|--shortest|--per-spk|--speakers] <src> <N> <dest>`
or `utils/subset_data_dir.sh --utt-list FILE|--spk-list FILE <src> <dest>`.
"""

from __future__ import annotations

import os
import random
import sys

from rnnt.cli import error_line, tool_parser
from rnnt.counting import counted
from rnnt.datadir.layout import (Tables, carry_side_files, load_dir, refuse_writing_over_a_source, remove_unwritten,
                                 utterance_files, write_dir)
from rnnt.datadir.speakers import utt2spk_to_spk2utt
from rnnt.datadir.table import read_ids

HOW = {"first": "the first N utterances", "last": "the last N utterances", "random": "N random utterances",
       "shortest": "the N shortest utterances (by utt2num_frames, else utt2dur)",
       "per-spk": "N utterances of each speaker, evenly spaced (all of a speaker with fewer)",
       "speakers": "random whole speakers until there are N utterances or more"}


def check_count(n: int, total: int) -> None:
    if n < 1:
        raise ValueError(f"asked for {n} utterances; the number must be 1 or more (as Kaldi's)")
    if n > total:
        raise ValueError(f"asked for {n} utterances but the dir has only {total}")


def choose(utts: list[str], n: int, how: str, seed: int = 0) -> list[str]:
    """Picks n of the sorted utterances: 'first', 'last', 'random', or 'spread' (evenly
    spaced, the utterances Kaldi's subset_data_dir.sh N picks)."""
    check_count(n, len(utts))
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


def per_speaker(spk2utt: dict[str, list[str]], n: int) -> list[str]:
    """As Kaldi's --per-spk: of a speaker's k utterances, every skip-th from the first, skip = k // n (1 at
    least), n at most."""
    keep: list[str] = []
    for utts in spk2utt.values():
        skip = max(1, len(utts) // n)
        keep += utts[0:n * skip:skip]
    return keep


def perl_rand(seed: int):
    """The numbers perl's rand() gives after srand(seed) (its own drand48 since perl 5.20), as perl prints them."""
    state = ((seed & 0xFFFFFFFF) << 16) + 0x330E
    while True:
        state = (0x5DEECE66D * state + 0xB) % (1 << 48)
        yield "%.15g" % (state / (1 << 48))


def kaldi_shuffle(lines: list[str], seed: int = 0) -> list[str]:
    """The order Kaldi's utils/shuffle_list.pl --srand seed gives the lines: each a rand(), sorted as strings."""
    draws = perl_rand(seed)
    return [line for _, line in sorted(((next(draws), line) for line in lines), key=lambda pair: pair[0])]


def random_speakers(spk2utt: dict[str, list[str]], n: int, seed: int) -> list[str]:
    """As Kaldi's --speakers, speaker for speaker: the speakers in the order of its shuffle_list.pl (seed 0 is
    its own), each taken whole while fewer than n utterances are taken."""
    speakers = kaldi_shuffle(sorted(spk2utt), seed)
    keep: list[str] = []
    for speaker in speakers:
        if len(keep) >= n:
            break
        keep += spk2utt[speaker]
    return keep


def shortest(tables: Tables, n: int) -> list[str]:
    """The n shortest utterances by utt2num_frames, else utt2dur (Kaldi's uses utt2num_frames or feats.scp; dirs
    here have no features); ties by id, as `sort -n -k2` under LC_ALL=C breaks them."""
    name = next((name for name in ("utt2num_frames", "utt2dur") if name in tables), None)
    if name is None:
        raise ValueError("--shortest needs utt2num_frames or utt2dur in the source dir")
    lengths = tables[name]
    measured = [utt for utt in tables["utt2spk"] if utt in lengths]
    return sorted(measured, key=lambda utt: (float(lengths[utt]), utt))[:n]


def pick(tables: Tables, n: int, how: str, seed: int) -> list[str]:
    """The utterances N and how choose, as Kaldi's options choose them."""
    utts = sorted(tables["utt2spk"])
    spk2utt = utt2spk_to_spk2utt((u, tables["utt2spk"][u]) for u in utts)
    check_count(n, len(utts))  # in every mode, as Kaldi's
    if how == "per-spk":  # N per speaker: a speaker with fewer gives all of theirs, as Kaldi's
        return per_speaker(spk2utt, n)
    if how == "speakers":  # whole speakers up to N utterances: all of them where the dir holds fewer
        return random_speakers(spk2utt, n, seed)
    if how == "shortest":
        return shortest(tables, n)
    return choose(utts, n, how, seed)


def parse_args(argv: list[str] | None):
    parser = tool_parser(__doc__, "utils/subset_data_dir.sh --per-spk data/train 5 data/train_5each",
                         prog="subset_data_dir.sh")
    group = parser.add_mutually_exclusive_group()
    for how, what in HOW.items():
        group.add_argument(f"--{how}", dest="how", action="store_const", const=how, help=what)
    group.add_argument("--utt-list", help="file whose first field is the utterance ids to keep")
    group.add_argument("--spk-list", help="file whose first field is the speaker ids to keep")
    parser.add_argument("--seed", type=int, default=0, help="seed for --random and --speakers (default 0)")
    parser.add_argument("args", nargs="+", metavar="<src> [N] <dest>")
    args = parser.parse_args(argv)
    if len(args.args) != (2 if args.utt_list or args.spk_list else 3):
        parser.error("expected <src> <dest> with --utt-list/--spk-list, else <src> <N> <dest>")
    if len(args.args) == 3 and not args.args[1].lstrip("-").isdigit():
        parser.error(f"N must be a number of utterances, not '{args.args[1]}'")
    return args


def name_the_absent(absent: set[str], listed_in: str, among: str, shown: int = 5) -> None:
    """Ids of a list that the source does not have (a typo, another corpus's ids): named on standard error, the
    first few, rather than a subset smaller than asked for in silence."""
    if absent:
        first = ", ".join(sorted(absent)[:shown]) + (", ..." if len(absent) > shown else "")
        print(f"subset_data_dir.sh: {len(absent)} ids of {listed_in} are not among the {among}: {first}",
              file=sys.stderr)


def leave_out_incomplete(tables: Tables) -> str:
    """Takes out of tables' utt2spk the utterances missing from a file keyed by utterance (its line there dropped
    as malformed, named by load_dir: the subset kept them, invalid by Kaldi's rules, exit 0); says how many."""
    missing = {name: [u for u in tables["utt2spk"] if u not in tables[name]] for name in utterance_files(tables)}
    left_out = {u for utterances in missing.values() for u in utterances}
    for utterance in left_out:
        del tables["utt2spk"][utterance]
    return "; left out " + ", ".join(f"{len(us)} not in {name}" for name, us in missing.items() if us) \
        if left_out else ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    src, dest = args.args[0], args.args[-1]
    try:
        refuse_writing_over_a_source([src], dest, "the subset")
        tables = load_dir(src)
        total = len(tables["utt2spk"])
        left_out = leave_out_incomplete(tables)
        if args.utt_list:
            wanted = read_ids(args.utt_list)
            keep = [u for u in tables["utt2spk"] if u in wanted]
            name_the_absent(wanted - set(tables["utt2spk"]), args.utt_list, f"utterances of {src}")
        elif args.spk_list:
            wanted = read_ids(args.spk_list)
            keep = [u for u in tables["utt2spk"] if tables["utt2spk"][u] in wanted]
            name_the_absent(wanted - set(tables["utt2spk"].values()), args.spk_list, f"speakers of {src}")
        else:
            keep = pick(tables, int(args.args[1]), args.how or "spread", args.seed)
        if not keep:  # (an empty dir, exit 0, which validation refuses: as N=0 is refused)
            raise ValueError(f"none of {src}'s utterances is on {args.utt_list or args.spk_list}; nothing written"
                             if args.utt_list or args.spk_list else f"{src}: no utterance to keep{left_out}")
        side_files = [name for name in ("frame_shift", "stm") if os.path.isfile(os.path.join(src, name))]
        remove_unwritten(dest, {*tables, "spk2utt", *side_files})
        carry_side_files(src, dest, write_dir(tables, set(keep), dest))
    except (OSError, ValueError) as error:
        print(f"subset_data_dir.sh: {error_line(error)}", file=sys.stderr)
        return 1
    print(f"subset_data_dir.sh: wrote {len(keep)} of {counted(total, 'utterance')} from {src} to {dest}{left_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Repairs a Kaldi data dir in place: strips CR and stray spaces, drops empty, malformed and duplicate
lines, sorts every file, keeps only utterances present in every per-utterance file (utt2spk, text, segments,
feats.scp, utt2lang, wav.scp without segments, utt2dur and utt2num_frames, as Kaldi's fix)
whose speakers are in spk2gender and cmvn.scp where those exist, rebuilds spk2utt, and keeps the other files
(vad.scp, utt2uniq, utt2warp, spk2warp, reco2dur, --utt-extra-files, --spk-extra-files) to what is kept; an
utterance whose recording reco2dur lacks (where there is one) is dropped, as the validator wants every length.

The originals are copied to <data-dir>/.backup/ first; each utterance dropped by a cross-file check is named
there, in dropped_utterances ('<utterance> <why>'), and the first few on standard error.
Run as `utils/fix_data_dir.sh [--utt-extra-files "A B"] [--spk-extra-files "C"] <data-dir>`.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter

from rnnt.cli import tool_parser
from rnnt.counting import counted
from rnnt.datadir.layout import FIELDS, PER_SPEAKER, load_dir, utterance_files, write_dir
from rnnt.datadir.table import KEEP_BYTES, kaldi_fields, read_lines, write_table
from rnnt.datadir.table_rules import speaker_sort_key

DROPPED = "dropped_utterances"  # in .backup/: '<utterance> <why>' for each one a cross-file check dropped
SHOWN = 10  # dropped utterances named on standard error; the rest only in .backup/dropped_utterances


def fix_data_dir(data_dir: str, utt_extra: tuple[str, ...] = (), spk_extra: tuple[str, ...] = ()
                 ) -> tuple[int, int, Counter]:
    """Rewrites the dir in place; returns (utterances before, after, reasons for dropping). When no utterance
    would remain, raises ValueError and leaves the dir as it was (the originals copied to .backup all the same)."""
    dropped: Counter = Counter()
    tables = load_dir(data_dir, dropped, (*utt_extra, *spk_extra))
    backup = os.path.join(data_dir, ".backup")
    os.makedirs(backup, exist_ok=True)
    for name in [*FIELDS, *utt_extra, *spk_extra, "spk2utt"]:
        if os.path.isfile(os.path.join(data_dir, name)):
            shutil.copy2(os.path.join(data_dir, name), os.path.join(backup, name))

    before = sum(1 for line in read_lines(os.path.join(data_dir, "utt2spk"), KEEP_BYTES) if line.fields)
    keep = set(tables["utt2spk"])  # before counts the lines load_dir dropped from utt2spk, as dropped does
    named: list[tuple[str, str]] = []

    def drop(utterances: set[str], why: str) -> None:
        if not utterances:
            return
        dropped[why] += len(utterances)
        named.extend((utterance, why) for utterance in utterances)
        keep.difference_update(utterances)

    for name in PER_SPEAKER:
        if name in tables:
            drop({u for u in keep if tables["utt2spk"][u] not in tables[name]}, f"speaker not in {name}")
    for name in utterance_files(tables):
        drop(keep - set(tables[name]), f"not in {name}")
    if "segments" in tables and "wav.scp" in tables:
        drop({u for u in keep if kaldi_fields(tables["segments"][u])[0] not in tables["wav.scp"]},
             "recording not in wav.scp")
    if "segments" in tables and "wav.scp" not in tables:  # as Kaldi's
        raise ValueError(f"{data_dir}/segments is there but not wav.scp: the segments cut recordings it lists; "
                         "nothing changed")
    drop(without_reco2dur(tables, keep), "recording not in reco2dur")
    order = [speaker_sort_key(f"{u} {tables['utt2spk'][u]}") for u in sorted(keep)]
    if order != sorted(order):  # Kaldi's fix refuses it too (sort -k2 | cmp): no order of the lines sorts both ways
        raise ValueError(f"{data_dir}/utt2spk: sorted by utterance, it is not sorted by speaker (make speaker ids "
                         "prefixes of their utterance ids); nothing changed")
    if not keep:  # as Kaldi's fix_data_dir.sh: refuse, rather than leave an empty dir
        raise ValueError(f"{data_dir}: no utterances would remain ({reasons(dropped) or 'utt2spk is empty'}); "
                         "nothing changed")
    write_dir(tables, keep, data_dir, utt_extra, spk_extra)
    if named:
        write_table(os.path.join(backup, DROPPED), named)
    elif os.path.isfile(os.path.join(backup, DROPPED)):  # an earlier run's
        os.remove(os.path.join(backup, DROPPED))
    return before, len(keep), dropped


def without_reco2dur(tables, keep: set[str]) -> set[str]:
    """The utterances kept whose recording a reco2dur lacks: the validator wants each recording's length, and a
    line dropped (a bad value) left a dir that it refused and no fix changed; dropped as an utterance of a bad
    utt2dur value is."""
    if "reco2dur" not in tables:
        return set()
    return {u for u in keep if (kaldi_fields(tables["segments"][u])[0] if "segments" in tables else u)
            not in tables["reco2dur"]}


LINE_PROBLEMS = ("malformed line in ", "bad value in ", "duplicate key in ")  # load_dir's reasons, by line


def reasons(dropped: Counter) -> str:
    """What fix_data_dir dropped, as '2 not in text, 1 speaker not in spk2gender' ('' for nothing); the lines
    dropped from files other than utt2spk apart, after 'lines dropped:' (such a line's utterance is counted
    again where a check finds it missing: one utterance was two in the sum)."""
    def line_of_another_file(why: str) -> bool:
        return why.startswith(LINE_PROBLEMS) and not why.endswith(" in utt2spk")

    utterances = [f"{n} {why}" for why, n in sorted(dropped.items()) if n and not line_of_another_file(why)]
    lines = [f"{n} {why}" for why, n in sorted(dropped.items()) if n and line_of_another_file(why)]
    return "; ".join(filter(None, (", ".join(utterances), "lines dropped: " + ", ".join(lines) if lines else "")))


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/fix_data_dir.sh data/train", prog="fix_data_dir.sh")
    parser.add_argument("--utt-extra-files", default="", help="more files keyed by utterance, kept to those kept")
    parser.add_argument("--spk-extra-files", default="", help="more files keyed by speaker, kept to those kept")
    parser.add_argument("data_dir")
    args = parser.parse_args(argv)
    try:
        before, after, dropped = fix_data_dir(args.data_dir, tuple(args.utt_extra_files.split()),
                                              tuple(args.spk_extra_files.split()))
    except (FileNotFoundError, ValueError) as error:
        print(f"fix_data_dir.sh: {error}", file=sys.stderr)
        return 1
    named_in = os.path.join(args.data_dir, ".backup", DROPPED)
    named = [line.text for line in read_lines(named_in, KEEP_BYTES)] if os.path.isfile(named_in) else []
    for line in named[:SHOWN]:
        print(f"fix_data_dir.sh: dropped {line}", file=sys.stderr)
    if len(named) > SHOWN:
        print(f"fix_data_dir.sh: ... and {len(named) - SHOWN} more, all in {named_in}", file=sys.stderr)
    why = reasons(dropped) or "nothing dropped"
    print(f"fix_data_dir.sh: {args.data_dir}: kept {after} of {counted(before, 'utterance')} ({why}); "
          f"originals in {args.data_dir}/.backup")
    return 0


if __name__ == "__main__":
    sys.exit(main())

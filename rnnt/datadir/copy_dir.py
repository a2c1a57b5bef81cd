"""Copies a Kaldi data dir, as Kaldi's utils/copy_data_dir.sh: utterance and speaker ids optionally given a
prefix or suffix (recordings keep theirs where there are segments; without segments a recording is its
utterance, renamed with it), every file renamed to match and sorted again, utt2uniq mapping each renamed
utterance to its original (Kaldi's makes it, then moves it to .backup as a file the source lacks: a bug),
frame_shift, stm, glm and ctm copied as they are; then the copy is validated.
A file of an earlier copy in <dest> that the source does not have is moved to <dest>/.backup, as Kaldi's does.

Run as `utils/copy_data_dir.sh [--utt-prefix P] [--utt-suffix S] [--spk-prefix P] [--spk-suffix S]
[--validate-opts "--no-wav"] <src> <dest>`.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Callable

from rnnt.cli import error_line, glued_values, id_affix, tool_parser
from rnnt.counting import counted
from rnnt.datadir import validate
from rnnt.datadir.layout import (FIELDS, FILTERED_SPEAKER, FILTERED_UTTERANCE, PER_RECORDING, PER_SPEAKER, Tables,
                                 load_dir, refuse_writing_over_a_source, utterance_files, write_dir)

SIDE_FILES = ("frame_shift", "stm", "glm", "ctm")  # copied as they are, as Kaldi's copies them


def renamed(tables: Tables, utt: Callable[[str], str], spk: Callable[[str], str]) -> Tables:
    """The tables with every utterance key renamed by utt and every speaker key (and utt2spk value) by spk;
    utt2uniq, made when utterances are renamed, maps each to its original."""
    segmented = "segments" in tables
    out: Tables = {}
    for name, records in tables.items():
        if name in PER_SPEAKER or name in FILTERED_SPEAKER:
            out[name] = {spk(key): value for key, value in records.items()}
        elif name in PER_RECORDING and segmented:
            out[name] = dict(records)
        else:  # keyed by utterance, recordings included when there are no segments
            out[name] = {utt(key): spk(value) if name == "utt2spk" else value for key, value in records.items()}
    if "utt2uniq" not in tables and any(utt(u) != u for u in tables["utt2spk"]):
        out["utt2uniq"] = {utt(u): u for u in tables["utt2spk"]}
    return out


def name_orphans(src: str, tables: Tables) -> None:
    """Names on standard error each line of an utterance's or speaker's file whose key utt2spk does not hold: the
    copy leaves it out (Kaldi's fails on it: apply_map.pl's 'undefined key'; it went in silence)."""
    speakers = set(tables["utt2spk"].values())
    for name, records in tables.items():
        by_speaker = name in PER_SPEAKER or name in FILTERED_SPEAKER
        if by_speaker or name in utterance_files(tables) or name in FILTERED_UTTERANCE:
            known, what = (speakers, "a speaker") if by_speaker else (tables["utt2spk"], "an utterance")
            for key in sorted(set(records) - set(known)):
                print(f"copy_data_dir.sh: {src}/{name}: {key}: not {what} of utt2spk; left out of the copy",
                      file=sys.stderr)


def copy_data_dir(src: str, dest: str, utt: Callable[[str], str], spk: Callable[[str], str]) -> int:
    """Writes the renamed copy; returns its number of utterances."""
    refuse_writing_over_a_source([src], dest, "the copy")
    tables = load_dir(src)
    name_orphans(src, tables)
    tables = renamed(tables, utt, spk)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise ValueError(f"{dest}: exists and is not a directory")
    for name in (*FIELDS, *SIDE_FILES):
        stale = os.path.join(dest, name)
        if name not in tables and not os.path.isfile(os.path.join(src, name)) and os.path.isfile(stale):
            os.makedirs(os.path.join(dest, ".backup"), exist_ok=True)
            os.replace(stale, os.path.join(dest, ".backup", name))
            print(f"copy_data_dir.sh: {stale} is not in {src}; moved to {dest}/.backup", file=sys.stderr)
    write_dir(tables, set(tables["utt2spk"]), dest)
    for name in SIDE_FILES:
        if os.path.isfile(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(dest, name))
    return len(tables["utt2spk"])


def parse_args(argv: list[str] | None):
    parser = tool_parser(__doc__, "utils/copy_data_dir.sh --utt-prefix sp1.1- --spk-prefix sp1.1- data/train "
                         "data/train_sp1.1", prog="copy_data_dir.sh")
    renames = [(f"--{side}-{end}", f"{end} for each {what} id (default none)")
               for side, what in (("utt", "utterance"), ("spk", "speaker")) for end in ("prefix", "suffix")]
    for option, what in renames:
        parser.add_argument(option, type=id_affix, default="", help=what)
    parser.add_argument("--validate-opts", default="", help="options for validate_data_dir.sh on the copy")
    parser.add_argument("src")
    parser.add_argument("dest")
    value_options = (*(option for option, _ in renames), "--validate-opts")
    return parser.parse_args(glued_values(sys.argv[1:] if argv is None else argv, value_options))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        n_utts = copy_data_dir(args.src, args.dest, lambda u: f"{args.utt_prefix}{u}{args.utt_suffix}",
                               lambda s: f"{args.spk_prefix}{s}{args.spk_suffix}")
    except (OSError, ValueError) as error:
        print(f"copy_data_dir.sh: {error_line(error)}", file=sys.stderr)
        return 1
    print(f"copy_data_dir.sh: copied {counted(n_utts, 'utterance')} from {args.src} to {args.dest}")
    absent = [f"--no-{kind}" for kind, name in (("feats", "feats.scp"), ("text", "text"))
              if not os.path.isfile(os.path.join(args.src, name))]
    return validate.main([*args.validate_opts.split(), *absent, args.dest])


if __name__ == "__main__":
    sys.exit(main())

"""Combines several Kaldi data dirs into one; a key found in two of them is an error.

As Kaldi's script of that name: when some sources have `segments` and others do not, each utterance of
the others becomes a segment covering its whole recording (`<utt> <utt> 0 -1`, -1 meaning the end), so
the combined dir keeps every segment; and when some have `utt2uniq`, each utterance of the others is its own
original. Other files missing from a source are left out, and named; the files of a data dir that an earlier
run left in <dest> and this one does not write are removed. Then, as
Kaldi's does unless `--skip-fix true`, the result is repaired by utils/fix_data_dir.sh (rnnt.datadir.fix):
an utterance a source left out of one of its files is dropped, and counted.

Run as `utils/combine_data.sh [--skip-fix true] <dest> <src1> <src2> ...`.
"""

from __future__ import annotations

import os
import sys

from rnnt.cli import tool_parser
from rnnt.datadir.fix import fix_data_dir, reasons
from rnnt.datadir.layout import FIELDS, FILTERED_SPEAKER, PER_RECORDING, PER_SPEAKER, Tables, load_dir, write_dir


def combine(sources: list[str]) -> Tables:
    """Merges the sources' files; only files present in every source are kept."""
    loaded = [load_dir(src) for src in sources]
    if any("segments" in tables for tables in loaded):
        for tables in loaded:
            if "segments" not in tables:  # one recording per utterance, keyed by the utterance
                tables["segments"] = {utt: f"{utt} 0 -1" for utt in tables["utt2spk"]}
    if any("utt2uniq" in tables for tables in loaded):
        for tables in loaded:  # as Kaldi's: an utterance of a source without utt2uniq is its own original
            tables.setdefault("utt2uniq", {utt: utt for utt in tables["utt2spk"]})
    shared = set.intersection(*(set(tables) for tables in loaded))
    common = [name for name in FIELDS if name in shared]  # utt2spk first: its duplicates are named first
    merged: Tables = {name: {} for name in common}
    origin: dict[tuple[str, str], str] = {}
    for src, tables in zip(sources, loaded):
        for name in common:
            for key, value in tables[name].items():
                if key in merged[name]:
                    shared_entity = name in PER_SPEAKER or name in FILTERED_SPEAKER or name in PER_RECORDING
                    if shared_entity and merged[name][key] == value:
                        continue  # the same speaker or recording shared by two dirs is fine
                    raise ValueError(f"{os.path.join(src, name)}: key '{key}' is also in "
                                     f"{os.path.join(origin[name, key], name)}; keys must be unique across dirs")
                merged[name][key] = value
                origin[name, key] = src
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/combine_data.sh data/train_all data/train data/extra", prog="combine_data.sh")
    parser.add_argument("--skip-fix", choices=("true", "false"), default="false",
                        help="true: leave the combined dir as combined, without utils/fix_data_dir.sh")
    parser.add_argument("dest")
    parser.add_argument("sources", nargs="+")
    args = parser.parse_args(argv)
    try:
        merged = combine(args.sources)
    except (FileNotFoundError, ValueError) as error:
        print(f"combine_data.sh: {error}", file=sys.stderr)
        return 1
    present = {name for src in args.sources for name in FIELDS if os.path.isfile(os.path.join(src, name))}
    for name in sorted(present - set(merged)):  # each named once, the sources not read again
        print(f"combine_data.sh: {name} is not in every source; left out", file=sys.stderr)
    try:
        for name in [*FIELDS, "spk2utt"]:  # what an earlier run left (Kaldi's starts from an empty dest)
            if name not in merged and os.path.isfile(os.path.join(args.dest, name)):
                os.remove(os.path.join(args.dest, name))
        write_dir(merged, set(merged["utt2spk"]), args.dest)
    except (OSError, ValueError) as error:
        print(f"combine_data.sh: {error}", file=sys.stderr)
        return 1
    fixed = ""
    if args.skip_fix == "false":
        try:
            before, after, dropped = fix_data_dir(args.dest)
        except ValueError as error:
            print(f"combine_data.sh: {error}", file=sys.stderr)
            return 1
        why = reasons(dropped)
        fixed = f"; fix_data_dir.sh kept {after} of {before}" + (f" ({why})" if why else "")
    print(f"combine_data.sh: {len(merged['utt2spk'])} utterances from {len(args.sources)} dirs into {args.dest}{fixed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

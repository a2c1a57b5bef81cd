"""Combines several Kaldi data dirs into one; an utterance found in two of them is an error.

A speaker or a recording may be in several with the same lines; a speaker's that differ (spk2gender, cmvn.scp)
are taken from the first source that has it and named (Kaldi's keeps one too, the line that sorts first, whichever
source it came from; a per-speaker cmvn.scp differs between dirs of the same speakers by nature), a recording's
that differ (wav.scp, reco2dur) are an
error: the same recording id for two files would give one source's segments the other's audio.

As Kaldi's script of that name: when some sources have `segments` and others do not, each utterance of
the others becomes a segment covering its whole recording (`<utt> <utt> 0 <its utt2dur>`, measured from its audio
for a source without utt2dur; -1, meaning the end, where that cannot be read, named), so the combined dir keeps
every segment; and when some have `utt2uniq`,
each utterance of the others is its own original. Other files missing from a source are left out, and named;
the files of a data dir that an earlier run left in <dest> and this one does not write are removed.
`--extra-files "A B"` combines more files the same way (keys unique across dirs), left as they are by the
repair. Where sources with feats.scp have a frame_shift, they must agree, and it is copied. Then, as Kaldi's
does unless `--skip-fix true`, the result is repaired by utils/fix_data_dir.sh (rnnt.datadir.fix): an
utterance a source left out of one of its files is dropped, and counted.

Run as `utils/combine_data.sh [--skip-fix true] [--extra-files "A B"] <dest> <src1> <src2> ...`.
"""

from __future__ import annotations

import os
import sys

from rnnt.cli import error_line, tool_parser
from rnnt.datadir.durations import seconds_text, utterance_durations
from rnnt.datadir.fix import DROPPED, fix_data_dir, reasons
from rnnt.datadir.layout import (FIELDS, FILTERED_SPEAKER, PER_RECORDING, PER_SPEAKER, Tables, load_dir,
                                 refuse_writing_over_a_source, remove_unwritten, write_dir)
from rnnt.datadir.table import write_table


def whole_recordings(src: str, tables: Tables) -> dict[str, str]:
    """utt -> its recording's length in seconds, for a source without segments: its utt2dur's, else (for every
    utterance, where utt2dur lacks some: they became '0 -1' segments in silence) measured from the audio, as
    Kaldi's combine_data.sh has get_utt2dur.sh do; one that cannot be read is named, its end -1 (the recording's
    end, as extract-segments reads it, which Kaldi's validate_data_dir.sh refuses)."""
    given = tables.get("utt2dur", {})
    lacking = len(set(tables["utt2spk"]) - set(given))
    if not lacking:
        return given
    if given:
        print(f"combine_data.sh: {src}/utt2dur lacks {lacking} of its utterances; their lengths measured from the "
              "audio", file=sys.stderr)
    durations, problems = utterance_durations(src)
    for problem in problems:
        print(f"combine_data.sh: {problem}; its segment ends at -1 (the recording's end), which Kaldi's "
              "validate_data_dir.sh refuses", file=sys.stderr)
    return {**{utt: seconds_text(seconds) for utt, seconds in durations.items()}, **given}


def combine(sources: list[str], extra: tuple[str, ...] = ()) -> Tables:
    """Merges the sources' files and the extra ones named; only files present in every source are kept."""
    loaded = [load_dir(src, extra=extra) for src in sources]
    if any("segments" in tables for tables in loaded):
        for src, tables in zip(sources, loaded):
            if "segments" not in tables:  # one recording per utterance, keyed by the utterance
                durations = whole_recordings(src, tables)
                tables["segments"] = {utt: f"{utt} 0 {durations.get(utt, '-1')}" for utt in tables["utt2spk"]}
    if any("utt2uniq" in tables for tables in loaded):
        for tables in loaded:  # as Kaldi's: an utterance of a source without utt2uniq is its own original
            tables.setdefault("utt2uniq", {utt: utt for utt in tables["utt2spk"]})
    shared = set.intersection(*(set(tables) for tables in loaded))
    common = [name for name in (*FIELDS, *extra) if name in shared]  # utt2spk first: its duplicates named first
    merged: Tables = {name: {} for name in common}
    origin: dict[tuple[str, str], str] = {}
    for src, tables in zip(sources, loaded):
        for name in common:
            for key, value in tables[name].items():
                if key in merged[name]:
                    shared_entity = name in PER_SPEAKER or name in FILTERED_SPEAKER or name in PER_RECORDING
                    if (shared_entity or name in extra) and merged[name][key] == value:
                        continue  # the same speaker or recording (or an extra file's line) in two dirs is fine
                    if name in PER_SPEAKER or name in FILTERED_SPEAKER:
                        print(f"combine_data.sh: {os.path.join(src, name)}: {key} differs from "
                              f"{os.path.join(origin[name, key], name)}; the first kept", file=sys.stderr)
                        continue
                    raise ValueError(f"{os.path.join(src, name)}: key '{key}' is also in "
                                     f"{os.path.join(origin[name, key], name)}; keys must be unique across dirs")
                merged[name][key] = value
                origin[name, key] = src
    return merged


def frame_shift_of(sources: list[str]) -> str | None:
    """The frame_shift of the sources that have features (feats.scp), which must be the same; None without one."""
    found = [(src, read_text(os.path.join(src, "frame_shift"))) for src in sources
             if os.path.isfile(os.path.join(src, "feats.scp")) and os.path.isfile(os.path.join(src, "frame_shift"))]
    for src, shift in found[1:]:
        if shift != found[0][1]:
            raise ValueError(f"{src}/frame_shift differs from {found[0][0]}/frame_shift; features with different frame "
                             "shifts cannot be combined")
    return found[0][1] if found else None


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def parse_args(argv: list[str] | None):
    parser = tool_parser(__doc__, "utils/combine_data.sh data/train_all data/train data/extra", prog="combine_data.sh")
    parser.add_argument("--skip-fix", choices=("true", "false"), default="false",
                        help="true: leave the combined dir as combined, without utils/fix_data_dir.sh")
    parser.add_argument("--extra-files", default="", help="more files to combine, by name (\"A B\")")
    parser.add_argument("dest")
    parser.add_argument("sources", nargs="+")
    args = parser.parse_args(argv)
    known = (*FIELDS, "spk2utt")  # combined by their own rules already
    args.extra = tuple(dict.fromkeys(name for name in args.extra_files.split() if name not in known))
    return args


def write_combined(merged: Tables, extra: tuple[str, ...], frame_shift: str | None, dest: str) -> None:
    """Writes the combined dir, the extra files whole (their keys are no one's to filter), over what an earlier run
    left there (Kaldi's starts from an empty dest)."""
    remove_unwritten(dest, {*merged, "spk2utt", *(["frame_shift"] if frame_shift is not None else [])}, extra)
    write_dir({name: records for name, records in merged.items() if name not in extra}, set(merged["utt2spk"]), dest)
    for name in extra:
        if name in merged:
            write_table(os.path.join(dest, name), merged[name].items())
    if frame_shift is not None:
        with open(os.path.join(dest, "frame_shift"), "w", encoding="utf-8") as f:
            f.write(frame_shift)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        refuse_writing_over_a_source(args.sources, args.dest, "the combined dir")
        merged = combine(args.sources, args.extra)
        frame_shift = frame_shift_of(args.sources)
    except (FileNotFoundError, ValueError) as error:
        print(f"combine_data.sh: {error_line(error)}", file=sys.stderr)
        return 1
    names = (*FIELDS, *args.extra)
    present = {name for src in args.sources for name in names if os.path.isfile(os.path.join(src, name))}
    for name in sorted(present - set(merged)):  # each named once, the sources not read again
        lacking = [src for src in args.sources if not os.path.isfile(os.path.join(src, name))]
        print(f"combine_data.sh: {name} is not in every source ({' '.join(lacking)} lacks it); left out",
              file=sys.stderr)
    try:
        write_combined(merged, args.extra, frame_shift, args.dest)
    except (OSError, ValueError) as error:
        print(f"combine_data.sh: {error_line(error)}", file=sys.stderr)
        return 1
    fixed = ""
    if args.skip_fix == "false":
        try:
            before, after, dropped = fix_data_dir(args.dest)
        except ValueError as error:
            print(f"combine_data.sh: {error_line(error)}", file=sys.stderr)
            return 1
        why = reasons(dropped)
        named = os.path.join(args.dest, ".backup", DROPPED)
        fixed = (f"; fix_data_dir.sh kept {after} of {before}" + (f" ({why})" if why else "")
                 + (f"; the utterances dropped named in {named}" if os.path.isfile(named) else ""))
    print(f"combine_data.sh: {len(merged['utt2spk'])} utterances from {len(args.sources)} dirs into {args.dest}{fixed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Copy a Kaldi data dir of your own into a recipe as its stages want it.

The tables are copied (utils/copy_data_dir.sh's copy: sorted, a file of an earlier copy that the source lacks
moved to <dest>/.backup), repaired (utils/fix_data_dir.sh: an utterance missing from a table it needs is
dropped and named in <dest>/.backup/dropped_utterances), given utt2dur where the source has none
(utils/get_utt2dur.sh: a recording that cannot be read is named by its wav.scp line and its utterances dropped)
and validated by Kaldi's rules. wav.scp may name files soundfile reads or commands ending in '|'; segments cut
recordings as Kaldi's extract-segments does. A relative path that names no file from here is taken from the
source dir or a folder above it (a Kaldi recipe's s5 folder, a corpus's root) and written absolute. Features
(feats.scp) are not used: the recipes compute their own. Exit status 0, or 1 with the problem named: no
utterance left, or a copy Kaldi's rules refuse.
"""

import os
import sys
from collections import Counter

from rnnt.cli import ToolError, at_least, run_tool, tool_parser
from rnnt.datadir.copy_dir import copy_data_dir
from rnnt.datadir.durations import write_utt2dur
from rnnt.datadir.fix import DROPPED, fix_data_dir, reasons
from rnnt.datadir.table import KEEP_BYTES, read_lines, read_table, write_table
from rnnt.datadir.validate import validate_data_dir


def resolve_relative_paths(dest: str, src: str) -> str:
    """Rewrites each relative file path of dest's wav.scp that names no file from here as the file it names from
    src or a folder above it (Kaldi's paths count from the recipe folder the dir was made in, a corpus's own lists
    from its root: speechocean762's WAVE/...); returns where they were found ('' where none was rewritten)."""
    path = os.path.join(dest, "wav.scp")
    wav = read_table(path, errors=KEEP_BYTES)
    bases = [os.path.abspath(src)]
    while os.path.dirname(bases[-1]) != bases[-1] and len(bases) < 4:
        bases.append(os.path.dirname(bases[-1]))
    found: dict[str, str] = {}
    for key, line in wav.items():
        value = line.value
        if value.endswith("|") or os.path.isabs(value) or os.path.exists(value):
            continue
        base = next((b for b in bases if os.path.exists(os.path.join(b, value))), None)
        if base is not None:
            found[key] = base
    if found:
        write_table(path, ((key, os.path.join(found[key], line.value) if key in found else line.value)
                           for key, line in wav.items()))
    return ", ".join(f"{n} relative paths found under {base}" for base, n in sorted(Counter(found.values()).items()))


def utterances_of(data_dir: str) -> set[str]:
    """The first field of every line of the dir's utt2spk: its utterances, a malformed line's too."""
    return {line.key for line in read_lines(os.path.join(data_dir, "utt2spk"), KEEP_BYTES) if line.key}


def record_left_out(dest: str, utterances: set[str], dropped: Counter) -> None:
    """The utterances the copy left out (a malformed line of utt2spk, named by the copy), counted in dropped and
    named in .backup/dropped_utterances beside those the fix dropped."""
    why = "left out of the copy (named above)"
    dropped[why] += len(utterances)
    path = os.path.join(dest, ".backup", DROPPED)
    named = [(line.key, line.value) for line in read_lines(path, KEEP_BYTES)] if os.path.isfile(path) else []
    write_table(path, named + [(utterance, why) for utterance in utterances])


def import_data_dir(src: str, dest: str, nj: int) -> str:
    """Writes dest from src; returns the summary line's account of it."""
    if not os.path.isfile(os.path.join(src, "wav.scp")) or not os.path.isfile(os.path.join(src, "text")):
        raise ToolError(f"{src}: not a data dir with wav.scp and text (a Kaldi data dir of transcribed audio)")
    source = utterances_of(src)
    copy_data_dir(src, dest, str, str)
    left_out = source - utterances_of(dest)
    resolved = resolve_relative_paths(dest, src)
    measured = f"{resolved}; " if resolved else ""
    if not os.path.isfile(os.path.join(dest, "utt2dur")):  # before the fix, which drops what it leaves out
        written, _, problems = write_utt2dur(dest, nj)
        for problem in problems:
            print(f"import_data_dir.py: left out {problem}", file=sys.stderr)
        if not written:
            raise ToolError(f"{src}: none of its recordings could be read (named above); nothing to import")
        measured += f"utt2dur of {written} utterances measured, {len(problems)} left out; "
    _, _, dropped = fix_data_dir(dest)
    if left_out:
        record_left_out(dest, left_out, dropped)
    problems = validate_data_dir(dest, no_feats=True)
    if problems:
        raise ToolError(f"{dest}: the copy of {src} is not valid by Kaldi's rules:\n" + "\n".join(problems))
    durations = read_table(os.path.join(dest, "utt2dur"))
    hours = sum(float(line.value) for line in durations.values()) / 3600
    speakers = len(read_table(os.path.join(dest, "spk2utt")))
    return (f"{len(durations)} of {len(source)} utterances, {speakers} speakers, {hours:.2f} h; {measured}"
            f"{reasons(dropped) or 'nothing dropped'}")


def main() -> str:
    parser = tool_parser(__doc__, "steps/import_data_dir.py /path/to/kaldi/data/train data/train")
    parser.add_argument("--nj", type=at_least(1), default=4, help="recordings read at once for utt2dur (default 4)")
    parser.add_argument("src", help="the Kaldi data dir: wav.scp, text, utt2spk (segments, utt2dur, spk2gender ...)")
    parser.add_argument("dest", help="the recipe's data dir, e.g. data/train")
    args = parser.parse_args()
    try:
        account = import_data_dir(args.src, args.dest, args.nj)
    except (OSError, ValueError) as error:
        raise ToolError(str(error)) from None
    return f"wrote {args.dest} from {args.src}: {account}"


if __name__ == "__main__":
    run_tool(main)

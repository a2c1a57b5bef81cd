#!/usr/bin/env python3
"""Copy a Kaldi data dir of your own into a recipe as its stages want it.

The tables are copied (utils/copy_data_dir.sh's copy: sorted, a file of an earlier copy that the source lacks moved
to <dest>/.backup), repaired (utils/fix_data_dir.sh: an utterance missing from a table it needs is dropped and named
in <dest>/.backup/dropped_utterances), given utt2dur where the source has none of every utterance, each a duration
(utils/get_utt2dur.sh: a recording that cannot be read is named by its line in the source's wav.scp and its
utterances dropped; fewer than half of them readable is refused, as Kaldi's) and validated by Kaldi's rules; a
transcript they refuse (not UTF-8, a control character) is named by its line and its utterance dropped. An empty
transcript is kept (trained as saying nothing) and named by its line. wav.scp may name files soundfile reads or
commands ending in '|' (run from here, each once where utt2dur is measured, segments or not: a program missing
is found here, not by every stage after); segments cut recordings as Kaldi's extract-segments does, a recording's
command run once for all its segments. A relative path that names no file from here is taken from the source dir or
a folder above it (a Kaldi recipe's s5 folder, a corpus's root) and written absolute. Features (feats.scp) are not
used: the recipes compute their own. Where utt2spk sorted by utterance is not sorted by speaker too (Kaldi's rule),
each utterance id that does not start with its speaker's is given it as a prefix ('<speaker>-<utterance>'; utt2uniq
maps them back). Exit status 0, or 1 with the problem named: no utterance left, fewer than half readable, or a copy
Kaldi's rules refuse.
"""

import os
import sys
from collections import Counter

from rnnt.cli import at_least, error_line, run_tool, tool_parser, ToolError
from rnnt.counting import counted
from rnnt.datadir.copy_dir import copy_data_dir
from rnnt.datadir.durations import complete_utt2dur, utterances_of, write_utt2dur
from rnnt.datadir.fix import DROPPED, fix_data_dir, reasons
from rnnt.datadir.table import KEEP_BYTES, lines_named_from, read_lines, read_table, write_table
from rnnt.datadir.table_rules import speaker_sort_key, transcript_problems
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


def record_dropped(dest: str, utterances: set[str], why: str, dropped: Counter) -> None:
    """Utterances that did not come through for a reason the fix cannot know (a malformed line of utt2spk the copy
    left out; audio that could not be read, which the fix drops as 'not in utt2dur'), counted in dropped and named
    in .backup/dropped_utterances with why, in place of the fix's reason where it dropped them too."""
    path = os.path.join(dest, ".backup", DROPPED)
    named = [(line.key, line.value) for line in read_lines(path, KEEP_BYTES)] if os.path.isfile(path) else []
    for utterance, reason in named:
        if utterance in utterances:
            dropped[reason] -= 1
    dropped[why] += len(utterances)
    write_table(path, [(utterance, reason) for utterance, reason in named if utterance not in utterances]
                + [(utterance, why) for utterance in sorted(utterances)])


def speaker_prefixes(src: str) -> dict[str, str]:
    """utterance -> '<speaker>-<utterance>' for each utterance whose id does not start with its speaker's, where
    src's utt2spk sorted by utterance is not sorted by speaker too (Kaldi's rule, which such ids keep; a dir made by
    hand often breaks it); {} where it is."""
    utt2spk = read_table(os.path.join(src, "utt2spk"), errors=KEEP_BYTES)
    speaker = {utt: line.fields[1] for utt, line in utt2spk.items() if len(line.fields) == 2}
    order = [speaker_sort_key(f"{utt} {speaker[utt]}") for utt in sorted(speaker)]
    if order == sorted(order):
        return {}
    return {utt: f"{spk}-{utt}" for utt, spk in speaker.items() if not utt.startswith(spk)}


SHOWN = 20  # recordings that cannot be read named on the terminal, as data_prep.py's


def measure_durations(src: str, dest: str, nj: int, original: dict[str, str]) -> tuple[str, set[str]]:
    """utt2dur for dest, each recording that cannot be read named by its line in src (original: the ids src has for
    those renamed); returns the account of it and the utterances left out. Fewer than half of them measured is a
    failure, as Kaldi's get_utt2dur.sh's."""
    utterances = utterances_of(dest)
    written, _, problems = write_utt2dur(dest, nj, named_from=src, original=original, run_commands=True)
    for problem in problems[:SHOWN]:  # past them, a file: thousands of lines (paths relative to another folder)
        print(f"import_data_dir.py: left out {problem}", file=sys.stderr)  # buried the diagnosis after them
    if len(problems) > SHOWN:
        listed = os.path.join(dest, ".backup", "unread_audio")
        os.makedirs(os.path.dirname(listed), exist_ok=True)
        with open(listed, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.writelines(f"{problem}\n" for problem in problems)
        print(f"import_data_dir.py: left out {len(problems) - SHOWN} more, each named in {listed} with the "
              f"{SHOWN} above", file=sys.stderr)
    if written * 2 < len(utterances):
        raise ToolError(f"{src}: the recordings of only {written} of its {len(utterances)} utterances could be read "
                        f"(the others named above{', and in .backup/unread_audio' if len(problems) > SHOWN else ''}): "
                        "fewer than half, which Kaldi's get_utt2dur.sh refuses too; a command's program missing, or "
                        "paths relative to another folder?")
    measured = read_table(os.path.join(dest, "utt2dur"))
    segments = os.path.join(dest, "segments")  # (an utterance with no line there, or in wav.scp, has no audio)
    sourced = read_table(segments if os.path.isfile(segments) else os.path.join(dest, "wav.scp"), [], KEEP_BYTES)
    return (f"utt2dur of {written} utterances measured, {len(utterances) - written} left out; ",
            utterances & set(sourced) - set(measured))


def refused_transcripts(src: str, dest: str, original: dict[str, str]) -> set[str]:
    """Takes out of dest's text each transcript Kaldi's text rules refuse (bytes that are not UTF-8, a control
    character, <s>), naming it by its line in src; returns their utterances, which the fix then drops (the whole
    import was refused for one)."""
    path = os.path.join(dest, "text")
    text = read_table(path, errors=KEEP_BYTES)
    refused = {key: found[0] for key, line in text.items() if (found := transcript_problems(line.value))}
    where = lines_named_from(src, text, "text", original)
    for key, (problem, fix, _) in sorted(refused.items()):
        print(f"import_data_dir.py: {where[key]}: {key}: {problem}; dropped ({fix})", file=sys.stderr)
    if refused:
        write_table(path, ((key, line.value) for key, line in text.items() if key not in refused))
    return set(refused)


def empty_transcripts(src: str, dest: str, original: dict[str, str]) -> int:
    """Names each utterance kept whose transcript is empty, by its line in src; returns how many."""
    text = read_table(os.path.join(dest, "text"), errors=KEEP_BYTES)
    empty = {key for key, line in text.items() if not line.value.strip()}
    for key, where in sorted(lines_named_from(src, text, "text", original).items()):
        if key in empty:
            print(f"import_data_dir.py: {where}: {key}: an empty transcript; kept, trained as saying nothing",
                  file=sys.stderr)
    return len(empty)


def import_data_dir(src: str, dest: str, nj: int) -> str:
    """Writes dest from src; returns the summary line's account of it."""
    if not os.path.isfile(os.path.join(src, "wav.scp")) or not os.path.isfile(os.path.join(src, "text")):
        raise ToolError(f"{src}: not a data dir with wav.scp and text (a Kaldi data dir of transcribed audio)")
    if not os.path.isfile(os.path.join(src, "utt2spk")):
        raise ToolError(f"{src}: no utt2spk (each utterance's speaker, which a Kaldi data dir holds); without "
                        f"speakers, make each utterance its own, as Kaldi's docs say: awk '{{print $1, $1}}' "
                        f"{src}/text > {src}/utt2spk")
    for name in ("wav.scp", "text", "utt2spk"):  # (an empty utt2spk was named as 'DEST/utt2dur: No such file', an
        if not any(line.key for line in read_lines(os.path.join(src, name), KEEP_BYTES)):  # empty wav.scp as
            raise ToolError(f"{src}/{name} is empty: no utterance to import")  # unreadable audio named above)
    prefixed = speaker_prefixes(src)
    copy_data_dir(src, dest, lambda utt: prefixed.get(utt, utt), str)  # utt2uniq maps them back
    original = {new: old for old, new in prefixed.items()}
    source = utterances_of(src)
    left_out = {prefixed.get(utt, utt) for utt in source} - utterances_of(dest)
    resolved = resolve_relative_paths(dest, src)
    measured, unread = f"{resolved}; " if resolved else "", set()
    if prefixed:
        measured += (f"{counted(len(prefixed), 'utterance id')} prefixed with the speaker's, as Kaldi's order rule "
                     "wants (utt2uniq maps them back); ")
    if not complete_utt2dur(dest):  # before the fix, which drops what it leaves out
        account, unread = measure_durations(src, dest, nj, original)
        measured += account
    refused = refused_transcripts(src, dest, original)
    try:
        _, _, dropped = fix_data_dir(dest)
    except ValueError as error:  # (the fix's "nothing changed" is of the copy, not a word on the import)
        raise ToolError(f"{src}: its copy {dest} cannot be repaired: {str(error).removesuffix('; nothing changed')}"
                        f"; {src} is as it was") from None
    for utterances, why in ((left_out, "left out of the copy (named above)"),
                            (unread, "no duration: audio unreadable or a bad segment (named above)"),
                            (refused, "refused by Kaldi's text rules (named above)")):
        if utterances:
            record_dropped(dest, utterances, why, dropped)
    empty = empty_transcripts(src, dest, original)
    if empty:
        measured += f"{empty} with an empty transcript (named above); "
    problems = validate_data_dir(dest, no_feats=True)
    if problems:
        raise ToolError(f"{dest}: the copy of {src} is not valid by Kaldi's rules:\n" + "\n".join(problems))
    durations = read_table(os.path.join(dest, "utt2dur"))
    hours = sum(float(line.value) for line in durations.values()) / 3600
    speakers = len(read_table(os.path.join(dest, "spk2utt")))
    return (f"{len(durations)} of {counted(len(source), 'utterance')}, {counted(speakers, 'speaker')}, {hours:.2f} h; "
            f"{measured}{reasons(dropped) or 'nothing dropped'}")


def main() -> str:
    parser = tool_parser(__doc__, "steps/import_data_dir.py /path/to/kaldi/data/train data/train")
    parser.add_argument("--nj", type=at_least(1), default=4, help="recordings read at once for utt2dur (default 4)")
    parser.add_argument("src", help="the Kaldi data dir: wav.scp, text, utt2spk (segments, utt2dur, spk2gender ...)")
    parser.add_argument("dest", help="the recipe's data dir, e.g. data/train")
    args = parser.parse_args()
    try:
        account = import_data_dir(args.src, args.dest, args.nj)
    except (OSError, ValueError) as error:
        raise ToolError(error_line(error)) from None
    return f"wrote {args.dest} from {args.src}: {account}"


if __name__ == "__main__":
    run_tool(main)

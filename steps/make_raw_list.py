#!/usr/bin/env python3
"""Write the raw-mode data list of a Kaldi data dir: one JSON object a line, {"key", "wav", "txt"},
with "start" and "end" (seconds) for segments (one that runs to its recording's end, end -1 as
combine_data.sh writes it for a source without segments or utt2dur, ends at the recording's length; from 0,
it is the whole file), and "duration" (seconds; data.buckets orders by it) from utt2dur, or a segment's
own times. WeNet reads the same format.

Entries whose audio is a piped command, or a path that is not UTF-8, cannot be listed raw: they are named
and skipped (use steps/make_shards.py for them), as is a path to no file, a folder or an empty file (the audio
itself is read by training: make_shards.py checks it), and whatever cannot be paired (audio without transcript,
transcript without audio, a malformed segment, a repeated key).
"""

import json
import os
import sys

from rnnt.atomic_write import write_atomically
from rnnt.cli import cannot_write, error_line, run_tool, tool_parser, ToolError
from rnnt.counting import counted
from rnnt.data.audio_header import AudioError, what_is_there
from rnnt.datadir.table import has_undecodable_bytes, read_table
from rnnt.datadir.utterances import read_utterances
from rnnt.datadir.values import is_positive_number
from rnnt.prep.data_dir_writer import audio_info


def not_a_recording(path: str) -> str | None:
    """Why a path cannot be a recording as far as the file system tells (no audio is read: a list of a large corpus
    is written in seconds), or None: a missing, empty or folder path was listed, and skipped by every training."""
    why = what_is_there(path)
    return f"{path}: {why}" if why else None


def raw_entry(utterance) -> tuple[dict, str]:
    """The utterance's entry, with "start" and "end" for a segment (WeNet's reader wants both; 0 to -1 is the
    whole file), or why it cannot have one."""
    if utterance.source.endswith("|"):
        return {}, "a piped command cannot be a raw entry"
    if has_undecodable_bytes(utterance.source):
        return {}, ("its path is not UTF-8, which a list (JSON) cannot hold; rename the file, or use "
                    "steps/make_shards.py")
    if problem := not_a_recording(utterance.source):
        return {}, problem
    entry = {"key": utterance.key, "wav": utterance.source, "txt": utterance.text}
    if utterance.start is None or (utterance.start == 0 and utterance.end < 0):
        return entry, ""
    end = utterance.end
    if end < 0:  # to the recording's end: its length from its header
        try:
            end = audio_info(utterance.source).duration
        except AudioError as error:
            return {}, f"its segment runs to the end of a recording whose length cannot be read ({error})"
    return {**entry, "start": utterance.start, "end": end}, ""


def main() -> str:
    parser = tool_parser(__doc__, "steps/make_raw_list.py data/train data/train/raw.list")
    parser.add_argument("data_dir")
    parser.add_argument("data_list", help="output file, e.g. data/train/data.list")
    args = parser.parse_args()
    durations_path = os.path.join(args.data_dir, "utt2dur")
    try:
        utterances, skipped = read_utterances(args.data_dir)
        durations = read_table(durations_path) if os.path.isfile(durations_path) else {}
    except OSError as error:
        raise ToolError(error_line(error)) from error
    rows, without_duration = [], 0
    for utterance in utterances:
        entry, problem = raw_entry(utterance)
        if problem:
            skipped.append(f"{utterance.audio_where}: {utterance.key}: {problem}")
            continue
        duration = durations.get(utterance.key)
        if duration is not None and is_positive_number(duration.value):
            entry["duration"] = float(duration.value)
        elif duration is None and "end" in entry:  # a segment's own length, as Kaldi's utt2dur has it
            entry["duration"] = round(entry["end"] - entry["start"], 3)
        elif durations:  # bucketing leaves out an entry without one
            without_duration += 1
            problem = (f"{duration.where}: duration '{duration.value}' is not a positive number" if duration else
                       f"not in {durations_path}")
            print(f"make_raw_list.py: {utterance.key}: {problem}; listed without a duration", file=sys.stderr)
        rows.append(entry)
    for reason in skipped:
        print(f"make_raw_list.py: skipped {reason}", file=sys.stderr)
    if not rows:
        raise ToolError(f"{args.data_dir}: no utterance has both audio and text")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.data_list)), exist_ok=True)
        write_atomically(args.data_list, lambda f: f.writelines(json.dumps(row, ensure_ascii=False) + "\n"
                                                                for row in rows))
    except OSError as error:
        raise cannot_write(args.data_list, "the list", error) from error
    hours = sum(row.get("duration", 0.0) for row in rows) / 3600
    missing = f"; {without_duration} listed without a duration (named above)" if without_duration else ""
    return f"{args.data_list}: {counted(len(rows), 'utterance')}, {hours:.2f} h; skipped {len(skipped)}{missing}"


if __name__ == "__main__":
    run_tool(main)

#!/usr/bin/env python3
"""Write the raw-mode data list of a Kaldi data dir: one JSON object a line, {"key", "wav", "txt"},
with "start" and "end" (seconds) for segments (no "end" for one that runs to its recording's end, as
combine_data.sh writes -1), and "duration" (seconds; data.buckets orders by it) from utt2dur, or a segment's
own times. WeNet reads the same format.

Entries whose audio is a piped command cannot be listed raw: they are named and skipped (use
steps/make_shards.py for them), as is whatever cannot be paired (audio without transcript, transcript
without audio, a malformed segment, a repeated key).
"""

import json
import os
import sys

from rnnt.cli import ToolError, run_tool, tool_parser
from rnnt.datadir.table import read_table
from rnnt.datadir.utterances import read_utterances
from rnnt.datadir.values import is_positive_number


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
        raise ToolError(str(error)) from error
    rows, without_duration = [], 0
    for utterance in utterances:
        if utterance.source.endswith("|"):
            skipped.append(f"{utterance.audio_where}: {utterance.key}: a piped command cannot be a raw entry")
            continue
        entry = {"key": utterance.key, "wav": utterance.source, "txt": utterance.text}
        if utterance.start is not None:  # a segment; one to the end of its recording (end -1) has no end
            entry.update(start=utterance.start, **({"end": utterance.end} if utterance.end >= 0 else {}))
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
    tmp = f"{args.data_list}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    os.replace(tmp, args.data_list)
    hours = sum(row.get("duration", 0.0) for row in rows) / 3600
    missing = f"; {without_duration} listed without a duration (named above)" if without_duration else ""
    return f"{args.data_list}: {len(rows)} utterances, {hours:.2f} h; skipped {len(skipped)}{missing}"


if __name__ == "__main__":
    run_tool(main)

#!/usr/bin/env python3
"""Write the raw-mode data list of a Kaldi data dir: one JSON object a line, {"key", "wav", "txt"},
with "start" and "end" (seconds) for segments. WeNet reads the same format.

Entries whose audio is a piped command cannot be listed raw: they are named and skipped (use
steps/make_shards.py for them).
"""

import json
import os
import sys

from rnnt.cli import ToolError, run_tool, tool_parser
from rnnt.datadir.table import read_table


def main() -> str:
    parser = tool_parser(__doc__)
    parser.add_argument("data_dir")
    parser.add_argument("data_list", help="output file, e.g. data/train/data.list")
    args = parser.parse_args()
    try:
        text = read_table(os.path.join(args.data_dir, "text"))
        wav = read_table(os.path.join(args.data_dir, "wav.scp"))
        durations = read_table(os.path.join(args.data_dir, "utt2dur")) \
            if os.path.isfile(os.path.join(args.data_dir, "utt2dur")) else {}
        segments_path = os.path.join(args.data_dir, "segments")
        segments = read_table(segments_path) if os.path.isfile(segments_path) else None
    except OSError as error:
        raise ToolError(str(error)) from error
    rows, skipped = [], 0
    for utt in sorted(text):
        if segments is not None:
            if utt not in segments:
                continue
            _, reco, start, end = segments[utt].fields
            entry = {"key": utt, "wav": wav[reco].value if reco in wav else None, "txt": text[utt].value,
                     "start": float(start), "end": float(end)}
        else:
            entry = {"key": utt, "wav": wav[utt].value if utt in wav else None, "txt": text[utt].value}
        if entry["wav"] is None or entry["wav"].endswith("|"):
            why = "no wav.scp entry" if entry["wav"] is None else "a piped command cannot be a raw entry"
            print(f"make_raw_list.py: skipped {utt}: {why}", file=sys.stderr)
            skipped += 1
            continue
        if utt in durations:
            entry["duration"] = float(durations[utt].value)
        rows.append(entry)
    tmp = f"{args.data_list}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    os.replace(tmp, args.data_list)
    hours = sum(row.get("duration", 0.0) for row in rows) / 3600
    return f"{args.data_list}: {len(rows)} utterances, {hours:.2f} h; skipped {skipped}"


if __name__ == "__main__":
    run_tool(main)

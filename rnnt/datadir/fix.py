"""Repairs a Kaldi data dir in place: strips CR and stray spaces, drops empty, malformed and duplicate
lines, sorts every file, keeps only utterances present in every per-utterance file, rebuilds spk2utt.

The originals are copied to <data-dir>/.backup/ first. Run as `utils/fix_data_dir.sh <data-dir>`.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter

from rnnt.cli import tool_parser
from rnnt.datadir.layout import FIELDS, load_dir, utterance_files, write_dir


def fix_data_dir(data_dir: str) -> tuple[int, int, Counter]:
    """Rewrites the dir in place; returns (utterances before, after, reasons for dropping)."""
    dropped: Counter = Counter()
    tables = load_dir(data_dir, dropped)
    backup = os.path.join(data_dir, ".backup")
    os.makedirs(backup, exist_ok=True)
    for name in [*FIELDS, "spk2utt"]:
        if os.path.isfile(os.path.join(data_dir, name)):
            shutil.copy2(os.path.join(data_dir, name), os.path.join(backup, name))

    before = len(tables["utt2spk"])
    keep = set(tables["utt2spk"])
    for name in utterance_files(tables):
        missing = keep - set(tables[name])
        if missing:
            dropped[f"not in {name}"] += len(missing)
            keep -= missing
    if "segments" in tables and "wav.scp" in tables:
        no_audio = {u for u in keep if tables["segments"][u].split()[0] not in tables["wav.scp"]}
        if no_audio:
            dropped["recording not in wav.scp"] += len(no_audio)
            keep -= no_audio
    write_dir(tables, keep, data_dir)
    return before, len(keep), dropped


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, "utils/fix_data_dir.sh data/train", prog="fix_data_dir.sh")
    parser.add_argument("data_dir")
    args = parser.parse_args(argv)
    try:
        before, after, dropped = fix_data_dir(args.data_dir)
    except FileNotFoundError as error:
        print(f"fix_data_dir.sh: {error}", file=sys.stderr)
        return 1
    reasons = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items())) or "nothing dropped"
    print(f"fix_data_dir.sh: {args.data_dir}: kept {after} of {before} utterances ({reasons}); "
          f"originals in {args.data_dir}/.backup")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Repairs a Kaldi data dir: normalises lines, sorts, keeps only utterances present everywhere.

The originals are copied to <dir>/.backup/ first. Run as `utils/fix_data_dir.sh <data-dir>`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections import Counter

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
    parser = argparse.ArgumentParser(
        prog="fix_data_dir.sh",
        description="Repair a Kaldi data dir in place: strip CR and stray spaces, drop empty, malformed "
        "and duplicate lines, sort every file, keep only utterances present in every per-utterance file, "
        "rebuild spk2utt. Originals are kept in <data-dir>/.backup/.",
    )
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

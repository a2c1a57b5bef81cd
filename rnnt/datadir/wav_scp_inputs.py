"""What steps/transcribe.py --scp transcribes of a Kaldi data dir: a wav.scp's recordings under their keys, or a
segments file's utterances cut from them.

Each item is (key, path or command, span): span None for a whole recording, else the segment's (start, end) in
seconds, end None for the recording's end (-1 in the file). A line that names no audio (a key alone; a segment of
bad times or of a recording the wav.scp lacks) is named on standard error by file and line, and given the path '':
the caller counts it as a failure and goes on with the rest.
"""

from __future__ import annotations

import os
import sys

from rnnt.datadir.table import kaldi_fields, read_table
from rnnt.datadir.values import segment_problem

Span = tuple[float, float | None]


def wav_scp_inputs(scp: str, segments: str | None = None) -> list[tuple[str, str, Span | None]]:
    """scp's recordings in their order, or those of segments cut from them. Without segments, a segments file
    beside scp is named: its recordings are transcribed whole, which a Kaldi user may not expect."""
    recordings = []
    for key, line in read_table(scp).items():
        if not line.value:
            print(f"transcribe.py: {line.where}: {key}: no audio after the key", file=sys.stderr)
        recordings.append((key, line.value, None))
    if segments:
        return cut_from(segments, {key: source for key, source, _ in recordings}, scp)
    beside = os.path.join(os.path.dirname(scp), "segments")
    if os.path.isfile(beside):
        print(f"transcribe.py: {beside} is beside {scp}: its recordings are transcribed whole, under their keys; "
              f"--segments {beside} transcribes its utterances", file=sys.stderr)
    return recordings


def cut_from(segments: str, recordings: dict[str, str], scp: str) -> list[tuple[str, str, Span | None]]:
    """The items of a segments file's lines, cut from recordings (key -> path or command, scp's)."""
    items = []
    for utt, line in read_table(segments).items():
        fields = kaldi_fields(line.value)
        why = segment_problem(*fields[1:]) if len(fields) == 3 else "not '<recording> <start> <end>'"
        if why or not recordings.get(fields[0]):
            print(f"transcribe.py: {line.where}: {utt}: {why or f'no recording {fields[0]} in {scp}'}",
                  file=sys.stderr)
            items.append((utt, "", None))
        else:
            end = float(fields[2])
            items.append((utt, recordings[fields[0]], (float(fields[1]), None if end == -1 else end)))
    return items

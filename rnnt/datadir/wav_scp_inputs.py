"""What steps/transcribe.py --scp transcribes of a Kaldi data dir: a wav.scp's recordings under their keys, or a
segments file's utterances cut from them.

Each item is an Input: its name (the key), its source (path or command), its span (None for a whole recording,
else the segment's (start, end) in seconds, end None for the recording's end: -1 in the file) and where its line
is (file:line), by which a failure to read it is named. A line that names no audio (a key alone; a segment of bad
times or of a recording the wav.scp lacks) is named on standard error by file and line, and given the source '':
the caller counts it as a failure and goes on with the rest; a line read_table leaves out (a repeated key) is
named and counted as one too. A path or key that is not UTF-8 is kept as its bytes (make_shards.py takes it too).
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

from rnnt.datadir.table import KEEP_BYTES, kaldi_fields, read_table
from rnnt.datadir.values import segment_problem

Span = tuple[float, float | None]


class Input(NamedTuple):
    """One recording or segment to transcribe (a file given as such: its path, the path, no span, where '')."""
    name: str
    source: str
    span: Span | None = None
    where: str = ""


def wav_scp_inputs(scp: str, segments: str | None = None) -> tuple[list[Input], int]:
    """scp's recordings in their order, or those of segments cut from them, and the number of lines left out
    (named on standard error). Without segments, a segments file beside scp is named: its recordings are
    transcribed whole, which a Kaldi user may not expect."""
    skipped: list[str] = []
    recordings = []
    for key, line in read_table(scp, skipped, KEEP_BYTES).items():  # a Latin-1 path opened as its bytes name it
        if not line.value:
            print(f"transcribe.py: {line.where}: {key}: no audio after the key", file=sys.stderr)
        recordings.append(Input(key, line.value, None, line.where))
    if segments:
        items = cut_from(segments, {item.name: item for item in recordings}, scp, skipped)
    else:
        items = recordings
        beside = os.path.join(os.path.dirname(scp), "segments")
        if os.path.isfile(beside):
            print(f"transcribe.py: {beside} is beside {scp}: its recordings are transcribed whole, under their keys; "
                  f"--segments {beside} transcribes its utterances", file=sys.stderr)
    for message in skipped:
        print(f"transcribe.py: {message}", file=sys.stderr)
    if not items and not skipped:
        raise ValueError(f"{segments or scp}: no {'segments' if segments else 'recordings'} in it to transcribe")
    return items, len(skipped)


def cut_from(segments: str, recordings: dict[str, Input], scp: str, skipped: list[str]) -> list[Input]:
    """The items of a segments file's lines, cut from recordings (key -> scp's item)."""
    items = []
    for utt, line in read_table(segments, skipped, KEEP_BYTES).items():
        fields = kaldi_fields(line.value)
        why = segment_problem(*fields[1:]) if len(fields) == 3 else "not '<recording> <start> <end>'"
        recording = recordings.get(fields[0]) if fields else None
        if why or not (recording and recording.source):
            print(f"transcribe.py: {line.where}: {utt}: {why or f'no recording {fields[0]} in {scp}'}",
                  file=sys.stderr)
            items.append(Input(utt, "", None, line.where))
        else:
            end = float(fields[2])
            items.append(Input(utt, recording.source, (float(fields[1]), None if end == -1 else end),
                               f"{line.where} (of {recording.where})"))
    return items

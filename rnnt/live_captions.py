"""A stream's transcript printed as a live caption shows it (steps/transcribe.py --stream): the current line
each time its text changes, and each line a pause ends, as '<file> [partial <seconds>s] <text>' and
'<file> [line <start>-<end>s] <text>', or as JSON objects a line."""

from __future__ import annotations

from typing import Callable

from rnnt.audio_chunks import chunks
from rnnt.cli import json_line
from rnnt.streaming import StreamLines


def show_lines(path: str, audio, stream, lines: StreamLines, chunk_seconds: float, as_json: bool,
               stop: Callable[[], bool]) -> None:
    """Feeds the audio (the path's file or bytes, or "-") to the stream in chunks of chunk_seconds, printing the
    lines as they change and end, until it ends or stop() says so."""
    shown, seconds = "", 0.0
    for chunk in chunks(audio, stream.sample_rate, chunk_seconds):
        if stop():
            return
        seconds += chunk.shape[0] / stream.sample_rate
        stream.accept(chunk)
        for text, start, end in lines.ended():  # a chunk may hold pauses: each ends a line
            show(path, {"text": text, "final": False, "line": True, "start": round(start, 3), "end": round(end, 3)},
                 f"[line {start:.2f}-{end:.2f}s] {text}", as_json)
            shown = ""
        if lines.current() != shown:
            shown = lines.current()
            show(path, {"text": shown, "final": False, "seconds": round(seconds, 3)},
                 f"[partial {seconds:.2f}s] {shown}", as_json)


def show(path: str, row: dict, line: str, as_json: bool) -> None:
    print(json_line({"file": path, **row}) if as_json else f"{path} {line}", flush=True)

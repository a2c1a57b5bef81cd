"""The first stages of the pipeline: data lists -> utterance records with undecoded audio.

Raw lists hold one JSON object a line ({"key", "wav", "txt"}, optional "start"/"end" in seconds);
shard lists hold one tar path or http(s) URL a line. Both yield dicts:
  {"key", "txt", "audio": bytes or a file path, "start"?, "end"?, "source": where it came from}
Shards are read as streams, members grouped by key in order, a broken one skipped from the point of damage
(rnnt.data.shard_reading).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from typing import Iterable, Iterator

from rnnt.counting import counted
from rnnt.data.shard_reading import COPY_MARK, shard_records

log = logging.getLogger(__name__)
_WARNED: set[tuple] = set()  # the versions (path, size, time) of lists whose skipped lines were named: once each


def read_list(path: str, quiet: bool = False) -> list[str]:
    """The entries of a data list (numbered_entries without their line numbers)."""
    return [line for _, line in numbered_entries(path, quiet)]


def numbered_entries(path: str, quiet: bool = False) -> list[tuple[int, str]]:
    """The entries of a data list, each with its line's number: its non-empty lines, less those not UTF-8 or with a
    NUL byte and those a raw list (one with a line starting with '{') cannot use (not a {key, wav, txt} object, a
    start or end that is not a number), each named by file and line and counted; a binary file (a NUL byte in its
    first line: an audio file given for a list) is a ValueError. A line listed again is kept: repeating a list's
    lines upsamples it, as in WeNet's. The skipped lines are named once for each version of a file, and not at all
    where quiet (a fingerprint's reading): a training named every skip three times, two of them before its log
    began."""
    if os.path.isdir(path):
        raise ValueError(f"{path}: a folder, not a data list (one a data dir holds: {path}/data.list, written by "
                         "steps/make_shards.py or steps/make_raw_list.py)")
    numbered, bad = [], 0
    with open(path, "rb") as f:
        stat = os.fstat(f.fileno())
        version = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
        level = logging.DEBUG if quiet or version in _WARNED else logging.WARNING
        for number, raw in enumerate(f, 1):
            if b"\0" in raw and number == 1:
                raise ValueError(f"{path}: a binary file (an audio file?), not a data list of text lines; "
                                 "steps/transcribe.py transcribes audio files")
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()  # an editor's BOM, dropped
                why = "holds a NUL byte (no path holds one)" if "\0" in line else None
            except UnicodeDecodeError as error:
                why = f"not UTF-8 ({error})"
            if why:
                log.log(level, "%s:%d: skipped, %s", path, number, why)
                bad += 1
                continue
            if line:
                numbered.append((number, line))
    if any(line.startswith("{") for _, line in numbered):  # a raw list, whatever its first line
        kept = []
        for number, line in numbered:
            problem = raw_problem(line)
            if problem:
                log.log(level, "%s:%d: skipped, %s", path, number, problem)
                bad += 1
            else:
                kept.append((number, line))
        numbered = kept
    elif numbered and looks_like_a_kaldi_table(numbered[0][1]):
        raise ValueError(f"{path}:{numbered[0][0]}: '<key> <value>', a Kaldi table (wav.scp, text), not a data list; "
                         "make one of the data dir with steps/make_shards.py or steps/make_raw_list.py")
    if bad:
        log.log(level, "%s: %s skipped (named above), %d kept", path, counted(bad, "line"), len(numbered))
        if not quiet:
            _WARNED.add(version)
    return numbered


def looks_like_a_kaldi_table(line: str) -> bool:
    """Whether a data list's first line is '<key> <value>' (wav.scp's, text's) rather than a shard's path or URL,
    which may hold a space but then has a '/' before it, or is a file."""
    fields = line.split()
    return len(fields) > 1 and "/" not in fields[0] and not fields[0].endswith(".tar") and not os.path.exists(line)


def list_kind(lines: list[str]) -> str:
    """'raw' for JSON-lines lists, 'shard' for lists of tar paths or URLs."""
    return "raw" if lines and lines[0].startswith("{") else "shard"


def numbered_copies(entries: list[str], kind: str) -> list[str]:
    """The entries with each line listed again marked as the K-th copy of it (K >= 1: a raw line's "copy", a shard
    entry's COPY_MARK), which the records carry (their "copy"), so that an upsampled utterance's copies draw
    augmentation of their own (rnnt.data.stages.utterance_generator): seeded by key alone, every copy had the same
    speed, dither and masks in every epoch on every rank, and upsampling only scaled its gradient. A raw line is
    a copy of another of its key however it is spelt (lists joined from two tools: spacing, a duration added)."""
    seen: Counter = Counter()
    numbered = []
    for entry in entries:
        utterance = _listed_key(entry) if kind == "raw" else entry
        copy, seen[utterance] = seen[utterance], seen[utterance] + 1
        if copy and kind == "raw":
            entry = f'{entry[:-1].rstrip()}, "copy": {copy}}}'
        elif copy:
            entry = f"{entry}{COPY_MARK}{copy}"
        numbered.append(entry)
    return numbered


def _listed_key(line: str):
    """A raw line's key (and segment), or the line where it holds none (read, it is named as bad then)."""
    try:
        entry = json.loads(line)
        return entry["key"], entry.get("start"), entry.get("end")
    except (ValueError, KeyError, TypeError, AttributeError):
        return line


def raw_record(line: str) -> dict:
    """The record of one raw-list line; ValueError, KeyError or TypeError where it is not one."""
    entry = json.loads(line)
    record = {"key": entry["key"], "txt": entry["txt"], "audio": entry["wav"], "source": entry["wav"]}
    if "copy" in entry:  # numbered_copies'
        record["copy"] = int(entry["copy"])
    if not all(isinstance(record[field], str) for field in ("key", "txt", "audio")):
        raise TypeError("key, wav and txt must be strings")
    for field in ("start", "end"):
        if field in entry:
            record[field] = float(entry[field])
            if not math.isfinite(record[field]):
                raise ValueError(f"{field} {entry[field]} is not a finite number of seconds")
    start, end = record.get("start", 0.0), record.get("end", -1.0)
    if start < 0 or 0 <= end <= start:  # a negative end: to the recording's end, as Kaldi's segments' -1
        raise ValueError(f"the segment [{start}, {end}) s is empty or starts before the recording")
    return record


def raw_problem(line: str) -> str | None:
    """Why a raw-list line cannot be used, or None."""
    try:
        raw_record(line)
    except (ValueError, KeyError, TypeError) as error:
        return f"not a {{key, wav, txt}} object with a valid start and end: {type(error).__name__} {error}"
    return None


def each_listed_once(lines: list[str], kind: str, list_name: str) -> tuple[list[str], int]:
    """A list's lines (read_list's) less those repeating a key (raw) or a shard (shard) listed before, and how
    many: decoding's and validation's, taken before the list is split across ranks, where
    rnnt.data.stages.first_of_each_key (one rank's part) let two ranks each validate a key whose lines fell to
    both."""
    seen, kept, repeated = set(), [], []
    for line in lines:
        if (key := raw_record(line)["key"] if kind == "raw" else line) not in seen:
            seen.add(key)
            kept.append(line)
        else:
            repeated.append(key)
    if repeated:
        log.warning("%s: %d lines repeat a %s listed before (%s%s); each one's first line is read", list_name,
                    len(repeated), "key" if kind == "raw" else "shard",
                    ", ".join(repeated[:3]), ", ..." if len(repeated) > 3 else "")
    return kept, len(repeated)


def raw_records(lines: Iterable[str], list_name: str = "raw list") -> Iterator[dict]:
    """The records of raw-list lines (read_list has left out and named the bad ones; any other is skipped)."""
    for line in lines:
        try:
            yield raw_record(line)
        except (ValueError, KeyError, TypeError) as error:
            log.warning("%s: skipped an entry: %s: %.80s", list_name, error, line)


def records(list_path: str, quiet: bool = False) -> Iterator[dict]:
    """All utterance records of a raw or shard list, in list order (quiet: the list's bad lines left unnamed, as
    read_list's)."""
    lines = read_list(list_path, quiet)
    if list_kind(lines) == "raw":
        return raw_records(lines, list_path)
    return shard_records(lines)

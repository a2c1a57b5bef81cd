"""What a data list reads, as one value: the list and every file it names: a shard that steps/make_shards.py
recorded by its content (its SHA256SUMS: rnnt.data.shard_digests), by name, size and digest, wherever it lies; any
other file (a raw list's recording) by path, size and modification time. A rewritten shard or recording changes it
though the list's own lines do not:
training compares it to resume (rnnt.training.config_change), and the recipes' stage markers take it for a
data list among a stage's inputs (utils/stages.sh), so a decode sees a test set's new audio.

    python3 -m rnnt.data.list_fingerprint LIST            prints the fingerprint
    python3 -m rnnt.data.list_fingerprint --stale LIST  prints the files the list names that are gone, and the
                                                        shards it names outside its own folder
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys

from rnnt.cli import module_usage
from rnnt.data.shard_digests import read_digests
from rnnt.data.sources import list_kind, numbered_entries, read_list


def wav_of(line: str) -> str:
    """The audio path of a raw list's line ('' for a line the pipeline skips as malformed)."""
    try:
        return str(json.loads(line).get("wav", ""))
    except (json.JSONDecodeError, AttributeError):
        return ""


def named_files(entries: list[str]) -> list[str]:
    """The files a data list's entries name: its shards, or its recordings (URLs are not files: left out)."""
    paths = [wav_of(entry) for entry in entries] if list_kind(entries) == "raw" else entries
    return [path for path in paths if path and "://" not in path]


def list_fingerprint(list_path: str, by_content: bool = True) -> str:
    """Changes when the list or any file it names is rewritten, removed or added; not when a recorded shard is
    copied elsewhere or touched. by_content=False: every file by path, size and time (the value of before
    2026-12, which checkpoints of then hold)."""
    digest = hashlib.sha256()
    recorded = functools.cache(read_digests)  # a folder's SHA256SUMS, read once
    for entry in read_list(list_path, quiet=True):  # its skipped lines named where it is read for its utterances
        path = wav_of(entry) if entry.startswith("{") else entry
        stat = os.stat(path) if os.path.isfile(path) else None
        name = os.path.basename(path)
        known = by_content and stat and not entry.startswith("{") and recorded(os.path.dirname(path)).get(name)
        line = f"{name}\t{stat.st_size}\tsha256 {known}" if known else \
            f"{entry}\t{stat.st_size if stat else ''}\t{stat.st_mtime_ns if stat else ''}"
        digest.update(f"{line}\n".encode())
    return digest.hexdigest()


def files_wherever_they_lie(list_path: str) -> str:
    """The files a list names as one value that is the same on every machine holding the same files, wherever
    they lie: each by its name, its size and its recorded SHA-256 (a shard in steps/make_shards.py's SHA256SUMS);
    the workers of one hyper-parameter search compare it (steps/tune.py)."""
    digest = hashlib.sha256()
    recorded = functools.cache(read_digests)
    for path in named_files(read_list(list_path, quiet=True)):
        name, size = os.path.basename(path), os.path.getsize(path) if os.path.isfile(path) else ""
        digest.update(f"{name}\t{size}\t{recorded(os.path.dirname(path)).get(name, '')}\n".encode())
    return digest.hexdigest()


def missing_lines(list_path: str) -> list[tuple[int, str]]:
    """The files the list's entries name that are gone, each with the number of the line naming it."""
    numbered = numbered_entries(list_path, quiet=True)
    entries = [entry for _, entry in numbered]
    raw = list_kind(entries) == "raw"
    named = [(number, wav_of(entry) if raw else entry) for number, entry in numbered]
    return [(number, path) for number, path in named if path and "://" not in path and not os.path.isfile(path)]


def stale_files(list_path: str) -> list[str]:
    """The files gone, and the shards not in the list's folder: the recipes write each set's shards beside its
    list (data/<set>/shards, data/<set>/data.list), so a list naming others' is a recipe folder's copied with
    its data/, which would train on the first folder's shards (their paths are absolute, as WeNet's)."""
    entries = read_list(list_path, quiet=True)
    folder = os.path.dirname(list_path) or "."

    def inside(path: str) -> bool:  # as written or with links resolved (a shards folder linked to another disk)
        return any(os.path.commonpath([where(path), where(folder)]) == where(folder)
                   for where in (os.path.abspath, os.path.realpath))
    named = named_files(entries)
    shards = [] if list_kind(entries) == "raw" else named
    return [path for path in named if not os.path.isfile(path)] + \
        [path for path in shards if not inside(path) and os.path.isfile(path)]


def main(argv: list[str]) -> int:
    stale = len(argv) == 2 and argv[0] == "--stale"
    if (status := module_usage(argv, __doc__, stale or len(argv) == 1 and not argv[0].startswith("-"))) is not None:
        return status
    print("".join(f"{path}\n" for path in stale_files(argv[1])), end="") if stale else print(list_fingerprint(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

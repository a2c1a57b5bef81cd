"""The plan a shard dir was written to, recorded in <shard_dir>/.make_shards.json: the settings (utterances per
shard, audio format, rate, name prefix), the utterance ids in order, and for each shard a digest of what its
utterances hold besides their ids (text, audio source, segment times). A rerun of the same settings and ids
writes again only the shards whose utterances changed (a transcript corrected, a recording restored or replaced);
other settings or ids are another plan, whose shards are not mixed with these.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from rnnt.atomic_write import write_atomically
from rnnt.cli import ToolError, cannot_write
from rnnt.prep.shard_writer import ShardItem, skipped_path

STATE = ".make_shards.json"
DEFAULT_PREFIX = "shards"


def item_lines(items: list[ShardItem], with_folders: bool = False) -> list[bytes]:
    """What the shards hold of each item besides its key, as a line: its text, audio source and segment times; a
    file by its name, size and time, not its folder (the same corpus moved, or copied keeping times, is the same
    audio), but where files of one name, size and time are in several folders (a corpus's yes/x.wav and no/x.wav,
    extracted from one archive), by its path below theirs: wav.scp swapping two of them took their shards for each
    other's (so a line can change with another's: one of such files replaced, the others' shards are written again
    too, once). with_folders: the form before (the path whole), which a record of then holds."""
    stats = {item.source: os.stat(item.source) for item in items
             if not item.source.endswith("|") and os.path.isfile(item.source)}
    alike: dict[tuple, set[str]] = {}  # (name, size, time): the files that have them
    for path, stat in stats.items():
        alike.setdefault((os.path.basename(path), stat.st_size, stat.st_mtime_ns), set()).add(os.path.abspath(path))
    lines = []
    for item in items:
        stat = stats.get(item.source)
        source = item.source  # a command as it is
        if stat and not with_folders:
            paths = alike[(os.path.basename(item.source), stat.st_size, stat.st_mtime_ns)]
            source = os.path.relpath(os.path.abspath(item.source),
                                     os.path.commonpath([os.path.dirname(path) for path in paths]))
        lines.append(json.dumps([item.key, item.text, source, item.start, item.end,
                                 stat and (stat.st_size, stat.st_mtime_ns)]).encode())
    return lines


def digest(lines: list[bytes]) -> str:
    hashed = hashlib.sha256()
    for line in lines:
        hashed.update(line)
    return hashed.hexdigest()


def make_plan(items: list[ShardItem], per_shard: int, audio_format: str, resample: int | None, prefix: str) -> dict:
    lines = item_lines(items)
    return {"utts_per_shard": per_shard, "audio_format": audio_format, "resample": resample, "prefix": prefix,
            "keys": [item.key for item in items],
            "items": [digest(lines[i:i + per_shard]) for i in range(0, len(lines), per_shard)]}


def shards_changed(recorded, plan: dict, items: list[ShardItem]) -> list[int] | None:
    """The numbers of plan's shards whose utterances changed since the recorded plan; None where it is another
    plan (other settings, prefix or ids, or a record that does not read). A record from before shards had a
    digest each holds one of all of them (and, before that, of the paths whole): the same, none changed;
    otherwise all."""
    if not isinstance(recorded, dict):
        return None
    recorded = {"prefix": DEFAULT_PREFIX, **recorded}  # a record from before the names were planned
    if {**recorded, "items": None} != {**plan, "items": None}:
        return None
    before = recorded.get("items")  # (none in a record from before shards had digests: another plan)
    if isinstance(before, str):
        same = before in (digest(item_lines(items)), digest(item_lines(items, with_folders=True)))
        return [] if same else list(range(len(plan["items"])))
    if not isinstance(before, list) or len(before) != len(plan["items"]):
        return None
    return [i for i, (was, now) in enumerate(zip(before, plan["items"])) if was != now]


def read_record(state_path: str):
    try:
        with open(state_path) as f:
            return json.load(f)
    except (OSError, ValueError):  # unreadable: written by another version, or damaged
        return None


def start_shard_dir(shard_dir: str, plan: dict, items: list[ShardItem], paths: list[str], replace: bool) -> None:
    """shard_dir ready for the plan, its record of it written: new, or holding shards of the same plan (kept, to
    be reused, but those whose utterances changed since, removed and named), or, with replace, emptied of what
    make_shards wrote there under another (the plan, the shards, their temps): shards and no record (the record
    deleted, or shards from elsewhere) are another plan. A record of the same plan in an earlier form is left as
    it is (a recipe's stages fingerprint the folder)."""
    os.makedirs(shard_dir, exist_ok=True)
    state_path = os.path.join(shard_dir, STATE)
    if os.path.isfile(state_path):
        changed = shards_changed(read_record(state_path), plan, items)
    else:
        changed = None if any(name.endswith((".tar", ".tar.tmp")) for name in os.listdir(shard_dir)) else []
    if changed is None and not replace:
        raise ToolError(f"{shard_dir} holds shards of other settings or utterances (or of none it records); "
                        "remove it, choose another dir, or pass --replace")
    if changed is None:
        for name in os.listdir(shard_dir):
            if name in (STATE, f"{STATE}.tmp") or name.endswith((".tar", ".tar.tmp", ".tar.skipped")):
                os.remove(os.path.join(shard_dir, name))
    for i in changed or []:  # before the record says the plan: a run stopped after it writes them, as missing
        for path in (paths[i], skipped_path(paths[i])):
            if os.path.exists(path):
                os.remove(path)
        print(f"make_shards.py: {paths[i]}: its utterances' text, audio or times changed; written again",
              file=sys.stderr)
    if changed != [] or not os.path.isfile(state_path):
        try:
            write_atomically(state_path, lambda f: json.dump(plan, f))
        except OSError as error:
            raise cannot_write(state_path, "the plan", error) from error

"""The SHA-256 of each shard steps/make_shards.py wrote, kept beside them as <shard_dir>/SHA256SUMS in sha256sum's
format ('<hex>  <name>' a line): `cd <shard_dir> && sha256sum -c SHA256SUMS` checks a copy (a node's local disk),
and a data list's fingerprint (rnnt.data.list_fingerprint) knows a shard listed there by its content, so shards
copied to another folder, or touched, are the same training data. make_shards takes a shard's line out before it
writes the shard again and puts it back once it is whole: a shard it does not list is known by its path, size and
time. Standard library only."""

from __future__ import annotations

import os
import re

from rnnt.atomic_write import write_atomically
from rnnt.prep.download import hex_digest

DIGESTS = "SHA256SUMS"


def read_digests(shard_dir: str) -> dict[str, str]:
    """{shard file name: hex SHA-256} of shard_dir's SHA256SUMS ({} where there is none, or it cannot be read;
    a line that is not '<64 hex>  <name>' or '<64 hex> *<name>' counts for nothing)."""
    try:
        with open(os.path.join(shard_dir, DIGESTS), encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    digests = {}
    for line in lines:  # '<hex>  <name>', or '<hex> *<name>' (sha256sum -b: it was taken for no line, a shard
        # damaged since passed as unknown and its new digest recorded)
        match = re.fullmatch(r"([0-9a-fA-F]{64}) [ *]([^/]+)", line)
        if match:
            digests[match.group(2)] = match.group(1).lower()
    return digests


def write_digests(shard_dir: str, digests: dict[str, str]) -> None:
    """shard_dir's SHA256SUMS holds exactly these (written aside and renamed; left as it is, time and all, where
    it already does: the recipes' stages fingerprint the shards' folder by its files' times)."""
    path = os.path.join(shard_dir, DIGESTS)
    text = "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    write_atomically(path, lambda f: f.write(text), errors="surrogateescape")


def shard_digest(path: str) -> str:
    return hex_digest(path, quiet=True)

"""Resumable, checksum-verified download of corpus archives.

A download writes <file>.part and continues it with an HTTP Range request when interrupted; the
finished file is verified (MD5 or SHA-256, chosen by the digest's length) before it takes its
final name, so a file under the final name is always complete and correct.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request

from rnnt.progress_bar import progress

BLOCK = 1 << 20


class ChecksumError(RuntimeError):
    pass


def file_digest(path: str, expected: str) -> str:
    """The hex digest of path in the algorithm that expected is written in (32 hex: MD5, 64: SHA-256)."""
    algorithm = {32: "md5", 64: "sha256"}.get(len(expected))
    if algorithm is None:
        raise ValueError(f"checksum '{expected}' is neither MD5 (32 hex digits) nor SHA-256 (64)")
    return hex_digest(path, algorithm)


def changed_since(path: str, sha256: str) -> bool:
    """Whether path's content is not the one whose SHA-256 was taken (False where none was: a file of before): the
    checkpoint LM weights or a confidence calibration were fitted with, decoded with another."""
    return bool(sha256) and hex_digest(path) != sha256


def hex_digest(path: str, algorithm: str = "sha256") -> str:
    """The hex digest of path's content (hashlib's algorithm name), read a block at a time."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f, progress(total=os.path.getsize(path), desc=f"check {os.path.basename(path)}",
                                         unit="B", unit_scale=True, leave=False) as bar:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def verify(path: str, checksum: str | None) -> None:
    if checksum is None:
        return
    got = file_digest(path, checksum)
    if got != checksum.lower():
        raise ChecksumError(f"{path}: checksum mismatch: expected {checksum}, got {got}")


def _copy_local(source: str, part: str) -> None:
    shutil.copyfile(source, part)


def _fetch(url: str, part: str, quiet: bool, timeout: float) -> None:
    """Appends the rest of url to part (Range from its current size); restarts if Range is ignored."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # nothing left to send: the part is already whole
            return
        raise
    with response:
        if have and response.status != 206:
            have = 0  # the server sent the whole file, not the rest
        total = response.headers.get("Content-Length")
        total = int(total) + have if total is not None else None
        mode = "ab" if have else "wb"
        with open(part, mode) as f, progress(total=total, initial=have, unit="B", unit_scale=True,
                                             desc=os.path.basename(part[:-5]), disable=quiet) as bar:
            try:
                for block in iter(lambda: response.read1(BLOCK), b""):  # as it comes: a cut or stall keeps it all
                    f.write(block)
                    bar.update(len(block))
            except http.client.IncompleteRead as cut:  # of a known length or not (chunked: it was taken as whole)
                f.write(cut.partial)  # keep what arrived; the next run asks for the rest
                raise ConnectionError(f"{url}: transfer ended at {f.tell()} bytes" + (
                    f" of {total}" if total is not None else "") + "; run again to resume") from None
    if total is not None and os.path.getsize(part) < total:
        raise ConnectionError(f"{url}: transfer ended at {os.path.getsize(part)} of {total} bytes; run again to resume")


def download(url: str, dest: str, checksum: str | None = None, quiet: bool = False, timeout: float = 60.0) -> str:
    """Fetches url (http, https, file:// or a local path) to dest; returns 'present' or 'downloaded'.

    An existing dest is kept if its checksum matches, else deleted and fetched again (a file damaged since, or
    one put there by hand: dest is the download's own). A wrong checksum deletes the download and raises
    ChecksumError, so a bad file is never used.
    """
    if os.path.exists(dest):
        try:
            verify(dest, checksum)
            return "present"
        except ChecksumError as error:
            print(f"{dest}: {error}; deleted, fetching it again", file=sys.stderr)
            os.remove(dest)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    part = dest + ".part"
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("", "file"):
        _copy_local(urllib.request.url2pathname(parsed.path) if parsed.scheme else url, part)  # file:///a%20b
    else:
        _fetch(url, part, quiet, timeout)
    try:
        verify(part, checksum)
    except ChecksumError as error:
        os.remove(part)
        raise ChecksumError(f"{url}: {error}; the download was deleted") from None
    os.replace(part, dest)
    return "downloaded"

"""Resumable, checksum-verified download of corpus archives.

A download writes <file>.part and continues it with an HTTP Range request when interrupted; the
finished file is verified (MD5 or SHA-256, chosen by the digest's length) before it takes its
final name, so a file under the final name is always complete and correct. A resumed answer must start where
the part ends (its Content-Range), or the file is fetched whole again.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

from rnnt.progress_bar import progress

BLOCK = 1 << 20


class ChecksumError(RuntimeError):
    pass


def file_digest(path: str, expected: str, quiet: bool = False) -> str:
    """The hex digest of path in the algorithm that expected is written in (32 hex: MD5, 64: SHA-256)."""
    algorithm = {32: "md5", 64: "sha256"}.get(len(expected))
    if algorithm is None:
        raise ValueError(f"checksum '{expected}' is neither MD5 (32 hex digits) nor SHA-256 (64)")
    return hex_digest(path, algorithm, quiet)


def changed_since(path: str, sha256: str) -> bool:
    """Whether path's content is not the one whose SHA-256 was taken (False where none was: a file of before): the
    checkpoint LM weights or a confidence calibration were fitted with, decoded with another."""
    return bool(sha256) and hex_digest(path) != sha256


def hex_digest(path: str, algorithm: str = "sha256", quiet: bool = False) -> str:
    """The hex digest of path's content (hashlib's algorithm name), read a block at a time (a bar unless quiet)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f, progress(total=os.path.getsize(path), desc=f"check {os.path.basename(path)}",
                                         unit="B", unit_scale=True, leave=False, disable=quiet) as bar:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def mismatch(path: str, checksum: str | None, quiet: bool = False) -> str | None:
    """'expected X, got Y' if path's content does not have the checksum (None: no checksum to check)."""
    got = file_digest(path, checksum, quiet) if checksum is not None else None
    return f"expected {checksum}, got {got}" if got is not None and got != checksum.lower() else None


def verify(path: str, checksum: str | None, quiet: bool = False) -> None:
    wrong = mismatch(path, checksum, quiet)
    if wrong:
        raise ChecksumError(f"{path}: checksum mismatch: {wrong}")


class TransferCut(ConnectionError):
    """A transfer that began and ended early (cut, stalled): what arrived is kept and the next run asks for the
    rest."""


def _copy_local(source: str, part: str) -> None:
    shutil.copyfile(source, part)


CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)")


def _content_range(response) -> tuple[int | None, int | None]:
    """(first byte, whole size) that a 206's or 416's Content-Range gives, None for what it leaves out."""
    found = CONTENT_RANGE.fullmatch((response.headers.get("Content-Range") or "").strip())
    if found is None:
        return None, None
    first, size = found.groups()
    return (int(first) if first else None), (int(size) if size != "*" else None)


def _open(url: str, have: int, timeout: float):
    """The response that continues a part of `have` bytes, and the number of them it continues: `have`, or 0 when
    the part is to be written again from the start (a server that ignores Range, a 206 from another offset, a 416
    whose size is not the part's); None for a part already whole (a 416 of the part's size, or of no size: the
    checksum or the extraction judges it)."""
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code != 416 or not have:
            raise
        size = _content_range(error)[1]
        error.close()
        if size is None or size == have:  # nothing left to send: the part is already whole
            return None, have
        print(f"{url}: the server has {size} bytes, the part {have}; downloading it again", file=sys.stderr)
        return _open(url, 0, timeout)
    except http.client.HTTPException as error:  # a bad status line, an invalid URL: no urllib error of its own
        raise ConnectionError(f"{url}: no valid HTTP answer ({type(error).__name__}: {error})") from None
    if not have or response.status == 206 and _content_range(response)[0] == have:
        return response, have
    if response.status == 206:  # a range from elsewhere would be appended at the wrong offset
        response.close()
        print(f"{url}: asked for bytes from {have}, the server sent {response.headers.get('Content-Range')}; "
              "downloading it again", file=sys.stderr)
        return _open(url, 0, timeout)
    length, kind = response.headers.get("Content-Length"), response.headers.get_content_type()
    text = kind.startswith("text/") and "Content-Type" in response.headers  # (its default is text/plain)
    if kind == "text/html" or text and length is not None and int(length) < have:
        response.close()  # a login or error page in the place of the file: the good part is not written over
        raise ConnectionError(f"{url}: asked for the rest of a {have}-byte part, the server sent a {kind} page of "
                              f"{length or 'unknown'} bytes instead; the part is kept")
    if length is not None and int(length) < have:  # a file that is not the part's: every run refused it, for good
        print(f"{url}: the server sent the whole file, {length} bytes, shorter than the {have}-byte part; downloading "
              "it again", file=sys.stderr)
    return response, 0  # the whole file again, not the rest


def _write(url: str, response, part: str, have: int, quiet: bool) -> None:
    """Writes response to part after its first `have` bytes."""
    total = response.headers.get("Content-Length")
    total = int(total) + have if total is not None else None
    try:
        with open(part, "ab" if have else "wb") as f, progress(total=total, initial=have, unit="B", unit_scale=True,
                                                               desc=os.path.basename(part[:-5]), disable=quiet) as bar:
            cut = _copy(response, f, bar)
            size = f.tell()
    except OSError as error:  # writing (reading's are caught in _copy): a full disk, named, as its own error does not
        raise OSError(error.errno, error.strerror, error.filename or part) from None
    if cut or total is not None and size < total:
        raise TransferCut(f"{url}: transfer {cut or 'ended'} at {size}" + (f" of {total}" if total is not None else "")
                          + " bytes; run again to resume")


def _copy(response, f, bar) -> str | None:
    """Writes response's body to f, a block as it comes (a cut or a stall keeps it all); how it was cut, if it
    was."""
    while True:
        try:
            block, cut = response.read1(BLOCK), None
        except http.client.IncompleteRead as error:  # of a known length or not (chunked: it was taken as whole)
            block, cut = error.partial, "ended"  # keep what arrived; the next run asks for the rest
        except (TimeoutError, ConnectionError, ssl.SSLError) as error:
            block, cut = b"", f"stopped ({error})"
        f.write(block)
        bar.update(len(block))
        if cut or not block:
            return cut


def _fetch(url: str, part: str, quiet: bool, timeout: float) -> None:
    """Appends the rest of url to part (Range from its current size), or writes it whole where it cannot."""
    response, have = _open(url, os.path.getsize(part) if os.path.exists(part) else 0, timeout)
    if response is not None:
        with response:
            _write(url, response, part, have, quiet)


def download(url: str, dest: str, checksum: str | None = None, quiet: bool = False, timeout: float = 60.0) -> str:
    """Fetches url (http, https, file:// or a local path) to dest; returns 'present' or 'downloaded'.

    An existing dest is kept if its checksum matches, else deleted and fetched again (a file damaged since, or
    one put there by hand: dest is the download's own). A wrong checksum deletes the download and raises
    ChecksumError, so a bad file is never used. Two runs at once for the same dest would write one part: the
    caller makes them take turns (fetch_part holds a lock).
    """
    if os.path.exists(dest):
        try:
            verify(dest, checksum, quiet)
            return "present"
        except ChecksumError as error:
            print(f"{error}; deleted, fetching it again", file=sys.stderr)
            os.remove(dest)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    part = dest + ".part"
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("", "file"):
        _copy_local(urllib.request.url2pathname(parsed.path) if parsed.scheme else url, part)  # file:///a%20b
    else:
        _fetch(url, part, quiet, timeout)
    wrong = mismatch(part, checksum, quiet)
    if wrong:
        os.remove(part)
        raise ChecksumError(f"{url}: checksum mismatch: {wrong}; the download was deleted")
    os.replace(part, dest)
    return "downloaded"

"""Utterances of WeNet-style tar shards (a local path or an http(s) URL), read as streams (URLs without temporary
files): members <key>.txt and <key>.<audio extension> grouped by key in order. A broken shard is logged with its
name and skipped from the point of damage, also where the damage is a header (which Python's tarfile takes for the
archive's end); the rest goes on, each skip counted in the pass's DataReport."""

from __future__ import annotations

import http.client
import logging
import tarfile
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

from rnnt.data.report import DataReport

if TYPE_CHECKING:
    from rnnt.data.audio_cache import AudioCache

log = logging.getLogger("rnnt.data.sources")  # the lists' logger: reference_texts mutes a list's lines and shards'
AUDIO_EXTENSIONS = {"wav", "flac", "ogg", "opus", "mp3", "sph", "m4a", "wma"}  # WeNet's, and SPHERE
COPY_MARK = "\t#copy "  # a shard entry's suffix: its K-th repeat in the list (no path holds a tab: lines are stripped)


def open_shard(url: str):
    if url.startswith(("http://", "https://")):
        return urllib.request.urlopen(url, timeout=60)
    return open(url, "rb")


@dataclass(frozen=True)
class ShardShare:
    """Every `every`-th utterance of a shard from the `offset`-th: how the ranks share a shard left over
    when the shards do not divide among them (rnnt.data.splitting). every=1: the whole shard."""
    url: str
    every: int = 1
    offset: int = 0


def shard_records(entries: Iterable[str | ShardShare], report: DataReport | None = None,
                  cache: AudioCache | None = None) -> Iterator[dict]:
    """Utterances of each shard (or of its share): consecutive members <key>.txt and <key>.<audio
    extension>. Utterances are counted in the shard's order, complete ones only, as on every rank. With an
    rnnt.data.audio_cache.AudioCache, a shard read whole and clean before whose every waveform it keeps is not
    read again."""
    report = report or DataReport("", 0)
    for entry in entries:
        share = entry if isinstance(entry, ShardShare) else ShardShare(entry)
        url, _, copy = share.url.partition(COPY_MARK)
        kept = cache.shard_utterances(url) if cache is not None else None
        utterances = kept if kept is not None else _remembered(url, report, cache)
        for index, record in enumerate(utterances):
            if index % share.every == share.offset:  # (the stages after make new records: a kept one stays)
                yield {**record, "copy": int(copy)} if copy else record


def _remembered(url: str, report: DataReport, cache: AudioCache | None) -> Iterator[dict]:
    """The shard's utterances, read; the cache, where given, remembers them (without their audio bytes) if the
    shard was read whole and nothing of it was skipped."""
    skips, read = sum(report.shard_skips.values()), []
    for record in _shard_utterances(url, report):
        if cache is not None:
            read.append({**record, "audio": None})
        yield record
    if cache is not None and sum(report.shard_skips.values()) == skips:
        cache.remember_shard(url, read)


def ended_cleanly(tar: tarfile.TarFile) -> bool:
    """Whether a streamed archive whose members ran out ended with its end-of-archive blocks: zeros follow.
    Python's tarfile ends its members quietly at a header it cannot read (a cut inside or before one, a
    damaged one), which leaves nothing after it or the members' data."""
    rest = tar.fileobj.read(tarfile.RECORDSIZE)
    return bool(rest) and not rest.strip(b"\0")


def _shard_utterances(url: str, report: DataReport) -> Iterator[dict]:
    try:
        stream = open_shard(url)
    except (OSError, http.client.HTTPException) as error:  # (a server's reply that is no HTTP: BadStatusLine)
        log.warning("shard %s: cannot open (%s); skipped", url, error)
        report.shard_skipped("shards unreadable")
        return
    record: dict = {}
    whole = ""  # the key of the last utterance whose members were all read
    try:
        with stream, tarfile.open(fileobj=stream, mode="r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                key, _, extension = member.name.rpartition(".")
                if record and record["key"] != key:
                    whole = record["key"]
                    yield from _complete(record, url, report)
                    record = {}
                record.setdefault("key", key)
                payload = tar.extractfile(member).read()
                if extension == "txt":
                    try:
                        record["txt"] = payload.decode("utf-8").strip()
                    except UnicodeDecodeError:
                        record["bad"] = "a transcript that is not UTF-8"
                elif extension in AUDIO_EXTENSIONS:
                    record["audio"] = payload
                    record["source"] = f"{url}:{member.name}"  # what a message about its audio names
                record.setdefault("source", f"{url}:{member.name}")
            if not ended_cleanly(tar):  # in a plain tar the members read are whole: the last utterance is kept; a
                # compressed one decompresses a damaged byte into wrong bytes (gzip checks its CRC at the end alone)
                compressed = getattr(tar.fileobj, "comptype", "tar") != "tar"
                _damaged(url, whole if compressed else record.get("key", whole), "a header that cannot be read, or "
                         "none where the archive goes on", report)
                record = {} if compressed else record
    except (tarfile.TarError, OSError, EOFError, http.client.HTTPException) as error:  # (IncompleteRead: a cut)
        _damaged(url, whole, error, report)  # (it was named after the utterance being read, which is lost)
        record = {}  # its members may be cut short
    yield from _complete(record, url, report)


def _damaged(url: str, whole: str, why, report: DataReport) -> None:
    """whole: the key of the last utterance kept ("": none)."""
    log.warning("shard %s: damaged after %s (%s); the rest of this shard is skipped", url, whole or "its start", why)
    report.shard_skipped("shards damaged (their rest)")


def _complete(record: dict, url: str, report: DataReport) -> Iterator[dict]:
    if not record:
        return
    if "txt" in record and "audio" in record and "bad" not in record:
        yield record
        return
    problem = record.get("bad") or f"no {'audio' if 'txt' in record else 'transcript'}"
    log.warning("shard %s: utterance %s has %s; skipped", url, record["key"], problem)
    report.shard_skipped(f"utterances with {problem}")

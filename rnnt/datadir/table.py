"""Kaldi table files: one '<key> <value>' record a line, sorted by key under LC_ALL=C."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Iterable, Iterator, TextIO

from rnnt.atomic_write import write_atomically
from rnnt.counting import counted


@dataclass(frozen=True)
class Line:
    """One raw line of a table file, with where it came from."""

    path: str
    number: int  # 1-based
    text: str  # without the trailing '\n' (a '\r' before it is kept)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"

    @property
    def key(self) -> str:
        return KALDI_WHITESPACE.split(self.text.strip(WHITESPACE), maxsplit=1)[0]

    @property
    def value(self) -> str:
        parts = KALDI_WHITESPACE.split(self.text.strip(WHITESPACE), maxsplit=1)
        return parts[1] if len(parts) > 1 else ""

    @property
    def fields(self) -> list[str]:
        return kaldi_fields(self.text)


WHITESPACE = " \t\n\r\f\v"  # Kaldi's, C's isspace: a no-break or ideographic space is inside a key or word
KALDI_WHITESPACE = re.compile(f"[{WHITESPACE}]+")  # (str.split's cut keys and dropped such a space at a line's ends)


def kaldi_fields(text: str) -> list[str]:
    """text's fields as Kaldi's tools split them: at WHITESPACE alone."""
    return [field for field in KALDI_WHITESPACE.split(text) if field]


KEEP_BYTES = "surrogateescape"  # the decoding error handler under which a copied line keeps every byte


def has_undecodable_bytes(text: str) -> bool:
    """Whether text read under KEEP_BYTES holds bytes that are not UTF-8 (each kept as U+DC80-U+DCFF)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


BYTE_ORDER_MARK = b"\xef\xbb\xbf"
NOT_UTF8 = "not UTF-8"  # read_lines's default: a line whose bytes are not UTF-8 is left out, named (left_out)


_NAMED_MARKS: set[str] = set()  # the files whose byte-order mark has been named


def name_byte_order_mark_once(path: str) -> None:
    """The removal of path's byte-order mark named on standard error, once a run (fix_data_dir.sh reads utt2spk
    two or three times, filter_scp.py a table that is its own id list twice: it was named as often)."""
    if path not in _NAMED_MARKS:
        _NAMED_MARKS.add(path)
        print(f"{path}:1: a byte-order mark (U+FEFF) before the first key; removed", file=sys.stderr)


def read_lines(path: str, errors: str = NOT_UTF8, skipped: list[str] | None = None,
               name_byte_order_mark: bool = True) -> Iterator[Line]:
    """Yields every line of a UTF-8 text file, raw. A line whose bytes are not UTF-8 is left out, named by file
    and line (left_out: into skipped, or on standard error), where nothing would say it otherwise; with
    errors=KEEP_BYTES (the tools that copy or check tables, as Kaldi's keep bytes) it is kept, each such byte a
    surrogate that write_table writes back as it was. A UTF-8 byte-order mark before the first line (an editor's)
    is removed, and named on standard error once a run (unless the caller names it itself): it was read as part of
    the first key, whose utterance was lost or scored against nothing."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == 1 and raw.startswith(BYTE_ORDER_MARK):
                raw = raw[len(BYTE_ORDER_MARK):]
                if name_byte_order_mark:
                    name_byte_order_mark_once(path)
            try:
                text = raw.decode("utf-8", errors="strict" if errors == NOT_UTF8 else errors)
            except UnicodeDecodeError as error:
                left_out(f"{path}:{number}: byte 0x{raw[error.start]:02x} at column {error.start + 1} is not "
                         "UTF-8; line left out", skipped)
                continue
            if text.endswith("\n"):
                text = text[:-1]
            yield Line(path, number, text)


def keep_bytes_on_standard_streams() -> None:
    """Standard input and output read and write UTF-8 under KEEP_BYTES: a tool that copies lines through them
    passes bytes that are not UTF-8 (a Latin-1 file name in wav.scp) through unchanged, as Kaldi's do."""
    for stream in (sys.stdin, sys.stdout):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors=KEEP_BYTES)


def open_keeping_bytes(path: str) -> TextIO:
    """path opened for reading lines to copy (KEEP_BYTES), split at newlines only (a lone CR is inside its line,
    as Kaldi's tools and standard input read it); '-' is standard input. A byte-order mark before the first line
    is removed and named, as read_lines does (it was read into the first key: filter_scp lost that line)."""
    if path == "-":
        keep_bytes_on_standard_streams()
        return sys.stdin
    with open(path, "rb") as f:
        marked = f.read(len(BYTE_ORDER_MARK)) == BYTE_ORDER_MARK
    if marked:
        name_byte_order_mark_once(path)
    return open(path, encoding="utf-8-sig" if marked else "utf-8", errors=KEEP_BYTES, newline="\n")


def write_lines(path: str, texts) -> None:
    """Writes each text as a line to path ('-': standard output), bytes read under KEEP_BYTES as they were."""
    if path == "-":
        sys.stdout.writelines(text + "\n" for text in texts)
        return
    with open(path, "w", encoding="utf-8", errors=KEEP_BYTES) as f:
        f.writelines(text + "\n" for text in texts)


def read_table(path: str, skipped: list[str] | None = None, errors: str = NOT_UTF8) -> dict[str, Line]:
    """Reads a table leniently (blank lines skipped, CR and trailing spaces ignored, first key wins).

    A repeated key's later lines are left out, each named by file and line, and so are lines that are not UTF-8
    (read_lines; errors=KEEP_BYTES keeps them): appended to skipped where given (the caller counts them), else
    printed on standard error. For strict checks use
    rnnt.datadir.validate; this is for tools that consume a valid dir.
    """
    table: dict[str, Line] = {}
    for line in read_lines(path, errors, skipped):
        clean = line.text.rstrip("\r \t")
        if not clean.strip(WHITESPACE):
            continue
        line = Line(line.path, line.number, clean)
        first = table.setdefault(line.key, line)
        if first is not line:
            left_out(f"{line.where}: {line.key}: repeats the key of line {first.number}; left out", skipped)
    return table


def lines_named_from(origin: str | None, table: dict, name: str, original: dict[str, str] | None = None) -> dict:
    """key -> the file:line a message names it by: its line in origin's table name (the dir a copy was made from:
    a user's own file, where the copy is sorted and rewritten after) where that has it, else table's. original:
    the key origin has for a key the copy renamed."""
    path = os.path.join(origin, name) if origin else ""
    first = {}  # a key's first line, the one a copy keeps
    for line in read_lines(path, KEEP_BYTES, name_byte_order_mark=False) if os.path.isfile(path) else ():
        first.setdefault(line.key, line.where)
    original = original or {}
    return {key: first.get(original.get(key, key), line.where) for key, line in table.items()}


def read_counting_left_out(path: str) -> tuple[dict[str, Line], str]:
    """read_table for a tool that summarises what it read: each line left out named on standard error under the
    tool's name, and '; N lines of PATH left out (named above)' for its summary line ('' where none was)."""
    skipped: list[str] = []
    table = read_table(path, skipped)
    for message in skipped:
        left_out(message, None)
    return table, f"; {counted(len(skipped), 'line')} of {path} left out (named above)" if skipped else ""


def read_ids(path: str) -> set[str]:
    """The first field of every non-blank line: an id list (filter_scp's, subset's), where an id may repeat
    (the recordings cut from a segments file) without a word; '-' reads standard input, as Kaldi's
    `awk ... | utils/filter_scp.pl - <table>`."""
    if path == "-":
        return {Line(path, 0, text).key for text in open_keeping_bytes(path)} - {""}
    return {line.key for line in read_lines(path, KEEP_BYTES) if line.key}


def left_out(message: str, skipped: list[str] | None) -> None:
    """A line a reader leaves out: appended to skipped where given (the caller counts them), else printed on
    standard error under the tool's name."""
    if skipped is None:
        print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    else:
        skipped.append(message)


def write_table(path: str, records: Iterable[tuple[str, str]]) -> int:
    """Writes '<key> <value>' lines sorted by key, atomically (temporary file + rename); bytes read under
    KEEP_BYTES are written back unchanged."""
    rows = sorted(records, key=lambda kv: kv[0].encode("utf-8", KEEP_BYTES))  # byte order, as LC_ALL=C sorts
    write_atomically(path, lambda f: f.writelines(f"{key} {value}\n" if value != "" else f"{key}\n"
                                                  for key, value in rows),
                     tmp=f"{path}.tmp.{os.getpid()}", errors=KEEP_BYTES, newline="\n")  # two tools at once
    return len(rows)

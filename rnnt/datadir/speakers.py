"""Conversions between utt2spk ('<utt> <spk>') and spk2utt ('<spk> <utt1> <utt2> ...')."""

from __future__ import annotations

from typing import Iterable


def utt2spk_to_spk2utt(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Groups utterances by speaker, keeping their input order inside each speaker."""
    spk2utt: dict[str, list[str]] = {}
    for utt, spk in pairs:
        spk2utt.setdefault(spk, []).append(utt)
    return spk2utt


class RepeatedUtterance(ValueError):
    """An utterance listed twice in spk2utt; row is the index of the row that lists it again."""

    def __init__(self, message: str, row: int):
        super().__init__(message)
        self.row = row


def spk2utt_to_utt2spk(rows: Iterable[tuple[str, list[str]]]) -> dict[str, str]:
    """Expands '<spk> <utt>...' rows into one speaker per utterance; an utterance listed twice is a
    RepeatedUtterance (a ValueError)."""
    utt2spk: dict[str, str] = {}
    for row, (spk, utts) in enumerate(rows):
        for utt in utts:
            if utt in utt2spk:
                raise RepeatedUtterance(f"utterance '{utt}' is listed under speaker '{utt2spk[utt]}' and again under "
                                        f"'{spk}'", row)
            utt2spk[utt] = spk
    return utt2spk


def main_utt2spk_to_spk2utt(argv: list[str] | None = None) -> int:
    return _convert(argv, "utt2spk_to_spk2utt.py", "utt2spk", to_spk2utt=True)


def main_spk2utt_to_utt2spk(argv: list[str] | None = None) -> int:
    return _convert(argv, "spk2utt_to_utt2spk.py", "spk2utt", to_spk2utt=False)


REFUSED = ("An utterance listed twice (Kaldi's prints both lines, a table of a repeated key) is refused, both places "
           "named; so is a malformed line.")


def _convert(argv: list[str] | None, prog: str, source: str, to_spk2utt: bool) -> int:
    import sys

    from rnnt.cli import error_line, tool_parser
    from rnnt.datadir.table import kaldi_fields, keep_bytes_on_standard_streams, open_keeping_bytes

    target = "spk2utt" if to_spk2utt else "utt2spk"
    parser = tool_parser(f"Reads {source} (files, one after the other, or standard input), prints {target}. "
                         + REFUSED, f"utils/{prog} data/train/{source}", prog)
    parser.add_argument("files", nargs="*", default=["-"], metavar=source,
                        help=f"{source} files, read as one (as Kaldi's reads them); '-' or nothing: standard input")
    paths = parser.parse_args(argv).files
    keep_bytes_on_standard_streams()
    rows, wheres = [], []
    for path in paths:
        try:
            stream = open_keeping_bytes(path)
        except OSError as error:
            print(f"{prog}: {error_line(error)}", file=sys.stderr)
            return 1
        with stream:
            for number, line in enumerate(stream, 1):
                fields = kaldi_fields(line)
                if not fields:
                    continue
                if len(fields) < 2 or (to_spk2utt and len(fields) != 2):
                    print(f"{prog}: {path}:{number}: expected {'2 fields' if to_spk2utt else '<spk> <utt>...'}, "
                          f"got '{line.rstrip()}'", file=sys.stderr)
                    return 1
                rows.append((fields[0], fields[1]) if to_spk2utt else (fields[0], fields[1:]))
                wheres.append(f"{path}:{number}")
    if to_spk2utt:
        first: dict[str, int] = {}
        for row, (utt, _) in enumerate(rows):
            if first.setdefault(utt, row) != row:  # under two speakers, or twice under one: spk2utt would list it twice
                print(f"{prog}: {wheres[row]}: utterance '{utt}' again (first at {wheres[first[utt]]})",
                      file=sys.stderr)
                return 1
        for spk, utts in utt2spk_to_spk2utt(rows).items():
            print(spk, " ".join(utts))
        return 0
    try:
        utt2spk = spk2utt_to_utt2spk(rows)
    except RepeatedUtterance as error:
        print(f"{prog}: {wheres[error.row]}: {error_line(error)}", file=sys.stderr)
        return 1
    for utt, spk in utt2spk.items():
        print(utt, spk)
    return 0

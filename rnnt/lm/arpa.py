"""ARPA back-off language model files (the format of SRILM and KenLM): writing and reading.

    \\data\\
    ngram 1=<count>
    ...
    \\1-grams:
    <log10 p>\\t<w>\\t<log10 backoff>
    ...
    \\end\\

The backoff column is left out where it is 0 and at the highest order.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from typing import Iterator

from rnnt.atomic_write import write_atomically
from rnnt.datadir.table import WHITESPACE, kaldi_fields
from rnnt.lm.kneser_ney import BOS, EOS, IMPOSSIBLE

Ngram = tuple[str, ...]


def write_arpa(model: dict[Ngram, tuple[float, float]], path: str) -> None:
    """The model as an ARPA file, whole or not at all (an LM cut short by a full disk read as one)."""
    order = max(len(ngram) for ngram in model)
    by_order = [sorted(ngram for ngram in model if len(ngram) == k) for k in range(1, order + 1)]

    def write(f) -> None:
        f.write("\n\\data\\\n")
        f.writelines(f"ngram {k}={len(grams)}\n" for k, grams in enumerate(by_order, 1))
        for k, grams in enumerate(by_order, 1):
            f.write(f"\n\\{k}-grams:\n")
            for ngram in grams:
                log_prob, backoff = model[ngram]
                tail = f"\t{backoff:.6f}" if k < order and backoff != 0.0 else ""
                f.write(f"{log_prob:.6f}\t{' '.join(ngram)}{tail}\n")
        f.write("\n\\end\\\n")

    write_atomically(path, write)


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """(number, stripped text) of each line of a plain or gzipped file (LMs ship as .arpa.gz, whatever their
    name); a line that is not UTF-8, or a gzipped file cut short or damaged, is an error naming the file."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rb") if gzipped else open(path, "rb") as f:
        try:
            for number, raw in enumerate(f, 1):
                try:
                    text = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a BOM is no text
                    yield number, text.strip(WHITESPACE)  # (str.strip took a word's U+202F or U+3000 away too)
                except UnicodeDecodeError as error:
                    raise ValueError(f"{path}:{number}: not UTF-8 ({error.reason} at byte {error.start}); re-encode "
                                     "the LM as UTF-8") from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise ValueError(f"{path}: a damaged gzip file ({error})") from None


def read_arpa(path: str) -> dict[Ngram, tuple[float, float]]:
    """{ngram: (log10 probability, log10 backoff)}, from a plain or gzipped file; a malformed line is an error
    naming file and line, as a file without its \\end\\ (cut short: the counts cannot see a last word cut)."""
    model: dict[Ngram, tuple[float, float]] = {}
    declared: dict[int, int] = {}
    declared_at: dict[int, int] = {}  # the line of each 'ngram k=N'
    section = None  # None before \data\, 0 in it, k in the k-grams
    ended, number = False, 0
    for number, line in _lines(path):
        if not line:
            continue
        if line == "\\data\\":
            section = 0
        elif section is None:
            continue  # text before \data\ is a comment, a sample '\1-grams:' line in it too (CMU's toolkit)
        elif line == "\\end\\":
            ended = True
            break
        elif (match := re.fullmatch(r"\\(\d+)-grams:", line)):
            section = int(match.group(1))
            if section not in declared:  # KenLM refuses one too: its n-grams would change the model's order
                raise ValueError(f"{path}:{number}: a {section}-grams section that \\data\\ does not declare")
        elif section == 0 and (match := re.fullmatch(r"ngram[ \t]+(\d+)[ \t]*=[ \t]*(\d+)", line)):
            declared[int(match.group(1))] = int(match.group(2))
            declared_at[int(match.group(1))] = number
        elif section:
            ngram, values = ngram_line(line, section, f"{path}:{number}")
            if ngram in model:
                raise ValueError(f"{path}:{number}: the {section}-gram '{' '.join(ngram)}' again")
            if BOS in ngram[1:] or EOS in ngram[:-1]:
                raise ValueError(f"{path}:{number}: {BOS} inside an n-gram or {EOS} before its end, in '{line}'")
            model[ngram] = values
        else:
            raise ValueError(f"{path}:{number}: unexpected line '{line}'")
    if not declared:
        raise ValueError(f"{path}: no \\data\\ section: not an ARPA file")
    if not ended:
        raise ValueError(f"{path}:{number}: the file ends without \\end\\ (cut short?)")
    for k, count in declared.items():
        found = sum(1 for ngram in model if len(ngram) == k)
        if found != count:
            raise ValueError(f"{path}:{declared_at[k]}: \\data\\ declares {count} {k}-grams, the file holds {found}")
    return model


def ngram_line(line: str, order: int, where: str) -> tuple[Ngram, tuple[float, float]]:
    """(ngram, (log10 p, log10 backoff)) of a line of the order's section; a probability above 1 or a value that
    is not a number is an error naming where. Below -99 (-inf, a probability of 0) reads as -99, which SRILM and
    KenLM write for 0: scaled by a fusion weight of 0, or less the best below a lexicon node of such words, -inf made
    NaN scores, which took the place of the best hypotheses in a beam."""
    fields = kaldi_fields(line)  # a no-break or ideographic space inside a word, as the text reader keeps it, stays
    if len(fields) not in (order + 1, order + 2):
        raise ValueError(f"{where}: expected '<log10 p> <{order} words> [<backoff>]', got '{line}'")
    try:
        log_prob, backoff = float(fields[0]), float(fields[order + 1]) if len(fields) == order + 2 else 0.0
    except ValueError:
        raise ValueError(f"{where}: not a number in '{line}'") from None
    if math.isnan(log_prob) or log_prob > 0 or not math.isfinite(backoff):
        raise ValueError(f"{where}: a log10 probability is at most 0 and a backoff finite, in '{line}'")
    return tuple(fields[1:order + 1]), (max(log_prob, IMPOSSIBLE), backoff)

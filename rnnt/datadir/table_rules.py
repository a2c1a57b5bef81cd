"""The rules of Kaldi's utils/validate_data_dir.sh, table by table: a table's lines (sorted unique keys,
field counts, clean whitespace), keys that must match another table's, speakers, text, values, segments'
recordings and genders. Each rule adds to Problems what it finds, with file, line and fix;
rnnt.datadir.validate applies them to a whole data dir."""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field

from rnnt.datadir.table import BYTE_ORDER_MARK, KEEP_BYTES, WHITESPACE, Line, has_undecodable_bytes, read_lines
from rnnt.datadir.values import VALUE_RULES, segment_problem

# Kaldi's validate_data_dir.sh refuses these in text as `grep -w` finds them (not inside a run of letters, digits
# and '_'); <eps> and #1 are accepted there, as here.
RESERVED = re.compile(r"(?<![A-Za-z0-9_])(?:<s>|</s>|#0)(?![A-Za-z0-9_])")
SECOND_FIELD_ON = re.compile(r"^\s*\S+")  # a line less this is what `sort -k2` compares (field 2's blanks first)
FIX_DIR = "utils/fix_data_dir.sh {dir}"
MAX_REPORTS_PER_RULE = 10


@dataclass
class Problems:
    """Collects problems; each rule reports at most MAX_REPORTS_PER_RULE lines, then a count."""

    items: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, where: str, message: str, fix: str, rule: str | None = None) -> None:
        rule = rule or message
        seen = self.counts.get(rule, 0)
        self.counts[rule] = seen + 1
        if seen < MAX_REPORTS_PER_RULE:
            self.items.append(f"{where}: {message}; fix: {fix}")

    def summary(self) -> list[str]:
        extra = [
            f"... and {n - MAX_REPORTS_PER_RULE} more like: {rule}"
            for rule, n in self.counts.items()
            if n > MAX_REPORTS_PER_RULE
        ]
        return self.items + extra

    def __bool__(self) -> bool:
        return bool(self.items)


def problems_in(summary: list[str]) -> tuple[int, int]:
    """(problems in all, lines listed) of a Problems.summary(): its lines, less each count line, plus its count."""
    folded = [int(line.split()[2]) for line in summary if line.startswith("... and ")]
    return len(summary) - len(folded) + sum(folded), len(summary) - len(folded)


def non_printable(text: str) -> str | None:
    """The first character Kaldi's validate_data_dir.sh counts non-printable (grep '[^[:print:][:space:]]' under
    C.UTF-8): a control character but those [:space:] counts (TAB, VT, FF, CR: odd_whitespace's), a surrogate
    or an unassigned code point, as U+XXXX; bytes that are not UTF-8 as U+FFFD (Kaldi's passes over such a file:
    here it is refused, as training reads UTF-8). Format characters (Cf: the zero-width joiners of Persian and
    Indic text, the direction marks of Hebrew and Arabic), private-use ones and U+FFFD itself, written in UTF-8,
    are printable there, so here."""
    if has_undecodable_bytes(text):  # read under KEEP_BYTES
        return "U+FFFD"
    for ch in text:
        if ch not in "\t\n\v\f\r" and unicodedata.category(ch) in ("Cc", "Cs", "Cn"):
            return f"U+{ord(ch):04X}"
    return None


def odd_whitespace(text: str) -> str | None:
    """The first whitespace character other than space and TAB (Kaldi's validate_text.pl refuses them), as U+XXXX;
    a CR ending the line is not counted (check_table names a Windows line end as such)."""
    for ch in text.rstrip("\r"):
        if ch.isspace() and ch not in " \t":
            return f"U+{ord(ch):04X}"
    return None


def transcript_problems(text: str, non_print: bool = False) -> list[tuple[str, str, str]]:
    """(problem, fix, rule) for each of Kaldi's text rules a transcript breaks: printable (unless non_print; UTF-8
    whatever it is), no whitespace but space and TAB, no <s>, </s> or #0."""
    found = []
    bad = "U+FFFD" if has_undecodable_bytes(text) else None if non_print else non_printable(text)  # UTF-8 always:
    if bad:  # training reads it (--non-print passed bytes that are not UTF-8, which the docs say are refused)
        found.append((f"non-printable character {bad}" + (" (invalid UTF-8)" if bad == "U+FFFD" else ""),
                      "remove it or re-encode the file as UTF-8", "text printable"))
    if odd := odd_whitespace(text):
        found.append((f"whitespace {odd} (Kaldi allows only space and TAB)", "replace it by a space",
                      "text whitespace"))
    found += [(f"reserved symbol '{word}' in a transcript", "remove or rename it", "reserved")
              for word in RESERVED.findall(text)]
    return found


def transcript_problem(text: str) -> str | None:
    """The first of Kaldi's text rules a transcript breaks, in words, or None: the transcripts the tools that read a
    data dir's utterances or train its units leave out, each named (a NUL in one was packed into a shard)."""
    if has_undecodable_bytes(text):
        return "a transcript that is not UTF-8"
    found = transcript_problems(text)
    return found[0][0] if found else None


def field_counts(min_fields: int, max_fields: int | None) -> str:
    """The field counts a table's lines may have, in words: 2, at least 2, 2 to 4."""
    if max_fields == min_fields:
        return f"{min_fields}"
    return f"at least {min_fields}" if max_fields is None else f"{min_fields} to {max_fields}"


def check_byte_order_mark(path: str, problems: Problems, fix_format: str) -> None:
    """A UTF-8 byte-order mark before the first key: our tools remove it, Kaldi's read it into the key."""
    with open(path, "rb") as f:
        if f.read(len(BYTE_ORDER_MARK)) == BYTE_ORDER_MARK:
            problems.add(f"{path}:1", "a byte-order mark (U+FEFF) before the first key", f"run {fix_format}",
                         f"{os.path.basename(path)} BOM")


def check_table(
    path: str, problems: Problems, min_fields: int = 2, max_fields: int | None = None
) -> dict[str, Line]:
    """Line-format checks shared by every table: line ends, field count, order, duplicates. Blanks at a line's
    ends are accepted, as Kaldi's validator accepts them. Kaldi accepts CR in tables other than text too, and
    prints 'has wrong format' for a utt2spk line of another field count or an empty line yet calls the dir
    valid: both bugs; here they are refused."""
    name = os.path.basename(path)
    fix_format = FIX_DIR.format(dir=os.path.dirname(path) or ".")
    table: dict[str, Line] = {}
    previous: Line | None = None
    last = 1
    check_byte_order_mark(path, problems, fix_format)
    # keys that are not UTF-8 kept apart, as Kaldi's tools see them
    for line in read_lines(path, KEEP_BYTES, name_byte_order_mark=False):
        last = line.number
        text = line.text
        if text.endswith("\r"):
            problems.add(line.where, "Windows (CRLF) line end", f"sed -i 's/\\r$//' {path}", f"{name} CRLF")
            text = text[:-1]
        if not text.strip(WHITESPACE):
            problems.add(line.where, "empty line", f"delete it or run {fix_format}", f"{name} empty")
            continue
        clean = Line(line.path, line.number, text)
        fields = clean.fields
        if len(fields) < min_fields or (max_fields is not None and len(fields) > max_fields):
            problems.add(clean.where, f"has {len(fields)} fields, expected {field_counts(min_fields, max_fields)}",
                         "correct the line", f"{name} fields")
            continue
        key = clean.key
        if key in table:
            problems.add(
                clean.where,
                f"duplicate key '{key}' (first on line {table[key].number})",
                f"remove one of them or run {fix_format}",
                f"{name} duplicate",
            )
            continue
        if previous is not None and key.encode("utf-8", KEEP_BYTES) < previous.key.encode("utf-8", KEEP_BYTES):
            problems.add(
                clean.where,
                f"not sorted: '{key}' comes after '{previous.key}' (line {previous.number})",
                f"sort it with LC_ALL=C sort -k1,1 -o {path} {path}, or run {fix_format}",
                f"{name} sorted",
            )
        table[key] = clean
        previous = clean
    if not ends_with_newline(path):  # Kaldi's check_sorted_and_uniq refuses it in every table
        problems.add(f"{path}:{last}", "the last line has no newline", f"echo >> {path}", f"{name} newline")
    return table


def check_same_keys(
    reference: dict[str, Line], ref_name: str, other: dict[str, Line], other_path: str, problems: Problems, what: str
) -> None:
    """Every key of the reference appears in the other table and vice versa."""
    fix = FIX_DIR.format(dir=os.path.dirname(other_path) or ".")
    name = os.path.basename(other_path)
    for key, line in reference.items():
        if key not in other:
            problems.add(line.where, f"{what} '{key}' is missing from {name}", fix, f"{name} missing")
    for key, line in other.items():
        if key not in reference:
            problems.add(line.where, f"{what} '{key}' is not in {ref_name}", fix, f"{name} extra")


def speaker_sort_key(line: str) -> tuple[bytes, bytes]:
    """What `sort -k2` (LC_ALL=C) orders a utt2spk line by: the line less its first field, then the line (bytes
    that are not UTF-8, read under KEEP_BYTES, in their place)."""
    return SECOND_FIELD_ON.sub("", line, count=1).encode("utf-8", KEEP_BYTES), line.encode("utf-8", KEEP_BYTES)


def check_speakers(utt2spk: dict[str, Line], spk2utt: dict[str, Line], data_dir: str, problems: Problems,
                   spk_sort: bool = True) -> None:
    """spk2utt is utt2spk inverted, line for line in order (Kaldi compares spk2utt expanded with utt2spk), and
    utt2spk is sorted by speaker too (Kaldi's `sort -k2 -C`, bytewise; skipped with spk_sort False): speaker
    ids that prefix their utterance ids are the usual way to get both. Both orders are checked as utt2spk is sorted
    by utterance: an unsorted one (check_table names it) was told to make speaker ids prefixes of utterance ids they
    already prefixed."""
    fix = f"utils/utt2spk_to_spk2utt.py {data_dir}/utt2spk > {data_dir}/spk2utt"
    expected: dict[str, set[str]] = {}
    previous = None
    by_utterance = sorted(utt2spk.items(), key=lambda item: item[0].encode("utf-8", KEEP_BYTES))
    for utt, line in by_utterance:
        spk = line.fields[1]
        expected.setdefault(spk, set()).add(utt)
        order = speaker_sort_key(line.text)
        if spk_sort and previous is not None and order < previous:
            problems.add(line.where, f"utt2spk is not sorted by speaker too: '{spk}' comes before the speaker of the "
                         "line above (Kaldi checks sort -k2 -C)", "make speaker ids prefixes of their utterance ids",
                         "speaker order")
        previous = order
    for spk, line in spk2utt.items():
        utts = line.fields[1:]
        if len(set(utts)) != len(utts):
            problems.add(line.where, f"speaker '{spk}' lists an utterance twice", fix, "spk2utt repeated utt")
        if set(utts) != expected.get(spk, set()):
            problems.add(
                line.where, f"speaker '{spk}' does not list the same utterances as utt2spk", fix, "spk2utt mismatch"
            )
    for spk in sorted(set(expected) - set(spk2utt)):
        problems.add(os.path.join(data_dir, "spk2utt"), f"speaker '{spk}' from utt2spk is missing", fix,
                     "spk2utt missing")
    expanded = [(u, line.fields[0]) for line in spk2utt.values() for u in line.fields[1:]]
    in_order = [(u, line.fields[1]) for u, line in by_utterance]
    set_problems = problems.counts.keys() & {"spk2utt mismatch", "spk2utt missing", "spk2utt repeated utt"}
    if not set_problems and expanded != in_order:
        first = next(i for i, (a, b) in enumerate(zip(expanded, in_order)) if a != b)
        problems.add(os.path.join(data_dir, "spk2utt"), f"spk2utt lists utterance '{expanded[first][0]}' where "
                     f"utt2spk has '{in_order[first][0]}' (Kaldi compares them in order: the speakers' and the "
                     "utterances' order must agree)", "make speaker ids prefixes of their utterance ids, then " + fix,
                     "spk2utt order")


def check_text(text: dict[str, Line], problems: Problems, non_print: bool = False) -> None:
    """Kaldi's text rules: printable (unless non_print), no whitespace but space and TAB, no <s>, </s> or #0
    (the final newline, as in every table: check_table)."""
    for line in text.values():
        for problem, fix, rule in transcript_problems(line.text, non_print):
            problems.add(line.where, problem, fix, rule)


def ends_with_newline(path: str) -> bool:
    """True for a file whose last byte is a newline, or an empty one."""
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def check_values(table: dict[str, Line], problems: Problems) -> None:
    """The numeric rules of rnnt.datadir.values, applied to every line of a table."""
    for line in table.values():
        name = os.path.basename(line.path)
        if name == "segments":
            problem = segment_problem(line.fields[2], line.fields[3])
            if problem:
                problems.add(line.where, problem, "need 0 <= start < end", "segment times")
        elif name in VALUE_RULES and not VALUE_RULES[name][0](line.fields[1:]):
            problems.add(line.where, f"value '{line.fields[1]}' is not {VALUE_RULES[name][1]}", "recompute the file",
                         f"{name} value")


def segment_recordings(segments: dict[str, Line]) -> dict[str, Line]:
    """Each recording of segments with its first segment's line."""
    return {line.fields[1]: line for line in reversed(segments.values())}


def check_recordings(segments: dict[str, Line], wav: dict[str, Line], problems: Problems) -> None:
    """Kaldi's rule: the recordings of segments are those of wav.scp, no more and no fewer."""
    for line in segments.values():
        reco = line.fields[1]
        if reco not in wav:
            problems.add(line.where, f"recording '{reco}' is not in wav.scp", "add it or drop the segment", "seg reco")
    used = {line.fields[1] for line in segments.values()}
    for reco, line in wav.items():
        if reco not in used:
            problems.add(line.where, f"recording '{reco}' has no segment", "drop it from wav.scp or run "
                         f"{FIX_DIR.format(dir=os.path.dirname(line.path) or '.')}", "wav unused")


def check_genders(spk2gender: str, spk2utt: dict, problems: Problems) -> None:
    genders = check_table(spk2gender, problems, 2, 2)
    check_same_keys(spk2utt, "spk2utt", genders, spk2gender, problems, "speaker")
    for line in genders.values():
        if line.fields[1] not in ("m", "f"):
            problems.add(line.where, f"gender '{line.fields[1]}' is not m or f", "use m or f", "gender")

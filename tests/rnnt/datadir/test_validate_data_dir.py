"""utils/validate_data_dir.sh accepts a real data dir and rejects each broken variant by file and line."""

from pathlib import Path

import pytest

from conftest import ROOT, run_tool

VALIDATE = ROOT / "utils" / "validate_data_dir.sh"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def rewrite(path: Path, new_lines: list[str]) -> None:
    path.write_bytes("".join(new_lines).encode())


def test_real_librispeech_dir_is_valid(librispeech_dir):
    out = run_tool(VALIDATE, "--no-feats", librispeech_dir)
    assert out.returncode == 0, out.stderr
    assert "is valid (8 utterances)" in out.stdout


def test_feats_required_unless_no_feats(librispeech_dir):
    out = run_tool(VALIDATE, librispeech_dir)
    assert out.returncode == 1
    assert "feats.scp: required file is missing" in out.stderr and "--no-feats" in out.stderr


def break_unsorted(d):
    t = lines(d / "text")
    t[1], t[2] = t[2], t[1]
    rewrite(d / "text", t)
    return "text:3", "not sorted"


def break_duplicate(d):
    t = lines(d / "utt2dur")
    rewrite(d / "utt2dur", t[:3] + [t[2]] + t[3:])
    return "utt2dur:4", "duplicate key"


def break_speaker_prefix(d):
    t = lines(d / "utt2spk")
    utt, spk = t[0].split()
    t[0] = f"{utt} zz{spk}\n"
    rewrite(d / "utt2spk", t)
    s = lines(d / "spk2utt")
    s[0] = s[0].replace(spk, f"zz{spk}", 1)
    rewrite(d / "spk2utt", sorted(s))
    return "utt2spk:1", "is not a prefix of utterance id"


def break_missing_text(d):
    t = lines(d / "text")
    rewrite(d / "text", t[:4] + t[5:])
    return "utt2spk:5", "is missing from text"


def break_crlf(d):
    t = lines(d / "wav.scp")
    t[6] = t[6].replace("\n", "\r\n")
    rewrite(d / "wav.scp", t)
    return "wav.scp:7", "CRLF"


def break_trailing_space(d):
    t = lines(d / "text")
    t[3] = t[3].replace("\n", "  \n")
    rewrite(d / "text", t)
    return "text:4", "trailing whitespace"


def break_empty_line(d):
    t = lines(d / "utt2spk")
    rewrite(d / "utt2spk", t[:2] + ["\n"] + t[2:])
    return "utt2spk:3", "empty line"


def break_spk2utt(d):
    s = lines(d / "spk2utt")
    s[0] = " ".join(s[0].split()[:-1]) + "\n" if len(s[0].split()) > 2 else s[0].rstrip("\n") + " extra-utt\n"
    rewrite(d / "spk2utt", s)
    return "spk2utt:1", "does not list the same utterances"


def break_non_printable(d):
    t = lines(d / "text")
    t[2] = t[2].replace(" ", " \x07", 1)
    rewrite(d / "text", t)
    return "text:3", "non-printable"


def break_reserved_word(d):
    t = lines(d / "text")
    t[5] = t[5].replace("\n", " <s>\n")
    rewrite(d / "text", t)
    return "text:6", "reserved symbol '<s>'"


def break_duration(d):
    t = lines(d / "utt2dur")
    t[1] = t[1].split()[0] + " -1.5\n"
    rewrite(d / "utt2dur", t)
    return "utt2dur:2", "not a positive number"


def break_segments(d):
    utts = [line.split()[0] for line in lines(d / "utt2spk")]
    rewrite(d / "segments", [f"{u} {u} 0.0 1.0\n" for u in utts[:-1]] + [f"{utts[-1]} {utts[-1]} 2.0 1.0\n"])
    return f"segments:{len(utts)}", "bad segment times"


BROKEN = [break_unsorted, break_duplicate, break_speaker_prefix, break_missing_text, break_crlf,
          break_trailing_space, break_empty_line, break_spk2utt, break_non_printable, break_reserved_word,
          break_duration, break_segments]


@pytest.mark.parametrize("breaker", BROKEN, ids=lambda f: f.__name__[6:])
def test_broken_dir_rejected_naming_file_and_line(librispeech_dir, breaker):
    where, what = breaker(librispeech_dir)
    out = run_tool(VALIDATE, "--no-feats", librispeech_dir)
    assert out.returncode == 1, out.stdout
    assert "is NOT valid" in out.stderr
    matching = [line for line in out.stderr.splitlines() if where in line and what in line]
    assert matching, f"expected a line with '{where}' and '{what}' in:\n{out.stderr}"
    assert all("fix:" in line for line in matching)


BROKEN_BUT_FIXABLE = [b for b in BROKEN if b not in (break_speaker_prefix, break_non_printable, break_reserved_word)]


@pytest.mark.parametrize("breaker", BROKEN_BUT_FIXABLE, ids=lambda f: f.__name__[6:])
def test_fix_data_dir_makes_broken_dir_valid(librispeech_dir, breaker):
    before = {p.name: p.read_bytes() for p in librispeech_dir.iterdir() if p.is_file()}
    breaker(librispeech_dir)
    broken = {p.name: p.read_bytes() for p in librispeech_dir.iterdir() if p.is_file()}
    out = run_tool(ROOT / "utils" / "fix_data_dir.sh", librispeech_dir)
    assert out.returncode == 0, out.stderr
    assert "fix_data_dir.sh:" in out.stdout and "utterances" in out.stdout
    valid = run_tool(VALIDATE, "--no-feats", librispeech_dir)
    assert valid.returncode == 0, valid.stderr
    for name, content in broken.items():  # originals kept
        assert (librispeech_dir / ".backup" / name).read_bytes() == content
    kept = set(lines(librispeech_dir / "utt2spk"))
    assert kept <= set(before["utt2spk"].decode().splitlines(keepends=True))
    # Only the utterances the breakage touched are dropped; everything good survives.
    assert len(kept) >= 7


def test_fix_reports_what_it_dropped(librispeech_dir):
    break_missing_text(librispeech_dir)
    out = run_tool(ROOT / "utils" / "fix_data_dir.sh", librispeech_dir)
    assert "kept 7 of 8 utterances (1 not in text)" in out.stdout
    assert len(lines(librispeech_dir / "wav.scp")) == 7
    assert len(lines(librispeech_dir / "utt2dur")) == 7

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


def test_a_required_table_that_is_a_folder_is_named_so(tmp_path):
    for name in ("utt2spk", "spk2utt", "text"):
        (tmp_path / name).write_text("u1 s1\n" if name != "spk2utt" else "s1 u1\n")
    (tmp_path / "wav.scp").mkdir()
    out = run_tool(VALIDATE, "--no-feats", str(tmp_path))
    assert out.returncode == 1 and f"{tmp_path}/wav.scp: required file is a folder" in out.stderr, out.stderr


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
    return "utt2spk:2", "utt2spk is not sorted by speaker too"


def break_missing_text(d):
    t = lines(d / "text")
    rewrite(d / "text", t[:4] + t[5:])
    return "utt2spk:5", "is missing from text"


def break_crlf(d):
    t = lines(d / "wav.scp")
    t[6] = t[6].replace("\n", "\r\n")
    rewrite(d / "wav.scp", t)
    return "wav.scp:7", "CRLF"


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


def break_byte_order_mark(d):
    (d / "text").write_bytes(b"\xef\xbb\xbf" + (d / "text").read_bytes())
    return "text:1", "byte-order mark"


BROKEN = [break_unsorted, break_duplicate, break_speaker_prefix, break_missing_text, break_crlf, break_empty_line,
          break_spk2utt, break_non_printable, break_reserved_word, break_duration, break_segments,
          break_byte_order_mark]


@pytest.mark.parametrize("breaker", BROKEN, ids=lambda f: f.__name__[6:])
def test_broken_dir_rejected_naming_file_and_line(librispeech_dir, breaker):
    where, what = breaker(librispeech_dir)
    out = run_tool(VALIDATE, "--no-feats", librispeech_dir)
    assert out.returncode == 1, out.stdout
    assert "is NOT valid" in out.stderr
    matching = [line for line in out.stderr.splitlines() if where in line and what in line]
    assert matching, f"expected a line with '{where}' and '{what}' in:\n{out.stderr}"
    assert all("fix:" in line for line in matching)


BASE = {"utt2spk": ["s1-u1 s1", "s1-u2 s1", "s2-u1 s2", "s2-u2 s2"],
        "text": ["s1-u1 HELLO WORLD", "s1-u2 GOOD MORNING", "s2-u1 YES", "s2-u2 NO THANKS"],
        "wav.scp": ["s1-u1 /a/1.wav", "s1-u2 /a/2.wav", "s2-u1 /a/3.wav", "s2-u2 /a/4.wav"]}
UNSORTED_SPEAKERS = {"utt2spk": ["a-b_y a-b", "a_x a"], "text": ["a-b_y A", "a_x B"], "wav.scp": ["a-b_y /1", "a_x /2"]}
CONSISTENT_SPEAKERS = {"utt2spk": ["a1 x1", "a2 x1", "b1 y1", "b2 y2"], "text": ["a1 A", "a2 B", "b1 C", "b2 D"],
                       "wav.scp": ["a1 /1", "a2 /2", "b1 /3", "b2 /4"]}


def kaldi_case(tmp_path, files, text_line=None, raw_text=None):
    """A dir from files (BASE by default) with text line 1 replaced by text_line or the text file by raw_text."""
    files = {k: list(v) for k, v in files.items()}
    if text_line is not None:
        files["text"][0] = text_line
    speakers: dict[str, list[str]] = {}
    for line in files["utt2spk"]:
        speakers.setdefault(line.split()[1], []).append(line.split()[0])
    files["spk2utt"] = [f"{s} {' '.join(u)}" for s, u in sorted(speakers.items())]
    d = tmp_path / "d"
    d.mkdir()
    for name, rows in files.items():
        (d / name).write_bytes("".join(f"{r}\n" for r in rows).encode())
    if raw_text is not None:
        (d / "text").write_bytes(raw_text.encode())
    return d


# Verdicts of Kaldi's own egs/wsj/s5/utils/validate_data_dir.sh --no-feats (LC_ALL=C) on each case.
KALDI_VERDICTS = [
    ("tab after the key", BASE, "s1-u1\tHELLO WORLD", None, (), True),
    ("trailing space in text", BASE, "s1-u1 HELLO WORLD ", None, (), True),
    ("empty transcript then a space", BASE, "s1-u1 ", None, (), True),
    ("<eps> as a word", BASE, "s1-u1 HELLO <eps>", None, (), True),
    ("#1 as a word", BASE, "s1-u1 HELLO #1", None, (), True),
    ("#0 inside a word", BASE, "s1-u1 HELLO x#0", None, (), True),
    ("#0 after a dash", BASE, "s1-u1 HELLO a-#0", None, (), False),
    ("</s>", BASE, "s1-u1 </s> HELLO", None, (), False),
    ("no-break space", BASE, "s1-u1 HELLO\u00a0WORLD", None, (), False),
    ("ideographic space", BASE, "s1-u1 HELLO\u3000WORLD", None, (), False),
    ("no final newline", BASE, None, "s1-u1 A\ns1-u2 B\ns2-u1 C\ns2-u2 D", (), False),
    ("a bell, --non-print", BASE, "s1-u1 HELLO\x07", None, ("--non-print",), True),
    ("speakers sorted as their utterances, not prefixes", CONSISTENT_SPEAKERS, None, None, (), True),
    ("blanks at utt2dur's line ends", {**BASE, "utt2dur": [" s1-u1 1.0", "s1-u2 1.0 ", "s2-u1 1.0", "s2-u2 1.0"]},
     None, None, (), True),
    ("a blank after the last speaker", {**BASE, "utt2spk": ["s1-u1 s1", "s1-u2 s1", "s2-u1 s2", "s2-u2 s2 "]},
     None, None, (), True),
    ("a blank after a speaker the next line repeats", {**BASE, "utt2spk": ["s1-u1 s1 ", "s1-u2 s1", "s2-u1 s2",
                                                                          "s2-u2 s2"]}, None, None, (), False),
    ("two spaces before a speaker", {**BASE, "utt2spk": ["s1-u1 s1", "s1-u2  s1", "s2-u1 s2", "s2-u2 s2"]},
     None, None, (), False),
    ("a TAB before a speaker", {**BASE, "utt2spk": ["s1-u1 s1", "s1-u2 s1", "s2-u1\ts2", "s2-u2 s2"]},
     None, None, (), False),
    ("speaker prefixes sorted otherwise", UNSORTED_SPEAKERS, None, None, (), False),
    ("speaker prefixes sorted otherwise, --no-spk-sort", UNSORTED_SPEAKERS, None, None, ("--no-spk-sort",), False),
]


@pytest.mark.parametrize("case,files,text_line,raw_text,options,valid", KALDI_VERDICTS,
                         ids=[c[0] for c in KALDI_VERDICTS])
def test_verdicts_are_kaldis(tmp_path, case, files, text_line, raw_text, options, valid):
    out = run_tool(VALIDATE, "--no-feats", *options, kaldi_case(tmp_path, files, text_line, raw_text))
    assert (out.returncode == 0) == valid, out.stderr


UTTS = ["s1-u1", "s1-u2", "s2-u1", "s2-u2"]
SEGMENTED = {**BASE, "segments": [f"{u} rec{1 + i // 2} 0 1" for i, u in enumerate(UTTS)],
             "wav.scp": ["rec1 /1.wav", "rec2 /2.wav"]}
# Kaldi's verdicts on the optional files it checks against utt2spk, spk2utt or the recordings.
EXTRA_FILES = [
    ("utt2lang", {"utt2lang": [f"{u} en" for u in UTTS]}, True),
    ("utt2lang without an utterance", {"utt2lang": [f"{u} en" for u in UTTS[:3]]}, False),
    ("vad.scp with another utterance", {"vad.scp": [f"{u} v" for u in UTTS] + ["s3-u1 v"]}, False),
    ("utt2uniq without an utterance", {"utt2uniq": [f"{u} x" for u in UTTS[1:]]}, False),
    ("cmvn.scp", {"cmvn.scp": ["s1 c", "s2 c"]}, True),
    ("cmvn.scp without a speaker", {"cmvn.scp": ["s1 c"]}, False),
    ("reco2dur", {"reco2dur": [f"{u} 1.0" for u in UTTS]}, True),
    ("reco2dur without a recording", {"reco2dur": [f"{u} 1.0" for u in UTTS[:2]]}, False),
    ("reco2dur of zero", {"reco2dur": [f"{u} 0" for u in UTTS]}, False),
    ("spk2warp of 2.0", {"spk2warp": ["s1 1.0", "s2 2.0"]}, False),
    ("utt2warp", {"utt2warp": [f"{u} 1.1" for u in UTTS]}, True),
    ("reco2dur of segments' recordings", {**SEGMENTED, "reco2dur": ["rec1 3.0", "rec2 2.0"]}, True),
    ("reco2dur without a segments' recording", {**SEGMENTED, "reco2dur": ["rec1 3.0"]}, False),
    ("a wav.scp recording without a segment", {**SEGMENTED, "wav.scp": ["rec1 /1.wav", "rec2 /2.wav", "rec3 /3.wav"]},
     False),
    ("reco2file_and_channel", {**SEGMENTED, "reco2file_and_channel": ["rec1 f1 A", "rec2 f2 B"]}, True),
    ("reco2file_and_channel without a recording", {**SEGMENTED, "reco2file_and_channel": ["rec1 f1 A"]}, False),
    ("reco2file_and_channel of channel 1 (a warning only)", {**SEGMENTED, "reco2file_and_channel": ["rec1 f1 1",
                                                                                                   "rec2 f2 B"]}, True),
    ("reco2file_and_channel of channel C", {**SEGMENTED, "reco2file_and_channel": ["rec1 f1 A", "rec2 f2 C"]}, False),
    ("reco2file_and_channel of utterances, without segments", {"reco2file_and_channel": [f"{u} f A" for u in UTTS]},
     True),
    ("reco2file_and_channel without segments, short", {"reco2file_and_channel": [f"{u} f A" for u in UTTS[1:]]},
     False),
    ("reco2file_and_channel without segments, of channel C", {"reco2file_and_channel": [f"{u} f C" for u in UTTS]},
     False),
]


@pytest.mark.parametrize("case,extra,valid", EXTRA_FILES, ids=[c[0] for c in EXTRA_FILES])
def test_extra_files_get_kaldis_verdicts(tmp_path, case, extra, valid):
    out = run_tool(VALIDATE, "--no-feats", kaldi_case(tmp_path, {**BASE, **extra}))
    assert (out.returncode == 0) == valid, out.stderr


def test_tilde_in_wav_scp_is_refused_as_kaldi_does(tmp_path):
    files = {**BASE, "wav.scp": ["s1-u1 ~/1.wav"] + BASE["wav.scp"][1:]}
    out = run_tool(VALIDATE, "--no-feats", kaldi_case(tmp_path, files))
    assert out.returncode == 1 and "wav.scp:1: '~' in wav.scp" in out.stderr


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


def test_fix_counts_a_malformed_utt2spk_line_among_the_utterances_before(tmp_path):
    files = {**BASE, "utt2spk": ["s1-u1 s1", "s1-u2 s1 extra", "s2-u1 s2", "s2-u2 s2"]}
    d = kaldi_case(tmp_path, files)
    out = run_tool(ROOT / "utils" / "fix_data_dir.sh", d)
    assert out.returncode == 0 and "kept 3 of 4 utterances (1 malformed line in utt2spk)" in out.stdout, out.stdout
    assert run_tool(VALIDATE, "--no-feats", d).returncode == 0


def test_fix_counts_an_utterance_whose_duration_line_was_bad_once(tmp_path):
    """Its utt2dur line dropped, then the utterance not in utt2dur: the sum read as two utterances of one."""
    d = kaldi_case(tmp_path, {**BASE, "utt2dur": ["s1-u1 1.5", "s1-u2 nan", "s2-u1 2.0", "s2-u2 0.7"]})
    out = run_tool(ROOT / "utils" / "fix_data_dir.sh", d)
    assert out.returncode == 0 and "kept 3 of 4 utterances (1 not in utt2dur; lines dropped: 1 bad value in " \
                                   "utt2dur)" in out.stdout, out.stdout


def test_fix_keeps_kaldis_extra_files_and_the_ones_named_to_what_is_kept(tmp_path):
    """As Kaldi's fix_data_dir.sh: a speaker missing from cmvn.scp is dropped with its utterances; vad.scp,
    utt2uniq and the --utt-extra-files / --spk-extra-files are cut to the utterances and speakers kept."""
    files = {**BASE, "cmvn.scp": ["s1 c"], "vad.scp": [f"{u} v" for u in UTTS] + ["s9-u1 v"],
             "utt2uniq": [f"{u} x" for u in UTTS], "utt2foo": [f"{u} f" for u in UTTS], "spk2foo": ["s1 a", "s2 b"]}
    d = kaldi_case(tmp_path, files)
    out = run_tool(ROOT / "utils" / "fix_data_dir.sh", "--utt-extra-files", "utt2foo", "--spk-extra-files", "spk2foo",
                   d)
    assert out.returncode == 0 and "kept 2 of 4 utterances (2 speaker not in cmvn.scp)" in out.stdout, out.stdout
    for name in ("utt2spk", "vad.scp", "utt2uniq", "utt2foo"):
        assert [line.split()[0] for line in lines(d / name)] == ["s1-u1", "s1-u2"], name
    assert lines(d / "spk2foo") == ["s1 a\n"] and (d / ".backup" / "utt2foo").is_file()
    assert run_tool(VALIDATE, "--no-feats", d).returncode == 0


def test_fix_and_validate_refuse_what_kaldis_refuse_and_change_nothing(tmp_path):
    """Kaldi's fix_data_dir.sh exits 1 on a utt2spk that no order sorts by utterance and by speaker too, and
    on segments without wav.scp, which its validator refuses even under --no-wav: so do ours."""
    fix = ROOT / "utils" / "fix_data_dir.sh"
    unsorted = kaldi_case(tmp_path, UNSORTED_SPEAKERS)
    before = {p.name: p.read_bytes() for p in unsorted.iterdir() if p.is_file()}
    out = run_tool(fix, unsorted)
    assert out.returncode == 1 and "utt2spk: sorted by utterance, it is not sorted by speaker" in out.stderr
    assert {p.name: p.read_bytes() for p in unsorted.iterdir() if p.is_file()} == before
    segmented = tmp_path / "segmented"
    segmented.mkdir()
    for name, rows in {**SEGMENTED, "wav.scp": []}.items():
        if name != "wav.scp":
            (segmented / name).write_text("".join(f"{r}\n" for r in rows))
    spk2utt = {}
    for row in SEGMENTED["utt2spk"]:
        utt, spk = row.split()
        spk2utt.setdefault(spk, []).append(utt)
    (segmented / "spk2utt").write_text("".join(f"{s} {' '.join(u)}\n" for s, u in spk2utt.items()))
    out = run_tool(VALIDATE, "--no-feats", "--no-wav", segmented)
    assert out.returncode == 1 and "segments is there but not wav.scp" in out.stderr, out.stderr
    out = run_tool(fix, segmented)
    assert out.returncode == 1 and "segments is there but not wav.scp" in out.stderr, out.stderr


def test_an_unsorted_utt2spk_is_told_to_be_sorted_alone_and_folded_problems_are_counted(tmp_path):
    """Speaker ids prefixing their utterances, utt2spk unsorted: 'not sorted' (sort it), not also 'make speaker ids
    prefixes of their utterance ids', which they were. The last line counts the problems folded into '... and N
    more like' lines too (it said '22 problems listed' of 38)."""
    d = tmp_path / "d"
    d.mkdir()
    utts = [f"s{n % 3}-u{n:02d}" for n in range(23)]
    for name, value in (("utt2spk", lambda u: u.split("-")[0]), ("wav.scp", lambda u: f"/a/{u}.wav"),
                        ("text", lambda u: "<s> YES")):
        order = list(reversed(utts)) if name == "utt2spk" else sorted(utts)
        (d / name).write_text("".join(f"{u} {value(u)}\n" for u in order))
    (d / "spk2utt").write_text("".join(f"s{n} {' '.join(u for u in sorted(utts) if u.startswith(f's{n}-'))}\n"
                                       for n in range(3)))
    out = run_tool(VALIDATE, "--no-feats", d)
    assert out.returncode == 1
    problems = out.stderr.splitlines()
    assert not [line for line in problems if "prefixes of their utterance ids" in line], out.stderr
    assert len([line for line in problems if "utt2spk" in line and "not sorted" in line]) == 10
    assert problems[-1] == f"validate_data_dir.sh: {d} is NOT valid (38 problems, 20 listed, the rest counted by kind)"

"""rnnt.datadir.table_rules, rule by rule: the real speechocean762 tables pass every rule, and each broken table
gets exactly the problems Kaldi's validate_data_dir.sh rule implies, worded with file, line and fix: line format
(CRLF, empty lines, field counts, bytewise order, duplicates), keys shared with another table, spk2utt against
utt2spk (`sort -k2` order included), text (printable, space and TAB only, final newline, <s> </s> #0 as `grep -w`
finds them), numeric values, segments' recordings against wav.scp, genders m or f; Problems lists ten a rule,
then a count."""

import shutil

import pytest

from rnnt.datadir.table_rules import (MAX_REPORTS_PER_RULE, Problems, check_genders, check_recordings,
                                      check_same_keys, check_speakers, check_table, check_text, check_values,
                                      non_printable, odd_whitespace, segment_recordings)


@pytest.fixture(scope="module")
def speechocean(test_data):
    return test_data / "speechocean762" / "train"


def table_file(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def fix_dir(tmp_path) -> str:
    return f"utils/fix_data_dir.sh {tmp_path}"


def test_problems_keep_ten_a_rule_then_count_the_rest():
    problems = Problems()
    assert not problems
    for i in range(MAX_REPORTS_PER_RULE + 3):
        problems.add(f"f:{i + 1}", f"bad {i}", "fix it", "bad value")
    problems.add("g:1", "other", "do that")  # the message is the rule when none is given
    assert bool(problems) and MAX_REPORTS_PER_RULE == 10
    assert problems.items[0] == "f:1: bad 0; fix: fix it" and problems.items[9] == "f:10: bad 9; fix: fix it"
    assert problems.counts == {"bad value": 13, "other": 1}
    assert problems.summary() == [f"f:{i + 1}: bad {i}; fix: fix it" for i in range(10)] + \
        ["g:1: other; fix: do that", "... and 3 more like: bad value"]


@pytest.mark.parametrize("text,printable", [("u1 HELLO WORLD", True), ("u1\tA\tB", True), ("u1 caf\u00e9 \u4e2d", True),
                                            ("u1 A\u00a0B", True), ("u1 A\x07", False), ("u1 A\rB", True),
                                            ("u1 \ufffd", True), ("u1 zero\u200bwidth", True),
                                            ("u1 \u0645\u06cc\u200c\u0631\u0648\u0645", True), ("u1 \u200eA", True),
                                            ("u1 \ue000", True), ("u1 \u0378", False), ("u1 \x7f", False),
                                            ("u1 A\x85B", False), ("u1 \ufffe", False)])
def test_printable_text(text, printable):
    assert (non_printable(text) is None) is printable


@pytest.mark.parametrize("text,found", [("u1 A B\tC", None), ("u1 A\r", None), ("u1 A\rB", "U+000D"),
                                        ("u1 A\u00a0B", "U+00A0"),
                                        ("u1 A\u3000B", "U+3000"), ("u1 A\x0bB", "U+000B"), ("u1 A\x0cB", "U+000C"),
                                        ("u1 A\u2028B\u00a0", "U+2028"), ("u1 A\x85", "U+0085")])
def test_odd_whitespace_names_the_first_one(text, found):
    assert odd_whitespace(text) == found


@pytest.mark.parametrize("name,max_fields", [("utt2spk", 2), ("spk2utt", None), ("wav.scp", None), ("text", None),
                                             ("spk2gender", 2)])
def test_real_tables_pass_the_line_rules(speechocean, name, max_fields):
    problems = Problems()
    table = check_table(str(speechocean / name), problems, 1 if name == "text" else 2, max_fields)
    assert not problems, problems.summary()
    keys = [line.split()[0] for line in (speechocean / name).read_text().splitlines()]
    assert list(table) == keys and len(keys) == (125 if name.startswith("spk2") else 2500)


def test_swapped_real_lines_are_named_unsorted_at_the_second(speechocean, tmp_path):
    lines = (speechocean / "utt2spk").read_text().splitlines(keepends=True)
    lines[99], lines[100] = lines[100], lines[99]
    path = table_file(tmp_path, "utt2spk", "".join(lines))
    problems = Problems()
    table = check_table(path, problems, 2, 2)
    first, second = lines[99].split()[0], lines[100].split()[0]
    assert problems.summary() == [f"{path}:101: not sorted: '{second}' comes after '{first}' (line 100); fix: sort "
                                  f"it with LC_ALL=C sort -k1,1 -o {path} {path}, or run {fix_dir(tmp_path)}"]
    assert len(table) == 2500  # the lines out of order are still read


def test_each_line_format_problem_is_named(tmp_path):
    path = table_file(tmp_path, "utt2spk", b"b s1\na s1\na s2\n\nc s1 x\nd s1\r\n  e s1 \t\n   \n\r\n")
    problems = Problems()
    table = check_table(path, problems, 2, 2)
    fix = fix_dir(tmp_path)
    assert problems.summary() == [
        f"{path}:2: not sorted: 'a' comes after 'b' (line 1); fix: sort it with LC_ALL=C sort -k1,1 -o {path} {path}, "
        f"or run {fix}",
        f"{path}:3: duplicate key 'a' (first on line 2); fix: remove one of them or run {fix}",
        f"{path}:4: empty line; fix: delete it or run {fix}",
        f"{path}:5: has 3 fields, expected 2; fix: correct the line",
        f"{path}:6: Windows (CRLF) line end; fix: sed -i 's/\\r$//' {path}",
        f"{path}:8: empty line; fix: delete it or run {fix}",
        f"{path}:9: Windows (CRLF) line end; fix: sed -i 's/\\r$//' {path}",
        f"{path}:9: empty line; fix: delete it or run {fix}"]
    assert [(key, line.number, line.text) for key, line in table.items()] == [
        ("b", 1, "b s1"), ("a", 2, "a s1"), ("d", 6, "d s1"), ("e", 7, "  e s1 \t")]


@pytest.mark.parametrize("min_fields,max_fields,line,want", [(2, None, "u1", "has 1 fields, expected at least 2"),
                                                             (2, 4, "u1 a b c d", "has 5 fields, expected 2 to 4"),
                                                             (4, 4, "u1 r 0", "has 3 fields, expected 4"),
                                                             (4, 4, "u1 r 0 1 2", "has 5 fields, expected 4")])
def test_field_counts_name_what_is_expected(tmp_path, min_fields, max_fields, line, want):
    path = table_file(tmp_path, "segments", f"{line}\n")
    problems = Problems()
    assert check_table(path, problems, min_fields, max_fields) == {}
    assert problems.summary() == [f"{path}:1: {want}; fix: correct the line"]


def test_order_is_bytewise_and_a_key_alone_is_a_text_line(tmp_path):
    problems = Problems()
    check_table(table_file(tmp_path, "text", "A9 x\nB\na-b\na.b x\na0\na_x\ns10\ns2 y\n\u00e9\n"), problems, 1)
    assert not problems, problems.summary()
    check_table(table_file(tmp_path, "text", "a_x\na-b\n"), problems, 1)  # '_' 0x5f after '-' 0x2d
    assert problems.counts == {"text sorted": 1}


def test_ten_problems_a_rule_then_a_count(tmp_path):
    path = table_file(tmp_path, "utt2dur", "".join(f"u{i:02d} 1.0\n" for i in range(13, 0, -1)))
    problems = Problems()
    check_table(path, problems, 2, 2)
    summary = problems.summary()
    assert len(summary) == 11 and summary[-1] == "... and 2 more like: utt2dur sorted"
    assert summary[0].startswith(f"{path}:2: not sorted: 'u12' comes after 'u13' (line 1)")


def test_keys_missing_from_either_table_are_named_at_their_line(tmp_path):
    problems = Problems()
    utt2spk = check_table(table_file(tmp_path, "utt2spk", "u1 s\nu2 s\nu3 s\n"), problems, 2, 2)
    text_path = table_file(tmp_path, "text", "u2 A\nu3 B\nu4 C\n")
    text = check_table(text_path, problems, 1)
    check_same_keys(utt2spk, "utt2spk", text, text_path, problems, "utterance")
    fix = fix_dir(tmp_path)
    assert problems.summary() == [f"{tmp_path}/utt2spk:1: utterance 'u1' is missing from text; fix: {fix}",
                                  f"{text_path}:3: utterance 'u4' is not in utt2spk; fix: {fix}"]


def test_real_speakers_agree(speechocean):
    problems = Problems()
    utt2spk = check_table(str(speechocean / "utt2spk"), problems, 2, 2)
    spk2utt = check_table(str(speechocean / "spk2utt"), problems, 2)
    check_speakers(utt2spk, spk2utt, str(speechocean), problems)
    assert not problems, problems.summary()


def speakers(tmp_path, utt2spk: str, spk2utt: str, spk_sort: bool = True) -> list[str]:
    problems = Problems()
    check_speakers(check_table(table_file(tmp_path, "utt2spk", utt2spk), problems, 2, 2),
                   check_table(table_file(tmp_path, "spk2utt", spk2utt), problems, 2), str(tmp_path), problems,
                   spk_sort)
    return problems.summary()


def test_spk2utt_listing_other_utterances_twice_or_missing_a_speaker(tmp_path):
    fix = f"utils/utt2spk_to_spk2utt.py {tmp_path}/utt2spk > {tmp_path}/spk2utt"
    assert speakers(tmp_path, "a1 a\na2 a\nb1 b\n", "a a1 a2 a3\nb b1\n") == [
        f"{tmp_path}/spk2utt:1: speaker 'a' does not list the same utterances as utt2spk; fix: {fix}"]
    assert speakers(tmp_path, "a1 a\na2 a\nb1 b\n", "a a1 a2 a1\nb b1\n") == [
        f"{tmp_path}/spk2utt:1: speaker 'a' lists an utterance twice; fix: {fix}"]
    assert speakers(tmp_path, "a1 a\na2 a\nb1 b\n", "a a1 a2\n") == [
        f"{tmp_path}/spk2utt: speaker 'b' from utt2spk is missing; fix: {fix}"]


def test_utterances_listed_in_another_order_than_utt2spk(tmp_path):
    """Kaldi compares utt2spk with spk2utt expanded, line for line: a2 before a1 is refused."""
    assert speakers(tmp_path, "a1 a\na2 a\n", "a a2 a1\n") == [
        f"{tmp_path}/spk2utt: spk2utt lists utterance 'a2' where utt2spk has 'a1' (Kaldi compares them in order: the "
        "speakers' and the utterances' order must agree); fix: make speaker ids prefixes of their utterance ids, then "
        f"utils/utt2spk_to_spk2utt.py {tmp_path}/utt2spk > {tmp_path}/spk2utt"]


def test_utt2spk_not_sorted_by_speaker_is_named_unless_spk_sort_is_off(tmp_path):
    # speaker x2 sorts after x1, but its utterance a1 comes first: `sort -k2` moves line 2 up
    found = speakers(tmp_path, "a1 x2\nb1 x1\n", "x1 b1\nx2 a1\n")
    assert found[0] == (f"{tmp_path}/utt2spk:2: utt2spk is not sorted by speaker too: 'x1' comes before the speaker "
                        "of the line above (Kaldi checks sort -k2 -C); fix: make speaker ids prefixes of their "
                        "utterance ids")
    in_order = f"{tmp_path}/spk2utt: spk2utt lists utterance 'b1' where utt2spk has 'a1'"
    assert len(found) == 2 and found[1].startswith(in_order)
    # without the speaker order, the expanded spk2utt still disagrees with utt2spk's order, as in Kaldi
    unsorted = speakers(tmp_path, "a1 x2\nb1 x1\n", "x1 b1\nx2 a1\n", spk_sort=False)
    assert len(unsorted) == 1 and unsorted[0].startswith(in_order)


@pytest.mark.parametrize("utt2spk,unsorted_line", [
    ("u1 s1\nu2\ts1\n", 2),  # sort -k2 compares field 2 with its blanks: TAB 0x09 sorts before space 0x20
    ("u1 s1 \nu2 s1\n", 2),  # ' s1' before ' s1 '
    ("u1  s1\nu2 s1\n", None),  # '  s1' before ' s1': already in order
    ("a-b_y a-b\na_x a\n", 2),  # ' a' before ' a-b'
    ("a1 x1\na2 x1\nb1 y1\nb2 y2\n", None),  # speakers sorted as their utterances, without being prefixes
])
def test_speaker_order_is_sort_k2s_bytewise_order(tmp_path, utt2spk, unsorted_line):
    spk2utt: dict[str, list[str]] = {}
    for line in utt2spk.splitlines():
        spk2utt.setdefault(line.split()[1], []).append(line.split()[0])
    found = speakers(tmp_path, utt2spk, "".join(f"{s} {' '.join(u)}\n" for s, u in sorted(spk2utt.items())))
    order = [p for p in found if "not sorted by speaker" in p]
    assert [p.split(": ")[0] for p in order] == ([f"{tmp_path}/utt2spk:{unsorted_line}"] if unsorted_line else [])


def test_real_text_passes(speechocean):
    problems = Problems()
    path = str(speechocean / "text")
    check_text(check_table(path, problems, 1), problems)
    assert not problems, problems.summary()


def text_problems(tmp_path, content: bytes, non_print: bool = False) -> list[str]:
    path = table_file(tmp_path, "text", content)
    problems = Problems()
    check_text(check_table(path, problems, 1), problems, non_print)
    return problems.summary()


def test_each_text_problem_is_named_at_its_line(tmp_path):
    path = tmp_path / "text"
    found = text_problems(tmp_path, "u1 HELLO\x07\nu2 A\u00a0B\nu3 <s> X </s> #0\nu4 x#0 #1 <eps> a<s>\nu5 \xe9#0"
                          .encode())
    assert found == [
        f"{path}:5: the last line has no newline; fix: echo >> {path}",  # check_table's, as in every table
        f"{path}:1: non-printable character U+0007; fix: remove it or re-encode the file as UTF-8",
        f"{path}:2: whitespace U+00A0 (Kaldi allows only space and TAB); fix: replace it by a space",
        f"{path}:3: reserved symbol '<s>' in a transcript; fix: remove or rename it",
        f"{path}:3: reserved symbol '</s>' in a transcript; fix: remove or rename it",
        f"{path}:3: reserved symbol '#0' in a transcript; fix: remove or rename it",
        f"{path}:5: reserved symbol '#0' in a transcript; fix: remove or rename it"]  # é is no word letter in C


def test_invalid_utf8_in_text_is_refused_even_with_non_print(tmp_path):
    """(Kaldi's passes over a text that is not UTF-8: training reads UTF-8.) U+FFFD itself, in UTF-8, is printable
    to Kaldi's grep: it was refused as 'invalid UTF-8'."""
    assert text_problems(tmp_path, b"u1 A\x07\n", non_print=True) == []
    for non_print in (False, True):  # (--non-print passed it, the test of that never run)
        assert text_problems(tmp_path, b"u1 caf\xe9\n", non_print) == [
            f"{tmp_path}/text:1: non-printable character U+FFFD (invalid UTF-8); fix: remove it or re-encode the "
            "file as UTF-8"]
    assert text_problems(tmp_path, "u1 A\ufffdB\n".encode()) == []


def test_a_cr_inside_a_transcript_is_refused_even_with_non_print_a_crlf_end_named_once(tmp_path):
    """Kaldi's validate_text.pl refuses a CR anywhere; with --non-print one inside a line passed here."""
    for non_print in (True, False):  # named once
        assert text_problems(tmp_path, b"u1 hello\r world\n", non_print=non_print) == [
            f"{tmp_path}/text:1: whitespace U+000D (Kaldi allows only space and TAB); fix: replace it by a space"]
    crlf = text_problems(tmp_path, b"u1 hello\r\n", non_print=True)
    assert len(crlf) == 1 and "Windows (CRLF) line end" in crlf[0]


def test_an_empty_text_has_no_last_line_to_miss_a_newline(tmp_path):
    assert text_problems(tmp_path, b"") == []


def test_values_are_checked_by_file_name(tmp_path):
    problems = Problems()
    for name, content in (("segments", "u1 r 0 1\nu2 r 2 1\nu3 r 0 -1\n"), ("utt2dur", "u1 0\nu2 1.5\n"),
                          ("utt2num_frames", "u1 1.5\nu2 150\n"), ("text", "u1 0\nu2 -1\n"),
                          ("spk2warp", "s1 1.5\n")):
        path = table_file(tmp_path, name, content)
        check_values(check_table(path, problems, 2), problems)
    assert problems.summary() == [
        f"{tmp_path}/segments:2: bad segment times 2..1; fix: need 0 <= start < end",
        f"{tmp_path}/utt2dur:1: value '0' is not a positive number; fix: recompute the file",
        f"{tmp_path}/utt2num_frames:1: value '1.5' is not a positive whole number; fix: recompute the file",
        f"{tmp_path}/spk2warp:1: value '1.5' is not a warp factor between 0.5 and 1.5; fix: recompute the file"]


def test_segments_recordings_are_those_of_wav_scp(tmp_path):
    problems = Problems()
    segments = check_table(table_file(tmp_path, "segments", "u1 r1 0 1\nu2 r2 0 1\nu3 r1 1 2\n"), problems, 4, 4)
    wav = check_table(table_file(tmp_path, "wav.scp", "r1 /1.wav\nr3 /3.wav\n"), problems, 2)
    check_recordings(segments, wav, problems)
    assert problems.summary() == [
        f"{tmp_path}/segments:2: recording 'r2' is not in wav.scp; fix: add it or drop the segment",
        f"{tmp_path}/wav.scp:2: recording 'r3' has no segment; fix: drop it from wav.scp or run {fix_dir(tmp_path)}"]
    assert {reco: line.number for reco, line in segment_recordings(segments).items()} == {"r1": 1, "r2": 2}


def test_real_genders_pass(speechocean):
    problems = Problems()
    spk2utt = check_table(str(speechocean / "spk2utt"), problems, 2)
    check_genders(str(speechocean / "spk2gender"), spk2utt, problems)
    assert not problems, problems.summary()


def test_genders_are_m_or_f_for_exactly_the_speakers(speechocean, tmp_path):
    lines = (speechocean / "spk2gender").read_text().splitlines(keepends=True)
    speaker = [line.split()[0] for line in lines]
    lines[0] = f"{speaker[0]}\tM\n"  # Kaldi's rule is $2 == "m" || $2 == "f": case counts
    lines[1] = f"{speaker[1]} f extra\n"
    path = table_file(tmp_path, "spk2gender", "".join(lines[:-1]))  # the last speaker left out
    shutil.copy(speechocean / "spk2utt", tmp_path / "spk2utt")
    problems = Problems()
    check_genders(path, check_table(str(tmp_path / "spk2utt"), problems, 2), problems)
    assert problems.summary() == [
        f"{path}:2: has 3 fields, expected 2; fix: correct the line",
        f"{tmp_path}/spk2utt:2: speaker '{speaker[1]}' is missing from spk2gender; fix: {fix_dir(tmp_path)}",
        f"{tmp_path}/spk2utt:125: speaker '{speaker[-1]}' is missing from spk2gender; fix: {fix_dir(tmp_path)}",
        f"{path}:1: gender 'M' is not m or f; fix: use m or f"]


@pytest.mark.parametrize("name", ["utt2spk", "spk2utt", "wav.scp", "text"])
def test_a_last_line_without_its_newline_is_refused_in_every_table(tmp_path, name):
    """As Kaldi's check_sorted_and_uniq refuses it in every table it checks."""
    path = table_file(tmp_path, name, "s1-u1 s1\ns1-u2 s1")
    problems = Problems()
    check_table(path, problems, 2)
    assert problems.summary() == [f"{path}:2: the last line has no newline; fix: echo >> {path}"]


"""rnnt.datadir.speakers: utt2spk_to_spk2utt groups the real speechocean762 utt2spk into the corpus's own spk2utt
and keeps speakers in the order they first appear (as Kaldi's utt2spk_to_spk2utt.pl); spk2utt_to_utt2spk expands
it back and refuses an utterance listed twice; the two tools round-trip a real dir and name file and line of a
malformed line or a repeated utterance, a missing file without a traceback."""

import io

import pytest

from conftest import UTILS, run_tool
from rnnt.datadir.speakers import (
    main_spk2utt_to_utt2spk,
    main_utt2spk_to_spk2utt,
    spk2utt_to_utt2spk,
    utt2spk_to_spk2utt,
)


def rows_of(path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_utt2spk_spk2utt_round_trip(librispeech_dir):
    spk2utt = run_tool(UTILS / "utt2spk_to_spk2utt.py", librispeech_dir / "utt2spk", check=True).stdout
    assert spk2utt == (librispeech_dir / "spk2utt").read_text()
    utt2spk = run_tool(UTILS / "spk2utt_to_utt2spk.py", stdin=spk2utt, check=True).stdout
    assert utt2spk == (librispeech_dir / "utt2spk").read_text()


def test_utt2spk_to_spk2utt_rejects_malformed_line_by_number(tmp_path):
    bad = tmp_path / "utt2spk"
    bad.write_text("a-1 a\na-2\n")
    out = run_tool(UTILS / "utt2spk_to_spk2utt.py", bad)
    assert out.returncode == 1 and f"{bad}:2" in out.stderr


def test_utt2spk_to_spk2utt_of_speechocean762_is_the_corpus_spk2utt(speechocean_dir):
    spk2utt = utt2spk_to_spk2utt((utt, spk) for utt, spk in rows_of(speechocean_dir / "utt2spk"))
    expected = rows_of(speechocean_dir / "spk2utt")
    assert list(spk2utt) == [row[0] for row in expected]  # speakers in the order utt2spk first names them
    assert spk2utt == {row[0]: row[1:] for row in expected}
    assert len(spk2utt) == 125 and {len(utts) for utts in spk2utt.values()} == {20}


def test_spk2utt_to_utt2spk_of_speechocean762_is_the_corpus_utt2spk(speechocean_dir):
    utt2spk = spk2utt_to_utt2spk((row[0], row[1:]) for row in rows_of(speechocean_dir / "spk2utt"))
    assert list(utt2spk.items()) == [(utt, spk) for utt, spk in rows_of(speechocean_dir / "utt2spk")]


def test_utt2spk_to_spk2utt_keeps_first_appearance_and_input_order():
    # as Kaldi's utt2spk_to_spk2utt.pl: speakers in the order first seen, utterances in input order, no sorting
    pairs = [("u3", "b"), ("u1", "a"), ("u2", "b"), ("u0", "a")]
    spk2utt = utt2spk_to_spk2utt(pairs)
    assert list(spk2utt.items()) == [("b", ["u3", "u2"]), ("a", ["u1", "u0"])]
    assert utt2spk_to_spk2utt([]) == {}


def test_spk2utt_to_utt2spk_keeps_row_order():
    assert list(spk2utt_to_utt2spk([("b", ["u3", "u2"]), ("a", ["u1"])]).items()) == [
        ("u3", "b"), ("u2", "b"), ("u1", "a")]
    assert spk2utt_to_utt2spk([]) == {}


@pytest.mark.parametrize("rows,message", [
    ([("s", ["a", "b"]), ("t", ["a"])], "utterance 'a' is listed under speaker 's' and again under 't'"),
    ([("s", ["a", "b", "a"])], "utterance 'a' is listed under speaker 's' and again under 's'"),
])
def test_spk2utt_to_utt2spk_refuses_an_utterance_listed_twice(rows, message):
    with pytest.raises(ValueError) as error:
        spk2utt_to_utt2spk(rows)
    assert str(error.value) == message


def test_spk2utt_tool_names_the_line_that_repeats_an_utterance(speechocean_dir, capsys):
    spk2utt = speechocean_dir / "spk2utt"
    lines = spk2utt.read_text().splitlines()
    lines[40] += " 000010011"  # the first speaker's first utterance again, on line 41
    spk2utt.write_text("\n".join(lines) + "\n")
    assert main_spk2utt_to_utt2spk([str(spk2utt)]) == 1
    out = capsys.readouterr()
    assert out.out == ""  # nothing half-written
    assert out.err == (f"spk2utt_to_utt2spk.py: {spk2utt}:41: utterance '000010011' is listed under speaker "
                       f"'0001' and again under '{lines[40].split()[0]}'\n")


@pytest.mark.parametrize("tool,name,content,error", [
    (main_spk2utt_to_utt2spk, "spk2utt", "s1 a b\n\ns2\n", "spk2utt_to_utt2spk.py: {path}:3: expected <spk> <utt>..., "
     "got 's2'"),  # a speaker without utterances
    (main_utt2spk_to_spk2utt, "utt2spk", "a-1 a\na-2 a extra\n", "utt2spk_to_spk2utt.py: {path}:2: expected 2 fields, "
     "got 'a-2 a extra'"),  # a third field
    (main_utt2spk_to_spk2utt, "utt2spk", "a-1 a\na-2 a\n\na-1 b\n", "utt2spk_to_spk2utt.py: {path}:4: utterance 'a-1' "
     "again (first at {path}:1)"),  # under two speakers: it was listed under both, in silence
])
def test_tools_reject_a_bad_line_by_file_and_line_and_print_nothing(tmp_path, capsys, tool, name, content, error):
    path = tmp_path / name
    path.write_text(content)
    assert tool([str(path)]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == error.format(path=path) + "\n"


def test_tools_skip_blank_lines_and_carriage_returns(speechocean_dir, capsys, monkeypatch):
    utt2spk = speechocean_dir / "utt2spk"
    clean = utt2spk.read_text()
    utt2spk.write_bytes(clean.replace("\n", "\r\n\n").encode())
    assert main_utt2spk_to_spk2utt([str(utt2spk)]) == 0
    spk2utt = capsys.readouterr().out
    assert spk2utt == (speechocean_dir / "spk2utt").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(spk2utt.replace("\n", "\r\n")))
    assert main_spk2utt_to_utt2spk([]) == 0  # no argument: standard input
    assert capsys.readouterr().out == clean


def test_tools_of_empty_input_print_nothing(tmp_path, capsys):
    (tmp_path / "empty").write_text("\n \n")
    assert main_utt2spk_to_spk2utt([str(tmp_path / "empty")]) == 0
    assert main_spk2utt_to_utt2spk([str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("tool", ["utt2spk_to_spk2utt.py", "spk2utt_to_utt2spk.py"])
def test_tools_name_a_missing_file_without_a_traceback(tmp_path, tool):
    out = run_tool(UTILS / tool, tmp_path / "absent")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == f"{tool}: {tmp_path / 'absent'}: No such file or directory\n"


def test_tools_read_several_files_as_one_as_kaldis_read_them(speechocean_dir, tmp_path, capsys):
    lines = (speechocean_dir / "utt2spk").read_text().splitlines(keepends=True)
    (tmp_path / "a").write_text("".join(lines[:1000]))
    (tmp_path / "b").write_text("".join(lines[1000:]))
    assert main_utt2spk_to_spk2utt([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert capsys.readouterr().out == (speechocean_dir / "spk2utt").read_text()
    rows = (speechocean_dir / "spk2utt").read_text().splitlines(keepends=True)
    (tmp_path / "c").write_text("".join(rows[:60]))
    (tmp_path / "d").write_text("".join(rows[60:]) + rows[3])  # speaker 4's row again: named by its own file
    assert main_spk2utt_to_utt2spk([str(tmp_path / "c"), str(tmp_path / "d")]) == 1
    assert capsys.readouterr().err.startswith(f"spk2utt_to_utt2spk.py: {tmp_path / 'd'}:{len(rows) - 60 + 1}: ")
    (tmp_path / "d").write_text("".join(rows[60:]))
    assert main_spk2utt_to_utt2spk([str(tmp_path / "c"), str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out == "".join(lines)

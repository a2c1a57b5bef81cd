"""rnnt.datadir.filter_scp (utils/filter_scp.py), as Kaldi's filter_scp.pl: the lines of a real table whose key (or
field -f N) is a first field of the id list, byte for byte and in the table's order; --exclude the others; the id
list's other fields, blank lines and CRs ignored; whole keys only; empty inputs; standard input; a line without
the field named by file and line; -f below 1 and a missing file refused."""

import io

import pytest

from conftest import UTILS, keys, run_tool
from rnnt.datadir.filter_scp import main


def keys_of(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines()]


def test_filter_scp_include_exclude_and_field(librispeech_dir, tmp_path):
    wav = librispeech_dir / "wav.scp"
    ids = tmp_path / "ids"
    chosen = keys(wav)[1:6:2]
    ids.write_text("".join(f"{k}\n" for k in chosen))
    assert keys_of(run_tool(UTILS / "filter_scp.py", ids, wav, check=True).stdout) == chosen
    excluded = keys_of(run_tool(UTILS / "filter_scp.py", "--exclude", ids, wav, check=True).stdout)
    assert excluded == [k for k in keys(wav) if k not in chosen]
    # -f 2: match the speaker column of utt2spk against a speaker list
    spk = keys(librispeech_dir / "spk2utt")[0]
    ids.write_text(f"{spk}\n")
    by_speaker = keys_of(run_tool(UTILS / "filter_scp.py", "-f", "2", ids, librispeech_dir / "utt2spk").stdout)
    assert by_speaker and all(k.startswith(spk) for k in by_speaker)


def filtered(capsys, *argv) -> str:
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


def test_keeps_the_real_lines_of_listed_utterances_byte_for_byte(speechocean_dir, tmp_path, capsys):
    text = (speechocean_dir / "text").read_text().splitlines(keepends=True)  # tab-separated
    ids = tmp_path / "ids"
    # the id list in another order, with a value, a CR, a blank line and an id the table does not have
    ids.write_text(f"{keys(speechocean_dir / 'text')[900]}\tx y\r\n\n000010011\nnot-an-utt\n")
    assert filtered(capsys, ids, speechocean_dir / "text") == text[0] + text[900]  # in the table's order
    excluded = filtered(capsys, "--exclude", ids, speechocean_dir / "text")
    assert excluded == "".join(text[1:900] + text[901:])


def test_field_two_selects_the_utterances_of_the_female_speakers(speechocean_dir, capsys):
    # spk2gender as the id list: its first field (the speaker) counts, its value 'f'/'m' is ignored
    genders = dict(line.split() for line in (speechocean_dir / "spk2gender").read_text().splitlines())
    utt2spk = (speechocean_dir / "utt2spk").read_text().splitlines(keepends=True)
    kept = filtered(capsys, "-f", "2", speechocean_dir / "spk2gender", speechocean_dir / "utt2spk")
    assert kept == "".join(utt2spk)  # every speaker is in spk2gender
    females = speechocean_dir / "females"
    females.write_text("".join(f"{spk} f\n" for spk, gender in genders.items() if gender == "f"))
    kept = filtered(capsys, "-f", "2", females, speechocean_dir / "utt2spk")
    assert kept == "".join(line for line in utt2spk if genders[line.split()[1]] == "f")
    assert len(kept.splitlines()) == 67 * 20


def test_matches_whole_keys_only(tmp_path, capsys):
    (tmp_path / "ids").write_text("u1\n")
    (tmp_path / "scp").write_text("u1 a\nu10 b\nu1x c\nxu1 d\n")
    assert filtered(capsys, tmp_path / "ids", tmp_path / "scp") == "u1 a\n"
    assert filtered(capsys, "--exclude", tmp_path / "ids", tmp_path / "scp") == "u10 b\nu1x c\nxu1 d\n"


def test_an_id_list_may_repeat_an_id_without_a_word(tmp_path, capsys):
    (tmp_path / "recordings").write_text("r1\nr1\nr2\n")  # cut from a segments file: a recording a segment
    (tmp_path / "wav.scp").write_text("r1 a.wav\nr2 b.wav\nr3 c.wav\n")
    assert main([str(tmp_path / "recordings"), str(tmp_path / "wav.scp")]) == 0
    out = capsys.readouterr()
    assert (out.out, out.err) == ("r1 a.wav\nr2 b.wav\n", "")


def test_a_byte_order_mark_before_the_tables_first_key_is_removed_and_named_as_the_id_lists(tmp_path, capsys):
    """It was read into the table's first key (the id list's was removed): a table filtered by its own keys lost
    its first line, and --exclude kept it."""
    (tmp_path / "scp").write_bytes(b"\xef\xbb\xbfa 1\nb 2\n")
    assert main([str(tmp_path / "scp"), str(tmp_path / "scp")]) == 0
    out = capsys.readouterr()
    assert out.out == "a 1\nb 2\n"
    assert out.err == f"{tmp_path / 'scp'}:1: a byte-order mark (U+FEFF) before the first key; removed\n"  # once
    assert main(["--exclude", str(tmp_path / "scp"), str(tmp_path / "scp")]) == 0
    assert capsys.readouterr().out == ""


def test_empty_inputs(tmp_path, capsys):
    (tmp_path / "empty").write_text("")
    (tmp_path / "scp").write_text("u1 a\n\nu2 b")  # a blank line dropped, a missing final newline added
    assert filtered(capsys, tmp_path / "empty", tmp_path / "scp") == ""
    assert filtered(capsys, "--exclude", tmp_path / "empty", tmp_path / "scp") == "u1 a\nu2 b\n"
    assert filtered(capsys, tmp_path / "scp", tmp_path / "empty") == ""


def test_reads_standard_input(speechocean_dir, capsys, monkeypatch):
    wav = (speechocean_dir / "wav.scp").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(wav))
    assert filtered(capsys, speechocean_dir / "spk2utt", "-") == ""  # speakers, not utterances
    monkeypatch.setattr("sys.stdin", io.StringIO(wav))
    assert filtered(capsys, "--exclude", speechocean_dir / "spk2utt") == wav  # no table: standard input


def test_the_id_list_from_standard_input_as_kaldis_recipes_pipe_it(speechocean_dir, tmp_path):
    """`awk '{print $1}' <ids> | utils/filter_scp.py - <table>`, as Kaldi's recipes run filter_scp.pl; both
    from standard input refused."""
    chosen = keys(speechocean_dir / "spk2utt")[3:5]
    out = run_tool(UTILS / "filter_scp.py", "-", speechocean_dir / "spk2utt", stdin="".join(f"{s} x\n" for s in chosen))
    assert out.returncode == 0, out.stderr
    assert keys_of(out.stdout) == chosen
    both = run_tool(UTILS / "filter_scp.py", "-", stdin="a\n")
    assert both.returncode == 2 and "the id list and in.scp cannot both be standard input" in both.stderr


def test_a_line_without_the_field_is_named_by_file_and_line_and_skipped(tmp_path, capsys):
    (tmp_path / "ids").write_text("a\n")
    (tmp_path / "utt2spk").write_text("u1 a\nu2 b\n\nu3\nu4 a\n")
    for exclude, kept in (([], "u1 a\nu4 a\n"), (["--exclude"], "u2 b\n")):  # the good lines as without it
        assert main([*exclude, "-f", "2", str(tmp_path / "ids"), str(tmp_path / "utt2spk")]) == 0
        out = capsys.readouterr()
        assert out.out == kept
        assert out.err == (f"filter_scp.py: {tmp_path / 'utt2spk'}:4: 1 fields, no field 2; skipped\n"
                           f"filter_scp.py: 1 line(s) of {tmp_path / 'utt2spk'} without field 2 skipped\n")


@pytest.mark.parametrize("field", ["0", "-1"])
def test_fields_are_numbered_from_one(tmp_path, capsys, field):
    (tmp_path / "t").write_text("u1 a b\n")
    with pytest.raises(SystemExit) as exit_:
        main(["-f", field, str(tmp_path / "t"), str(tmp_path / "t")])
    assert exit_.value.code == 2 and f"-f {field}: fields are numbered from 1" in capsys.readouterr().err


def test_a_missing_file_is_named(speechocean_dir, tmp_path, capsys):
    for argv in ([tmp_path / "absent", speechocean_dir / "text"], [speechocean_dir / "text", tmp_path / "absent"]):
        assert main([str(a) for a in argv]) == 1
        out = capsys.readouterr()
        assert out.out == "" and out.err == f"filter_scp.py: {tmp_path / 'absent'}: No such file or directory\n"


def test_a_lone_cr_is_inside_its_line_as_kaldi_reads_it(tmp_path, capsys):
    """Split at a lone CR, a file's line became two, one of them an utterance its id list named (Kaldi's
    filter_scp.pl and our own standard input keep it one line)."""
    (tmp_path / "ids").write_text("b-1\nb-2\n")
    (tmp_path / "scp").write_bytes(b"a-1 hello\rb-1 world\nb-2 foo\r\n")
    assert filtered(capsys, tmp_path / "ids", tmp_path / "scp") == "b-2 foo\r\n"

"""rnnt.datadir.table: Line's key, value and fields worked by hand (leading blanks, TABs, no value, a kept CR);
read_lines splits at '\\n' only, numbers from 1, keeps CR and blank lines and leaves a line of bad UTF-8 out, named
(or keeps its bytes where asked);
read_table reads the real speechocean762 tables as a plain TAB split does, skips blanks and keeps the first of
a repeated key; write_table orders keys as `LC_ALL=C sort` does, writes a bare key for an empty value and
leaves the old file whole when its records fail."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from rnnt.datadir.table import KEEP_BYTES, Line, read_lines, read_table, write_table


@pytest.fixture(scope="module")
def speechocean(test_data):
    return test_data / "speechocean762" / "train"


@pytest.mark.parametrize("text,key,value,fields", [
    ("utt1 HELLO WORLD", "utt1", "HELLO WORLD", ["utt1", "HELLO", "WORLD"]),
    ("utt1\tHELLO  \t WORLD", "utt1", "HELLO  \t WORLD", ["utt1", "HELLO", "WORLD"]),  # inner blanks kept
    ("  utt1 x", "utt1", "x", ["utt1", "x"]),  # blanks before the key
    ("utt1", "utt1", "", ["utt1"]),
    ("utt1   ", "utt1", "", ["utt1"]),
    ("utt1 x\r", "utt1", "x", ["utt1", "x"]),
    ("", "", "", []),
    ("   ", "", "", []),
    # as Kaldi reads them, ASCII whitespace alone separates: str.split's cut such a key and dropped such a space
    # at a transcript's ends (scored as equal to one without)
    ("u3\u00a0z w", "u3\u00a0z", "w", ["u3\u00a0z", "w"]),
    ("u1 \u3000x y\u00a0", "u1", "\u3000x y\u00a0", ["u1", "\u3000x", "y\u00a0"]),
    ("\u00a0", "\u00a0", "", ["\u00a0"]),
])
def test_line_key_value_and_fields(text, key, value, fields):
    line = Line("data/text", 7, text)
    assert (line.key, line.value, line.fields) == (key, value, fields)
    assert line.where == "data/text:7"


def test_read_lines_numbers_from_one_and_keeps_every_line_raw(tmp_path):
    path = tmp_path / "text"
    # a CRLF line, a blank line, a line with a Unicode line separator inside, bad UTF-8, no final newline
    path.write_bytes(b"a 1\r\n\nb x\xe2\x80\xa8y\nc \xff\xfe\nd last")
    skipped = []
    lines = list(read_lines(str(path), skipped=skipped))
    assert [line.number for line in lines] == [1, 2, 3, 5]
    assert [line.text for line in lines] == ["a 1\r", "", "b x\u2028y", "d last"]
    assert all(line.path == str(path) for line in lines)
    assert skipped == [f"{path}:4: byte 0xff at column 3 is not UTF-8; line left out"]
    kept = list(read_lines(str(path), KEEP_BYTES))
    assert kept[3].text == "c \udcff\udcfe" and len(kept) == 5


def test_a_table_leaves_out_a_line_that_is_not_utf8_and_keeps_the_rest(tmp_path, capsys):
    """Before, each bad byte became U+FFFD in silence: a transcript's word, and a character unit, of U+FFFD."""
    path = tmp_path / "text"
    path.write_bytes(b"u1 HELLO\nu2 WOR\xffLD\nu3 YES\n")
    assert list(read_table(str(path))) == ["u1", "u3"]
    assert f"{path}:2: byte 0xff at column 7 is not UTF-8; line left out" in capsys.readouterr().err


def test_read_lines_of_an_empty_file_is_empty(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert list(read_lines(str(tmp_path / "empty"))) == []


@pytest.mark.parametrize("name", ["text", "wav.scp", "utt2spk", "spk2gender"])
def test_read_table_of_real_speechocean762_tables(speechocean, name):
    rows = [line.split(None, 1) for line in (speechocean / name).read_text().splitlines()]
    table = read_table(str(speechocean / name))
    assert list(table) == [key for key, _ in rows]
    assert {key: line.value for key, line in table.items()} == {key: value for key, value in rows}
    assert [line.number for line in table.values()] == list(range(1, len(rows) + 1))


def test_read_table_on_the_first_speechocean762_transcript(speechocean):
    line = read_table(str(speechocean / "text"))["000010011"]
    assert (line.value, line.number, line.where) == ("WE CALL IT BEAR", 1, f"{speechocean / 'text'}:1")


def test_read_table_skips_blanks_drops_line_end_blanks_and_keeps_the_first_key(tmp_path, capsys, monkeypatch):
    path = tmp_path / "utt2dur"
    path.write_bytes(b"b 2.0 \t\r\n\n   \nb 9.9\na 1.0\r\n")
    skipped = []
    table = read_table(str(path), skipped)
    assert list(table) == ["b", "a"]  # file order, not sorted
    assert (table["b"].text, table["b"].number) == ("b 2.0", 1)
    assert (table["a"].text, table["a"].number) == ("a 1.0", 5)
    assert skipped == [f"{path}:4: b: repeats the key of line 1; left out"]
    monkeypatch.setattr("sys.argv", ["/work/steps/score.py"])
    assert read_table(str(path)) == table  # without a list the repeat is printed under the tool's name
    assert capsys.readouterr().err == f"score.py: {path}:4: b: repeats the key of line 1; left out\n"


KEYS = ["s2", "s10", "B", "a", "a_x", "a-b", "a.b", "\u00e9", "z", "\u4e2d", "A1", "a0"]
# bytewise: upper case before lower, a prefix first, '-' 0x2d < '.' 0x2e < '0' 0x30 < '_' 0x5f, UTF-8 last
C_ORDER = ["A1", "B", "a", "a-b", "a.b", "a0", "a_x", "s10", "s2", "z", "\u00e9", "\u4e2d"]


def test_write_table_orders_keys_as_c_locale_sort(tmp_path):
    path = tmp_path / "utt2spk"
    assert write_table(str(path), [(key, f"v{i}") for i, key in enumerate(KEYS)]) == len(KEYS)
    unsorted = "".join(f"{key} v{i}\n" for i, key in enumerate(KEYS))
    by_sort = subprocess.run(["sort", "-k1,1"], input=unsorted.encode(), capture_output=True, check=True,
                             env={**os.environ, "LC_ALL": "C"}).stdout
    assert path.read_bytes() == by_sort
    assert [line.split()[0] for line in path.read_text(encoding="utf-8").splitlines()] == C_ORDER


def test_write_table_writes_a_bare_key_for_an_empty_value_and_reads_back(tmp_path):
    path = tmp_path / "text"
    records = [("u2", "HELLO  WORLD"), ("u1", ""), ("u3", "caf\u00e9")]
    write_table(str(path), records)
    assert path.read_bytes() == "u1\nu2 HELLO  WORLD\nu3 caf\u00e9\n".encode("utf-8")
    assert {key: line.value for key, line in read_table(str(path)).items()} == dict(records)


def test_write_table_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "wav.scp"
    path.write_text("old 1\nold 2\nold 3\n")
    assert write_table(str(path), [("new", "x")]) == 1
    assert path.read_text() == "new x\n"
    assert sorted(os.listdir(tmp_path)) == ["wav.scp"]


def test_write_table_with_failing_records_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "wav.scp"
    path.write_text("old 1\n")

    def records():
        yield "a", "1"
        raise OSError("source unreadable")

    with pytest.raises(OSError, match="source unreadable"):
        write_table(str(path), records())
    assert path.read_text() == "old 1\n"
    assert sorted(os.listdir(tmp_path)) == ["wav.scp"]


def test_write_table_of_nothing_is_an_empty_file(tmp_path):
    path = tmp_path / "segments"
    assert write_table(str(path), []) == 0
    assert path.read_bytes() == b""


def test_a_byte_order_mark_is_removed_named_and_the_first_key_kept(tmp_path, capsys):
    """An editor's byte-order mark was read into the first key: fix_data_dir.sh dropped that utterance as "not in
    text", score.py scored a perfect hypothesis 50% [PARTIAL]."""
    path = tmp_path / "text"
    path.write_bytes(b"\xef\xbb\xbfu1 YES NO\nu2 NO\n")
    assert {key: line.value for key, line in read_table(str(path)).items()} == {"u1": "YES NO", "u2": "NO"}
    assert capsys.readouterr().err == f"{path}:1: a byte-order mark (U+FEFF) before the first key; removed\n"
    (tmp_path / "hyp").write_text("u1 YES NO\nu2 NO\n")
    out = subprocess.run([sys.executable, ROOT / "steps" / "score.py", path, tmp_path / "hyp"], capture_output=True,
                         text=True)
    assert out.stdout.startswith("%WER 0.00 [ 0 / 3, 0 ins, 0 del, 0 sub ]\n"), out.stdout + out.stderr

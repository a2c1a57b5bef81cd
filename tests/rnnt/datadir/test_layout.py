"""rnnt.datadir.layout: read_normalised repairs the spacing around the key and the line ends, keeps each value
as written (as Kaldi's tools do: a quoted path in a piped command, a no-break space), and drops, counts and
names by file and line each malformed line, bad value and repeated key; load_dir reads the known files of
the real speechocean762 dir (and the extra ones named, never spk2utt) and refuses a dir without utt2spk;
write_spk2utt rebuilds the corpus's own spk2utt byte for byte; write_dir keeps each file to the utterances
kept, their speakers and, with segments, their recordings, worked by hand and on the real dir."""

from collections import Counter

import pytest

from rnnt.datadir.layout import load_dir, read_normalised, utterance_files, write_dir, write_spk2utt


@pytest.fixture(scope="module")
def speechocean(test_data):
    return test_data / "speechocean762" / "train"


def raw_rows(path) -> list[tuple[str, str]]:
    """(key, value with its blanks made single spaces) of each line, by a plain split."""
    return [(line.split()[0], " ".join(line.split()[1:])) for line in path.read_text().splitlines()]


def test_read_normalised_of_the_real_tab_separated_text(speechocean):
    dropped = Counter()
    records = read_normalised(str(speechocean / "text"), dropped)
    assert records == dict(raw_rows(speechocean / "text"))
    assert len(records) == 2500 and records["000010011"] == "WE CALL IT BEAR"
    assert dropped == Counter()


def test_read_normalised_repairs_drops_counts_and_names_each_line(tmp_path, capsys):
    path = tmp_path / "utt2dur"
    path.write_bytes(b"a 1.0\r\n\n b \t 2.5 \nc\nd 1.0 extra\ne 0\na 3.0\nf nan\n")
    dropped = Counter({"malformed line in text": 1})  # counts add to what the caller holds
    assert read_normalised(str(path), dropped) == {"a": "1.0", "b": "2.5"}
    assert dropped == Counter({"malformed line in text": 1, "malformed line in utt2dur": 2, "bad value in utt2dur": 2,
                               "duplicate key in utt2dur": 1})
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:4: dropped, 1 fields", f"{path}:5: dropped, 3 fields",
        f"{path}:6: dropped, value is not a positive number", f"{path}:7: dropped duplicate key 'a'",
        f"{path}:8: dropped, value is not a positive number"]


def test_a_cr_inside_a_line_parts_two_words_and_one_at_its_end_goes(tmp_path):
    """As validation says to repair it: HELLO\\rWORLD was fixed into one word, HELLOWORLD, in silence."""
    path = tmp_path / "text"
    path.write_bytes(b"u1 HELLO\rWORLD\r\nu2 A\r\r\n")
    assert read_normalised(str(path), Counter()) == {"u1": "HELLO WORLD", "u2": "A"}


def test_read_normalised_keeps_a_text_line_of_a_key_alone(tmp_path):
    path = tmp_path / "text"
    path.write_text("u1\nu2 HELLO\t\tWORLD\n")
    dropped = Counter()
    assert read_normalised(str(path), dropped) == {"u1": "", "u2": "HELLO\t\tWORLD"}  # the value as written
    assert not dropped


def test_read_normalised_checks_segments_fields_and_times(tmp_path, capsys):
    path = tmp_path / "segments"
    path.write_text("u1 rec 0 1.5\nu2 rec 2 1\nu3 rec 0\nu4 rec 3 -1\n")
    dropped = Counter()
    assert read_normalised(str(path), dropped) == {"u1": "rec 0 1.5", "u4": "rec 3 -1"}
    assert dropped == Counter({"bad value in segments": 1, "malformed line in segments": 1})
    assert capsys.readouterr().err.splitlines() == [f"{path}:2: dropped, value is not 0 <= start < end",
                                                    f"{path}:3: dropped, 3 fields"]


def test_values_are_kept_as_written_and_fields_split_on_spaces_and_tabs_only(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    command = 'sox  "/a/my  file.wav" -t wav - |'
    (d / "wav.scp").write_text(f"s-u1 {command}\ns-u2\t/a/caf\u00e9\u00a0song.wav\n")
    (d / "utt2spk").write_text("s-u1 s\ns-u2 s\n")
    (d / "text").write_text("s-u1 HELLO  WORLD\ns-u2 NO\u00a0BREAK\n")
    tables = load_dir(str(d))
    assert tables["wav.scp"] == {"s-u1": command, "s-u2": "/a/caf\u00e9\u00a0song.wav"}
    assert tables["text"] == {"s-u1": "HELLO  WORLD", "s-u2": "NO\u00a0BREAK"}  # one field to Kaldi
    write_dir(tables, {"s-u1", "s-u2"}, str(tmp_path / "out"))
    assert (tmp_path / "out" / "wav.scp").read_text() == f"s-u1 {command}\ns-u2 /a/caf\u00e9\u00a0song.wav\n"


def test_read_normalised_of_an_unknown_file_needs_two_fields_and_no_more(tmp_path):
    path = tmp_path / "utt2foo"
    path.write_text("a x  y z\nb\n")
    dropped = Counter()
    assert read_normalised(str(path), dropped) == {"a": "x  y z"}
    assert dropped == Counter({"malformed line in utt2foo": 1})


def test_load_dir_reads_the_known_files_and_the_extra_ones_named(speechocean):
    tables = load_dir(str(speechocean))
    assert set(tables) == {"text", "utt2spk", "wav.scp", "spk2gender"}  # spk2utt is derived, spk2age not known
    assert tables["utt2spk"] == dict(raw_rows(speechocean / "utt2spk"))
    assert tables["spk2gender"] == dict(raw_rows(speechocean / "spk2gender"))
    with_age = load_dir(str(speechocean), extra=("spk2age",))
    assert with_age["spk2age"] == dict(raw_rows(speechocean / "spk2age")) and len(with_age["spk2age"]) == 125


def test_load_dir_counts_into_the_counter_given(tmp_path):
    (tmp_path / "utt2spk").write_text("u1 s1\nu1 s1\nu2\n")
    dropped = Counter()
    assert load_dir(str(tmp_path), dropped) == {"utt2spk": {"u1": "s1"}}
    assert dropped == Counter({"duplicate key in utt2spk": 1, "malformed line in utt2spk": 1})


def test_load_dir_without_utt2spk_names_the_file(tmp_path):
    (tmp_path / "text").write_text("u1 A\n")
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'utt2spk'}: missing; every data dir needs utt2spk"):
        load_dir(str(tmp_path))
    (tmp_path / "utt2spk").mkdir()
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'utt2spk'}: a folder; every data dir needs utt2spk"):
        load_dir(str(tmp_path))


def test_wav_scp_is_keyed_by_utterance_only_without_segments():
    tables = {"utt2spk": {}, "text": {}, "wav.scp": {}, "utt2dur": {}, "spk2gender": {}}
    assert utterance_files(tables) == ["utt2spk", "text", "utt2dur", "wav.scp"]
    assert utterance_files({**tables, "segments": {}}) == ["utt2spk", "text", "segments", "utt2dur"]


def test_write_spk2utt_rebuilds_the_real_spk2utt_byte_for_byte(speechocean, tmp_path):
    pairs = [tuple(line.split()) for line in (speechocean / "utt2spk").read_text().splitlines()]
    assert write_spk2utt(str(tmp_path), reversed(pairs)) == 125
    assert (tmp_path / "spk2utt").read_bytes() == (speechocean / "spk2utt").read_bytes()


def test_write_spk2utt_sorts_speakers_and_their_utterances(tmp_path):
    assert write_spk2utt(str(tmp_path), [("b2", "s2"), ("c1", "s10"), ("a1", "s1"), ("b1", "s2")]) == 3
    assert (tmp_path / "spk2utt").read_text() == "s1 a1\ns10 c1\ns2 b1 b2\n"


def test_write_dir_keeps_two_real_speakers(speechocean, tmp_path):
    tables = load_dir(str(speechocean))
    keep = {utt for utt, spk in tables["utt2spk"].items() if spk in ("0001", "0006")}
    assert len(keep) == 40
    dest = tmp_path / "two"
    write_dir(tables, keep, str(dest))
    assert sorted(p.name for p in dest.iterdir()) == ["spk2gender", "spk2utt", "text", "utt2spk", "wav.scp"]
    for name in ("text", "utt2spk", "wav.scp"):
        kept = [f"{key} {value}\n" for key, value in raw_rows(speechocean / name) if key in keep]
        assert (dest / name).read_text() == "".join(kept), name
    assert (dest / "spk2gender").read_text() == "0001 m\n0006 f\n"
    real = (speechocean / "spk2utt").read_text().splitlines(keepends=True)
    assert (dest / "spk2utt").read_text() == "".join(line for line in real if line.split()[0] in ("0001", "0006"))


SEGMENTED = {
    "utt2spk": {"r1-a": "s1", "r1-b": "s1", "r2-a": "s2", "r3-a": "s3"},
    "segments": {"r1-a": "r1 0 1", "r1-b": "r1 1 2", "r2-a": "r2 0 1", "r3-a": "r3 0 2"},
    "text": {"r1-a": "A", "r1-b": "B", "r2-a": "C", "r3-a": "D"},
    "wav.scp": {"r1": "/1.wav", "r2": "/2.wav", "r3": "/3.wav"},
    "reco2dur": {"r1": "2", "r2": "1", "r3": "2"},
    "reco2file_and_channel": {"r1": "f1 A", "r2": "f2 A", "r3": "f3 B"},
    "spk2gender": {"s1": "m", "s2": "f", "s3": "f"},
    "cmvn.scp": {"s1": "c1", "s2": "c2", "s3": "c3"},
    "spk2warp": {"s1": "1.0", "s2": "1.1", "s3": "0.9"},
    "vad.scp": {"r1-a": "v", "r1-b": "v", "r2-a": "v", "r3-a": "v", "r9-a": "v"},
    "utt2foo": {"r1-a": "x", "r1-b": "y", "r2-a": "z", "r3-a": "w"},
    "spk2foo": {"s1": "p", "s2": "q", "s3": "r"},
}


def test_write_dir_with_segments_keeps_the_recordings_of_the_segments_kept(tmp_path):
    write_dir(SEGMENTED, {"r1-b", "r3-a"}, str(tmp_path / "out"), utt_extra=("utt2foo",), spk_extra=("spk2foo",))
    expected = {
        "utt2spk": "r1-b s1\nr3-a s3\n", "segments": "r1-b r1 1 2\nr3-a r3 0 2\n", "text": "r1-b B\nr3-a D\n",
        "wav.scp": "r1 /1.wav\nr3 /3.wav\n", "reco2dur": "r1 2\nr3 2\n", "reco2file_and_channel": "r1 f1 A\nr3 f3 B\n",
        "spk2gender": "s1 m\ns3 f\n", "cmvn.scp": "s1 c1\ns3 c3\n", "spk2warp": "s1 1.0\ns3 0.9\n",
        "vad.scp": "r1-b v\nr3-a v\n", "utt2foo": "r1-b y\nr3-a w\n", "spk2foo": "s1 p\ns3 r\n",
        "spk2utt": "s1 r1-b\ns3 r3-a\n"}
    assert {p.name: p.read_text() for p in (tmp_path / "out").iterdir()} == expected


def test_write_dir_without_segments_keys_recording_files_by_utterance(tmp_path):
    tables = {"utt2spk": {"u1": "s1", "u2": "s1", "u3": "s2"}, "wav.scp": {"u1": "/1", "u2": "/2", "u3": "/3"},
              "reco2dur": {"u1": "1.5", "u2": "2.5", "u3": "3.5"}}
    write_dir(tables, {"u2", "u3"}, str(tmp_path))
    assert (tmp_path / "wav.scp").read_text() == "u2 /2\nu3 /3\n"
    assert (tmp_path / "reco2dur").read_text() == "u2 2.5\nu3 3.5\n"
    assert (tmp_path / "spk2utt").read_text() == "s1 u2\ns2 u3\n"

"""rnnt.datadir.fix (utils/fix_data_dir.sh), as Kaldi's fix_data_dir.sh: a clean real dir is kept whole; a real dir
broken by hand (unsorted, CRs, stray blanks, blank, malformed and repeated lines, utterances missing from one file,
a speaker missing from spk2gender or cmvn.scp, a speaker left without utterances) comes out sorted, intersected and
valid, with the counts it reports and the originals in .backup; segments drop what has no recording and wav.scp
what has no segment; utt2uniq and extra files are kept to what is kept without dropping anything; a dir that would
lose every utterance is refused and left as it was."""

from collections import Counter

import pytest

from conftest import assert_valid, keys
from rnnt.datadir.fix import fix_data_dir, main
from rnnt.datadir.layout import load_dir
from rnnt.datadir.speakers import utt2spk_to_spk2utt

ORIGINALS = ("text", "wav.scp", "utt2spk", "spk2utt", "spk2gender", "spk2age")


def snapshot(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}


def test_a_clean_real_dir_is_kept_whole(speechocean_dir):
    before = load_dir(str(speechocean_dir))
    originals = snapshot(speechocean_dir)
    assert fix_data_dir(str(speechocean_dir)) == (2500, 2500, Counter())
    assert load_dir(str(speechocean_dir)) == before
    for name in ("utt2spk", "spk2utt", "spk2age"):  # space-separated already, or not a file fix knows
        assert (speechocean_dir / name).read_bytes() == originals[name], name
    for name in ("text", "wav.scp", "spk2gender"):  # the tab after the key made a space
        assert (speechocean_dir / name).read_bytes() == originals[name].replace(b"\t", b" "), name
    backup = speechocean_dir / ".backup"
    assert snapshot(backup) == {name: originals[name] for name in ORIGINALS if name != "spk2age"}
    assert_valid(speechocean_dir)
    # a second run changes nothing
    fixed = snapshot(speechocean_dir)
    assert fix_data_dir(str(speechocean_dir)) == (2500, 2500, Counter())
    assert snapshot(speechocean_dir) == fixed


def lines_of(path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


@pytest.fixture
def broken(speechocean_dir):
    """The real dir broken by hand; returns (utterances fix must keep, speakers it must keep, dropped counts)."""
    d = speechocean_dir
    utts = keys(d / "utt2spk")
    speaker = dict(line.split() for line in lines_of(d / "utt2spk"))
    speakers = keys(d / "spk2gender")
    gone_speaker, ungendered = speakers[7], speakers[30]  # all its utterances taken out of utt2spk; not in spk2gender
    no_text, no_wav = [utts[0], utts[1], utts[2000]], utts[1500]
    utt2spk = [line for line in lines_of(d / "utt2spk") if line.split()[1] != gone_speaker]
    utt2spk = utt2spk[::-1]  # unsorted
    utt2spk[5] = utt2spk[5].replace("\n", "\r\n")
    utt2spk.insert(10, utt2spk[20])  # a repeated line
    utt2spk[40:40] = ["\n", "lonely\n", "   \n"]  # blank lines and a malformed one
    (d / "utt2spk").write_text("".join(utt2spk))
    text = [line for line in lines_of(d / "text") if line.split()[0] not in no_text]
    text[3] = "  " + text[3].replace("\t", " \t  ").replace("\n", " \r\n")  # stray blanks and a CR
    (d / "text").write_text("".join(text))
    (d / "wav.scp").write_text("".join(line for line in lines_of(d / "wav.scp") if not line.startswith(no_wav)))
    (d / "spk2gender").write_text("".join(line for line in lines_of(d / "spk2gender")
                                          if not line.startswith(ungendered)))
    kept = {u for u in utts if speaker[u] not in (gone_speaker, ungendered)} - {*no_text, no_wav}
    dropped = Counter({"speaker not in spk2gender": 20, "not in text": 3, "not in wav.scp": 1,
                       "duplicate key in utt2spk": 1, "malformed line in utt2spk": 1})
    assert not {*no_text, no_wav} & {u for u in utts if speaker[u] in (gone_speaker, ungendered)}
    return kept, set(speakers) - {gone_speaker, ungendered}, dropped


def test_a_broken_real_dir_is_repaired(speechocean_dir, test_data, broken, capsys):
    kept, speakers, dropped = broken
    inputs = snapshot(speechocean_dir)
    assert fix_data_dir(str(speechocean_dir)) == (2480 + 2, 2456, dropped)  # 2482: the 2 bad lines too
    assert len(kept) == 2456
    original = load_dir(str(test_data / "speechocean762" / "train"))
    fixed = load_dir(str(speechocean_dir))
    for name in ("utt2spk", "text", "wav.scp"):
        assert keys(speechocean_dir / name) == sorted(kept), name  # sorted, one line each
        assert fixed[name] == {u: original[name][u] for u in kept}, name
    assert fixed["spk2gender"] == {s: original["spk2gender"][s] for s in sorted(speakers)}  # the gone speaker too
    assert (speechocean_dir / "spk2utt").read_text() == "".join(
        f"{s} {' '.join(us)}\n" for s, us in utt2spk_to_spk2utt((u, fixed["utt2spk"][u]) for u in sorted(kept)).items())
    assert keys(speechocean_dir / "spk2utt") == sorted(speakers)
    backup = snapshot(speechocean_dir / ".backup")
    named = dict(line.split(" ", 1) for line in backup.pop("dropped_utterances").decode().splitlines())
    assert backup == {n: b for n, b in inputs.items() if n != "spk2age"}
    assert len(named) == 24 and set(named) <= set(original["utt2spk"]) - kept  # each dropped utterance named
    assert set(named.values()) == {"not in text", "not in wav.scp", "speaker not in spk2gender"}
    assert_valid(speechocean_dir)
    utt2spk = inputs["utt2spk"].decode().splitlines()
    assert utt2spk[21] == utt2spk[10] and utt2spk[41] == "lonely"
    path = speechocean_dir / "utt2spk"  # the dropped lines named by file and line on standard error
    assert capsys.readouterr().err == \
        f"{path}:22: dropped duplicate key '{utt2spk[21].split()[0]}'\n{path}:42: dropped, 1 fields\n"


def test_the_tool_reports_the_counts(speechocean_dir, broken, capsys):
    d = speechocean_dir
    assert main([str(d)]) == 0
    out, err = capsys.readouterr()
    assert out == (
        f"fix_data_dir.sh: {d}: kept 2456 of 2482 utterances (1 duplicate key in utt2spk, 1 malformed line in "
        f"utt2spk, 3 not in text, 1 not in wav.scp, 20 speaker not in spk2gender); originals in {d}/.backup\n")
    named = err.splitlines()[2:]  # after the two malformed lines', named by file and line
    assert len(named) == 11 and all(line.startswith("fix_data_dir.sh: dropped ") for line in named[:10])
    assert named[10] == f"fix_data_dir.sh: ... and 14 more, all in {d}/.backup/dropped_utterances"
    assert main([str(d)]) == 0
    assert capsys.readouterr().out == \
        f"fix_data_dir.sh: {d}: kept 2456 of 2456 utterances (nothing dropped); originals in {d}/.backup\n"


def test_a_speaker_not_in_cmvn_scp_is_dropped(speechocean_dir):
    speakers = keys(speechocean_dir / "spk2gender")
    (speechocean_dir / "cmvn.scp").write_text("".join(f"{s} cmvn.ark:{i}\n" for i, s in enumerate(speakers)
                                                      if i not in (3, 100)))
    assert fix_data_dir(str(speechocean_dir)) == (2500, 2460, Counter({"speaker not in cmvn.scp": 40}))
    assert keys(speechocean_dir / "spk2utt") == keys(speechocean_dir / "spk2gender") == \
        [s for i, s in enumerate(speakers) if i not in (3, 100)]


def test_a_side_files_line_of_another_shape_is_kept_not_dropped_with_its_utterances(tmp_path):
    """'a m  # checked' in spk2gender, 'a-1 en us' in utt2lang: Kaldi's fix filters those files by key and keeps
    such lines (its validation names them); they were dropped here, and every utterance of speaker a with them."""
    d = tmp_path / "d"
    d.mkdir()
    for name, text in (("utt2spk", "a-1 a\na-2 a\nb-1 b\n"), ("text", "a-1 X\na-2 Y\nb-1 Z\n"),
                       ("wav.scp", "a-1 /a1\na-2 /a2\nb-1 /b1\n"), ("spk2gender", "a m  # checked\nb f\n"),
                       ("utt2lang", "a-1 en us\na-2 en\nb-1 en\n")):
        (d / name).write_text(text)
    before, after, dropped = fix_data_dir(str(d))
    assert (before, after, dropped) == (3, 3, Counter())
    assert (d / "spk2gender").read_text() == "a m  # checked\nb f\n" and keys(d / "utt2spk") == ["a-1", "a-2", "b-1"]


def test_utt2uniq_and_extra_files_are_kept_to_what_is_kept(speechocean_dir):
    d = speechocean_dir
    utts = keys(d / "utt2spk")
    (d / "utt2uniq").write_text("".join(f"{u} {u[:-1]}\n" for u in utts[:100]))  # only the first 100
    (d / "utt2category").write_text("".join(f"{u} read\n" for u in utts[50:]))  # not the first 50
    (d / "text").write_text("".join(line for line in lines_of(d / "text") if not line.startswith(utts[60])))
    lines_of_spk2age = lines_of(d / "spk2age")
    dropped_speaker = keys(d / "spk2gender")[0]
    (d / "spk2gender").write_text("".join(lines_of(d / "spk2gender")[1:]))
    assert fix_data_dir(str(d), ("utt2category",), ("spk2age",)) == \
        (2500, 2479, Counter({"speaker not in spk2gender": 20, "not in text": 1}))
    # neither file drops an utterance (as Kaldi's fix): they are cut to the utterances and speakers kept
    assert keys(d / "utt2uniq") == [u for u in utts[20:100] if u != utts[60]]
    assert keys(d / "utt2category") == [u for u in utts[50:] if u != utts[60]]
    assert (d / "spk2age").read_text() == "".join(
        sorted(line.replace("\t", " ") for line in lines_of_spk2age if not line.startswith(dropped_speaker)))
    assert (d / ".backup" / "spk2age").read_text() == "".join(lines_of_spk2age)


def test_spk2age_is_left_alone_unless_named(speechocean_dir):
    d = speechocean_dir
    spk2age = (d / "spk2age").read_bytes()
    (d / "spk2gender").write_text("".join(lines_of(d / "spk2gender")[1:]))
    assert fix_data_dir(str(d))[1] == 2480
    assert (d / "spk2age").read_bytes() == spk2age  # not a file fix knows: untouched, stale speaker and all


def test_bad_values_drop_their_utterances(librispeech_dir):
    utts = keys(librispeech_dir / "utt2dur")
    durations = lines_of(librispeech_dir / "utt2dur")
    durations[2] = f"{utts[2]} 0\n"
    durations[5] = f"{utts[5]} 3.5s\n"
    (librispeech_dir / "utt2dur").write_text("".join(durations))
    assert fix_data_dir(str(librispeech_dir)) == \
        (8, 6, Counter({"bad value in utt2dur": 2, "not in utt2dur": 2}))
    for name in ("utt2spk", "text", "wav.scp", "utt2dur"):
        assert keys(librispeech_dir / name) == [u for i, u in enumerate(utts) if i not in (2, 5)], name
    assert_valid(librispeech_dir)


def test_segments_without_a_recording_and_recordings_without_segments(librispeech_dir):
    d = librispeech_dir
    recordings = keys(d / "wav.scp")
    speaker = dict(line.split() for line in (d / "utt2spk").read_text().splitlines())
    segs = [(f"{r}-{half}", r) for r in recordings for half in "ab"]
    (d / "segments").write_text("".join(f"{u} {r} {'0 1.5' if u.endswith('a') else '1.5 3'}\n" for u, r in segs))
    (d / "utt2spk").write_text("".join(f"{u} {speaker[r]}\n" for u, r in segs))
    (d / "text").write_text("".join(f"{u} WORD\n" for u, r in segs if r != recordings[6]))  # its segments go
    durations = lines_of(d / "utt2dur")  # keyed by recording here; recording 1's a bad value: its line dropped left
    durations[1] = f"{recordings[1]} 0\n"  # it without a length, which the validator refused after every fix
    (d / "reco2dur").write_text("".join(durations))
    (d / "utt2dur").unlink()
    (d / "spk2utt").unlink()
    wav = lines_of(d / "wav.scp")
    (d / "wav.scp").write_text("".join(wav[:3] + wav[4:]))  # recording 3 has segments but no audio
    assert fix_data_dir(str(d)) == (16, 10, Counter({"not in text": 2, "recording not in wav.scp": 2,
                                                     "recording not in reco2dur": 2, "bad value in reco2dur": 1}))
    assert (d / ".backup" / "dropped_utterances").read_text() == "".join(  # each one named, not only counted
        f"{r}-{half} {why}\n" for r, why in ((recordings[1], "recording not in reco2dur"),
                                             (recordings[3], "recording not in wav.scp"),
                                             (recordings[6], "not in text")) for half in "ab")
    kept = [r for i, r in enumerate(recordings) if i not in (1, 3, 6)]
    assert keys(d / "segments") == [f"{r}-{half}" for r in kept for half in "ab"]
    assert keys(d / "wav.scp") == keys(d / "reco2dur") == kept  # recording 6 left without segments
    assert_valid(d)


def test_a_dir_that_would_lose_every_utterance_is_left_as_it_was(speechocean_dir, librispeech_dir, capsys):
    d = speechocean_dir
    (d / "text").write_bytes((librispeech_dir / "text").read_bytes())  # another corpus's utterances
    inputs = snapshot(d)
    with pytest.raises(ValueError) as error:
        fix_data_dir(str(d))
    assert str(error.value) == f"{d}: no utterances would remain (2500 not in text); nothing changed"
    assert snapshot(d) == inputs  # as Kaldi's fix_data_dir.sh: it refuses rather than empty the dir
    assert main([str(d)]) == 1
    assert capsys.readouterr().err == f"fix_data_dir.sh: {d}: no utterances would remain (2500 not in text); " \
                                      "nothing changed\n"
    (d / "utt2spk").write_text("\n")
    with pytest.raises(ValueError, match="no utterances would remain \\(utt2spk is empty\\)"):
        fix_data_dir(str(d))


def test_a_dir_without_utt2spk(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="utt2spk: missing; every data dir needs utt2spk"):
        fix_data_dir(str(tmp_path))
    assert main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"fix_data_dir.sh: {tmp_path}/utt2spk: missing; every data dir needs utt2spk\n"
    assert list(tmp_path.iterdir()) == []


def test_a_byte_order_mark_is_named_once_however_often_the_table_is_read(speechocean_dir, capsys):
    """fix_data_dir.sh reads utt2spk two or three times: its mark was named as often."""
    path = speechocean_dir / "utt2spk"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert main([str(speechocean_dir)]) == 0
    assert capsys.readouterr().err.count("a byte-order mark (U+FEFF) before the first key; removed") == 1
    assert_valid(speechocean_dir)

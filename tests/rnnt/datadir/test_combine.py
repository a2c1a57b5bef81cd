"""rnnt.datadir.combine (utils/combine_data.sh): the real speechocean762 dir cut into pieces combines back to itself
(its own spk2utt byte for byte); a speaker or recording in two sources is fine when its lines agree, an utterance in
two is an error naming both files; a file not in every source is left out and named; where only some sources have
segments the others' utterances become whole-recording segments, as Kaldi's combine_data.sh makes them;
--extra-files are combined whole, the repair leaving them alone; frame_shift is copied where the sources with
features agree on it, and a disagreement is refused."""

import pytest
import soundfile

from conftest import UTILS, assert_valid, keys, run_tool
from rnnt.datadir.combine import combine, main
from rnnt.datadir.durations import seconds_text
from rnnt.datadir.layout import load_dir, write_dir


def test_combine_data_and_duplicate_keys(librispeech_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "3", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "5", second, check=True)
    combined = tmp_path / "combined"
    out = run_tool(UTILS / "combine_data.sh", combined, first, second)
    assert out.returncode == 0, out.stderr
    for name in ("wav.scp", "text", "utt2spk", "spk2utt", "utt2dur"):
        assert (combined / name).read_text() == (librispeech_dir / name).read_text(), name
    dup = run_tool(UTILS / "combine_data.sh", tmp_path / "dup", first, librispeech_dir)
    assert dup.returncode == 1 and "also in" in dup.stderr and "utt2spk" in dup.stderr
    before = {name: (first / name).read_text() for name in ("utt2spk", "utt2dur")}
    into_a_source = run_tool(UTILS / "combine_data.sh", first, first, second)  # would lose what first held
    assert into_a_source.returncode == 1, into_a_source.stderr
    assert f"combine_data.sh: {first}: the combined dir must go to another dir than its source {first}" in \
        into_a_source.stderr
    assert {name: (first / name).read_text() for name in before} == before


def test_combine_leaves_out_files_not_in_every_source(librispeech_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "4", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "4", second, check=True)
    (second / "utt2dur").unlink()
    out = run_tool(UTILS / "combine_data.sh", tmp_path / "c", first, second)
    assert out.returncode == 0 and "utt2dur is not in every source" in out.stderr
    assert not (tmp_path / "c" / "utt2dur").exists()
    assert_valid(tmp_path / "c")


def test_combine_keeps_segments_when_only_some_sources_have_them(librispeech_dir, tmp_path):
    """As Kaldi: a source without segments contributes one whole-recording segment per utterance, ending at
    its utt2dur (WeNet's reader refuses a start without an end)."""
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "3", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "5", second, check=True)
    durations = dict(line.split() for line in (first / "utt2dur").read_text().splitlines())
    (first / "segments").write_text("".join(f"{u} {u} 0.50 {float(d) - 0.5:.2f}\n"
                                            for u, d in sorted(durations.items())))
    out = run_tool(UTILS / "combine_data.sh", tmp_path / "c", first, second)
    assert out.returncode == 0, out.stderr
    segments = dict(line.split(maxsplit=1) for line in (tmp_path / "c" / "segments").read_text().splitlines())
    assert len(segments) == 8
    for utt, duration in (line.split() for line in (second / "utt2dur").read_text().splitlines()):
        assert segments[utt] == f"{utt} 0 {duration}"
    assert segments[sorted(durations)[0]].split()[:2] == [sorted(durations)[0], "0.50"]
    assert_valid(tmp_path / "c")


def pieces(src, dest, utterance_ranges) -> list[str]:
    """Writes <dest>/0, <dest>/1, ...: the utterances [a, b) of src's sorted list for each (a, b)."""
    tables = load_dir(str(src))
    utts = sorted(tables["utt2spk"])
    out = []
    for i, (a, b) in enumerate(utterance_ranges):
        write_dir(tables, set(utts[a:b]), str(dest / str(i)))
        out.append(str(dest / str(i)))
    return out


def test_pieces_of_the_real_dir_combine_back_to_it(speechocean_dir, tmp_path):
    # cut inside a speaker too (utterance 1010 is the 51st speaker's 11th): a speaker in two sources, its
    # spk2gender line the same in both
    sources = pieces(speechocean_dir, tmp_path, [(1800, 2500), (0, 1010), (1010, 1800)])
    merged = combine(sources)
    original = load_dir(str(speechocean_dir))
    assert sorted(merged) == sorted(original) == ["spk2gender", "text", "utt2spk", "wav.scp"]
    assert merged == original


def test_tool_writes_the_combined_dir(speechocean_dir, tmp_path, capsys):
    sources = pieces(speechocean_dir, tmp_path, [(0, 1010), (1010, 2500)])
    dest = tmp_path / "combined"
    assert main([str(dest), *sources]) == 0
    out = capsys.readouterr()
    assert out.out == (f"combine_data.sh: 2500 utterances from 2 dirs into {dest}; fix_data_dir.sh kept 2500 of "
                       "2500\n") and out.err == ""
    assert (dest / "spk2utt").read_bytes() == (speechocean_dir / "spk2utt").read_bytes()
    assert (dest / "utt2spk").read_bytes() == (speechocean_dir / "utt2spk").read_bytes()  # space-separated both
    for name in ("text", "wav.scp", "spk2gender"):  # tab-separated originals, written with a space
        assert (dest / name).read_text() == (speechocean_dir / name).read_text().replace("\t", " "), name
    assert_valid(dest)


def test_an_utterance_in_two_sources_names_both_files(speechocean_dir, tmp_path):
    sources = pieces(speechocean_dir, tmp_path, [(0, 100), (50, 150)])
    with pytest.raises(ValueError) as error:
        combine(sources)
    utt = keys(speechocean_dir / "utt2spk")[50]  # utt2spk first: the first duplicate found is named there
    assert str(error.value) == f"{sources[1]}/utt2spk: key '{utt}' is also in {sources[0]}/utt2spk; " \
                               "keys must be unique across dirs"


def test_a_speaker_with_two_values_keeps_the_first_and_is_named(speechocean_dir, tmp_path, capsys):
    """As Kaldi's, which keeps one: a per-speaker cmvn.scp differs between dirs of the same speakers by nature."""
    sources = pieces(speechocean_dir, tmp_path, [(0, 10), (10, 20)])  # speaker 0001 in both
    gender = tmp_path / "1" / "spk2gender"
    assert gender.read_text() == "0001 m\n"
    gender.write_text("0001 f\n")
    dest = tmp_path / "dest"
    assert main([str(dest), *sources]) == 0
    out = capsys.readouterr()
    assert out.err == f"combine_data.sh: {gender}: 0001 differs from {tmp_path / '0' / 'spk2gender'}; the first kept\n"
    assert (dest / "spk2gender").read_text() == "0001 m\n"
    assert keys(dest / "utt2spk") == keys(speechocean_dir / "utt2spk")[:20]
    assert_valid(dest)


def test_a_file_not_in_every_source_is_left_out_and_named(speechocean_dir, tmp_path, capsys):
    sources = pieces(speechocean_dir, tmp_path, [(0, 40), (40, 80), (80, 120)])
    (tmp_path / "1" / "spk2gender").unlink()
    assert "spk2gender" not in combine(sources)
    dest = tmp_path / "dest"
    assert main([str(dest), *sources]) == 0
    assert capsys.readouterr().err == (f"combine_data.sh: spk2gender is not in every source ({tmp_path / '1'} lacks "
                                       "it); left out\n")  # once, the source named (it was not)
    assert sorted(p.name for p in dest.iterdir()) == [".backup", "spk2utt", "text", "utt2spk", "wav.scp"]
    assert keys(dest / "utt2spk") == keys(speechocean_dir / "utt2spk")[:120]


def test_segments_from_some_sources_only(speechocean_dir, test_data, tmp_path, capsys):
    """A source without segments or utt2dur: its recordings' lengths measured, as Kaldi's has get_utt2dur.sh do
    (its segments ended at -1, which Kaldi's validate_data_dir.sh refuses, and Kaldi's get_utt2dur.sh then made
    utt2dur -1 of, which its fix drops); one that cannot be read ends at -1, named."""
    first, second = pieces(speechocean_dir, tmp_path, [(0, 3), (3, 5)])
    utts = keys(speechocean_dir / "utt2spk")[:5]
    # the first source's utterances cut from one long recording
    (tmp_path / "0" / "wav.scp").write_text("long WAVE/long.opus\n")
    (tmp_path / "0" / "segments").write_text("".join(f"{u} long {i} {i + 1}\n" for i, u in enumerate(utts[:3])))
    corpus = test_data / "speechocean762"
    wav = (tmp_path / "1" / "wav.scp").read_text().splitlines()  # from the corpus's root, and one not audio
    (tmp_path / "noise.wav").write_bytes(b"RIFF, but not audio")
    (tmp_path / "1" / "wav.scp").write_text(f"{utts[3]} {corpus / wav[0].split()[1]}\n{utts[4]} {tmp_path}/noise.wav\n")
    merged = combine([first, second])
    seconds = soundfile.info(str(corpus / wav[0].split()[1])).duration
    assert merged["segments"] == {utts[0]: "long 0 1", utts[1]: "long 1 2", utts[2]: "long 2 3",
                                  utts[3]: f"{utts[3]} 0 {seconds_text(seconds)}", utts[4]: f"{utts[4]} 0 -1"}
    assert list(merged["wav.scp"]) == ["long", utts[3], utts[4]]
    assert capsys.readouterr().err.startswith(f"combine_data.sh: {tmp_path}/1/wav.scp:2: {utts[4]}: ")


def test_a_source_whose_utt2dur_lacks_some_utterances_has_those_measured(speechocean_dir, test_data, tmp_path, capsys):
    """They became '<utt> <utt> 0 -1' segments in silence (Kaldi's drops them); the rest keep utt2dur's value."""
    first, second = pieces(speechocean_dir, tmp_path, [(0, 1), (1, 3)])
    utts = keys(speechocean_dir / "utt2spk")[:3]
    (tmp_path / "0" / "segments").write_text(f"{utts[0]} {utts[0]} 0 1\n")
    (tmp_path / "1" / "utt2dur").write_text(f"{utts[1]} 2.5\n")
    wav = tmp_path / "1" / "wav.scp"  # (from the corpus's root)
    wav.write_text("".join(f"{utt} {test_data / 'speechocean762' / path}\n"
                           for utt, path in (line.split() for line in wav.read_text().splitlines())))
    merged = combine([first, second])
    seconds = soundfile.info(wav.read_text().splitlines()[1].split()[1]).duration
    assert merged["segments"][utts[1]] == f"{utts[1]} 0 2.5"
    assert merged["segments"][utts[2]] == f"{utts[2]} 0 {seconds_text(seconds)}"
    assert capsys.readouterr().err == (f"combine_data.sh: {second}/utt2dur lacks 1 of its utterances; their lengths "
                                       "measured from the audio\n")


def test_a_source_without_utt2spk(speechocean_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty/utt2spk: missing; every data dir needs utt2spk"):
        combine([str(speechocean_dir), str(tmp_path / "empty")])
    assert main([str(tmp_path / "dest"), str(speechocean_dir), str(tmp_path / "empty")]) == 1
    assert capsys.readouterr().err == f"combine_data.sh: {tmp_path}/empty/utt2spk: missing; every data dir " \
                                      "needs utt2spk\n"


def test_the_combined_dir_is_fixed_unless_asked_not_to(speechocean_dir, tmp_path):
    """As Kaldi's combine_data.sh: fix_data_dir.sh runs last, so an utterance a source's text lacks is dropped and
    the result validates; --skip-fix true leaves the dir as combined."""
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", speechocean_dir, "4", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", speechocean_dir, "4", second, check=True)
    text = (second / "text").read_text().splitlines(keepends=True)
    lost = text[1].split()[0]
    (second / "text").write_text("".join(text[:1] + text[2:]))
    out = run_tool(UTILS / "combine_data.sh", tmp_path / "fixed", first, second)
    assert out.returncode == 0, out.stderr
    assert "8 utterances from 2 dirs" in out.stdout and "fix_data_dir.sh kept 7 of 8 (1 not in text)" in out.stdout
    assert lost not in keys(tmp_path / "fixed" / "utt2spk") and len(keys(tmp_path / "fixed" / "utt2spk")) == 7
    assert_valid(tmp_path / "fixed")
    raw = run_tool(UTILS / "combine_data.sh", "--skip-fix", "true", tmp_path / "raw", first, second)
    assert raw.returncode == 0 and "fix_data_dir" not in raw.stdout
    assert lost in keys(tmp_path / "raw" / "utt2spk") and lost not in keys(tmp_path / "raw" / "text")


def test_utt2uniq_of_some_sources_and_what_an_earlier_run_left_in_dest(speechocean_dir, tmp_path, capsys):
    """As Kaldi's: a source without utt2uniq gives each utterance itself as its original; the dest starts
    clean, so a feats.scp an earlier combination left there neither stays nor cuts this one to nothing."""
    sources = pieces(speechocean_dir, tmp_path, [(0, 2), (2, 4)])
    first = keys(speechocean_dir / "utt2spk")[:2]
    (tmp_path / "0" / "utt2uniq").write_text("".join(f"{u} orig{i}\n" for i, u in enumerate(first)))
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "feats.scp").write_text("old-u1 /old.ark:1\n")
    assert main([str(dest), *sources]) == 0, capsys.readouterr().err
    rows = dict(line.split() for line in (dest / "utt2uniq").read_text().splitlines())
    assert rows == {**{u: f"orig{i}" for i, u in enumerate(first)},
                    **{u: u for u in keys(speechocean_dir / "utt2spk")[2:4]}}
    assert not (dest / "feats.scp").exists() and keys(dest / "utt2spk") == keys(speechocean_dir / "utt2spk")[:4]


def test_extra_files_are_combined_whole(speechocean_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", speechocean_dir, "30", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", speechocean_dir, "25", second, check=True)
    ages = dict(line.split() for line in (speechocean_dir / "spk2age").read_text().splitlines())
    for d in (first, second):  # spk2age, a file Kaldi's dirs do not know, keyed by speaker (2 and 2 speakers)
        (d / "spk2age").write_text("".join(f"{s} {ages[s]}\n" for s in keys(d / "spk2utt")))
    (first / "utt2score").write_text("".join(f"{u} 7\n" for u in keys(first / "utt2spk")))
    (second / "utt2score").write_text("".join(f"{u} 9\n" for u in keys(second / "utt2spk")))
    dest = tmp_path / "c"
    assert main(["--extra-files", "spk2age utt2score utt2uniq", str(dest), str(first), str(second)]) == 0
    speakers = keys(first / "spk2utt") + keys(second / "spk2utt")
    assert (dest / "spk2age").read_text() == "".join(f"{s} {ages[s]}\n" for s in speakers)
    assert len(keys(dest / "utt2score")) == 55 and keys(dest / "utt2score") == keys(dest / "utt2spk")
    assert not (dest / "utt2uniq").exists()  # as Kaldi's: named as extra, utt2uniq keeps its own rule
    (second / "spk2age").unlink()
    assert main(["--extra-files", "spk2age", str(dest), str(first), str(second)]) == 0
    assert not (dest / "spk2age").exists()  # not in every source: left out, and the earlier run's copy removed
    assert_valid(dest)


def test_frame_shift_is_copied_where_sources_with_features_agree(librispeech_dir, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    run_tool(UTILS / "subset_data_dir.sh", "--first", librispeech_dir, "3", first, check=True)
    run_tool(UTILS / "subset_data_dir.sh", "--last", librispeech_dir, "5", second, check=True)
    for d, shift in ((first, "0.01\n"), (second, "0.03\n")):
        (d / "frame_shift").write_text(shift)
    dest = tmp_path / "c"
    assert main([str(dest), str(first), str(second)]) == 0
    assert not (dest / "frame_shift").exists()  # as Kaldi's: only the frame shift of features is carried
    for d in (first, second):
        (d / "feats.scp").write_text("".join(f"{u} feats.ark:{i}\n" for i, u in enumerate(keys(d / "utt2spk"))))
    assert main([str(dest), str(first), str(second)]) == 1
    assert capsys.readouterr().err == (f"combine_data.sh: {second}/frame_shift differs from {first}/frame_shift; "
                                       "features with different frame shifts cannot be combined\n")
    (second / "frame_shift").write_text("0.01\n")
    assert main([str(dest), str(first), str(second)]) == 0
    assert (dest / "frame_shift").read_text() == "0.01\n" and len(keys(dest / "feats.scp")) == 8


def test_a_recording_id_of_two_files_is_an_error(speechocean_dir, tmp_path):
    """Kept first, one source's segments would have been given the other source's audio."""
    sources = pieces(speechocean_dir, tmp_path, [(0, 10), (10, 20)])
    wav = tmp_path / "1" / "wav.scp"
    key = wav.read_text().split()[0]
    (tmp_path / "0" / "wav.scp").write_text((tmp_path / "0" / "wav.scp").read_text() + f"{key} /elsewhere.wav\n")
    with pytest.raises(ValueError, match=rf"/1/wav.scp: key '{key}' is also in .*/0/wav.scp"):
        combine(sources)

"""rnnt.datadir.copy_dir (utils/copy_data_dir.sh): a copy with prefixes or suffixes writes the files Kaldi's
copy_data_dir.sh writes (checked side by side with Kaldi's script on these dirs; the lines below are its output):
utterance and speaker ids renamed everywhere, recordings kept where there are segments, utt2uniq back to the
originals; the real speechocean762 dir copies to a valid dir; a value starting with '-' is read as Kaldi's option
parser reads it; an earlier copy's file the source lacks goes to .backup; copying a dir onto itself is refused."""

from conftest import UTILS, keys, run_tool
from rnnt.datadir.copy_dir import main


def small_dir(d, segmented: bool):
    """Speakers a and b: utterances a-1, a-2, b-1; with segments, recordings ra and rb cut into them."""
    d.mkdir()
    (d / "utt2spk").write_text("a-1 a\na-2 a\nb-1 b\n")
    (d / "spk2utt").write_text("a a-1 a-2\nb b-1\n")
    (d / "text").write_text("a-1 YES NO\na-2 NO\nb-1 YES\n")
    (d / "spk2gender").write_text("a f\nb m\n")
    (d / "frame_shift").write_text("0.01\n")
    if segmented:
        (d / "segments").write_text("a-1 ra 0 1.5\na-2 ra 1.5 3\nb-1 rb 0 2\n")
        (d / "wav.scp").write_text("ra /audio/ra.wav\nrb /audio/rb.wav\n")
        (d / "reco2dur").write_text("ra 3.0\nrb 2.0\n")
    else:
        (d / "wav.scp").write_text("a-1 /audio/a-1.wav\na-2 /audio/a-2.wav\nb-1 /audio/b-1.wav\n")
        (d / "utt2dur").write_text("a-1 1.5\na-2 1.5\nb-1 2.0\n")
    return d


def test_prefixes_rename_utterances_and_speakers_as_kaldis(tmp_path, capsys):
    src, dest = small_dir(tmp_path / "src", segmented=False), tmp_path / "dest"
    assert main(["--utt-prefix", "sp0.9-", "--spk-prefix", "sp0.9-", str(src), str(dest)]) == 0
    assert capsys.readouterr().out == (f"copy_data_dir.sh: copied 3 utterances from {src} to {dest}\n"
                                       f"validate_data_dir.sh: {dest} is valid (3 utterances)\n")
    assert (dest / "utt2spk").read_text() == "sp0.9-a-1 sp0.9-a\nsp0.9-a-2 sp0.9-a\nsp0.9-b-1 sp0.9-b\n"
    assert (dest / "spk2utt").read_text() == "sp0.9-a sp0.9-a-1 sp0.9-a-2\nsp0.9-b sp0.9-b-1\n"
    assert (dest / "wav.scp").read_text() == ("sp0.9-a-1 /audio/a-1.wav\nsp0.9-a-2 /audio/a-2.wav\n"
                                              "sp0.9-b-1 /audio/b-1.wav\n")  # no segments: recordings renamed too
    assert (dest / "text").read_text() == "sp0.9-a-1 YES NO\nsp0.9-a-2 NO\nsp0.9-b-1 YES\n"
    assert (dest / "utt2dur").read_text() == "sp0.9-a-1 1.5\nsp0.9-a-2 1.5\nsp0.9-b-1 2.0\n"
    assert (dest / "spk2gender").read_text() == "sp0.9-a f\nsp0.9-b m\n"
    assert (dest / "utt2uniq").read_text() == "sp0.9-a-1 a-1\nsp0.9-a-2 a-2\nsp0.9-b-1 b-1\n"
    assert (dest / "frame_shift").read_text() == "0.01\n"


def test_a_line_of_no_utterance_or_speaker_of_utt2spk_is_named_and_left_out(tmp_path, capsys):
    """Kaldi's copy fails on it (apply_map.pl: undefined key); it was left out in silence, the copy 'valid'."""
    src, dest = small_dir(tmp_path / "src", segmented=False), tmp_path / "dest"
    (src / "text").write_text("a-1 YES NO\na-2 NO\nb-1 YES\nq-9 ORPHAN\n")
    (src / "spk2gender").write_text("a f\nb m\nz m\n")
    assert main([str(src), str(dest)]) == 0
    assert capsys.readouterr().err == (f"copy_data_dir.sh: {src}/text: q-9: not an utterance of utt2spk; left out "
                                       f"of the copy\ncopy_data_dir.sh: {src}/spk2gender: z: not a speaker of "
                                       "utt2spk; left out of the copy\n")
    assert keys(dest / "text") == ["a-1", "a-2", "b-1"]


def test_suffixes_with_segments_keep_the_recordings(tmp_path):
    src, dest = small_dir(tmp_path / "src", segmented=True), tmp_path / "dest"
    out = run_tool(UTILS / "copy_data_dir.sh", "--utt-suffix", "-x", "--spk-suffix", "-x", src, dest)
    assert out.returncode == 0, out.stderr  # '-x' is the suffix, not an option, as Kaldi's parse_options reads it
    assert (dest / "segments").read_text() == "a-1-x ra 0 1.5\na-2-x ra 1.5 3\nb-1-x rb 0 2\n"
    for name in ("wav.scp", "reco2dur"):
        assert (dest / name).read_text() == (src / name).read_text()
    assert (dest / "utt2spk").read_text() == "a-1-x a-x\na-2-x a-x\nb-1-x b-x\n"
    assert (dest / "utt2uniq").read_text() == "a-1-x a-1\na-2-x a-2\nb-1-x b-1\n"


def test_an_existing_utt2uniq_keeps_its_originals_and_a_plain_copy_adds_none(tmp_path):
    src = small_dir(tmp_path / "src", segmented=False)
    (src / "utt2uniq").write_text("a-1 orig-1\na-2 orig-2\nb-1 orig-3\n")
    assert main(["--utt-prefix", "p-", "--spk-prefix", "p-", str(src), str(tmp_path / "d1")]) == 0
    assert (tmp_path / "d1" / "utt2uniq").read_text() == "p-a-1 orig-1\np-a-2 orig-2\np-b-1 orig-3\n"
    (src / "utt2uniq").unlink()
    assert main([str(src), str(tmp_path / "d2")]) == 0
    assert not (tmp_path / "d2" / "utt2uniq").exists()
    for name in ("utt2spk", "spk2utt", "text", "wav.scp", "utt2dur", "spk2gender"):
        assert (tmp_path / "d2" / name).read_text() == (src / name).read_text()


def test_real_dir_copies_valid_and_stale_files_are_set_aside(speechocean_dir, tmp_path, capsys):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "feats.scp").write_text("old 1\n")
    assert main(["--utt-prefix", "sp1.1-", "--spk-prefix", "sp1.1-", "--validate-opts", "--no-spk-sort",
                 str(speechocean_dir), str(dest)]) == 0
    assert (dest / ".backup" / "feats.scp").read_text() == "old 1\n" and not (dest / "feats.scp").exists()
    assert "moved to" in capsys.readouterr().err
    assert keys(dest / "utt2spk") == [f"sp1.1-{u}" for u in keys(speechocean_dir / "utt2spk")]
    assert keys(dest / "spk2gender") == [f"sp1.1-{s}" for s in keys(speechocean_dir / "spk2gender")]
    assert [line.split(maxsplit=1)[1] for line in (dest / "text").read_text().splitlines()] == \
        [line.split(maxsplit=1)[1] for line in (speechocean_dir / "text").read_text().splitlines()]


def test_refusals(tmp_path, capsys):
    src = small_dir(tmp_path / "src", segmented=False)
    assert main([str(src), str(src)]) == 1
    assert capsys.readouterr().err == \
        f"copy_data_dir.sh: {src}: the copy must go to another dir than its source {src}\n"
    assert main([str(tmp_path), str(tmp_path / "d")]) == 1
    assert capsys.readouterr().err == f"copy_data_dir.sh: {tmp_path}/utt2spk: missing; every data dir needs utt2spk\n"
    (tmp_path / "file").write_text("")
    assert main([str(src), str(tmp_path / "file")]) == 1
    assert capsys.readouterr().err == f"copy_data_dir.sh: {tmp_path}/file: exists and is not a directory\n"

"""rnnt.prep.data_dir_writer on real recordings: what it skips, and what an earlier run left in its dirs."""

import numpy as np
import soundfile

from conftest import assert_valid, keys, write_flac_of_no_length
from rnnt.prep.data_dir_writer import Report, Utterance, write_data_dirs


def yesno(test_data, n: int) -> list[Utterance]:
    waves = sorted((test_data / "waves_yesno").glob("*.wav"))[:n]
    return [Utterance(f"a-{w.stem}", "a", str(w), " ".join("YES" if d == "1" else "NO" for d in w.stem.split("_")))
            for w in waves]


def test_audio_too_short_for_utt2dur_or_of_no_length_is_skipped_and_counted_the_rest_written(test_data, tmp_path,
                                                                                             capsys):
    """4 samples at 16 kHz: a header that reads, a duration utt2dur writes as 0.000, which the validator refuses:
    the whole prep failed, the good utterances lost. A FLAC written to a pipe: utt2dur had 1.15e15 s. A WAV cut
    short: its first 1.87 s went with the transcript of all 6.11 s."""
    short, piped, cut = tmp_path / "b.wav", tmp_path / "c.flac", tmp_path / "d.wav"
    soundfile.write(short, np.zeros(4), 16000)
    write_flac_of_no_length(piped, np.zeros(1600), 16000)
    cut.write_bytes(open(yesno(test_data, 3)[2].audio, "rb").read()[:30000])  # a copy cut short: 1.87 of 6.11 s
    dest = tmp_path / "train"
    bad = [Utterance("b-1", "b", str(short), "YES"), Utterance("c-1", "c", str(piped), "NO"),
           Utterance("d-1", "d", str(cut), "YES")]
    assert write_data_dirs({str(dest): yesno(test_data, 2) + bad}, Report("prep")) == 0
    assert keys(dest / "utt2spk") == [u.utt_id for u in yesno(test_data, 2)]
    err = capsys.readouterr().err
    assert f"{short} (b-1): audio under 0.5 ms (utt2dur would say 0.000 s, which Kaldi's validator refuses)" in err
    assert f"{piped} (c-1): its FLAC header gives no length (written to a pipe?); encode it again to a file" in err
    assert f"{cut} (d-1): cut short: its header gives 6.11 s of audio, the file holds 1.87 s" in err
    assert_valid(dest)


def test_a_sphere_flac_or_ogg_file_cut_short_is_skipped_as_a_wav_is(test_data, tmp_path, capsys):
    """Only a WAV was checked: a SPHERE (AN4's own format) or Opus file cut to a third kept its whole transcript on
    a third of its audio, and a FLAC so cut kept the header's length, its end undecodable (shards copied it)."""
    samples, rate = soundfile.read(yesno(test_data, 1)[0].audio, dtype="int16")
    cuts = []
    for name, options in (("e.sph", {"format": "NIST"}), ("f.flac", {}), ("g.opus", {"format": "OGG",
                                                                                   "subtype": "OPUS"})):
        whole = tmp_path / f"whole-{name}"
        soundfile.write(whole, samples, rate, **options)
        data = whole.read_bytes()
        (tmp_path / name).write_bytes(data[:len(data) // 3])
        cuts.append(Utterance(f"{name[0]}-1", name[0], str(tmp_path / name), "YES"))
        cuts.append(Utterance(f"{name[0]}-2", name[0], str(whole), "YES"))  # whole: kept
    dest = tmp_path / "train"
    assert write_data_dirs({str(dest): cuts}, Report("prep")) == 0
    assert keys(dest / "utt2spk") == ["e-2", "f-2", "g-2"]
    err, seconds = capsys.readouterr().err, f"{len(samples) / rate:.2f}"
    assert f"{tmp_path / 'e.sph'} (e-1): cut short: its header gives {seconds} s of audio, the file holds 2." in err
    assert f"{tmp_path / 'f.flac'} (f-1): cut short: its header gives {seconds} s of audio, its end does not " \
        "decode" in err
    assert f"{tmp_path / 'g.opus'} (g-1): cut short: its Ogg stream ends without its last page" in err
    assert_valid(dest)


def test_a_dir_written_again_keeps_none_of_the_earlier_runs_files(test_data, tmp_path):
    """The first run wrote spk2gender; the second has no genders and another speaker: the old file named a
    speaker the dir no longer has, and the validator refused the new dir."""
    dest = tmp_path / "train"
    write_data_dirs({str(dest): yesno(test_data, 2)}, Report("prep"), spk2gender={"a": "f"})
    assert (dest / "spk2gender").read_text() == "a f\n"
    again = [Utterance(u.utt_id.replace("a-", "c-"), "c", u.audio, u.text) for u in yesno(test_data, 3)]
    assert write_data_dirs({str(dest): again}, Report("prep")) == 0
    assert not (dest / "spk2gender").exists() and keys(dest / "spk2utt") == ["c"]
    assert_valid(dest)


def test_a_set_left_without_usable_audio_writes_no_dir_of_the_run(test_data, tmp_path, capsys):
    """A dev set of one recording that turns out unreadable: train/ was written, then the run failed, leaving
    this run's train/ beside an earlier run's dev/. Every set is checked before any is written."""
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"not audio at all")
    dev = [Utterance("b-1", "b", str(broken), "YES")]
    dirs = {str(tmp_path / "train"): yesno(test_data, 3), str(tmp_path / "dev"): dev}
    assert write_data_dirs(dirs, Report("prep")) == 1
    assert not (tmp_path / "train").exists() and not (tmp_path / "dev").exists()
    assert f"{tmp_path / 'dev'}: no usable utterances (1 unreadable or empty audio); no data dir written" in \
        capsys.readouterr().err


def test_a_set_whose_every_file_was_skipped_before_the_split_says_what_was(test_data, tmp_path, capsys):
    """A corpus whose every file a tool skipped before splitting it (audio not found): 'train: no usable utterances
    (nothing skipped)', of the two sets, said nothing of why."""
    report = Report("prep")
    for n in range(3):
        report.skip("audio not found", f"corpus.list:{n + 1}")
    assert write_data_dirs({str(tmp_path / "train"): [], str(tmp_path / "dev"): []}, report) == 1
    assert f"{tmp_path / 'train'}: no usable utterances (nothing skipped; skipped in all: 3 audio not found); no " \
        "data dir written" in capsys.readouterr().err

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
    assert f"{short} (b-1): unreadable or empty audio" in err
    assert f"{piped} (c-1): its FLAC header gives no length (written to a pipe?); encode it again to a file" in err
    assert f"{cut} (d-1): cut short: its header gives 6.11 s of audio, the file holds 1.87 s" in err
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

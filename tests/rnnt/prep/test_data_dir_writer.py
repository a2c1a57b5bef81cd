"""rnnt.prep.data_dir_writer on real recordings: what it skips, and what an earlier run left in its dirs."""

import numpy as np
import soundfile

from conftest import assert_valid, keys
from rnnt.prep.data_dir_writer import Report, Utterance, write_data_dirs


def yesno(test_data, n: int) -> list[Utterance]:
    waves = sorted((test_data / "waves_yesno").glob("*.wav"))[:n]
    return [Utterance(f"a-{w.stem}", "a", str(w), " ".join("YES" if d == "1" else "NO" for d in w.stem.split("_")))
            for w in waves]


def test_audio_too_short_for_utt2dur_is_skipped_and_counted_the_rest_written(test_data, tmp_path, capsys):
    """4 samples at 16 kHz: a header that reads, a duration utt2dur writes as 0.000, which the validator refuses:
    the whole prep failed, the good utterances lost."""
    short = tmp_path / "b.wav"
    soundfile.write(short, np.zeros(4), 16000)
    dest = tmp_path / "train"
    assert write_data_dirs({str(dest): yesno(test_data, 2) + [Utterance("b-1", "b", str(short), "YES")]},
                           Report("prep")) == 0
    assert keys(dest / "utt2spk") == [u.utt_id for u in yesno(test_data, 2)]
    assert f"{short} (b-1)" in capsys.readouterr().err
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

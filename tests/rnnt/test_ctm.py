"""rnnt.ctm: word times as Kaldi's CTM, in utterance times without segments and in the recordings' times with
them (Kaldi's utils/ctm/convert_ctm.pl's own test vector among them)."""

import pytest

from rnnt.ctm import recording_offsets, write_ctm


def test_without_segments_each_utterance_is_a_file_on_channel_1_sorted(tmp_path):
    words = {"u2": [{"word": "NO", "start": 0.3, "end": 0.66}],
             "u1": [{"word": "YES", "start": 1.2, "end": 1.5}, {"word": "NO", "start": 0.0, "end": 0.333}],
             "u3": []}
    assert write_ctm(str(tmp_path / "ctm"), words, str(tmp_path)) == []
    assert (tmp_path / "ctm").read_text() == "u1 1 0.00 0.33 NO\nu1 1 1.20 0.30 YES\nu2 1 0.30 0.36 NO\n"


def test_segments_give_recording_times_and_reco2file_and_channel_the_file_and_channel(tmp_path):
    (tmp_path / "segments").write_text("utt reco 10.0 20.0\nother reco2 2.5 4\n")
    (tmp_path / "reco2file_and_channel").write_text("reco file A\n")
    # convert_ctm.pl's test: 'utt 1 8.0 1.0 word' in utterance times is 'file A 18.00 1.00 word'
    words = {"utt": [{"word": "word", "start": 8.0, "end": 9.0}], "other": [{"word": "hi", "start": 0.25, "end": 1.0}],
             "stray": [{"word": "lost", "start": 0.0, "end": 1.0}]}
    assert write_ctm(str(tmp_path / "ctm"), words, str(tmp_path)) == ["stray"]
    assert (tmp_path / "ctm").read_text() == "file A 18.00 1.00 word\nreco2 1 2.75 0.75 hi\n"


def test_a_bad_segments_or_reco2file_and_channel_line_is_named(tmp_path):
    (tmp_path / "segments").write_text("utt reco zero 20.0\n")
    with pytest.raises(ValueError, match=f"^{tmp_path}/segments:1: the start time 'zero' is not a number"):
        recording_offsets(str(tmp_path))
    (tmp_path / "segments").write_text("utt reco 0 20.0\n")
    (tmp_path / "reco2file_and_channel").write_text("reco file\n")
    with pytest.raises(ValueError, match=f"^{tmp_path}/reco2file_and_channel:1: expected '<recording> <file>"):
        recording_offsets(str(tmp_path))

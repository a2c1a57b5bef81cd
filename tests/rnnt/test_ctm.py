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
    # a word on a last frame of under 5 ms inside the audio (6.184 s at 60 ms frames: a word of 6.18 to 6.184 s)
    assert write_ctm(str(tmp_path / "ctm"), {"u": [{"word": "NO", "start": 6.18, "end": 6.184}]}, str(tmp_path)) == []
    assert (tmp_path / "ctm").read_text() == "u 1 6.18 0.01 NO\n"  # not 0.00: a word of no time


def test_segments_give_recording_times_and_reco2file_and_channel_the_file_and_channel(tmp_path):
    (tmp_path / "segments").write_text("utt reco 10.0 20.0\nother reco2 2.5 4\n")
    (tmp_path / "reco2file_and_channel").write_text("reco file A\n")
    # convert_ctm.pl's test: 'utt 1 8.0 1.0 word' in utterance times is 'file A 18.00 1.00 word'
    words = {"utt": [{"word": "word", "start": 8.0, "end": 9.0}], "other": [{"word": "hi", "start": 0.25, "end": 1.0}],
             "stray": [{"word": "lost", "start": 0.0, "end": 1.0}]}
    assert write_ctm(str(tmp_path / "ctm"), words, str(tmp_path)) == ["other", "stray"]  # reco2: not in the file
    assert (tmp_path / "ctm").read_text() == "file A 18.00 1.00 word\n"
    (tmp_path / "reco2file_and_channel").unlink()  # none: each recording is its own file, on channel 1
    assert write_ctm(str(tmp_path / "ctm"), words, str(tmp_path)) == ["stray"]
    assert (tmp_path / "ctm").read_text() == "reco 1 18.00 1.00 word\nreco2 1 2.75 0.75 hi\n"


def test_a_bad_segments_or_reco2file_and_channel_line_is_named_and_only_its_utterance_left_out(tmp_path, capsys):
    """The decode used to fail after decoding everything (no ctm, no nbest.json) on one such line."""
    (tmp_path / "segments").write_text("bad reco zero 20.0\nshort reco 1.0\nutt reco 10.0 20.0\nutt2 reco2 1 2\n")
    (tmp_path / "reco2file_and_channel").write_text("reco file A\nreco2 file\n")
    assert recording_offsets(str(tmp_path)) == {"utt": ("file", "A", 10.0)}  # utt2's recording: its line is bad
    err = capsys.readouterr().err
    assert f"{tmp_path}/segments:4: utt2: recording reco2 is not in {tmp_path}/reco2file_and_channel; left out" in err
    assert f"{tmp_path}/segments:1: bad: start 'zero' or end '20.0' is not a number; left out" in err
    assert f"{tmp_path}/segments:2: expected '<utt> <recording> <start> <end>', got 'short reco 1.0'; left out" in err
    assert f"{tmp_path}/reco2file_and_channel:2: expected '<recording> <file> <channel>', got 'reco2 file'" in err
    words = {key: [{"word": "hi", "start": 0.0, "end": 0.5}] for key in ("bad", "short", "utt")}
    assert write_ctm(str(tmp_path / "ctm"), words, str(tmp_path)) == ["bad", "short"]
    assert (tmp_path / "ctm").read_text() == "file A 10.00 0.50 hi\n"


@pytest.mark.parametrize("rate,shift", [(16000, 160), (8000, 80), (22050, 220), (11025, 110)])
def test_a_frame_lasts_its_shift_in_whole_samples_as_the_features_take_it(rate, shift):
    """The ctm's and transcribe.py's times: at 22050 Hz a 10 ms shift is 220 samples, 9.977 ms; at the nominal
    10 ms every time ran 0.23% late (8 s an hour); the frames of an hour of audio end at the hour."""
    import dataclasses

    from rnnt.data.features import num_frames
    from rnnt.training.experiment import load_experiment
    from rnnt.transcriber import seconds_per_encoder_frame, seconds_per_input_frame
    from conftest import ROOT

    experiment = load_experiment(str(ROOT / "egs" / "an4" / "conf" / "ci.yaml"))
    experiment = dataclasses.replace(experiment, data=dataclasses.replace(experiment.data, sample_rate=rate))
    subsample = experiment.data.subsample
    assert seconds_per_input_frame(experiment) == shift / rate * subsample
    assert seconds_per_encoder_frame(experiment) == shift / rate * subsample * experiment.model.encoder.time_reduction
    hour = 3600 * rate
    frames = -(-num_frames(hour, rate, experiment.data.features.preset) // subsample)
    assert abs(frames * seconds_per_input_frame(experiment) - 3600) < 0.1


def test_a_start_past_the_audio_is_the_last_frame_that_starts_inside_it():
    """Frames of 60 ms over 1 s of audio: frames 15 and 16 start at 0.90 and 0.96; one past the end was put at
    1.00 - 0.06 = 0.94, before frame 16 (times running backwards)."""
    from rnnt.ctm import start_within

    starts = [start_within(frame * 0.06, 1.0, 0.06) for frame in (15, 16, 17, 18)]
    assert [round(s, 3) for s in starts] == [0.9, 0.96, 0.96, 0.96]
    assert start_within(0.5, 0.48, 0.04) == pytest.approx(0.44)  # a frame that divides the duration: its last
    assert start_within(0.1, 0.01, 0.04) == 0.0


def test_a_recording_reco2file_and_channel_lacks_is_named_and_its_utterances_left_out(tmp_path, capsys):
    """It fell back to '<recording> 1' beside the NIST file names of the others, in silence: sclite matched none of
    its lines to the reference (Kaldi's validate_data_dir.sh refuses such a file)."""
    (tmp_path / "segments").write_text("a recA 0.1 0.5\nb recB 0.1 0.5\n")
    (tmp_path / "reco2file_and_channel").write_text("recA sw02001 A\n")
    assert recording_offsets(str(tmp_path)) == {"a": ("sw02001", "A", 0.1)}
    assert f"{tmp_path}/segments:2: b: recording recB is not in {tmp_path}/reco2file_and_channel; left out" in \
        capsys.readouterr().err

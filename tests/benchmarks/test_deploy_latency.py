"""benchmarks/deploy.py's speech onset, which its streaming latency counts from, on real AN4 recordings."""

import sys

import pytest
import soundfile as sf

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from deploy import speech_start  # noqa: E402


def an4_test_recording(test_data, speaker: str, name: str):
    samples, rate = sf.read(test_data / "an4" / "wav" / "an4test_clstk" / speaker / f"{name}.flac", dtype="float32")
    return samples, rate


def test_a_click_before_the_speaker_is_not_where_speech_starts(test_data):
    # "NO": the recording opens with a click 30 dB over the noise floor, silence, then the word at 0.32 s
    samples, rate = an4_test_recording(test_data, "mdms2", "an402-mdms2-b")
    assert speech_start(samples, rate, sustained=1) == 0.0  # one loud frame: the click
    assert 0.28 <= speech_start(samples, rate) <= 0.40


def test_speech_with_no_click_starts_where_its_first_loud_frame_is(test_data):
    # "P I T T S B U R G H": quiet until the P at about 0.3 s; the onset is the first loud frame either way
    samples, rate = an4_test_recording(test_data, "mjgm", "cen5-mjgm-b")
    first_loud = speech_start(samples, rate, sustained=1)
    assert 0.2 <= first_loud <= 0.4
    assert speech_start(samples, rate) == pytest.approx(first_loud, abs=0.02)

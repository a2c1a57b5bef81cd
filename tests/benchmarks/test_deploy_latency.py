"""benchmarks/deploy.py's speech onset, which its streaming latency counts from, on real AN4 recordings.

AN4's recordings often open with a click or a breath a third of a second or more before the speaker: loud
enough for an energy rule, unvoiced, and followed by silence."""

import sys

import numpy as np
import pytest
import soundfile as sf

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from deploy import frame_voicing, speech_start  # noqa: E402


def an4_recording(test_data, part: str, speaker: str, name: str):
    samples, rate = sf.read(test_data / "an4" / "wav" / part / speaker / f"{name}.flac", dtype="float32")
    return samples, rate


def test_a_click_before_the_speaker_is_not_where_speech_starts(test_data):
    # "NO": the recording opens with a click 30 dB over the noise floor, silence, then the word at 0.32 s
    samples, rate = an4_recording(test_data, "an4test_clstk", "mdms2", "an402-mdms2-b")
    assert 0.28 <= speech_start(samples, rate) <= 0.40


def test_a_breath_before_the_speaker_is_not_where_speech_starts(test_data):
    # "P I T T S B U R G H": a noise at 0.30 s (12 dB under the loudest, 150 ms, unvoiced), silence, and
    # the P's burst at 0.94 s; loudness alone takes the noise for the start
    samples, rate = an4_recording(test_data, "an4test_clstk", "mjgm", "cen5-mjgm-b")
    assert 0.88 <= speech_start(samples, rate) <= 0.98
    assert 0.25 <= speech_start(samples, rate, voiced=0.0) <= 0.35
    voicing = frame_voicing(samples, rate)
    assert voicing[30:40].max() < 0.5 and voicing[102:108].min() > 0.9  # the noise, then the vowel of P


def test_an_unvoiced_first_sound_counts_as_speech(test_data):
    # "SIX SEVENTEEN THIRTY SIX": the S hisses from 0.71 s, the I is voiced from about 0.87 s
    samples, rate = an4_recording(test_data, "an4_clstk", "fplp", "cen8-fplp-b")
    voiced_onset = speech_start(samples, rate, above_floor=float("inf"))
    start = speech_start(samples, rate)
    assert 0.65 <= start <= 0.76
    assert voiced_onset - start >= 0.1


def test_voicing_is_near_one_on_a_vowel_and_low_on_silence(test_data):
    samples, rate = an4_recording(test_data, "an4test_clstk", "mdms2", "an402-mdms2-b")
    voicing = frame_voicing(samples, rate)
    assert len(voicing) == pytest.approx(len(samples) / rate * 100, abs=5)
    assert voicing[5:25].max() < 0.7  # the silence after the click
    assert voicing[42:66].min() > 0.75  # the O of NO


def test_voicing_and_energy_frames_line_up_on_a_tone_that_starts_at_half_a_second():
    rate = 16000
    t = np.arange(rate) / rate
    noise = np.random.default_rng(0).normal(0, 1e-4, rate)
    tone = np.where(t >= 0.5, 0.3 * np.sin(2 * np.pi * 150 * t), 0.0) + noise
    assert speech_start(tone.astype(np.float32), rate) == pytest.approx(0.5, abs=0.015)
    assert speech_start(np.zeros(0, dtype=np.float32), rate) == 0.0  # too short for a frame: no crash

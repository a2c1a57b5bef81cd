"""rnnt.data.noise: noise mixed in at the SNR drawn, reverberation by a room's impulse response, the lists'
bad lines named, and the training pipeline augmenting each utterance as its own generator draws (real speech:
yesno's, with Free Spoken Digits' speakers as babble)."""

import logging
import math
import os

import numpy as np
import pytest
import soundfile
import torch
import yaml

from rnnt.data.config import data_config
from rnnt.data.loader import make_loader
from rnnt.data.noise import Augmenter, add_at_snr, read_recordings, reverberate
from rnnt.data.noise_config import NoiseConfig
from rnnt.data.pipeline import Pipeline
from rnnt.data.resample import resample
from rnnt.data.tokenizer import Tokenizer
from rnnt.training.config_inputs import config_inputs
from rnnt.training.experiment import load_experiment, with_absolute_paths


def power(x) -> float:
    return float(np.mean(np.asarray(x, dtype=np.float64) ** 2))


def speech(test_data) -> torch.Tensor:
    samples, _ = soundfile.read(sorted((test_data / "waves_yesno").glob("*.wav"))[0], dtype="float32")
    return torch.from_numpy(samples)


def digits_scp(test_data, tmp_path, count: int = 12) -> str:
    """A wav.scp of FSDD recordings (8 kHz speech of other speakers: babble)."""
    paths = sorted((test_data / "fsdd" / "recordings").glob("*.wav"))[:count]
    (tmp_path / "noise.scp").write_text("".join(f"digits{n} {path}\n" for n, path in enumerate(paths)))
    return str(tmp_path / "noise.scp")


def room(tmp_path, rate: int = 16000, peak: int = 40) -> str:
    """A room impulse response as OpenSLR 28 simulates them: a direct path after `peak` samples of nothing, then a
    decaying tail of reflections (RT60 about 0.3 s), in a WAV of floats; its wav.scp."""
    generator = np.random.default_rng(0)
    tail = generator.standard_normal(int(0.3 * rate)) * np.exp(-np.arange(int(0.3 * rate)) / (0.3 * rate / 6.9))
    impulse = np.concatenate([np.zeros(peak), [1.0], 0.3 * tail]).astype(np.float32)
    soundfile.write(tmp_path / "room.wav", impulse, rate, subtype="FLOAT")
    (tmp_path / "rooms.scp").write_text(f"room1 {tmp_path / 'room.wav'}\n")
    return str(tmp_path / "rooms.scp")


def test_noise_is_mixed_in_at_the_snr_drawn(test_data):
    clean = speech(test_data)
    noise = torch.from_numpy(np.random.default_rng(1).standard_normal(clean.shape[0]).astype(np.float32))
    for snr in (0.0, 7.5, 20.0):
        noisy = add_at_snr(clean, noise, snr)
        assert 10 * math.log10(power(clean) / power(noisy - clean)) == pytest.approx(snr, abs=1e-4)
    assert torch.equal(add_at_snr(clean, torch.zeros_like(clean), 5.0), clean)  # silence: nothing to scale


def test_reverberation_is_the_convolution_aligned_on_the_direct_path_at_the_signals_power(test_data, tmp_path):
    clean = resample(speech(test_data), 8000, 16000)
    room(tmp_path)
    impulse = torch.from_numpy(soundfile.read(tmp_path / "room.wav", dtype="float32")[0])
    wet = reverberate(clean, impulse)
    full = np.convolve(clean.double().numpy(), impulse.double().numpy())[40:40 + clean.shape[0]]
    expected = full * math.sqrt(power(clean) / power(full))
    assert wet.shape == clean.shape and np.allclose(wet.numpy(), expected, atol=1e-5)
    assert power(wet) == pytest.approx(power(clean), rel=1e-5)
    assert float(torch.nn.functional.cosine_similarity(wet, clean, dim=0)) < 0.9  # the room is heard
    delta = torch.zeros(100)
    delta[7] = 0.5  # a room of one delayed path: the speech as it was, not delayed
    assert torch.allclose(reverberate(clean, delta), clean, atol=1e-5)


def test_a_noise_segment_is_the_recordings_samples_from_its_offset_and_a_short_one_loops(test_data, tmp_path):
    augmenter = Augmenter(NoiseConfig(wav_scp=digits_scp(test_data, tmp_path, 1)), None, 8000)
    recording = augmenter.noises[0]
    whole = augmenter.recording(recording, augmenter.noise_cache)
    for seed in range(5):
        generator = torch.Generator().manual_seed(seed)
        piece = augmenter.noise_segment(recording, 1000, generator)
        offset = int(torch.randint(recording.samples - 1001 + 1, (1,), generator=torch.Generator().manual_seed(seed)))
        assert torch.equal(piece, whole[offset:offset + 1000])
    looped = augmenter.noise_segment(recording, 3 * recording.samples + 5, torch.Generator().manual_seed(0))
    assert looped.shape[0] == 3 * recording.samples + 5
    start = int(torch.nonzero(torch.isclose(whole, looped[0]))[0])  # the offset drawn
    assert torch.equal(looped[: recording.samples], whole.roll(-start))
    assert torch.equal(looped[recording.samples: 2 * recording.samples], whole.roll(-start))


def test_noise_cut_from_memory_is_the_noise_cut_from_the_file(test_data, tmp_path):
    """The recordings kept decoded (data.noise.cache_mb) give the segments reading each from its file gives: WAV at
    8 kHz the same samples; Ogg Opus at 16 kHz (speechocean762, resampled to 8 kHz) within the decoder's warm-up
    after a seek (decoded from the start, as in memory, the cut is the exact one); the most recently used kept
    within the budget."""
    opus = sorted((test_data / "speechocean762" / "WAVE").rglob("*.opus"))[:6]
    wav = sorted((test_data / "fsdd" / "recordings").glob("*.wav"))[:6]
    (tmp_path / "mixed.scp").write_text("".join(f"n{i} {path}\n" for i, path in enumerate(opus + wav)))
    cached, read = (Augmenter(NoiseConfig(wav_scp=str(tmp_path / "mixed.scp"), cache_mb=mb), None, 8000)
                    for mb in (64, 0))
    for n, recording in enumerate(cached.noises * 2):
        for samples in (800, recording.samples * 8000 // recording.rate + 300):  # a segment, a loop
            a, b = (augmenter.noise_segment(recording, samples, torch.Generator().manual_seed(n))
                    for augmenter in (cached, read))
            if recording.path.endswith(".opus"):
                assert torch.allclose(a, b, atol=1e-3), (recording.path, samples)
            else:
                assert torch.equal(a, b), (recording.path, samples)
    assert len(cached.noise_cache.held) == 12 and read.noise_cache.held == {}
    small = Augmenter(NoiseConfig(wav_scp=str(tmp_path / "mixed.scp"), cache_mb=1), None, 8000).noise_cache
    for recording in cached.noises:
        small.get(recording.path)
    assert 0 < small.size <= 2**20 and list(small.held)[-1][0] == cached.noises[-1].path  # the newest kept


def test_a_noise_file_written_again_is_decoded_again(test_data, tmp_path):
    """The cache knew a recording by its path alone: a file written again since was cut from its old samples
    (docs/data.md: the recordings are read as they are at each use)."""
    samples, rate = soundfile.read(sorted((test_data / "fsdd" / "recordings").glob("*.wav"))[0], dtype="float32")
    soundfile.write(tmp_path / "n.wav", samples, rate)
    (tmp_path / "n.scp").write_text(f"n {tmp_path / 'n.wav'}\n")
    augmenter = Augmenter(NoiseConfig(wav_scp=str(tmp_path / "n.scp"), cache_mb=64), None, rate)
    first = augmenter.noise_cache.get(str(tmp_path / "n.wav"))
    soundfile.write(tmp_path / "n.wav", samples[::-1] * 0.5, rate)
    again = augmenter.noise_cache.get(str(tmp_path / "n.wav"))
    torch.testing.assert_close(first, torch.from_numpy(samples))
    torch.testing.assert_close(again, torch.from_numpy(samples[::-1] * 0.5), atol=1 / 32768, rtol=0)


def test_a_process_that_cannot_read_a_noise_file_draws_the_others_noise_as_the_rest_do(test_data, tmp_path):
    """The draw was among the recordings that read when the pipeline was built: one that did not read on one
    rank (or on a resume) shifted the picks of 14 of 20 utterances there. Silent noise added nothing and was
    counted as given."""
    paths = sorted((test_data / "fsdd" / "recordings").glob("*.wav"))[:4]
    (tmp_path / "x.wav").write_bytes(paths[3].read_bytes())
    (tmp_path / "n.scp").write_text("".join(f"n{i} {p}\n" for i, p in enumerate(paths[:3] + [tmp_path / "x.wav"])))
    config = NoiseConfig(wav_scp=str(tmp_path / "n.scp"), prob=1.0)
    speech = torch.from_numpy(soundfile.read(paths[0], dtype="float32")[0])
    readable = Augmenter(config, None, 8000)
    noisy = [readable.augment(speech, torch.Generator().manual_seed(n)) for n in range(20)]
    (tmp_path / "x.wav").unlink()
    missing = Augmenter(config, None, 8000)
    results = [(a, missing.augment(speech, torch.Generator().manual_seed(n))) for n, a in enumerate(noisy)]
    unread = [n for n, (_, (_, done)) in enumerate(results) if done == ["unreadable data.noise.wav_scp"]]
    assert 0 < len(unread) < 10
    for n, ((a, done_a), (b, done_b)) in enumerate(results):
        assert done_a == ["noise"] and (n in unread or (done_b == ["noise"] and torch.equal(a, b))), n
    soundfile.write(tmp_path / "silence.wav", np.zeros(8000, dtype=np.float32), 8000)
    (tmp_path / "silence.scp").write_text(f"s {tmp_path / 'silence.wav'}\n")
    silent = Augmenter(NoiseConfig(wav_scp=str(tmp_path / "silence.scp"), prob=1.0), None, 8000)
    waveform, done = silent.augment(speech, torch.Generator().manual_seed(0))
    assert done == [] and torch.equal(waveform, speech)


def test_a_list_line_that_cannot_be_read_is_named_and_the_rest_kept(test_data, tmp_path, caplog):
    scp = digits_scp(test_data, tmp_path, 3)
    with open(scp, "a") as f:
        f.write(f"gone {tmp_path / 'gone.wav'}\npiped sox a.wav -t wav - |\n")
    warnings = []
    recordings = read_recordings(scp, "data.noise.wav_scp", warnings)
    assert [r.rate for r in recordings] == [8000] * 3 + [0, 0]  # in their places: drawn as where they read
    assert recordings[3].unreadable.startswith(f"{scp}:4: cannot read")
    assert warnings[0].startswith(f"{scp}:4: data.noise.wav_scp: cannot read {tmp_path / 'gone.wav'}")
    assert warnings[0].endswith("the utterances that draw it go without")
    assert warnings[1].startswith(f"{scp}:5: data.noise.wav_scp: a piped command")
    assert warnings[2] == "data.noise.wav_scp: 2 of 5 recordings cannot be read (named above)"
    (tmp_path / "bad.scp").write_text(f"gone {tmp_path / 'gone.wav'}\n")
    with pytest.raises(ValueError, match=r"data.reverb.wav_scp .*bad.scp: no recording it lists can be read: .*"
                                         r"bad.scp:1: data.reverb.wav_scp: cannot read"):
        read_recordings(str(tmp_path / "bad.scp"), "data.reverb.wav_scp", [])


def batches_of(yesno, train: bool, epoch: int = 0, **data) -> list[dict]:
    config = data_config({"sample_rate": 16000, "features": {"num_mel_bins": 40}, "batch": {"type": "static",
                                                                                           "batch_size": 5}, **data})
    return list(Pipeline(str(yesno / "five.list"), config, Tokenizer(str(yesno / "lang")), train).batches(epoch))


def test_training_utterances_get_reverb_and_babble_each_as_its_generator_draws(yesno, test_data, tmp_path, caplog):
    """Five utterances, the prob 0.5 of each: some reverberated, some given babble of 3 speakers at 5-10 dB, drawn
    the same in a second pass of the epoch, otherwise in another; validation and decoding never augmented."""
    augmented = {"noise": {"wav_scp": digits_scp(test_data, tmp_path), "snr": [5, 10], "count": [3, 3]},
                 "reverb": {"wav_scp": room(tmp_path)}}
    clean = batches_of(yesno, True)[0]["feats"]
    with caplog.at_level(logging.INFO):
        first, again, later = (batches_of(yesno, True, epoch, **augmented)[0]["feats"] for epoch in (0, 0, 1))
    assert torch.equal(first, again) and not torch.equal(first, later)
    changed = [not torch.equal(a, b) for a, b in zip(first, clean)]
    assert 0 < sum(changed) and first.shape == clean.shape
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("data (five.list, epoch 1)"))
    reverberated, noisy = (int(line.split(f" {what}")[0].split("; ")[-1]) if what in line else 0
                           for what in ("reverberated (data.reverb)", "with noise (data.noise)"))
    assert 0 < reverberated + noisy and sum(changed) <= 5, line
    assert torch.equal(batches_of(yesno, False, **augmented)[0]["feats"], batches_of(yesno, False)[0]["feats"])
    never = {key: {**value, "prob": 0.0} for key, value in augmented.items()}
    assert torch.equal(batches_of(yesno, True, **never)[0]["feats"], clean)  # nothing drawn changes the rest
    every = {key: {**value, "prob": 1.0} for key, value in augmented.items()}
    assert all(not torch.equal(a, b) for a, b in zip(batches_of(yesno, True, **every)[0]["feats"], clean))
    one_by_one = data_config({"sample_rate": 16000, "features": {"num_mel_bins": 40}, "num_workers": 2,
                              "batch": {"type": "static", "batch_size": 1}, **augmented})
    loader = make_loader(Pipeline(str(yesno / "five.list"), one_by_one, Tokenizer(str(yesno / "lang")), True))
    loader.dataset.set_epoch(0)
    in_workers = {batch["keys"][0]: batch["feats"][0] for batch in loader}  # each worker its utterances' draws
    in_process = batches_of(yesno, True, **augmented)[0]
    assert all(torch.equal(in_workers[key], feats[: len(in_workers[key])])
               for key, feats in zip(in_process["keys"], in_process["feats"]))


def test_a_noise_recording_gone_since_leaves_its_utterance_clean_and_named(yesno, test_data, tmp_path, caplog):
    """A list line that cannot be read when the pipeline is built is logged; a recording gone since is named once
    however many utterances draw it, and they are trained on without it."""
    scp = digits_scp(test_data, tmp_path, 1)
    with open(scp, "a") as f:
        f.write(f"gone {tmp_path / 'gone.wav'}\n")
    config = data_config({"sample_rate": 16000, "features": {"num_mel_bins": 40},
                          "noise": {"wav_scp": scp, "prob": 1.0}})
    with caplog.at_level(logging.INFO):
        pipeline = Pipeline(str(yesno / "five.list"), config, Tokenizer(str(yesno / "lang")), True)
        assert f"{scp}:2: data.noise.wav_scp: cannot read" in caplog.text
        pipeline.augmenter.noises[0] = type(pipeline.augmenter.noises[0])(str(tmp_path / "gone.wav"), 10**6, 8000)
        keys = [key for batch in pipeline.batches() for key in batch["keys"]]
    assert len(keys) == 5
    assert caplog.text.count("data.noise.wav_scp: a recording cannot be read now, left out of the utterances that "
                             "draw it") == 1
    assert "5 without the data.noise.wav_scp recording drawn, unreadable (named above)" in caplog.text


@pytest.mark.parametrize("values, message", [
    ({"noise": {}}, "data.noise.wav_scp: give the Kaldi wav.scp of its recordings"),
    ({"reverb": {"wav_scp": "r.scp", "prob": 1.5}}, "data.reverb.prob is a share of the utterances, from 0 to 1"),
    ({"noise": {"wav_scp": "n.scp", "snr": [20, 10]}}, r"data.noise.snr is \[low, high\] in dB"),
    ({"noise": {"wav_scp": "n.scp", "snr": [5]}}, r"data.noise.snr is \[low, high\] in dB"),
    ({"noise": {"wav_scp": "n.scp", "snr": [0, 1e9]}}, r"data.noise.snr is \[low, high\] in dB, -100 <= low"),
    ({"noise": {"wav_scp": "n.scp", "count": [0, 2]}}, r"data.noise.count is \[fewest, most\] recordings"),
])
def test_noise_settings_that_cannot_work_are_refused_by_key(values, message):
    with pytest.raises(ValueError, match=message):
        data_config(values)


def test_a_training_stage_takes_the_noise_lists_among_its_inputs_and_the_saved_config_names_them_absolute(tmp_path):
    config = {"data": {"noise": {"wav_scp": "data/musan/wav.scp"}, "reverb": {"wav_scp": "data/rirs/wav.scp"}}}
    assert config_inputs(config) == ["data/musan/wav.scp", "data/rirs/wav.scp"]
    assert config_inputs({"data": {"noise": None}}) == []
    (tmp_path / "conf.yaml").write_text(yaml.safe_dump(config))
    saved = with_absolute_paths(load_experiment(str(tmp_path / "conf.yaml"))).data  # as steps/train.py saves it
    assert (saved.noise.wav_scp, saved.reverb.wav_scp) == (os.path.abspath("data/musan/wav.scp"),
                                                           os.path.abspath("data/rirs/wav.scp"))

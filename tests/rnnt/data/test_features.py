"""fbank presets on real audio: Kaldi numerics against kaldi-native-fbank, and the MLPerf preset."""

import glob

import numpy as np
import pytest
import soundfile
import torch

from rnnt.data.features import check_mel_bins, fbank, fbanks, mel_matrix, num_frames
from rnnt.data.resample import resample
from rnnt.data.streaming_fbank import StreamingFbank


def knf_fbank(samples: np.ndarray, rate: int, bins: int, sherpa_onnx: bool = False) -> np.ndarray:
    """kaldi-native-fbank as Kaldi's compute-fbank runs it, or as sherpa-onnx does (its
    FeatureExtractorConfig: no snip-edges, high-freq -400, samples in [-1, 1])."""
    import kaldi_native_fbank as knf

    opts = knf.FbankOptions()
    opts.frame_opts.dither = 0
    opts.frame_opts.samp_freq = rate
    opts.mel_opts.num_bins = bins
    if sherpa_onnx:
        opts.frame_opts.snip_edges = False
        opts.mel_opts.high_freq = -400
    extractor = knf.OnlineFbank(opts)
    extractor.accept_waveform(rate, (samples if sherpa_onnx else samples * 32768).tolist())
    extractor.input_finished()
    return np.array([extractor.get_frame(i) for i in range(extractor.num_frames_ready)]).reshape(-1, bins)


def real_audio(test_data):
    flacs = sorted(glob.glob(str(test_data / "librispeech_samples" / "LibriSpeech" / "*" / "*" / "*" / "*.flac")))
    wavs = sorted(glob.glob(str(test_data / "waves_yesno" / "*.wav")))[:3]
    return flacs + wavs


@pytest.mark.parametrize("preset", ["kaldi", "sherpa_onnx"])
def test_kaldi_presets_match_kaldi_native_fbank(test_data, preset):
    """Cells agree within 1e-3 except a few low-energy bins, where float32 rounding in the oracle itself
    reaches 2e-3 (our float64 path differs from it by as much as our float32 path does)."""
    total = over = 0
    for path in real_audio(test_data):
        samples, rate = soundfile.read(path, dtype="float32")
        bins = 80 if rate == 16000 else 40
        ours = fbank(torch.from_numpy(samples), rate, preset, bins).numpy()
        ref = knf_fbank(samples, rate, bins, sherpa_onnx=preset == "sherpa_onnx")
        assert ours.shape == ref.shape, path
        diff = np.abs(ours - ref)
        assert diff.max() < 3e-3, path
        assert diff.mean() < 1e-5, path
        total += diff.size
        over += int((diff > 1e-3).sum())
    assert over / total < 1e-4


@pytest.mark.parametrize("preset", ["kaldi", "sherpa_onnx", "mlperf"])
def test_the_fbanks_of_a_batch_are_each_waveforms_fbank(test_data, preset):
    """fbanks frames each waveform alone and takes the spectra of all the frames at once; one shorter than a frame
    gives none, as alone."""
    samples, rate = soundfile.read(real_audio(test_data)[0], dtype="float32", frames=24000)
    waveforms = [torch.from_numpy(samples[:n]) for n in (24000, 7001, 50, 16000)]
    together = fbanks(waveforms, rate, preset, 40)
    for waveform, feats in zip(waveforms, together):
        alone = fbank(waveform, rate, preset, 40)
        assert feats.shape == alone.shape and torch.allclose(feats, alone, rtol=1e-5, atol=1e-5)
    assert [f.shape[0] for f in together] == [num_frames(len(w), rate, preset) for w in waveforms]
    assert [f.shape for f in fbanks(waveforms[2:3], rate, preset, 40)] == [together[2].shape]


def test_kaldi_frame_count_snips_edges():
    x = torch.randn(16000) * 0.1
    assert fbank(x, 16000).shape == (1 + (16000 - 400) // 160, 80)
    assert fbank(x[:399], 16000).shape == (0, 80)


@pytest.mark.parametrize("samples", [0, 1, 79, 80, 250, 399, 16001])
def test_sherpa_onnx_frames_mirror_short_signals_as_kaldi(samples):
    """Without snip-edges even a signal shorter than a window has frames, its samples mirrored again
    and again; num_frames agrees."""
    x = (torch.randn(samples) * 0.1).numpy()
    ours = fbank(torch.from_numpy(x), 16000, "sherpa_onnx").numpy()
    assert ours.shape[0] == num_frames(samples, 16000, "sherpa_onnx") == (samples + 80) // 160
    np.testing.assert_allclose(ours, knf_fbank(x, 16000, 80, sherpa_onnx=True), atol=3e-3)


def test_mlperf_preset(test_data):
    path = real_audio(test_data)[0]
    samples, rate = soundfile.read(path, dtype="float32")
    x = torch.from_numpy(samples)
    feats = fbank(x, rate, "mlperf")
    assert feats.shape == (1 + len(samples) // 160, 80)  # centred frames
    torch.testing.assert_close(feats.mean(0), torch.zeros(80), atol=1e-4, rtol=0)
    torch.testing.assert_close(feats.std(0), torch.ones(80), atol=1e-3, rtol=0)
    # the numerics, before the per-utterance normalisation hides them, from torch.stft as MLPerf's reference
    # computes them: pre-emphasis 0.97, a 320-sample symmetric Hann window centred in 512-point frames every 160
    # samples (the signal reflected at its edges), the power spectrum, Slaney mel bins, log(x + 2^-24)
    emphasised = torch.cat([x[:1], x[1:] - 0.97 * x[:-1]]).double()
    spectrum = torch.stft(emphasised, 512, 160, 320, torch.hann_window(320, periodic=False, dtype=torch.float64),
                          center=True, pad_mode="reflect", return_complex=True).abs().square().T
    logmel = (spectrum @ mel_matrix(16000, 512, 80, 0.0, "slaney").double() + 2.0 ** -24).log()
    want = (logmel - logmel.mean(0)) / (logmel.std(0) + 1e-5)
    assert want.shape == feats.shape
    torch.testing.assert_close(feats.double(), want, atol=2e-3, rtol=0)
    g = torch.Generator().manual_seed(0)
    dithered = fbank(x, rate, "mlperf", dither=1e-5, generator=g)
    assert not torch.equal(dithered, feats) and (dithered - feats).abs().mean() < 0.05


@pytest.mark.parametrize("samples", [0, 1, 200, 256, 257, 320, 16001])
def test_mlperf_frames_of_short_signals_agree_with_num_frames(samples):
    """The STFT's reflection at the edges needs more than n_fft / 2 = 256 samples: shorter audio has no frame,
    and num_frames says so, so the length filter drops it instead of fbank failing inside an epoch."""
    x = torch.randn(samples) * 0.1
    frames = 0 if samples <= 256 else 1 + samples // 160
    assert fbank(x, 16000, "mlperf").shape == (frames, 80) and num_frames(samples, 16000, "mlperf") == frames


def test_slaney_scale_anchor_points_and_filter_area():
    from rnnt.data.features import _slaney_hz, _slaney_mel

    hz = torch.tensor([0.0, 500.0, 1000.0, 6400.0], dtype=torch.float64)
    torch.testing.assert_close(_slaney_mel(hz), torch.tensor([0.0, 7.5, 15.0, 42.0], dtype=torch.float64))
    torch.testing.assert_close(_slaney_hz(_slaney_mel(hz)), hz)
    weights = mel_matrix(16000, 512, 80, 0.0, "slaney")
    area = weights.sum(0) * 16000 / 512  # unit area in Hz, where a filter spans many FFT bins
    torch.testing.assert_close(area[40:], torch.ones(40, dtype=torch.float64), atol=0.02, rtol=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown fbank preset 'htk'"):
        fbank(torch.zeros(16000), 16000, "htk")
    with pytest.raises(ValueError, match="mono waveform"):
        fbank(torch.zeros(2, 16000), 16000)


@pytest.mark.parametrize("preset", ["kaldi", "sherpa_onnx"])
def test_streaming_fbank_equals_fbank_of_the_whole_signal(test_data, preset):
    """Pieces of random sizes (and signals shorter than a frame) give the frames of the whole signal,
    keeping no more than about a frame of samples."""
    samples, rate = soundfile.read(real_audio(test_data)[0], dtype="float32")
    signal = torch.from_numpy(samples)
    generator = torch.Generator().manual_seed(0)
    for length in (len(signal), 10, 150, 399, 5000):
        stream, pieces, start, kept = StreamingFbank(preset, rate), [], 0, 0
        while start < length:
            size = int(torch.randint(1, 700, (1,), generator=generator))
            pieces.append(stream.accept(signal[start:min(start + size, length)]))
            start += size
            kept = max(kept, stream.buffer.shape[0])
        pieces.append(stream.finish())
        want = fbank(signal[:length], rate, preset)
        assert torch.allclose(torch.cat(pieces), want, atol=1e-4), length
        if length > 5000:
            assert kept < 2 * 400 + 700


def test_streaming_fbank_refuses_whole_utterance_presets():
    with pytest.raises(ValueError, match="mlperf cannot stream"):
        StreamingFbank("mlperf", 16000)


@pytest.mark.parametrize("preset", ["kaldi", "sherpa_onnx"])
def test_an_odd_rate_frames_as_kaldi_truncating_its_window(test_data, preset):
    """At 11025 Hz a 25 ms window is 275.6 samples: Kaldi takes 275 (it took 276, 0.06 off in the log)."""
    samples, rate = soundfile.read(real_audio(test_data)[0], dtype="float32", frames=16000)
    odd = resample(torch.from_numpy(samples), rate, 11025)
    ours = fbank(odd, 11025, preset, 40).numpy()
    ref = knf_fbank(odd.numpy(), 11025, 40, sherpa_onnx=preset == "sherpa_onnx")
    assert ours.shape == ref.shape == (num_frames(len(odd), 11025, preset), 40)
    assert np.abs(ours - ref).max() < 3e-3


def test_mel_bins_that_cover_no_fft_bin_are_refused(test_data):
    """From 127 bins at 16 kHz (Kaldi refuses them too) a channel held only the log floor."""
    check_mel_bins("kaldi", 16000, 126)
    for preset, rate, bins in (("kaldi", 16000, 127), ("sherpa_onnx", 16000, 125), ("kaldi", 8000, 96)):
        with pytest.raises(ValueError, match=f"num_mel_bins {bins} is too many for the {preset} preset at {rate} Hz"):
            check_mel_bins(preset, rate, bins)
    samples, rate = soundfile.read(real_audio(test_data)[0], dtype="float32")
    channels = fbank(torch.from_numpy(samples), rate, "kaldi", 128).std(0)  # speech: what such a channel holds
    assert channels[3] == 0 and channels[torch.arange(128) != 3].min() > 0.1


def test_a_window_longer_than_a_presets_fixed_fft_is_refused_before_any_batch():
    """mlperf's 20 ms window against its 512-point FFT: 512 samples at 25.6 kHz; above, every batch failed with
    a shape error mid-epoch. The presets sizing the FFT to the window take any rate."""
    check_mel_bins("mlperf", 25600, 64)
    for rate in (32000, 44100):
        with pytest.raises(ValueError, match=f"the mlperf preset's 20 ms window is {rate // 50} samples at {rate} Hz, "
                                             "more than its 512-point FFT"):
            check_mel_bins("mlperf", rate, 64)
    for preset in ("kaldi", "sherpa_onnx"):
        check_mel_bins(preset, 44100, 80)
        assert fbank(torch.randn(44100), 44100, preset, 80).shape == (num_frames(44100, 44100, preset), 80)


def test_a_dither_of_16_bit_units_with_a_preset_of_samples_in_plus_minus_1_is_refused():
    """Kaldi's and WeNet's dither 1.0 is in 16-bit units; the sherpa_onnx and mlperf presets' samples are in [-1, 1]:
    it trained on noise about as loud as the speech (log-mels 10 apart on average), without a word."""
    from rnnt.data.config import data_config

    assert data_config({"features": {"preset": "kaldi", "dither": 1.0}}).features.dither == 1.0
    assert data_config({"features": {"preset": "mlperf", "dither": 1e-5}}).features.dither == 1e-5
    for preset in ("sherpa_onnx", "mlperf"):
        with pytest.raises(ValueError, match=f"preset {preset} keeps the samples in .-1, 1.* dither 1 is 3.1e-05 here"):
            data_config({"features": {"preset": preset, "dither": 1.0}})
    with pytest.raises(ValueError, match="data.features.dither must be 0 or more and finite, got -1"):
        data_config({"features": {"dither": -1.0}})
    noisy = fbank(torch.zeros(8000), 16000, "sherpa_onnx", 80, dither=1.0, generator=torch.Generator().manual_seed(0))
    speech = fbank(0.05 * torch.randn(8000, generator=torch.Generator().manual_seed(1)), 16000, "sherpa_onnx", 80)
    assert noisy.mean() > speech.mean()  # what 1.0 was with this preset: louder than the speech

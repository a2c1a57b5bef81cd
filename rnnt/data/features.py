"""Log-mel filterbank features in plain torch, for whole utterances at once (every frame in one FFT), or a batch
of them (fbanks: every frame of the batch in one).

Presets (their settings): rnnt.data.fbank_presets.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from rnnt.data.fbank_presets import PRESETS, FbankPreset, fft_size, frame_samples


def _htk_mel(hz):
    return 1127.0 * torch.log1p(hz / 700.0)


def _slaney_mel(hz):
    """Linear below 1 kHz (3 mel per 200 Hz), logarithmic above (27 steps per factor 6.4)."""
    linear = hz * 3.0 / 200.0
    return torch.where(hz >= 1000.0, 15.0 + torch.log(hz.clamp_min(1e-10) / 1000.0) * 27.0 / math.log(6.4), linear)


def _slaney_hz(mel):
    return torch.where(mel >= 15.0, 1000.0 * torch.exp((mel - 15.0) * math.log(6.4) / 27.0), mel * 200.0 / 3.0)


def check_mel_bins(preset: str, sample_rate: int, num_mel_bins: int) -> None:
    """Refuses mel bins so many that one covers no FFT bin (a channel that is always the log floor), as Kaldi
    does: from 127 at 16 kHz (kaldi), 96 at 8 kHz; and a rate at which a preset's fixed FFT is shorter than
    its window (mlperf's 512 points from 25.6 kHz on)."""
    p = PRESETS[preset]
    frame = frame_samples(p, sample_rate)[0]
    n_fft = fft_size(p, frame)
    if frame > n_fft:
        raise ValueError(f"the {preset} preset's {p.frame_ms:g} ms window is {frame} samples at {sample_rate} Hz, "
                         f"more than its {n_fft}-point FFT: set data.sample_rate to 16000 (the audio is resampled) "
                         "or use another preset")
    weights = mel_matrix(sample_rate, n_fft, num_mel_bins, p.low_hz, p.mel_scale, p.high_hz)
    empty = (weights.sum(0) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"data.features.num_mel_bins {num_mel_bins} is too many for the {preset} preset at "
                         f"{sample_rate} Hz ({n_fft}-point FFT): mel bin {empty[0]} covers no FFT bin, a channel "
                         "with no information (Kaldi refuses it too); use fewer")


@lru_cache(maxsize=16)
def mel_matrix(sample_rate: int, n_fft: int, n_mels: int, low_hz: float, scale: str,
               high_hz: float = 0.0) -> torch.Tensor:
    """(n_fft // 2 + 1, n_mels) triangular filters over the power-spectrum bins, from low_hz to high_hz
    (<= 0: that far below Nyquist)."""
    high_hz = high_hz if high_hz > 0 else sample_rate / 2.0 + high_hz
    bin_hz = torch.arange(n_fft // 2 + 1, dtype=torch.float64) * sample_rate / n_fft
    if scale == "htk":
        # Kaldi: triangles evenly spaced in mel, weights linear in mel; the Nyquist bin is left out.
        lo, hi = (_htk_mel(torch.tensor(low_hz, dtype=torch.float64)),
                  _htk_mel(torch.tensor(high_hz, dtype=torch.float64)))
        edges = lo + (hi - lo) * torch.arange(n_mels + 2, dtype=torch.float64) / (n_mels + 1)
        mel = _htk_mel(bin_hz)[:, None]
        left, centre, right = edges[:-2], edges[1:-1], edges[2:]
        up, down = (mel - left) / (centre - left), (right - mel) / (right - centre)
        weights = torch.where((mel > left) & (mel < right), torch.minimum(up, down), 0.0)
        weights[-1] = 0.0
        return weights
    # Slaney: triangles evenly spaced in Slaney mel, weights linear in Hz, each of unit area.
    lo, hi = (_slaney_mel(torch.tensor(low_hz, dtype=torch.float64)),
              _slaney_mel(torch.tensor(high_hz, dtype=torch.float64)))
    edges_hz = _slaney_hz(torch.linspace(float(lo), float(hi), n_mels + 2, dtype=torch.float64))
    hz = bin_hz[:, None]
    left, centre, right = edges_hz[:-2], edges_hz[1:-1], edges_hz[2:]
    up, down = (hz - left) / (centre - left), (right - hz) / (right - centre)
    return torch.clamp(torch.minimum(up, down), min=0.0) * (2.0 / (right - left))


@lru_cache(maxsize=16)
def _window(kind: str, length: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    n = torch.arange(length, dtype=torch.float64)
    hann = 0.5 - 0.5 * torch.cos(2 * math.pi * n / (length - 1))
    return ((hann ** 0.85 if kind == "povey" else hann) * scale).to(dtype)


@lru_cache(maxsize=16)
def _mel(sample_rate: int, n_fft: int, n_mels: int, low_hz: float, scale: str, high_hz: float,
         dtype: torch.dtype) -> torch.Tensor:
    """mel_matrix with every row repeated: rows 2k and 2k+1 weight the real and imaginary squares of bin k."""
    return mel_matrix(sample_rate, n_fft, n_mels, low_hz, scale, high_hz).repeat_interleave(2, dim=0).to(dtype)


def _mirrored(x: torch.Tensor, frame: int, shift: int) -> torch.Tensor:
    """The signal as Kaldi frames it without snip-edges: frame i centred on i * shift + shift // 2, the
    signal mirrored at both edges (x[-1] = x[0], x[n] = x[n-1]), (samples + shift // 2) // shift frames.
    Returns the samples those frames span, so that snip-edges framing of it gives exactly those frames."""
    count = (x.shape[0] + shift // 2) // shift
    if count == 0:
        return x[:0]
    start = shift // 2 - frame // 2
    return x[mirror_index(torch.arange(start, start + (count - 1) * shift + frame, device=x.device), x.shape[0])]


def mirror_index(index: torch.Tensor, samples: int) -> torch.Tensor:
    """Positions before and after a signal of `samples` samples mapped into it as Kaldi mirrors them
    (-1 -> 0, samples -> samples - 1, and so on back and forth)."""
    index = index % (2 * samples)
    return torch.where(index < samples, index, 2 * samples - 1 - index)


def _kaldi_frames(x: torch.Tensor, frame: int, shift: int, window: torch.Tensor, remove_dc: bool,
                  n_fft: int) -> torch.Tensor:
    """Kaldi's per-frame DC removal, pre-emphasis (first sample against itself) and window, in a few
    whole-tensor operations: for a frame f with mean m, preemph(f - m) equals the signal's
    pre-emphasis over the frame minus 0.03 m, except the first sample, which is 0.03 (f[0] - m).
    Returns (frames, n_fft): the windowed frames followed by the FFT's zero padding."""
    if x.shape[0] < frame:
        return x.new_zeros((0, n_fft))
    count = 1 + (x.shape[0] - frame) // shift
    emphasised = torch.empty_like(x)  # [0] stays unset: column 0 of every frame is written below
    torch.sub(x[1:], x[:-1], alpha=0.97, out=emphasised[1:])
    padded = x.new_empty((count, n_fft))
    padded[:, frame:] = 0.0
    out = torch.mul(emphasised.unfold(0, frame, shift)[:count], window, out=padded[:, :frame])
    raw = x.unfold(0, frame, shift)[:count]
    first = raw[:, 0]
    if remove_dc:
        mean = raw.mean(dim=1)
        out.addr_(mean, window, alpha=-(1 - 0.97))
        first = first - mean
    out[:, 0] = (1 - 0.97) * first * window[0]
    return padded


def _centred_frames(x: torch.Tensor, frame: int, shift: int, n_fft: int) -> torch.Tensor:
    """(1 + samples // shift, frame) views centred as torch.stft(center=True) with reflection does."""
    pad = n_fft // 2
    x = torch.nn.functional.pad(x[None, None], (pad, pad), mode="reflect")[0, 0]
    offset = (n_fft - frame) // 2  # the window sits in the middle of the FFT frame
    return x.unfold(0, n_fft, shift)[:, offset:offset + frame]


def fbank(waveform: torch.Tensor, sample_rate: int, preset: str | FbankPreset = "kaldi", num_mel_bins: int = 80,
          dither: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """(frames, num_mel_bins) log-mel features of a mono waveform (samples,) in [-1, 1].

    dither: amplitude of Gaussian noise added first (None or 0: none; no preset dithers by itself).
    """
    return fbanks([waveform], sample_rate, preset, num_mel_bins, dither, [generator])[0]


FRAMES_AT_ONCE = 4096  # fbanks' frames per FFT and matmul: 16 MB of frames and spectra at 512 points


def fbanks(waveforms: list[torch.Tensor], sample_rate: int, preset: str | FbankPreset = "kaldi",
           num_mel_bins: int = 80, dither: float | None = None,
           generators: list[torch.Generator | None] | None = None) -> list[torch.Tensor]:
    """fbank of each waveform (all at one rate; each dithered with its generator): framed one by one, the spectra,
    mel bins and logs of the frames of several at once, up to FRAMES_AT_ONCE (a batch of short utterances spent
    most of its time in the fixed cost of an FFT and a matmul each). Waveforms of float32 and float64 together
    are computed in float64."""
    if not isinstance(preset, FbankPreset) and preset not in PRESETS:
        raise ValueError(f"unknown fbank preset '{preset}'; choose from {sorted(PRESETS)}")
    p = preset if isinstance(preset, FbankPreset) else PRESETS[preset]
    feats, group, held = [], [], 0
    for waveform, generator in zip(waveforms, generators or [None] * len(waveforms), strict=True):
        group.append(_frames(waveform, sample_rate, p, dither, generator))
        held += group[-1].shape[0]
        if held >= FRAMES_AT_ONCE:
            feats += _log_mels(group, sample_rate, p, num_mel_bins)
            group, held = [], 0
    feats += _log_mels(group, sample_rate, p, num_mel_bins) if group else []
    if p.normalize_per_utterance:
        feats = [(f - f.mean(dim=0)) / (f.std(dim=0) + 1e-5) if f.shape[0] > 1 else f for f in feats]
    return feats


def _log_mels(framed: list[torch.Tensor], sample_rate: int, p: FbankPreset, num_mel_bins: int) -> list[torch.Tensor]:
    """The log-mel features of each waveform's frames (_frames), in one FFT and one matmul."""
    every = torch.cat(framed) if len(framed) > 1 else framed[0]
    if every.shape[0] == 0:  # each shorter than one frame
        return [every.new_zeros((0, num_mel_bins)) for _ in framed]
    # |X|^2 = re^2 + im^2: the squared (re, im) pairs, side by side, meet a mel matrix with each row
    # twice, so the sum over the pair happens inside the matmul.
    n_fft = fft_size(p, frame_samples(p, sample_rate)[0])
    squares = torch.view_as_real(torch.fft.rfft(every, n=n_fft)).square_().reshape(every.shape[0], -1)
    mel = squares @ _mel(sample_rate, n_fft, num_mel_bins, p.low_hz, p.mel_scale, p.high_hz, squares.dtype)
    if p.log_floor == "max-eps":
        logs = mel.clamp_min_(torch.finfo(torch.float32).eps).log_()  # Kaldi's floor is FLT_EPSILON
    else:
        logs = mel.add_(2.0 ** -24).log_()
    return list(logs.split([frames.shape[0] for frames in framed]))


def _frames(waveform: torch.Tensor, sample_rate: int, p: FbankPreset, dither: float | None,
            generator: torch.Generator | None) -> torch.Tensor:
    """(frames, n_fft): a waveform's windowed frames, each followed by the FFT's zero padding."""
    if waveform.dim() != 1:
        raise ValueError(f"fbank expects a mono waveform (samples,), got shape {tuple(waveform.shape)}")
    x = waveform if waveform.dtype == torch.float64 else waveform.float()
    # Kaldi works on 16-bit sample values; every step before the power spectrum is linear, so the
    # scale rides on the window instead of costing a pass over the signal. Dither is in those units.
    scale = 32768.0 if p.int16_scale else 1.0
    if dither:
        x = x + (dither / scale) * torch.randn(x.shape, generator=generator, device=x.device)
    frame, shift = frame_samples(p, sample_rate)
    n_fft = fft_size(p, frame)
    if p.framing == "stft" and x.shape[0] <= n_fft // 2:  # too short to reflect at its edges: no frame
        return x.new_zeros((0, frame))  # as wide as its frames: the FFT pads them
    if p.framing == "stft":  # MLPerf pre-emphasises the whole signal before framing
        x = torch.cat([x[:1], x[1:] - 0.97 * x[:-1]])
        return _centred_frames(x, frame, shift, n_fft) * _window(p.window, frame, x.dtype, scale)
    if p.framing == "mirrored":
        x = _mirrored(x, frame, shift)
    return _kaldi_frames(x, frame, shift, _window(p.window, frame, x.dtype, scale), p.remove_dc, n_fft)


def num_frames(num_samples: int, sample_rate: int, preset: str = "kaldi") -> int:
    """How many frames fbank gives for num_samples, without computing them."""
    p = PRESETS[preset]
    frame, shift = frame_samples(p, sample_rate)
    if p.framing == "stft":
        return 0 if num_samples <= fft_size(p, frame) // 2 else 1 + num_samples // shift
    if p.framing == "mirrored":
        return (num_samples + shift // 2) // shift
    return 0 if num_samples < frame else 1 + (num_samples - frame) // shift

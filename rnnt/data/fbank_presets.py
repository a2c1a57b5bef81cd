"""The fbank presets rnnt.data.features computes: each one's framing, window, mel scale and log, without
torch, so that a tool that only reads a preset's frame shift (steps/build_units.py, through
rnnt.training.config_checks) need not import it.

Presets:
  kaldi:  Kaldi's compute-fbank numerics: 25 ms window every 10 ms, frames inside the signal only
          (snip-edges), DC removed per frame, pre-emphasis 0.97, Povey window, FFT of the next power of
          two, power spectrum, HTK-style mel bins from 20 Hz to Nyquist, natural log; samples scaled to
          the 16-bit range as Kaldi reads them. No dither unless asked.
  sherpa_onnx: what sherpa-onnx computes before its models (kaldi-native-fbank with sherpa-onnx's
          settings): Kaldi's numerics on samples in [-1, 1], frames centred on every 10 ms with the
          signal mirrored at its edges (no snip-edges: frames = (samples + 80) // 160 at 16 kHz), mel
          bins from 20 Hz to 400 Hz below Nyquist. A model trained on it runs in sherpa-onnx as it is.
  mlperf: the MLPerf RNN-T reference: pre-emphasis 0.97, 20 ms Hann window every 10 ms, 512-point centred
          STFT (the signal reflected at its edges: audio of 16 ms or less gives no frame), power spectrum,
          Slaney mel bins 0 Hz to Nyquist, log(x + 2^-24) (NeMo's guard; the reference adds 1e-20, which
          differs on the cells under 2^-24, 12% of LibriSpeech's: kept, as the recipes' models were trained
          on it), then each bin normalised to zero mean and unit variance over the utterance (the reference
          counts ceil(samples / shift) frames, one fewer than the STFT's when the shift divides the samples,
          and leaves that last frame out of the statistics and the model: kept too, for the same reason). The reference
          also dithers by 1e-5 in training: a config's data.features.dither, as egs/librispeech/conf/mlperf.yaml
          sets it (no preset dithers by itself).
"""

from __future__ import annotations

from dataclasses import dataclass


def frame_samples(preset: "FbankPreset", sample_rate: int) -> tuple[int, int]:
    """(window, shift) in samples: the milliseconds' samples, truncated as Kaldi's (and kaldi-native-fbank's)
    WindowSize and WindowShift do (275 and 110 at 11025 Hz)."""
    return int(sample_rate * preset.frame_ms / 1000), int(sample_rate * preset.shift_ms / 1000)


def fft_size(preset: "FbankPreset", frame: int) -> int:
    """The FFT's length for frames of `frame` samples: the preset's, or the next power of two."""
    return preset.n_fft or 1 << (frame - 1).bit_length()


@dataclass(frozen=True)
class FbankPreset:
    frame_ms: float
    shift_ms: float
    n_fft: int | None  # None: the next power of two of the frame
    window: str  # povey or hann
    mel_scale: str  # htk or slaney
    low_hz: float
    high_hz: float  # <= 0: that far below Nyquist (Kaldi's high-freq)
    framing: str  # snip: frames inside the signal (Kaldi); mirrored: centred, edges mirrored (Kaldi
    # without snip-edges); stft: centred, edges reflected (torch.stft(center=True))
    remove_dc: bool
    int16_scale: bool
    log_floor: str  # 'max-eps' (Kaldi) or 'add-2^-24' (MLPerf)
    normalize_per_utterance: bool


PRESETS = {
    "kaldi": FbankPreset(25.0, 10.0, None, "povey", "htk", 20.0, 0.0, "snip", True, True, "max-eps", False),
    "sherpa_onnx": FbankPreset(25.0, 10.0, None, "povey", "htk", 20.0, -400.0, "mirrored", True, False, "max-eps",
                               False),
    "mlperf": FbankPreset(20.0, 10.0, 512, "hann", "slaney", 0.0, 0.0, "stft", False, False, "add-2^-24", True),
}

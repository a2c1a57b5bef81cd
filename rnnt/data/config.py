"""The `data` section of a recipe's conf/*.yaml, with defaults; unknown keys are errors."""

from __future__ import annotations

from dataclasses import dataclass, field

from rnnt.config import from_dict
from rnnt.data.features import PRESETS
from rnnt.data.specaugment import SpecAugmentConfig


@dataclass(frozen=True)
class FilterConfig:
    min_duration: float = 0.0  # seconds, after speed perturbation
    max_duration: float = 1e9
    max_tokens: int = 1_000_000
    max_tokens_per_frame: float = 1e9  # tokens / encoder frames (after stacking); 1.0 for one symbol per frame


@dataclass(frozen=True)
class FeatureConfig:
    preset: str = "kaldi"
    num_mel_bins: int = 80
    dither: float = 0.0  # training only
    cmvn: str | None = None  # global CMVN json from steps/compute_cmvn_stats.py


@dataclass(frozen=True)
class BatchConfig:
    type: str = "dynamic"  # static: batch_size utterances; dynamic: padded frames <= max_frames
    batch_size: int = 16
    max_frames: int = 20000  # padded input frames (before stacking) per batch
    max_batch_size: int = 512


@dataclass(frozen=True)
class DataConfig:
    sample_rate: int = 16000
    speed_perturb: tuple[float, ...] = ()  # e.g. (0.9, 1.0, 1.1), chosen uniformly per utterance in training
    filter: FilterConfig = field(default_factory=FilterConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    spec_augment: SpecAugmentConfig | None = None  # training only
    stack: int = 1
    subsample: int = 1
    shuffle_buffer: int = 0  # 0: no shuffle buffer
    sort_buffer: int = 0  # 0: no sorting
    batch: BatchConfig = field(default_factory=BatchConfig)
    buckets: int = 0  # raw lists only: MLPerf-style duration buckets (0: off)
    num_workers: int = 0
    prefetch_factor: int = 2
    pin_memory: bool = False
    seed: int = 0
    # Seconds of silence after each utterance when decoding (validation, decode, transcription, the end of a
    # stream; never in training): a unidirectional encoder emits a word's last unit only once frames after
    # it have come, which a stream gets anyway (sherpa-onnx is fed silence to flush its last chunk).
    tail_silence: float = 0.0


def data_config(values: dict | None) -> DataConfig:
    """DataConfig from the `data` mapping of a YAML config (None: all defaults)."""
    config = from_dict(DataConfig, values or {}, "data")
    if config.batch.type not in ("static", "dynamic"):
        raise ValueError(f"data.batch.type must be static or dynamic, got '{config.batch.type}'")
    if config.features.preset not in PRESETS:
        raise ValueError(f"data.features.preset must be one of {sorted(PRESETS)}, got '{config.features.preset}'")
    return config

"""The `data` section of a recipe's conf/*.yaml, with defaults; unknown keys are errors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rnnt.config import from_dict
from rnnt.data.features import PRESETS
from rnnt.data.noise_config import NoiseConfig, ReverbConfig, check_noise_configs
from rnnt.data.specaugment import SpecAugmentConfig


@dataclass(frozen=True)
class FilterConfig:  # training only: validation and decoding read every utterance
    min_duration: float = 0.0  # seconds, after speed perturbation (training only, as every key here)
    max_duration: float = 1e9  # seconds, after speed perturbation
    duration_before_speed: bool = False  # min_duration and max_duration count the audio as recorded, before
    # data.speed_perturb (as MLPerf's RNN-T reference filters): the same utterances every epoch
    max_tokens: int = 1_000_000  # units of the transcript
    max_tokens_per_frame: float = 1e9  # units / the encoder's output frames; one symbol per frame caps it at 1


@dataclass(frozen=True)
class FeatureConfig:
    preset: str = "kaldi"  # fbank numerics: kaldi, sherpa_onnx or mlperf (rnnt.data.features)
    num_mel_bins: int = 80  # mel filterbank channels per frame
    dither: float = 0.0  # Gaussian noise added to the samples (kaldi: in 16-bit units, else of [-1, 1]); training only
    cmvn: str | None = None  # global CMVN stats: compute_cmvn_stats.py's, a Kaldi matrix or WeNet's global_cmvn


@dataclass(frozen=True)
class BatchConfig:
    type: str = "dynamic"  # static: batch_size utterances; dynamic: padded frames <= max_frames (a longer one alone)
    batch_size: int = 16  # static (and data.buckets): utterances per batch of a rank
    max_frames: int = 20000  # padded input frames (before stacking) per batch
    max_batch_size: int = 512  # dynamic: at most this many utterances


@dataclass(frozen=True)
class DataConfig:
    sample_rate: int = 16000  # Hz; audio at another rate is resampled
    speed_perturb: tuple[float, ...] = ()  # e.g. (0.9, 1.0, 1.1), chosen uniformly per utterance in training
    filter: FilterConfig = field(default_factory=FilterConfig)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    spec_augment: SpecAugmentConfig | None = None  # SpecAugment masks, training only (null: none)
    noise: NoiseConfig | None = None  # noise recordings mixed in, training only (null: none)
    reverb: ReverbConfig | None = None  # room impulse responses convolved in, training only (null: none)
    stack: int = 1  # consecutive fbank frames put side by side in one frame
    subsample: int = 1  # frames between stacked frames (stack 3, subsample 3: MLPerf's 30 ms frames)
    shuffle_buffer: int = 0  # training: utterances shuffled within a window of this many (0: no shuffle buffer)
    sort_buffer: int = 0  # utterances sorted by length within windows of this many before batching (0: no sorting)
    batch: BatchConfig = field(default_factory=BatchConfig)
    buckets: int = 0  # raw lists only: MLPerf-style duration buckets (0: off)
    num_workers: int = 0  # DataLoader worker processes (0: in the training process)
    prefetch_factor: int = 2  # batches each worker prepares ahead
    pin_memory: bool = False  # batches in page-locked memory (faster copies to a GPU)
    cache_audio_mb: int = 0  # decoded audio kept for later epochs, up to this many MB (0: off); only with num_workers 0
    seed: int = 0  # seeds the data order, speed perturbation, dither and SpecAugment (with the epoch)

    # Seconds of silence after each utterance when decoding (validation, decode, transcription, the end of a
    # stream; never in training): a unidirectional encoder emits a word's last unit only once frames after
    # it have come, which a stream gets anyway (sherpa-onnx is fed silence to flush its last chunk).
    tail_silence: float = 0.0


MAX_TAIL_SILENCE = 10.0  # seconds: 0.3-1 s flushes an encoder's last chunk; 1e9 was taken, and asked 1e9 s of memory


def dither_problem(features: FeatureConfig) -> str | None:
    """Why the dither cannot be meant (None: it can): a negative amount, or with a preset whose samples stay in
    [-1, 1], an amount of 16-bit units (Kaldi's and WeNet's dither 1.0 was noise as loud as the speech)."""
    dither = features.dither
    if not 0 <= dither < math.inf:
        return f"data.features.dither must be 0 or more and finite, got {dither}"
    if dither > 0.1 and not PRESETS[features.preset].int16_scale:
        return (f"data.features.dither {dither} is noise of about the speech's own level: preset "
                f"{features.preset} keeps the samples in [-1, 1] (the kaldi preset's are 16-bit values), so Kaldi's "
                f"and WeNet's dither {dither:g} is {dither / 32768:.1e} here (MLPerf's 1e-5)")
    return None


def data_config(values: dict | None) -> DataConfig:
    """DataConfig from the `data` mapping of a YAML config (None: all defaults)."""
    config = from_dict(DataConfig, values or {}, "data")
    if config.batch.type not in ("static", "dynamic"):
        raise ValueError(f"data.batch.type must be static or dynamic, got '{config.batch.type}'")
    for key in ("batch_size", "max_frames", "max_batch_size"):
        if getattr(config.batch, key) < 1:
            raise ValueError(f"data.batch.{key} must be at least 1, got {getattr(config.batch, key)}")
    for key, value in (("sample_rate", config.sample_rate), ("features.num_mel_bins", config.features.num_mel_bins)):
        if value < 1:
            raise ValueError(f"data.{key} must be at least 1, got {value}")
    if not all(0 < factor < math.inf for factor in config.speed_perturb):
        raise ValueError(f"data.speed_perturb factors must be positive and finite, got {list(config.speed_perturb)}")
    masks = config.spec_augment  # (-2 masks: none, silently)
    for section, name, key in [(config, "", key) for key in ("shuffle_buffer", "sort_buffer", "buckets",
                                                             "num_workers", "cache_audio_mb", "tail_silence")] + \
            [(masks, "spec_augment.", key) for key in ("freq_masks", "freq_width", "time_masks", "time_width",
                                                       "time_mask_ratio", "max_time_masks") if masks is not None]:
        if not 0 <= getattr(section, key) < math.inf:
            raise ValueError(f"data.{name}{key} must be 0 or more and finite, got {getattr(section, key)}")
    if config.tail_silence > MAX_TAIL_SILENCE:
        raise ValueError(f"data.tail_silence is seconds of silence after each utterance decoded, at most "
                         f"{MAX_TAIL_SILENCE:g}, got {config.tail_silence:g}")
    if config.features.preset not in PRESETS:
        raise ValueError(f"data.features.preset must be one of {sorted(PRESETS)}, got '{config.features.preset}'")
    if problem := dither_problem(config.features):
        raise ValueError(problem)
    check_noise_configs(config.noise, config.reverb)
    if masks is not None and not 0 < masks.max_time_share <= 1:
        raise ValueError(f"data.spec_augment.max_time_share is a share of the utterance, above 0 and at most 1, got "
                         f"{masks.max_time_share}")
    if masks is not None and masks.adaptive and not 0 < masks.time_width <= 1:
        raise ValueError(f"data.spec_augment.time_width is a share of the utterance when adaptive (0.05: 5%), got "
                         f"{masks.time_width}: each of its masks could cover the whole utterance")
    if masks is not None and not masks.adaptive and masks.time_masks > 0 and 0 < masks.time_width < 1:
        raise ValueError(f"data.spec_augment.time_width counts frames unless adaptive: true, got {masks.time_width} "
                         "(every time mask would be 0 frames wide); set adaptive: true for a share of the utterance")
    return config

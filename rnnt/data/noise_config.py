"""The data.noise and data.reverb sections of a config: which recordings of noise and which room impulse responses
rnnt.data.noise adds to training audio, and how often. Reading a config needs no audio library: steps/train.py's
config checks and the benchmarks run where libsndfile is not installed (a GPU machine's own Python)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class NoiseConfig:
    """Noise mixed into training utterances (docs/data.md, "Noise and reverberation"); its wav_scp must be given."""

    wav_scp: str = ""  # the noise recordings: a Kaldi wav.scp of files (all of MUSAN, or its noise, music or speech)
    prob: float = 0.5  # the share of training utterances noise is added to
    snr: tuple[float, ...] = (10.0, 20.0)  # dB, the utterance's power over the noise's: drawn uniformly in [low, high]
    count: tuple[int, ...] = (1, 1)  # recordings summed into the noise, drawn uniformly (babble: speech, [3, 7])
    cache_mb: int = 512  # recordings kept decoded in memory, the most recently used, up to this many MB, in each
    # process that reads training data (every rank's, and each of its data.num_workers); 0: none
    wav_scp_sha256: str = ""  # set by steps/train.py: the list's content, so that an edited list trains anew


@dataclass(frozen=True)
class ReverbConfig:
    """Rooms' reverberation of training utterances, before any noise; its wav_scp must be given."""

    wav_scp: str = ""  # room impulse responses: a Kaldi wav.scp of files (e.g. OpenSLR 28's simulated rooms)
    prob: float = 0.5  # the share of training utterances reverberated (before any noise), their power kept
    cache_mb: int = 128  # impulse responses kept decoded in memory, the most recently used, up to this many MB
    wav_scp_sha256: str = ""  # set by steps/train.py: the list's content, so that an edited list trains anew


def with_recording_lists(data, change):
    """A DataConfig with its data.noise and data.reverb (those it has) put through change(section)."""
    return dataclasses.replace(data, **{key: change(getattr(data, key)) for key in ("noise", "reverb")
                                        if getattr(data, key) is not None})


SNR_BOUND = 100  # dB either way: noise at 100 dB under the speech is none (1e9 dB overflowed its scale's float)


def check_noise_configs(noise: NoiseConfig | None, reverb: ReverbConfig | None) -> None:
    """ValueError naming the key of a value that cannot work."""
    for name, section in (("noise", noise), ("reverb", reverb)):
        if section is None:
            continue
        if not section.wav_scp:
            raise ValueError(f"data.{name}.wav_scp: give the Kaldi wav.scp of its recordings")
        if not 0 <= section.prob <= 1:
            raise ValueError(f"data.{name}.prob is a share of the utterances, from 0 to 1, got {section.prob}")
        if section.cache_mb < 0:
            raise ValueError(f"data.{name}.cache_mb must not be negative, got {section.cache_mb}")
    if noise is None:
        return
    if len(noise.snr) != 2 or noise.snr[0] > noise.snr[1] or not all(-SNR_BOUND <= x <= SNR_BOUND for x in noise.snr):
        raise ValueError(f"data.noise.snr is [low, high] in dB, -{SNR_BOUND} <= low <= high <= {SNR_BOUND}, got "
                         f"{list(noise.snr)}")
    if len(noise.count) != 2 or not 1 <= noise.count[0] <= noise.count[1]:
        raise ValueError(f"data.noise.count is [fewest, most] recordings, 1 <= fewest <= most, got {list(noise.count)}")

"""SpecAugment (Park et al. 2019): frequency masks and time masks, optionally adaptive to the length.

Adaptive time masks (Park et al. 2020): the number of masks and their maximum width grow with the
utterance's length T: count = min(max_time_masks, round(time_mask_ratio * T)), width <= time_width * T.
Either way no time mask is wider than max_time_share * T (Park et al. 2019's p; their SS policy, these defaults,
takes 0.2): two masks of up to 40 frames covered the whole of a 20-frame utterance in 12% of draws, a
transcript to learn from no audio.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SpecAugmentConfig:
    freq_masks: int = 2  # frequency masks per utterance
    freq_width: int = 27  # maximum width in mel bins
    time_masks: int = 2  # fixed count (when not adaptive)
    time_width: float = 40  # maximum width: frames, or, when adaptive, a share of T in (0, 1] (0.05: 5%)
    adaptive: bool = False  # time masks by length (see the module docstring)
    time_mask_ratio: float = 0.04  # adaptive count per frame
    max_time_masks: int = 20  # adaptive: at most this many time masks
    max_time_share: float = 0.2  # no time mask wider than this share of the utterance's frames (1.0: no bound)
    value: float | None = None  # what masked cells become; None: the utterance's mean


def spec_augment(feats: torch.Tensor, config: SpecAugmentConfig, generator: torch.Generator) -> torch.Tensor:
    """Masks a (frames, bins) tensor (a masked copy); randomness comes from generator only.

    Masked cells take config.value, by default the utterance's mean: 0 is the mean only of normalised
    features, and raw log-mel energies (around 5 to 15) masked with 0 get bands far outside anything
    the model sees otherwise, which skews the input normalisation and stalls training.
    """
    out = feats.clone()
    value = float(feats.mean()) if config.value is None else config.value
    frames, bins = out.shape

    def randint(high: int) -> int:
        return int(torch.randint(0, max(high, 0) + 1, (1,), generator=generator))

    for _ in range(config.freq_masks):
        width = randint(min(config.freq_width, bins))
        start = randint(bins - width)
        out[:, start:start + width] = value
    if config.adaptive:
        count = min(config.max_time_masks, round(config.time_mask_ratio * frames))
        max_width = int(config.time_width * frames)
    else:
        count, max_width = config.time_masks, int(config.time_width)
    max_width = min(max_width, int(config.max_time_share * frames))
    for _ in range(count):
        width = randint(min(max_width, frames))
        start = randint(frames - width)
        out[start:start + width, :] = value
    return out

"""The steps between fbank and the encoder (global CMVN, frame stacking) over a padded batch, as a module.

The data pipeline applies them per utterance (rnnt.data.stages.features_of, rnnt.data.stacking); an
exported model and a stream take raw fbank frames and need them inside the model. Per sequence this
gives exactly what the pipeline gives: frames past a sequence's length count as zeros when stacked.
"""

from __future__ import annotations

import torch


class FeatureFrontEnd(torch.nn.Module):
    def __init__(self, stack: int, subsample: int, cmvn: tuple[torch.Tensor, torch.Tensor] | None = None):
        super().__init__()
        self.stack, self.subsample = stack, subsample
        self.register_buffer("mean", None if cmvn is None else cmvn[0].clone().float())
        self.register_buffer("std", None if cmvn is None else cmvn[1].clone().float())

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feats (B, T, bins), lengths (B,) -> (B, ceil(T / subsample), stack * bins) and the new lengths."""
        if self.mean is not None:
            feats = (feats - self.mean) / self.std
        valid = torch.arange(feats.shape[1], device=feats.device)[None, :] < lengths[:, None]
        feats = feats.masked_fill(~valid[..., None], 0.0)
        out_frames = (feats.shape[1] + self.subsample - 1) // self.subsample
        # a fixed amount of zeros (the last index is at most T - 1 + stack - 1): nothing computed from T
        # is baked into a traced graph
        padded = torch.cat([feats, feats.new_zeros(feats.shape[0], self.stack, feats.shape[2])], dim=1)
        index = (torch.arange(out_frames, device=feats.device)[:, None] * self.subsample
                 + torch.arange(self.stack, device=feats.device)[None, :])
        stacked = padded[:, index.reshape(-1)].reshape(feats.shape[0], out_frames, self.stack * feats.shape[2])
        return stacked, torch.div(lengths + self.subsample - 1, self.subsample, rounding_mode="floor")

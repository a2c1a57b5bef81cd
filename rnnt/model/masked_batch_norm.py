"""Batch normalisation of padded sequences (B, T, D) over their channels D: in training, the statistics are
those of the valid frames only, so that how much padding a batch holds changes nothing; in evaluation
every frame is normalised by the running statistics, a per-channel affine map that padding cannot reach.
A training batch of a single valid frame, which has no variance, is normalised as in evaluation, the
running statistics left as they were."""

from __future__ import annotations

import torch


class MaskedBatchNorm(torch.nn.BatchNorm1d):
    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, D), valid (B, T) bool (None: every frame) -> (B, T, D); padded frames come out 0 in
        training and are garbage in evaluation."""
        if self.training and valid is not None:
            frames = x[valid]
            normed = torch.zeros_like(x)
            normed[valid] = super().forward(frames) if frames.shape[0] > 1 else self.by_running_statistics(frames)
            return normed
        if self.training and x.shape[0] * x.shape[1] < 2:
            return self.by_running_statistics(x.reshape(-1, x.shape[-1])).reshape(x.shape)
        return super().forward(x.transpose(1, 2)).transpose(1, 2)

    def by_running_statistics(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, D) frames normalised as in evaluation."""
        return torch.nn.functional.batch_norm(frames, self.running_mean, self.running_var, self.weight, self.bias,
                                              False, 0.0, self.eps)

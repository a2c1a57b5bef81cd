"""Batch normalisation of padded sequences (B, T, D) over their channels D: in training, the statistics are
those of the valid frames only, so that how much padding a batch holds changes nothing; in evaluation
every frame is normalised by the running statistics, a per-channel affine map that padding cannot reach."""

from __future__ import annotations

import torch


class MaskedBatchNorm(torch.nn.BatchNorm1d):
    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, D), valid (B, T) bool (None: every frame) -> (B, T, D); padded frames come out 0 in
        training and are garbage in evaluation."""
        if self.training and valid is not None:
            normed = torch.zeros_like(x)
            normed[valid] = super().forward(x[valid])
            return normed
        return super().forward(x.transpose(1, 2)).transpose(1, 2)

"""Batch normalisation of padded sequences (B, T, D) over their channels D: in training, the statistics are
those of the valid frames only, so that how much padding a batch holds changes nothing; in evaluation
every frame is normalised by the running statistics, a per-channel affine map that padding cannot reach.
A training batch of a single valid frame, which has no variance, is normalised as in evaluation, the
running statistics left as they were.

Where reading the device is not free (a GPU), the valid frames' statistics are masked sums: picking the frames
out by the mask reads their number on the host, a stall of every training step at every layer normalised. On
the CPU the frames are picked out, as they always were: its training runs give the results they gave (the two
differ by float rounding, which a run's course amplifies)."""

from __future__ import annotations

import torch

from rnnt import host_reads


class MaskedBatchNorm(torch.nn.BatchNorm1d):
    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, D), valid (B, T) bool (None: every frame) -> (B, T, D); padded frames come out 0 in
        training and are garbage in evaluation."""
        if self.training and valid is not None and host_reads.free(x.device):
            frames = x[valid]
            normed = torch.zeros_like(x)
            normed[valid] = super().forward(frames) if frames.shape[0] > 1 else self.by_running_statistics(frames)
            return normed
        if self.training and valid is not None:
            return self.normalise_valid_frames(x, valid)
        if self.training and x.shape[0] * x.shape[1] < 2:
            return self.by_running_statistics(x.reshape(-1, x.shape[-1])).reshape(x.shape)
        return super().forward(x.transpose(1, 2)).transpose(1, 2)

    def normalise_valid_frames(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Training: x by its valid frames' mean and (biased) variance, in float32; the running statistics move
        towards them (the unbiased variance), by the momentum, when there are two frames or more."""
        mask = valid.unsqueeze(-1)
        frames = torch.where(mask, x.float(), 0.0)  # padding of any value (NaN too) neither counts nor gets gradient
        count = valid.sum()
        n = count.clamp(min=1).float()
        mean = frames.sum(1).sum(0) / n  # over time first: the sums are those of the valid frames, whatever padding
        variance = torch.where(mask, frames - mean, 0.0).square().sum(1).sum(0) / n
        enough = count > 1
        mean, variance = torch.where(enough, mean, self.running_mean), torch.where(enough, variance, self.running_var)
        normed = (frames - mean) * torch.rsqrt(variance + self.eps)
        if self.affine:
            normed = normed * self.weight + self.bias
        self.update_running_statistics(mean.detach(), variance.detach(), n, enough)
        return torch.where(mask, normed, 0.0).to(x.dtype)

    @torch.no_grad()
    def update_running_statistics(self, mean: torch.Tensor, variance: torch.Tensor, n: torch.Tensor,
                                  enough: torch.Tensor) -> None:
        """As BatchNorm1d updates them (momentum None: the cumulative average), where `enough` holds."""
        self.num_batches_tracked.add_(enough.long())
        momentum = self.momentum if self.momentum is not None else 1.0 / self.num_batches_tracked.clamp(min=1)
        weight = enough.float() * momentum
        self.running_mean.mul_(1 - weight).add_(weight * mean)
        self.running_var.mul_(1 - weight).add_(weight * variance * n / (n - 1).clamp(min=1))

    def by_running_statistics(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, D) frames normalised as in evaluation."""
        return torch.nn.functional.batch_norm(frames, self.running_mean, self.running_var, self.weight, self.bias,
                                              False, 0.0, self.eps)

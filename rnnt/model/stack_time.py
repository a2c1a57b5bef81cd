"""StackTime: concatenates `factor` consecutive frames, dividing the frame rate by `factor`.

As in the MLPerf RNN-T encoder, it sits between two LSTM stacks, so the upper stack runs on a
sequence `factor` times shorter. Lengths become ceil(T / factor); the tail is padded with zeros.
"""

from __future__ import annotations

import torch


class StackTime(torch.nn.Module):
    def __init__(self, factor: int):
        super().__init__()
        if factor < 1:
            raise ValueError(f"StackTime factor must be >= 1, got {factor}")
        self.factor = factor

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> (B, ceil(T / factor), factor * D); lengths likewise."""
        if self.factor == 1:
            return x, lengths
        B, T, D = x.shape
        out_T = (T + self.factor - 1) // self.factor
        # zeros of a fixed size, then a slice: no padding amount computed from T, so a traced (ONNX)
        # graph stays right for every length
        x = torch.cat([x, x.new_zeros(B, self.factor - 1, D)], dim=1)[:, :out_T * self.factor]
        return x.reshape(B, out_T, self.factor * D), torch.div(lengths + self.factor - 1, self.factor,
                                                               rounding_mode="floor")

    def extra_repr(self) -> str:
        return f"factor={self.factor}"

"""The encoder: [BatchNorm] -> LSTM x N -> StackTime -> LSTM x M -> output, as the MLPerf RNN-T encoder.

With norm="layer" every LSTM layer's output is layer-normalised (the LSTM cells themselves stay the
fused library kernels); dropout applies between layers.

The LSTMs run over the padded batch as it is: a unidirectional LSTM's output at a frame t < length
never depends on the padding after it, so packing would change nothing that is used, and on CPU a
packed batch of unequal lengths leaves the fused kernel for a path about 8x slower.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.model.stack_time import StackTime


@dataclass(frozen=True)
class EncoderConfig:
    input_dim: int = 240
    hidden: int = 1024
    pre_layers: int = 2
    post_layers: int = 3
    stack_time: int = 2
    input_batch_norm: bool = False
    norm: str = "none"  # none or layer
    dropout: float = 0.1


class LSTMStack(torch.nn.Module):
    """Single-layer LSTMs in a row, each optionally followed by LayerNorm, with dropout between."""

    def __init__(self, input_dim: int, hidden: int, layers: int, norm: str, dropout: float):
        super().__init__()
        self.lstms = torch.nn.ModuleList(
            torch.nn.LSTM(input_dim if i == 0 else hidden, hidden, batch_first=True) for i in range(layers))
        self.norms = torch.nn.ModuleList(
            torch.nn.LayerNorm(hidden) if norm == "layer" else torch.nn.Identity() for _ in range(layers))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, input_dim) padded -> (B, T, hidden); frames past a sequence's length are garbage."""
        for lstm, norm in zip(self.lstms, self.norms):
            x, _ = lstm(x)
            x = self.dropout(norm(x))
        return x


class Encoder(torch.nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        if config.norm not in ("none", "layer"):
            raise ValueError(f"encoder.norm must be none or layer, got '{config.norm}'")
        self.config = config
        self.input_norm = torch.nn.BatchNorm1d(config.input_dim) if config.input_batch_norm else None
        self.pre = LSTMStack(config.input_dim, config.hidden, config.pre_layers, config.norm, config.dropout)
        self.stack = StackTime(config.stack_time)
        post_input = config.hidden * config.stack_time if config.pre_layers else config.input_dim * config.stack_time
        self.post = LSTMStack(post_input, config.hidden, config.post_layers, config.norm, config.dropout)

    @property
    def output_dim(self) -> int:
        return self.config.hidden

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feats (B, T, input_dim) -> (B, T', hidden), with T' = ceil(T / stack_time); output frames past
        a sequence's new length are not zeroed (every consumer masks by length)."""
        valid = torch.arange(feats.shape[1], device=feats.device)[None, :] < lengths.to(feats.device)[:, None]
        if self.input_norm is not None:  # statistics of the real frames only, not of the padding
            normed = torch.zeros_like(feats)
            normed[valid] = self.input_norm(feats[valid])
            feats = normed
        # StackTime joins a sequence's last frames with the ones after its length: zeros, as when alone.
        x, lengths = self.stack(self.pre(feats).masked_fill(~valid[..., None], 0.0), lengths)
        return self.post(x), lengths

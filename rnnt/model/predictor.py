"""The prediction network: the label history -> a vector per position u = 0..U.

Position u sees the blank (the start symbol) followed by the first u labels. Two kinds:
  lstm:      embedding -> LSTM layers (the MLPerf prediction network);
  stateless: embedding -> a causal depthwise convolution over the last `context` labels -> ReLU
             (no recurrent state: decoding needs only the last labels).
step() advances one label at a time for decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PredictorConfig:
    kind: str = "lstm"  # lstm or stateless
    embed_dim: int = 320
    hidden: int = 320
    layers: int = 2
    context: int = 2  # stateless: labels seen
    dropout: float = 0.1


class Predictor(torch.nn.Module):
    def __init__(self, config: PredictorConfig, vocab_size: int, blank: int = 0):
        super().__init__()
        if config.kind not in ("lstm", "stateless"):
            raise ValueError(f"predictor.kind must be lstm or stateless, got '{config.kind}'")
        self.config, self.blank = config, blank
        self.embedding = torch.nn.Embedding(vocab_size, config.embed_dim)
        self.dropout = torch.nn.Dropout(config.dropout)
        if config.kind == "lstm":
            self.lstm = torch.nn.LSTM(config.embed_dim, config.hidden, config.layers, batch_first=True,
                                      dropout=config.dropout if config.layers > 1 else 0.0)
        else:
            self.conv = torch.nn.Conv1d(config.embed_dim, config.embed_dim, config.context,
                                        groups=config.embed_dim, bias=False)

    @property
    def output_dim(self) -> int:
        return self.config.hidden if self.config.kind == "lstm" else self.config.embed_dim

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, U) -> (B, U+1, output_dim); position 0 sees only the start symbol."""
        # The history before the first label is the start symbol (blank), as in step().
        history = 1 if self.config.kind == "lstm" else self.config.context
        start = torch.full((tokens.shape[0], history), self.blank, dtype=tokens.dtype, device=tokens.device)
        x = self.dropout(self.embedding(torch.cat([start, tokens], dim=1)))
        if self.config.kind == "lstm":
            out, _ = self.lstm(x)
            return self.dropout(out)
        return torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)

    def initial_state(self, batch: int, device: torch.device):
        """The state before any label: LSTM (h, c), or the last context labels (all the start symbol)."""
        if self.config.kind == "lstm":
            zeros = torch.zeros(self.config.layers, batch, self.config.hidden, device=device)
            return zeros, zeros.clone()
        return torch.full((batch, self.config.context), self.blank, dtype=torch.long, device=device)

    def step(self, tokens: torch.Tensor, state) -> tuple[torch.Tensor, object]:
        """One label per sequence: tokens (B,) and the state -> (B, output_dim) output and the new state."""
        if self.config.kind == "lstm":
            out, state = self.lstm(self.embedding(tokens)[:, None, :], state)
            return out[:, 0], state
        history = torch.cat([state[:, 1:], tokens[:, None]], dim=1)
        x = self.embedding(history).transpose(1, 2)  # (B, E, context)
        return torch.relu(self.conv(x))[:, :, 0], history

    def select_state(self, state, index: torch.Tensor):
        """The states of the sequences at `index` (for beam search)."""
        if self.config.kind == "lstm":
            return state[0][:, index], state[1][:, index]
        return state[index]

    def merge_state(self, new, old, take_new: torch.Tensor):
        """Per sequence, the new state where take_new (B,) is true, else the old one."""
        if self.config.kind == "lstm":
            mask = take_new[None, :, None]
            return torch.where(mask, new[0], old[0]), torch.where(mask, new[1], old[1])
        return torch.where(take_new[:, None], new, old)

"""The joint network: projections of encoder and predictor outputs, added, activated, output layer."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.model.dropout import Dropout
from rnnt.model.value_checks import dropout_problems, size_problems


@dataclass(frozen=True)
class JoinerConfig:
    hidden: int = 512  # width the encoder and predictor outputs are projected to and added at
    activation: str = "relu"  # of the sum of the two projections: relu or tanh
    dropout: float = 0.0  # between the activation and the output layer (the MLPerf reference: 0.3)

    def problems(self) -> list[str]:
        """The values no joiner can be built with, each a sentence naming its key (a hidden of 0 trained with
        logits that were its output bias whatever the audio)."""
        activation = [] if self.activation in ("relu", "tanh") else \
            [f"model.joiner.activation must be relu or tanh, got '{self.activation}'"]
        return activation + size_problems("joiner", hidden=self.hidden) + \
            dropout_problems("joiner", dropout=self.dropout)


class Joiner(torch.nn.Module):
    def __init__(self, config: JoinerConfig, encoder_dim: int, predictor_dim: int, vocab_size: int):
        super().__init__()
        if problems := config.problems():
            raise ValueError("; ".join(problems))
        self.activation = config.activation
        self.dropout = Dropout(config.dropout)
        self.enc_proj = torch.nn.Linear(encoder_dim, config.hidden)
        self.pred_proj = torch.nn.Linear(predictor_dim, config.hidden)
        self.output = torch.nn.Linear(config.hidden, vocab_size)

    def activate(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) if self.activation == "relu" else torch.tanh(x)

    def forward(self, enc_proj: torch.Tensor, pred_proj: torch.Tensor) -> torch.Tensor:
        """Logits from already projected inputs that broadcast against each other (..., hidden)."""
        return self.output(self.dropout(self.activate(enc_proj + pred_proj)))

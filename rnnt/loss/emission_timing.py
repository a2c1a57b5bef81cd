"""Regularisers of when a transducer emits: both push label arcs earlier, for streaming latency.

- FastEmit (Yu et al., 2021) weighs the label arcs' posteriors 1 + lambda in the gradient; the loss
  value stays -log P.
- The delay penalty (Kang et al., 2022, "Delay-penalized transducer for low-latency streaming ASR", k2's
  delay_penalty) adds penalty * ((T_b - 1) / 2 - t) to the log-probability of every label arc at frame t:
  labels before the utterance's middle frame gain, labels after it lose, so every alignment's score
  falls by penalty times its summed label delay (up to a constant per utterance). The loss is then
  -log of the penalised sum over alignments, and its gradient follows from the penalised posteriors. So
  is the validation loss: a run with a penalty is not comparable by loss with one without (k2's too).
"""

from __future__ import annotations

import torch


def fastemit_weighted(gamma_label: torch.Tensor, fastemit_lambda: float) -> torch.Tensor:
    """The label arcs' posteriors weighted 1 + fastemit_lambda (the blank arcs' stay 1)."""
    return gamma_label * (1.0 + fastemit_lambda) if fastemit_lambda else gamma_label


def delay_penalised(label_lp: torch.Tensor, logit_lengths: torch.Tensor, delay_penalty: float) -> torch.Tensor:
    """label_lp (B, T, U+1) label-arc log-probs plus delay_penalty * ((T_b - 1) / 2 - t) at frame t."""
    if not delay_penalty:
        return label_lp
    frames = torch.arange(label_lp.shape[1], device=label_lp.device, dtype=label_lp.dtype)
    middle = (logit_lengths.to(device=label_lp.device, dtype=label_lp.dtype) - 1) / 2
    return label_lp + (delay_penalty * (middle[:, None] - frames[None, :]))[:, :, None]


def check_emission_timing(fastemit_lambda: float, delay_penalty: float) -> None:
    """Both regularisers are weights of at least 0 (NaN is refused too)."""
    for name, value in (("fastemit_lambda", fastemit_lambda), ("delay_penalty", delay_penalty)):
        if not value >= 0:
            raise ValueError(f"loss.{name} must be >= 0, got {value}")

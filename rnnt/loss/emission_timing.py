"""Regularisers of when a transducer emits: all three push label arcs earlier, for streaming latency.

- FastEmit (Yu et al., 2021) weighs the label arcs' posteriors 1 + lambda in the gradient; the loss
  value stays -log P.
- The delay penalty (Kang et al., 2022, "Delay-penalized transducer for low-latency streaming ASR", k2's
  delay_penalty) adds penalty * ((T_b - 1) / 2 - t) to the log-probability of every label arc at frame t:
  labels before the utterance's middle frame gain, labels after it lose, so every alignment's score
  falls by penalty times its summed label delay (up to a constant per utterance). The loss is then
  -log of the penalised sum over alignments, and its gradient follows from the penalised posteriors. So
  is the validation loss: a run with a penalty is not comparable by loss with one without (k2's too).
- Self-alignment (Kim et al., 2021, "Reducing Streaming ASR Model Delay with Self Alignment") finds the
  model's own most likely alignment (Viterbi) and adds -self_alignment * log P of each of its labels one
  frame earlier: it pulls the alignment the model has towards the frame before, whatever the silence
  around the speech, where the delay penalty rewards emitting anywhere early. A label already at the
  earliest frame it can take stays. The term is part of the loss value, validation's too.
"""

from __future__ import annotations

import math

import torch

from rnnt.loss.lattice import best_path_label_frames, lattice_posteriors


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


def self_alignment(blank_lp: torch.Tensor, label_lp: torch.Tensor, logit_lengths: torch.Tensor,
                   target_lengths: torch.Tensor, one_sym_per_frame: bool, weight: float, backend: str = "auto"):
    """The self-alignment term: (arcs, loss) or (None, 0.0) at weight 0.

    arcs (B, T, U+1) holds weight on the label arc one frame before each label of the best alignment and 0
    elsewhere; loss (B,) is -sum of arcs times label_lp, and d loss / d label_lp = -arcs, so the arcs add to
    the label posteriors where the gradient is formed. A label stays where it is when the frame before is
    not free: frame 0, or (one symbol per frame) the frame of the label before it, which could not move;
    and where that arc does not exist (outside a pruned band).
    """
    if not weight:
        return None, 0.0
    frames = best_path_label_frames(blank_lp, label_lp, logit_lengths, target_lengths, one_sym_per_frame, backend)
    B, T, U1 = label_lp.shape
    position = torch.arange(frames.shape[1], device=frames.device)[None, :]
    earliest = position if one_sym_per_frame else torch.zeros_like(position)  # the first frame label u can take
    # each label u is at one frame: the cell (frame - 1, u) of each, False where the label stays
    cell = (frames - 1).clamp(min=0) * U1 + position
    moved = torch.zeros(B, T * U1, dtype=torch.bool, device=label_lp.device)
    moved.scatter_(1, cell, frames > earliest)
    moved = moved.view(B, T, U1) & torch.isfinite(label_lp)
    arcs = moved.to(label_lp.dtype) * weight
    return arcs, -weight * label_lp.where(moved, 0.0).sum((1, 2))


def timed_lattice_loss(blank_lp: torch.Tensor, label_lp: torch.Tensor, logit_lengths: torch.Tensor,
                       target_lengths: torch.Tensor, options):
    """The loss (B,) over the lattice of options (rnnt.loss.options.LatticeOptions) with its regularisers,
    and the blank and label arcs' weights (B, T, U+1) in its gradient (d loss / d arc log-prob = -weight)."""
    one_sym, backend = options.one_sym_per_frame, options.backend
    log_like, gamma_blank, gamma_label = lattice_posteriors(
        blank_lp, delay_penalised(label_lp, logit_lengths, options.delay_penalty), logit_lengths, target_lengths,
        one_sym, backend
    )
    gamma_label = fastemit_weighted(gamma_label, options.fastemit_lambda)
    arcs, aligned = self_alignment(blank_lp, label_lp, logit_lengths, target_lengths, one_sym,
                                   options.self_alignment, backend)
    if arcs is not None:
        gamma_label = gamma_label + arcs
    return aligned - log_like, gamma_blank, gamma_label


def check_emission_timing(fastemit_lambda: float, delay_penalty: float, self_alignment_weight: float = 0.0) -> None:
    """The regularisers are finite weights of at least 0 (NaN and infinity are refused too: a NaN loss or gradient)."""
    for name, value in (("fastemit_lambda", fastemit_lambda), ("delay_penalty", delay_penalty),
                        ("self_alignment", self_alignment_weight)):
        if not 0 <= value < math.inf:
            raise ValueError(f"loss.{name} must be a finite weight, at least 0, got {value}")

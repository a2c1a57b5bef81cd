"""Packed joiner input: enc[b, t] + pred[b, u] for the valid cells only, in (b, t, u) row order.

Packing skips the padding cells (t >= T_b or u > U_b) that a padded (B, T, U+1, H) tensor carries;
the rows are written into one preallocated buffer, so no per-utterance pieces are concatenated.
"""

from __future__ import annotations

import torch


def pack_joiner_input(enc: torch.Tensor, pred: torch.Tensor, logit_lengths: torch.Tensor,
                      target_lengths: torch.Tensor) -> torch.Tensor:
    """enc (B, T, H), pred (B, U+1, H) -> (sum_b T_b * (U_b+1), H), the order transducer_loss expects."""
    T_b, U1_b = logit_lengths.tolist(), (target_lengths + 1).tolist()
    rows = enc.new_empty(sum(t * u for t, u in zip(T_b, U1_b)), enc.shape[2])
    start = 0
    for b, (t, u) in enumerate(zip(T_b, U1_b)):
        rows[start:start + t * u] = (enc[b, :t, None, :] + pred[b, None, :u, :]).reshape(t * u, -1)
        start += t * u
    return rows

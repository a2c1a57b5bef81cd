"""Packed joiner input: enc[b, t] + pred[b, u] for the valid cells only, in (b, t, u) row order.

Packing skips the padding cells (t >= T_b or u > U_b) that a padded (B, T, U+1, H) tensor carries.
Forward writes the rows into one buffer; backward sums each utterance's rows into the gradients of
enc (over u) and pred (over t) directly, with no copy of the whole gradient.
"""

from __future__ import annotations

import torch

from rnnt.loss.checks import check_length_pair


class _PackJoinerInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, enc, pred, logit_lengths, target_lengths):
        sizes = list(zip(logit_lengths.tolist(), (target_lengths + 1).tolist()))
        rows = enc.new_empty(sum(t * u for t, u in sizes), enc.shape[2])
        start = 0
        for b, (t, u) in enumerate(sizes):
            torch.add(enc[b, :t, None, :], pred[b, None, :u, :], out=rows[start:start + t * u].view(t, u, -1))
            start += t * u
        ctx.sizes, ctx.shapes = sizes, (enc.shape, pred.shape)
        return rows

    @staticmethod
    def backward(ctx, grad_rows):
        enc_shape, pred_shape = ctx.shapes
        grad_enc = grad_rows.new_zeros(enc_shape) if ctx.needs_input_grad[0] else None
        grad_pred = grad_rows.new_zeros(pred_shape) if ctx.needs_input_grad[1] else None
        start = 0
        for b, (t, u) in enumerate(ctx.sizes):
            block = grad_rows[start:start + t * u].view(t, u, -1)
            if grad_enc is not None:
                torch.sum(block, dim=1, out=grad_enc[b, :t])
            if grad_pred is not None:
                torch.sum(block, dim=0, out=grad_pred[b, :u])
            start += t * u
        return grad_enc, grad_pred, None, None


def pack_joiner_input(enc: torch.Tensor, pred: torch.Tensor, logit_lengths: torch.Tensor,
                      target_lengths: torch.Tensor) -> torch.Tensor:
    """enc (B, T, H), pred (B, U+1, H) -> (sum_b T_b * (U_b+1), H), the row order transducer_loss expects."""
    if enc.dim() != 3 or pred.dim() != 3 or enc.shape[0] != pred.shape[0] or enc.shape[2] != pred.shape[2]:
        raise ValueError(f"expected enc (B, T, H) and pred (B, U+1, H), got {tuple(enc.shape)}, {tuple(pred.shape)}")
    if enc.dtype != pred.dtype:  # the rows take enc's: pred's rounded, or widened, in silence
        raise TypeError(f"enc and pred must be of one dtype, got {enc.dtype} and {pred.dtype}")
    check_length_pair(logit_lengths, target_lengths, enc.shape[0])  # (fewer: a part packed)
    if int(logit_lengths.max()) > enc.shape[1] or int(target_lengths.max()) + 1 > pred.shape[1]:
        raise ValueError("lengths exceed enc or pred")
    if int(logit_lengths.min()) < 1 or int(target_lengths.min()) < 0:
        raise ValueError(f"logit_lengths must be >= 1 and target_lengths >= 0, got {logit_lengths.tolist()} and "
                         f"{target_lengths.tolist()}")
    return _PackJoinerInput.apply(enc, pred, logit_lengths, target_lengths)

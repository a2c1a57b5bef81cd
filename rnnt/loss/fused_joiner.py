"""The joint network's output layer and the transducer loss in one autograd function.

logits[b, t, u] = W @ act(enc[b, t] + pred[b, u]) + bias never exists as a whole: forward walks each
utterance's lattice in chunks of frames, keeping per cell only the blank and label log-probs; backward
recomputes each chunk's logits to form the gradients of enc, pred, W and bias. Memory grows with the
lattice (B, T, U+1), not with the vocabulary, beyond one chunk. Padding cells are never computed.
"""

from __future__ import annotations

import torch

from rnnt.loss.checks import check_inside, check_lengths, check_one_symbol_per_frame, check_reduction, check_symbols
from rnnt.loss.emission_timing import timed_lattice_loss
from rnnt.loss.logits_loss import (
    CHUNK_ELEMENTS,
    accumulation_dtype,
    per_utterance_scale,
    reduce_losses,
    softmax_times_occupancy_,
)
from rnnt.loss.options import LatticeOptions, lattice_options

ACTIVATIONS = ("tanh", "relu")


def _activate(pre: torch.Tensor, activation: str) -> torch.Tensor:
    return torch.tanh(pre) if activation == "tanh" else torch.relu(pre)


def _activation_grad(hidden: torch.Tensor, grad: torch.Tensor, activation: str) -> torch.Tensor:
    """d loss / d pre-activation, from the activation's output."""
    if activation == "tanh":
        return grad.mul_(1 - hidden * hidden)
    return grad.mul_(hidden > 0)


def _chunk(enc, pred, weight, bias, targets, b: int, t0: int, t1: int, U_b: int, activation: str):
    """Hidden (frames, U_b+1, H) and logits (frames, U_b+1, V) of one block, and the label index of each
    cell's label arc (frames, U_b, 1)."""
    hidden = _activate(enc[b, t0:t1, None, :] + pred[b, None, : U_b + 1, :], activation)
    logits = torch.nn.functional.linear(hidden, weight, bias)
    labels = targets[b, :U_b].long()[None, :, None].expand(t1 - t0, U_b, 1)
    return hidden, logits, labels


def _chunks(logit_lengths, target_lengths, width: int, chunk_elements: int):
    """(b, t0, t1, U_b) blocks of whole frames of one utterance, about chunk_elements logits each."""
    for b, (T_b, U_b) in enumerate(zip(logit_lengths.tolist(), target_lengths.tolist())):
        frames = max(1, chunk_elements // ((U_b + 1) * width))
        for t0 in range(0, T_b, frames):
            yield b, t0, min(t0 + frames, T_b), U_b


class _FusedJoinerLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, enc, pred, weight, bias, targets, logit_lengths, target_lengths, blank, activation,
                reduction, chunk_elements, options):
        B, T, _ = enc.shape
        U1 = pred.shape[1]
        acc = accumulation_dtype(enc.dtype)
        blank_lp = torch.full((B, T, U1), float("-inf"), dtype=acc, device=enc.device)
        label_lp = torch.full_like(blank_lp, float("-inf"))
        width = max(weight.shape)
        with torch.no_grad():
            for b, t0, t1, U_b in _chunks(logit_lengths, target_lengths, width, chunk_elements):
                _, logits, labels = _chunk(enc, pred, weight, bias, targets, b, t0, t1, U_b, activation)
                logits = logits.to(acc)
                lse = torch.logsumexp(logits, dim=-1)
                blank_lp[b, t0:t1, : U_b + 1] = logits[..., blank] - lse
                if U_b > 0:
                    label_lp[b, t0:t1, :U_b] = logits[:, :U_b].gather(2, labels).squeeze(2) - lse[:, :U_b]
        losses, gamma_blank, gamma_label = timed_lattice_loss(blank_lp, label_lp, logit_lengths, target_lengths,
                                                              options)
        ctx.save_for_backward(enc, pred, weight, bias, targets, logit_lengths, target_lengths, gamma_blank, gamma_label)
        ctx.config = (blank, activation, reduction, chunk_elements)
        return reduce_losses(losses.to(enc.dtype), reduction)

    @staticmethod
    def backward(ctx, grad_output):
        enc, pred, weight, bias, targets, logit_lengths, target_lengths, gamma_blank, gamma_label = ctx.saved_tensors
        blank, activation, reduction, chunk_elements = ctx.config
        scale = per_utterance_scale(grad_output.to(gamma_blank.dtype), reduction, enc.shape[0])
        gamma_blank = gamma_blank * scale[:, None, None]
        gamma_label = gamma_label * scale[:, None, None]
        grad_enc, grad_pred = torch.zeros_like(enc), torch.zeros_like(pred)
        grad_weight = torch.zeros_like(weight)
        grad_bias = torch.zeros_like(bias) if bias is not None else None
        width = max(weight.shape)
        for b, t0, t1, U_b in _chunks(logit_lengths, target_lengths, width, chunk_elements):
            hidden, logits, labels = _chunk(enc, pred, weight, bias, targets, b, t0, t1, U_b, activation)
            g_blank, g_label = gamma_blank[b, t0:t1, : U_b + 1], gamma_label[b, t0:t1, : U_b + 1]
            logits = logits.to(g_blank.dtype)
            grad = softmax_times_occupancy_(torch.empty_like(logits), logits, torch.logsumexp(logits, dim=-1),
                                            g_blank + g_label)
            grad[..., blank] -= g_blank
            if U_b > 0:
                grad[:, :U_b].scatter_add_(2, labels, -g_label[:, :U_b, None])
            grad = grad.to(enc.dtype)
            flat_grad, flat_hidden = grad.reshape(-1, grad.shape[-1]), hidden.reshape(-1, hidden.shape[-1])
            grad_weight.addmm_(flat_grad.t(), flat_hidden)
            if grad_bias is not None:
                grad_bias += flat_grad.sum(0)
            grad_pre = _activation_grad(hidden, grad @ weight, activation)
            grad_enc[b, t0:t1] += grad_pre.sum(1)
            grad_pred[b, : U_b + 1] += grad_pre.sum(0)
        return (grad_enc, grad_pred, grad_weight, grad_bias) + (None,) * 8


def check_fused_inputs(enc, pred, weight, targets, logit_lengths, target_lengths, blank: int, activation: str,
                       one_sym_per_frame: bool) -> int:
    """Refuses inputs fused_joiner_loss cannot take, naming them; returns the blank as a symbol index."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got '{activation}'")
    if enc.dim() != 3 or pred.dim() != 3 or weight.dim() != 2:
        raise ValueError(f"expected enc (B, T, H), pred (B, U+1, H), weight (V, H); got {tuple(enc.shape)}, "
                         f"{tuple(pred.shape)}, {tuple(weight.shape)}")
    if enc.shape[2] != weight.shape[1] or pred.shape[2] != weight.shape[1]:
        raise ValueError(f"hidden sizes differ: enc {enc.shape[2]}, pred {pred.shape[2]}, weight {weight.shape[1]}")
    check_lengths(targets, logit_lengths, target_lengths, enc.shape[0])
    if pred.shape[0] != enc.shape[0]:
        raise ValueError(f"batch sizes differ: enc {tuple(enc.shape)}, pred {tuple(pred.shape)}")
    check_inside(logit_lengths, "logit_lengths", enc.shape[1], "enc.shape[1]")
    check_inside(target_lengths, "target_lengths", pred.shape[1], "pred.shape[1]", extra=1)
    if one_sym_per_frame:
        check_one_symbol_per_frame(logit_lengths, target_lengths)
    return check_symbols(targets, target_lengths, blank, weight.shape[0])


def fused_joiner_loss(
    enc: torch.Tensor,
    pred: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    *,
    activation: str = "tanh",
    reduction: str = "mean",
    chunk_elements: int = CHUNK_ELEMENTS,
    options: LatticeOptions | None = None,
    **lattice,
) -> torch.Tensor:
    """Transducer loss of the joiner logits W @ act(enc[:, :, None] + pred[:, None]) + bias, never materialised.

    enc: (B, T, H) projected encoder output; pred: (B, U+1, H) projected prediction-network output;
    weight: (V, H) and bias: (V,) of the output layer. Gives the same loss and gradients as building
    the logits and calling transducer_loss, in memory independent of V beyond one chunk (options and the
    lattice keywords as there). It reads the lengths on the host to cut its chunks.
    """
    check_reduction(reduction)
    options = lattice_options(options, **lattice)
    blank = check_fused_inputs(enc, pred, weight, targets, logit_lengths, target_lengths, blank, activation,
                               options.one_sym_per_frame)
    # One dtype for the products: autocast's where it is on (its backward runs outside autocast, so the
    # inputs are cast here, and the casts' own backward returns each gradient in its input's dtype).
    device = enc.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else enc.dtype
    enc, pred, weight = enc.to(dtype), pred.to(dtype), weight.to(dtype)
    bias = bias.to(dtype) if bias is not None else None
    with torch.autocast(device, enabled=False):
        return _FusedJoinerLoss.apply(enc, pred, weight, bias, targets, logit_lengths, target_lengths, blank,
                                      activation, reduction, chunk_elements, options)

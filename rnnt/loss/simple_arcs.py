"""The simple loss's arcs (rnnt.loss.pruned.simple_loss): the (B, T, U+1) blank and label log-probs of the
additive joiner am[b, t] + lm[b, u], with a gradient written out by hand.

Its normaliser is k2's one matmul, log sum_v exp(am[t, v] + lm[u, v]) = am_max[t] + lm_max[u] +
log (ea @ el^T)[t, u] with ea = exp(am - am_max), el = exp(lm - lm_max), so no (B, T, U+1, V) tensor exists.
With G = the arcs' gradients summed over each cell and W = -joint x G / P (P = ea @ el^T), the gradient is
  d am = ea * (W @ el) + the blank's and the labels' own arcs (a sum over u, a scatter over the labels),
  d lm = el * (W^T @ ea) + the same over t,
and the smoothing's own normalisers (log_softmax of am[t] and of lm[u]) add -scale x G's sum x softmax.
Autograd through the same operations took about twice the launches (on a GPU each is a launch the host pays
for in every step); where rnnt.loss.lattice_triton.bookkeeping_in_triton says so, the per-cell work on either
side of the matmuls is one Triton kernel each way (rnnt.loss.simple_arcs_kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.loss.cells import lattice_masks
from rnnt.loss.lattice_triton import bookkeeping_in_triton, lengths_on


@dataclass
class Scales:
    """Each arc's log-prob is joint x its joint log-prob + lm_only x log_softmax(lm[u])'s + am_only x
    log_softmax(am[t])'s; the arcs' own logits then carry joint + am_only (am) and joint + lm_only (lm)."""
    lm_only: float = 0.0
    am_only: float = 0.0

    @property
    def joint(self) -> float:
        return 1.0 - self.lm_only - self.am_only


def _exp_rows(x: torch.Tensor, smooth: bool):
    """x's row maxima (B, N, 1), exp(x - max) and, smoothing, its row sums (B, N) (else None)."""
    x_max = x.amax(dim=2, keepdim=True)
    e = (x - x_max).exp_()
    return x_max, e, (e.sum(2) if smooth else None)


def _exp_rows_in_triton(am, lm, acc: torch.dtype, smooth: bool):
    """As _exp_rows of am and lm, in acc, in one allocation and a launch each."""
    from rnnt.loss.simple_arcs_kernel import exp_rows_kernel, exp_rows_shape

    (B, T, V), U1 = am.shape, lm.shape[1]
    sizes = [B * T * V, B * U1 * V, B * T, B * U1, B * T, B * U1]
    ea, el, a_max, l_max, a_sum, l_sum = torch.empty(sum(sizes), dtype=acc, device=am.device).split(sizes)
    rows, columns = exp_rows_shape(V)
    for x, e, top, total in ((am, ea, a_max, a_sum), (lm, el, l_max, l_sum)):
        n = x.shape[0] * x.shape[1]
        exp_rows_kernel[(-(-n // rows),)](x, n, V, e, top, total, ROWS=rows, COLUMNS=columns, num_warps=4)
    return ((a_max.view(B, T, 1), ea.view(B, T, V), a_sum.view(B, T) if smooth else None),
            (l_max.view(B, U1, 1), el.view(B, U1, V), l_sum.view(B, U1) if smooth else None))


class SimpleArcs(torch.autograd.Function):
    """(blank_lp, label_lp), each (B, T, U+1), -inf outside each utterance's lattice (and, for labels, on its
    last row)."""

    @staticmethod
    def forward(ctx, am, lm, targets, logit_lengths, target_lengths, blank: int, scales: Scales,
                backend: str = "auto"):
        acc = torch.float64 if am.dtype == torch.float64 else torch.float32
        smooth = bool(scales.lm_only or scales.am_only)
        in_triton = bookkeeping_in_triton(am.device, backend)
        if in_triton:  # its kernels read am and lm as they are
            a, l = am.contiguous(), lm.contiguous()
            (a_max, ea, a_sum), (l_max, el, l_sum) = _exp_rows_in_triton(a, l, acc, smooth)
        else:
            a, l = am.to(acc), lm.to(acc)
            (a_max, ea, a_sum), (l_max, el, l_sum) = _exp_rows(a, smooth), _exp_rows(l, smooth)
        products = torch.bmm(ea, el.transpose(1, 2))  # (B, T, U1)
        logit_lengths, target_lengths = lengths_on(logit_lengths, target_lengths, am.device)
        arcs_of = _arcs_in_triton if in_triton else _arcs_in_torch
        blank_lp, label_lp, labels, masks = arcs_of(a, l, a_max, l_max, a_sum, l_sum, products, targets,
                                                    logit_lengths, target_lengths, blank, scales)
        ctx.save_for_backward(ea, el, products, labels, a_sum, l_sum, logit_lengths, target_lengths, *masks)
        ctx.blank, ctx.scales, ctx.in_triton, ctx.dtypes = blank, scales, in_triton, (am.dtype, lm.dtype)
        return blank_lp, label_lp

    @staticmethod
    def backward(ctx, grad_blank, grad_label):
        ea, el, products, labels, a_sum, l_sum, logit_lengths, target_lengths, *masks = ctx.saved_tensors
        weights_of = _weights_in_triton if ctx.in_triton else _weights_in_torch
        weights = weights_of(grad_blank.to(products.dtype), grad_label.to(products.dtype), products, a_sum, l_sum,
                             logit_lengths, target_lengths, masks, ctx.scales)
        grad_am, grad_lm = _gradients(ea, el, labels, ctx.blank, *weights)
        return grad_am.to(ctx.dtypes[0]), grad_lm.to(ctx.dtypes[1]), None, None, None, None, None, None


def _arcs_in_torch(a, l, a_max, l_max, a_sum, l_sum, products, targets, logit_lengths, target_lengths, blank,
                   scales: Scales):
    """The arcs from the normaliser's parts, in PyTorch; also the labels (B, U1) (the blank past each target)
    and the lattice's masks, for the backward."""
    B, T, U1 = products.shape
    valid, has_label = lattice_masks(logit_lengths, target_lengths, T, U1)
    width = targets.shape[1]
    labels = torch.nn.functional.pad(targets.long(), (0, max(0, U1 - width)), value=blank)[:, :U1]
    labels = labels.where(has_label[:, 0], blank)  # what a padded target holds is never read
    norm = a_max + l_max.transpose(1, 2) + products.clamp_min(torch.finfo(a.dtype).tiny).log()
    a_blank, a_label = a[:, :, blank, None], a.gather(2, labels[:, None, :].expand(B, T, U1))  # (B, T, 1|U1)
    l_blank, l_label = l[:, None, :, blank], l.gather(2, labels[:, :, None]).transpose(1, 2)  # (B, 1, U1)
    blank_lp, label_lp = a_blank + l_blank - norm, a_label + l_label - norm
    if scales.lm_only or scales.am_only:
        a_lse = a_max + a_sum[:, :, None].log()  # (B, T, 1)
        l_lse = (l_max + l_sum[:, :, None].log()).transpose(1, 2)  # (B, 1, U1)
        blank_lp = scales.joint * blank_lp + scales.lm_only * (l_blank - l_lse) + scales.am_only * (a_blank - a_lse)
        label_lp = scales.joint * label_lp + scales.lm_only * (l_label - l_lse) + scales.am_only * (a_label - a_lse)
    # masked_fill with a number: a tensor made of -inf here was a copy from the host, waited for on a GPU
    blank_lp, label_lp = blank_lp.masked_fill(~valid, float("-inf")), label_lp.masked_fill(~has_label, float("-inf"))
    return blank_lp, label_lp, labels, (valid, has_label)


def _arcs_in_triton(a, l, a_max, l_max, a_sum, l_sum, products, targets, logit_lengths, target_lengths, blank,
                    scales: Scales):
    """As _arcs_in_torch, in one launch, from am and lm as they are (a, l); the backward's kernel rebuilds the
    masks from the lengths."""
    from rnnt.loss.simple_arcs_kernel import arcs_kernel, launch_shape

    B, T, U1 = products.shape
    blank_lp, label_lp = torch.empty((2, B, T, U1), dtype=products.dtype, device=a.device)
    labels = torch.empty(B, U1, dtype=torch.long, device=a.device)
    smooth = a_sum is not None
    block, warps = launch_shape(U1)
    arcs_kernel[(B * T,)](
        a, l, a_max, l_max, a_sum if smooth else a_max, l_sum if smooth else l_max,
        products, targets, *(targets.stride() if targets.shape[1] else (0, 0)), logit_lengths, target_lengths,
        blank_lp, label_lp, labels, T, U1, a.shape[2], blank, torch.finfo(products.dtype).tiny, scales.joint,
        scales.lm_only, scales.am_only, SMOOTH=smooth, BLOCK=block, num_warps=warps)
    return blank_lp, label_lp, labels, ()


def _weights_in_torch(grad_blank, grad_label, products, a_sum, l_sum, logit_lengths, target_lengths, masks,
                      scales: Scales):
    """The sums the gradient is built from (_gradients), in PyTorch."""
    valid, has_label = masks
    grad_blank, grad_label = grad_blank.where(valid, 0.0), grad_label.where(has_label, 0.0)
    total = grad_blank + grad_label
    weights = torch.where(products >= torch.finfo(products.dtype).tiny, total / products, 0.0).mul_(-scales.joint)
    on_am, on_lm = scales.joint + scales.am_only, scales.joint + scales.lm_only
    am_own = -scales.am_only * total.sum(2) / a_sum if scales.am_only else None
    lm_own = -scales.lm_only * total.sum(1) / l_sum if scales.lm_only else None
    return (weights, grad_label * on_am, grad_blank.sum(2) * on_am, am_own,
            grad_blank.sum(1) * on_lm, grad_label.sum(1) * on_lm, lm_own)


def _weights_in_triton(grad_blank, grad_label, products, a_sum, l_sum, logit_lengths, target_lengths, masks,
                       scales: Scales):
    """As _weights_in_torch, in one launch and one sum over its frame chunks."""
    from rnnt.loss.simple_arcs_kernel import FRAMES_PER_PROGRAM, launch_shape, weights_kernel

    B, T, U1 = products.shape
    chunks = -(-T // FRAMES_PER_PROGRAM)
    sizes = [2 * B * T * U1, 2 * B * T, 3 * B * chunks * U1]  # one allocation
    cells, per_frame, per_chunk = torch.empty(sum(sizes), dtype=products.dtype, device=products.device).split(sizes)
    weights, on_label = cells.view(2, B, T, U1)
    per_frame, per_chunk = per_frame.view(2, B, T), per_chunk.view(3, B, chunks, U1)
    block, warps = launch_shape(U1)
    weights_kernel[(B, chunks)](
        grad_blank.contiguous(), grad_label.contiguous(), products, a_sum if scales.am_only else products,
        logit_lengths, target_lengths, weights, on_label, per_frame, per_chunk, T, U1, chunks,
        torch.finfo(products.dtype).tiny, scales.joint, scales.joint + scales.am_only, scales.joint + scales.lm_only,
        scales.am_only, FRAMES=FRAMES_PER_PROGRAM, BLOCK=block, AM_OWN=bool(scales.am_only), num_warps=warps)
    per_position = per_chunk.sum(2)  # (3, B, U1): the blank's, the labels' (scaled) and all arcs' sums over t
    lm_own = -scales.lm_only * per_position[2] / l_sum if scales.lm_only else None
    return (weights, on_label, per_frame[0], per_frame[1] if scales.am_only else None, per_position[0],
            per_position[1], lm_own)


def _gradients(ea, el, labels, blank, weights, on_label, blank_per_frame, am_own, blank_per_position,
               label_per_position, lm_own):
    """d am (B, T, V) and d lm (B, U1, V) from the sums: weights (B, T, U1) of the normaliser, the labels'
    arcs on_label (B, T, U1), the blank's per frame (B, T) and per position (B, U1), the labels' per position
    (B, U1), the smoothing's own normalisers' am_own (B, T) and lm_own (B, U1) (None without)."""
    B, T, U1 = weights.shape
    grad_am = _normaliser_gradient(ea, weights, el, am_own)
    grad_am.select(2, blank).add_(blank_per_frame)
    grad_am.scatter_add_(2, labels[:, None, :].expand(B, T, U1), on_label)
    grad_lm = _normaliser_gradient(el, weights.transpose(1, 2), ea, lm_own)
    grad_lm.select(2, blank).add_(blank_per_position)
    grad_lm.scatter_add_(2, labels[:, :, None], label_per_position[:, :, None])
    return grad_am, grad_lm


def _normaliser_gradient(e, weights, other, own):
    """e * (weights @ other + own[..., None]): baddbmm's beta = 0 ignores its input without own."""
    if own is None:
        return torch.baddbmm(e, weights, other, beta=0.0).mul_(e)
    return torch.baddbmm(own[:, :, None], weights, other).mul_(e)

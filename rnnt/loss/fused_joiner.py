"""The joint network's output layer and the transducer loss in one autograd function.

logits[b, t, u] = W @ act(enc[b, t] + pred[b, u]) + bias never exists as a whole: forward walks the
lattice in blocks (utterances of similar lengths, cut into frames), keeping per cell only the blank and
label log-probs and the log-normaliser; backward recomputes each block's logits to form the gradients of
enc, pred, W and bias. Memory grows with the lattice (B, T, U+1), not with the vocabulary, beyond one
block. A block pads its utterances to the longest, computing and masking out at most a quarter more
cells than its utterances' own. Asked for (kernels=True), with the Triton backend and a joiner the
kernels take (joint_triton.fits), no block is held at all: each pass over the lattice is one Triton kernel
(rnnt.loss.joint_kernels), in a few MiB where a block of 8M logits takes about 60, but 1.8-8x slower than
the blocks on an H200 (benchmarks/RESULTS.md), so the blocks are the default.
"""

from __future__ import annotations

import torch

from rnnt.loss import joint_triton, row_triton
from rnnt.loss.cells import lattice_masks, padding_zeroed
from rnnt.loss.checks import check_host_lengths, check_lengths, check_reduction, check_values
from rnnt.loss.emission_timing import timed_lattice_loss
from rnnt.loss.lattice_triton import on_inputs_device, resolve_backend
from rnnt.loss.logits_loss import (accumulation_dtype, chunk_elements_on, finite_normalisers, overflowed_rows,
                                   per_utterance_scale, reduce_losses, row_arc_log_probs, softmax_times_occupancy_,
                                   zero_overflowed_rows_)
from rnnt.loss.options import LatticeOptions, lattice_options

ACTIVATIONS = ("tanh", "relu")


def _activate_(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """The activation written over pre (a block's own sums: no second block-sized buffer)."""
    return pre.tanh_() if activation == "tanh" else pre.relu_()


def _activation_grad(hidden: torch.Tensor, grad: torch.Tensor, activation: str) -> torch.Tensor:
    """d loss / d pre-activation, from the activation's output, written over grad (one operator)."""
    if activation == "tanh":
        return torch.ops.aten.tanh_backward.grad_input(grad, hidden, grad_input=grad)
    return torch.ops.aten.threshold_backward.grad_input(grad, hidden, 0, grad_input=grad)


MAX_PADDING = 1.25  # utterances share a block while its cells are at most this many times their own


def _blocks(logit_lengths: list[int], target_lengths: list[int], width: int, chunk_elements: int):
    """(b0, b1, t0, t1, U1) blocks: consecutive utterances of similar lengths, padded to the longest's
    frames and U1 = U+1, cut into frames so that each holds about chunk_elements logits. Grouping short
    utterances keeps the launches per step few; the padding bound keeps the wasted products few."""
    lengths = list(zip(logit_lengths, target_lengths))
    b0 = 0
    while b0 < len(lengths):
        b1, T, U1, cells = b0 + 1, lengths[b0][0], lengths[b0][1] + 1, lengths[b0][0] * (lengths[b0][1] + 1)
        while b1 < len(lengths):
            T_next, U1_next = max(T, lengths[b1][0]), max(U1, lengths[b1][1] + 1)
            cells_next = cells + lengths[b1][0] * (lengths[b1][1] + 1)
            padded = (b1 + 1 - b0) * T_next * U1_next
            if padded > MAX_PADDING * cells_next or (b1 + 1 - b0) * U1_next * width > chunk_elements:
                break
            b1, T, U1, cells = b1 + 1, T_next, U1_next, cells_next
        frames = max(1, chunk_elements // ((b1 - b0) * U1 * width))
        for t0 in range(0, T, frames):
            yield b0, b1, t0, min(t0 + frames, T), U1
        b0 = b1


def _block_hidden(enc, pred, block, activation: str):
    """The activations (n, frames, U1, H) of one block."""
    b0, b1, t0, t1, U1 = block
    return _activate_(enc[b0:b1, t0:t1, None, :] + pred[b0:b1, None, :U1, :], activation)


def _block_logits(enc, pred, weight, bias, block, activation: str):
    """Hidden (n, frames, U1, H) and logits (n, frames, U1, V) of one block."""
    hidden = _block_hidden(enc, pred, block, activation)
    return hidden, torch.nn.functional.linear(hidden, weight, bias)


def _cell_labels(targets, blank: int, vocab: int, positions: int) -> torch.Tensor:
    """(B, positions), the lattice's U+1 columns (pred's, which targets padded wider or narrower need not match):
    the symbol of the label arc leaving column u (the blank past the targets; any in-vocabulary symbol where the
    utterance has no such arc, which masks or zero posteriors leave unread)."""
    labels = targets[:, :positions - 1].long().clamp(0, vocab - 1)
    ends = torch.full((targets.shape[0], positions - labels.shape[1]), blank, dtype=torch.long, device=targets.device)
    return torch.cat([labels, ends], dim=1)


def _block_rows(logits, cell_labels, block):
    """A block's logits as rows (n * frames * U1, V) and the label symbol of each row."""
    b0, b1, t0, t1, U1 = block
    labels = cell_labels[b0:b1, None, :U1].expand(b1 - b0, t1 - t0, U1)
    return logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)


def _block_arc_log_probs(logits, cell_labels, blank: int, triton: bool, block, out):
    """Writes the block's log-normalisers and blank and label arc log-probs into out, its cells of the three
    (B, T, U+1) arrays: with Triton in place (one launch), else through a copy."""
    b0, b1, t0, t1, U1 = block
    if triton:
        row_triton.row_stats(logits.view(-1, logits.shape[-1]), cell_labels[b0:b1, :U1], blank, out[0].dtype,
                             out=out)
        return
    rows, labels = _block_rows(logits, cell_labels, block)
    for cells, values in zip(out, row_arc_log_probs(rows, labels, blank, False)):
        cells.copy_(values.view(cells.shape))


def _block_logits_gradient(logits, cell_labels, lse, g_blank, g_label, blank: int, triton: bool, block):
    """d loss / d logits of a block, written over its logits: softmax * occupancy - arc posteriors."""
    b0, b1, t0, t1, U1 = block
    if triton:
        rows = logits.view(-1, logits.shape[-1])
        return row_triton.row_gradient(rows, rows, lse, g_blank, g_label, cell_labels[b0:b1, :U1], blank,
                                       None).view(logits.shape)
    rows, labels = _block_rows(logits, cell_labels, block)
    lse, g_blank, g_label = lse.reshape(-1), g_blank.reshape(-1), g_label.reshape(-1)
    grad, lse = rows.to(g_blank.dtype), finite_normalisers(lse)
    grad = softmax_times_occupancy_(grad, grad, lse, g_blank + g_label)
    zero_overflowed_rows_(grad, overflowed_rows(lse), 0)  # a padding cell's overflowed logits: 0, not NaN
    grad[:, blank] -= g_blank
    grad.scatter_add_(1, labels[:, None], -g_label[:, None])  # 0 where a cell has no label arc
    return grad.to(logits.dtype).view(logits.shape)


def _blocks_arc_log_probs(enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, blank: int,
                          activation: str, blocks, triton: bool):
    """The log-normalisers and blank and label arc log-probs of every cell (B, T, U+1), block by block (the
    cells a block pads its utterances with, and those past every block, -inf after)."""
    B, T, _ = enc.shape
    lse_cells = torch.zeros((B, T, pred.shape[1]), dtype=accumulation_dtype(enc.dtype), device=enc.device)
    blank_lp, label_lp = torch.empty_like(lse_cells), torch.empty_like(lse_cells)
    for block in blocks:  # the block's logits go with the call: the next block's are made without them
        b0, b1, t0, t1, U1 = block
        cells = (slice(b0, b1), slice(t0, t1), slice(0, U1))
        _block_arc_log_probs(_block_logits(enc, pred, weight, bias, block, activation)[1], cell_labels,
                             blank, triton, block, (lse_cells[cells], blank_lp[cells], label_lp[cells]))
    inside, has_label = lattice_masks(logit_lengths, target_lengths, T, pred.shape[1])
    return lse_cells, blank_lp.masked_fill_(~inside, float("-inf")), label_lp.masked_fill_(~has_label, float("-inf"))


def _blocks_gradients(enc, pred, weight, bias, cell_labels, lse_cells, gamma_blank, gamma_label, blank: int,
                      activation: str, blocks, triton: bool):
    """d loss / d enc, pred, weight and bias, block by block (the posteriors already scaled). The sums over the
    blocks (pred's, weight's, bias's) are kept in float32 for bfloat16 and float16 inputs, and rounded to their
    dtype once at the end, as the kernels keep them: rounded at every block, 900 blocks of bfloat16 (a batch of
    64 long utterances in a GPU's blocks) gave the weight's gradient a 25% error, the bias's 70%. enc's
    gradient takes each frame from one block: no sum across blocks."""
    total = accumulation_dtype(enc.dtype)
    grad_enc, grad_pred = torch.zeros_like(enc), torch.zeros_like(pred, dtype=total)
    grad_weight = torch.zeros_like(weight, dtype=total)
    grad_bias = torch.zeros_like(bias, dtype=total) if bias is not None else None
    for block in blocks:  # a block's tensors go when its call returns, before the next block's are made
        _add_block_gradients(enc, pred, weight, bias, cell_labels, lse_cells, gamma_blank, gamma_label, blank,
                             activation, block, triton, (grad_enc, grad_pred, grad_weight, grad_bias))
    return (grad_enc, grad_pred.to(pred.dtype), grad_weight.to(weight.dtype),
            grad_bias.to(bias.dtype) if grad_bias is not None else None)


def _add_block_gradients(enc, pred, weight, bias, cell_labels, lse_cells, gamma_blank, gamma_label, blank: int,
                         activation: str, block, triton: bool, grads):
    """Adds one block's share of d loss / d enc, pred, weight and bias to grads. The activations are made
    again for their own gradient, after the logits' is spent: the block holds its logits (or their gradient)
    and one array of activations or of their gradient at a time, never two (a third less memory at V = H)."""
    grad_enc, grad_pred, grad_weight, grad_bias = grads
    b0, b1, t0, t1, U1 = block
    hidden, logits = _block_logits(enc, pred, weight, bias, block, activation)
    cells = (slice(b0, b1), slice(t0, t1), slice(0, U1))
    grad = _block_logits_gradient(logits, cell_labels, lse_cells[cells], gamma_blank[cells], gamma_label[cells],
                                  blank, triton, block)
    del logits
    rows, columns = grad.reshape(-1, grad.shape[-1]).t(), hidden.reshape(-1, hidden.shape[-1])
    if grad_weight.dtype == rows.dtype:  # float32 or float64 inputs: summed in place
        grad_weight.addmm_(rows, columns)
    else:  # bfloat16 or float16: the block's product in their dtype, summed in float32
        grad_weight += rows @ columns
    del rows, columns
    if grad_bias is not None:
        grad_bias += grad.reshape(-1, grad.shape[-1]).sum(0, dtype=grad_bias.dtype)
    del hidden
    grad_hidden = grad @ weight
    del grad
    grad_pre = _activation_grad(_block_hidden(enc, pred, block, activation), grad_hidden, activation)
    torch.sum(grad_pre, 2, out=grad_enc[b0:b1, t0:t1])  # the blocks share no frame of an utterance
    grad_pred[b0:b1, :U1].add_(grad_pre.sum(1, dtype=grad_pred.dtype))


class _FusedJoinerLoss(torch.autograd.Function):
    """Asked for the kernels, with the Triton backend and a joiner they take (joint_triton.fits), whole
    passes over the lattice in Triton (blocks None); otherwise blocks of logits."""

    @staticmethod
    def forward(ctx, enc, pred, weight, bias, targets, logit_lengths, target_lengths, blank, activation,
                reduction, chunk_elements, kernels, options, host_lengths):
        triton = resolve_backend(options.backend, enc.device) == "triton"
        cell_labels = _cell_labels(targets, blank, weight.shape[0], pred.shape[1])
        blocks = None
        with torch.no_grad():
            if kernels and triton and joint_triton.fits(enc, weight):
                lse_cells, blank_lp, label_lp = joint_triton.joint_stats(
                    enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, blank, activation)
            else:
                on_host = host_lengths or (logit_lengths.tolist(), target_lengths.tolist())
                blocks = list(_blocks(*on_host, max(weight.shape), chunk_elements))
                enc, pred = padding_zeroed(enc, pred, logit_lengths, target_lengths, on_host)
                lse_cells, blank_lp, label_lp = _blocks_arc_log_probs(
                    enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, blank, activation, blocks,
                    triton)
        losses, gamma_blank, gamma_label = timed_lattice_loss(blank_lp, label_lp, logit_lengths, target_lengths,
                                                              options)
        ctx.save_for_backward(enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, gamma_blank,
                              gamma_label, lse_cells)
        ctx.config = (blank, activation, reduction, blocks, triton)
        return reduce_losses(losses, reduction)  # float32 (float64 inputs: 64): no float16 overflow

    @staticmethod
    def backward(ctx, grad_output):
        enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths, gamma_blank, gamma_label, lse_cells = \
            ctx.saved_tensors
        blank, activation, reduction, blocks, triton = ctx.config
        scale = per_utterance_scale(grad_output.to(gamma_blank.dtype), reduction, enc.shape[0])
        if blocks is None:
            grads = joint_triton.joint_gradients(enc, pred, weight, bias, cell_labels, logit_lengths, target_lengths,
                                                 lse_cells, gamma_blank, gamma_label, scale, blank, activation)
        else:
            scale = scale[:, None, None]
            grads = _blocks_gradients(enc, pred, weight, bias, cell_labels, lse_cells, gamma_blank * scale,
                                      gamma_label * scale, blank, activation, blocks, triton)
        return grads + (None,) * 10


def check_fused_inputs(enc, pred, weight, bias, targets, logit_lengths, target_lengths, blank: int, activation: str,
                       one_sym_per_frame: bool, backend: str = "auto") -> int:
    """Refuses inputs fused_joiner_loss cannot take, naming them; returns the blank as a symbol index."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got '{activation}'")
    if enc.dim() != 3 or pred.dim() != 3 or weight.dim() != 2:
        raise ValueError(f"expected enc (B, T, H), pred (B, U+1, H), weight (V, H); got {tuple(enc.shape)}, "
                         f"{tuple(pred.shape)}, {tuple(weight.shape)}")
    if enc.shape[2] != weight.shape[1] or pred.shape[2] != weight.shape[1]:
        raise ValueError(f"hidden sizes differ: enc {enc.shape[2]}, pred {pred.shape[2]}, weight {weight.shape[1]}")
    if bias is not None and tuple(bias.shape) != weight.shape[:1]:
        raise ValueError(f"expected bias (V,) = ({weight.shape[0]},) for weight {tuple(weight.shape)}, got "
                         f"{tuple(bias.shape)}")
    check_lengths(targets, logit_lengths, target_lengths, enc.shape[0])
    if pred.shape[0] != enc.shape[0]:
        raise ValueError(f"batch sizes differ: enc {tuple(enc.shape)}, pred {tuple(pred.shape)}")
    return check_values(targets, logit_lengths, target_lengths, weight.shape[0], blank, (enc.shape[1], "enc.shape[1]"),
                        (pred.shape[1], "pred.shape[1]"), one_sym_per_frame, backend)


@on_inputs_device
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
    activation: str = "tanh",  # rnnt.model.joiner.Joiner's default is relu: pass the joiner's own
    reduction: str = "mean",
    chunk_elements: int | None = None,
    kernels: bool = False,
    options: LatticeOptions | None = None,
    host_lengths: tuple[list[int], list[int]] | None = None,
    **lattice,
) -> torch.Tensor:
    """Transducer loss of the joiner logits W @ act(enc[:, :, None] + pred[:, None]) + bias, never materialised.

    enc: (B, T, H) projected encoder output; pred: (B, U+1, H) projected prediction-network output;
    weight: (V, H) and bias: (V,) of the output layer. Gives the same loss and gradients as building
    the logits and calling transducer_loss, in memory independent of V beyond one chunk (options and the
    lattice keywords as there). Its blocks are cut by the lengths: host_lengths, the two as lists the host
    holds (a training step's batch has them before it goes to the device), or else read from the device
    (on a GPU a synchronisation). Its Triton kernels (kernels=True, where the Triton backend runs and the
    joiner is at most joint_triton.MAX_HIDDEN wide) need neither, and hold no block of logits, at several
    times the blocks' time.
    """
    check_reduction(reduction)
    options = lattice_options(options, **lattice)
    blank = check_fused_inputs(enc, pred, weight, bias, targets, logit_lengths, target_lengths, blank, activation,
                               options.one_sym_per_frame, options.backend)
    check_host_lengths(host_lengths, logit_lengths, target_lengths)
    # One dtype for the products: autocast's where it is on (its backward runs outside autocast, so the
    # inputs are cast here, and the casts' own backward returns each gradient in its input's dtype).
    device = enc.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else enc.dtype
    enc, pred, weight = enc.to(dtype), pred.to(dtype), weight.to(dtype)
    bias = bias.to(dtype) if bias is not None else None
    chunk_elements = chunk_elements or chunk_elements_on(enc.device)
    with torch.autocast(device, enabled=False):
        return _FusedJoinerLoss.apply(enc, pred, weight, bias, targets, logit_lengths, target_lengths, blank,
                                      activation, reduction, chunk_elements, kernels, options, host_lengths)

"""The transducer loss on joiner logits, padded or packed, with the gradient formed directly.

Forward keeps per row only the log-normaliser and, per lattice cell, the blank and label log-probs;
no log-softmax tensor exists. Backward writes d loss / d logits = softmax * occupancy - arc posteriors
chunk by chunk, so the only logits-sized allocation is the gradient itself.
"""

from __future__ import annotations

import torch

from rnnt import host_reads
from rnnt.loss import row_triton
from rnnt.loss.cells import CellMap, packed_cells, padded_cells
from rnnt.loss.checks import check_logits, check_reduction
from rnnt.loss.emission_timing import timed_lattice_loss
from rnnt.loss.lattice_triton import on_inputs_device, resolve_backend
from rnnt.loss.options import LatticeOptions, lattice_options

CHUNK_ELEMENTS = 1 << 20  # logits elements handled at once in float32 temporaries on the CPU (4 MB, cache-sized)
CUDA_CHUNK_ELEMENTS = 1 << 23  # on a GPU (32 MB): fewer, larger chunks, whose kernels are not bound by launches


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def chunk_elements_on(device: torch.device) -> int:
    return CUDA_CHUNK_ELEMENTS if device.type == "cuda" else CHUNK_ELEMENTS


def row_chunks(n_rows: int, vocab: int, chunk_elements: int):
    step = max(1, chunk_elements // max(vocab, 1))
    for start in range(0, n_rows, step):
        yield start, min(start + step, n_rows)


def row_log_normaliser(rows: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
    """logsumexp over the vocabulary of every row, in chunks, accumulated in acc."""
    lse = torch.empty(rows.shape[0], dtype=acc, device=rows.device)
    for i, j in row_chunks(rows.shape[0], rows.shape[1], chunk_elements_on(rows.device)):
        lse[i:j] = torch.logsumexp(rows[i:j].to(acc), dim=1)
    return lse


def reduce_losses(losses: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    return losses


def per_utterance_scale(grad_output: torch.Tensor, reduction: str, batch: int) -> torch.Tensor:
    """d reduced / d loss_b times the incoming gradient, for each utterance b."""
    if reduction == "none":
        return grad_output
    scale = grad_output / batch if reduction == "mean" else grad_output
    return scale.expand(batch)


def row_arc_log_probs(rows, labels, blank: int, from_log_softmax: bool):
    """Per row of rows (N, V): the log-normaliser and the log-probs of the blank and of labels[r], in the
    accumulation dtype, in chunks (rnnt.loss.row_triton.row_stats is Triton's)."""
    acc = accumulation_dtype(rows.dtype)
    if from_log_softmax:
        lse = torch.zeros(rows.shape[0], dtype=acc, device=rows.device)
    else:
        lse = row_log_normaliser(rows, acc)
    return lse, rows[:, blank].to(acc) - lse, rows.gather(1, labels[:, None]).squeeze(1).to(acc) - lse


def arc_log_probs(rows, cells: CellMap, blank: int, from_log_softmax: bool, triton: bool = False):
    """Per-row normaliser and the (B, T, U1) blank and label arc log-probs; Triton writes the arcs straight
    into the lattice."""
    if triton:
        return row_triton.row_stats(rows, cells.label, blank, accumulation_dtype(rows.dtype),
                                    normalise=not from_log_softmax, into=cells)
    lse, blank_rows, label_rows = row_arc_log_probs(rows, cells.label, blank, from_log_softmax)
    return lse, cells.to_lattice(blank_rows, cells.valid), cells.to_lattice(label_rows, cells.has_label)


def softmax_times_occupancy_(out: torch.Tensor, logits: torch.Tensor, lse: torch.Tensor, occupancy: torch.Tensor):
    """out = exp(logits - lse) * occupancy, in place, with results under the smallest normal float in
    magnitude flushed to zero (either sign: the occupancy is negative where the loss's incoming gradient is).

    Occupancies far below 1 make subnormal products; matmuls over them (the joiner's backward)
    run many times slower on x86, and values under the smallest normal float carry no information.
    """
    torch.sub(logits, lse[..., None], out=out)
    out.exp_().mul_(occupancy[..., None])
    return torch.hardshrink(out, torch.finfo(out.dtype).tiny, out=out)


def finite_normalisers(lse: torch.Tensor) -> torch.Tensor:
    """The rows' normalisers, the -inf of a row of -inf logits (padding of a masked joiner) raised to the lowest
    float: softmax_times_occupancy_ then gives 0 there (exp(-inf - -inf) x 0 was NaN), and every other row as
    before. Not +inf for the rows no alignment passes: exp(-inf) takes x86's vectorised exp 7 times as long."""
    return lse.clamp_min(torch.finfo(lse.dtype).min)


def overflowed_rows(lse: torch.Tensor) -> torch.Tensor:
    """The rows whose (finite_normalisers') normaliser is +inf or NaN, as zero_overflowed_rows_ takes them: on the
    CPU their indices (read for free), elsewhere a row mask (not read on the host)."""
    overflowed = ~torch.isfinite(lse)
    return overflowed.nonzero().squeeze(1) if host_reads.free(lse.device) else overflowed


def zero_overflowed_rows_(g: torch.Tensor, overflowed: torch.Tensor, first: int) -> None:
    """g (rows first.. of the gradient) 0 in the rows whose normaliser is +inf or NaN: logits of +inf or NaN, in
    padding no alignment passes (a model that overflowed there), gave exp(inf - inf) x 0, NaN, which the joiner's
    backward spread over every weight; Triton's kernel gives 0. (Within the lattice they make the loss itself
    non-finite.) overflowed: on the CPU the rows' indices (read for free, mostly none: nothing done); elsewhere a
    row mask, applied without reading it on the host."""
    if overflowed.dtype == torch.bool:
        g.masked_fill_(overflowed[first:first + g.shape[0], None], 0)
        return
    rows = overflowed[(overflowed >= first) & (overflowed < first + g.shape[0])]
    if rows.numel():
        g[rows - first] = 0


def logits_gradient(rows, lse, labels, batch, utterance_scale, blank, gamma_blank, gamma_label, from_log_softmax,
                    clamp, in_place=False, triton=False, at_cells=None):
    """(softmax(rows) * occupancy - one-hot arc posteriors) * utterance_scale[batch], in the dtype of rows;
    labels and batch: each row's label-arc symbol and utterance. PyTorch goes chunk by chunk, scaling the
    posteriors a chunk at a time (no scaled copy of them is made); Triton in one launch.

    in_place writes the gradient over rows (each chunk is read before it is overwritten). at_cells (Triton's
    only): the posteriors are lattices, read at a cell map's (cell, valid) (row_triton.row_gradient).
    """
    acc = lse.dtype
    # Triton's kernel writes row-major rows: not over logits whose vocabulary is not innermost (permuted)
    in_place = in_place and not (triton and rows.stride(1) != 1)
    grad = rows if in_place else torch.empty_like(rows, memory_format=torch.contiguous_format)
    if triton:
        row_triton.row_gradient(rows, grad, lse, gamma_blank, gamma_label, labels, blank, clamp,
                                softmax=not from_log_softmax, batch=batch, scale=utterance_scale, at_cells=at_cells)
        if in_place:  # a kernel's write is not autograd's: another user of the logits would read the gradient
            torch.autograd.graph.increment_version(grad)
        return grad
    lse = finite_normalisers(lse)
    overflowed = overflowed_rows(lse)
    for i, j in row_chunks(rows.shape[0], rows.shape[1], chunk_elements_on(rows.device)):
        g = grad[i:j] if grad.dtype == acc else torch.empty((j - i, rows.shape[1]), dtype=acc, device=rows.device)
        scale = utterance_scale[batch[i:j]]
        clamped = clamp is not None and clamp > 0  # an utterance's own gradient is clamped, then scaled
        blank_post, label_post = (gamma_blank[i:j], gamma_label[i:j]) if clamped else \
            (gamma_blank[i:j] * scale, gamma_label[i:j] * scale)
        if from_log_softmax:
            g.zero_()
        else:
            softmax_times_occupancy_(g, rows[i:j].to(acc), lse[i:j], blank_post + label_post)
            zero_overflowed_rows_(g, overflowed, i)
        g[:, blank] -= blank_post
        g.scatter_add_(1, labels[i:j, None].long(), -label_post[:, None])
        if clamped:
            g.clamp_(-clamp, clamp).mul_(scale[:, None])
        if g.data_ptr() != grad[i:j].data_ptr():
            grad[i:j] = g
    return grad


class TransducerLossFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, cells, logit_lengths, target_lengths, blank, reduction, from_log_softmax, clamp,
                reuse_logits_for_grad, options):
        triton = resolve_backend(options.backend, rows.device) == "triton"
        lse, blank_lp, label_lp = arc_log_probs(rows, cells, blank, from_log_softmax, triton)
        losses, gamma_blank, gamma_label = timed_lattice_loss(blank_lp, label_lp, logit_lengths, target_lengths,
                                                              options)
        # Only tensors given to save_for_backward are freed once backward has used them; the rest of the
        # cell map goes now, before the joiner's backward (the step's peak) runs (what stays, two int64s a
        # row, is 1/V of the logits: narrowing it to int32 took two launches a step). Triton reads the
        # posteriors in the lattice through the map, PyTorch a per-row copy.
        posteriors = (gamma_blank, gamma_label, cells.cell, cells.valid) if triton else \
            (cells.from_lattice(gamma_blank), cells.from_lattice(gamma_label))
        ctx.save_for_backward(rows, lse, cells.batch, cells.label, *posteriors)
        ctx.config = (cells.shape[0], blank, reduction, from_log_softmax, clamp, reuse_logits_for_grad, triton)
        return reduce_losses(losses, reduction)  # float32 (float64 inputs: 64): no float16 overflow

    @staticmethod
    def backward(ctx, grad_output):
        rows, lse, batch, labels, gamma_blank, gamma_label, *at_cells = ctx.saved_tensors
        utterances, blank, reduction, from_log_softmax, clamp, in_place, triton = ctx.config
        scale = per_utterance_scale(grad_output.to(lse.dtype), reduction, utterances)
        grad = logits_gradient(rows, lse, labels, batch, scale, blank, gamma_blank, gamma_label, from_log_softmax,
                               clamp, in_place, triton, at_cells or None)
        return (grad,) + (None,) * 9


@on_inputs_device
def transducer_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    *,
    reduction: str = "mean",
    from_log_softmax: bool = False,
    clamp: float | None = None,
    reuse_logits_for_grad: bool = False,
    options: LatticeOptions | None = None,
    **lattice,
) -> torch.Tensor:
    """The RNN-T loss -log P(targets | logits).

    logits: padded (B, T, U+1, V) or packed (sum_b T_b * (U_b+1), V), rows in (b, t, u) order;
        float16/bfloat16 are accepted, accumulated and returned in float32 (as PyTorch's losses under autocast).
    targets: (B, U) int; logit_lengths, target_lengths: (B,) int.
    blank: the blank symbol (negative counts from the end: -1 is the last symbol).
    reduction: "mean" over the batch, "sum", or "none" for one loss per utterance.
    from_log_softmax: logits are already log-probabilities (no normalisation inside).
    clamp: if given, each utterance's own gradient w.r.t. its logits is clamped to [-clamp, clamp], then
        scaled by the gradient flowing in (and 1/B for "mean"), as torchaudio's.
    reuse_logits_for_grad: backward writes the gradient into the logits' storage, saving one
        logits-sized buffer; the logits must not be read after backward (autograd users of the same
        tensor raise an in-place modification error rather than compute wrong gradients).
    options, **lattice: the lattice (rnnt.loss.options.LatticeOptions, whose fields the keywords change):
    one_sym_per_frame: the modified transducer, at most one symbol per frame (needs U_b <= T_b).
    fastemit_lambda: FastEmit regularisation of the gradient (0: none; 0.001 to 0.01 is usual); the loss
        value is unchanged.
    delay_penalty: labels at frame t score delay_penalty * ((T_b - 1) / 2 - t) more (0: none; k2's
        delay_penalty); the loss is -log of the penalised sum (rnnt.loss.emission_timing).
    self_alignment: the weight of -log P of each label of the best alignment one frame earlier, added to
        the loss (0: none; rnnt.loss.emission_timing).
    backend: where the lattice passes and the passes over the logits run: "torch", "triton", or "auto" (Triton
        on CUDA when installed); rnnt.loss.lattice_triton.
    """
    check_reduction(reduction)
    options = lattice_options(options, **lattice)
    blank = check_logits(logits, targets, logit_lengths, target_lengths, blank, options.one_sym_per_frame,
                         options.backend)
    if logits.dim() == 4:
        cells = padded_cells(logits.shape, targets, logit_lengths, target_lengths, blank, options.backend)
    else:
        cells = packed_cells(targets, logit_lengths, target_lengths, blank)
    rows = logits.reshape(-1, logits.shape[-1])
    return TransducerLossFunction.apply(rows, cells, logit_lengths, target_lengths, blank, reduction,
                                        from_log_softmax, clamp, reuse_logits_for_grad, options)


class TransducerLoss(torch.nn.Module):
    """nn.Module wrapper of transducer_loss with the options fixed at construction."""

    def __init__(self, blank: int = 0, reduction: str = "mean", from_log_softmax: bool = False,
                 clamp: float | None = None, reuse_logits_for_grad: bool = False,
                 options: LatticeOptions | None = None, **lattice):
        super().__init__()
        check_reduction(reduction)
        self.options = lattice_options(options, **lattice)
        self.blank, self.reduction, self.clamp = blank, reduction, clamp
        self.from_log_softmax, self.reuse_logits_for_grad = from_log_softmax, reuse_logits_for_grad

    def forward(self, logits, targets, logit_lengths, target_lengths):
        return transducer_loss(logits, targets, logit_lengths, target_lengths, self.blank, reduction=self.reduction,
                               from_log_softmax=self.from_log_softmax, clamp=self.clamp,
                               reuse_logits_for_grad=self.reuse_logits_for_grad, options=self.options)

    def extra_repr(self) -> str:
        return (f"blank={self.blank}, reduction={self.reduction}, from_log_softmax={self.from_log_softmax}, "
                f"clamp={self.clamp}, {self.options}")

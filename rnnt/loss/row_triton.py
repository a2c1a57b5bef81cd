"""The launches of the Triton kernels over logits rows (rnnt.loss.row_kernels), used by the losses on
logits when their backend resolves to "triton" (rnnt.loss.lattice_triton.resolve_backend)."""

from __future__ import annotations

from functools import cache

import torch

from rnnt.loss.lattice_triton import next_power_of_2

MAX_COLUMNS = 1024  # vocabulary entries a program holds at once; wider vocabularies take several steps
TILE_ELEMENTS = 4096  # rows x columns of one step of a program
WARPS = 4  # per program (benchmarks/row_kernels.py times other choices)


@cache
def _kernels():
    from rnnt.loss import row_kernels
    return row_kernels


def _launch_shape(n_rows: int, vocab: int) -> tuple[tuple[int], int, int]:
    """The grid, and the rows and vocabulary columns each program takes at a time."""
    columns = min(next_power_of_2(vocab), MAX_COLUMNS)
    rows = max(1, TILE_ELEMENTS // columns)
    return (max(1, -(-n_rows // rows)),), rows, columns


def _row_major(rows: torch.Tensor) -> torch.Tensor:
    return rows if rows.stride(1) == 1 else rows.contiguous()


def row_stats(rows: torch.Tensor, labels: torch.Tensor, blank: int, acc: torch.dtype, normalise: bool = True):
    """Per row of rows (N, V): the log-normaliser (0 without normalise), and the blank's and labels[r]'s
    log-probs, in acc."""
    rows = _row_major(rows)
    n, vocab = rows.shape
    lse, blank_lp, label_lp = (torch.empty(n, dtype=acc, device=rows.device) for _ in range(3))
    grid, block_rows, columns = _launch_shape(n, vocab)
    _kernels().row_stats_kernel[grid](rows, rows.stride(0), labels.contiguous(), lse, blank_lp, label_lp, n, vocab,
                                      blank, NORMALISE=normalise, ROWS=block_rows, COLUMNS=columns,
                                      num_warps=WARPS)
    return lse, blank_lp, label_lp


def row_gradient(rows: torch.Tensor, grad: torch.Tensor, lse: torch.Tensor, post_blank: torch.Tensor,
                 post_label: torch.Tensor, labels: torch.Tensor, blank: int, clamp: float | None,
                 softmax: bool = True, batch: torch.Tensor | None = None,
                 scale: torch.Tensor | None = None) -> torch.Tensor:
    """Writes d loss / d rows into grad (N, V; rows itself is allowed): softmax(rows) * (post_blank +
    post_label) less the arc posteriors at blank and labels, clamped to [-clamp, clamp] if clamp; returns grad.
    With batch (N,) and scale (B,), the posteriors of row r are multiplied by scale[batch[r]] first."""
    rows = _row_major(rows)
    n, vocab = rows.shape
    assert grad.shape == rows.shape and grad.stride(1) == 1, "grad: a row-major (N, V) tensor"
    grid, block_rows, columns = _launch_shape(n, vocab)
    clamped, scaled = clamp is not None and clamp > 0, scale is not None
    batch, scale = (batch.contiguous(), scale.contiguous()) if scaled else (labels, lse)  # unread unless scaled
    _kernels().row_gradient_kernel[grid](rows, rows.stride(0), grad, grad.stride(0), lse.contiguous(),
                                         post_blank.contiguous(), post_label.contiguous(), labels.contiguous(),
                                         batch, scale, n, vocab, blank, float(clamp) if clamped else 0.0,
                                         torch.finfo(lse.dtype).tiny, SCALE=scaled, SOFTMAX=softmax,
                                         CLAMP=clamped, ROWS=block_rows, COLUMNS=columns, num_warps=WARPS)
    return grad

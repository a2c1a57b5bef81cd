"""The launches of the Triton kernels over logits rows (rnnt.loss.row_kernels), used by the losses on
logits when their backend resolves to "triton" (rnnt.loss.lattice_triton.resolve_backend)."""

from __future__ import annotations

import math
from functools import cache

import torch

from rnnt.loss.cells import CellMap
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


def _cells(n_rows: int, cell: torch.Tensor, labels: torch.Tensor) -> tuple[int, ...]:
    """The kernels' block geometry (row_kernels._cell_and_label): per-row arrays (N,), or a block's cells,
    per-cell arrays (n, frames, U1) strided along n and frames and labels (n, U1) strided along n."""
    if cell.dim() == 1:
        return 1, max(n_rows, 1), 0, 0, 0
    assert cell.dim() == 3 and cell.stride(2) == 1 and labels.dim() == 2 and labels.stride(1) == 1, \
        "a block's cells: (n, frames, U1) arrays and (n, U1) labels, contiguous along U1"
    return cell.shape[1], cell.shape[2], cell.stride(0), cell.stride(1), labels.stride(0)


def row_stats(rows: torch.Tensor, labels: torch.Tensor, blank: int, acc: torch.dtype, normalise: bool = True,
              out: tuple[torch.Tensor, ...] | None = None, into: CellMap | None = None):
    """Per row of rows (N, V): the log-normaliser (0 without normalise), and the blank's and labels[r]'s
    log-probs, in acc. With out, written there: three arrays (n, frames, U1) of the same strides, one cell a
    row (rows in (n, frame, u) order; labels (n, U1), one a column). Else new (N,) arrays; with into, a cell
    map of the rows, the arcs in new -inf filled (B, T, U+1) lattices instead, at the rows' cells (none from
    rows outside the lattice)."""
    rows = _row_major(rows)
    n, vocab = rows.shape
    if out is None:
        labels, shape = labels.contiguous(), (into.shape if into is not None else (n,))
        size = n + 2 * math.prod(shape)  # one allocation for the three
        buffer = torch.full((size,), float("-inf"), dtype=acc, device=rows.device) if into is not None else \
            torch.empty(size, dtype=acc, device=rows.device)
        lse, arcs = buffer.split([n, size - n])
        out = (lse, *arcs.view(2, *shape))
    grid, block_rows, columns = _launch_shape(n, vocab)
    indexed = (into.cell, into.valid, into.has_label) if into is not None else (labels,) * 3  # unread without
    _kernels().row_stats_kernel[grid](rows, rows.stride(0), labels, *out, n, vocab, blank,
                                      *_cells(n, out[0], labels), *indexed, NORMALISE=normalise,
                                      INDEXED=into is not None, ROWS=block_rows, COLUMNS=columns, num_warps=WARPS)
    return out


def row_gradient(rows: torch.Tensor, grad: torch.Tensor, lse: torch.Tensor, post_blank: torch.Tensor,
                 post_label: torch.Tensor, labels: torch.Tensor, blank: int, clamp: float | None,
                 softmax: bool = True, batch: torch.Tensor | None = None,
                 scale: torch.Tensor | None = None,
                 at_cells: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Writes d loss / d rows into grad (N, V; rows itself is allowed): softmax(rows) * (post_blank +
    post_label) less the arc posteriors at blank and labels, clamped to [-clamp, clamp] if clamp; returns grad.
    With batch (N,) and scale (B,), the posteriors of row r are multiplied by scale[batch[r]] first.
    lse and the posteriors may be a block's cells and labels their labels, as row_stats's out; with at_cells, a
    cell map's (cell, valid), the posteriors are (B, T, U+1) lattices read at cell[r] (0 where not valid[r])."""
    rows = _row_major(rows)
    n, vocab = rows.shape
    assert grad.shape == rows.shape and grad.stride(1) == 1, "grad: a row-major (N, V) tensor"
    grid, block_rows, columns = _launch_shape(n, vocab)
    clamped, scaled = clamp is not None and clamp > 0, scale is not None
    batch, scale = (batch.contiguous(), scale.contiguous()) if scaled else (labels, lse)  # unread unless scaled
    # the bound in the gradient's own dtype, read by the kernel (a float argument is float32 there: float64
    # gradients were clamped at float32(clamp)); a fill, no host read
    bound = torch.full((1,), float(clamp), dtype=lse.dtype, device=rows.device) if clamped else lse
    per_row = lse.dim() == 1
    lse, post_blank, post_label, labels = (x.contiguous() if per_row else x
                                           for x in (lse, post_blank, post_label, labels))
    assert per_row or post_blank.stride() == post_label.stride() == lse.stride(), "the cells' arrays share strides"
    _kernels().row_gradient_kernel[grid](rows, rows.stride(0), grad, grad.stride(0), lse, post_blank, post_label,
                                         labels, batch, scale, n, vocab, blank, bound,
                                         torch.finfo(lse.dtype).tiny, *_cells(n, lse, labels),
                                         *(at_cells or (labels,) * 2), SCALE=scaled, SOFTMAX=softmax,
                                         CLAMP=clamped, INDEXED=at_cells is not None, ROWS=block_rows,
                                         COLUMNS=columns, num_warps=WARPS)
    return grad

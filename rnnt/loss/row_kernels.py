"""Triton kernels over the rows of a (N, V) logits matrix, one row per lattice cell: what the transducer
loss reads of the logits (each row's log-normaliser and its blank and label logits) in one pass, and the
gradient it writes back (softmax times the cell's occupancy, minus its two arc posteriors) in another.

Each program takes ROWS rows and walks the vocabulary COLUMNS at a time, accumulating in the dtype of
the per-row arrays (float32, or float64 for float64 logits). They replace a dozen elementwise PyTorch
operations per chunk of rows (casts, logsumexp, gathers, exp, products, scatters, clamps), each a launch
and a pass over the logits. Imported only when the Triton backend is asked for (rnnt.loss.row_triton).
"""

from __future__ import annotations

import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def _rows(n_rows, ROWS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    return row, row < n_rows


@triton.jit
def _cell_and_label(row, frames, columns, cell_sn, cell_sf, label_sn):
    """Where row r's per-cell values and its label lie: rows are cells (n, f, u) of a block of frames x columns,
    the per-cell arrays (n, frames, columns) and the labels (n, columns), each contiguous along u. One
    column of a block per row (frames 1, columns the rows' count, strides 0): both at r."""
    u = row % columns
    nf = row // columns
    return (nf // frames) * cell_sn + (nf % frames) * cell_sf + u, (nf // frames) * label_sn + u


@triton.jit
def _lattice_cell(row, on, lattice_cell, valid, has_label):
    """Row r's cell of the (B, T, U+1) lattices (a pruned or packed cell map's), and whether its blank and its
    label arc lie inside its utterance's lattice."""
    inside = on & (tl.load(valid + row, mask=on, other=0) != 0)
    labelled = on & (tl.load(has_label + row, mask=on, other=0) != 0)
    return tl.load(lattice_cell + row, mask=inside, other=0), inside, labelled


@triton.jit
def row_stats_kernel(logits, stride, labels, lse, blank_lp, label_lp, n_rows, vocab, blank, frames, columns,
                     cell_sn, cell_sf, label_sn, lattice_cell, valid, has_label, NORMALISE: tl.constexpr,
                     INDEXED: tl.constexpr, ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    """lse[r] = logsumexp(logits[r]) (0 without NORMALISE), blank_lp[r] = logits[r, blank] - lse[r],
    label_lp[r] = logits[r, labels[r]] - lse[r], at the places _cell_and_label gives; INDEXED, the arcs at
    lattice_cell[r] of (B, T, U+1) lattices instead, where valid[r] and has_label[r] (_lattice_cell)."""
    row, on = _rows(n_rows, ROWS)
    cell, at_label = _cell_and_label(row, frames, columns, cell_sn, cell_sf, label_sn)
    arc, on_blank, on_label = cell, on, on
    if INDEXED:
        arc, on_blank, on_label = _lattice_cell(row, on, lattice_cell, valid, has_label)
    acc = lse.dtype.element_ty
    start = logits + row * stride
    norm = tl.zeros((ROWS,), dtype=acc)
    if NORMALISE:
        top = tl.full((ROWS,), float("-inf"), dtype=acc)
        total = tl.zeros((ROWS,), dtype=acc)
        for v0 in range(0, vocab, COLUMNS):
            v = v0 + tl.arange(0, COLUMNS)
            x = tl.load(start[:, None] + v[None, :], mask=on[:, None] & (v < vocab)[None, :], other=float("-inf"))
            x = x.to(acc)
            new_top = tl.maximum(top, tl.max(x, axis=1))
            safe = tl.where(new_top == NEG_INF, 0.0, new_top)
            total = total * tl.exp(top - safe) + tl.sum(tl.exp(x - safe[:, None]), axis=1)
            top = new_top
        norm = tl.where(top == NEG_INF, top, top + tl.log(total))
    label = tl.load(labels + at_label, mask=on, other=0)
    tl.store(lse + cell, norm, mask=on)
    tl.store(blank_lp + arc, tl.load(start + blank, mask=on, other=0.0).to(acc) - norm, mask=on_blank)
    tl.store(label_lp + arc, tl.load(start + label, mask=on, other=0.0).to(acc) - norm, mask=on_label)


@triton.jit
def row_gradient_kernel(logits, stride, grad, grad_stride, lse, post_blank, post_label, labels, batch, scale, n_rows,
                        vocab, blank, clamp, tiny: tl.constexpr, frames, columns, cell_sn, cell_sf, label_sn,
                        lattice_cell, valid,
                        SCALE: tl.constexpr, SOFTMAX: tl.constexpr, CLAMP: tl.constexpr, INDEXED: tl.constexpr,
                        ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    """grad[r] = exp(logits[r] - lse[r]) * (post_blank[r] + post_label[r]) (products under tiny in magnitude
    flushed to 0; left out without SOFTMAX), less post_blank[r] at blank and post_label[r] at labels[r],
    clamped to [-clamp[0], clamp[0]] with CLAMP (clamp: one value, of lse's dtype); with SCALE times
    scale[batch[r]] (the incoming gradient of row r's utterance): the posteriors first, or, with CLAMP, the
    clamped gradient (an utterance's own is clamped, as warp-transducer and torchaudio clamp it, whatever the
    reduction or a loss scale). grad may be logits
    itself: each element is read before it is written, by the program that writes it. INDEXED, the posteriors
    are read at lattice_cell[r] of (B, T, U+1) lattices, 0 where not valid[r], as row_stats_kernel's arcs."""
    row, on = _rows(n_rows, ROWS)
    cell, at_label = _cell_and_label(row, frames, columns, cell_sn, cell_sf, label_sn)
    acc = lse.dtype.element_ty
    norm = tl.load(lse + cell, mask=on, other=0.0)
    posterior, on_posterior = cell, on
    if INDEXED:
        posterior, on_posterior, _ = _lattice_cell(row, on, lattice_cell, valid, valid)
    g_blank = tl.load(post_blank + posterior, mask=on_posterior, other=0.0)
    g_label = tl.load(post_label + posterior, mask=on_posterior, other=0.0)
    if SCALE:
        factor = tl.load(scale + tl.load(batch + row, mask=on, other=0), mask=on, other=0.0)
        if not CLAMP:
            g_blank *= factor
            g_label *= factor
    occupancy = g_blank + g_label
    label = tl.load(labels + at_label, mask=on, other=0)
    start, out = logits + row * stride, grad + row * grad_stride
    for v0 in range(0, vocab, COLUMNS):
        v = v0 + tl.arange(0, COLUMNS)
        inside = on[:, None] & (v < vocab)[None, :]
        g = tl.zeros((ROWS, COLUMNS), dtype=acc)
        if SOFTMAX:
            x = tl.load(start[:, None] + v[None, :], mask=inside, other=float("-inf")).to(acc)
            g = tl.exp(x - norm[:, None]) * occupancy[:, None]
            g = tl.where((tl.abs(g) < tiny) | (occupancy[:, None] == 0), 0.0, g)  # padding: 0, whatever it holds
        g -= tl.where(v[None, :] == blank, g_blank[:, None], 0.0)
        g -= tl.where(v[None, :] == label[:, None], g_label[:, None], 0.0)
        if CLAMP:
            bound = tl.load(clamp)
            g = tl.minimum(tl.maximum(g, -bound), bound)
            if SCALE:
                g = g * factor[:, None]
        tl.store(out[:, None] + v[None, :], g.to(grad.dtype.element_ty), mask=inside)

"""A Triton kernel that builds a loss's cell map (rnnt.loss.cells.CellMap: each logits row's utterance, lattice
cell, whether it lies inside its utterance and whether it has a label arc, and the arc's symbol) in one launch,
where PyTorch takes about twenty (aranges, repeats, comparisons, a gather, wheres). Imported only where it runs
(rnnt.loss.lattice_triton.bookkeeping_in_triton).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def cell_map_kernel(positions, targets, stride_b, stride_u, width, logit_lengths, target_lengths, batch, cell, valid,
                    label, has_label, n_rows, T, S, U1, blank, PRUNED: tl.constexpr, BLOCK: tl.constexpr):
    """Rows in (b, t, s) order, S a frame: the lattice's symbol positions (padded logits, u = s) or, PRUNED,
    positions[row] (a band's); cell (b * T + t) * U1 + u (0 outside the utterance); label the target at u
    where the cell has a label arc, else the blank."""
    row = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    on = row < n_rows
    b = row // (T * S)
    t = (row // S) % T
    if PRUNED:
        u = tl.load(positions + row, mask=on, other=0).to(tl.int64)
    else:
        u = row % S
    T_b = tl.load(logit_lengths + b, mask=on, other=0)
    U_b = tl.load(target_lengths + b, mask=on, other=0)
    inside = (t < T_b) & (u <= U_b) & (u >= 0)
    labelled = inside & (u < U_b)
    symbol = tl.load(targets + b * stride_b + u * stride_u, mask=on & labelled, other=blank)
    tl.store(batch + row, b, mask=on)
    tl.store(cell + row, tl.where(inside, (b * T + t) * U1 + u, 0), mask=on)
    tl.store(valid + row, inside, mask=on)
    tl.store(label + row, tl.where(labelled, symbol, blank).to(tl.int64), mask=on)
    tl.store(has_label + row, labelled, mask=on)

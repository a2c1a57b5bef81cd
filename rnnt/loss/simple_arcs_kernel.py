"""Triton kernels for the simple loss's per-cell work on either side of its matmuls (rnnt.loss.simple_arcs),
one launch each way where PyTorch takes about twenty (norms, gathers, masks; the backward's masks, sums and
divisions). Imported only where they run (rnnt.loss.lattice_triton.bookkeeping_in_triton).
"""

from __future__ import annotations

import triton
import triton.language as tl

from rnnt.loss.lattice_triton import next_power_of_2

FRAMES_PER_PROGRAM = 16  # frames whose sums over t a backward program adds up before writing them


def launch_shape(U1: int) -> tuple[int, int]:
    """A program holds a frame's U+1 cells at once; its warps grow with them."""
    block = next_power_of_2(U1)
    return block, 4 if block <= 256 else 8


def exp_rows_shape(vocab: int) -> tuple[int, int]:
    """Rows a program of exp_rows_kernel takes and the vocabulary columns it walks at a time."""
    columns = min(next_power_of_2(vocab), 1024)
    return max(1, 4096 // columns), columns


@triton.jit
def exp_rows_kernel(x, n_rows, vocab, e, row_max, row_sum, ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    """Per row of x (n_rows, vocab), contiguous: its max, e = exp(x - max) and e's sum, in e's dtype (the
    normaliser's parts, one pass to find the max and one to write e)."""
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    on = row < n_rows
    acc = e.dtype.element_ty
    top = tl.full((ROWS,), float("-inf"), dtype=acc)
    for v0 in range(0, vocab, COLUMNS):
        v = v0 + tl.arange(0, COLUMNS)
        inside = on[:, None] & (v < vocab)[None, :]
        values = tl.load(x + row[:, None] * vocab + v[None, :], mask=inside, other=float("-inf")).to(acc)
        top = tl.maximum(top, tl.max(values, axis=1))
    top = tl.where(on, top, 0.0)  # rows past the end: -inf - -inf would be NaN (masked, but computed)
    total = tl.zeros((ROWS,), dtype=acc)
    for v0 in range(0, vocab, COLUMNS):
        v = v0 + tl.arange(0, COLUMNS)
        inside = on[:, None] & (v < vocab)[None, :]
        values = tl.load(x + row[:, None] * vocab + v[None, :], mask=inside, other=float("-inf")).to(acc)
        exp = tl.where(inside, tl.exp(values - top[:, None]), 0.0)
        tl.store(e + row[:, None] * vocab + v[None, :], exp, mask=inside)
        total += tl.sum(exp, axis=1)
    tl.store(row_max + row, top, mask=on)
    tl.store(row_sum + row, total, mask=on)


@triton.jit
def _cells(b, t, U1, logit_lengths, target_lengths, BLOCK: tl.constexpr):
    """Frame t of utterance b: its cells u, which lie in the lattice, and which of those have a label arc."""
    u = tl.arange(0, BLOCK)
    T_b = tl.load(logit_lengths + b)
    U_b = tl.load(target_lengths + b)
    valid = (u < U1) & (t < T_b) & (u <= U_b)
    return u, valid, valid & (u < U_b)


@triton.jit
def arcs_kernel(a, l, a_max, l_max, a_sum, l_sum, products, targets, stride_b, stride_u, logit_lengths,
                target_lengths, blank_lp, label_lp, labels, T, U1, V, blank, tiny: tl.constexpr, joint, lm_only,
                am_only, SMOOTH: tl.constexpr, BLOCK: tl.constexpr):
    """A program per frame (b, t): its blank and label arcs, -inf outside the lattice; frame 0 also writes the
    utterance's labels (the blank past its targets)."""
    row = tl.program_id(0).to(tl.int64)
    b, t = row // T, row % T
    u, valid, has_label = _cells(b, t, U1, logit_lengths, target_lengths, BLOCK)
    y = tl.load(targets + b * stride_b + u * stride_u, mask=has_label, other=blank).to(tl.int64)
    y = tl.where(has_label, y, blank)
    if t == 0:
        tl.store(labels + b * U1 + u, y, mask=u < U1)
    position = b * U1 + u
    a_row_max = tl.load(a_max + row)
    l_row_max = tl.load(l_max + position, mask=valid, other=0.0)
    norm = a_row_max + l_row_max + tl.log(tl.maximum(tl.load(products + row * U1 + u, mask=valid, other=1.0), tiny))
    acc = blank_lp.dtype.element_ty  # am and lm may be narrower
    a_blank = tl.load(a + row * V + blank).to(acc)
    a_label = tl.load(a + row * V + y, mask=valid, other=0.0).to(acc)
    l_blank = tl.load(l + position * V + blank, mask=valid, other=0.0).to(acc)
    l_label = tl.load(l + position * V + y, mask=valid, other=0.0).to(acc)
    blank_arc = a_blank + l_blank - norm
    label_arc = a_label + l_label - norm
    if SMOOTH:
        a_lse = a_row_max + tl.log(tl.load(a_sum + row))
        l_lse = l_row_max + tl.log(tl.load(l_sum + position, mask=valid, other=1.0))
        blank_arc = joint * blank_arc + lm_only * (l_blank - l_lse) + am_only * (a_blank - a_lse)
        label_arc = joint * label_arc + lm_only * (l_label - l_lse) + am_only * (a_label - a_lse)
    tl.store(blank_lp + row * U1 + u, tl.where(valid, blank_arc, float("-inf")), mask=u < U1)
    tl.store(label_lp + row * U1 + u, tl.where(has_label, label_arc, float("-inf")), mask=u < U1)


@triton.jit
def weights_kernel(grad_blank, grad_label, products, a_sum, logit_lengths, target_lengths, weights, on_label,
                   per_frame, per_chunk, T, U1, chunks, tiny: tl.constexpr, joint, on_am, on_lm, am_only,
                   FRAMES: tl.constexpr, BLOCK: tl.constexpr, AM_OWN: tl.constexpr):
    """A program per FRAMES frames of utterance b: per cell, the normaliser's weight -joint x G / P and the
    label arc's on_am x gradient; per frame, the blank arcs' sum x on_am and (AM_OWN) -am_only x G's sum /
    a_sum; over its frames, per position, the sums of the blank arcs' and the label arcs' gradients x on_lm and
    of G (per_chunk (3, B, chunks, U1)). G: a cell's two arcs' gradients, 0 outside the lattice."""
    b = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    B = tl.num_programs(0)
    u = tl.arange(0, BLOCK)
    blank_sum = tl.zeros((BLOCK,), dtype=grad_blank.dtype.element_ty)
    label_sum = tl.zeros((BLOCK,), dtype=grad_blank.dtype.element_ty)
    total_sum = tl.zeros((BLOCK,), dtype=grad_blank.dtype.element_ty)
    for i in range(FRAMES):
        t = chunk * FRAMES + i
        _, valid, has_label = _cells(b, t, U1, logit_lengths, target_lengths, BLOCK)
        row = b * T + t
        at = row * U1 + u
        store = (u < U1) & (t < T)
        g_blank = tl.load(grad_blank + at, mask=valid, other=0.0)
        g_label = tl.load(grad_label + at, mask=has_label, other=0.0)
        p = tl.load(products + at, mask=valid, other=1.0)
        g = g_blank + g_label
        tl.store(weights + at, tl.where(valid & (p >= tiny), -joint * g / p, 0.0), mask=store)
        tl.store(on_label + at, on_am * g_label, mask=store)
        tl.store(per_frame + row, on_am * tl.sum(g_blank, 0), mask=t < T)
        if AM_OWN:
            own = -am_only * tl.sum(g, 0) / tl.load(a_sum + row, mask=t < T, other=1.0)
            tl.store(per_frame + B * T + row, own, mask=t < T)
        blank_sum += g_blank
        label_sum += g_label
        total_sum += g
    at = (b * chunks + chunk) * U1 + u
    on = u < U1
    tl.store(per_chunk + at, on_lm * blank_sum, mask=on)
    tl.store(per_chunk + B * chunks * U1 + at, on_lm * label_sum, mask=on)
    tl.store(per_chunk + 2 * B * chunks * U1 + at, total_sum, mask=on)

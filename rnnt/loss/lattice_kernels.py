"""Triton kernels for the lattice passes of rnnt.loss.lattice (and the pruned band's passes over frames):
one launch per pass, one program per utterance, looping over its anti-diagonals (standard lattice) or
frames (one symbol per frame).

Each program holds one diagonal at a time: the cells of diagonal n read only diagonal n - 1 (n + 1
going back), written to global memory before a barrier. Loops run over the padded lattice's steps (host
integers; T + U diagonals, or T frames), cells outside the utterance masked off and never read. Lattices
are (B, T, U+1), contiguous, float32 or float64. Imported only when the Triton backend is asked for
(rnnt.loss.lattice_triton): `TRITON_INTERPRET=1`, set before this import, runs the kernels on CPU tensors.
"""

from __future__ import annotations

import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def _log_add(a, b):
    top = tl.maximum(a, b)
    safe = tl.where(top == NEG_INF, 0.0, top)
    return safe + tl.log(tl.exp(a - safe) + tl.exp(b - safe))


@triton.jit
def _cells(n, u0, T, U, ONE_SYM: tl.constexpr, BLOCK: tl.constexpr):
    """Columns u0 .. u0 + BLOCK of step n: frames t, columns u, and which of them are lattice nodes."""
    u = u0 + tl.arange(0, BLOCK)
    if ONE_SYM:
        t = n + tl.zeros_like(u)
    else:
        t = n - u
    return t, u, (u <= U) & (t >= 0) & (t < T)


@triton.jit
def _at(ptr, base, t, u, U1, mask):
    """The values of a (T, U1) lattice at (t, u), -inf where mask is off."""
    return tl.load(ptr + base + t * U1 + u, mask=mask, other=NEG_INF)


@triton.jit
def _arrivals(score, blank, label, base, t, u, on, U1, ONE_SYM: tl.constexpr):
    """The scores arriving at (t, u) by a blank from (t - 1, u) and by a label from (t or t - 1, u - 1)."""
    by_blank = _at(score, base, t - 1, u, U1, on & (t > 0)) + _at(blank, base, t - 1, u, U1, on & (t > 0))
    lt = t - ONE_SYM
    ok = on & (u > 0) & (lt >= 0)
    by_label = _at(score, base, lt, u - 1, U1, ok) + _at(label, base, lt, u - 1, U1, ok)
    return by_blank, by_label


@triton.jit
def _final_arrivals(score, blank, label, base, T, U, U1, ONE_SYM: tl.constexpr):
    """The scores arriving at the final node (T, U), which lies past the last frame."""
    by_blank = tl.load(score + base + (T - 1) * U1 + U) + tl.load(blank + base + (T - 1) * U1 + U)
    if ONE_SYM:
        ok = U > 0
    else:
        ok = U < 0  # the standard lattice has no label arc into the final node
    at = base + (T - 1) * U1 + U - 1
    by_label = tl.load(score + at, mask=ok, other=NEG_INF) + tl.load(label + at, mask=ok, other=NEG_INF)
    return by_blank, by_label


@triton.jit
def _utterance(frames, symbols, T_pad, U1):
    """This program's utterance: its index, frames, labels, where its (T, U + 1) lattice starts, and whether its
    lengths fit the padded (T_pad, U1) lattice. Lengths that do not (no frame, more of either than the padding)
    are taken as one frame and no label, so that the passes stay inside the utterance's own lattice, and the
    utterance gets no complete path (the torch backend's answer to them): the losses check the lengths first,
    lattice_posteriors and best_path_label_frames, called on their own, do not."""
    b = tl.program_id(0)
    T = tl.load(frames + b).to(tl.int32)
    U = tl.load(symbols + b).to(tl.int32)
    fits = (T >= 1) & (T <= T_pad) & (U >= 0) & (U < U1)
    return b, tl.where(fits, T, 1), tl.where(fits, U, 0), b.to(tl.int64) * T_pad * U1, fits


@triton.jit
def forward_kernel(blank, label, alpha, log_like, frames, symbols, T_pad, U1, steps,
                   ONE_SYM: tl.constexpr, BLOCK: tl.constexpr):
    """alpha (B, T, U+1): the log-probability of reaching each node; log_like (B,): of the final node."""
    b, T, U, base, fits = _utterance(frames, symbols, T_pad, U1)
    for n in range(0, steps):
        for u0 in range(0, U1, BLOCK):
            t, u, on = _cells(n, u0, T, U, ONE_SYM, BLOCK)
            by_blank, by_label = _arrivals(alpha, blank, label, base, t, u, on, U1, ONE_SYM)
            value = tl.where((t == 0) & (u == 0), 0.0, _log_add(by_blank, by_label))
            tl.store(alpha + base + t * U1 + u, value, mask=on)
        tl.debug_barrier()
    by_blank, by_label = _final_arrivals(alpha, blank, label, base, T, U, U1, ONE_SYM)
    tl.store(log_like + b, tl.where(fits, _log_add(by_blank, by_label), NEG_INF))


@triton.jit
def _departures(beta, blank, label, base, t, u, on, T, U, U1, ONE_SYM: tl.constexpr):
    """The scores leaving (t, u) by its blank and by its label arc to the end of the lattice."""
    # the final node (T, U) has beta 0; the rest of the row t = T is not in the lattice
    after_blank = tl.where((t + 1 == T) & (u == U), 0.0, _at(beta, base, t + 1, u, U1, on & (t + 1 < T)))
    lt = t + ONE_SYM
    after_label = tl.where((lt == T) & (u + 1 == U), 0.0, _at(beta, base, lt, u + 1, U1, on & (lt < T) & (u < U)))
    return _at(blank, base, t, u, U1, on) + after_blank, _at(label, base, t, u, U1, on) + after_label


@triton.jit
def _kept(posterior, finite, tiny):
    """0 for a posterior of a lattice with no complete path, or one below tiny (subnormals slow every later
    product that reads them)."""
    return tl.where(finite, tl.where(posterior > tiny, posterior, 0.0), 0.0)


@triton.jit
def backward_kernel(blank, label, alpha, log_like, beta, gamma_blank, gamma_label, frames, symbols, T_pad, U1, steps,
                    tiny: tl.constexpr, ONE_SYM: tl.constexpr, BLOCK: tl.constexpr):
    """beta (B, T, U+1) and the posteriors of the blank and label arc of every node: exp(alpha + arc +
    beta of its end - log_like), 0 below tiny and for an utterance with no complete path."""
    b, T, U, base, _ = _utterance(frames, symbols, T_pad, U1)  # log_like is -inf where the lengths do not fit
    total = tl.load(log_like + b)
    finite = total > NEG_INF
    norm = tl.where(finite, total, 0.0)
    for i in range(0, steps):
        n = steps - 1 - i
        for u0 in range(0, U1, BLOCK):
            t, u, on = _cells(n, u0, T, U, ONE_SYM, BLOCK)
            to_blank, to_label = _departures(beta, blank, label, base, t, u, on, T, U, U1, ONE_SYM)
            tl.store(beta + base + t * U1 + u, _log_add(to_blank, to_label), mask=on)
            start = _at(alpha, base, t, u, U1, on) - norm
            post_blank = tl.exp(start + to_blank)
            post_label = tl.exp(start + to_label)
            tl.store(gamma_blank + base + t * U1 + u, _kept(post_blank, finite, tiny), mask=on)
            tl.store(gamma_label + base + t * U1 + u, _kept(post_label, finite, tiny), mask=on)
        tl.debug_barrier()


@triton.jit
def viterbi_kernel(blank, label, delta, by_label_into, label_frames, frames, symbols, T_pad, U1, steps, width,
                   ONE_SYM: tl.constexpr, BLOCK: tl.constexpr):
    """The best path into every node (delta, and whether it arrives by a label; ties go to the blank),
    then the walk back from the final node writing the frame of each label into label_frames (B, width),
    left as it is (-1) for an utterance with no complete path."""
    b, T, U, base, fits = _utterance(frames, symbols, T_pad, U1)
    for n in range(0, steps):
        for u0 in range(0, U1, BLOCK):
            t, u, on = _cells(n, u0, T, U, ONE_SYM, BLOCK)
            by_blank, by_label = _arrivals(delta, blank, label, base, t, u, on, U1, ONE_SYM)
            value = tl.where((t == 0) & (u == 0), 0.0, tl.maximum(by_blank, by_label))
            tl.store(delta + base + t * U1 + u, value, mask=on)
            tl.store(by_label_into + base + t * U1 + u, (by_label > by_blank).to(tl.int8), mask=on)
        tl.debug_barrier()
    by_blank, by_label = _final_arrivals(delta, blank, label, base, T, U, U1, ONE_SYM)
    reachable = fits & (tl.maximum(by_blank, by_label) > NEG_INF)
    _walk_back(by_label_into, label_frames, base, b.to(tl.int64) * width, T, U, U1, steps, reachable,
               by_label > by_blank, ONE_SYM)


@triton.jit
def _walk_back(by_label_into, label_frames, base, row, T, U, U1, steps, reachable, last_by_label,
               ONE_SYM: tl.constexpr):
    """From the final node to (0, 0) along the best path's arcs, one arc per step."""
    # the arc into the final node: a blank from (T - 1, U), or (one symbol per frame) a label from (T - 1, U - 1)
    tl.store(label_frames + row + U - 1, T - 1, mask=reachable & last_by_label)
    t = T - 1
    u = U - last_by_label.to(tl.int32)
    for _ in range(0, steps):
        label_step = (tl.load(by_label_into + base + t * U1 + u) != 0) & (u > 0)
        blank_step = (label_step == 0) & (t > 0)
        tl.store(label_frames + row + u - 1, t - ONE_SYM, mask=reachable & label_step)
        u -= label_step.to(tl.int32)
        if ONE_SYM:
            t -= (blank_step | label_step).to(tl.int32)
        else:
            t -= blank_step.to(tl.int32)


@triton.jit
def window_kernel(gamma_blank, gamma_label, target_lengths, start, last_start, T_pad, U1, windows, width, s_range,
                  BLOCK: tl.constexpr):
    """A program per frame (b, t): the start of the window of width symbol positions holding the most
    occupancy (gamma_blank + gamma_label; the first of equals, its sum taken position by position as
    rnnt.loss.pruned.prune_ranges takes it), at most last_start[b] = max(U_b + 1 - s_range, 0), which the
    utterance's frame 0 writes."""
    row = tl.program_id(0).to(tl.int64)
    b = row // T_pad
    s = tl.arange(0, BLOCK)
    on = s < windows
    mass = tl.zeros((BLOCK,), dtype=gamma_blank.dtype.element_ty)
    for k in range(0, width):
        at = row * U1 + s + k
        mass += tl.load(gamma_blank + at, mask=on, other=0.0) + tl.load(gamma_label + at, mask=on, other=0.0)
    best = tl.argmax(tl.where(on, mass, float("-inf")), 0)
    last = tl.maximum(tl.load(target_lengths + b).to(tl.int64) + 1 - s_range, 0)
    tl.store(start + row, tl.minimum(best, last))
    if row % T_pad == 0:
        tl.store(last_start + b, last)


@triton.jit
def band_kernel(start, frames, last_start, T_pad, s_range):
    """The pruned band's window starts (B, T) made connected in place, as rnnt.loss.pruned.prune_ranges
    does with PyTorch: forwards, each start within [the one before, the one before + s_range - 1], the
    first 0; then backwards from the last frame's start last_start[b], each at least the next minus
    s_range - 1."""
    b = tl.program_id(0)
    T = tl.load(frames + b).to(tl.int32)
    row = start + b.to(tl.int64) * T_pad
    before = tl.load(row) * 0
    tl.store(row, before)
    for t in range(1, T_pad):
        value = tl.minimum(tl.maximum(tl.load(row + t), before), before + s_range - 1)
        tl.store(row + t, value)
        before = value
    tl.debug_barrier()  # the backward pass reads what other threads of the program wrote
    last = tl.load(last_start + b)
    need = last
    for i in range(0, T_pad):
        t = T_pad - 1 - i
        value = tl.load(row + t)
        need = tl.where(t == T - 1, last, need)
        value = tl.where(t >= T, value, tl.maximum(value, need))
        tl.store(row + t, value)
        need = tl.maximum(value - (s_range - 1), 0)


@triton.jit
def one_symbol_band_kernel(start, frames, symbols, last_start, T_pad, s_range):
    """The pruned band's window starts (B, T) for the one-symbol lattice, in place, as
    rnnt.loss.pruned._one_symbol_band_starts does with PyTorch: each at least U_b - T_b + t - (s_range - 1)
    (capped at last_start[b]), the first 0, then frame by frame never below the one before and at most one
    above the highest node a path can be at in the frame before."""
    b = tl.program_id(0)
    T = tl.load(frames + b)
    U = tl.load(symbols + b)
    last = tl.load(last_start + b)
    row = start + b.to(tl.int64) * T_pad
    before = tl.load(row) * 0
    tl.store(row, before)
    top = before  # the highest node of the window a path can be at
    for t in range(1, T_pad):
        lowest = tl.minimum(U - T + t - (s_range - 1), last)
        value = tl.minimum(tl.maximum(tl.maximum(tl.load(row + t), lowest), before), top + 1)
        tl.store(row + t, value)
        top = tl.minimum(tl.minimum(top + 1, value + s_range - 1), U)
        before = value

"""The transducer lattice's forward-backward in PyTorch, a row at a time (rnnt.loss.lattice's other schedule
takes a step per anti-diagonal, or per frame in the one-symbol lattice).

Within row u a node is reached by blanks from the nodes before it in the row or by a label from the row
below, x[t] = logaddexp(x[t-1] + blank[t-1], entering[t]): with P the row's blank arcs summed, that is
x = P + logcumsumexp(entering - P), one scan along the frames. U + 1 scans where the steps take T + U (or T),
each over B x T nodes where a step covers B x (U + 1): fewer, larger operations, faster for the batches of
our recipes (benchmarks/lattice.py); the sums run in float64.
"""

from __future__ import annotations

import torch

from rnnt import host_reads

NEG_INF = float("-inf")

# A missing blank arc (-inf) counts as one of log-prob -_MISSING in a row's running sums, which so stay finite; any
# path through one scores below -_MISSING / 2 and is taken for no path: real paths must score above that
# (hold_exactly).
_MISSING = 1.0e7


def _rows(x: torch.Tensor) -> torch.Tensor:
    """(B, T, U1) -> (B, U1, T) in float64, contiguous: a row u at a time, its frames along the last axis."""
    return x.transpose(1, 2).to(torch.float64).contiguous()


def _blank_sums(blank_rows: torch.Tensor) -> torch.Tensor:
    """P (B, U1, T): P[.., t] - P[.., j] is the score of the blank arcs from frame j to t along each row, an
    exclusive cumulative sum with each missing arc as -_MISSING. Each row counts from its first blank arc,
    and its missing arcs apart: the values a row's real paths read stay exact (a pruned band's rows start
    with missing arcs)."""
    def before(x):  # the exclusive cumulative sum, 0 at the row's first arc
        sums = torch.nn.functional.pad(x.cumsum(-1)[..., :-1], (1, 0))
        return sums - sums.gather(-1, first)

    missing = torch.isneginf(blank_rows)
    first = (~missing).to(torch.uint8).argmax(-1, keepdim=True)
    return before(blank_rows.masked_fill(missing, 0.0)) - _MISSING * before(missing.to(blank_rows.dtype))


def _no_path_below(scores: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(scores < -_MISSING / 2, NEG_INF)


def _scan_rows(sums, leaving, start, one_sym):
    """x (B, U1, T) row after row, each along its frames: x[t] = logaddexp(x[t-1] + blank[t-1], entering[t]),
    which is x = P + logcumsumexp(entering - P) with P the row's blank sums. A row is entered by the label
    arcs leaving the row before it (leaving[:, u - 1], to the next frame in the one-symbol lattice) and where
    start is true (a path's first node). One scan a row: U + 1 steps, where the anti-diagonals take T + U."""
    x = torch.empty_like(sums)
    entering = torch.full_like(sums[:, 0], NEG_INF)
    for u in range(sums.shape[1]):
        entering = entering.masked_fill(start[:, u], 0.0)
        torch.add(sums[:, u], torch.logcumsumexp(entering - sums[:, u], -1), out=x[:, u])
        entering = x[:, u] + leaving[:, u]
        if one_sym:  # to the next frame
            entering = torch.nn.functional.pad(entering[..., :-1], (1, 0), value=NEG_INF)
    return _no_path_below(x)


def forward_backward(blank, label, final_t, final_u, one_sym):
    """alpha, beta (B, T, U1) in float64 by _scan_rows; beta's scan runs over the rows from the top and over
    the frames from the end (the tensors flipped), with the blank sums negated."""
    B, T1, U1 = blank.shape
    label_rows, sums = _rows(label), _blank_sums(_rows(blank))
    t, u = torch.arange(T1, device=blank.device), torch.arange(U1, device=blank.device)
    origin = ((u[:, None] == 0) & (t == 0)).expand(B, U1, T1)
    alpha = _scan_rows(sums, label_rows, origin, one_sym)
    ends = (u[None, :, None] == final_u[:, None, None]) & (t == final_t[:, None, None])
    # flipped, row k + 1 is entered from row k by the labels of row k + 1; in the one-symbol lattice those
    # of the frame after (_scan_rows shifts a row's arrivals and its labels by one frame)
    leaving = torch.nn.functional.pad(label_rows.flip(1, 2)[:, 1:], (0, 0, 0, 1), value=NEG_INF)
    if one_sym:
        leaving = torch.nn.functional.pad(leaving[..., 1:], (0, 1), value=NEG_INF)
    beta = _scan_rows(-sums.flip(1, 2), leaving, ends.flip(1, 2), one_sym).flip(1, 2)
    return alpha.transpose(1, 2), beta.transpose(1, 2)


def wanted(blank: torch.Tensor, label: torch.Tensor, one_sym: bool) -> bool:
    """Whether the forward-backward of these (extended) arcs runs by rows: where that costs less
    (cheaper) and, on the CPU, where the rows give exact values (hold_exactly)."""
    if not cheaper(*blank.shape, one_sym, blank.device):
        return False
    return not host_reads.free(blank.device) or hold_exactly(blank, label)


def cheaper(B: int, T1: int, U1: int, one_sym: bool, device: torch.device) -> bool:
    """Whether the scans along rows (U + 1 steps over B x T nodes) take less time than the steps along frames
    or anti-diagonals (T or T + U steps over B x (U + 1) nodes). On the CPU a step costs a fixed time and one
    per node, a row's node 2.7 times a column's (logcumsumexp's): measured on 2 cores of an AMD EPYC (a row
    step about 160 us + 190 ns a node, a frame or anti-diagonal step 130 us + 70 ns a node), rows win up to
    B x T in the thousands. On CUDA the fixed cost (the launches) is all there is; other devices (MPS has no
    float64) take the steps."""
    if device.type != "cpu":
        return device.type == "cuda"
    steps = T1 if one_sym else T1 + U1 - 1
    return U1 * (160e-6 + 190e-9 * B * T1) < steps * (130e-6 + 70e-9 * B * U1)


def hold_exactly(blank: torch.Tensor, label: torch.Tensor) -> bool:
    """Whether each row's blank arcs form one run with no label arc before it, and no path can score below
    -_MISSING / 2, as in every lattice the losses build (whole lattices, a pruned band's). Elsewhere the
    -_MISSING offsets round what a row's scan adds to them (to about 1e-7 in float64), or a path is lost.
    Reads the values: the CPU checks, other devices trust the losses."""
    arcs = torch.isfinite(blank)
    frame = torch.arange(blank.shape[1], device=blank.device)[None, :, None]
    first = torch.where(arcs, frame, blank.shape[1]).amin(1, keepdim=True)
    last = torch.where(arcs, frame, -1).amax(1, keepdim=True)
    one_run = arcs.sum(1, keepdim=True) == (last - first + 1).clamp(min=0)
    no_label_before = ~(torch.isfinite(label) & (frame < first)).any(1, keepdim=True)
    lowest = min((float(torch.nan_to_num(x, neginf=0.0).amin()) for x in (blank, label) if x.numel()), default=0.0)
    return bool((one_run & no_label_before).all()) and lowest * sum(blank.shape[1:]) > -_MISSING / 2

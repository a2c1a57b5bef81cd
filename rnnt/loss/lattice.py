"""Forward-backward over the transducer lattice, given per-cell arc log-probabilities.

The lattice of utterance b has nodes (t, u), 0 <= t <= T_b, 0 <= u <= U_b, where the extra row t = T_b
holds only the final node (T_b, U_b). Node (t, u) has two arcs:
  blank: (t, u) -> (t + 1, u)       with log-prob blank[b, t, u]
  label: (t, u) -> (t, u + 1)       with log-prob label[b, t, u]   (standard transducer)
         (t, u) -> (t + 1, u + 1)                                  (one symbol per frame)
Cells outside t < T_b, u <= U_b, and label arcs at u = U_b, must carry -inf.

Everything here is (B, T, U+1)-sized: the vocabulary never appears. Each pass runs on the backend
asked for (rnnt.loss.lattice_triton): batched PyTorch below, or one Triton kernel launch. In PyTorch the
forward-backward takes one scan per row of the lattice (rnnt.loss.lattice_rows) or one operation batch per
frame or anti-diagonal, whichever costs less; the Viterbi takes the steps. Neither backend reads a tensor's
values on the host off the CPU (no device syncs).
"""

from __future__ import annotations

import torch

from rnnt.loss import lattice_rows, lattice_triton
from rnnt.loss.lattice_triton import on_inputs_device

NEG_INF = float("-inf")


def _skew_index(n_frames: int, n_labels: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """For diagonal n and column u, the frame t = n - u (clamped) and whether it is on the grid."""
    n = torch.arange(n_frames + n_labels - 1, device=device)[:, None]
    u = torch.arange(n_labels, device=device)[None, :]
    t = n - u
    on_grid = (t >= 0) & (t < n_frames)
    return t.clamp(0, n_frames - 1), on_grid


def _skew(x: torch.Tensor, t: torch.Tensor, on_grid: torch.Tensor) -> torch.Tensor:
    """(B, T, U1) -> (B, T+U1-1, U1) with out[:, n, u] = x[:, n-u, u] (-inf off the grid)."""
    u = torch.arange(x.shape[2], device=x.device)[None, :]
    return x[:, t, u].masked_fill(~on_grid, NEG_INF)


def _unskew(x_s: torch.Tensor, n_frames: int) -> torch.Tensor:
    """(B, T+U1-1, U1) -> (B, T, U1): the inverse of _skew, out[:, t, u] = x_s[:, t+u, u]."""
    u = torch.arange(x_s.shape[2], device=x_s.device)[None, :]
    t = torch.arange(n_frames, device=x_s.device)[:, None]
    return x_s[:, t + u, u]


def _shift_up(x: torch.Tensor) -> torch.Tensor:
    """out[..., u] = x[..., u-1], -inf at u = 0: arriving from the node below by a label."""
    return torch.nn.functional.pad(x[..., :-1], (1, 0), value=NEG_INF)


def _shift_down(x: torch.Tensor) -> torch.Tensor:
    """out[..., u] = x[..., u+1], -inf at the top: the node reached by a label."""
    return torch.nn.functional.pad(x[..., 1:], (0, 1), value=NEG_INF)


def _extend(x: torch.Tensor) -> torch.Tensor:
    """Adds the final row t = T (no arcs leave it)."""
    return torch.nn.functional.pad(x, (0, 0, 0, 1), value=NEG_INF)


def _outside(final_t: torch.Tensor, final_u: torch.Tensor, T: int, U1: int) -> torch.Tensor:
    """(B,) whether an utterance's end (final_t, final_u) is no node of a lattice of T frames and U1 positions: no
    frame (logit length 0), or lengths past it. Such an utterance has no complete path (the Triton kernels' answer:
    the torch backend gave a zero-frame one log-likelihood 0, and indexed past the lattice for the others)."""
    return (final_t < 1) | (final_t > T) | (final_u < 0) | (final_u >= U1)


def _forward_backward_along_axis_1(blank, label, final_n, final_u):
    """alpha, beta over a lattice whose arcs each advance axis 1 by one step (a blank keeps u, a label adds
    one): the one-symbol lattice by frame, or the standard one skewed (_by_anti_diagonal). Utterance b
    ends at (final_n[b], final_u[b]). One step of PyTorch operations per frame or anti-diagonal, each over a
    column of U + 1 nodes of every utterance: where utterances are many and long, fewer passes over memory
    than rnnt.loss.lattice_rows."""
    N = blank.shape[1]
    alpha = torch.full_like(blank, NEG_INF)
    alpha[:, 0, 0] = 0.0
    for n in range(1, N):
        prev = alpha[:, n - 1]
        alpha[:, n] = torch.logaddexp(prev + blank[:, n - 1], _shift_up(prev + label[:, n - 1]))

    beta = torch.full_like(blank, NEG_INF)
    is_final_u = torch.arange(blank.shape[2], device=blank.device)[None, :] == final_u[:, None]
    for n in range(N - 1, -1, -1):
        if n < N - 1:
            nxt = beta[:, n + 1]
            beta[:, n] = torch.logaddexp(nxt + blank[:, n], _shift_down(nxt) + label[:, n])
        beta[:, n] = beta[:, n].masked_fill(is_final_u & (final_n == n)[:, None], 0.0)
    return alpha, beta


def _viterbi_along_axis_1(blank, label):
    """The same lattice's Viterbi: the best score into each cell and whether it arrives by a label (ties
    go to the blank)."""
    delta = torch.full_like(blank, NEG_INF)
    delta[:, 0, 0] = 0.0
    by_label_into = torch.zeros_like(blank, dtype=torch.bool)
    for n in range(1, blank.shape[1]):
        prev = delta[:, n - 1]
        by_blank, by_label = prev + blank[:, n - 1], _shift_up(prev + label[:, n - 1])
        delta[:, n] = torch.maximum(by_blank, by_label)
        by_label_into[:, n] = by_label > by_blank
    return delta, by_label_into


def _by_anti_diagonal(run, blank, label, *args):
    """One of the recursions above over the standard lattice: its arcs (t, u) -> (t + 1, u) and
    (t, u) -> (t, u + 1) each advance the anti-diagonal t + u by one, so on the skewed grid they advance
    axis 1. run's outputs come back as (B, T+1, U+1)."""
    T1, U1 = blank.shape[1:]
    t_idx, on_grid = _skew_index(T1, U1, blank.device)
    outputs = run(_skew(blank, t_idx, on_grid), _skew(label, t_idx, on_grid), *args)
    return tuple(_unskew(x, T1) for x in outputs)


@on_inputs_device
def best_path_label_frames(
    blank: torch.Tensor,
    label: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    one_sym_per_frame: bool = False,
    backend: str = "auto",
) -> torch.Tensor:
    """The frame of every label on the most likely alignment (Viterbi), (B, max(U, 1)) long, -1 past U_b.

    blank, label as for lattice_posteriors. Ties go to the blank arc. An utterance with no complete
    path (lengths of no frame, or past the lattice, too) gets -1 throughout.
    """
    with torch.no_grad():
        if lattice_triton.resolve_backend(backend, blank.device) == "triton":
            return lattice_triton.best_path_label_frames(blank, label, logit_lengths, target_lengths,
                                                         one_sym_per_frame)
        blank_e, label_e = _extend(blank), _extend(label)
        if one_sym_per_frame:  # by frame
            delta, by_label = _viterbi_along_axis_1(blank_e, label_e)
        else:
            delta, by_label = _by_anti_diagonal(_viterbi_along_axis_1, blank_e, label_e)
        B, T, U1 = blank.shape
        t, u = (x.long() for x in lattice_triton.lengths_on(logit_lengths, target_lengths, blank.device))
        outside = _outside(t, u, T, U1)
        t, u = t.clamp(0, T), u.clamp(0, U1 - 1)
        batch = torch.arange(B, device=blank.device)
        reachable = torch.isfinite(delta[batch, t, u]) & ~outside
        frames = torch.full((B, max(U1 - 1, 1)), -1, dtype=torch.long, device=blank.device)
        for _ in range(blank.shape[1] + U1 - 1):  # the longest path back; no host reads of t or u
            label_step = by_label[batch, t, u] & (u > 0)
            blank_step = ~label_step & (t > 0)
            frame = t - 1 if one_sym_per_frame else t  # a label arc leaves frame t (or t - 1) for (t, u)
            column = (u - 1).clamp(min=0)
            frames[batch, column] = torch.where(label_step, frame, frames[batch, column])
            u = u - label_step.long()
            t = t - (blank_step | (label_step & one_sym_per_frame)).long()
        return frames.masked_fill(~reachable[:, None], -1)


@on_inputs_device
def lattice_posteriors(
    blank: torch.Tensor,
    label: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    one_sym_per_frame: bool = False,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-likelihood of the targets and the posterior of every arc.

    blank, label: (B, T, U+1) arc log-probs, -inf where there is no arc.
    Returns log_like (B,), and the blank and label arc posteriors (B, T, U+1); their sum is the
    occupancy of each node. An utterance with no complete path (lengths of no frame, or past the lattice, too) gets
    log_like -inf and zero posteriors.
    Posteriors below the smallest normal float are 0.
    """
    with torch.no_grad():
        if lattice_triton.resolve_backend(backend, blank.device) == "triton":
            return lattice_triton.lattice_posteriors(blank, label, logit_lengths, target_lengths, one_sym_per_frame)
        blank_e, label_e = _extend(blank), _extend(label)
        final_t, final_u = (x.long() for x in lattice_triton.lengths_on(logit_lengths, target_lengths, blank.device))
        if lattice_rows.wanted(blank_e, label_e, one_sym_per_frame):
            alpha, beta = lattice_rows.forward_backward(blank_e, label_e, final_t, final_u, one_sym_per_frame)
        elif one_sym_per_frame:  # by frame
            alpha, beta = _forward_backward_along_axis_1(blank_e, label_e, final_t, final_u)
        else:
            alpha, beta = _by_anti_diagonal(_forward_backward_along_axis_1, blank_e, label_e, final_t + final_u,
                                            final_u)
        dtype, blank, label = blank.dtype, blank.to(alpha.dtype), label.to(alpha.dtype)
        log_like = beta[:, 0, 0].masked_fill(_outside(final_t, final_u, *blank.shape[1:]), NEG_INF)
        finite = torch.isfinite(log_like)
        norm = torch.where(finite, log_like, torch.zeros_like(log_like))[:, None, None]
        alpha, beta_next = alpha[:, :-1], beta[:, 1:]
        gamma_blank = torch.exp(alpha + blank + beta_next - norm)
        label_target = _shift_down(beta_next) if one_sym_per_frame else _shift_down(beta[:, :-1])
        gamma_label = torch.exp(alpha + label + label_target - norm)
        keep = finite[:, None, None]
        return (log_like.to(dtype), _flush(gamma_blank.where(keep, 0.0).to(dtype)),
                _flush(gamma_label.where(keep, 0.0).to(dtype)))


def _flush(posteriors: torch.Tensor) -> torch.Tensor:
    """Posteriors below the smallest normal float become 0: subnormals slow every later matmul."""
    return torch.nn.functional.threshold_(posteriors, torch.finfo(posteriors.dtype).tiny, 0.0)


class LatticeLoss(torch.autograd.Function):
    """-log P(targets) from arc log-probs whose posteriors are already known (lattice_posteriors), with
    gradient -posterior for each arc."""

    @staticmethod
    def forward(ctx, blank, label, log_like, gamma_blank, gamma_label):
        ctx.save_for_backward(gamma_blank, gamma_label)
        return -log_like

    @staticmethod
    def backward(ctx, grad_loss):
        gamma_blank, gamma_label = ctx.saved_tensors
        scale = -grad_loss[:, None, None]
        return gamma_blank * scale, gamma_label * scale, None, None, None

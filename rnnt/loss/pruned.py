"""Pruned transducer training: a cheap 'simple' loss picks, for every frame, a band of s_range symbol
positions; the real joiner is evaluated only inside that band.

1. simple_loss(am, lm, ...): the loss of the additive joiner logits am[b, t] + lm[b, u], whose
   normaliser is one (B, T, V) x (B, V, U+1) matmul, so no (B, T, U+1, V) tensor exists.
   It also returns the arc posteriors, the training signal for where the alignment lies.
2. prune_ranges(gamma_blank, gamma_label, ...): per frame, the window of s_range symbol positions
   holding the most posterior mass, made monotonic and connected so that a path runs through it.
3. prune(enc, pred, ranges): (B, T, s_range, H) joiner inputs for the cells inside the band.
4. pruned_loss(logits, ranges, ...): the exact loss restricted to those cells, on (B, T, s_range, V).
"""

from __future__ import annotations

import torch

from rnnt import host_reads
from rnnt.loss.cells import padding_zeroed, pruned_cells
from rnnt.loss.checks import FLOATS, check_length_pair, check_lengths, check_reduction, check_values, require
from rnnt.loss.emission_timing import delay_penalised
from rnnt.loss.lattice import LatticeLoss, lattice_posteriors
from rnnt.loss import lattice_triton
from rnnt.loss.lattice_triton import on_inputs_device
from rnnt.loss.logits_loss import TransducerLossFunction, reduce_losses
from rnnt.loss.options import LatticeOptions, lattice_options
from rnnt.loss.simple_arcs import Scales, SimpleArcs


def simple_arc_log_probs(am, lm, targets, logit_lengths, target_lengths, blank, lm_only_scale=0.0, am_only_scale=0.0,
                         backend: str = "auto"):
    """(B, T, U+1) blank and label log-probs of the joiner logits am[:, t] + lm[:, u], differentiable
    (rnnt.loss.simple_arcs), -inf outside each utterance's lattice.

    lm_only_scale, am_only_scale: smoothing of the simple loss; each arc's log-prob becomes
    (1 - lm_only_scale - am_only_scale) x its joint log-prob + lm_only_scale x the prediction network's own
    (log_softmax(lm[u]), as k2's) + am_only_scale x the encoder's own (log_softmax(am[t]); k2's normalises
    am[t] plus the log of the prediction network's mean distribution instead; icefall trains with 0).
    The normaliser is k2's one matmul: where the two heads' best symbols differ by more than about 87 nats
    (708 in float64) it underflows, too large and without gradient there (docs/loss.md). Under autocast too,
    its matmul and arcs are float32 (float64 for float64 inputs): bfloat16 products would put errors of 0.4%
    in every normaliser, and Triton's kernels would write bfloat16 arcs. The padding (frames t >= T_b, positions
    u > U_b) is read as 0 and takes no gradient: +inf or NaN there made the normaliser's gradient of every valid
    frame of the utterance NaN (0 x inf in its matmuls), the loss finite.
    """
    logit_lengths, target_lengths = lattice_triton.lengths_on(logit_lengths, target_lengths, am.device)
    on_host = (logit_lengths.tolist(), target_lengths.tolist()) if host_reads.free(am.device) else None
    am, lm = padding_zeroed(am, lm, logit_lengths, target_lengths, on_host)
    with torch.autocast(am.device.type, enabled=False):
        return SimpleArcs.apply(am, lm, targets, logit_lengths, target_lengths, blank,
                                Scales(lm_only_scale, am_only_scale), backend)


@on_inputs_device
def simple_loss(
    am: torch.Tensor,
    lm: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    *,
    reduction: str = "mean",
    return_posteriors: bool = False,
    lm_only_scale: float = 0.0,
    am_only_scale: float = 0.0,
    options: LatticeOptions | None = None,
    **lattice,
):
    """Transducer loss of the additive joiner am[b, t, :] + lm[b, u, :] (logits of size V each).

    am: (B, T, V) from the encoder; lm: (B, U+1, V) from the prediction network.
    With return_posteriors, also returns (gamma_blank, gamma_label), each (B, T, U+1), for prune_ranges.
    options, **lattice as in transducer_loss: the lattice, its delay_penalty (k2's smoothed loss takes it too,
    so that the band is placed where the penalised alignments lie) and backend; FastEmit and self-alignment,
    which shape the exact loss's gradient, are not applied here.
    lm_only_scale, am_only_scale: k2's smoothing (simple_arc_log_probs; icefall trains with 0.25 and 0).
    """
    check_reduction(reduction)
    options = lattice_options(options, **lattice)
    one_sym_per_frame = options.one_sym_per_frame
    if am.dtype not in FLOATS or lm.dtype not in FLOATS or am.dim() != 3 or lm.dim() != 3 \
            or am.shape[2] != lm.shape[2] or am.shape[0] != lm.shape[0]:
        raise ValueError(f"expected float am (B, T, V) and lm (B, U+1, V); got {tuple(am.shape)} {am.dtype}, "
                         f"{tuple(lm.shape)} {lm.dtype}")
    check_lengths(targets, logit_lengths, target_lengths, am.shape[0])
    blank = check_values(targets, logit_lengths, target_lengths, am.shape[2], blank, (am.shape[1], "am.shape[1]"),
                         (lm.shape[1], "lm.shape[1]"), one_sym_per_frame, options.backend)
    if not (lm_only_scale >= 0 and am_only_scale >= 0 and lm_only_scale + am_only_scale <= 1):
        raise ValueError(f"lm_only_scale and am_only_scale must be >= 0 with a sum <= 1, got {lm_only_scale} "
                         f"and {am_only_scale}")
    blank_lp, label_lp = simple_arc_log_probs(am, lm, targets, logit_lengths, target_lengths, blank, lm_only_scale,
                                              am_only_scale, options.backend)
    label_lp = delay_penalised(label_lp, logit_lengths, options.delay_penalty)
    posteriors = lattice_posteriors(blank_lp.detach(), label_lp.detach(), logit_lengths, target_lengths,
                                    one_sym_per_frame, options.backend)
    losses = LatticeLoss.apply(blank_lp, label_lp, *posteriors)
    loss = reduce_losses(losses, reduction)  # float32 (float64 inputs: 64): no float16 overflow
    return (loss, posteriors[1:]) if return_posteriors else loss


@on_inputs_device
def prune_ranges(
    gamma_blank: torch.Tensor, gamma_label: torch.Tensor, logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor, s_range: int, options: LatticeOptions | None = None, **lattice,
) -> torch.Tensor:
    """(B, T, s_range) symbol positions per frame: the window with the most node occupancy.

    Windows start at 0 on the first frame, reach U_b on the last, never move back, and overlap
    from one frame to the next, so every frame's band connects to the next by a blank; in the standard
    lattice that needs U_b <= (s_range - 1) x T_b (an utterance with more units has no path in any band:
    an infinite loss; the data filter drops it, rnnt.model.transducer.LossConfig.units_per_frame). In the one-symbol
    lattice (one_sym_per_frame), which climbs at most one symbol a frame, the windows climb no faster than
    a path can follow them and early enough for it to reach U_b by T_b (_one_symbol_band_starts).
    options, **lattice: the lattice (one_sym_per_frame) and where the frame-by-frame passes run (backend), as
    in transducer_loss.
    """
    options = lattice_options(options, **lattice)
    if not hasattr(s_range, "__index__") or isinstance(s_range, bool) or s_range < 2:  # (2.5: slicing's TypeError)
        raise ValueError(f"s_range must be a whole number >= 2 (a band needs room for a label arc), got {s_range!r}")
    s_range = int(s_range)
    check_posteriors(gamma_blank, gamma_label, logit_lengths, target_lengths)
    triton = lattice_triton.resolve_backend(options.backend, gamma_blank.device) == "triton"
    gamma_blank, gamma_label = gamma_blank.detach(), gamma_label.detach()
    if triton:
        start, last_start = lattice_triton.window_starts(gamma_blank, gamma_label, target_lengths, s_range)
    else:
        start, last_start = window_starts(gamma_blank, gamma_label, target_lengths, s_range)
    if options.one_sym_per_frame and triton:
        start = lattice_triton.one_symbol_band_starts(start, logit_lengths, target_lengths, last_start, s_range)
    elif options.one_sym_per_frame:
        _one_symbol_band_starts(start, logit_lengths, target_lengths, last_start, s_range)
    elif triton:
        start = lattice_triton.connected_band_starts(start, logit_lengths, last_start, s_range)
    else:
        _connect_band_starts(start, logit_lengths, last_start, s_range)
    return start[:, :, None] + torch.arange(s_range, device=start.device)


def check_posteriors(gamma_blank, gamma_label, logit_lengths, target_lengths) -> None:
    """The arc posteriors of one lattice (B, T, U+1) and lengths that fit in it: longer ones gave bands of positions
    past the lattice."""
    if gamma_blank.dim() != 3 or gamma_blank.shape != gamma_label.shape:
        raise ValueError(f"expected gamma_blank and gamma_label of one shape (B, T, U+1), got "
                         f"{tuple(gamma_blank.shape)} and {tuple(gamma_label.shape)}")
    B, T, U1 = gamma_blank.shape
    check_length_pair(logit_lengths, target_lengths, B)
    # 1 <= T_b <= T and 0 <= U_b <= U1 - 1 (below 1 or 0: a band of a lattice with no node) in one reduction: on a
    # GPU each check is a few launches, and a pruned step is bound by its launches
    bounds = [logit_lengths - 1, T - logit_lengths, target_lengths, U1 - 1 - target_lengths]
    require(torch.stack(bounds).min() >= 0,
            f"logit_lengths must lie in [1, the posteriors' T = {T}] and target_lengths in [0, the posteriors' "
            f"U+1 - 1 = {U1 - 1}]", lambda: outside_posteriors(logit_lengths.tolist(), target_lengths.tolist(), T, U1))


def outside_posteriors(logit_lengths: list[int], target_lengths: list[int], T: int, U1: int) -> str:
    """What check_posteriors says of lengths outside the lattice."""
    if min(logit_lengths) < 1 or min(target_lengths) < 0:
        return f"logit_lengths must be >= 1 and target_lengths >= 0, got {logit_lengths} and {target_lengths}"
    if max(logit_lengths) > T:
        return f"logit_lengths max {max(logit_lengths)} exceeds the posteriors' T = {T}"
    return f"target_lengths max {max(target_lengths)} needs the posteriors' U+1 >= {max(target_lengths) + 1}, got {U1}"


def window_starts(gamma_blank, gamma_label, target_lengths, s_range: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per frame (B, T), the start of the window of s_range symbol positions (all of them if fewer) holding the
    most node occupancy, the first of equals; at most each utterance's last start (B,), max(U_b + 1 -
    s_range, 0), so that a window lies inside [0, U_b]. Each window's sum is taken position by position, in the
    order the Triton kernel takes it (the same floats, the same argmax)."""
    occupancy = gamma_blank + gamma_label
    width = min(s_range, occupancy.shape[2])
    windows = occupancy.shape[2] - width + 1
    mass = occupancy[:, :, :windows]
    for k in range(1, width):
        mass = mass + occupancy[:, :, k:k + windows]
    last_start = (target_lengths.long() + 1 - s_range).clamp_min(0)
    return torch.minimum(mass.argmax(dim=2), last_start[:, None]), last_start


def _connect_band_starts(start: torch.Tensor, logit_lengths: torch.Tensor, last_start: torch.Tensor, s_range: int):
    """In place, frame by frame: monotonic and overlapping from 0 forwards; holding U_b at the last frame
    and overlapping the next one backwards."""
    T = start.shape[1]
    frames = torch.arange(T, device=start.device)
    T_b = logit_lengths.long().to(start.device)
    start[:, 0] = 0
    for t in range(1, T):
        start[:, t] = torch.minimum(torch.maximum(start[:, t], start[:, t - 1]), start[:, t - 1] + s_range - 1)
    need = last_start
    for t in range(T - 1, -1, -1):
        need = torch.where(frames[t] == T_b - 1, last_start, need)
        start[:, t] = torch.where(frames[t] >= T_b, start[:, t], torch.maximum(start[:, t], need))
        need = (start[:, t] - (s_range - 1)).clamp_min(0)


def _one_symbol_band_starts(start: torch.Tensor, logit_lengths: torch.Tensor, target_lengths: torch.Tensor,
                            last_start: torch.Tensor, s_range: int) -> None:
    """In place, for the one-symbol lattice: each window's top at least U_b - T_b + t (from below it U_b
    cannot be reached by the end), then frame by frame from 0 the windows never move back and start at
    most one symbol above the highest node a path can be at in the frame before, so the path that climbs
    whenever it can runs through every window to the end."""
    T = start.shape[1]
    U_b = target_lengths.long().to(start.device)
    frames = torch.arange(T, device=start.device)[None, :]
    lowest = (U_b - logit_lengths.long().to(start.device))[:, None] + frames - (s_range - 1)
    start.copy_(torch.maximum(start, torch.minimum(lowest, last_start[:, None])))
    start[:, 0] = 0
    top = torch.zeros_like(U_b)  # the highest node of the window a path can be at
    for t in range(1, T):
        start[:, t] = torch.minimum(torch.maximum(start[:, t], start[:, t - 1]), top + 1)
        top = torch.minimum(torch.minimum(top + 1, start[:, t] + s_range - 1), U_b)


def prune(enc: torch.Tensor, pred: torch.Tensor, ranges: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Joiner inputs for the band: enc (B, T, H) -> (B, T, S, H) broadcast (no copy); pred (B, U+1, H)
    gathered at ranges -> (B, T, S, H). The joiner computes act(enc_pruned + pred_pruned)."""
    B, T, S = ranges.shape
    index = ranges.clamp(max=pred.shape[1] - 1).reshape(B, T * S, 1).expand(B, T * S, pred.shape[2])
    pred_pruned = pred.gather(1, index).reshape(B, T, S, pred.shape[2])
    return enc[:, :, None, :].expand(B, T, S, enc.shape[2]), pred_pruned


@on_inputs_device
def pruned_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    ranges: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    *,
    reduction: str = "mean",
    clamp: float | None = None,
    options: LatticeOptions | None = None,
    **lattice,
) -> torch.Tensor:
    """The exact transducer loss over the cells of the band: logits (B, T, S, V) at positions ranges (B, T, S).

    Equals transducer_loss on the full logits when the band covers every symbol position (S >= U+1);
    options, **lattice as there.
    """
    options = lattice_options(options, **lattice)
    check_banded_shapes(logits, ranges)
    check_lengths(targets, logit_lengths, target_lengths, logits.shape[0])
    blank = check_values(targets, logit_lengths, target_lengths, logits.shape[-1], blank,
                         (logits.shape[1], "logits.shape[1]"), None, options.one_sym_per_frame, options.backend)
    return banded_loss(logits, targets, ranges, logit_lengths, target_lengths, blank, reduction=reduction,
                       clamp=clamp, options=options)


def check_banded_shapes(logits: torch.Tensor, ranges: torch.Tensor) -> None:
    """Float logits (B, T, S, V) and integer ranges (B, T, S); where reading is free (the CPU) each frame's
    positions distinct, increasing and from 0 (prune_ranges' are; a hand-made band that repeats one gave a
    gradient the loss did not have)."""
    if logits.dtype not in FLOATS or logits.dim() != 4 or ranges.shape != logits.shape[:3] \
            or ranges.dtype.is_floating_point or ranges.dtype == torch.bool:
        raise ValueError(f"expected float logits (B, T, S, V) and integer ranges (B, T, S); got {tuple(logits.shape)} "
                         f"{logits.dtype} and {tuple(ranges.shape)} {ranges.dtype}")
    if host_reads.free(ranges.device) and ranges.numel() and not (
            bool((ranges >= 0).all()) and bool((ranges.diff(dim=2) > 0).all())):
        raise ValueError("ranges: each frame's positions must be distinct and increasing, from 0")


@on_inputs_device
def banded_loss(logits, targets, ranges, logit_lengths, target_lengths, blank: int, *, reduction: str = "mean",
                clamp: float | None = None, options: LatticeOptions) -> torch.Tensor:
    """pruned_loss without checking targets and lengths again, for a caller whose simple_loss checked these very
    tensors (the model): each check is an operator a step, on a GPU a launch (a pruned step dispatched 228 of
    them, 40 of them checks made twice). blank must be an id (0 .. V-1)."""
    check_reduction(reduction)
    check_banded_shapes(logits, ranges)
    cells = pruned_cells(ranges, targets, logit_lengths, target_lengths, blank, options.backend)
    rows = logits.reshape(-1, logits.shape[-1])
    return TransducerLossFunction.apply(rows, cells, logit_lengths, target_lengths, blank, reduction, False, clamp,
                                        False, options)

"""Where each row of a (N, V) logits matrix sits in the (B, T, U+1) transducer lattice.

Padded logits (B, T, U+1, V), packed logits (sum_b T_b * (U_b+1), V) and pruned logits (B, T, S, V)
are all rows of cells; one map per layout lets a single loss implementation serve them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rnnt.loss.lattice_triton import bookkeeping_in_triton, lengths_on


@dataclass
class CellMap:
    batch: torch.Tensor  # (N,) utterance of each row
    cell: torch.Tensor  # (N,) flat index b * T * U1 + t * U1 + u into the lattice (0 for invalid rows)
    valid: torch.Tensor  # (N,) row lies inside its utterance's lattice
    label: torch.Tensor  # (N,) symbol of the label arc leaving the cell (the blank where there is none)
    has_label: torch.Tensor  # (N,) the cell has a label arc (valid and u < U_b)
    shape: tuple[int, int, int]  # (B, T, U1) of the lattice
    identity: bool = False  # the rows are the lattice's cells, in order (padded logits)

    def to_lattice(self, values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """Scatters per-row values into a -inf filled (B, T, U1) lattice (rows not where go to a spare cell
        past its end: no boolean indexing, which would read the mask on the host)."""
        if self.identity:
            return values.where(where, float("-inf")).view(self.shape)
        cells = self.shape[0] * self.shape[1] * self.shape[2]
        lattice = torch.full((cells + 1,), float("-inf"), dtype=values.dtype, device=values.device)
        lattice[torch.where(where, self.cell, cells)] = values
        return lattice[:cells].view(self.shape)

    def from_lattice(self, lattice: torch.Tensor) -> torch.Tensor:
        """Per-row values of a (B, T, U1) lattice, 0 for invalid rows."""
        if self.identity:
            return lattice.reshape(-1).where(self.valid, 0.0)
        return lattice.reshape(-1)[self.cell].where(self.valid, 0.0)


def lattice_masks(logit_lengths, target_lengths, T: int, U1: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which cells of a padded (B, T, U1) lattice are its utterances' own (they have a blank arc), and which
    of those have a label arc: each (B, T, U1)."""
    t = torch.arange(T, device=logit_lengths.device)[None, :, None]
    u = torch.arange(U1, device=logit_lengths.device)[None, None, :]
    U_b = target_lengths[:, None, None]
    inside = (t < logit_lengths[:, None, None]) & (u <= U_b)
    return inside, inside & (u < U_b)


def padding_zeroed(enc, pred, logit_lengths, target_lengths, on_host: tuple[list[int], list[int]] | None):
    """enc (B, T, H) and pred (B, U1, H) with each utterance's padding frames and columns 0, whatever they held
    (rnnt.loss.fused_joiner's blocks: +inf or NaN there, in a block an utterance shares, made 0 * inf in the
    weight's and the activation's gradients, NaN; the kernels read the padding as 0). Once a call, where a mask
    of each block's activations took half a dozen operators a block and a pass over its activations; the same
    tensors, not copies of them, where the lengths on the host (on_host; None: not read there) show no padding."""
    if on_host is not None and all(t == enc.shape[1] for t in on_host[0]) and \
            all(u + 1 == pred.shape[1] for u in on_host[1]):
        return enc, pred
    frames = torch.arange(enc.shape[1], device=enc.device) >= logit_lengths[:, None]
    columns = torch.arange(pred.shape[1], device=pred.device) > target_lengths[:, None]
    return enc.masked_fill(frames[..., None], 0), pred.masked_fill(columns[..., None], 0)


def _build(b, t, u, logit_lengths, target_lengths, targets, blank, T, U1, identity=False) -> CellMap:
    T_b, U_b = logit_lengths.long()[b], target_lengths.long()[b]
    valid = (t < T_b) & (u <= U_b) & (t >= 0) & (u >= 0)
    has_label = valid & (u < U_b)
    label = torch.full_like(u, blank)
    if targets.shape[1] > 0:
        label = torch.where(has_label, targets.long()[b, u.clamp(0, targets.shape[1] - 1)], label)
    cell = torch.where(valid, (b * T + t) * U1 + u, torch.zeros_like(u))
    return CellMap(b, cell, valid, label, has_label, (int(logit_lengths.shape[0]), T, U1), identity)


def _built_in_triton(positions, targets, logit_lengths, target_lengths, blank, T: int, S: int, U1: int) -> CellMap:
    """As _build, in one launch (rnnt.loss.cells_kernel): rows (b, t, s), S a frame, at the lattice's symbol
    positions s (positions None: padded logits) or at positions (B, T, S)."""
    from rnnt.loss.cells_kernel import cell_map_kernel

    B, device = int(logit_lengths.shape[0]), targets.device
    n = B * T * S
    batch, cell, label = torch.empty(3, n, dtype=torch.long, device=device)  # two allocations, not five
    valid, has_label = torch.empty(2, n, dtype=torch.bool, device=device)
    block = 1024
    cell_map_kernel[(max(1, -(-n // block)),)](
        positions if positions is not None else cell, targets, *(targets.stride() if targets.shape[1] else (0, 0)),
        targets.shape[1], *lengths_on(logit_lengths, target_lengths, device),
        batch, cell, valid, label, has_label, n, T, S, U1, blank, PRUNED=positions is not None, BLOCK=block)
    return CellMap(batch, cell, valid, label, has_label, (B, T, U1), positions is None)


def padded_cells(logits_shape, targets, logit_lengths, target_lengths, blank, backend: str = "auto") -> CellMap:
    B, T, U1, _ = logits_shape
    device = targets.device
    if bookkeeping_in_triton(device, backend):
        return _built_in_triton(None, targets, logit_lengths, target_lengths, blank, T, U1, U1)
    b = torch.arange(B, device=device).repeat_interleave(T * U1)
    t = torch.arange(T, device=device).repeat_interleave(U1).repeat(B)
    u = torch.arange(U1, device=device).repeat(B * T)
    return _build(b, t, u, logit_lengths, target_lengths, targets, blank, T, U1, identity=True)


def packed_cells(targets, logit_lengths, target_lengths, blank) -> CellMap:
    """The one layout whose map reads the lengths on the host (its rows' count and the lattice's shape)."""
    T_b, U1_b = logit_lengths.long(), target_lengths.long() + 1
    sizes = T_b * U1_b
    device = targets.device
    b = torch.arange(len(sizes), device=device).repeat_interleave(sizes)
    offsets = torch.cumsum(sizes, 0) - sizes
    local = torch.arange(int(sizes.sum()), device=device) - offsets[b]
    t, u = local // U1_b[b], local % U1_b[b]
    return _build(b, t, u, logit_lengths, target_lengths, targets, blank, int(T_b.max()), int(U1_b.max()))


def pruned_cells(ranges, targets, logit_lengths, target_lengths, blank, backend: str = "auto") -> CellMap:
    """ranges: (B, T, S) the symbol position u of each pruned cell (t, s). The lattice is as wide as the
    targets' tensor (+ 1): its shape needs no length read on the host."""
    B, T, S = ranges.shape
    device = ranges.device
    U1 = targets.shape[1] + 1
    if bookkeeping_in_triton(device, backend):
        return _built_in_triton(ranges.contiguous(), targets, logit_lengths, target_lengths, blank, T, S, U1)
    b = torch.arange(B, device=device).repeat_interleave(T * S)
    t = torch.arange(T, device=device).repeat_interleave(S).repeat(B)
    u = ranges.reshape(-1).long()
    return _build(b, t, u, logit_lengths, target_lengths, targets, blank, T, U1)

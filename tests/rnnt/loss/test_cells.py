"""rnnt.loss.cells: for padded, packed and pruned logits, each row's utterance, lattice cell, validity and
label arc, checked against loops over (b, t, u) on ragged lengths; the packed map is the padded map's
valid rows; values scatter into a -inf lattice and read back without invalid rows touching any cell."""

import dataclasses

import pytest
import torch

from rnnt.loss.cells import packed_cells, padded_cells, pruned_cells
from rnnt.loss.packing import pack_joiner_input


def expected_row(b, t, u, T, U1, targets, logit_lengths, target_lengths, blank) -> tuple[int, int, bool, int, bool]:
    """(batch, cell, valid, label, has_label) of the row at cell (b, t, u), from the definitions."""
    valid = 0 <= t < int(logit_lengths[b]) and 0 <= u <= int(target_lengths[b])
    has_label = valid and u < int(target_lengths[b])
    label = int(targets[b, u]) if has_label else blank
    return b, (b * T + t) * U1 + u if valid else 0, valid, label, has_label


def rows_of(cells) -> list[tuple[int, int, bool, int, bool]]:
    return list(zip(cells.batch.tolist(), cells.cell.tolist(), cells.valid.tolist(), cells.label.tolist(),
                    cells.has_label.tolist()))


def ragged(seed=0):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(1, 9, (3, 4), generator=g, dtype=torch.int32)
    return targets, torch.tensor([5, 2, 4], dtype=torch.int32), torch.tensor([4, 0, 2], dtype=torch.int32)


def test_a_single_utterance_by_hand():
    cells = padded_cells((1, 2, 2, 7), torch.tensor([[5]]), torch.tensor([2]), torch.tensor([1]), blank=0)
    assert cells.shape == (1, 2, 2)
    assert cells.cell.tolist() == [0, 1, 2, 3] and cells.valid.tolist() == [True] * 4
    assert cells.label.tolist() == [5, 0, 5, 0]  # (t, u=0) has the arc emitting 5; u=1 = U_b has none
    assert cells.has_label.tolist() == [True, False, True, False]


def test_padded_rows_follow_b_t_u_and_padding_is_invalid():
    targets, logit_lengths, target_lengths = ragged()
    B, T, U1 = 3, 5, 5
    cells = padded_cells((B, T, U1, 9), targets, logit_lengths, target_lengths, blank=0)
    assert cells.shape == (B, T, U1)
    assert rows_of(cells) == [expected_row(b, t, u, T, U1, targets, logit_lengths, target_lengths, 0)
                              for b in range(B) for t in range(T) for u in range(U1)]
    assert int(cells.valid.sum()) == 5 * 5 + 2 * 1 + 4 * 3


def test_packed_rows_are_the_padded_maps_valid_rows_in_order():
    targets, logit_lengths, target_lengths = ragged(1)
    packed = packed_cells(targets, logit_lengths, target_lengths, blank=0)
    padded = padded_cells((3, 5, 5, 9), targets, logit_lengths, target_lengths, blank=0)
    assert packed.shape == padded.shape == (3, 5, 5)  # max T_b, max U_b + 1
    keep = padded.valid
    for name in ("batch", "cell", "valid", "label", "has_label"):
        assert torch.equal(getattr(packed, name), getattr(padded, name)[keep]), name


def test_packed_rows_are_where_pack_joiner_input_puts_them():
    """Row n of pack_joiner_input is enc[b, t] + pred[b, u] for the cell the packed map gives row n."""
    _, logit_lengths, target_lengths = ragged(2)
    T, U1 = 5, 5
    enc = (1000 * torch.arange(3)[:, None] + 10 * torch.arange(T)[None, :]).double()[..., None]
    pred = torch.arange(U1).double()[None, :, None].expand(3, U1, 1)
    rows = pack_joiner_input(enc, pred, logit_lengths, target_lengths)[:, 0].long()
    cells = packed_cells(torch.zeros(3, 4, dtype=torch.long), logit_lengths, target_lengths, blank=0)
    b, t, u = cells.cell // (T * U1), cells.cell // U1 % T, cells.cell % U1
    assert torch.equal(rows, 1000 * b + 10 * t + u) and torch.equal(b, cells.batch)


def test_pruned_rows_take_u_from_the_ranges_and_the_lattice_is_as_wide_as_the_targets():
    targets, logit_lengths, target_lengths = ragged(3)
    B, T, S = 3, 5, 2
    g = torch.Generator().manual_seed(4)
    ranges = torch.randint(0, 5, (B, T, S), generator=g)  # some past U_b: invalid
    ranges[0, 0] = torch.tensor([-1, 0])  # a position before the lattice: invalid too
    cells = pruned_cells(ranges, targets, logit_lengths, target_lengths, blank=0)
    U1 = targets.shape[1] + 1
    assert cells.shape == (B, T, U1)
    assert rows_of(cells) == [expected_row(b, t, int(ranges[b, t, s]), T, U1, targets, logit_lengths,
                                           target_lengths, 0) for b in range(B) for t in range(T) for s in range(S)]
    assert not cells.valid[0] and cells.valid[1]


def test_a_blank_other_than_zero_labels_the_cells_without_an_arc():
    targets, logit_lengths, target_lengths = ragged(5)
    targets[targets == 8] = 1  # 8 is the blank here: no target may be it
    cells = padded_cells((3, 5, 5, 9), targets, logit_lengths, target_lengths, blank=8)
    assert torch.equal(cells.label == 8, ~cells.has_label)


def test_empty_targets_give_no_label_arcs():
    targets = torch.zeros(2, 0, dtype=torch.long)
    for cells in (padded_cells((2, 3, 1, 4), targets, torch.tensor([3, 1]), torch.tensor([0, 0]), blank=0),
                  packed_cells(targets, torch.tensor([3, 1]), torch.tensor([0, 0]), blank=0)):
        assert not cells.has_label.any() and cells.label.eq(0).all()
    packed = packed_cells(targets, torch.tensor([3, 1]), torch.tensor([0, 0]), blank=0)
    assert packed.cell.tolist() == [0, 1, 2, 3] and packed.shape == (2, 3, 1)


def test_to_lattice_and_back_ignore_the_invalid_rows():
    targets, logit_lengths, target_lengths = ragged(6)
    cells = padded_cells((3, 5, 5, 9), targets, logit_lengths, target_lengths, blank=0)
    values = torch.arange(len(cells.cell), dtype=torch.float64) + 1.0
    lattice = cells.to_lattice(values, cells.valid)
    assert lattice.shape == (3, 5, 5)
    # the padded layout's rows are the lattice's cells: valid ones hold their row's value, the rest -inf
    assert torch.equal(lattice.reshape(-1), torch.where(cells.valid, values, float("-inf")))
    assert lattice[0, 0, 0] == 1.0  # the invalid rows, whose cell reads 0, did not write cell 0
    assert torch.equal(cells.from_lattice(lattice), torch.where(cells.valid, values, 0.0))


def test_the_padded_maps_shortcut_equals_the_general_scatter_and_gather():
    targets, logit_lengths, target_lengths = ragged(8)
    cells = padded_cells((3, 5, 5, 9), targets, logit_lengths, target_lengths, blank=0)
    general = dataclasses.replace(cells, identity=False)
    assert cells.identity and not packed_cells(targets, logit_lengths, target_lengths, blank=0).identity
    values = torch.randn(len(cells.cell), dtype=torch.float64)
    for where in (cells.valid, cells.has_label):
        assert torch.equal(cells.to_lattice(values, where), general.to_lattice(values, where))
    lattice = torch.randn(3, 5, 5, dtype=torch.float64)
    assert torch.equal(cells.from_lattice(lattice), general.from_lattice(lattice))


def test_to_lattice_with_a_narrower_mask_leaves_the_other_cells_minus_infinity():
    targets, logit_lengths, target_lengths = ragged(7)
    cells = packed_cells(targets, logit_lengths, target_lengths, blank=0)
    values = torch.randn(len(cells.cell), dtype=torch.float64)
    lattice = cells.to_lattice(values, cells.has_label)
    expected = torch.full((3 * 5 * 5,), float("-inf"), dtype=torch.float64)
    for n in range(len(values)):
        if cells.has_label[n]:
            expected[int(cells.cell[n])] = values[n]
    assert torch.equal(lattice.reshape(-1), expected)
    # every valid row reads its cell: the value where it had a label arc, -inf where it had none
    assert torch.equal(cells.from_lattice(lattice), torch.where(cells.has_label, values, float("-inf")))


def test_the_gpus_cell_maps_in_one_triton_launch_equal_pytorchs(monkeypatch):
    """Where the host does not read for free (a GPU; here Triton's interpreter), padded and pruned maps come
    from rnnt.loss.cells_kernel: the same rows, dtypes and lattice, for strided and empty targets and a band
    reaching past the utterances and the lattice (-1 and U + 1)."""
    from rnnt import host_reads
    from rnnt.loss import lattice_triton

    if torch.cuda.is_available() or not lattice_triton.triton_installed():
        pytest.skip("Triton takes CPU tensors in its interpreter only, off where CUDA is")
    targets, T_b, U_b = ragged(seed=4)
    g = torch.Generator().manual_seed(5)
    band = torch.randint(-1, targets.shape[1] + 2, (3, 5, 3), generator=g)
    maps = [lambda: padded_cells((3, 5, 5, 9), targets, T_b, U_b, 0),
            lambda: padded_cells((3, 5, 3, 9), targets[:, ::2], T_b, U_b.clamp(max=2), 8),
            lambda: padded_cells((3, 5, 1, 9), targets[:, :0], T_b, U_b * 0, 0),
            lambda: pruned_cells(band, targets, T_b, U_b, 0)]
    for build in maps:
        monkeypatch.setattr(host_reads, "free", lambda device: True)
        expected = build()
        monkeypatch.setattr(host_reads, "free", lambda device: False)
        assert lattice_triton.bookkeeping_in_triton(torch.device("cpu"))
        got = build()
        for field in dataclasses.fields(expected):
            a, b = getattr(expected, field.name), getattr(got, field.name)
            assert (torch.equal(a, b) and a.dtype == b.dtype) if torch.is_tensor(a) else a == b, field.name

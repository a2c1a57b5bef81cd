"""The PyTorch forward-backward of rnnt.loss.lattice, both schedules (scans along the rows,
rnnt.loss.lattice_rows; steps along frames or anti-diagonals), against a node-by-node loop: ragged batches,
U = 0, T = 1, pruned bands (rows that start with missing blank arcs), utterances with no complete path, both
lattices, float64, float32 and bfloat16; and which schedule runs."""

import math

import pytest
import torch

from rnnt.loss import lattice_rows
from rnnt.loss.lattice import lattice_posteriors

NEG_INF = float("-inf")


def log_add(a: float, b: float) -> float:
    top = max(a, b)
    return top if top == NEG_INF else top + math.log(math.exp(a - top) + math.exp(b - top))


def loop_posteriors(blank, label, T_b, U_b, one_sym):
    """log P and the arc posteriors of each utterance, a node at a time in Python floats."""
    B, T, U1 = blank.shape
    log_like = torch.full((B,), NEG_INF, dtype=torch.float64)
    gamma_blank, gamma_label = torch.zeros(B, T, U1, dtype=torch.float64), torch.zeros(B, T, U1, dtype=torch.float64)
    for b in range(B):
        Tb, Ub, bl, lb = int(T_b[b]), int(U_b[b]), blank[b].tolist(), label[b].tolist()
        label_to = (lambda t, u: (t + 1, u + 1)) if one_sym else (lambda t, u: (t, u + 1))
        alpha = [[NEG_INF] * U1 for _ in range(T + 1)]
        alpha[0][0] = 0.0
        for t in range(T):  # nodes in an order that visits every arc's source before its end
            for u in range(U1):
                if alpha[t][u] > NEG_INF:
                    alpha[t + 1][u] = log_add(alpha[t + 1][u], alpha[t][u] + bl[t][u])
                    if u + 1 < U1:
                        t2, u2 = label_to(t, u)
                        alpha[t2][u2] = log_add(alpha[t2][u2], alpha[t][u] + lb[t][u])
        beta = [[NEG_INF] * U1 for _ in range(T + 1)]
        beta[Tb][Ub] = 0.0
        for t in range(T - 1, -1, -1):
            for u in range(U1 - 1, -1, -1):
                t2, u2 = label_to(t, u)
                by_label = beta[t2][u2] + lb[t][u] if u + 1 < U1 else NEG_INF
                beta[t][u] = log_add(log_add(beta[t][u], beta[t + 1][u] + bl[t][u]), by_label)
        total = beta[0][0]
        if total == NEG_INF:
            continue
        log_like[b] = total
        for t in range(T):
            for u in range(U1):
                gamma_blank[b, t, u] = math.exp(alpha[t][u] + bl[t][u] + beta[t + 1][u] - total)
                if u + 1 < U1:
                    t2, u2 = label_to(t, u)
                    gamma_label[b, t, u] = math.exp(alpha[t][u] + lb[t][u] + beta[t2][u2] - total)
    return log_like, gamma_blank, gamma_label


def arcs(T_b, U_b, seed, band=None):
    """Random arc log-probs (B, T, U+1), -inf where the lattice has no arc; band: only the nodes
    start_t <= u < start_t + band keep theirs (a pruned loss's lattice), the starts along the diagonal from
    (0, 0) to (T_b, U_b): rows start with missing arcs, and a path remains."""
    g = torch.Generator().manual_seed(seed)
    T, U = int(T_b.max()), int(U_b.max())
    log_probs = (torch.randn(len(T_b), T, U + 1, 3, generator=g, dtype=torch.float64) * 2).log_softmax(-1)
    t, u = torch.arange(T)[None, :, None], torch.arange(U + 1)[None, None, :]
    node = (t < T_b[:, None, None]) & (u <= U_b[:, None, None])
    if band:
        starts = (torch.arange(T)[None, :] * U_b[:, None] // T_b[:, None] - (band - 1) // 2).clamp(min=0)[..., None]
        node &= (u >= starts) & (u < starts + band)
    blank = log_probs[..., 0].masked_fill(~node, NEG_INF)
    label = log_probs[..., 1].masked_fill(~(node & (u < U_b[:, None, None])), NEG_INF)
    return blank, label


LATTICES = [  # (T_b, U_b, band)
    (torch.tensor([7, 5, 1, 6, 3]), torch.tensor([4, 0, 1, 2, 3]), None),  # ragged, U = 0, T = 1
    (torch.tensor([1]), torch.tensor([0]), None),
    (torch.tensor([3, 2]), torch.tensor([4, 1]), None),  # 4 labels in 3 frames: no one-symbol path
    (torch.tensor([12, 9, 11]), torch.tensor([6, 5, 3]), 2),
    (torch.tensor([10, 10]), torch.tensor([7, 4]), 3),
]


@pytest.mark.parametrize("by_rows", [True, False])
@pytest.mark.parametrize("one_sym", [False, True])
@pytest.mark.parametrize("T_b, U_b, band", LATTICES)
def test_both_schedules_equal_the_loop(T_b, U_b, band, one_sym, by_rows, monkeypatch):
    monkeypatch.setattr(lattice_rows, "cheaper", lambda *shape: by_rows)
    blank, label = arcs(T_b, U_b, seed=len(T_b) + (band or 0), band=band)
    want = loop_posteriors(blank, label, T_b, U_b, one_sym)
    for dtype, tolerance in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        got = lattice_posteriors(blank.to(dtype), label.to(dtype), T_b, U_b, one_sym, backend="torch")
        for g, w in zip(got, want):
            assert g.dtype == dtype
            assert torch.equal(torch.isfinite(g), torch.isfinite(w))
            finite = torch.isfinite(w)
            torch.testing.assert_close(g.double()[finite], w[finite], rtol=0, atol=tolerance)
    assert torch.isfinite(want[0]).all() == (not one_sym or T_b.tolist() != [3, 2])


@pytest.mark.parametrize("one_sym", [False, True])
def test_long_band_rows_stay_exact(one_sym, monkeypatch):
    """Rows of 2000 frames that start deep into the utterance (a band): the missing arcs before them must
    not cost the real paths any precision."""
    T_b, U_b = torch.tensor([2000, 1500]), torch.tensor([40, 30])
    blank, label = arcs(T_b, U_b, seed=3, band=4)
    results = {}
    for by_rows in (True, False):
        monkeypatch.setattr(lattice_rows, "cheaper", lambda *shape: by_rows)
        results[by_rows] = lattice_posteriors(blank, label, T_b, U_b, one_sym, backend="torch")
    assert torch.isfinite(results[True][0]).all()
    for rows, steps in zip(results[True], results[False]):
        torch.testing.assert_close(rows, steps, rtol=0, atol=1e-9)  # the missing arcs as -1e7 cost 4e-6


def test_rows_for_few_short_utterances_and_steps_for_many_long_ones_on_the_cpu():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert lattice_rows.cheaper(10, 101, 9, False, cpu)  # yesno's batches
    assert lattice_rows.cheaper(8, 76, 21, True, cpu)  # AN4's
    assert not lattice_rows.cheaper(30, 441, 105, False, cpu)  # LibriSpeech's at B30
    assert lattice_rows.cheaper(30, 441, 105, False, cuda)
    assert not lattice_rows.cheaper(10, 101, 9, False, torch.device("mps"))  # no float64 there


def spy_on_rows(monkeypatch) -> list:
    runs = []
    scan = lattice_rows.forward_backward
    monkeypatch.setattr(lattice_rows, "forward_backward", lambda *args: runs.append(1) or scan(*args))
    return runs


@pytest.mark.parametrize("one_sym", [False, True])
def test_the_losses_lattices_run_by_rows_where_that_is_cheaper(one_sym, monkeypatch):
    runs = spy_on_rows(monkeypatch)
    for band in (None, 3):  # a whole lattice, a pruned band's
        blank, label = arcs(torch.tensor([12, 9]), torch.tensor([6, 5]), seed=1, band=band)
        lattice_posteriors(blank.float(), label.float(), torch.tensor([12, 9]), torch.tensor([6, 5]), one_sym,
                           backend="torch")
    assert len(runs) == 2
    T_b, U_b = torch.full((30,), 440), torch.full((30,), 104)
    blank, label = arcs(T_b, U_b, seed=1)
    lattice_posteriors(blank.float(), label.float(), T_b, U_b, one_sym, backend="torch")
    assert len(runs) == 2  # the steps, cheaper there


def unusual_lattices():
    """Lattices the rows would not hold exactly, by name: a gap in a row's blank arcs, label arcs before a
    row's first blank arc, paths scoring below -5e6."""
    T_b, U_b = torch.tensor([3000]), torch.tensor([3])
    blank, label = arcs(T_b, U_b, seed=2)
    gap = blank.clone()
    gap[0, 100:2900, 1] = NEG_INF
    before = blank.clone()
    before[0, :2500, 2] = NEG_INF
    T_low, U_low = torch.tensor([50]), torch.tensor([2])
    low_blank, low_label = arcs(T_low, U_low, seed=2)
    return {"gap": (gap, label, T_b, U_b), "labels before the blanks": (before, label, T_b, U_b),
            "below -5e6": (low_blank.clamp(max=-2e5), low_label, T_low, U_low)}


@pytest.mark.parametrize("one_sym", [False, True])
@pytest.mark.parametrize("name", ["gap", "labels before the blanks", "below -5e6"])
def test_lattices_the_rows_would_round_take_the_steps_on_the_cpu(name, one_sym, monkeypatch):
    blank, label, T_b, U_b = unusual_lattices()[name]
    runs = spy_on_rows(monkeypatch)
    monkeypatch.setattr(lattice_rows, "cheaper", lambda *shape: True)
    got = lattice_posteriors(blank, label, T_b, U_b, one_sym, backend="torch")
    assert not runs
    want = loop_posteriors(blank, label, T_b, U_b, one_sym)
    assert torch.isfinite(want[0]).all()
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_bfloat16_arcs_come_back_in_bfloat16_near_the_loop(monkeypatch):
    T_b, U_b = torch.tensor([9, 6]), torch.tensor([4, 2])
    blank, label = arcs(T_b, U_b, seed=4)
    want = loop_posteriors(blank.bfloat16().double(), label.bfloat16().double(), T_b, U_b, False)
    for by_rows in (True, False):
        monkeypatch.setattr(lattice_rows, "cheaper", lambda *shape: by_rows)
        got = lattice_posteriors(blank.bfloat16(), label.bfloat16(), T_b, U_b, False, backend="torch")
        assert all(g.dtype == torch.bfloat16 for g in got)
        torch.testing.assert_close(got[0].double(), want[0], rtol=0.02, atol=0)
        if by_rows:  # in float64, rounded once at the end
            torch.testing.assert_close(got[1].double(), want[1], rtol=0, atol=0.005)


@pytest.mark.parametrize("backend,by_rows", [("torch", True), ("torch", False), ("triton", False)])
@pytest.mark.parametrize("one_sym", [False, True])
def test_lengths_of_no_frame_or_past_the_lattice_have_no_path_on_either_backend(backend, by_rows, one_sym,
                                                                                monkeypatch):
    """A zero-frame utterance had log-likelihood 0 (or its labels' sum 'at frame 0') on the torch backend, -inf on
    Triton's, and lengths past the lattice an IndexError from the torch backend's best path; each is an utterance
    with no complete path (log_like -inf, no posterior, no frame), beside one whose answer stays."""
    from conftest import TRITON_DEVICE
    from rnnt.loss.lattice import best_path_label_frames

    monkeypatch.setattr(lattice_rows, "cheaper", lambda *shape: by_rows)
    device = TRITON_DEVICE if backend == "triton" else "cpu"
    T, U1 = 3, 3
    for T_b, U_b in ((0, 0), (0, 2), (T + 1, 1), (T, U1)):
        blank, label = (x.to(device) for x in arcs(torch.tensor([T, T_b]), torch.tensor([2, U_b]), seed=3))
        blank, label = blank[:, :T, :U1].contiguous(), label[:, :T, :U1].contiguous()
        lengths = torch.tensor([T, T_b], device=device), torch.tensor([2, U_b], device=device)
        log_like, gamma_blank, gamma_label = lattice_posteriors(blank, label, *lengths, one_sym, backend=backend)
        frames = best_path_label_frames(blank, label, *lengths, one_sym, backend=backend)
        assert log_like[1] == NEG_INF and not gamma_blank[1].any() and not gamma_label[1].any(), (T_b, U_b)
        assert (frames[1] == -1).all() and (frames[0] >= 0).all() and torch.isfinite(log_like[0]), (T_b, U_b)

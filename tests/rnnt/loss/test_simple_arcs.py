"""rnnt.loss.simple_arcs: the simple loss's arcs and their hand-written gradient equal autograd through the
definition (log_softmax of the (B, T, U+1, V) sums am[t] + lm[u], with k2's smoothing), on ragged lengths,
padded targets holding garbage, a blank other than 0, float64, float32 and bfloat16; PyTorch's per-cell work
and the Triton kernels' (here in Triton's interpreter, as on a GPU) give the same arcs and gradients."""

import pytest
import torch

from rnnt import host_reads
from rnnt.loss import lattice_triton
from rnnt.loss.simple_arcs import Scales, SimpleArcs
from conftest import TRITON_DEVICE as DEVICE

SCALES = [Scales(), Scales(lm_only=0.25), Scales(lm_only=0.25, am_only=0.1), Scales(am_only=0.3),
          Scales(lm_only=1.0)]


def by_definition(am, lm, labels, T_b, U_b, blank, scales: Scales):
    """The arcs from the (B, T, U+1, V) log-softmax, -inf outside the lattice."""
    B, T, V = am.shape
    U1 = lm.shape[1]
    joint = (am[:, :, None] + lm[:, None]).log_softmax(3)
    lm_own, am_own = lm.log_softmax(2)[:, None].expand(B, T, U1, V), am.log_softmax(2)[:, :, None].expand(B, T, U1, V)
    mixed = scales.joint * joint + scales.lm_only * lm_own + scales.am_only * am_own
    blank_lp = mixed[..., blank]
    label_lp = mixed.gather(3, labels[:, None, :, None].expand(B, T, U1, 1))[..., 0]
    t, u = torch.arange(T, device=am.device)[None, :, None], torch.arange(U1, device=am.device)[None, None, :]
    valid = (t < T_b[:, None, None]) & (u <= U_b[:, None, None])
    has_label = valid & (u < U_b[:, None, None])
    return blank_lp.masked_fill(~valid, float("-inf")), label_lp.masked_fill(~has_label, float("-inf"))


def ragged(seed, dtype=torch.float64, B=3, T=7, U=5, V=11, blank=0):
    g = torch.Generator().manual_seed(seed)
    am = (3 * torch.randn(B, T, V, generator=g, dtype=torch.float64)).to(DEVICE, dtype).requires_grad_(True)
    lm = (3 * torch.randn(B, U + 1, V, generator=g, dtype=torch.float64)).to(DEVICE, dtype).requires_grad_(True)
    symbols = [s for s in range(V) if s != blank]
    targets = torch.tensor(symbols)[torch.randint(0, V - 1, (B, U), generator=g)]
    T_b, U_b = torch.tensor([T, 3, 5][:B]), torch.tensor([U, 0, 2][:B])
    for b in range(B):
        targets[b, U_b[b]:] = -7  # padding that is not a symbol: never read
    labels = torch.where(torch.arange(U + 1) < U_b[:, None], torch.nn.functional.pad(targets, (0, 1)), blank)
    return am, lm, *(x.to(DEVICE) for x in (targets, labels, T_b, U_b))


def upstream(blank_lp, label_lp, seed):
    """Random gradients for the arcs (NaN outside the lattice: the arcs there are constants, it must not
    reach the inputs)."""
    g = torch.Generator().manual_seed(seed)
    grads = [torch.randn(x.shape, generator=g, dtype=torch.float64).to(x.device, x.dtype) for x in (blank_lp, label_lp)]
    return [grad.where(torch.isfinite(x), float("nan")) for grad, x in zip(grads, (blank_lp, label_lp))]


@pytest.fixture(params=["torch", "triton"])
def per_cell_work(request, monkeypatch):
    """Where the per-cell work runs: PyTorch (the CPU's), or Triton kernels, as where the host does not read
    the device for free (a GPU; without one, Triton's interpreter on CPU tensors)."""
    monkeypatch.setattr(host_reads, "free", lambda device: request.param == "torch")
    assert lattice_triton.bookkeeping_in_triton(torch.device(DEVICE)) == (request.param == "triton")
    return request.param


@pytest.mark.parametrize("scales", SCALES, ids=str)
@pytest.mark.parametrize("blank", [0, 4])
def test_arcs_and_gradients_equal_autograd_through_the_definition(per_cell_work, scales, blank):
    am, lm, targets, labels, T_b, U_b = ragged(1, blank=blank)
    got = SimpleArcs.apply(am, lm, targets, T_b, U_b, blank, scales)
    want = by_definition(am, lm, labels, T_b, U_b, blank, scales)
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)
    grads = upstream(*got, seed=2)
    got_grad = torch.autograd.grad(got, (am, lm), grads)
    finite = [torch.isfinite(x) for x in want]
    want_grad = torch.autograd.grad(want, (am, lm), [g.where(f, 0.0) for g, f in zip(grads, finite)])
    for x, y in zip(got_grad, want_grad):
        torch.testing.assert_close(x, y)


def test_gradcheck_of_the_smoothed_arcs():
    """Finite differences (PyTorch's per-cell work: the interpreter takes a minute over gradcheck's calls)."""
    am, lm, targets, _, T_b, U_b = ragged(3, B=2, T=4, U=3, V=6)

    def finite_arcs(a, m):  # -inf outside the lattice, a constant: 0 there for the finite differences
        return tuple(x.where(torch.isfinite(x), 0.0) for x in SimpleArcs.apply(a, m, targets, T_b, U_b, 0,
                                                                                Scales(0.25, 0.1)))

    assert torch.autograd.gradcheck(finite_arcs, (am, lm))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_inputs_are_summed_in_float32(per_cell_work, dtype):
    """float32 arcs whatever the inputs; the gradients come back in the inputs' dtype, equal to those of the
    same (rounded) inputs in float64."""
    am, lm, targets, labels, T_b, U_b = ragged(4, dtype=dtype, T=20, U=9, V=40)
    got = SimpleArcs.apply(am, lm, targets, T_b, U_b, 0, Scales(0.25))
    assert all(x.dtype == torch.float32 for x in got)
    am64, lm64 = (x.detach().double().requires_grad_(True) for x in (am, lm))
    want = SimpleArcs.apply(am64, lm64, targets, T_b, U_b, 0, Scales(0.25))
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y.float(), rtol=1e-5, atol=1e-4)
    grads = [g.where(torch.isfinite(x), 0.0) for g, x in zip(upstream(*want, seed=5), want)]
    got_grad = torch.autograd.grad(got, (am, lm), [g.float() for g in grads])
    want_grad = torch.autograd.grad(want, (am64, lm64), grads)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    for x, y in zip(got_grad, want_grad):
        assert x.dtype == dtype
        torch.testing.assert_close(x, y.to(dtype), **tolerance)


@pytest.mark.parametrize("vocab", [50, 1100])
def test_the_triton_kernels_equal_pytorch_on_a_long_target_and_frames_past_a_program(monkeypatch, vocab):
    """U + 1 = 130 positions (a 256-wide block on 8 warps), T = 37 frames (three programs' chunks, the last
    one part full) and a vocabulary of one or two column steps: arcs and gradients equal PyTorch's."""
    am, lm, targets, _, T_b, U_b = ragged(6, dtype=torch.float32, B=2, T=37, U=129, V=vocab)
    results = []
    for free in (True, False):
        monkeypatch.setattr(host_reads, "free", lambda device: free)
        arcs = SimpleArcs.apply(am, lm, targets, T_b, U_b, 0, Scales(0.25, 0.05))
        grads = [g.where(torch.isfinite(x), 0.0).float() for g, x in zip(upstream(*arcs, seed=7), arcs)]
        results.append((*arcs, *torch.autograd.grad(arcs, (am, lm), grads)))
    for x, y in zip(*results):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_under_autocast_the_matmul_and_the_arcs_stay_float32(per_cell_work):
    """A training step under bfloat16 autocast hands the simple loss bfloat16 heads: its normaliser's matmul
    and its arcs are float32 all the same, equal to those of the same inputs without autocast."""
    from rnnt.loss.pruned import simple_arc_log_probs

    am, lm, targets, _, T_b, U_b = ragged(8, dtype=torch.bfloat16, T=20, U=9, V=40)
    plain = simple_arc_log_probs(am, lm, targets, T_b, U_b, 0, 0.25)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        mixed = simple_arc_log_probs(am, lm, targets, T_b, U_b, 0, 0.25)
    for x, y in zip(mixed, plain):
        assert x.dtype == torch.float32
        torch.testing.assert_close(x, y, rtol=0, atol=0)

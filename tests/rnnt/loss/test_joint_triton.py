"""The fused joiner + loss kernels that never hold logits (rnnt.loss.joint_kernels) against float64
PyTorch on materialised logits: the per-cell log-normaliser and arc log-probs, then the loss and the
gradients of enc, pred, weight and bias through fused_joiner_loss, for ragged lengths, U = 0, T = 1,
several lattice tiles along both axes (the gradients' atomic sums), vocabularies and hidden sizes off the
kernels' steps, tanh and relu, with and without a bias, both lattices, float32 and bfloat16 autocast.
Without a GPU, in Triton's interpreter."""

import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, TRITON_DEVICE as DEVICE

from rnnt.loss import fused_joiner_loss, joint_triton, transducer_loss
from rnnt.loss.fused_joiner import _cell_labels

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
# (B, T, U, H, V, logit lengths, target lengths): U + 1 > 16 takes two label tiles; V 70 three column steps
CASES = [
    (1, 1, 0, 8, 5, [1], [0]),
    (3, 9, 20, 24, 70, [9, 4, 1], [20, 3, 0]),
    (2, 13, 5, 40, 33, [13, 7], [5, 5]),
]
TILED = CASES[1]  # several tiles: the costliest case in the interpreter, run with one joiner of each kind
SMALL = (2, 8, 4, 40, 9, [8, 5], [4, 3])  # for what needs two ragged utterances and a wide joiner, not tiles


def joiner(B, T, U, H, V, seed, bias=True):
    g = torch.Generator().manual_seed(seed)
    enc, pred = torch.randn(B, T, H, generator=g), torch.randn(B, U + 1, H, generator=g)
    weight = torch.randn(V, H, generator=g) / H ** 0.5 * 3
    targets = torch.randint(1, V, (B, max(U, 1)), generator=g)[:, :U]
    return enc, pred, weight, torch.randn(V, generator=g) if bias else None, targets


def reference_logits(enc, pred, weight, bias, activation):
    hidden = enc[:, :, None] + pred[:, None]
    hidden = torch.tanh(hidden) if activation == "tanh" else torch.relu(hidden)
    return torch.nn.functional.linear(hidden, weight, bias)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("case", CASES)
def test_joint_stats_are_the_cells_log_normaliser_and_arcs(case, activation):
    B, T, U, H, V, T_b, U_b = case
    enc, pred, weight, bias, targets = joiner(B, T, U, H, V, seed=1)
    T_b, U_b = torch.tensor(T_b), torch.tensor(U_b)
    labels = _cell_labels(targets, 0, V, U + 1)
    lse, blank_lp, label_lp = joint_triton.joint_stats(*(x.to(DEVICE) for x in (enc, pred, weight, bias, labels, T_b,
                                                                                   U_b)), 0, activation)
    logits = reference_logits(*(x.double() for x in (enc, pred, weight, bias)), activation)
    t, u = torch.arange(T)[None, :, None], torch.arange(U + 1)[None, None, :]
    inside = (t < T_b[:, None, None]) & (u <= U_b[:, None, None])
    has_label = inside & (u < U_b[:, None, None])
    log_probs = logits.log_softmax(-1)
    want_label = log_probs.gather(-1, labels[:, None, :, None].expand(B, T, U + 1, 1))[..., 0]
    lse, blank_lp, label_lp = lse.cpu().double(), blank_lp.cpu().double(), label_lp.cpu().double()
    torch.testing.assert_close(lse[inside], logits.logsumexp(-1)[inside], rtol=0, atol=2e-5)
    torch.testing.assert_close(blank_lp[inside], log_probs[..., 0][inside], rtol=0, atol=2e-5)
    torch.testing.assert_close(label_lp[has_label], want_label[has_label], rtol=0, atol=2e-5)
    assert (blank_lp[~inside] == float("-inf")).all() and (label_lp[~has_label] == float("-inf")).all()


def losses_and_grads(inputs, targets, T_b, U_b, fused, dtype, **kw):
    """The loss (reduction none, weighted by both signs) and its gradients, fused (Triton) or on the
    materialised logits (PyTorch)."""
    params = [x.to(DEVICE, dtype).requires_grad_(True) if x is not None else None for x in inputs]
    live = [p for p in params if p is not None]
    targets, T_b, U_b = targets.to(DEVICE), T_b.to(DEVICE), U_b.to(DEVICE)
    if fused:
        loss = fused_joiner_loss(*params, targets, T_b, U_b, reduction="none", backend="triton", kernels=True, **kw)
    else:
        logits = reference_logits(*params, kw.get("activation", "tanh"))
        kw.pop("activation", None)
        loss = transducer_loss(logits, targets, T_b, U_b, reduction="none", backend="torch", **kw)
    weights = torch.linspace(-0.5, 2.0, loss.shape[0], dtype=loss.dtype, device=DEVICE)
    return loss.detach().cpu().double(), [g.cpu().double() for g in torch.autograd.grad((loss * weights).sum(), live)]


@pytest.mark.parametrize("case, activation, bias, one_sym", [
    pytest.param(case, activation, bias, one_sym, marks=[pytest.mark.slow] if case is TILED else [])  # 8 s here
    for case in CASES
    for activation, bias, one_sym in (("tanh", True, False), ("relu", False, False), ("tanh", True, True))
    if (not one_sym or all(u <= t for t, u in zip(case[5], case[6])))  # one symbol per frame: U <= T
    and (case is not TILED or activation == "tanh")
])
def test_fused_loss_through_the_kernels_equals_float64_on_materialised_logits(case, activation, bias, one_sym):
    B, T, U, H, V, T_b, U_b = case
    *inputs, targets = joiner(B, T, U, H, V, seed=2, bias=bias)
    T_b, U_b = torch.tensor(T_b), torch.tensor(U_b)
    want, want_grads = losses_and_grads(inputs, targets, T_b, U_b, False, torch.float64,
                                        activation=activation, one_sym_per_frame=one_sym)
    got, got_grads = losses_and_grads(inputs, targets, T_b, U_b, True, torch.float32,
                                      activation=activation, one_sym_per_frame=one_sym)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    for name, g, w in zip(("enc", "pred", "weight", "bias"), got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=lambda m, name=name: f"grad {name}: {m}")


@pytest.mark.parametrize("constant, value, seed", [
    # input-gradient programs walking 3 frames each: chunks not a multiple of a step's 2 frames, and chunks
    # past an utterance's last frame (the second's 5 of 8)
    ("CHUNK_FRAMES", 3, 5),
    # weight-gradient programs summing 16 hidden units each: three chunks of a 40-wide joiner, the last one
    # partly past it, the bias counted once
    ("WEIGHT_GRAD_CHUNK", 16, 6),
])
def test_gradients_over_chunks_of_any_length_add_up(monkeypatch, constant, value, seed):
    """Programs splitting their work into chunks give the gradients of one program an utterance (frames) or
    a vocabulary tile (hidden units)."""
    B, T, U, H, V, T_b, U_b = SMALL
    *inputs, targets = joiner(B, T, U, H, V, seed=seed)
    T_b, U_b = torch.tensor(T_b), torch.tensor(U_b)
    want = losses_and_grads(inputs, targets, T_b, U_b, True, torch.float32)[1]
    monkeypatch.setattr(joint_triton, constant, value)
    got = losses_and_grads(inputs, targets, T_b, U_b, True, torch.float32)[1]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_the_kernels_take_the_joiners_they_fit_when_asked_and_blocks_take_the_rest(monkeypatch):
    """Asked for, float32 and half-precision joiners up to MAX_HIDDEN wide run the kernels; float64 and
    wider ones the blocks of logits (still with the row kernels), giving the same loss; not asked for
    (the default, the faster on a GPU), every joiner the blocks."""
    calls = []
    stats = joint_triton.joint_stats
    monkeypatch.setattr(joint_triton, "joint_stats", lambda *a: calls.append(a[0].dtype) or stats(*a))
    *inputs, targets = joiner(2, 4, 2, 8, 9, seed=3)
    T_b, U_b = torch.tensor([4, 3]), torch.tensor([2, 1])
    params = [x.to(DEVICE).requires_grad_(True) for x in inputs]
    default = fused_joiner_loss(*params, targets.to(DEVICE), T_b.to(DEVICE), U_b.to(DEVICE), reduction="none",
                                backend="triton")
    assert calls == []
    losses = [losses_and_grads(inputs, targets, T_b, U_b, True, dtype)[0] for dtype in (torch.float32, torch.float64)]
    assert calls == [torch.float32]
    for loss in (losses[0], default.detach().cpu().double()):
        torch.testing.assert_close(loss, losses[1], rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(joint_triton, "MAX_HIDDEN", 4)
    losses_and_grads(inputs, targets, T_b, U_b, True, torch.float32)
    assert calls == [torch.float32]


def test_fused_kernels_under_bfloat16_autocast_match_the_blocks(monkeypatch):
    *inputs, targets = joiner(2, 7, 4, 16, 40, seed=4)
    T_b, U_b = torch.tensor([7, 5]).to(DEVICE), torch.tensor([4, 2]).to(DEVICE)
    results = []
    for kernels in (True, False):
        params = [p.to(DEVICE).requires_grad_(True) for p in inputs]
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = fused_joiner_loss(*params, targets.to(DEVICE), T_b, U_b, reduction="sum", backend="triton",
                                     kernels=kernels)
        results.append((loss.detach(), torch.autograd.grad(loss, params)))
    (got, got_grads), (want, want_grads) = results
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    for g, w in zip(got_grads, want_grads):
        assert g.dtype == w.dtype == torch.float32
        torch.testing.assert_close(g, w, rtol=5e-2, atol=5e-2)


@pytest.mark.slow
def test_the_kernels_compile_for_ampere_and_hopper_within_their_shared_memory():
    """Without a GPU: Triton's compiler and ptxas build the three kernels for sm_80 and sm_90 with the launch
    constants a 512-wide float32 or bfloat16 joiner gets (benchmarks/kernel_resources.py, outside the
    interpreter), each within the architecture's shared memory."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernel_resources.py"), "--capabilities", "80",
                          "90", "--hidden", "512"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    rows = [line.split(" | ") for line in out.stdout.splitlines() if line.startswith("| 80 |") or
            line.startswith("| 90 |")]
    assert len(rows) == 12, out.stdout
    for row in rows:
        limit = 163 if row[0] == "| 80" else 227
        assert int(row[5]) <= limit and int(row[6]) > 0, row


@pytest.mark.parametrize("targets_extra, pred_extra", [(2, 0), (0, 2)])
def test_targets_and_pred_padded_to_other_widths_give_the_same_loss(targets_extra, pred_extra):
    """The kernels read each utterance's labels at pred's width (the lattice's U+1): targets padded wider than
    pred, or pred wider than the targets, gave the utterances after the first another's labels (and read past
    the table)."""
    B, T, U, H, V, T_b, U_b = SMALL
    enc, pred, weight, bias, targets = joiner(B, T, U, H, V, seed=7)
    T_b, U_b = torch.tensor(T_b), torch.tensor(U_b)
    want, want_grads = losses_and_grads([enc, pred, weight, bias], targets, T_b, U_b, False, torch.float64)
    wide_targets = torch.cat([targets, torch.randint(1, V, (B, targets_extra))], dim=1)
    wide_pred = torch.cat([pred, torch.randn(B, pred_extra, H)], dim=1)
    got, got_grads = losses_and_grads([enc, wide_pred, weight, bias], wide_targets, T_b, U_b, True, torch.float32)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    got_grads[1] = got_grads[1][:, :U + 1]
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_a_bias_of_another_shape_is_refused():
    """The kernels read bias[v] for every symbol: a short bias was read past its end, a long or 2-D one taken."""
    enc, pred, weight, bias, targets = joiner(2, 4, 2, 8, 9, seed=3)
    for wrong in (bias[:5], torch.randn(12), torch.randn(9, 2)):
        message = f"expected bias (V,) = (9,) for weight (9, 8), got {tuple(wrong.shape)}"
        with pytest.raises(ValueError, match=re.escape(message)):
            fused_joiner_loss(enc, pred, weight, wrong, targets, torch.tensor([4, 3]), torch.tensor([2, 1]),
                              kernels=True, backend="triton")


def test_a_launch_without_a_chunk_takes_the_default_chunk(monkeypatch):
    """joint_kernels.py's --launches 16x32x4x512 16x32x4 timed the second with the first's chunk, labelled as
    the default."""
    for name in ("TILE_ROWS", "MAX_TILE_U", "COLUMNS", "WARPS", "WEIGHT_GRAD_CHUNK"):
        monkeypatch.setattr(joint_triton, name, getattr(joint_triton, name))  # restored after the test
    joint_triton.use_launch("16x32x4x512")
    assert joint_triton.WEIGHT_GRAD_CHUNK == 512
    joint_triton.use_launch("32x64x8")
    assert (joint_triton.TILE_ROWS, joint_triton.COLUMNS, joint_triton.WARPS, joint_triton.WEIGHT_GRAD_CHUNK) == (
        32, 64, 8, joint_triton.DEFAULT_WEIGHT_GRAD_CHUNK)

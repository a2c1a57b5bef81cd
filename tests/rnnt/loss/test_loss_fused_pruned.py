"""The fused joiner + loss and the pruned loss against the plain (materialised-logits) path."""

import pytest
import torch

from rnnt.loss import fused_joiner_loss, prune, prune_ranges, pruned_loss, simple_loss, transducer_loss
from transducer_reference import joiner_inputs, joiner_logits, reference_loss
from conftest import TRITON_DEVICE


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("one_sym", [False, True])
@pytest.mark.parametrize("chunk", [1 << 22, 40])
def test_fused_equals_unfused(activation, one_sym, chunk):
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(3, 7, 4, 6, 13, seed=1)
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    params = (enc, pred, weight, bias)
    plain = transducer_loss(joiner_logits(*params, activation), targets, T_b, U_b, reduction="mean",
                            one_sym_per_frame=one_sym)
    fused = fused_joiner_loss(*params, targets, T_b, U_b, activation=activation, reduction="mean",
                              one_sym_per_frame=one_sym, chunk_elements=chunk)
    torch.testing.assert_close(fused, plain)
    for a, b in zip(torch.autograd.grad(fused, params), torch.autograd.grad(plain, params)):
        torch.testing.assert_close(a, b)


def test_blocks_group_similar_utterances_and_cover_every_cell():
    from rnnt.loss.fused_joiner import _blocks

    T_b, U_b = torch.tensor([10, 9, 9, 3, 12]), torch.tensor([4, 4, 3, 1, 2])
    blocks = list(_blocks(T_b.tolist(), U_b.tolist(), width=8, chunk_elements=3 * 5 * 8 * 4))
    groups = sorted({(b0, b1) for b0, b1, *_ in blocks})
    assert groups == [(0, 3), (3, 4), (4, 5)]  # the first three within the padding bound, then alone
    for b, (T, U) in enumerate(zip(T_b.tolist(), U_b.tolist())):  # every frame of every utterance, once
        frames = sorted(t for b0, b1, t0, t1, U1 in blocks if b0 <= b < b1 and U1 > U for t in range(t0, t1))
        assert frames[:T] == list(range(T))
    assert all((b1 - b0) * (t1 - t0) * U1 * 8 <= 3 * 5 * 8 * 4 for b0, b1, t0, t1, U1 in blocks)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_fused_blocks_of_ragged_utterances_equal_unfused(backend):
    """Utterances of nearly equal lengths share blocks; their padding cells (labels past the end set to
    -1, outside the vocabulary) take no part in the loss or the gradients, with every regulariser on."""
    enc, pred, weight, bias, targets, _, _ = joiner_inputs(4, 9, 5, 8, 11, seed=6)
    T_b, U_b = torch.tensor([9, 8, 9, 7]), torch.tensor([5, 5, 4, 0])
    targets = targets.masked_fill(torch.arange(5) >= U_b[:, None], -1)
    device = TRITON_DEVICE if backend == "triton" else "cpu"
    params = tuple(p.detach().to(device).requires_grad_(True) for p in (enc, pred, weight, bias))
    targets, T_b, U_b = targets.to(device), T_b.to(device), U_b.to(device)
    options = dict(fastemit_lambda=0.01, delay_penalty=0.02, backend=backend)
    plain = transducer_loss(joiner_logits(*params), targets.clamp(min=0), T_b, U_b, reduction="sum", **options)
    fused = fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", chunk_elements=2 * 9 * 6 * 11,
                              **options)
    torch.testing.assert_close(fused, plain)
    for a, b in zip(torch.autograd.grad(fused, params), torch.autograd.grad(plain, params)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("reads_free", [True, False])
def test_fused_padding_whose_logits_overflow_gets_no_gradient(reads_free, monkeypatch):
    """A padding position of the prediction network whose relu logits overflow to +inf, in a block with real
    cells: exp(inf - inf) x 0 made NaN in every gradient (encoder, prediction network, weight, bias) on the torch
    backend, where the joiner and transducer_loss (and Triton's fused paths) give those of finite padding."""
    from rnnt import host_reads

    monkeypatch.setattr(host_reads, "free", lambda device: reads_free)
    generator = torch.Generator().manual_seed(0)
    enc, pred = torch.randn(2, 4, 8, generator=generator), torch.randn(2, 3, 8, generator=generator)
    weight, bias = torch.randn(5, 8, generator=generator).abs() + 1.0, torch.randn(5, generator=generator)
    targets, T_b, U_b = torch.tensor([[1, 2], [3, 1]]), torch.tensor([4, 4]), torch.tensor([2, 1])
    grads = []
    for overflow in (False, True):
        params = [p.clone() for p in (enc, pred, weight, bias)]
        if overflow:
            params[1][1, 2] = 1e38  # past utterance 1's targets
        params = [p.requires_grad_(True) for p in params]
        loss = fused_joiner_loss(*params, targets, T_b, U_b, activation="relu", backend="torch")
        grads.append((loss, torch.autograd.grad(loss, params)))
    (clean, clean_grads), (loss, overflowed_grads) = grads
    torch.testing.assert_close(loss, clean)
    for name, a, b in zip(("enc", "pred", "weight", "bias"), overflowed_grads, clean_grads):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("fill, activation", [(float("inf"), "relu"), (float("nan"), "tanh")])
def test_fused_blocks_take_no_gradient_from_encoder_or_prediction_padding_that_is_not_finite(fill, activation,
                                                                                           backend):
    """An utterance sharing a block with a longer one: +inf or NaN in its padding frames (an overflowed float16
    encoder's) and columns. The blocks made 0 * inf there: NaN in the weight's gradient, and through tanh's
    gradient in the encoder's and prediction network's (the loss itself as with finite padding, nothing said)."""
    generator = torch.Generator().manual_seed(0)
    enc, pred = torch.randn(2, 5, 8, generator=generator), torch.randn(2, 4, 8, generator=generator)
    weight, bias = torch.randn(5, 8, generator=generator), torch.randn(5, generator=generator)
    targets, T_b, U_b = torch.tensor([[1, 2, 4], [3, 1, 0]]), torch.tensor([5, 4]), torch.tensor([3, 2])
    from rnnt.loss.fused_joiner import _blocks

    assert [block[:2] for block in _blocks([5, 4], [3, 2], 8, 10 ** 6)] == [(0, 2)]  # one block: utterance 1 padded
    device = TRITON_DEVICE if backend == "triton" else "cpu"
    results = []
    for padded in (False, True):
        params = [p.clone().to(device) for p in (enc, pred, weight, bias)]
        if padded:
            params[0][1, 4], params[1][1, 3] = fill, fill  # past utterance 1's frames, and past its targets
        params = [p.requires_grad_(True) for p in params]
        loss = fused_joiner_loss(*params, targets.to(device), T_b.to(device), U_b.to(device), activation=activation,
                                 backend=backend)
        results.append((loss, torch.autograd.grad(loss, params)))
    (clean, clean_grads), (loss, padded_grads) = results
    torch.testing.assert_close(loss, clean)
    for name, a, b in zip(("enc", "pred", "weight", "bias"), padded_grads, clean_grads):
        torch.testing.assert_close(a, b, msg=name)


def test_padding_is_zeroed_in_copies_and_inputs_without_padding_are_not_copied():
    """The copies held 3.9 MiB more of the fused loss's tensor peak at B8-T200-U50-V500 (benchmarks/loss.py), whose
    utterances all fill the batch: nothing to zero."""
    from rnnt.loss.cells import padding_zeroed

    enc, pred = torch.full((2, 5, 3), float("nan")), torch.full((2, 4, 3), float("inf"))
    zeroed = padding_zeroed(enc, pred, torch.tensor([5, 4]), torch.tensor([3, 2]), ([5, 4], [3, 2]))
    assert zeroed[0][1, 4].eq(0).all() and zeroed[0][:, :4].isnan().all() and zeroed[0][0].isnan().all()
    assert zeroed[1][1, 3].eq(0).all() and zeroed[1][1, :3].isinf().all() and zeroed[1][0].isinf().all()
    whole = padding_zeroed(enc, pred, torch.tensor([5, 5]), torch.tensor([3, 3]), ([5, 5], [3, 3]))
    assert whole[0] is enc and whole[1] is pred


def test_fused_gradcheck_and_no_bias():
    enc, pred, weight, _, targets, T_b, U_b = joiner_inputs(2, 3, 2, 3, 5, seed=2)
    assert torch.autograd.gradcheck(
        lambda e, p, w: fused_joiner_loss(e, p, w, None, targets, T_b, U_b, reduction="none"),
        (enc, pred, weight), eps=1e-6, atol=1e-6)


def test_fused_float32_matches_reference():
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(2, 20, 6, 16, 300, seed=3, dtype=torch.float32)
    fused = fused_joiner_loss(enc, pred, weight, bias, targets, T_b, U_b, reduction="none")
    ref = reference_loss(joiner_logits(enc, pred, weight, bias).detach(), targets, T_b, U_b)
    torch.testing.assert_close(fused.double(), ref, rtol=1e-5, atol=1e-4)


def test_fused_under_bf16_autocast_matches_the_bf16_products():
    """Under autocast (a bfloat16 encoder output, float32 predictor and weights) the products run in
    bfloat16 and each gradient comes back in its input's dtype, as the unfused path's do."""
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(2, 12, 5, 16, 40, seed=4, dtype=torch.float32)
    enc_bf16 = enc.detach().bfloat16().requires_grad_(True)
    params = (enc_bf16, pred, weight, bias)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum")
    grads = torch.autograd.grad(fused, params)
    assert [g.dtype for g in grads] == [torch.bfloat16, torch.float32, torch.float32, torch.float32]
    rounded = [p.detach().bfloat16().double().requires_grad_(True) for p in params]
    exact = transducer_loss(joiner_logits(*rounded), targets, T_b, U_b, reduction="sum")
    torch.testing.assert_close(fused.double(), exact, rtol=2e-2, atol=0)
    for got, want in zip(grads, torch.autograd.grad(exact, rounded)):
        assert torch.nn.functional.cosine_similarity(got.double().flatten(), want.flatten(), dim=0) > 0.99


def test_fused_bf16_gradients_of_many_blocks_are_summed_in_float32():
    """The weight's, bias's and predictor's gradients add up a share from every block: rounded to bfloat16 at each
    of 900 blocks (a batch of 64 long utterances in a GPU's blocks) they were 25%, 70% and 37% off; summed in
    float32 and rounded once, as the kernels keep them, as close as from one block."""
    g = torch.Generator().manual_seed(0)
    B, T, U, H, V = 2, 300, 20, 32, 64
    inputs = [torch.randn(B, T, H, generator=g) * 0.5, torch.randn(B, U + 1, H, generator=g) * 0.5,
              torch.randn(V, H, generator=g) * 0.3, torch.randn(V, generator=g) * 0.1]
    targets, lengths = torch.randint(1, V, (B, U), generator=g), (torch.full((B,), T), torch.full((B,), U))

    def grads(dtype, chunk):
        xs = [x.to(dtype).requires_grad_() for x in inputs]
        fused_joiner_loss(*xs, targets, *lengths, 0, activation="tanh", reduction="sum", chunk_elements=chunk,
                          backend="torch").backward()
        return [x.grad.double() for x in xs]

    reference = grads(torch.float64, 1 << 30)
    one_block, many = grads(torch.bfloat16, 1 << 30), grads(torch.bfloat16, B * (U + 1) * V)  # 300 blocks
    for name, block, blocks, want in zip(("enc", "pred", "weight", "bias"), one_block, many, reference):
        error = float((blocks - want).norm() / want.norm())
        assert error < 1.5 * float((block - want).norm() / want.norm()) + 2e-3, (name, error)


def test_fused_errors():
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(2, 3, 2, 4, 5, seed=4)
    with pytest.raises(ValueError, match="activation must be one of"):
        fused_joiner_loss(enc, pred, weight, bias, targets, T_b, U_b, activation="gelu")
    with pytest.raises(ValueError, match="hidden sizes differ"):
        fused_joiner_loss(enc, pred, weight[:, :3], bias, targets, T_b, U_b)
    with pytest.raises(ValueError, match=r"logit_lengths max 8 exceeds enc.shape\[1\] = 3"):
        fused_joiner_loss(enc, pred, weight, bias, targets, T_b + 5, U_b)


@pytest.mark.parametrize("one_sym", [False, True])
def test_simple_loss_equals_full_loss_of_additive_joiner(one_sym):
    g = torch.Generator().manual_seed(5)
    B, T, U, V = 3, 8, 5, 9
    am = torch.randn(B, T, V, generator=g, dtype=torch.float64).requires_grad_(True)
    lm = torch.randn(B, U + 1, V, generator=g, dtype=torch.float64).requires_grad_(True)
    targets = torch.randint(1, V, (B, U), generator=g)
    T_b, U_b = torch.tensor([8, 3, 6]), torch.tensor([5, 0, 3])
    simple = simple_loss(am, lm, targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)
    full = reference_loss(am[:, :, None] + lm[:, None], targets, T_b, U_b, one_sym_per_frame=one_sym).sum()
    torch.testing.assert_close(simple, full)
    for a, b in zip(torch.autograd.grad(simple, (am, lm)), torch.autograd.grad(full, (am, lm))):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("backend,reads_free", [("torch", True), ("torch", False), ("triton", True)])
def test_simple_loss_takes_no_gradient_from_padding_that_is_not_finite(backend, reads_free, monkeypatch):
    """+inf or NaN in one utterance's encoder frames past T_b or predictor positions past U_b (a model that
    overflowed there): the loss was that of finite padding, but the gradient of every valid frame of the
    utterance NaN (0 x inf in the normaliser's matmuls), and so the whole step's. reads_free False: the path on an
    accelerator, which masks without reading the lengths on the host."""
    from rnnt import host_reads

    monkeypatch.setattr(host_reads, "free", lambda device: reads_free)
    device = TRITON_DEVICE if backend == "triton" else "cpu"
    g = torch.Generator().manual_seed(7)
    B, T, U, V = 3, 8, 5, 9
    am, lm = torch.randn(B, T, V, generator=g).to(device), torch.randn(B, U + 1, V, generator=g).to(device)
    targets = torch.randint(1, V, (B, U), generator=g).to(device)
    T_b, U_b = torch.tensor([8, 3, 6], device=device), torch.tensor([5, 1, 3], device=device)
    frames = torch.arange(T, device=device)[None, :] < T_b[:, None]
    positions = torch.arange(U + 1, device=device)[None, :] <= U_b[:, None]

    def loss_and_grads(am, lm):
        am, lm = am.clone().requires_grad_(True), lm.clone().requires_grad_(True)
        loss = simple_loss(am, lm, targets, T_b, U_b, reduction="sum", backend=backend)
        return (loss, *torch.autograd.grad(loss, (am, lm)))

    expected = loss_and_grads(am, lm)
    for fill in (float("inf"), float("nan")):
        for padded_am, padded_lm in ((am.masked_fill(~frames[..., None], fill), lm),
                                     (am, lm.masked_fill(~positions[..., None], fill))):
            loss, grad_am, grad_lm = loss_and_grads(padded_am, padded_lm)
            torch.testing.assert_close(loss, expected[0])
            torch.testing.assert_close(grad_am[frames], expected[1][frames])
            torch.testing.assert_close(grad_lm[positions], expected[2][positions])
            assert not grad_am[~frames].any() and not grad_lm[~positions].any()


def ranges_for(seed, B=3, T=12, U=6, V=10, s_range=3, one_sym=False):
    g = torch.Generator().manual_seed(seed)
    am = torch.randn(B, T, V, generator=g, dtype=torch.float64)
    lm = torch.randn(B, U + 1, V, generator=g, dtype=torch.float64)
    targets = torch.randint(1, V, (B, U), generator=g)
    T_b = torch.tensor([T] + [T // 2 + 1] * (B - 1))
    U_b = torch.tensor([U] + [U // 2] * (B - 1))
    _, (gb, gl) = simple_loss(am, lm, targets, T_b, U_b, return_posteriors=True, one_sym_per_frame=one_sym)
    return prune_ranges(gb, gl, T_b, U_b, s_range), targets, T_b, U_b


@pytest.mark.parametrize("s_range", [2, 3, 5])
def test_prune_ranges_form_a_connected_band(s_range):
    ranges, _, T_b, U_b = ranges_for(6, s_range=s_range)
    assert ranges.shape == (3, 12, s_range)
    assert (ranges[..., 1:] - ranges[..., :-1] == 1).all()
    for b in range(3):
        start = ranges[b, : T_b[b], 0]
        assert start[0] == 0
        assert (start[1:] >= start[:-1]).all() and (start[1:] <= start[:-1] + s_range - 1).all()
        assert ranges[b, T_b[b] - 1, -1] >= U_b[b]  # the last frame reaches the final symbol
        assert (start <= max(0, int(U_b[b]) + 1 - s_range)).all()


@pytest.mark.parametrize("one_sym", [False, True])
def test_pruned_with_full_band_equals_full_loss(one_sym):
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(3, 9, 5, 6, 11, seed=7)
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    _, (gb, gl) = simple_loss(torch.randn(3, 9, 11, dtype=torch.float64), torch.randn(3, 6, 11, dtype=torch.float64),
                              targets, T_b, U_b, return_posteriors=True, one_sym_per_frame=one_sym)
    ranges = prune_ranges(gb, gl, T_b, U_b, s_range=6)
    enc_p, pred_p = prune(enc, pred, ranges)
    logits = torch.nn.functional.linear(torch.tanh(enc_p + pred_p), weight, bias)
    pruned = pruned_loss(logits, targets, ranges, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)
    full = transducer_loss(joiner_logits(enc, pred, weight, bias), targets, T_b, U_b, reduction="sum",
                           one_sym_per_frame=one_sym)
    torch.testing.assert_close(pruned, full)
    params = (enc, pred, weight, bias)
    for a, b in zip(torch.autograd.grad(pruned, params), torch.autograd.grad(full, params)):
        torch.testing.assert_close(a, b)


def test_narrow_band_sums_fewer_paths():
    ranges, targets, T_b, U_b = ranges_for(8, s_range=2)
    enc, pred, weight, bias, _, _, _ = joiner_inputs(3, 12, 6, 5, 10, seed=8)
    enc_p, pred_p = prune(enc, pred, ranges)
    pruned = pruned_loss(torch.nn.functional.linear(torch.tanh(enc_p + pred_p), weight, bias), targets, ranges,
                         T_b, U_b, reduction="none")
    full = transducer_loss(joiner_logits(enc, pred, weight, bias), targets, T_b, U_b, reduction="none")
    assert torch.isfinite(pruned).all()
    assert (pruned >= full - 1e-9).all() and (pruned > full + 1e-6).any()


def test_the_banded_loss_is_the_pruned_loss_without_its_second_checks():
    """The model calls banded_loss after simple_loss checked the same targets and lengths: the same value and
    gradient as pruned_loss, without the device checks (a target outside the vocabulary is not caught there)."""
    from rnnt.loss.options import LatticeOptions
    from rnnt.loss.pruned import banded_loss

    ranges, targets, T_b, U_b = ranges_for(8, s_range=2)
    enc, pred, weight, bias, _, _, _ = joiner_inputs(3, 12, 6, 5, 10, seed=8)
    enc_p, pred_p = prune(enc, pred, ranges)
    logits = torch.nn.functional.linear(torch.tanh(enc_p + pred_p), weight, bias)
    checked = pruned_loss(logits, targets, ranges, T_b, U_b, reduction="sum")
    banded = banded_loss(logits, targets, ranges, T_b, U_b, 0, reduction="sum", options=LatticeOptions())
    checked.backward(retain_graph=True)
    checked_grads = [enc.grad.clone(), pred.grad.clone()]
    enc.grad = pred.grad = None
    torch.testing.assert_close(banded, checked)
    for a, b in zip(torch.autograd.grad(banded, (enc, pred)), checked_grads):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match=r"expected float logits \(B, T, S, V\)"):  # its shapes are still checked
        banded_loss(logits[..., :1, :], targets, ranges, T_b, U_b, 0, options=LatticeOptions())


def test_pruned_gradcheck():
    ranges, targets, T_b, U_b = ranges_for(9, B=2, T=5, U=3, V=4, s_range=2)
    logits = torch.randn(2, 5, 2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: pruned_loss(x, targets, ranges, T_b, U_b, reduction="none"),
                                    (logits,), eps=1e-6, atol=1e-6)


def test_pruned_errors():
    ranges, targets, T_b, U_b = ranges_for(10, s_range=3)
    for s_range in (1, 2.5):  # 2.5: slicing's TypeError before, or Triton's 'no attribute bit_length'
        with pytest.raises(ValueError, match="s_range must be a whole number >= 2"):
            prune_ranges(torch.zeros(3, 12, 7), torch.zeros(3, 12, 7), T_b, U_b, s_range)
    gammas = torch.zeros(3, 12, 7), torch.zeros(3, 12, 7)
    for lengths in ((T_b.masked_fill(T_b == T_b.max(), 0), U_b), (T_b, U_b - U_b.max() - 1)):  # bands of no lattice
        with pytest.raises(ValueError, match="logit_lengths must be >= 1 and target_lengths >= 0, got"):
            prune_ranges(*gammas, *lengths, 3)
    with pytest.raises(TypeError, match="logit_lengths and target_lengths must be int32 or int64"):
        prune_ranges(*gammas, T_b.float(), U_b, 3)
    with pytest.raises(ValueError, match=r"expected float logits \(B, T, S, V\) and integer ranges \(B, T, S\)"):
        pruned_loss(torch.zeros(3, 12, 2, 10), targets, ranges, T_b, U_b)
    logits = torch.zeros(*ranges.shape, 10)
    with pytest.raises(ValueError, match="integer ranges"):  # truncated before
        pruned_loss(logits, targets, ranges.double(), T_b, U_b)
    repeated = ranges.clone()
    repeated[0, 0, 2] = repeated[0, 0, 1]  # a hand-made band: the loss read one row, the gradient gave both
    for bad in (repeated, ranges - 1):
        with pytest.raises(ValueError, match="each frame's positions must be distinct and increasing, from 0"):
            pruned_loss(logits, targets, bad, T_b, U_b)


def test_the_smoothed_simple_loss_mixes_its_arcs_with_the_predictor_s_and_the_encoder_s_own():
    """k2's smoothing: arcs = (1 - l - a) x joint + l x the prediction network's own log-probs + a x the
    encoder's own; alone, each is the joint log-prob of a joiner whose other input is zero."""
    from rnnt.loss.pruned import simple_arc_log_probs

    g = torch.Generator().manual_seed(8)
    am, lm = (torch.randn(2, 5, 7, generator=g, dtype=torch.float64),
              torch.randn(2, 4, 7, generator=g, dtype=torch.float64))
    targets, T_b, U_b = torch.randint(1, 7, (2, 3), generator=g), torch.tensor([5, 3]), torch.tensor([3, 2])

    def arcs(am, lm, **scales):
        return simple_arc_log_probs(am, lm, targets, T_b, U_b, 0, **scales)

    joint, lm_only, am_only = arcs(am, lm), arcs(torch.zeros_like(am), lm), arcs(am, torch.zeros_like(lm))
    torch.testing.assert_close(arcs(am, lm, lm_only_scale=1.0), lm_only)
    torch.testing.assert_close(arcs(am, lm, am_only_scale=1.0), am_only)
    for got, j, l, a in zip(arcs(am, lm, lm_only_scale=0.25, am_only_scale=0.1), joint, lm_only, am_only):
        finite = torch.isfinite(j)
        torch.testing.assert_close(got[finite], (0.65 * j + 0.25 * l + 0.1 * a)[finite])
        assert torch.equal(torch.isfinite(got), finite)
    with pytest.raises(ValueError, match="lm_only_scale and am_only_scale must be >= 0 with a sum <= 1"):
        simple_loss(am, lm, targets, T_b, U_b, lm_only_scale=0.8, am_only_scale=0.3)


def test_the_pruned_loss_warms_up_as_icefall_s():
    """Over loss.warmup_steps the simple loss's weight falls from 1 to simple_scale and the pruned loss's rises
    from 0.1 to 1; the model's training loss follows them, and validation (eval mode) uses the final ones."""
    from rnnt.model.transducer import LossConfig, ModelConfig, Transducer, pruned_scales

    config = LossConfig(type="pruned", simple_scale=0.5, warmup_steps=100, lm_only_scale=0.25)
    assert pruned_scales(config, 0) == (1.0, 0.1)
    assert pruned_scales(config, 50) == pytest.approx((0.75, 0.55))
    assert pruned_scales(config, 100) == pruned_scales(config, None) == (0.5, 1.0)
    assert pruned_scales(LossConfig(type="pruned"), 0) == (0.5, 1.0)
    torch.manual_seed(0)
    model = Transducer(ModelConfig(loss=config), 7)
    enc = torch.randn(2, 8, model.encoder.output_dim)
    tokens, token_lens, enc_lens = torch.randint(1, 7, (2, 3)), torch.tensor([3, 2]), torch.tensor([8, 6])
    for step, (simple_scale, pruned_scale) in ((0, (1.0, 0.1)), (50, (0.75, 0.55)), (None, (0.5, 1.0))):
        parts = model.loss(enc, enc_lens, tokens, token_lens, step)
        torch.testing.assert_close(parts["loss"], simple_scale * parts["simple"] + pruned_scale * parts["transducer"])
    model.eval()
    parts = model.loss(enc, enc_lens, tokens, token_lens, 0)
    torch.testing.assert_close(parts["loss"], 0.5 * parts["simple"] + parts["transducer"])
    with pytest.raises(ValueError, match="loss.warmup_steps must be >= 0"):
        Transducer(ModelConfig(loss=LossConfig(type="pruned", warmup_steps=-1)), 7)


def one_symbol_path_through(starts: list[int], s_range: int, U: int) -> bool:
    """Whether a path of the one-symbol lattice (a blank or one label a frame) from (0, 0) to (T, U) keeps
    inside the windows [starts[t], starts[t] + s_range)."""
    nodes = {0}
    for start in starts:
        nodes = {u for u in nodes if start <= u < start + s_range}
        nodes |= {u + 1 for u in nodes if u < U}
    return U in nodes


@pytest.mark.parametrize("s_range", [2, 3, 5])
def test_a_one_symbol_band_always_holds_a_path_wherever_the_occupancy_leads(s_range):
    """Occupancy from a simple loss at the start of training can leap several symbols in a frame, where a
    one-symbol path climbs one (speechocean762: a window 0 for 60 frames, then 4, then 8): the band follows
    no faster than a path can, and early enough to reach U_b; the loss over it is finite."""
    g = torch.Generator().manual_seed(s_range)
    B, T, U, V = 6, 40, 12, 5
    T_b, U_b = torch.tensor([40, 40, 13, 30, 12, 25]), torch.tensor([12, 3, 12, 12, 12, 0])
    for trial in range(5):
        occupancy = torch.rand(B, T, U + 1, generator=g, dtype=torch.float64) ** 8  # peaky, anywhere
        if trial == 0:
            occupancy[:, :, -1] = 10.0  # all on the last symbol from the first frame
        if trial == 1:
            occupancy[:, : T // 2, 0] = occupancy[:, T // 2:, -1] = 10.0  # a leap half-way
        ranges = prune_ranges(occupancy, torch.zeros_like(occupancy), T_b, U_b, s_range, one_sym_per_frame=True)
        assert (ranges[..., 1:] - ranges[..., :-1] == 1).all()
        for b in range(B):
            starts = ranges[b, : T_b[b], 0].tolist()
            assert starts[0] == 0 and starts == sorted(starts) and max(starts) <= max(0, int(U_b[b]) + 1 - s_range)
            assert one_symbol_path_through(starts, s_range, int(U_b[b])), (trial, b, starts)
        logits = torch.randn(B, T, s_range, V, generator=g, dtype=torch.float64)
        targets = torch.randint(1, V, (B, U), generator=g)
        loss = pruned_loss(logits, targets, ranges, T_b, U_b, reduction="none", one_sym_per_frame=True)
        assert torch.isfinite(loss).all(), trial


def test_prune_ranges_refuses_posteriors_and_lengths_that_do_not_fit():
    """Lengths past the posteriors' lattice gave bands of positions past it, silently."""
    from rnnt.loss import prune_ranges

    gamma = torch.rand(2, 4, 4)
    for gammas, T_b, U_b, message in (
            ((gamma, gamma[:, :, :3]), [4, 4], [3, 2], r"of one shape \(B, T, U\+1\), got \(2, 4, 4\) and \(2, 4, 3\)"),
            ((gamma, gamma), [4, 4], [5, 2], r"target_lengths max 5 needs the posteriors' U\+1 >= 6, got 4"),
            ((gamma, gamma), [5, 4], [3, 2], r"logit_lengths max 5 exceeds the posteriors' T = 4"),
            ((gamma, gamma), [4], [3], r"expected logit_lengths and target_lengths \(2,\), got \(1,\)")):
        with pytest.raises(ValueError, match=message):
            prune_ranges(*gammas, torch.tensor(T_b), torch.tensor(U_b), 2)
    assert prune_ranges(gamma, gamma, torch.tensor([4, 4]), torch.tensor([3, 2]), 2).shape == (2, 4, 2)

"""transducer_loss against the loop reference: random ragged shapes, layouts, dtypes, modes, errors."""

import pytest
import torch

from rnnt.loss import TransducerLoss, transducer_loss
from transducer_reference import reference_loss
from conftest import TRITON_DEVICE


def random_batch(B, T, U, V, seed, dtype=torch.float64, min_T=1, min_U=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V, generator=g, dtype=dtype) * 2
    T_b = torch.randint(min_T, T + 1, (B,), generator=g)
    U_b = torch.randint(min_U, U + 1, (B,), generator=g)
    T_b[0], U_b[0] = T, U  # the longest fills the padded tensor
    targets = torch.randint(1, V, (B, U), generator=g)
    return logits, targets, T_b, U_b


def on_the_backends_device(backend, *tensors):
    """Triton takes CPU tensors in its interpreter only, which is off where CUDA is: there its tensors go to CUDA."""
    return tuple(tensor.to(TRITON_DEVICE if backend == "triton" else "cpu") for tensor in tensors)


def pack(logits, T_b, U_b):
    return torch.cat([logits[b, : T_b[b], : U_b[b] + 1].reshape(-1, logits.shape[-1]) for b in range(len(T_b))])


def grads(loss, tensor):
    return torch.autograd.grad(loss, tensor)[0]


SHAPES = [(1, 1, 0, 3), (1, 1, 3, 5), (2, 5, 0, 4), (3, 6, 4, 7), (4, 9, 5, 2), (2, 3, 6, 300)]


@pytest.mark.parametrize("one_sym", [False, True])
@pytest.mark.parametrize("B,T,U,V", SHAPES)
def test_matches_loop_reference(B, T, U, V, one_sym):
    if one_sym and U > T:
        U = T
    logits, targets, T_b, U_b = random_batch(B, T, U, V, seed=B * 100 + T * 10 + U + V)
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    logits.requires_grad_(True)
    ours = transducer_loss(logits, targets, T_b, U_b, reduction="none", one_sym_per_frame=one_sym)
    ref = reference_loss(logits, targets, T_b, U_b, one_sym_per_frame=one_sym)
    torch.testing.assert_close(ours, ref.detach(), rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(grads(ours.sum(), logits), grads(ref.sum(), logits), rtol=1e-9, atol=1e-10)


def test_modified_differs_from_standard_and_needs_enough_frames():
    logits, targets, T_b, U_b = random_batch(2, 4, 3, 5, seed=1)
    std = transducer_loss(logits, targets, T_b, U_b, reduction="none")
    mod = transducer_loss(logits, targets, T_b, torch.minimum(U_b, T_b), reduction="none", one_sym_per_frame=True)
    assert not torch.allclose(std, mod)
    with pytest.raises(ValueError, match="one_sym_per_frame needs target_length <= logit_length; utterance 1"):
        transducer_loss(logits, targets, torch.tensor([4, 2]), torch.tensor([3, 3]), one_sym_per_frame=True)


@pytest.mark.parametrize("one_sym", [False, True])
def test_padded_equals_packed(one_sym):
    logits, targets, T_b, U_b = random_batch(4, 8, 5, 9, seed=7)
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    logits.requires_grad_(True)
    padded = transducer_loss(logits, targets, T_b, U_b, reduction="none", one_sym_per_frame=one_sym)
    packed_input = pack(logits, T_b, U_b)
    packed = transducer_loss(packed_input, targets, T_b, U_b, reduction="none", one_sym_per_frame=one_sym)
    torch.testing.assert_close(padded, packed)
    grad_padded = grads(padded.sum(), logits)
    grad_packed = grads(packed.sum(), logits)
    torch.testing.assert_close(grad_padded, grad_packed)
    # Gradient is exactly zero on padding.
    for b in range(4):
        assert grad_padded[b, T_b[b]:].abs().sum() == 0 and grad_padded[b, :, U_b[b] + 1:].abs().sum() == 0


def test_from_log_softmax_equals_raw_logits():
    logits, targets, T_b, U_b = random_batch(3, 6, 4, 8, seed=3)
    logits.requires_grad_(True)
    raw = transducer_loss(logits, targets, T_b, U_b, reduction="sum")
    pre = transducer_loss(torch.log_softmax(logits, -1), targets, T_b, U_b, reduction="sum", from_log_softmax=True)
    torch.testing.assert_close(raw, pre)
    torch.testing.assert_close(grads(raw, logits), grads(pre, logits))


def test_gradcheck_float64():
    logits, targets, T_b, U_b = random_batch(2, 4, 3, 5, seed=11)
    logits.requires_grad_(True)
    for one_sym in (False, True):
        lengths = torch.minimum(U_b, T_b) if one_sym else U_b
        assert torch.autograd.gradcheck(
            lambda x: transducer_loss(x, targets, T_b, lengths, reduction="none", one_sym_per_frame=one_sym),
            (logits,), eps=1e-6, atol=1e-6)
    packed = pack(logits.detach(), T_b, U_b).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: transducer_loss(x, targets, T_b, U_b), (packed,), eps=1e-6, atol=1e-6)


def test_reductions_and_module():
    logits, targets, T_b, U_b = random_batch(3, 5, 3, 6, seed=5)
    none = transducer_loss(logits, targets, T_b, U_b, reduction="none")
    assert none.shape == (3,)
    torch.testing.assert_close(transducer_loss(logits, targets, T_b, U_b, reduction="sum"), none.sum())
    torch.testing.assert_close(transducer_loss(logits, targets, T_b, U_b), none.mean())
    module = TransducerLoss(blank=0, reduction="sum")
    torch.testing.assert_close(module(logits, targets, T_b, U_b), none.sum())
    assert "reduction=sum" in repr(module)
    # mean's gradient is sum's divided by the batch size
    x = logits.clone().requires_grad_(True)
    g_mean = grads(transducer_loss(x, targets, T_b, U_b), x)
    g_sum = grads(transducer_loss(x, targets, T_b, U_b, reduction="sum"), x)
    torch.testing.assert_close(g_mean * 3, g_sum)


def test_clamp_bounds_the_gradient():
    logits, targets, T_b, U_b = random_batch(2, 6, 4, 5, seed=9)
    logits.requires_grad_(True)
    free = grads(transducer_loss(logits, targets, T_b, U_b, reduction="sum"), logits)
    clamped = grads(transducer_loss(logits, targets, T_b, U_b, reduction="sum", clamp=0.1), logits)
    assert free.abs().max() > 0.1
    torch.testing.assert_close(clamped, free.clamp(-0.1, 0.1))


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_clamp_bounds_each_utterances_own_gradient_whatever_the_reduction_or_scale(backend):
    """As warp-transducer and torchaudio clamp: an utterance's own gradient, then the reduction's 1/B and the
    incoming gradient (a loss scale) multiply it. Before, the scaled gradient was clamped: under a loss scale of
    1024, a bound of 0.1 bound nothing."""
    logits, targets, T_b, U_b = on_the_backends_device(backend, *random_batch(4, 6, 4, 5, seed=9, dtype=torch.float32))
    logits.requires_grad_(True)
    free = grads(transducer_loss(logits, targets, T_b, U_b, reduction="sum", backend=backend), logits)
    own = free.clamp(-0.1, 0.1)
    mean = grads(transducer_loss(logits, targets, T_b, U_b, clamp=0.1, backend=backend), logits)
    torch.testing.assert_close(mean, own / 4)
    scaled = grads(1024 * transducer_loss(logits, targets, T_b, U_b, reduction="sum", clamp=0.1, backend=backend),
                   logits)
    torch.testing.assert_close(scaled, own * 1024)



@pytest.mark.parametrize("backend,reads_free", [("torch", True), ("torch", False), ("triton", True)])
def test_padding_of_infinities_or_nan_gets_a_zero_gradient(backend, reads_free, monkeypatch):
    """Logits padded with -inf (a masked joiner), +inf or NaN (a model that overflowed there): the losses and the
    gradient inside each utterance are those of finite padding, and the padding's gradient is 0 (it was NaN on the
    torch backend: exp(-inf - -inf), exp(inf - inf) x an occupancy of 0). reads_free False: the torch backend's
    path on an accelerator, which zeroes the rows by a mask it does not read on the host."""
    from rnnt import host_reads

    monkeypatch.setattr(host_reads, "free", lambda device: reads_free)
    logits, targets, T_b, U_b = on_the_backends_device(backend, *random_batch(3, 9, 5, 12, seed=21,
                                                                              dtype=torch.float32))
    inside = torch.zeros(logits.shape[:3], dtype=torch.bool, device=logits.device)
    for b in range(3):
        inside[b, : T_b[b], : U_b[b] + 1] = True
    finite = logits.clone().requires_grad_(True)
    expected = transducer_loss(finite, targets, T_b, U_b, reduction="sum", backend=backend)
    expected_grad = grads(expected, finite)
    for fill in (float("-inf"), float("inf"), float("nan")):
        padded = logits.masked_fill(~inside[..., None], fill).requires_grad_(True)
        loss = transducer_loss(padded, targets, T_b, U_b, reduction="sum", backend=backend)
        grad = grads(loss, padded)
        torch.testing.assert_close(loss, expected)
        assert torch.equal(grad[~inside], torch.zeros_like(grad[~inside]))
        torch.testing.assert_close(grad[inside], expected_grad[inside])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_inputs_accumulate_in_float32(dtype):
    logits, targets, T_b, U_b = random_batch(3, 20, 8, 50, seed=13, dtype=torch.float32)
    low = logits.to(dtype).requires_grad_(True)
    loss = transducer_loss(low, targets, T_b, U_b, reduction="none")
    exact = reference_loss(low.detach().double(), targets, T_b, U_b)
    assert loss.dtype == torch.float32  # a float16 sum over a batch would overflow at 65504
    # The lattice sums in float32 and returns it: the error is float32's, whatever the logits' precision.
    torch.testing.assert_close(loss.double(), exact, rtol=1e-5, atol=0)
    grad = grads(loss.sum(), low)
    assert grad.dtype == dtype and torch.isfinite(grad).all()
    big, targets, T_b, U_b = random_batch(64, 20, 8, 50, seed=3, dtype=torch.float32)
    total = transducer_loss((big * 40).to(dtype), targets, T_b, U_b, reduction="sum")  # float16's range ends at 65504
    exact = reference_loss((big * 40).to(dtype).double(), targets, T_b, U_b).sum()
    assert exact > 65504 and torch.isfinite(total) and abs(float(total) / float(exact) - 1) < 1e-5


def test_large_vocabulary_and_long_utterance():
    logits, targets, T_b, U_b = random_batch(2, 30, 12, 2000, seed=17, dtype=torch.float32)
    loss = transducer_loss(logits, targets, T_b, U_b, reduction="none")
    torch.testing.assert_close(loss.double(), reference_loss(logits, targets, T_b, U_b), rtol=1e-5, atol=1e-4)


def test_chunked_normaliser_covers_many_chunks(monkeypatch):
    import rnnt.loss.logits_loss as module

    logits, targets, T_b, U_b = random_batch(2, 7, 3, 11, seed=19)
    logits.requires_grad_(True)
    whole = transducer_loss(logits, targets, T_b, U_b, reduction="sum")
    g_whole = grads(whole, logits)
    monkeypatch.setattr(module, "CHUNK_ELEMENTS", 30)  # 2 rows a chunk
    assert len(list(module.row_chunks(logits[..., 0].numel(), 11, module.chunk_elements_on(logits.device)))) == 28
    chunked = transducer_loss(logits, targets, T_b, U_b, reduction="sum")
    torch.testing.assert_close(chunked, whole)
    torch.testing.assert_close(grads(chunked, logits), g_whole)


ERRORS = [
    (dict(logits=torch.zeros(2, 3, 3, 4, dtype=torch.int64)), TypeError, "logits must be a float16"),
    (dict(targets=torch.ones(2, 2)), TypeError, "must be int32 or int64"),
    (dict(logits=torch.zeros(2, 3, 4)), ValueError, "padded .B, T, U.1, V. or packed"),
    (dict(logit_lengths=torch.tensor([3, 4])), ValueError, "logit_lengths max 4 exceeds logits.shape.1. = 3"),
    (dict(target_lengths=torch.tensor([2, 3])), ValueError, "target_lengths max 3 exceeds targets.shape.1. = 2"),
    (dict(logits=torch.zeros(2, 3, 2, 4)), ValueError, "needs logits.shape.2. >= 3"),
    (dict(logit_lengths=torch.tensor([0, 3])), ValueError, "logit_lengths must be >= 1"),
    (dict(blank=4), ValueError, "blank 4 is out of range for a vocabulary of 4"),
    (dict(targets=torch.tensor([[1, 0], [2, 3]])), ValueError,
     "blank symbol 0 appears inside the targets of utterance 0"),
    (dict(targets=torch.tensor([[1, 7], [2, 3]])), ValueError, r"targets must lie in \[0, 4\)"),
    (dict(logits=torch.zeros(17, 4)), ValueError, "packed logits need sum.T_b . .U_b . 1.. = 18 rows, got 17"),
    (dict(reduction="avg"), ValueError, "reduction must be one of"),
    (dict(logit_lengths=torch.tensor([3, 1]), one_sym_per_frame=True), ValueError, "utterance 1 has 2 targets"),
    (dict(target_lengths=torch.tensor([2])), ValueError, "batch sizes differ"),
]


@pytest.mark.parametrize("override,error,message", ERRORS, ids=lambda x: x if isinstance(x, str) else "")
def test_clear_errors(override, error, message):
    args = dict(logits=torch.zeros(2, 3, 3, 4), targets=torch.tensor([[1, 2], [2, 3]]),
                logit_lengths=torch.tensor([3, 3]), target_lengths=torch.tensor([2, 2]))
    args.update(override)
    with pytest.raises(error, match=message):
        transducer_loss(**args)


def test_blank_after_targets_end_is_not_an_error():
    # Padding positions beyond target_lengths may hold anything, the blank included.
    loss = transducer_loss(torch.zeros(1, 3, 3, 4), torch.tensor([[1, 0]]), torch.tensor([3]), torch.tensor([1]))
    assert torch.isfinite(loss)


def torchaudio_rnnt_loss():
    try:
        import torchaudio.functional

        return torchaudio.functional.rnnt_loss
    except Exception:  # not installed, or a build that does not load beside this torch
        return None


DEVICES_AND_BACKENDS = [("cpu", "torch")] + [
    pytest.param("cuda", backend, marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))
    for backend in ("torch", "triton")]


@pytest.mark.skipif(torchaudio_rnnt_loss() is None, reason="torchaudio not importable")
@pytest.mark.parametrize("device, backend", DEVICES_AND_BACKENDS)
def test_matches_torchaudio(device, backend):
    logits, targets, T_b, U_b = (x.to(device) for x in random_batch(4, 10, 5, 20, seed=29, dtype=torch.float32))
    a, b = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    ours = transducer_loss(a, targets, T_b, U_b, reduction="none", backend=backend)
    theirs = torchaudio_rnnt_loss()(b, targets.int(), T_b.int(), U_b.int(), blank=0, reduction="none")
    # torchaudio 2.11's CUDA kernel gives 0 for an utterance with no labels (here the last); its CPU kernel,
    # ours and the loop reference give -log P(all blanks). test_loss_devices holds ours on CUDA to the CPU's.
    labelled = U_b > 0 if device == "cuda" else torch.ones_like(U_b, dtype=torch.bool)
    assert labelled.sum() >= 3
    torch.testing.assert_close(ours[labelled], theirs[labelled], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads(ours[labelled].sum(), a), grads(theirs[labelled].sum(), b), rtol=1e-4, atol=1e-5)


def test_gradient_has_no_subnormal_values():
    # Long utterances give occupancies near 1e-30: their products with softmax must be flushed to 0,
    # or every matmul over the gradient (the joiner's backward) slows down many times on x86.
    logits, targets, T_b, U_b = random_batch(2, 60, 20, 50, seed=31, dtype=torch.float32)
    logits = (logits * 4).requires_grad_(True)
    grad = grads(transducer_loss(logits, targets, T_b, U_b, reduction="sum"), logits)
    nonzero = grad[grad != 0].abs()
    assert (nonzero >= torch.finfo(torch.float32).tiny).all()
    assert (grad == 0).sum() > 0  # there were tiny values, and they became exact zeros


def test_reuse_logits_for_grad_gives_the_same_gradient_in_the_logits_storage():
    logits, targets, T_b, U_b = random_batch(3, 6, 4, 9, seed=37)
    weight = torch.randn(9, 9, dtype=torch.float64, requires_grad=True)
    joined = logits @ weight  # an intermediate, as a joiner's output is
    plain_joined = joined.detach().clone().requires_grad_(True)
    expected = grads(transducer_loss(plain_joined, targets, T_b, U_b), plain_joined)
    loss = transducer_loss(joined, targets, T_b, U_b, reuse_logits_for_grad=True)
    (grad_weight,) = torch.autograd.grad(loss, weight)
    torch.testing.assert_close(grad_weight, logits.reshape(-1, 9).t() @ expected.reshape(-1, 9))
    torch.testing.assert_close(joined.detach(), expected)  # the documented cost: logits now hold the gradient


def test_reuse_logits_for_grad_refuses_silent_corruption_of_other_users():
    logits, targets, T_b, U_b = random_batch(2, 5, 3, 6, seed=41)
    joined = (logits * 1.0).requires_grad_(True)
    other = (joined ** 2).sum()  # pow saves joined for its backward
    loss = transducer_loss(joined, targets, T_b, U_b, reuse_logits_for_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (loss + other).backward()


def test_pack_joiner_input_matches_padded_cells_and_gradients():
    from rnnt.loss import pack_joiner_input

    g = torch.Generator().manual_seed(43)
    enc = torch.randn(3, 6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    pred = torch.randn(3, 4, 4, dtype=torch.float64, generator=g, requires_grad=True)
    T_b, U_b = torch.tensor([6, 2, 4]), torch.tensor([3, 0, 2])
    packed = pack_joiner_input(enc, pred, T_b, U_b)
    torch.testing.assert_close(packed, pack(enc[:, :, None] + pred[:, None], T_b, U_b))
    assert torch.autograd.gradcheck(lambda e, p: pack_joiner_input(e, p, T_b, U_b), (enc, pred))

"""Every loss gives the same values and gradients on an accelerator as on the CPU (run where CUDA is present)."""

import pytest
import torch

from rnnt.loss import fused_joiner_loss, pack_joiner_input, prune, prune_ranges, pruned_loss, simple_loss, \
    transducer_loss

ACCELERATORS = [pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]


def joiner_batch(seed, B=4, T=14, U=6, H=16, V=40):
    g = torch.Generator().manual_seed(seed)
    enc = torch.randn(B, T, H, generator=g)
    pred = torch.randn(B, U + 1, H, generator=g)
    weight = torch.randn(V, H, generator=g) / H**0.5
    bias = torch.randn(V, generator=g)
    T_b = torch.tensor([T, T - 3, T // 2, 2])
    U_b = torch.tensor([U, 0, U // 2, 2])
    targets = torch.randint(1, V, (B, U), generator=g)
    return (enc, pred, weight, bias), targets, T_b, U_b


def padded_loss(params, targets, T_b, U_b, one_sym=False):
    enc, pred, weight, bias = params
    logits = torch.nn.functional.linear(torch.tanh(enc[:, :, None] + pred[:, None]), weight, bias)
    return transducer_loss(logits, targets, T_b, U_b, reduction="none", one_sym_per_frame=one_sym).sum()


def padded_one_symbol_loss(params, targets, T_b, U_b):
    return padded_loss(params, targets, T_b, U_b, one_sym=True)


def packed_loss(params, targets, T_b, U_b):
    enc, pred, weight, bias = params
    rows = torch.nn.functional.linear(torch.tanh(pack_joiner_input(enc, pred, T_b, U_b)), weight, bias)
    return transducer_loss(rows, targets, T_b, U_b, reduction="sum")


def fused_loss(params, targets, T_b, U_b):
    return fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", chunk_elements=2000)


def simple_and_pruned_loss(params, targets, T_b, U_b):
    enc, pred, weight, bias = params
    am, lm = torch.nn.functional.linear(enc, weight), torch.nn.functional.linear(pred, weight)
    simple, (gb, gl) = simple_loss(am, lm, targets, T_b, U_b, reduction="sum", return_posteriors=True)
    ranges = prune_ranges(gb, gl, T_b, U_b, s_range=3)
    enc_p, pred_p = prune(enc, pred, ranges)
    logits = torch.nn.functional.linear(torch.tanh(enc_p + pred_p), weight, bias)
    return simple + pruned_loss(logits, targets, ranges, T_b, U_b, reduction="sum")


LOSSES = [padded_loss, padded_one_symbol_loss, packed_loss, fused_loss, simple_and_pruned_loss]


def loss_and_grads(loss_fn, params, targets, T_b, U_b, device):
    on_device = [p.to(device).requires_grad_(True) for p in params]
    loss = loss_fn(on_device, targets.to(device), T_b.to(device), U_b.to(device))
    return [t.cpu() for t in (loss, *torch.autograd.grad(loss, on_device))]


@pytest.mark.parametrize("loss_fn", LOSSES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_accelerator_matches_cpu(loss_fn, device):
    params, targets, T_b, U_b = joiner_batch(seed=23)
    expected = loss_and_grads(loss_fn, params, targets, T_b, U_b, "cpu")
    got = loss_and_grads(loss_fn, params, targets, T_b, U_b, device)
    assert torch.isfinite(expected[0])
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

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


def padded_loss(params, targets, T_b, U_b, backend="auto", one_sym=False, **timing):
    enc, pred, weight, bias = params
    logits = torch.nn.functional.linear(torch.tanh(enc[:, :, None] + pred[:, None]), weight, bias)
    return transducer_loss(logits, targets, T_b, U_b, reduction="none", one_sym_per_frame=one_sym, backend=backend,
                           **timing).sum()


def padded_one_symbol_loss(params, targets, T_b, U_b, backend="auto", **timing):
    return padded_loss(params, targets, T_b, U_b, backend, one_sym=True, **timing)


def packed_loss(params, targets, T_b, U_b, backend="auto", **timing):
    enc, pred, weight, bias = params
    rows = torch.nn.functional.linear(torch.tanh(pack_joiner_input(enc, pred, T_b, U_b)), weight, bias)
    return transducer_loss(rows, targets, T_b, U_b, reduction="sum", backend=backend, **timing)


def fused_loss(params, targets, T_b, U_b, backend="auto", **timing):
    return fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", chunk_elements=2000, backend=backend,
                             **timing)


def fused_kernels_loss(params, targets, T_b, U_b, backend="auto", **timing):
    """The fused loss in its Triton kernels (no blocks of logits) where the backend is Triton."""
    return fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", kernels=True, backend=backend, **timing)


def simple_and_pruned_loss(params, targets, T_b, U_b, backend="auto", **timing):
    enc, pred, weight, bias = params
    am, lm = torch.nn.functional.linear(enc, weight), torch.nn.functional.linear(pred, weight)
    simple, (gb, gl) = simple_loss(am, lm, targets, T_b, U_b, reduction="sum", return_posteriors=True,
                                   backend=backend)
    ranges = prune_ranges(gb, gl, T_b, U_b, s_range=3, backend=backend)
    enc_p, pred_p = prune(enc, pred, ranges)
    logits = torch.nn.functional.linear(torch.tanh(enc_p + pred_p), weight, bias)
    return simple + pruned_loss(logits, targets, ranges, T_b, U_b, reduction="sum", backend=backend, **timing)


LOSSES = [padded_loss, padded_one_symbol_loss, packed_loss, fused_loss, fused_kernels_loss, simple_and_pruned_loss]


def loss_and_grads(loss_fn, params, targets, T_b, U_b, device, backend="auto", **timing):
    on_device = [p.to(device).requires_grad_(True) for p in params]
    loss = loss_fn(on_device, targets.to(device), T_b.to(device), U_b.to(device), backend, **timing)
    return [t.cpu() for t in (loss, *torch.autograd.grad(loss, on_device))]


@pytest.mark.parametrize("loss_fn", LOSSES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("device", ACCELERATORS)
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_accelerator_matches_cpu(loss_fn, device, backend):
    params, targets, T_b, U_b = joiner_batch(seed=23)
    expected = loss_and_grads(loss_fn, params, targets, T_b, U_b, "cpu")
    got = loss_and_grads(loss_fn, params, targets, T_b, U_b, device, backend)
    assert torch.isfinite(expected[0])
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


# packed and the fused loss's blocks cut by lengths on the host; the fused loss's kernels run on Triton only
SYNC_FREE = [(loss_fn, backend) for loss_fn in (padded_loss, padded_one_symbol_loss, simple_and_pruned_loss)
             for backend in ("torch", "triton")] + [(fused_kernels_loss, "triton")]


@pytest.mark.parametrize("loss_fn, backend", SYNC_FREE, ids=lambda x: getattr(x, "__name__", x))
@pytest.mark.parametrize("device", ACCELERATORS)
def test_a_loss_step_never_waits_for_the_device(loss_fn, device, backend):
    """Forward and backward with lengths on the device, all regularisers on: CUDA's sync debug mode raises
    at any host-device synchronisation (a read of a value, a boolean index, a blocking copy)."""
    params, targets, T_b, U_b = joiner_batch(seed=23)
    on_device = [p.to(device).requires_grad_(True) for p in params]
    targets, T_b, U_b = targets.to(device), T_b.to(device), U_b.to(device)
    timing = dict(fastemit_lambda=0.01, delay_penalty=0.1, self_alignment=0.2)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = loss_fn(on_device, targets, T_b, U_b, backend, **timing)
        torch.autograd.grad(loss, on_device)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss).item()


BAD_ON_CUDA = """
import sys, torch
from rnnt.loss import transducer_loss
logits = torch.randn(2, 3, 3, 5, device="cuda")
targets = torch.tensor([[1, 2], [0, 3]], device="cuda")  # the blank 0 inside the second utterance's targets
lengths = torch.tensor([3, 3], device="cuda"), torch.tensor([2, 2], device="cuda")
try:
    transducer_loss(logits, targets, *lengths).item()
except RuntimeError as error:
    print("refused:", error)
    sys.exit(3)
"""


@pytest.mark.parametrize("device", ACCELERATORS)
def test_bad_targets_stop_a_cuda_step_with_the_check_kernels_message(device):
    """rnnt.loss.check_kernel's asserts are compiled in on a GPU (Triton drops them without debug): the step
    fails at its synchronisation, and the device prints the check's message. In a process of its own, since a
    device-side assert leaves CUDA unusable in the process that raised it."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", BAD_ON_CUDA], capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "the blank symbol 0 appears inside the targets" in run.stdout + run.stderr

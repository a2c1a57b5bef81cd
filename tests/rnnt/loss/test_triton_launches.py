"""How the losses launch their Triton kernels, for what differs on a GPU from the interpreter (from an audit of the
kernels against Triton's launcher): lengths that are views (expanded, strided) read as their values, a gradient
written into the logits by a kernel seen by autograd, float64's tiny kept as float64 (a float argument reaches a
GPU kernel as float32, where it is 0), backend "torch" keeping Triton out altogether, and every entry point run
on its inputs' CUDA device (Triton launches on the current one). In Triton's interpreter here; on CUDA where
present."""

import inspect

import pytest
import torch

from conftest import TRITON_DEVICE as DEVICE
from rnnt.loss import fused_joiner_loss, lattice_posteriors, prune_ranges, pruned_loss, simple_loss, transducer_loss
from rnnt.loss.lattice import best_path_label_frames
from rnnt.loss.pruned import banded_loss
from test_loss_devices import fused_kernels_loss, fused_loss, joiner_batch, loss_and_grads, padded_loss, \
    simple_and_pruned_loss

triton = pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")


def views(lengths: torch.Tensor) -> torch.Tensor:
    """The same values as a view with stride 2 into a bigger tensor whose other column is garbage."""
    return torch.stack([lengths, torch.full_like(lengths, 99)], 1)[:, 0]


@pytest.mark.parametrize("loss_fn", [padded_loss, fused_kernels_loss, simple_and_pruned_loss],
                         ids=lambda f: f.__name__)
def test_lengths_that_are_views_are_read_as_their_values(loss_fn):
    """A strided (B,) length was read as if contiguous: the next column's 99 as a length, past the lattice."""
    params, targets, T_b, U_b = joiner_batch(seed=5)
    expected = loss_and_grads(loss_fn, params, targets, T_b, U_b, DEVICE, "triton")
    strided = loss_and_grads(loss_fn, params, targets, views(T_b), views(U_b), DEVICE, "triton")
    one = T_b[:1].expand(len(T_b))  # every utterance as long as the first: stride 0
    expanded = loss_and_grads(loss_fn, params, targets, one, U_b, DEVICE, "triton")
    contiguous = loss_and_grads(loss_fn, params, targets, one.clone(), U_b, DEVICE, "triton")
    for got, want in zip(strided + expanded, expected + contiguous):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_a_gradient_written_into_the_logits_by_a_kernel_is_seen_by_their_other_users():
    """reuse_logits_for_grad on Triton: its kernel's write bumps the logits' version, so that another autograd user
    of them refuses (it read the gradient as the logits, silently, where the torch backend refused)."""
    params, targets, T_b, U_b = joiner_batch(seed=7)
    enc, pred, weight, bias = (p.to(DEVICE) for p in params)
    logits = torch.nn.functional.linear(torch.tanh(enc[:, :, None] + pred[:, None]), weight, bias)
    joined = (logits * 1.0).requires_grad_(True)
    other = (joined ** 2).sum()  # pow keeps joined for its backward
    loss = transducer_loss(joined, targets.to(DEVICE), T_b.to(DEVICE), U_b.to(DEVICE), reuse_logits_for_grad=True,
                           backend="triton")
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (loss + other).backward()


def test_every_kernels_tiny_is_a_compile_time_constant():
    """A float argument reaches a GPU kernel as float32, where float64's tiny (2.2e-308) is 0: log(0) arcs and g / 0
    weights. As a constexpr it is a float64 constant where it needs one (the interpreter passed it as it is)."""
    from rnnt.loss import lattice_kernels, row_kernels, simple_arcs_kernel

    kernels = [lattice_kernels.backward_kernel, row_kernels.row_gradient_kernel, simple_arcs_kernel.arcs_kernel,
               simple_arcs_kernel.weights_kernel]
    for kernel in kernels:
        annotation = inspect.signature(kernel.fn).parameters["tiny"].annotation
        assert annotation in ("tl.constexpr", triton.language.constexpr), kernel.fn.__name__


def test_float64_losses_on_triton_equal_the_torch_backend():
    params, targets, T_b, U_b = joiner_batch(seed=9)
    params = [p.double() for p in params]
    for loss_fn in (padded_loss, simple_and_pruned_loss):
        got = loss_and_grads(loss_fn, params, targets, T_b, U_b, DEVICE, "triton")
        want = loss_and_grads(loss_fn, params, targets, T_b, U_b, DEVICE, "torch")
        for g, w in zip(got, want):
            assert g.dtype == torch.float64
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


@pytest.mark.skipif(DEVICE != "cpu", reason="counts the interpreter's launches")
def test_backend_torch_launches_no_kernel_and_auto_does(monkeypatch):
    """backend "torch" is the way round a GPU where Triton does not compile: the checks, cell maps and the simple
    loss's arcs ran in Triton whatever the backend."""
    from triton.runtime.interpreter import InterpretedFunction

    from rnnt import host_reads

    monkeypatch.setattr(host_reads, "free", lambda device: False)  # the GPU's path: no reads of the device
    launched = []
    original = InterpretedFunction.run
    monkeypatch.setattr(InterpretedFunction, "run",
                        lambda self, *args, **kwargs: launched.append(self.fn.__name__) or original(self, *args,
                                                                                                    **kwargs))
    params, targets, T_b, U_b = joiner_batch(seed=11)
    for loss_fn in (padded_loss, fused_loss, simple_and_pruned_loss):
        loss_and_grads(loss_fn, params, targets, T_b, U_b, "cpu", "torch")
    assert launched == []
    loss_and_grads(padded_loss, params, targets, T_b, U_b, "cpu", "auto")  # the passes in PyTorch, on the CPU
    assert {"check_kernel", "cell_map_kernel"} <= set(launched)


def test_every_entry_point_runs_on_its_inputs_device(monkeypatch):
    """Each is on_inputs_device's wrapper (its code, not any decorator's), and that wrapper enters the device of
    the first tensor where it is a CUDA one (a stand-in tensor type here: no GPU)."""
    from rnnt.loss.lattice_triton import on_inputs_device

    wrapper_code = on_inputs_device(lambda: None).__code__
    for function in (transducer_loss, fused_joiner_loss, simple_loss, prune_ranges, pruned_loss, banded_loss,
                     lattice_posteriors, best_path_label_frames):
        assert function.__code__ is wrapper_code, function.__name__

    class OnCuda(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", 1)

    entered = []

    class Recorder:
        def __init__(self, device):
            entered.append(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "device", Recorder)
    assert on_inputs_device(lambda x, y=None: "ran")(torch.zeros(1).as_subclass(OnCuda)) == "ran"
    assert entered == [torch.device("cuda", 1)]
    assert on_inputs_device(lambda x: "ran")(torch.zeros(1)) == "ran" and len(entered) == 1  # the CPU: none


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.parametrize("loss_fn", [padded_loss, fused_kernels_loss, simple_and_pruned_loss],
                         ids=lambda f: f.__name__)
def test_a_loss_on_the_second_gpu_while_the_first_is_current(loss_fn):
    params, targets, T_b, U_b = joiner_batch(seed=13)
    expected = loss_and_grads(loss_fn, params, targets, T_b, U_b, "cpu")
    torch.cuda.set_device(0)
    got = loss_and_grads(loss_fn, params, targets, T_b, U_b, "cuda:1", "triton")
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

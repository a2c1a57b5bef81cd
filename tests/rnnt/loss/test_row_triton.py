"""The Triton kernels over logits rows (rnnt.loss.row_kernels) against float64 PyTorch: the per-row
log-normaliser and arc log-probs, and the gradient written back, for vocabularies narrower and wider than
one program's step, ragged row counts, strided rows, float32 / bfloat16 / float64 logits, clamping, an
incoming gradient of either sign, and the gradient written over the logits. Then every loss on logits
with its Triton backend against the PyTorch one. Without a GPU, in Triton's interpreter."""

import pytest
import torch

from rnnt.loss import fused_joiner_loss, pruned_loss, row_triton, transducer_loss
from rnnt.loss.logits_loss import logits_gradient
from conftest import TRITON_DEVICE as DEVICE

pytest.importorskip("triton")
# log(0) of a zero occupancy is -inf on purpose; the interpreter's numpy says so
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
SHAPES = [(1, 1), (7, 5), (300, 9), (37, 1500)]  # (rows, vocabulary); 1500 takes two column steps


def random_rows(n, vocab, dtype, seed, spread=4.0):
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(n, vocab, generator=g, dtype=torch.float64) * spread
    labels = torch.randint(0, vocab, (n,), generator=g)
    return rows.to(DEVICE, dtype), labels.to(DEVICE)


def tolerance(dtype):
    return 1e-12 if dtype == torch.float64 else 2e-5


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_row_stats_are_logsumexp_and_the_two_arcs(shape, dtype):
    rows, labels = random_rows(*shape, dtype, seed=1)
    blank = shape[1] - 1
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    lse, blank_lp, label_lp = row_triton.row_stats(rows, labels, blank, acc)
    exact = rows.double().log_softmax(1)
    assert lse.dtype == acc and lse.shape == (shape[0],)
    torch.testing.assert_close(lse.double(), rows.double().logsumexp(1), rtol=0, atol=tolerance(dtype))
    torch.testing.assert_close(blank_lp.double(), exact[:, blank], rtol=0, atol=tolerance(dtype))
    torch.testing.assert_close(label_lp.double(), exact.gather(1, labels[:, None])[:, 0], rtol=0,
                               atol=tolerance(dtype))


def test_row_stats_read_strided_rows_and_skip_normalising_log_probs():
    wide, labels = random_rows(40, 64, torch.float32, seed=2)
    rows = wide[:, :33]  # a row stride of 64, not 33
    lse, blank_lp, label_lp = row_triton.row_stats(rows, labels % 33, 3, torch.float32)
    torch.testing.assert_close(lse, rows.logsumexp(1))
    torch.testing.assert_close(label_lp, (rows - lse[:, None]).gather(1, (labels % 33)[:, None])[:, 0])
    lse, blank_lp, _ = row_triton.row_stats(rows, labels % 33, 3, torch.float32, normalise=False)
    assert torch.equal(lse, torch.zeros_like(lse)) and torch.equal(blank_lp, rows[:, 3])


def reference_gradient(rows, lse, post_blank, post_label, labels, blank, clamp=None, softmax=True):
    """d loss / d logits in float64, the obvious way."""
    grad = torch.zeros(rows.shape, dtype=torch.float64, device=rows.device)
    if softmax:
        grad = (rows.double() - lse.double()[:, None]).exp() * (post_blank + post_label).double()[:, None]
    grad[:, blank] -= post_blank.double()
    grad.scatter_add_(1, labels[:, None], -post_label.double()[:, None])
    return grad.clamp(-clamp, clamp) if clamp else grad


def posteriors(n, seed, sign=1.0):
    g = torch.Generator().manual_seed(seed)
    post = torch.rand(2, n, generator=g, dtype=torch.float64) * sign
    post[1, ::3] = 0  # cells with no label arc
    return post[0].to(DEVICE), post[1].to(DEVICE)


@pytest.mark.parametrize("sign", [1.0, -0.5])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_row_gradient_is_softmax_times_occupancy_less_the_arc_posteriors(shape, dtype, sign):
    rows, labels = random_rows(*shape, dtype, seed=3)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    lse = rows.to(acc).logsumexp(1)
    post_blank, post_label = (p.to(acc) for p in posteriors(shape[0], seed=4, sign=sign))
    grad = row_triton.row_gradient(rows, torch.empty_like(rows), lse, post_blank, post_label, labels, 0, None)
    want = reference_gradient(rows, lse, post_blank, post_label, labels, 0)
    assert grad.dtype == dtype
    if dtype == torch.bfloat16:  # rounded to bfloat16 once: within its spacing, 2^-7 relative (the
        # interpreter's conversion truncates, a GPU's rounds to nearest)
        torch.testing.assert_close(grad.double(), want, rtol=2 ** -7, atol=1e-6)
    else:
        torch.testing.assert_close(grad.double(), want, rtol=0, atol=tolerance(dtype))


@pytest.mark.parametrize("softmax", [True, False])
def test_row_gradient_clamps_and_writes_over_its_rows(softmax):
    rows, labels = random_rows(50, 1100, torch.float32, seed=5)
    lse = rows.logsumexp(1)
    post_blank, post_label = (p.float() for p in posteriors(50, seed=6))
    want = reference_gradient(rows, lse, post_blank, post_label, labels, 7, clamp=0.3, softmax=softmax)
    grad = row_triton.row_gradient(rows, rows, lse, post_blank, post_label, labels, 7, 0.3, softmax=softmax)
    assert grad.data_ptr() == rows.data_ptr()
    torch.testing.assert_close(rows.double(), want, rtol=0, atol=1e-6)


def test_row_gradient_clamps_float64_at_the_float64_bound():
    """A float argument is float32 inside a Triton kernel: float64 gradients were clamped at float32(0.1), 1.5e-9
    off the bound, where the torch backend and the float64 reference clamp at 0.1 itself."""
    rows, labels = random_rows(20, 30, torch.float64, seed=7)
    lse = rows.logsumexp(1)
    post_blank, post_label = posteriors(20, seed=8)
    want = reference_gradient(rows, lse, post_blank, post_label, labels, 3, clamp=0.1)
    assert (want.abs() == 0.1).sum() > 10  # clamped, at the bound
    grad = row_triton.row_gradient(rows, torch.empty_like(rows), lse, post_blank, post_label, labels, 3, 0.1)
    torch.testing.assert_close(grad, want, rtol=0, atol=tolerance(torch.float64))
    assert torch.equal(grad[want.abs() == 0.1], want[want.abs() == 0.1])  # at the bound exactly


def test_row_gradient_scales_each_rows_posteriors_by_its_utterance():
    rows, labels = random_rows(90, 40, torch.float32, seed=10)
    lse = rows.logsumexp(1)
    post_blank, post_label = (p.float() for p in posteriors(90, seed=11))
    batch = (torch.arange(90, device=DEVICE) // 30).int()
    scale = torch.tensor([0.5, -1.0, 3.0], device=DEVICE)
    grad = row_triton.row_gradient(rows, torch.empty_like(rows), lse, post_blank, post_label, labels, 2, None,
                                   batch=batch, scale=scale)
    factor = scale[batch.long()]
    want = reference_gradient(rows, lse, post_blank * factor, post_label * factor, labels, 2)
    torch.testing.assert_close(grad.double(), want, rtol=0, atol=1e-6)


def test_row_gradient_flushes_subnormal_products():
    rows, labels = random_rows(20, 30, torch.float32, seed=7, spread=30.0)
    lse = rows.logsumexp(1)
    post_blank, post_label = torch.full((20,), 1e-20, device=DEVICE), torch.zeros(20, device=DEVICE)
    grad = row_triton.row_gradient(rows, torch.empty_like(rows), lse, post_blank, post_label, labels, 0, None)
    tiny = torch.finfo(torch.float32).tiny
    assert not ((grad != 0) & (grad.abs() < tiny)).any()
    assert (grad == 0).any() and (grad.abs() >= tiny).any()


@pytest.mark.parametrize("sign", [1.0, -2.0])
def test_the_pytorch_gradient_takes_an_incoming_gradient_of_either_sign(sign):
    """logits_gradient (PyTorch, chunked) with a negative utterance scale keeps its softmax term."""
    rows, labels = random_rows(60, 11, torch.float64, seed=8)
    lse = rows.logsumexp(1)
    post_blank, post_label = posteriors(60, seed=9)
    batch = torch.arange(60, device=DEVICE) % 3
    scale = torch.tensor([sign, 1.0, 0.5], dtype=torch.float64, device=DEVICE)
    grad = logits_gradient(rows, lse, labels, batch, scale, 0, post_blank, post_label, False, None)
    want = reference_gradient(rows, lse, post_blank * scale[batch], post_label * scale[batch], labels, 0)
    torch.testing.assert_close(grad, want)


def logits_losses(backend, dtype):
    """Padded (in place and not), packed and pruned losses of one set of logits; values and gradients."""
    g = torch.Generator().manual_seed(12)
    B, T, U, V = 3, 6, 4, 1030
    logits = (torch.randn(B, T, U + 1, V, generator=g) * 3).to(DEVICE, dtype)
    targets = torch.randint(1, V, (B, U), generator=g).to(DEVICE)
    T_b, U_b = torch.tensor([6, 4, 1]).to(DEVICE), torch.tensor([4, 0, 1]).to(DEVICE)
    packed = torch.cat([logits[b, : T_b[b], : U_b[b] + 1].reshape(-1, V) for b in range(B)])
    ranges = torch.arange(2, device=DEVICE).expand(B, T, 2).contiguous()
    results = []
    for name, x in [("padded", logits), ("in place", logits), ("packed", packed), ("pruned", logits[:, :, :2])]:
        x = x.detach().clone().requires_grad_(True)
        kw = dict(reduction="none", backend=backend, clamp=0.5 if name == "packed" else None)
        if name == "pruned":
            loss = pruned_loss(x, targets, ranges, T_b, U_b, **kw)
        else:
            loss = transducer_loss(x if name != "in place" else x * 1, targets, T_b, U_b, **kw,
                                   reuse_logits_for_grad=name == "in place")
        weights = torch.tensor([1.0, -0.5, 2.0], device=DEVICE, dtype=loss.dtype)
        results.append((loss.detach(), torch.autograd.grad((loss * weights).sum(), x)[0]))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_losses_on_logits_are_the_same_on_either_backend(dtype):
    for (want, want_grad), (got, got_grad) in zip(logits_losses("torch", dtype), logits_losses("triton", dtype)):
        torch.testing.assert_close(got, want)
        # the two lattice backends sum the paths in different orders; bfloat16 rounds differently by an ulp
        rtol = 1e-5 if dtype == torch.float32 else 2 ** -7
        torch.testing.assert_close(got_grad, want_grad, rtol=rtol, atol=2e-5)


def test_fused_loss_under_bfloat16_autocast_is_the_same_on_either_backend():
    g = torch.Generator().manual_seed(13)
    B, T, U, H, V = 2, 5, 3, 8, 1030
    inputs = [torch.randn(B, T, H, generator=g), torch.randn(B, U + 1, H, generator=g),
              torch.randn(V, H, generator=g) / 3, torch.randn(V, generator=g)]
    targets = torch.randint(1, V, (B, U), generator=g).to(DEVICE)
    T_b, U_b = torch.tensor([5, 3]).to(DEVICE), torch.tensor([3, 1]).to(DEVICE)
    results = []
    for backend in ("torch", "triton"):
        params = [p.to(DEVICE).requires_grad_(True) for p in inputs]
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", backend=backend)
        results.append((loss.detach(), torch.autograd.grad(loss, params)))
    (want, want_grads), (got, got_grads) = results
    torch.testing.assert_close(got, want)
    for g_, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g_, w, rtol=2e-2, atol=2e-2)

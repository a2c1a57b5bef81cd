"""The Triton backend of the lattice passes (rnnt.loss.lattice_kernels) against the PyTorch one, in
float64 and float32, for ragged batches, U = 0, T = 1, long label sequences and both lattices; and every
loss with the emission regularisers on either backend. Without a GPU, in Triton's interpreter."""

import pytest
import torch

from rnnt.loss import fused_joiner_loss, lattice_triton, pack_joiner_input, prune, prune_ranges, pruned_loss, \
    simple_loss, transducer_loss
from rnnt.loss.lattice import best_path_label_frames, lattice_posteriors
from conftest import TRITON_DEVICE as DEVICE

pytest.importorskip("triton")
# log(0) of two unreachable arcs is -inf on purpose; the interpreter's numpy says so
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")


def arc_lattice(T_b, U_b, seed, dtype=torch.float64, T=None, U=None, ties=False):
    """Random blank and label arc log-probs (B, T, U+1), -inf where the lattice has no such arc."""
    T, U = T or int(T_b.max()), U if U is not None else int(U_b.max())
    g = torch.Generator().manual_seed(seed)
    logits = torch.zeros(len(T_b), T, U + 1, 3, dtype=torch.float64) if ties else \
        torch.randn(len(T_b), T, U + 1, 3, generator=g, dtype=torch.float64)
    log_probs = logits.log_softmax(-1).to(dtype)
    t, u = torch.arange(T)[None, :, None], torch.arange(U + 1)[None, None, :]
    node = (t < T_b[:, None, None]) & (u <= U_b[:, None, None])
    blank = log_probs[..., 0].masked_fill(~node, float("-inf"))
    label = log_probs[..., 1].masked_fill(~(node & (u < U_b[:, None, None])), float("-inf"))
    return blank.to(DEVICE), label.to(DEVICE)


RAGGED = [  # (T_b, U_b): ragged, with U = 0, T = 1, and an utterance shorter than the padding
    (torch.tensor([7, 5, 1, 6, 3]), torch.tensor([4, 0, 1, 2, 3])),
    (torch.tensor([1]), torch.tensor([0])),
    (torch.tensor([1, 2]), torch.tensor([3, 0])),
]


def assert_posteriors_equal(T_b, U_b, one_sym, dtype, seed, **shape):
    """Triton's values in dtype equal the float64 reference within the rounding of one accumulation per
    step of the pass: steps x eps(dtype) x |log-likelihood|."""
    blank, label = arc_lattice(T_b, U_b, seed, dtype, **shape)
    lengths = T_b.to(DEVICE), U_b.to(DEVICE)
    want = lattice_posteriors(blank.double(), label.double(), *lengths, one_sym, backend="torch")
    got = lattice_posteriors(blank, label, *lengths, one_sym, backend="triton")
    finite = torch.isfinite(want[0])
    steps = blank.shape[1] + blank.shape[2]
    eps = torch.finfo(dtype if dtype == torch.float64 else torch.float32).eps  # half precision summed in float32
    rounding = torch.finfo(dtype).eps if dtype.itemsize < 4 else 0  # and its results rounded to dtype
    tolerance = (steps * eps + rounding) * max(1.0, want[0][finite].abs().max().item() if finite.any() else 1)
    for g, w in zip(got, want):
        assert g.dtype == dtype
        assert torch.equal(torch.isfinite(g), torch.isfinite(w))
        torch.testing.assert_close(g.double(), w, rtol=0, atol=tolerance)


@pytest.mark.parametrize("one_sym", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lengths", RAGGED)
def test_posteriors_and_likelihood_equal_the_torch_backend(lengths, dtype, one_sym):
    """Half precision too (on a GPU, where auto picks Triton, its kernels did not compile for it)."""
    T_b, U_b = lengths
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    assert_posteriors_equal(T_b, U_b, one_sym, dtype, seed=len(T_b), T=int(T_b.max()) + 2, U=int(U_b.max()) + 1)


def test_an_utterance_with_no_complete_path_gets_minus_infinity_and_zero_posteriors():
    T_b, U_b = torch.tensor([3, 2]), torch.tensor([4, 1])  # 4 labels in 3 frames: no one-symbol path
    blank, label = arc_lattice(T_b, U_b, seed=3)
    log_like, gamma_blank, gamma_label = lattice_posteriors(blank, label, T_b.to(DEVICE), U_b.to(DEVICE), True,
                                                            backend="triton")
    assert log_like[0] == float("-inf") and torch.isfinite(log_like[1])
    assert not gamma_blank[0].any() and not gamma_label[0].any()
    torch.testing.assert_close((gamma_blank[1] + gamma_label[1])[0].sum().item(), 1.0)  # frame 0 is passed once


@pytest.mark.parametrize("one_sym", [False, True])
def test_lengths_that_do_not_fit_the_padding_give_no_path_and_leave_the_others_alone(one_sym):
    """No frame, more frames or labels than the padded lattice: no complete path, as the torch backend says (the
    passes wrote past the utterance's lattice, into the next one's or past the end, on a GPU at once with it)."""
    T_b, U_b = torch.tensor([3, 4, 3, 2, 3]), torch.tensor([1, 2, 1, 1, 1])
    blank, label = arc_lattice(T_b, U_b, seed=9, T=4, U=2)
    # 0, 1, 4: too long (0's frames past the padding run on into 1's lattice, whose arcs there have values: a path
    # on the CPU too); 3: no frame
    wrong_T, wrong_U = torch.tensor([5, 5, 3, 0, 3]), torch.tensor([1, 2, 1, 1, 3])
    lengths = wrong_T.to(DEVICE), wrong_U.to(DEVICE)
    log_like, *posteriors = lattice_posteriors(blank, label, *lengths, one_sym, backend="triton")
    want = lattice_posteriors(blank, label, T_b.to(DEVICE), U_b.to(DEVICE), one_sym, backend="torch")
    fit = torch.tensor([False, False, True, False, False])
    assert torch.equal(torch.isinf(log_like).cpu(), ~fit)
    torch.testing.assert_close(log_like[fit], want[0][fit])
    for got, reference in zip(posteriors, want[1:]):
        assert not got[~fit].any()
        torch.testing.assert_close(got[fit], reference[fit])
    frames = best_path_label_frames(blank, label, *lengths, one_sym, backend="triton")
    assert (frames[~fit] == -1).all()
    assert torch.equal(frames[fit], best_path_label_frames(blank, label, T_b, U_b, one_sym, backend="torch")[fit])


@pytest.mark.slow
@pytest.mark.parametrize("one_sym, T, U", [(False, 4, 500), (True, 500, 500)])
def test_500_labels(one_sym, T, U):
    assert_posteriors_equal(torch.tensor([T]), torch.tensor([U]), one_sym, torch.float32, seed=7)


@pytest.mark.parametrize("one_sym", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_viterbi_frames_equal_the_torch_backend(one_sym, ties):
    T_b, U_b = torch.tensor([9, 6, 1, 4, 2]), torch.tensor([5, 0, 1, 4, 3])  # the last: no one-symbol path
    blank, label = arc_lattice(T_b, U_b if not one_sym else U_b, seed=5, ties=ties)
    lengths = T_b.to(DEVICE), U_b.to(DEVICE)
    want = best_path_label_frames(blank, label, *lengths, one_sym, backend="torch")
    got = best_path_label_frames(blank, label, *lengths, one_sym, backend="triton")
    assert torch.equal(got, want), (got, want)
    assert (want[4] == -1).all() == one_sym


def every_loss(backend, one_sym, dtype=torch.float64):
    """Full (padded and packed), fused, simple and pruned losses of one joiner, with all three emission
    regularisers on; their values and the gradients w.r.t. every input."""
    g = torch.Generator().manual_seed(11)
    B, T, U, H, V = 3, 7, 4, 6, 9
    enc, pred = torch.randn(B, T, H, generator=g), torch.randn(B, U + 1, H, generator=g)
    weight, bias = torch.randn(V, H, generator=g) / 3, torch.randn(V, generator=g)
    params = [p.to(DEVICE, dtype).requires_grad_(True) for p in (enc, pred, weight, bias)]
    enc, pred, weight, bias = params
    targets = torch.randint(1, V, (B, U), generator=g).to(DEVICE)
    T_b, U_b = torch.tensor([7, 5, 4]).to(DEVICE), torch.tensor([4, 0, 3]).to(DEVICE)
    options = dict(reduction="sum", one_sym_per_frame=one_sym, backend=backend)
    timing = dict(fastemit_lambda=0.01, delay_penalty=0.1, self_alignment=0.2)
    logits = torch.nn.functional.linear(torch.tanh(enc[:, :, None] + pred[:, None]), weight, bias)
    packed = torch.nn.functional.linear(torch.tanh(pack_joiner_input(enc, pred, T_b, U_b)), weight, bias)
    losses = [transducer_loss(logits, targets, T_b, U_b, **options, **timing),
              transducer_loss(packed, targets, T_b, U_b, **options, **timing),
              fused_joiner_loss(*params, targets, T_b, U_b, **options, **timing)]
    simple, (gamma_blank, gamma_label) = simple_loss(enc @ weight.T, pred @ weight.T, targets, T_b, U_b,
                                                     return_posteriors=True, delay_penalty=0.1, **options)
    ranges = prune_ranges(gamma_blank, gamma_label, T_b, U_b, s_range=3, backend=backend)
    enc_pruned, pred_pruned = prune(enc, pred, ranges)
    pruned_logits = torch.nn.functional.linear(torch.tanh(enc_pruned + pred_pruned), weight, bias)
    losses += [simple, pruned_loss(pruned_logits, targets, ranges, T_b, U_b, **options, **timing)]
    return [(loss.detach(), torch.autograd.grad(loss, params, allow_unused=True)) for loss in losses]


@pytest.mark.slow  # 10 s in Triton's interpreter: the full suite's, not the fast one's
@pytest.mark.parametrize("one_sym", [False, True])
def test_every_loss_with_the_emission_regularisers_is_the_same_on_either_backend(one_sym):
    for (want, want_grads), (got, got_grads) in zip(every_loss("torch", one_sym), every_loss("triton", one_sym)):
        torch.testing.assert_close(got, want)
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_logits_accumulate_in_float32_on_either_backend(dtype):
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 6, 4, 11, generator=g).to(DEVICE, dtype)
    targets = torch.randint(1, 11, (2, 3), generator=g).to(DEVICE)
    T_b, U_b = torch.tensor([6, 4]).to(DEVICE), torch.tensor([3, 2]).to(DEVICE)
    results = []
    for backend in ("torch", "triton"):
        x = logits.clone().requires_grad_(True)
        loss = transducer_loss(x, targets, T_b, U_b, backend=backend)
        results.append((loss, torch.autograd.grad(loss, x)[0]))
    assert results[1][0].dtype == torch.float32 and results[1][1].dtype == dtype  # the loss as accumulated
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


@pytest.mark.parametrize("reuse", [False, True])
def test_logits_whose_vocabulary_is_not_innermost_have_their_gradient_on_either_backend(reuse):
    """Logits permuted from (V, B, T, U+1), as (W @ h.T).T makes them: the kernel's gradient is row-major, and
    its writes into the logits' rows (reuse_logits_for_grad) were an assertion of the Triton backend alone."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(9, 2, 5, 4, generator=g).to(DEVICE)
    targets = torch.randint(1, 9, (2, 3), generator=g).to(DEVICE)
    T_b, U_b = torch.tensor([5, 3]).to(DEVICE), torch.tensor([3, 1]).to(DEVICE)
    results = []
    for backend in ("torch", "triton"):
        x = base.clone().requires_grad_(True)
        loss = transducer_loss(x.permute(1, 2, 3, 0) * 1.0 if reuse else x.permute(1, 2, 3, 0), targets, T_b, U_b,
                               backend=backend, reuse_logits_for_grad=reuse)
        results.append((loss, torch.autograd.grad(loss, x)[0]))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


def test_auto_is_triton_on_a_gpu_triton_runs_on_and_torch_elsewhere(monkeypatch):
    assert lattice_triton.resolve_backend("auto", torch.device("cpu")) == "torch"
    monkeypatch.setattr(lattice_triton, "triton_runs_on", lambda device: device.type == "cuda")
    assert lattice_triton.resolve_backend("auto", torch.device("cuda")) == "triton"
    assert lattice_triton.resolve_backend("triton", torch.device("cuda")) == "triton"
    monkeypatch.setattr(lattice_triton, "triton_runs_on", lambda device: False)  # compute capability under 8.0
    assert lattice_triton.resolve_backend("auto", torch.device("cuda")) == "torch"
    assert not lattice_triton.bookkeeping_in_triton(torch.device("cuda"))


def test_backend_errors(monkeypatch):
    logits, targets = torch.randn(1, 2, 2, 3), torch.tensor([[1]])
    lengths = torch.tensor([2]), torch.tensor([1])
    with pytest.raises(ValueError, match="loss backend must be one of"):
        transducer_loss(logits, targets, *lengths, backend="cuda")
    monkeypatch.setattr(lattice_triton, "interpreting", lambda: False)
    with pytest.raises(ValueError, match="runs on CUDA tensors, got cpu ones.*TRITON_INTERPRET=1"):
        transducer_loss(logits, targets, *lengths, backend="triton")
    monkeypatch.setattr(lattice_triton, "triton_installed", lambda: False)
    assert lattice_triton.resolve_backend("auto", torch.device("cuda")) == "torch"
    with pytest.raises(RuntimeError, match="needs the triton package"):
        transducer_loss(logits, targets, *lengths, backend="triton")


@pytest.mark.parametrize("loss_type", ["full", "fused", "pruned"])
def test_the_model_config_backend_reaches_every_loss(loss_type, monkeypatch):
    """loss.backend in a model's config picks where its lattice passes run; the loss is the same either way."""
    from rnnt.model.transducer import LossConfig, ModelConfig, Transducer

    launches = []
    triton_posteriors = lattice_triton.lattice_posteriors
    monkeypatch.setattr(lattice_triton, "lattice_posteriors", lambda *a: launches.append(1) or triton_posteriors(*a))
    g = torch.Generator().manual_seed(4)
    tokens, token_lens, enc_lens = (x.to(DEVICE) for x in (torch.randint(1, 7, (2, 3), generator=g),
                                                            torch.tensor([3, 2]), torch.tensor([8, 6])))
    losses = {}
    for backend in ("torch", "triton"):
        torch.manual_seed(0)
        model = Transducer(ModelConfig(loss=LossConfig(type=loss_type, backend=backend)), 7).to(DEVICE)
        enc = torch.randn(2, 8, model.encoder.output_dim, generator=torch.Generator().manual_seed(1)).to(DEVICE)
        losses[backend] = model.loss(enc, enc_lens, tokens, token_lens)["loss"].detach()
        assert len(launches) == (0 if backend == "torch" else 2 if loss_type == "pruned" else 1)
    torch.testing.assert_close(losses["triton"], losses["torch"])
    with pytest.raises(ValueError, match="loss backend must be one of"):
        Transducer(ModelConfig(loss=LossConfig(backend="gpu")), 7)


@pytest.mark.parametrize("s_range", [2, 3, 5])
def test_one_symbol_bands_equal_the_torch_backend(s_range):
    """The one-symbol lattice's band (every window reachable by a path that climbs one symbol a frame at
    most) is the same from the Triton kernel as from the PyTorch loop: for random posteriors, ragged
    lengths, U = 0, U = T (a label every frame) and U + 1 < s_range."""
    g = torch.Generator().manual_seed(10 + s_range)
    T_b, U_b = torch.tensor([9, 4, 1, 7, 9, 6]), torch.tensor([6, 0, 1, 1, 9, 2])
    gamma_blank, gamma_label = torch.rand(2, 6, 9, 10, generator=g).to(DEVICE)
    lengths = T_b.to(DEVICE), U_b.to(DEVICE)
    want = prune_ranges(gamma_blank, gamma_label, *lengths, s_range, backend="torch", one_sym_per_frame=True)
    got = prune_ranges(gamma_blank, gamma_label, *lengths, s_range, backend="triton", one_sym_per_frame=True)
    assert torch.equal(got, want)
    plain = prune_ranges(gamma_blank, gamma_label, *lengths, s_range, backend="torch")
    assert not torch.equal(plain, want)  # the one-symbol rule is in force here
    for b, (T, U) in enumerate(zip(T_b.tolist(), U_b.tolist())):  # a path climbing whenever it can fits
        starts, top = want[b, :T, 0].tolist(), 0  # top: the highest node of frame t's window a path is at
        for t in range(1, T):
            assert starts[t - 1] <= starts[t] <= top + 1
            top = min(top + 1, starts[t] + s_range - 1, U)
        assert top >= U - 1  # at the last frame the path is at U, or its label arc there ends at U


@pytest.mark.parametrize("s_range", [2, 3, 5])
def test_pruning_bands_equal_the_torch_backend(s_range):
    """The band's connecting passes over frames give the same windows on either backend, for posteriors
    that put the best window anywhere (random), ragged lengths, U = 0 and U + 1 < s_range."""
    g = torch.Generator().manual_seed(s_range)
    T_b, U_b = torch.tensor([9, 4, 1, 7, 9]), torch.tensor([6, 0, 2, 1, 8])
    gamma_blank, gamma_label = torch.rand(2, 5, 9, 9, generator=g).to(DEVICE)
    lengths = T_b.to(DEVICE), U_b.to(DEVICE)
    want = prune_ranges(gamma_blank, gamma_label, *lengths, s_range, backend="torch")
    got = prune_ranges(gamma_blank, gamma_label, *lengths, s_range, backend="triton")
    assert torch.equal(got, want)
    for b, (T, U) in enumerate(zip(T_b.tolist(), U_b.tolist())):  # inside each utterance: connected, up to U
        starts = want[b, :T, 0]
        assert starts[-1] == max(U + 1 - s_range, 0)
        assert ((starts[1:] >= starts[:-1]) & (starts[1:] <= starts[:-1] + s_range - 1)).all()

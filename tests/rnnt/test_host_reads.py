"""A training step's loss (full, simple, pruned; fused with the Triton backend) and the batched greedy and
modified beam searches never read device values on the host in their loops (rnnt.host_reads): on the CPU,
with the host's reads counted as if on a GPU."""

import pytest
import torch

from conftest import ROOT
from host_read_counter import HostReads
from rnnt import host_reads
from rnnt.config import from_dict, read_yaml
from rnnt.loss import fused_joiner_loss, prune, prune_ranges, pruned_loss, simple_loss, transducer_loss
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer
from rnnt.modified_beam_search import modified_beam_search
from rnnt.search import greedy_search

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")


@pytest.fixture
def as_on_a_gpu(monkeypatch):
    monkeypatch.setattr(host_reads, "free", lambda device: False)


def test_the_counter_counts_reads():
    x = torch.tensor([1.0, -2.0, 3.0])
    log_probs, targets = torch.randn(6, 2, 4).log_softmax(-1), torch.tensor([[1, 2], [3, 0]])
    with HostReads() as counter:
        bool(x[0] > 0), x.sum().item(), x[x > 0], x.nonzero(), x.tolist(), x * 2, x[1:]
        torch.nn.functional.ctc_loss(log_probs, targets, torch.tensor([6, 5]), torch.tensor([2, 1]))
        torch.nn.functional.ctc_loss(log_probs, targets, [6, 5], [2, 1])
    assert counter.reads == ["__bool__", "item", "__getitem__", "nonzero", "tolist", "ctc_loss"]


def joiner_batch(seed=3, B=3, T=9, U=4, H=8, V=11):
    g = torch.Generator().manual_seed(seed)
    enc, pred = torch.randn(B, T, H, generator=g), torch.randn(B, U + 1, H, generator=g)
    weight = (torch.randn(V, H, generator=g) / 3).requires_grad_(True)
    targets = torch.randint(1, V, (B, U), generator=g)
    return enc.requires_grad_(True), pred.requires_grad_(True), weight, targets, torch.tensor([9, 6, 4]), \
        torch.tensor([4, 0, 3])


TRITON_ON_THE_CPU = pytest.mark.skipif(torch.cuda.is_available(), reason="Triton runs CPU tensors only in its "
                                       "interpreter, off where CUDA is (tests/rnnt/loss/test_loss_devices.py there)")


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=[TRITON_ON_THE_CPU, pytest.mark.slow])])
@pytest.mark.parametrize("one_sym", [False, True])  # the Triton path 11 s in the interpreter: in the full suite
def test_a_loss_step_reads_nothing(as_on_a_gpu, backend, one_sym):
    enc, pred, weight, targets, T_b, U_b = joiner_batch()
    options = dict(one_sym_per_frame=one_sym, backend=backend)
    timing = dict(fastemit_lambda=0.01, delay_penalty=0.1, self_alignment=0.2)
    with HostReads() as counter:
        logits = torch.tanh(enc[:, :, None] + pred[:, None]) @ weight.T
        full = transducer_loss(logits, targets, T_b, U_b, reuse_logits_for_grad=True, **options, **timing)
        simple, (gamma_blank, gamma_label) = simple_loss(enc @ weight.T, pred @ weight.T, targets, T_b, U_b,
                                                         return_posteriors=True, delay_penalty=0.1, **options)
        ranges = prune_ranges(gamma_blank, gamma_label, T_b, U_b, 3, backend=backend)
        enc_pruned, pred_pruned = prune(enc, pred, ranges)
        pruned = pruned_loss(torch.tanh(enc_pruned + pred_pruned) @ weight.T, targets, ranges, T_b, U_b,
                             **options, **timing)
        total = full + simple + pruned
        if backend == "triton":  # the fused loss in its kernels (PyTorch's blocks read the lengths to cut them)
            total = total + fused_joiner_loss(enc, pred, weight, None, targets, T_b, U_b, kernels=True, **options,
                                              **timing)
        total.backward()
    assert counter.reads == []
    assert torch.isfinite(weight.grad).all() and weight.grad.abs().sum() > 0


@pytest.mark.parametrize("loss", ["full", "fused", "pruned"])
def test_a_models_step_with_a_ctc_head_reads_nothing_given_the_host_lengths(as_on_a_gpu, loss):
    """The model's loss (the transducer's and its CTC head's, weighted) and its backward: the CTC loss and the
    fused loss's blocks take the lengths the host holds (a batch's before it goes to the device) and read
    none on the device; without them each reads the device's."""
    torch.manual_seed(0)
    config = ModelConfig(loss=LossConfig(type=loss, ctc_weight=0.5, backend="torch"))
    model = Transducer(config, 12).eval()  # no dropout: the two calls compute one loss
    feats, feat_lens = torch.randn(3, 40, config.encoder.input_dim), torch.tensor([40, 31, 17])
    tokens, token_lens = torch.randint(1, 12, (3, 5)), torch.tensor([5, 2, 3])
    with HostReads() as counter:
        parts = model(feats, feat_lens, tokens, token_lens, step=0, host_lengths=([40, 31, 17], [5, 2, 3]))
        parts["loss"].backward()
    assert counter.reads == [] and parts["ctc"] > 0 and parts["transducer"] > 0
    with HostReads() as counter:
        again = model(feats, feat_lens, tokens, token_lens, step=0)
    assert counter.reads == (["tolist", "tolist"] if loss == "fused" else []) + ["ctc_loss"]
    assert float(again["loss"].detach()) == pytest.approx(float(parts["loss"].detach()), rel=1e-6)


def test_the_fused_loss_refuses_host_lengths_that_disagree_where_reading_is_free():
    """Lists shorter than the lengths, or fewer than the utterances, left cells of the lattice uncomputed: the loss
    read what torch.empty left there (-3.7e9 in one run)."""
    enc, pred, weight, targets, T_b, U_b = joiner_batch()
    for wrong in (([9, 6, 3], [4, 0, 3]), ([9, 6], [4, 0])):
        with pytest.raises(ValueError, match=r"host_lengths give .* where the lengths are \[9, 6, 4\] and \[4, 0, 3\]"):
            fused_joiner_loss(enc, pred, weight, None, targets, T_b, U_b, host_lengths=wrong)
    given = fused_joiner_loss(enc, pred, weight, None, targets, T_b, U_b, host_lengths=([9, 6, 4], [4, 0, 3]))
    assert float(given) == float(fused_joiner_loss(enc, pred, weight, None, targets, T_b, U_b))


def test_host_lengths_that_disagree_with_the_encoders_are_refused_where_reading_is_free():
    """On the CPU the model checks the lengths it is given against those its encoder computes (StackTime 2
    here: 40, 31, 17 input frames are 20, 16, 9 output frames)."""
    model = Transducer(ModelConfig(loss=LossConfig(ctc_weight=0.5)), 12)
    feats, feat_lens = torch.randn(3, 40, model.config.encoder.input_dim), torch.tensor([40, 31, 17])
    tokens, token_lens = torch.randint(1, 12, (3, 5)), torch.tensor([5, 2, 3])
    model(feats, feat_lens, tokens, token_lens, host_lengths=([40, 31, 17], [5, 2, 3]))
    for wrong in (([40, 31, 15], [5, 2, 3]), ([40, 31, 17], [5, 3, 3])):
        with pytest.raises(ValueError, match=r"host_lengths give .* where the lengths are \[20, 16, 9\] and "
                                             r"\[5, 2, 3\]"):
            model(feats, feat_lens, tokens, token_lens, host_lengths=wrong)


@pytest.mark.parametrize("search", ["greedy", "modified beam"])
def test_a_batched_search_reads_the_device_once_whatever_the_frames(as_on_a_gpu, search):
    torch.manual_seed(0)
    model = Transducer(ModelConfig(), 12).eval()
    reads = {}
    for frames in (5, 40):
        enc = torch.randn(3, frames, model.encoder.output_dim) * 3
        lengths = torch.tensor([frames, frames - 2, 3])
        with HostReads() as counter:
            if search == "greedy":
                hyps = greedy_search(model, enc, lengths)
            else:
                hyps = [nbest[0] for nbest in modified_beam_search(model, enc, lengths, beam=3)]
        reads[frames] = len(counter.reads)
        assert all(len(h.tokens) == len(h.frames) for h in hyps) and any(h.tokens for h in hyps)
    assert reads[5] == reads[40], reads


def test_modified_beam_search_finds_the_same_on_either_path(monkeypatch):
    """Stepping only the labelled slots (the CPU) and stepping all of them, masked (as on a GPU), agree."""
    torch.manual_seed(2)
    model = Transducer(ModelConfig(), 12).eval()
    enc, lengths = torch.randn(3, 25, model.encoder.output_dim) * 3, torch.tensor([25, 17, 6])
    free = modified_beam_search(model, enc, lengths, beam=4)
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    on_device = modified_beam_search(model, enc, lengths, beam=4)
    for a, b in zip(free, on_device):
        assert [(h.tokens, h.frames) for h in a] == [(h.tokens, h.frames) for h in b]
        # float32 matrix products over 4 slots or over the labelled ones alone round apart (by 1.2e-7 with more
        # than one thread): the same to float32's precision
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_greedy_search_finds_the_same_on_either_path(monkeypatch):
    """Reading freely (the CPU's early exits) and as on a GPU (tokens kept on the device) give one answer."""
    torch.manual_seed(1)
    model = Transducer(ModelConfig(), 12).eval()
    enc, lengths = torch.randn(4, 30, model.encoder.output_dim) * 3, torch.tensor([30, 21, 9, 1])
    free = greedy_search(model, enc, lengths, max_symbols_per_frame=3)
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    on_device = greedy_search(model, enc, lengths, max_symbols_per_frame=3)
    assert any(h.tokens for h in free)
    for a, b in zip(free, on_device):
        assert (a.tokens, a.frames) == (b.tokens, b.frames)
        assert a.score == pytest.approx(b.score, abs=1e-9)


def test_bad_input_is_still_refused_where_the_host_does_not_read(as_on_a_gpu, device_asserts):
    """The device asserts the checks instead (on the CPU the assertion fails at once; on a GPU at the next
    synchronisation), with the check's message."""
    logits, targets = torch.randn(2, 3, 3, 5), torch.tensor([[1, 2], [0, 3]])
    with pytest.raises(device_asserts, match="the blank symbol 0 appears inside the targets"):
        transducer_loss(logits, targets, torch.tensor([3, 3]), torch.tensor([2, 2]))
    with pytest.raises(device_asserts, match=r"logit_lengths exceed logits.shape\[1\]"):
        transducer_loss(logits, targets.clamp(min=1), torch.tensor([4, 3]), torch.tensor([2, 2]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("loss", ["full", "fused", "pruned"])
def test_a_models_step_on_cuda_given_the_host_lengths_never_synchronises(loss):
    """The same step on a GPU, under CUDA's sync debug mode set to fail at any synchronisation: the encoder,
    the transducer loss (Triton's lattice passes, auto), the CTC head's, and the backward."""
    torch.manual_seed(0)
    config = ModelConfig(loss=LossConfig(type=loss, ctc_weight=0.5))
    model = Transducer(config, 12).cuda()
    feats = torch.randn(3, 40, config.encoder.input_dim, device="cuda")
    feat_lens, tokens = torch.tensor([40, 31, 17], device="cuda"), torch.randint(1, 12, (3, 5), device="cuda")
    token_lens = torch.tensor([5, 2, 3], device="cuda")
    model(feats, feat_lens, tokens, token_lens, step=0, host_lengths=([40, 31, 17], [5, 2, 3]))  # builds kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        parts = model(feats, feat_lens, tokens, token_lens, step=0, host_lengths=([40, 31, 17], [5, 2, 3]))
        parts["loss"].backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(parts["loss"]) and parts["ctc"] > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("search", ["greedy", "modified beam"])
def test_a_batched_search_on_cuda_synchronises_as_often_for_8_frames_as_for_64(search):
    """CUDA's sync debug mode warns at every host-device synchronisation: as many for 64 frames as for 8."""
    import warnings

    torch.manual_seed(0)
    model = Transducer(ModelConfig(), 12).eval().cuda()
    syncs = {}
    for frames in (8, 64):
        enc = torch.randn(3, frames, model.encoder.output_dim, device="cuda") * 3
        lengths = torch.tensor([frames, frames - 2, 3], device="cuda")
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                if search == "greedy":
                    greedy_search(model, enc, lengths)
                else:
                    modified_beam_search(model, enc, lengths, beam=3)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        syncs[frames] = sum("synchroniz" in str(w.message) for w in caught)
    assert syncs[8] == syncs[64], syncs


@pytest.mark.parametrize("recipe_config", ["egs/an4/conf/transducer_conformer.yaml",
                                           "egs/speechocean762/conf/transducer.yaml", "egs/an4/conf/deploy.yaml"])
def test_a_recipe_models_training_step_reads_nothing(as_on_a_gpu, recipe_config):
    """Each encoder kind as a recipe trains it (the conformer's batch norms, the LSTMs' input norm and time
    stacking, the conv front end), in training mode, from the loss to the gradient."""
    config = from_dict(ModelConfig, read_yaml(str(ROOT / recipe_config))["model"], "model")
    torch.manual_seed(0)
    model = Transducer(config, 30).train()
    feats, feat_lens = torch.randn(3, 120, config.encoder.input_dim), torch.tensor([120, 91, 60])
    tokens, token_lens = torch.randint(1, 30, (3, 5)), torch.tensor([5, 2, 3])
    with HostReads() as counter:
        parts = model(feats, feat_lens, tokens, token_lens, step=10**4, host_lengths=([120, 91, 60], [5, 2, 3]))
        parts["loss"].backward()
    assert counter.reads == [] and torch.isfinite(parts["loss"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("recipe_config", ["egs/an4/conf/transducer_conformer.yaml",
                                           "egs/speechocean762/conf/transducer.yaml", "egs/an4/conf/deploy.yaml"])
def test_a_recipe_models_training_step_on_cuda_never_synchronises(recipe_config):
    """Each encoder kind as a recipe trains it, on a GPU under CUDA's sync debug mode set to fail at any
    synchronisation (the batch norms' masked sums included)."""
    config = from_dict(ModelConfig, read_yaml(str(ROOT / recipe_config))["model"], "model")
    torch.manual_seed(0)
    model = Transducer(config, 30).cuda().train()
    feats = torch.randn(3, 120, config.encoder.input_dim, device="cuda")
    feat_lens, tokens = torch.tensor([120, 91, 60], device="cuda"), torch.randint(1, 30, (3, 5), device="cuda")
    token_lens, host_lengths = torch.tensor([5, 2, 3], device="cuda"), ([120, 91, 60], [5, 2, 3])
    model(feats, feat_lens, tokens, token_lens, step=10**4, host_lengths=host_lengths)["loss"].backward()  # warm-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        parts = model(feats, feat_lens, tokens, token_lens, step=10**4, host_lengths=host_lengths)
        parts["loss"].backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(parts["loss"])

"""rnnt.model.masked_batch_norm.MaskedBatchNorm: in training, the batch and running statistics are those of
the valid frames alone (worked by hand, and computed in float64 on a padded batch of real LibriSpeech fbank),
the padding (any amount, zeros, 1e4 or NaN) changes neither them nor the valid outputs, comes out 0 and gets
no gradient; with no mask every frame counts, as BatchNorm1d; in evaluation it is BatchNorm1d, the per-channel
affine map of the running statistics, with or without a mask. Training reads no value on the host (on a GPU
each read stalls the step)."""

import pytest
import torch

from host_read_counter import HostReads
from rnnt import host_reads
from rnnt.model.masked_batch_norm import MaskedBatchNorm


@pytest.fixture(scope="module")
def fbanks(short_fbanks) -> list[torch.Tensor]:
    return short_fbanks


@pytest.fixture(params=["picked", "summed"])
def either_path(request, monkeypatch):
    """Training's two ways to the valid frames' statistics: picked out by the mask (the CPU's) or masked sums
    (where reading the device is not free)."""
    if request.param == "summed":
        monkeypatch.setattr(host_reads, "free", lambda device: False)
    return request.param


def padded(fbanks, frames: int, fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, frames, 80) batch with fill past each length, and the (B, frames) mask of the valid frames."""
    batch = torch.full((len(fbanks), frames, fbanks[0].shape[1]), fill)
    valid = torch.zeros(len(fbanks), frames, dtype=torch.bool)
    for b, f in enumerate(fbanks):
        batch[b, :len(f)], valid[b, :len(f)] = f, True
    return batch, valid


def affine_norm(dim: int, seed: int = 0) -> MaskedBatchNorm:
    """A MaskedBatchNorm with a weight and bias other than 1 and 0, so the affine step is checked too."""
    g = torch.Generator().manual_seed(seed)
    norm = MaskedBatchNorm(dim)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(dim, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(dim, generator=g))
    return norm


def test_two_valid_frames_and_a_padded_one_by_hand(either_path):
    # valid: (1, 10) and (3, 20): mean (2, 15), unbiased variance (2, 50), biased (1, 25); padding (100, -100)
    x = torch.tensor([[[1.0, 10.0], [3.0, 20.0], [100.0, -100.0]]])
    valid = torch.tensor([[True, True, False]])
    norm = MaskedBatchNorm(2, eps=1e-9).train()
    out = norm(x, valid)
    assert norm.running_mean.tolist() == pytest.approx([0.1 * 2, 0.1 * 15])
    assert norm.running_var.tolist() == pytest.approx([0.9 + 0.1 * 2, 0.9 + 0.1 * 50])
    assert out[0].tolist() == [pytest.approx([-1.0, -1.0]), pytest.approx([1.0, 1.0]), [0.0, 0.0]]
    assert int(norm.num_batches_tracked) == 1


def test_real_fbank_statistics_are_those_of_the_valid_frames(either_path, fbanks):
    x, valid = padded(fbanks, 100, 1e4)
    norm = affine_norm(80).train()
    out = norm(x, valid)
    frames = torch.cat(fbanks).double()  # 185 valid frames
    n = frames.shape[0]
    mean = frames.sum(0) / n
    squares = ((frames - mean) ** 2).sum(0)
    torch.testing.assert_close(norm.running_mean, (0.1 * mean).float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(norm.running_var, (0.9 + 0.1 * squares / (n - 1)).float(), rtol=1e-5, atol=1e-5)
    expected = (frames - mean) / torch.sqrt(squares / n + norm.eps) * norm.weight.double() + norm.bias.double()
    torch.testing.assert_close(out[valid].double(), expected, rtol=1e-4, atol=1e-4)
    assert torch.equal(out[~valid], torch.zeros(int((~valid).sum()), 80))


def test_running_statistics_follow_the_momentum_over_steps(either_path, fbanks):
    norm = MaskedBatchNorm(80, momentum=0.3).train()
    x, valid = padded(fbanks, 95, 0.0)
    norm(x, valid)
    norm(x[:2], valid[:2])
    first, second = torch.cat(fbanks).double(), torch.cat(fbanks[:2]).double()
    mean = 0.3 * second.mean(0) + 0.7 * (0.3 * first.mean(0))
    var = 0.3 * second.var(0) + 0.7 * (0.3 * first.var(0) + 0.7)
    torch.testing.assert_close(norm.running_mean, mean.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(norm.running_var, var.float(), rtol=1e-5, atol=1e-5)
    assert int(norm.num_batches_tracked) == 2


def test_the_padding_changes_nothing_and_gets_no_gradient(either_path, fbanks):
    results = []
    for frames, fill in ((91, 0.0), (91, 1e4), (140, float("nan")), (200, -3e4)):
        x, valid = padded(fbanks, frames, fill)
        x.requires_grad_(True)
        norm = affine_norm(80).train()
        out = norm(x, valid)
        (out * torch.linspace(-1, 1, 80)).nan_to_num().sum().backward()
        assert torch.equal(x.grad[~valid], torch.zeros(int((~valid).sum()), 80))
        assert torch.equal(out[~valid], torch.zeros(int((~valid).sum()), 80))
        results.append((out[valid].detach(), x.grad[valid], norm.running_mean, norm.running_var))
    for other in results[1:]:  # to the rounding of sums whose order the padded length changes
        for a, b in zip(results[0], other):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_without_a_mask_every_frame_counts_as_batchnorm1d(fbanks):
    x, _ = padded(fbanks, 91, 5.0)
    norm, reference = affine_norm(80).train(), torch.nn.BatchNorm1d(80).train()
    reference.load_state_dict(norm.state_dict())
    out = norm(x)
    torch.testing.assert_close(out, reference(x.transpose(1, 2)).transpose(1, 2), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(norm.running_mean, reference.running_mean, rtol=1e-6, atol=1e-5)
    assert norm.running_mean.tolist() == pytest.approx((0.1 * x.reshape(-1, 80).mean(0)).tolist(), rel=1e-5)


def test_evaluation_is_batchnorm1d_the_running_affine_map_with_or_without_a_mask(fbanks):
    norm = affine_norm(80)
    with torch.no_grad():
        norm.running_mean.copy_(torch.cat(fbanks).mean(0))
        norm.running_var.copy_(torch.cat(fbanks).var(0))
    norm.eval()
    reference = torch.nn.BatchNorm1d(80).eval()
    reference.load_state_dict(norm.state_dict())
    state = {k: v.clone() for k, v in norm.state_dict().items()}
    x, valid = padded(fbanks, 91, 1e4)
    out = norm(x, valid)
    assert torch.equal(out, norm(x))
    torch.testing.assert_close(out, reference(x.transpose(1, 2)).transpose(1, 2), rtol=1e-6, atol=1e-5)
    by_hand = (x - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps) * norm.weight + norm.bias
    torch.testing.assert_close(out, by_hand, rtol=1e-5, atol=1e-4)
    for b, f in enumerate(fbanks):  # each utterance alone is normalised alike
        torch.testing.assert_close(norm(f[None])[0], out[b, :len(f)], rtol=1e-6, atol=1e-5)
    assert all(torch.equal(v, state[k]) for k, v in norm.state_dict().items())  # evaluation updates nothing


def test_a_single_valid_frame_in_training_is_normalised_by_the_running_statistics(either_path):
    """One frame has no variance (BatchNorm refuses it in training): a batch of one short utterance is normalised
    as in evaluation, its running statistics left as they were."""
    norm = MaskedBatchNorm(3)
    norm.running_mean.copy_(torch.tensor([1.0, 2.0, 3.0]))
    norm.running_var.copy_(torch.tensor([4.0, 1.0, 0.25]))
    norm.train()
    x = torch.tensor([[[3.0, 2.0, 3.5], [9.0, 9.0, 9.0]]])
    out = norm(x, torch.tensor([[True, False]]))
    torch.testing.assert_close(out[0, 0], torch.tensor([1.0, 0.0, 1.0]), rtol=1e-4, atol=1e-4)
    assert out[0, 1].abs().sum() == 0 and norm.running_mean.tolist() == [1.0, 2.0, 3.0]
    alone = norm(x[:, :1])  # no mask, one frame
    torch.testing.assert_close(alone, out[:, :1])


def test_training_reads_nothing_on_the_host_where_reading_is_not_free(fbanks, monkeypatch):
    """Picking the valid frames out by the mask (x[valid]) read their number: a stall per layer on a GPU."""
    monkeypatch.setattr(host_reads, "free", lambda device: False)
    x, valid = padded(fbanks, 91, 1e4)
    norm = MaskedBatchNorm(80, momentum=None).train()
    with HostReads() as counter:
        norm(x.requires_grad_(True), valid).sum().backward()
        norm(x[2:, :1], valid[2:, :1])  # one frame: the running statistics
    assert counter.reads == []
    frames = torch.cat(fbanks).double()  # momentum None: the cumulative average, of one batch here
    torch.testing.assert_close(norm.running_var, frames.var(0).float(), rtol=1e-5, atol=1e-5)
    assert int(norm.num_batches_tracked) == 1

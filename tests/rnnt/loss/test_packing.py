"""rnnt.loss.packing.pack_joiner_input: rows enc[b, t] + pred[b, u] of the valid cells only, in (b, t, u)
order, checked against nested loops; each utterance's gradient summed back over u into enc and over t
into pred with zeros in the padding; a gradient only for the inputs that need one; shape errors named.
(The match with the padded joiner sum and gradcheck are in test_loss.py.)"""

import re

import pytest
import torch

from rnnt.loss.packing import pack_joiner_input


def looped(enc, pred, logit_lengths, target_lengths) -> torch.Tensor:
    return torch.stack([enc[b, t] + pred[b, u] for b in range(enc.shape[0]) for t in range(int(logit_lengths[b]))
                        for u in range(int(target_lengths[b]) + 1)])


def test_rows_are_the_valid_cells_in_b_t_u_order():
    # enc values 100 * (b + 1) + 10 * t, pred values u: each row's sum names its cell, 100*b' + 10*t + u
    enc = (100 * torch.arange(1, 3)[:, None, None] + 10 * torch.arange(4)[None, :, None]).expand(2, 4, 3).double()
    pred = torch.arange(3)[None, :, None].expand(2, 3, 3).double()
    rows = pack_joiner_input(enc, pred, torch.tensor([2, 4]), torch.tensor([2, 0]))
    assert rows.shape == (2 * 3 + 4 * 1, 3)
    assert rows[:, 0].tolist() == [100, 101, 102, 110, 111, 112, 200, 210, 220, 230]
    assert torch.equal(rows[:, 1], rows[:, 0]) and torch.equal(rows[:, 2], rows[:, 0])


def test_rows_match_nested_loops_on_ragged_lengths():
    g = torch.Generator().manual_seed(7)
    enc, pred = torch.randn(4, 9, 5, generator=g), torch.randn(4, 6, 5, generator=g)
    logit_lengths, target_lengths = torch.tensor([9, 1, 4, 7]), torch.tensor([3, 5, 0, 2])
    rows = pack_joiner_input(enc, pred, logit_lengths, target_lengths)
    assert rows.shape == (9 * 4 + 1 * 6 + 4 * 1 + 7 * 3, 5) and rows.dtype == enc.dtype
    assert torch.equal(rows, looped(enc, pred, logit_lengths, target_lengths))


def test_gradient_of_the_row_sum_counts_cells_and_leaves_padding_zero():
    """d(sum of rows)/d enc[b, t] is U_b + 1 (the cells of frame t), d/d pred[b, u] is T_b; 0 in the padding."""
    enc = torch.randn(3, 5, 2, requires_grad=True)
    pred = torch.randn(3, 4, 2, requires_grad=True)
    logit_lengths, target_lengths = torch.tensor([5, 2, 3]), torch.tensor([1, 3, 0])
    pack_joiner_input(enc, pred, logit_lengths, target_lengths).sum().backward()
    expected_enc, expected_pred = torch.zeros(3, 5, 2), torch.zeros(3, 4, 2)
    for b, (T, U) in enumerate(zip(logit_lengths.tolist(), target_lengths.tolist())):
        expected_enc[b, :T] = U + 1
        expected_pred[b, :U + 1] = T
    assert torch.equal(enc.grad, expected_enc) and torch.equal(pred.grad, expected_pred)


def test_gradient_of_weighted_rows_matches_the_loop_reference():
    g = torch.Generator().manual_seed(11)
    enc = torch.randn(3, 6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    pred = torch.randn(3, 5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    logit_lengths, target_lengths = torch.tensor([6, 3, 1]), torch.tensor([2, 4, 0])
    weight = torch.randn(6 * 3 + 3 * 5 + 1, 4, dtype=torch.float64, generator=g)
    ours = torch.autograd.grad((pack_joiner_input(enc, pred, logit_lengths, target_lengths) * weight).sum(),
                               (enc, pred))
    reference = torch.autograd.grad((looped(enc, pred, logit_lengths, target_lengths) * weight).sum(), (enc, pred))
    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-12)


def test_a_transposed_upstream_gradient_is_summed_correctly():
    """The gradient arriving through rows.t() is not contiguous: it must still be read row by row."""
    g = torch.Generator().manual_seed(3)
    enc = torch.randn(2, 4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    pred = torch.randn(2, 3, 3, dtype=torch.float64, generator=g, requires_grad=True)
    logit_lengths, target_lengths = torch.tensor([4, 2]), torch.tensor([1, 2])
    mix = torch.randn(5, 3, dtype=torch.float64, generator=g)
    ours = torch.autograd.grad((mix @ pack_joiner_input(enc, pred, logit_lengths, target_lengths).t()).square().sum(),
                               (enc, pred))
    reference = torch.autograd.grad((mix @ looped(enc, pred, logit_lengths, target_lengths).t()).square().sum(),
                                    (enc, pred))
    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-10)


def test_only_the_inputs_that_need_a_gradient_get_one():
    enc = torch.randn(2, 3, 2)
    pred = torch.randn(2, 2, 2, requires_grad=True)
    pack_joiner_input(enc, pred, torch.tensor([3, 2]), torch.tensor([1, 0])).sum().backward()
    assert enc.grad is None
    assert pred.grad.tolist() == [[[3.0, 3.0], [3.0, 3.0]], [[2.0, 2.0], [0.0, 0.0]]]


@pytest.mark.parametrize("enc_shape,pred_shape", [((3, 4), (2, 3, 4)), ((2, 3, 4), (3, 3, 4)), ((2, 3, 4), (2, 3, 5)),
                                                  ((2, 3, 4), (2, 3, 4, 1))])
def test_mismatched_shapes_are_refused_naming_both(enc_shape, pred_shape):
    with pytest.raises(ValueError, match=re.escape(f"got {tuple(enc_shape)}, {tuple(pred_shape)}")):
        pack_joiner_input(torch.zeros(enc_shape), torch.zeros(pred_shape), torch.tensor([1, 1]), torch.tensor([0, 0]))


@pytest.mark.parametrize("logit_lengths,target_lengths", [([4, 1], [0, 0]), ([3, 3], [2, 3])])
def test_lengths_past_the_tensors_are_refused(logit_lengths, target_lengths):
    enc, pred = torch.zeros(2, 3, 4), torch.zeros(2, 3, 4)  # T = 3, U + 1 = 3
    with pytest.raises(ValueError, match="lengths exceed enc or pred"):
        pack_joiner_input(enc, pred, torch.tensor(logit_lengths), torch.tensor(target_lengths))


@pytest.mark.parametrize("logit_lengths,target_lengths", [([3, 0], [2, 1]), ([3, 2], [2, -1])])
def test_empty_or_negative_lengths_are_refused_by_name(logit_lengths, target_lengths):
    enc, pred = torch.zeros(2, 3, 4), torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="logit_lengths must be >= 1 and target_lengths >= 0"):
        pack_joiner_input(enc, pred, torch.tensor(logit_lengths), torch.tensor(target_lengths))


def test_lengths_of_another_batch_or_dtype_and_inputs_of_two_dtypes_are_refused():
    """Before: one length for two utterances packed the first alone, float lengths failed inside new_empty, and a
    float64 pred was rounded to enc's float32 in silence."""
    enc, pred = torch.zeros(2, 3, 4), torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match=re.escape("expected logit_lengths and target_lengths (2,), got (1,)")):
        pack_joiner_input(enc, pred, torch.tensor([3]), torch.tensor([2]))
    with pytest.raises(TypeError, match="must be int32 or int64, got torch.float32"):
        pack_joiner_input(enc, pred, torch.tensor([3.0, 2.0]), torch.tensor([2, 1]))
    with pytest.raises(TypeError, match="enc and pred must be of one dtype, got torch.float32 and torch.float64"):
        pack_joiner_input(enc, pred.double(), torch.tensor([3, 2]), torch.tensor([2, 1]))

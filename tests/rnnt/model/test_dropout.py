"""rnnt.model.dropout: the CPU mask's rate, scale, independence and gradient; torch's dropout where it runs
instead (every recipe model's dropouts are this one: test_model.py)."""

import math

import pytest
import torch

from rnnt.model.dropout import RESOLUTION, Dropout, keep_scale_mask

COUNT = 1 << 20


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5, 0.9])
def test_the_mask_drops_at_the_rate_from_every_quarter_of_a_random_word_and_keeps_the_expectation(p):
    torch.manual_seed(0)
    dropped = round(p * RESOLUTION)
    mask = keep_scale_mask(torch.Size([COUNT // 4, 4]), dropped, torch.float32)
    rate = dropped / RESOLUTION
    assert abs(rate - p) <= 0.5 / RESOLUTION
    assert mask.unique().tolist() == [0.0, pytest.approx(RESOLUTION / (RESOLUTION - dropped), rel=1e-7)]
    bound = 6 * math.sqrt(rate * (1 - rate) / (COUNT // 4))  # six standard deviations of one column's rate
    for quarter in range(4):  # column q: the q-th 16 bits of each 64-bit draw (the last holds its zero sign bit)
        assert abs((mask[:, quarter] == 0).double().mean().item() - rate) < bound, quarter
    assert abs(mask.double().mean().item() - 1) < 6 * math.sqrt(rate / (1 - rate) / COUNT)


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_neighbouring_elements_are_dropped_independently(p):
    """Pairs of elements within one 64-bit draw (shifts 1-3) and across draws: at 0.1 and 0.25 the comparison
    reads the low bits as well, which a field shared or overlapping with its neighbour's would correlate."""
    torch.manual_seed(1)
    dropped = round(p * RESOLUTION)
    kept = keep_scale_mask(torch.Size([COUNT]), dropped, torch.float32) > 0
    keep = 1 - dropped / RESOLUTION
    for shift in (1, 2, 3, 4, 5):
        both = (kept[shift:] & kept[:-shift]).double().mean().item()
        assert abs(both - keep ** 2) < 6 * math.sqrt(keep ** 2 * (1 - keep ** 2) / COUNT), (p, shift)
    words = kept.view(-1, 4)  # all four quarters of one draw kept
    assert abs(words.all(dim=1).double().mean().item() - keep ** 4) < 6 * math.sqrt(keep ** 4 / (COUNT // 4))


def test_the_gradient_passes_where_the_output_kept_the_input_scaled_alike():
    torch.manual_seed(2)
    x = torch.randn(6, 50, 33, requires_grad=True)
    weights = torch.randn(6, 50, 33)
    y = Dropout(0.3).train()(x)
    (y * weights).sum().backward()
    scale = y.detach() / x.detach()
    assert ((scale == 0) | torch.isclose(scale, torch.tensor(1 / (1 - 0.3)), rtol=1e-4)).all()
    assert torch.allclose(x.grad, weights * scale)


def test_seeded_masks_repeat_and_the_generators_state_moves_on():
    x = torch.ones(1000)
    torch.manual_seed(3)
    first, second = Dropout(0.2)(x), Dropout(0.2)(x)
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.2)(x), first) and not torch.equal(first, second)


def test_eval_zero_rate_and_the_other_cases_are_torchs():
    x = torch.randn(4, 7)
    assert Dropout(0.5).eval()(x) is x and Dropout(0.0)(x) is x
    assert torch.equal(Dropout(1.0)(x), torch.zeros_like(x))
    assert torch.equal(Dropout(0.99999)(x), torch.zeros_like(x))  # rounds to every element dropped: torch's
    torch.manual_seed(5)
    ones = torch.ones(1_000_000)
    assert (Dropout(1e-5)(ones) == 0).sum() > 0  # rounds to none dropped: torch's, which drops a few
    y = x.clone()
    Dropout(0.5, inplace=True)(y)
    assert ((y == 0) | torch.isclose(y, 2 * x)).all() and (y == 0).any()


def test_a_bfloat16_input_keeps_its_dtype_and_torchs_rounded_scale():
    torch.manual_seed(4)
    x = torch.ones(10000, dtype=torch.bfloat16)
    y = Dropout(0.1)(x)
    assert y.dtype == torch.bfloat16
    assert set(y.unique().tolist()) == {0.0, torch.tensor(1 / 0.9, dtype=torch.bfloat16).item()}

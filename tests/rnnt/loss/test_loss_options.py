"""rnnt.loss.options: the lattice as one value. Each loss gives the same value and gradients for the
value as for the keywords it stands for (a model's LossConfig, which extends it, included); keywords
change a given value; an unknown or bad option is refused by name."""

import dataclasses

import pytest
import torch
from transducer_reference import joiner_inputs, joiner_logits

from rnnt.loss import LatticeOptions, fused_joiner_loss, prune_ranges, simple_loss, transducer_loss
from rnnt.model.transducer import LossConfig

SET = dict(one_sym_per_frame=True, fastemit_lambda=0.3, delay_penalty=0.2, self_alignment=0.1, backend="torch")


def inputs(seed=0):
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(3, 7, 4, 5, 6, seed)
    U_b = torch.minimum(U_b, T_b)  # one symbol per frame needs U_b <= T_b
    return enc, pred, weight, bias, targets, T_b, U_b


def loss_and_grads(fn):
    enc, pred, weight, bias, targets, T_b, U_b = inputs()
    loss = fn(enc, pred, weight, bias, targets, T_b, U_b)
    loss.backward()
    return [loss.detach(), enc.grad, pred.grad, weight.grad]


@pytest.mark.parametrize("options", [LatticeOptions(**SET), LossConfig(type="pruned", s_range=3, **SET)])
def test_a_value_is_the_keywords_it_holds(options):
    def full(options=None, **lattice):
        return lambda enc, pred, weight, bias, targets, T_b, U_b: transducer_loss(
            joiner_logits(enc, pred, weight, bias), targets, T_b, U_b, options=options, **lattice)

    def fused(options=None, **lattice):
        return lambda enc, pred, weight, bias, targets, T_b, U_b: fused_joiner_loss(
            enc, pred, weight, bias, targets, T_b, U_b, options=options, **lattice)

    for loss in (full, fused):
        by_keywords, by_value = loss_and_grads(loss(**SET)), loss_and_grads(loss(options))
        for a, b in zip(by_keywords, by_value):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        plain = loss_and_grads(loss())
        assert not torch.allclose(plain[0], by_value[0])  # the options change the loss


def test_keywords_change_a_given_value():
    enc, pred, weight, bias, targets, T_b, U_b = inputs()
    logits = joiner_logits(enc, pred, weight, bias).detach()
    on = LatticeOptions(**SET)
    changed = transducer_loss(logits, targets, T_b, U_b, options=on, fastemit_lambda=0.0, delay_penalty=0.0,
                              self_alignment=0.0)
    expected = transducer_loss(logits, targets, T_b, U_b, one_sym_per_frame=True)
    torch.testing.assert_close(changed, expected, rtol=0, atol=0)
    assert on == LatticeOptions(**SET)  # frozen: the given value is not changed


def test_simple_loss_and_the_band_read_the_lattice_from_the_value():
    g = torch.Generator().manual_seed(1)
    am, lm = torch.randn(2, 6, 5, generator=g), torch.randn(2, 4, 5, generator=g)
    targets, T_b, U_b = torch.tensor([[1, 2, 3], [4, 1, 0]]), torch.tensor([6, 5]), torch.tensor([3, 2])
    options = LossConfig(one_sym_per_frame=True, delay_penalty=0.5)
    by_value, (blank, label) = simple_loss(am, lm, targets, T_b, U_b, return_posteriors=True, options=options)
    by_keywords = simple_loss(am, lm, targets, T_b, U_b, one_sym_per_frame=True, delay_penalty=0.5)
    torch.testing.assert_close(by_value, by_keywords, rtol=0, atol=0)
    assert torch.equal(prune_ranges(blank, label, T_b, U_b, 2, options=options),
                       prune_ranges(blank, label, T_b, U_b, 2, one_sym_per_frame=True))
    # the fields of the exact loss alone (FastEmit, self-alignment) leave the simple loss as it is
    exact_only = dataclasses.replace(options, fastemit_lambda=0.5, self_alignment=0.5)
    torch.testing.assert_close(simple_loss(am, lm, targets, T_b, U_b, options=exact_only), by_value, rtol=0, atol=0)


def test_bad_options_are_refused_by_name():
    enc, pred, weight, bias, targets, T_b, U_b = inputs()
    logits = joiner_logits(enc, pred, weight, bias).detach()
    with pytest.raises(TypeError, match="fastemit"):
        transducer_loss(logits, targets, T_b, U_b, fastemit=0.1)
    for name, value in (("delay_penalty", -1.0), ("fastemit_lambda", float("inf")), ("self_alignment", float("nan"))):
        with pytest.raises(ValueError, match=f"loss.{name} must be a finite weight, at least 0, got"):  # (an
            transducer_loss(logits, targets, T_b, U_b, options=LatticeOptions(**{name: value}))  # infinite one
            # was taken: a NaN loss or gradient)
    with pytest.raises(ValueError, match="backend"):
        fused_joiner_loss(enc, pred, weight, bias, targets, T_b, U_b, backend="cuda")
    for name, value in (("one_sym_per_frame", "no"), ("one_sym_per_frame", 1), ("fastemit_lambda", True),
                        ("delay_penalty", "0.1")):  # "no" chose the one-symbol lattice; True, a weight of 1
        with pytest.raises(TypeError, match=f"^{name} must be "):
            transducer_loss(logits, targets, T_b, U_b, **{name: value})

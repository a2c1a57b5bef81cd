"""FastEmit and the delay penalty: every loss path (full, fused with the joiner, pruned) equals autograd
through the float64 reference loss with the label arcs changed as each regulariser says; and the delay
penalty moves the label posteriors to earlier frames."""

import pytest
import torch
from transducer_reference import joiner_inputs, joiner_logits, reference_loss

from rnnt.loss import (
    fused_joiner_loss,
    lattice_posteriors,
    prune,
    prune_ranges,
    pruned_loss,
    simple_loss,
    transducer_loss,
)
from rnnt.loss.emission_timing import delay_penalised

LAMBDA = 0.5  # far larger than training uses, so that a wrong weighting cannot hide in the tolerance
PENALTY = 0.3


def label_arcs(log_probs, targets, logit_lengths, target_lengths):
    """(B, T, U+1, V) mask of the label arc leaving every lattice node."""
    mask = torch.zeros_like(log_probs, dtype=torch.bool)
    for b in range(log_probs.shape[0]):
        for u in range(int(target_lengths[b])):
            mask[b, : int(logit_lengths[b]), u, int(targets[b, u])] = True
    return mask


def reference(logits, targets, logit_lengths, target_lengths, one_sym_per_frame, fastemit_lambda=0.0,
              delay_penalty=0.0):
    """Summed reference loss: the label arcs' log-probs weigh 1 + fastemit_lambda in the gradient (not in the
    value), and gain delay_penalty * ((T_b - 1) / 2 - t) at frame t, written out frame by frame."""
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    mask = label_arcs(log_probs, targets, logit_lengths, target_lengths)
    bonus = torch.zeros_like(log_probs)
    for b in range(log_probs.shape[0]):
        for t in range(int(logit_lengths[b])):
            bonus[b, t] = delay_penalty * ((int(logit_lengths[b]) - 1) / 2 - t)
    changed = log_probs + torch.where(mask, fastemit_lambda * (log_probs - log_probs.detach()) + bonus, 0.0)
    return reference_loss(changed, targets, logit_lengths, target_lengths, one_sym_per_frame=one_sym_per_frame,
                          from_log_softmax=True).sum()


def every_loss_path(params, targets, T_b, U_b, one_sym, **timing):
    """The full, fused and pruned losses (summed) of the same joiner, with the band covering every symbol."""
    enc, pred, weight, bias = params
    full = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym,
                           **timing)
    fused = fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym, **timing)
    _, (gamma_blank, gamma_label) = simple_loss(torch.randn(3, 6, 9, dtype=torch.float64),
                                                torch.randn(3, 5, 9, dtype=torch.float64), targets, T_b, U_b,
                                                return_posteriors=True, one_sym_per_frame=one_sym)
    ranges = prune_ranges(gamma_blank, gamma_label, T_b, U_b, s_range=5)
    enc_pruned, pred_pruned = prune(enc, pred, ranges)
    pruned = pruned_loss(torch.nn.functional.linear(torch.tanh(enc_pruned + pred_pruned), weight, bias), targets,
                         ranges, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym, **timing)
    return full, fused, pruned


def inputs(one_sym):
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(3, 6, 4, 5, 9, seed=11)
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    return (enc, pred, weight, bias), targets, T_b, U_b


@pytest.mark.parametrize("one_sym", [False, True])
def test_full_fused_and_pruned_losses_weigh_label_arcs_by_one_plus_lambda(one_sym):
    params, targets, T_b, U_b = inputs(one_sym)
    expected = torch.autograd.grad(reference(joiner_logits(*params), targets, T_b, U_b, one_sym, LAMBDA), params)
    plain = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)
    for loss in every_loss_path(params, targets, T_b, U_b, one_sym, fastemit_lambda=LAMBDA):
        torch.testing.assert_close(loss, plain)  # the value is -log P still
        for got, want in zip(torch.autograd.grad(loss, params), expected):
            torch.testing.assert_close(got, want)
    # and the weighting changes the gradient: the test would notice it missing
    unweighted = torch.autograd.grad(plain, params)
    assert not torch.allclose(unweighted[0], expected[0])


@pytest.mark.parametrize("one_sym", [False, True])
def test_full_fused_and_pruned_losses_add_the_delay_penalty_to_label_arcs(one_sym):
    params, targets, T_b, U_b = inputs(one_sym)
    want_loss = reference(joiner_logits(*params), targets, T_b, U_b, one_sym, delay_penalty=PENALTY)
    expected = torch.autograd.grad(want_loss, params)
    plain = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)
    assert not torch.allclose(plain, want_loss)  # the penalty changes the value, so a missing one shows
    for loss in every_loss_path(params, targets, T_b, U_b, one_sym, delay_penalty=PENALTY):
        torch.testing.assert_close(loss, want_loss.detach())
        for got, want in zip(torch.autograd.grad(loss, params), expected):
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("one_sym", [False, True])
def test_the_delay_penalty_moves_label_posteriors_to_earlier_frames(one_sym):
    g = torch.Generator().manual_seed(3)
    T, U = 12, 4
    blank_lp = torch.log(torch.rand(2, T, U + 1, generator=g, dtype=torch.float64))
    label_lp = torch.log(torch.rand(2, T, U + 1, generator=g, dtype=torch.float64))
    label_lp[:, :, U] = float("-inf")
    T_b, U_b = torch.tensor([T, 9]), torch.tensor([U, 3])

    def mean_label_frame(penalty):
        _, _, gamma_label = lattice_posteriors(blank_lp, delay_penalised(label_lp, T_b, penalty), T_b, U_b,
                                               one_sym)
        frames = torch.arange(T, dtype=torch.float64)[None, :, None]
        return (gamma_label * frames).sum((1, 2)) / gamma_label.sum((1, 2))

    none, some, more = mean_label_frame(0.0), mean_label_frame(0.5), mean_label_frame(2.0)
    assert (some < none - 0.1).all() and (more < some - 0.1).all(), (none, some, more)


@pytest.mark.parametrize("name", ["fastemit_lambda", "delay_penalty"])
def test_a_negative_regulariser_is_refused(name):
    from rnnt.model.transducer import LossConfig, ModelConfig, Transducer

    with pytest.raises(ValueError, match=f"{name} must be >= 0"):
        Transducer(ModelConfig(loss=LossConfig(**{name: -0.1})), 5)


@pytest.mark.parametrize("one_sym", [False, True])
def test_the_simple_loss_of_pruning_takes_the_delay_penalty_too(one_sym):
    _, targets, T_b, U_b = inputs(one_sym)
    g = torch.Generator().manual_seed(5)
    am = torch.randn(3, 6, 9, generator=g, dtype=torch.float64, requires_grad=True)
    lm = torch.randn(3, 5, 9, generator=g, dtype=torch.float64, requires_grad=True)
    want = reference(am[:, :, None] + lm[:, None], targets, T_b, U_b, one_sym, delay_penalty=PENALTY)
    got = simple_loss(am, lm, targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym, delay_penalty=PENALTY)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got, (am, lm)), torch.autograd.grad(want, (am, lm))):
        torch.testing.assert_close(a, b)

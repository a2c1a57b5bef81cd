"""FastEmit: every loss path's gradient equals autograd through the reference loss with the label arcs'
log-probabilities weighted 1 + lambda in the gradient (not in the value), the blank arcs' left alone."""

import pytest
import torch

from rnnt.loss import fused_joiner_loss, prune, prune_ranges, pruned_loss, simple_loss, transducer_loss
from transducer_reference import joiner_inputs, joiner_logits, reference_loss

LAMBDA = 0.5  # far larger than training uses, so that a wrong weighting cannot hide in the tolerance


def fastemit_reference(logits, targets, logit_lengths, target_lengths, one_sym_per_frame):
    """Summed reference loss whose gradient weighs each label arc's log-probability 1 + LAMBDA."""
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    label_arc = torch.zeros_like(log_probs, dtype=torch.bool)
    for b in range(logits.shape[0]):
        for u in range(int(target_lengths[b])):
            label_arc[b, : int(logit_lengths[b]), u, int(targets[b, u])] = True
    weighted = log_probs + LAMBDA * torch.where(label_arc, log_probs - log_probs.detach(), 0.0)
    return reference_loss(weighted, targets, logit_lengths, target_lengths, one_sym_per_frame=one_sym_per_frame,
                          from_log_softmax=True).sum()


@pytest.mark.parametrize("one_sym", [False, True])
def test_full_fused_and_pruned_losses_weigh_label_arcs_by_one_plus_lambda(one_sym):
    enc, pred, weight, bias, targets, T_b, U_b = joiner_inputs(3, 6, 4, 5, 9, seed=11)
    if one_sym:
        U_b = torch.minimum(U_b, T_b)
    params = (enc, pred, weight, bias)
    reference = fastemit_reference(joiner_logits(*params), targets, T_b, U_b, one_sym)
    expected = torch.autograd.grad(reference, params)
    plain = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)

    full = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym,
                           fastemit_lambda=LAMBDA)
    fused = fused_joiner_loss(*params, targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym,
                              fastemit_lambda=LAMBDA)
    _, (gamma_blank, gamma_label) = simple_loss(torch.randn(3, 6, 9, dtype=torch.float64),
                                                torch.randn(3, 5, 9, dtype=torch.float64), targets, T_b, U_b,
                                                return_posteriors=True, one_sym_per_frame=one_sym)
    ranges = prune_ranges(gamma_blank, gamma_label, T_b, U_b, s_range=5)  # the band covers every symbol
    enc_pruned, pred_pruned = prune(enc, pred, ranges)
    pruned = pruned_loss(torch.nn.functional.linear(torch.tanh(enc_pruned + pred_pruned), weight, bias), targets,
                         ranges, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym, fastemit_lambda=LAMBDA)
    for loss in (full, fused, pruned):
        torch.testing.assert_close(loss, plain)  # the value is -log P still
        for got, want in zip(torch.autograd.grad(loss, params), expected):
            torch.testing.assert_close(got, want)
    # and the weighting changes the gradient: the test would notice it missing
    unweighted = torch.autograd.grad(plain, params)
    assert not torch.allclose(unweighted[0], expected[0])


def test_a_negative_lambda_is_refused():
    from rnnt.model.transducer import LossConfig, ModelConfig, Transducer

    with pytest.raises(ValueError, match="fastemit_lambda must be >= 0"):
        Transducer(ModelConfig(loss=LossConfig(fastemit_lambda=-0.1)), 5)

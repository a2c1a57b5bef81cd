"""FastEmit, the delay penalty and self-alignment: every loss path (full, fused with the joiner, pruned)
equals autograd through the float64 reference loss with the label arcs changed as each regulariser says;
the delay penalty moves the label posteriors to earlier frames, and self-alignment trains the best
alignment's labels to earlier frames (the best alignment itself checked against every alignment tried)."""

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
from rnnt.loss.lattice import best_path_label_frames

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


def assert_every_loss_path_gives(want_loss, params, targets, T_b, U_b, one_sym, **timing):
    """The full, fused and pruned losses equal the reference's value and gradient w.r.t. the joiner."""
    expected = torch.autograd.grad(want_loss, params, retain_graph=True)
    for loss in every_loss_path(params, targets, T_b, U_b, one_sym, **timing):
        torch.testing.assert_close(loss, want_loss.detach())
        for got, want in zip(torch.autograd.grad(loss, params), expected):
            torch.testing.assert_close(got, want)


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
    plain = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)
    assert not torch.allclose(plain, want_loss)  # the penalty changes the value, so a missing one shows
    assert_every_loss_path_gives(want_loss, params, targets, T_b, U_b, one_sym, delay_penalty=PENALTY)


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


@pytest.mark.parametrize("name", ["fastemit_lambda", "delay_penalty", "self_alignment"])
def test_a_negative_regulariser_is_refused(name):
    from rnnt.model.transducer import LossConfig, ModelConfig, Transducer

    with pytest.raises(ValueError, match=f"{name} must be a finite weight, at least 0"):
        Transducer(ModelConfig(loss=LossConfig(**{name: -0.1})), 5)


@pytest.mark.parametrize("name", ["fastemit_lambda", "delay_penalty", "self_alignment"])
@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf")])
def test_every_loss_path_refuses_a_negative_or_nan_regulariser(name, value):
    params, targets, T_b, U_b = inputs(False)
    with pytest.raises(ValueError, match=f"{name} must be a finite weight, at least 0"):
        transducer_loss(joiner_logits(*params), targets, T_b, U_b, **{name: value})
    with pytest.raises(ValueError, match=f"{name} must be a finite weight, at least 0"):
        fused_joiner_loss(*params, targets, T_b, U_b, **{name: value})


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


def brute_force_best_frames(blank_lp, label_lp, T, U, one_sym):
    """Every alignment of one utterance scored; the label frames of the best one (None if there is none)."""
    best = (float("-inf"), None)

    def walk(t, u, score, frames):
        nonlocal best
        if (t, u) == (T, U):
            if score > best[0]:
                best = (score, frames)
            return
        if t < T:
            walk(t + 1, u, score + float(blank_lp[t, u]), frames)
            if u < U:
                walk(t + one_sym, u + 1, score + float(label_lp[t, u]), frames + [t])

    walk(0, 0, 0.0, [])
    return best[1]


@pytest.mark.parametrize("one_sym", [False, True])
def test_the_best_path_is_the_most_likely_alignment_written_out(one_sym):
    g = torch.Generator().manual_seed(7)
    T, U = 7, 4
    for _ in range(5):
        blank_lp = torch.log(torch.rand(4, T, U + 1, generator=g, dtype=torch.float64))
        label_lp = torch.log(torch.rand(4, T, U + 1, generator=g, dtype=torch.float64))
        T_b, U_b = torch.tensor([T, 5, 3, 2]), torch.tensor([U, 2, 0, 3])  # the last: one_sym has no path
        for b in range(4):
            blank_lp[b, int(T_b[b]):] = float("-inf")
            label_lp[b, int(T_b[b]):] = float("-inf")
            label_lp[b, :, int(U_b[b]):] = float("-inf")
        got = best_path_label_frames(blank_lp, label_lp, T_b, U_b, one_sym)
        for b in range(4):
            want = brute_force_best_frames(blank_lp[b], label_lp[b], int(T_b[b]), int(U_b[b]), one_sym)
            if want is None:
                assert (got[b] == -1).all()
            else:
                assert got[b].tolist() == want + [-1] * (U - len(want)), (b, got[b], want)


def self_aligned_reference(logits, targets, logit_lengths, target_lengths, one_sym, weight):
    """Summed reference loss plus weight * -log P of each label of the best alignment (found by trying every
    alignment) one frame earlier, where that frame is free (after frame 0, and one symbol per frame, after
    a label that could not move)."""
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    extra = torch.zeros((), dtype=torch.float64)
    for b in range(logits.shape[0]):
        T, U = int(logit_lengths[b]), int(target_lengths[b])
        lp = log_probs[b].detach()
        label_lp = torch.full((T, U + 1), float("-inf"), dtype=torch.float64)
        for u in range(U):
            label_lp[:, u] = lp[:T, u, int(targets[b, u])]
        frames = brute_force_best_frames(lp[:T, :, 0], label_lp, T, U, one_sym)
        for u, frame in enumerate(frames):
            if frame > (u if one_sym else 0):
                extra = extra - weight * log_probs[b, frame - 1, u, int(targets[b, u])]
    return reference_loss(log_probs, targets, logit_lengths, target_lengths, one_sym_per_frame=one_sym,
                          from_log_softmax=True).sum() + extra


@pytest.mark.parametrize("one_sym", [False, True])
def test_full_fused_and_pruned_losses_add_the_self_alignment_term(one_sym):
    params, targets, T_b, U_b = inputs(one_sym)
    want_loss = self_aligned_reference(joiner_logits(*params), targets, T_b, U_b, one_sym, LAMBDA)
    plain = transducer_loss(joiner_logits(*params), targets, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym)
    assert want_loss > plain + 0.5  # the term is there to be missed
    assert_every_loss_path_gives(want_loss, params, targets, T_b, U_b, one_sym, self_alignment=LAMBDA)


@pytest.mark.parametrize("one_sym", [False, True])
def test_self_alignment_trains_the_labels_to_earlier_frames(one_sym):
    """Free logits, whose labels start out likeliest late, trained on the loss alone and with self-alignment:
    the best alignment's labels end frames earlier with it, the transcript as likely."""
    T, U, V = 16, 4, 6
    targets, T_b, U_b = torch.tensor([[1, 2, 3, 4]]), torch.tensor([T]), torch.tensor([U])
    start = torch.randn(1, T, U + 1, V, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for u in range(U):
        start[0, 10:, u, int(targets[0, u])] += 4.0  # the labels start out likeliest late, from frame 10

    def trained(weight):
        logits = start.clone().requires_grad_(True)
        optimiser = torch.optim.Adam([logits], lr=0.05)
        for _ in range(150):
            optimiser.zero_grad()
            transducer_loss(logits, targets, T_b, U_b, one_sym_per_frame=one_sym, self_alignment=weight).backward()
            optimiser.step()
        log_probs = torch.log_softmax(logits.detach(), dim=-1)
        label_lp = log_probs[:, :, :U].gather(3, targets[:, None, :, None].expand(1, T, U, 1)).squeeze(3)
        label_lp = torch.nn.functional.pad(label_lp, (0, 1), value=float("-inf"))
        frames = best_path_label_frames(log_probs[..., 0], label_lp, T_b, U_b, one_sym)
        return frames.double().mean(), transducer_loss(logits.detach(), targets, T_b, U_b, one_sym_per_frame=one_sym)

    (plain_frame, plain_loss), (aligned_frame, aligned_loss) = trained(0.0), trained(0.5)
    assert plain_frame > 8 and aligned_frame < plain_frame - 4, (plain_frame, aligned_frame)
    assert aligned_loss < 0.5 and plain_loss < 0.5, (plain_loss, aligned_loss)


@pytest.mark.parametrize("loss_type", ["full", "fused", "pruned"])
def test_the_model_config_reaches_every_loss(loss_type):
    """Each regulariser set in a model's loss config changes its transducer loss's value or gradient."""
    from rnnt.model.transducer import LossConfig, ModelConfig, Transducer

    g = torch.Generator().manual_seed(4)
    tokens, token_lens = torch.randint(1, 7, (2, 3), generator=g), torch.tensor([3, 2])
    enc_lens = torch.tensor([8, 6])

    def loss_and_gradient(**timing):
        torch.manual_seed(0)
        model = Transducer(ModelConfig(loss=LossConfig(type=loss_type, one_sym_per_frame=True, **timing)), 7)
        enc = torch.randn(2, 8, model.encoder.output_dim, generator=torch.Generator().manual_seed(1),
                          requires_grad=True)
        loss = model.loss(enc, enc_lens, tokens, token_lens)["transducer"]
        return loss.detach(), torch.autograd.grad(loss, enc)[0]

    plain_loss, plain_grad = loss_and_gradient()
    for timing in ({"fastemit_lambda": 0.5}, {"delay_penalty": 0.3}, {"self_alignment": 0.5}):
        loss, grad = loss_and_gradient(**timing)
        assert not torch.allclose(grad, plain_grad), timing
        if "fastemit_lambda" not in timing:
            assert not torch.allclose(loss, plain_loss), timing


@pytest.mark.parametrize("one_sym", [False, True])
def test_the_pruned_loss_on_a_narrow_band_takes_self_alignment_inside_it(one_sym):
    """A band of 2 symbols a frame: the best alignment and its earlier arcs are found among the band's cells,
    and the value and the gradient agree (finite differences); the term is there to be missed."""
    _, targets, T_b, U_b = inputs(one_sym)
    g = torch.Generator().manual_seed(8)
    _, (gamma_blank, gamma_label) = simple_loss(torch.randn(3, 6, 9, generator=g, dtype=torch.float64),
                                                torch.randn(3, 5, 9, generator=g, dtype=torch.float64), targets,
                                                T_b, U_b, return_posteriors=True, one_sym_per_frame=one_sym)
    ranges = prune_ranges(gamma_blank, gamma_label, T_b, U_b, s_range=2)
    logits = torch.randn(3, 6, 2, 9, generator=g, dtype=torch.float64, requires_grad=True)

    def loss(x, weight=LAMBDA):
        return pruned_loss(x, targets, ranges, T_b, U_b, reduction="sum", one_sym_per_frame=one_sym,
                           self_alignment=weight)

    assert loss(logits) > loss(logits, 0.0) + 0.5
    assert torch.autograd.gradcheck(loss, (logits,))

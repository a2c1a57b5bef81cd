"""N-best rescoring with the CTC head: each hypothesis of a transducer search gains weight x log P_CTC(its
labels | utterance), the CTC head's probability of the whole label sequence summed over all its alignments,
and each n-best list is sorted again. The two heads share the encoder but not their errors (the transducer's
prediction network holds a label history, the CTC head none), so a sum of their scores chooses better
than either; the weight is chosen on dev with the LM's (steps/tune_lm_fusion.py)."""

from __future__ import annotations

import dataclasses
import math

import torch

from rnnt.search import Hypothesis


HELD_ALPHAS = 2**24  # PyTorch's CTC loss keeps n x T x (2U + 1) alphas: past this many, the rolling forward


def ctc_log_likelihoods(model, enc: torch.Tensor, enc_len: int, hyps: list[Hypothesis]) -> torch.Tensor:
    """(n,) log P_CTC of each hypothesis's labels given one utterance's encoder output enc (T, D); -inf where
    the labels cannot be aligned with enc_len frames (with none, every label sequence but the empty one). PyTorch's
    CTC loss computes them where its alphas take at most HELD_ALPHAS numbers (64 MiB), ctc_forward past that (an
    hour of audio: tens of GB)."""
    if enc_len == 0:
        return torch.tensor([0.0 if not hyp.tokens else -math.inf for hyp in hyps])
    with torch.no_grad():
        log_probs = torch.log_softmax(model.ctc(enc[:enc_len]).float(), dim=-1).cpu()
    n = len(hyps)
    lengths = torch.tensor([len(hyp.tokens) for hyp in hyps], dtype=torch.long)
    if n * enc_len * (2 * int(lengths.max()) + 1) > HELD_ALPHAS:
        return ctc_forward(log_probs, [hyp.tokens for hyp in hyps], model.blank)
    targets = torch.tensor([token for hyp in hyps for token in hyp.tokens], dtype=torch.long)
    # one view per hypothesis (expanded before the move to the host, it was n copies)
    nll = torch.nn.functional.ctc_loss(log_probs[:, None].expand(-1, n, -1), targets,
                                       torch.full((n,), enc_len, dtype=torch.long), lengths, blank=model.blank,
                                       reduction="none", zero_infinity=False)
    return -nll


def ctc_forward(log_probs: torch.Tensor, labels: list[list[int]], blank: int) -> torch.Tensor:
    """(n,) log P_CTC of each label sequence given log_probs (T, V), the alphas of one frame at a time: memory in
    proportion to n x labels, not x frames. A sequence's states are its labels with a blank before, between and
    after them (2U + 1); a state is reached from itself, the one before it, or a label from the label two before
    it where the two differ (the blank between them skipped)."""
    n, longest = len(labels), max(len(tokens) for tokens in labels)
    states = torch.full((n, 2 * longest + 1), blank, dtype=torch.long)
    for row, tokens in enumerate(labels):
        states[row, 1:2 * len(tokens):2] = torch.tensor(tokens, dtype=torch.long)
    states = states.to(log_probs.device)
    skips = torch.zeros_like(states, dtype=torch.bool)
    skips[:, 2:] = (states[:, 2:] != blank) & (states[:, 2:] != states[:, :-2])
    alpha = torch.full(states.shape, -math.inf, dtype=log_probs.dtype, device=log_probs.device)
    alpha[:, :2] = log_probs[0][states[:, :2]]  # the first frame: the first blank or the first label
    before = torch.full((n, 2), -math.inf, dtype=log_probs.dtype, device=log_probs.device)  # none before the first
    for t in range(1, log_probs.shape[0]):
        shifted = torch.cat([before, alpha], dim=1)
        one_back, two_back = shifted[:, 1:-1], shifted[:, :-2].masked_fill(~skips, -math.inf)
        alpha = torch.logsumexp(torch.stack([alpha, one_back, two_back]), dim=0) + log_probs[t][states]
    ends = torch.tensor([2 * len(tokens) for tokens in labels], device=log_probs.device)  # its last blank; label
    last_blank = alpha.gather(1, ends[:, None])[:, 0]
    last_label = alpha.gather(1, (ends - 1).clamp(min=0)[:, None])[:, 0].masked_fill(ends == 0, -math.inf)
    return torch.logaddexp(last_blank, last_label)


def rescored(nbests: list[list[Hypothesis]], log_likelihoods: list, weight: float) -> list[list[Hypothesis]]:
    """Each n-best with weight x its hypotheses' CTC log-likelihoods (one sequence of numbers per n-best)
    added to their scores, best first again."""
    rescored_nbests = []
    for nbest, likelihoods in zip(nbests, log_likelihoods):
        # weight 0 adds nothing: 0 x a -inf likelihood (a hypothesis the CTC head cannot give) is nan
        hyps = [dataclasses.replace(hyp, score=hyp.score + (weight * float(ll) if weight else 0.0))
                for hyp, ll in zip(nbest, likelihoods)]
        rescored_nbests.append(sorted(hyps, key=lambda hyp: hyp.score, reverse=True))
    return rescored_nbests


def check_ctc_head(model) -> None:
    if model.ctc is None:
        raise ValueError("CTC rescoring needs a CTC head; this model has none (train with loss.ctc_weight > 0)")


def ctc_rescored(model, enc: torch.Tensor, enc_lens: torch.Tensor, nbests: list[list[Hypothesis]],
                 weight: float) -> list[list[Hypothesis]]:
    """Each utterance's n-best with weight x its CTC log-likelihood added to every score, best first again
    (unchanged at weight 0)."""
    if not weight:
        return nbests
    check_ctc_head(model)
    likelihoods = [ctc_log_likelihoods(model, enc[b], int(enc_lens[b]), nbest) if nbest else []
                   for b, nbest in enumerate(nbests)]
    return rescored(nbests, likelihoods, weight)

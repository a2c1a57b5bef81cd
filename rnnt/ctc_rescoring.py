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


def ctc_log_likelihoods(model, enc: torch.Tensor, enc_len: int, hyps: list[Hypothesis]) -> torch.Tensor:
    """(n,) log P_CTC of each hypothesis's labels given one utterance's encoder output enc (T, D); -inf where
    the labels cannot be aligned with enc_len frames (with none, every label sequence but the empty one)."""
    if enc_len == 0:
        return torch.tensor([0.0 if not hyp.tokens else -math.inf for hyp in hyps])
    with torch.no_grad():
        log_probs = torch.log_softmax(model.ctc(enc[:enc_len]).float(), dim=-1)
    n = len(hyps)
    targets = torch.tensor([token for hyp in hyps for token in hyp.tokens], dtype=torch.long)
    lengths = torch.tensor([len(hyp.tokens) for hyp in hyps], dtype=torch.long)
    # to the host first, then one view per hypothesis (moved after the expansion, it was n copies)
    nll = torch.nn.functional.ctc_loss(log_probs.cpu()[:, None].expand(-1, n, -1), targets,
                                       torch.full((n,), enc_len, dtype=torch.long), lengths, blank=model.blank,
                                       reduction="none", zero_infinity=False)
    return -nll


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

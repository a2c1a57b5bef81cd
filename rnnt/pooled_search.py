"""Both heads' n-bests pooled (the search method pooled_beam_lm): a transducer with a CTC head is searched
twice with the same LM, by modified beam search (rnnt.modified_beam_search_lm) and by its CTC head's prefix
beam search (rnnt.ctc_search), and every hypothesis either found is scored again as the transducer's
log-probability of its labels, summed over every alignment of its lattice (by the loss, rnnt.loss), plus the
LM's score of them. The two searches miss different hypotheses, and each scores its own by the alignments
its beam happened to hold. The CTC head's rescoring weight is added after, as for any transducer search
(rnnt.ctc_rescoring). On speechocean762 it gives the transducer 1.7 points over modified_beam_lm at beam 16
(egs/speechocean762/RESULTS.md), on AN4 nothing; it costs both searches and a loss per utterance.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from rnnt.ctc_search import ctc_prefix_beam_search
from rnnt.lm.fusion import Fusion
from rnnt.loss import LatticeOptions
from rnnt.modified_beam_search_lm import modified_beam_search_lm
from rnnt.search import Hypothesis, remembered_scores


@torch.no_grad()
def transducer_log_likelihoods(model, enc: torch.Tensor, enc_len: int, hyps: list[Hypothesis]) -> list[float]:
    """log P(labels | utterance) of each hypothesis over all alignments of the model's lattice (one symbol
    a frame where it was trained so), from one utterance's encoder output enc (T, D); -inf where the labels
    cannot fit in enc_len frames."""
    one_sym = model.config.loss.one_sym_per_frame
    fits = [i for i, hyp in enumerate(hyps) if not one_sym or len(hyp.tokens) <= enc_len]
    out = [-math.inf] * len(hyps)
    if enc_len == 0:  # no frame, no lattice: only nothing is said
        return [0.0 if not hyp.tokens else -math.inf for hyp in hyps]
    if not fits:
        return out
    lengths = torch.tensor([len(hyps[i].tokens) for i in fits], device=enc.device)
    tokens = torch.full((len(fits), max(1, int(lengths.max()))), model.blank, dtype=torch.long, device=enc.device)
    for row, i in enumerate(fits):
        tokens[row, :len(hyps[i].tokens)] = torch.tensor(hyps[i].tokens, dtype=torch.long)
    pred_proj = model.joiner.pred_proj(model.predictor(tokens))
    enc_proj = model.joiner.enc_proj(enc[None, :enc_len]).expand(len(fits), -1, -1)
    # the joiner fused with the loss, block by block: the whole (n, T, U + 1, V) logits of an n-best took
    # gigabytes for one long utterance (4 GiB at 35 s, beam 4, 500 units); the lattice alone, no training's
    # regularisers
    host = ([enc_len] * len(fits), [len(hyps[i].tokens) for i in fits])
    nll = model.fused_loss(enc_proj, pred_proj, tokens, torch.full((len(fits),), enc_len, device=enc.device), lengths,
                           LatticeOptions(one_sym_per_frame=one_sym), reduction="none", host_lengths=host)
    for row, i in enumerate(fits):
        out[i] = -float(nll[row])
    return out


def fusion_score(fusion: Fusion, hyp: Hypothesis) -> float:
    """The score `fusion` adds along hyp's labels and at their end, ending in hyp's words where it has them
    (of homophones' paths, the best); -inf where the LM does not allow them."""
    states = {fusion.start(): 0.0}
    for token in hyp.tokens:
        after: dict = {}
        for state, score in states.items():
            for added, next_state in fusion.expansions(state, token):
                after[next_state] = max(after.get(next_state, -math.inf), score + added)
        states = after
    return max((score + added for state, score in states.items() for added, words in fusion.finish(state)
                if words is None or hyp.words is None or list(words) == list(hyp.words)), default=-math.inf)


def pooled_beam_search_lm(model, enc: torch.Tensor, enc_lens: torch.Tensor, beam: int, fusion: Fusion,
                          likelihoods: dict | None = None) -> list[list[Hypothesis]]:
    """Each utterance's pooled n-best (up to 2 x beam hypotheses), best first, each scored as log
    P_transducer(labels) + the LM's score; likelihoods (a dict for this batch) keeps the transducer's
    log-likelihoods for later searches of the same batch."""
    transducer_nbests = modified_beam_search_lm(model, enc, enc_lens, beam, fusion)
    nbests = []
    for b, transducer_nbest in enumerate(transducer_nbests):
        enc_len = int(enc_lens[b])
        pooled = {}
        for hyp in transducer_nbest + ctc_prefix_beam_search(model, enc[b], enc_len, beam, fusion):
            if math.isfinite(hyp.score):
                pooled.setdefault((tuple(hyp.tokens), tuple(hyp.words or ())), hyp)
        hyps = list(pooled.values())
        transducer = functools.partial(transducer_log_likelihoods, model, enc[b], enc_len)
        acoustic = transducer(hyps) if likelihoods is None else remembered_scores(likelihoods, b, hyps, transducer)
        scores = [score + fusion_score(fusion, hyp) for hyp, score in zip(hyps, acoustic)]
        rescored = [dataclasses.replace(hyp, score=score, state=None, pred_proj=None)
                    for hyp, score in zip(hyps, scores)]
        nbests.append(sorted(rescored, key=lambda h: -h.score) or [Hypothesis([], [], -math.inf, words=[])])
    return nbests

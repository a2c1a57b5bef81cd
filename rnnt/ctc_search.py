"""Decoding the model's CTC head: greedy (best symbol per frame, repeats merged, blanks dropped) and
prefix beam search (every alignment of a label sequence summed, Graves 2006 / Hannun 2014), optionally
with an n-gram LM over the units (shallow fusion, as DeepSpeech 2 decodes).

Results are rnnt.search.Hypothesis objects, so decode.py and the transcriber treat them like the
transducer searches'; frames are the encoder frames at which each label started, and the score is
the log-probability of the one path (greedy) or of all paths of the labels (prefix beam search).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rnnt.lm.fusion import ShallowFusion
from rnnt.search import Hypothesis


def ctc_log_probs(model, enc: torch.Tensor) -> torch.Tensor:
    if model.ctc is None:
        raise ValueError("this model has no CTC head (train it with loss.ctc_weight > 0 for CTC decoding)")
    return torch.log_softmax(model.ctc(enc).float(), dim=-1)


@torch.no_grad()
def ctc_greedy_search(model, enc: torch.Tensor, enc_lens: torch.Tensor) -> list[Hypothesis]:
    log_probs = ctc_log_probs(model, enc)
    scores, best = log_probs.max(dim=-1)
    hyps = []
    for b, length in enumerate(enc_lens.tolist()):
        path = best[b, :length].tolist()
        tokens, frames = [], []
        for t, symbol in enumerate(path):
            if symbol != model.blank and (t == 0 or symbol != path[t - 1]):
                tokens.append(symbol)
                frames.append(t)
        hyps.append(Hypothesis(tokens, frames, float(scores[b, :length].sum())))
    return hyps


def _logadd(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


def _prefix_beam_step(beams: dict, frame: torch.Tensor, t: int, beam: int, blank: int,
                      fusion: ShallowFusion | None) -> dict:
    """The prefixes after frame t (its log-probabilities), from those before it: the `beam` best."""
    ninf = -math.inf
    candidates = frame.topk(min(beam + 1, frame.shape[0])).indices.tolist()
    if blank not in candidates:
        candidates.append(blank)
    new: dict[tuple[int, ...], list] = {}

    def entry(prefix, parent, symbol=None):
        if prefix not in new:
            frames, lm_score, lm_state = parent[2], parent[3], parent[4]
            if symbol is not None:
                frames = frames + [t]
                if fusion:
                    added, lm_state = fusion.extend(lm_state, symbol)
                    lm_score += added
            new[prefix] = [ninf, ninf, frames, lm_score, lm_state]
        return new[prefix]

    for prefix, old in beams.items():
        p_blank, p_label = old[0], old[1]
        total = _logadd(p_blank, p_label)
        for symbol in candidates:
            p = float(frame[symbol])
            if symbol == blank:
                e = entry(prefix, old)
                e[0] = _logadd(e[0], total + p)
                continue
            extended = prefix + (symbol,)
            if prefix and symbol == prefix[-1]:
                e = entry(prefix, old)  # the repeat merges into the same label
                e[1] = _logadd(e[1], p_label + p)
                e = entry(extended, old, symbol)  # a new label needs a blank in between
                e[1] = _logadd(e[1], p_blank + p)
            else:
                e = entry(extended, old, symbol)
                e[1] = _logadd(e[1], total + p)
    return dict(sorted(new.items(), key=lambda item: _logadd(item[1][0], item[1][1]) + item[1][3], reverse=True)[:beam])


@torch.no_grad()
def ctc_prefix_beam_search(model, enc: torch.Tensor, enc_len: int, beam: int = 4,
                           fusion: ShallowFusion | None = None) -> list[Hypothesis]:
    """The n-best label sequences of one utterance's encoder output enc (T, D), best first.

    Each prefix keeps two log-probabilities: of the paths so far ending in a blank and ending in its
    last label; a repeated label extends the prefix only after a blank. With an n-gram LM (fusion),
    prefixes are ranked by those plus the LM's weighted score of their labels, and the n-best by that
    plus the LM's end-of-sentence score.
    """
    log_probs = ctc_log_probs(model, enc[:enc_len]).cpu()
    # prefix -> [p_blank, p_label, frames, LM score, LM state]
    beams: dict[tuple[int, ...], list] = {(): [0.0, -math.inf, [], 0.0, fusion.lm.start() if fusion else ()]}
    for t in range(enc_len):
        beams = _prefix_beam_step(beams, log_probs[t], t, beam, model.blank, fusion)
    ended = [(list(prefix), e[2], _logadd(e[0], e[1]) + e[3] + (fusion.end(e[4]) if fusion else 0.0))
             for prefix, e in beams.items()]
    return [Hypothesis(tokens, frames, score) for tokens, frames, score in sorted(ended, key=lambda h: -h[2])]

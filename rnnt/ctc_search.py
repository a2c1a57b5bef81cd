"""Decoding the model's CTC head: greedy (best symbol per frame, repeats merged, blanks dropped) and
prefix beam search (every alignment of a label sequence summed, Graves 2006 / Hannun 2014, no LM).

Results are rnnt.search.Hypothesis objects, so decode.py and the transcriber treat them like the
transducer searches'; frames are the encoder frames at which each label started, and the score is
the log-probability of the one path (greedy) or of all paths of the labels (prefix beam search).
"""

from __future__ import annotations

import math

import numpy as np
import torch

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


@torch.no_grad()
def ctc_prefix_beam_search(model, enc: torch.Tensor, enc_len: int, beam: int = 4) -> list[Hypothesis]:
    """The n-best label sequences of one utterance's encoder output enc (T, D), best first.

    Each prefix keeps two log-probabilities: of the paths so far ending in a blank and ending in its
    last label; a repeated label extends the prefix only after a blank.
    """
    log_probs = ctc_log_probs(model, enc[:enc_len]).cpu()
    blank, ninf = model.blank, -math.inf
    beams: dict[tuple[int, ...], list] = {(): [0.0, ninf, []]}  # prefix -> [p_blank, p_label, frames]
    for t in range(enc_len):
        frame = log_probs[t]
        candidates = frame.topk(min(beam + 1, frame.shape[0])).indices.tolist()
        if blank not in candidates:
            candidates.append(blank)
        new: dict[tuple[int, ...], list] = {}

        def entry(prefix, frames):
            if prefix not in new:
                new[prefix] = [ninf, ninf, frames]
            return new[prefix]

        for prefix, (p_blank, p_label, frames) in beams.items():
            total = _logadd(p_blank, p_label)
            for symbol in candidates:
                p = float(frame[symbol])
                if symbol == blank:
                    e = entry(prefix, frames)
                    e[0] = _logadd(e[0], total + p)
                    continue
                extended = prefix + (symbol,)
                if prefix and symbol == prefix[-1]:
                    e = entry(prefix, frames)  # the repeat merges into the same label
                    e[1] = _logadd(e[1], p_label + p)
                    e = entry(extended, frames + [t])  # a new label needs a blank in between
                    e[1] = _logadd(e[1], p_blank + p)
                else:
                    e = entry(extended, frames + [t])
                    e[1] = _logadd(e[1], total + p)
        beams = dict(sorted(new.items(), key=lambda item: _logadd(item[1][0], item[1][1]), reverse=True)[:beam])
    return [Hypothesis(list(prefix), frames, _logadd(p_blank, p_label))
            for prefix, (p_blank, p_label, frames) in beams.items()]

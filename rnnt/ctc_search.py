"""Decoding the model's CTC head: greedy (best symbol per frame, repeats merged, blanks dropped) and
prefix beam search (every alignment of a label sequence summed, Graves 2006 / Hannun 2014), optionally
with an n-gram LM over the units (shallow fusion, as DeepSpeech 2 decodes).

Results are rnnt.search.Hypothesis objects, so decode.py and the transcriber treat them like the
transducer searches'; frames are the encoder frames at which each label started, and the score is
the log-probability of the one path (greedy) or of all paths of the labels (prefix beam search).
"""

from __future__ import annotations

import heapq
import math

import torch

from rnnt.label_path import LabelPath
from rnnt.lm.fusion import Fusion
from rnnt.search import Hypothesis, log_add


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


def _prefix_beam_step(beams: dict, frame: torch.Tensor, t: int, beam: int, blank: int, fusion: Fusion | None) -> dict:
    """The prefixes after frame t (its log-probabilities), from those before it: the `beam` best. The symbols tried
    are the frame's beam + 1 likeliest, the blank, and each prefix's last label: a prefix whose label fell out of
    the likeliest lost the paths staying on it (and the merge of a shorter prefix into it), which a sum of every
    alignment of its labels takes."""
    candidates = frame.topk(min(beam + 1, frame.shape[0])).indices.tolist()
    for symbol in [blank, *(path.token for _, _, path, _, _ in beams.values() if path.length)]:
        if symbol not in candidates:
            candidates.append(symbol)
    candidates = list(zip(candidates, frame[candidates].tolist()))  # each symbol with its log-probability
    new: dict[tuple, list] = {}

    def add(key, path, lm_score, p_blank=-math.inf, p_label=-math.inf):
        mass = log_add(p_blank, p_label)
        if mass == -math.inf:  # no path: a repeat with no blank before it (an impossible hypothesis, scored -inf)
            return
        entry = new.get(key)
        if entry is None:
            new[key] = [p_blank, p_label, path, lm_score, mass]
            return
        entry[0], entry[1] = log_add(entry[0], p_blank), log_add(entry[1], p_label)
        if mass > entry[4]:  # the frames of the likeliest way here, not of the first one added
            entry[2], entry[4] = path, mass

    for key, (p_blank, p_label, path, lm_score, _) in beams.items():
        state = key[1]
        total = log_add(p_blank, p_label)
        allowed = fusion.allowed(state) if fusion else None
        for symbol, p in candidates:
            if symbol == blank:
                add(key, path, lm_score, p_blank=total + p)
                continue
            if path.length and symbol == path.token:
                add(key, path, lm_score, p_label=p_label + p)  # the repeat merges into the label
                p_new = p_blank + p  # a new label needs a blank in between
            else:
                p_new = total + p
            if allowed is not None and symbol not in allowed:
                continue
            longer = path.extended(symbol, t)
            for added, after in fusion.expansions(state, symbol) if fusion else [(0.0, state)]:
                add((longer, after), longer, lm_score + added, p_label=p_new)
    scored = [(log_add(p_blank, p_label) + lm_score, key) for key, (p_blank, p_label, _, lm_score, _) in new.items()]
    return {key: new[key] for _, key in heapq.nlargest(beam, scored, key=lambda item: item[0])}  # ties in order


@torch.no_grad()
def ctc_prefix_beam_search(model, enc: torch.Tensor, enc_len: int, beam: int = 4,
                           fusion: Fusion | None = None) -> list[Hypothesis]:
    """The n-best label sequences of one utterance's encoder output enc (T, D), best first.

    Each prefix keeps two log-probabilities: of the paths so far ending in a blank and ending in its
    last label; a repeated label extends the prefix only after a blank. With an LM (fusion: a
    ShallowFusion over the units, or a rnnt.lm.lexicon_search.WordLexiconFusion over words), beams are
    keyed by prefix and LM state and ranked by those plus the LM's weighted score, and the n-best by that
    plus the LM's end-of-sentence score; a word LM's hypotheses carry their words.
    """
    log_probs = ctc_log_probs(model, enc[:enc_len]).cpu()
    # (prefix, LM state) -> [p_blank, p_label, the prefix as its likeliest way's path (rnnt.label_path: its frames),
    # LM score, the likeliest way's probability]
    empty = LabelPath()
    beams: dict[tuple, list] = {(empty, fusion.start() if fusion else ()): [0.0, -math.inf, empty, 0.0, 0.0]}
    for t in range(enc_len):
        beams = _prefix_beam_step(beams, log_probs[t], t, beam, model.blank, fusion)
    ended = [(log_add(e[0], e[1]) + e[3] + added, e[2], words) for (_, state), e in beams.items()
             for added, words in (fusion.finish(state) if fusion else [(0.0, None)])]
    if not ended:  # every hypothesis ends inside a word of the lexicon
        return [Hypothesis([], [], -math.inf, words=[])]
    return [Hypothesis(path.tokens(), path.frames(), score, words=words)  # a word LM ends a prefix once per homophone
            for score, path, words in sorted(ended, key=lambda end: -end[0])[:beam]]

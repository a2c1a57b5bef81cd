"""Reference probabilities for checking the searches, computed the slow, obvious way in float64.

The lattice is the one rnnt.search documents: a standard transducer emits up to `cap` labels a frame
and a blank ends every frame; with labels_end_frame (a modified transducer searched one symbol a
frame) a frame emits either one label or a blank, and either moves to the next frame.
"""

from __future__ import annotations

import itertools
import math

import torch

from rnnt.model.joiner import JoinerConfig
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.predictor import PredictorConfig
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer

EXACT = 2000  # a beam wider than every hypothesis there is: the beam searches become exhaustive


def random_model(seed: int, kind: str, one_sym_per_frame: bool, vocab_size: int = 3,
                 ctc_weight: float = 0.0) -> Transducer:
    """A small untrained transducer (with a CTC head where ctc_weight > 0) whose outputs are peaky."""
    torch.manual_seed(seed)
    config = ModelConfig(encoder=LSTMEncoderConfig(input_dim=4, hidden=6, pre_layers=1, post_layers=0, stack_time=1),
                         predictor=PredictorConfig(kind=kind, embed_dim=6, hidden=6, layers=1, dropout=0.0),
                         joiner=JoinerConfig(hidden=8, activation="tanh"),
                         loss=LossConfig(one_sym_per_frame=one_sym_per_frame, ctc_weight=ctc_weight))
    model = Transducer(config, vocab_size).eval()
    with torch.no_grad():  # peaky distributions, so that the searches' choices matter
        model.joiner.output.weight.mul_(4.0)
    return model


def encoder_output(seed: int, model: Transducer, frames: int, batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, frames, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2


def grid(model, enc: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """log P(k | t, u) for one utterance's encoder output enc (T, D) and label sequence: (T, U+1, V)."""
    with torch.no_grad():
        pred = model.predictor(torch.tensor([tokens], dtype=torch.long))[0]
        logits = model.joiner(model.joiner.enc_proj(enc)[:, None], model.joiner.pred_proj(pred)[None])
        return torch.log_softmax(logits.double(), dim=-1)


def sequence_log_prob(model, enc: torch.Tensor, tokens: list[int], cap: int, labels_end_frame: bool) -> float:
    """log P(tokens) summed over every alignment of the lattice."""
    lp, blank, T, U = grid(model, enc, tokens), model.blank, enc.shape[0], len(tokens)
    alpha = [-math.inf] * (U + 1)  # before frame t, u labels emitted
    alpha[0] = 0.0
    for t in range(T):
        nxt = [-math.inf] * (U + 1)
        for u in range(U + 1):
            if alpha[u] == -math.inf:
                continue
            if labels_end_frame:
                nxt[u] = _logadd(nxt[u], alpha[u] + float(lp[t, u, blank]))
                if u < U:
                    nxt[u + 1] = _logadd(nxt[u + 1], alpha[u] + float(lp[t, u, tokens[u]]))
                continue
            emitted = alpha[u]
            for k in range(cap + 1):
                if u + k > U:
                    break
                nxt[u + k] = _logadd(nxt[u + k], emitted + float(lp[t, u + k, blank]))
                if u + k < U:
                    emitted += float(lp[t, u + k, tokens[u + k]])
        alpha = nxt
    return alpha[U]


def alignment_log_prob(model, enc: torch.Tensor, tokens: list[int], frames: list[int], cap: int,
                       labels_end_frame: bool) -> float:
    """log P of the one alignment that emits tokens[i] at frames[i] (blanks where the lattice needs them)."""
    lp, blank = grid(model, enc, tokens), model.blank
    score, u = 0.0, 0
    for t in range(enc.shape[0]):
        here = [i for i, f in enumerate(frames) if f == t]
        assert len(here) <= (1 if labels_end_frame else cap), "more labels in a frame than the lattice allows"
        for i in here:
            score += float(lp[t, u, tokens[i]])
            u += 1
        if not (labels_end_frame and here):
            score += float(lp[t, u, blank])
    return score


def all_sequences(labels: list[int], longest: int):
    for n in range(longest + 1):
        yield from (list(s) for s in itertools.product(labels, repeat=n))


def best_sequence(model, enc: torch.Tensor, cap: int, labels_end_frame: bool) -> tuple[list[int], float]:
    """The most probable label sequence by enumerating every one the lattice can emit."""
    labels = [k for k in range(model.vocab_size) if k != model.blank]
    longest = enc.shape[0] * (1 if labels_end_frame else cap)
    scored = ((sequence_log_prob(model, enc, s, cap, labels_end_frame), s) for s in all_sequences(labels, longest))
    score, tokens = max(scored, key=lambda pair: pair[0])
    return tokens, score


def _logadd(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))

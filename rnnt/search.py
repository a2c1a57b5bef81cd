"""Decoding a transducer: greedy search (batched), beam search (Graves 2012, per utterance) and
modified beam search (one symbol per frame, batched over utterances).

Every result carries the tokens, the encoder frame of each token and the log-probability score.
A model trained as a modified transducer (one symbol per frame) is searched as one: a label moves
it to the next frame, so greedy and beam search emit at most one symbol a frame unless told otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class Hypothesis:
    tokens: list[int]
    frames: list[int]  # the encoder frame at which each token was emitted
    score: float = 0.0
    # The prediction network's state after tokens; in beam_search, while pred_proj is None, the state
    # before the last token (the network is stepped only when the hypothesis is expanded).
    state: object = field(default=None, repr=False, compare=False)
    pred_proj: torch.Tensor | None = field(default=None, repr=False, compare=False)


def one_symbol_per_frame(model) -> bool:
    """Whether the model was trained as a modified transducer: its lattice never scores a blank after a
    label in the same frame, so searching it for a second symbol there reads untrained outputs."""
    return bool(model.config.loss.one_sym_per_frame)


def symbols_per_frame(model, requested: int | None) -> int:
    """The labels a search may emit in one frame: as requested; by default 1 for a modified transducer,
    else 3. Asking a modified transducer for more searches it as a standard one (a blank ends a frame)."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"max_symbols_per_frame must be >= 1, got {requested}")
        return requested
    return 1 if one_symbol_per_frame(model) else 3


@torch.no_grad()
def greedy_search(model, enc: torch.Tensor, enc_lens: torch.Tensor,
                  max_symbols_per_frame: int | None = None) -> list[Hypothesis]:
    """The best symbol at every step, all utterances of the batch at once; at most max_symbols_per_frame
    labels are emitted before the search moves to the next frame (default: symbols_per_frame)."""
    max_symbols_per_frame = symbols_per_frame(model, max_symbols_per_frame)
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    B, T, _ = enc.shape
    enc_proj = joiner.enc_proj(enc)
    state = predictor.initial_state(B, enc.device)
    out, state = predictor.step(torch.full((B,), blank, dtype=torch.long, device=enc.device), state)
    pred_proj = joiner.pred_proj(out)
    hyps = [Hypothesis([], []) for _ in range(B)]
    for t in range(T):
        pending = t < enc_lens.to(enc.device)  # sequences still emitting in this frame
        for _ in range(max_symbols_per_frame):
            log_probs = torch.log_softmax(joiner(enc_proj[:, t], pred_proj).float(), dim=-1)
            score, best = log_probs.max(dim=-1)
            for b in pending.nonzero()[:, 0].tolist():
                hyps[b].score += float(score[b])
            emit = (best != blank) & pending
            pending = emit  # a blank ends the frame for that sequence
            if not emit.any():
                break
            for b in emit.nonzero()[:, 0].tolist():
                hyps[b].tokens.append(int(best[b]))
                hyps[b].frames.append(t)
            new_out, new_state = predictor.step(torch.where(emit, best, torch.full_like(best, blank)), state)
            state = predictor.merge_state(new_state, state, emit)
            pred_proj = torch.where(emit[:, None], joiner.pred_proj(new_out), pred_proj)
    return hyps


def _log_add(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))


@torch.no_grad()
def beam_search(model, enc: torch.Tensor, enc_len: int, beam: int = 4,
                max_symbols_per_frame: int | None = None) -> list[Hypothesis]:
    """Graves (2012) beam search over one utterance's encoder output enc (T, D); the n-best, best first.

    Within a frame, the best unfinished hypothesis is expanded until `beam` hypotheses that end the
    frame with a blank score better than every unfinished one; hypotheses with the same labels are
    merged by adding their probabilities. For a modified transducer searched one symbol a frame (the
    default) a label ends the frame itself, as in its training lattice.
    """
    max_symbols_per_frame = symbols_per_frame(model, max_symbols_per_frame)
    label_ends_frame = one_symbol_per_frame(model) and max_symbols_per_frame == 1
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    device = enc.device
    enc_proj = joiner.enc_proj(enc[:enc_len])

    def extend(hyp: Hypothesis, token: int, t: int, score: float) -> Hypothesis:
        """hyp + token; the prediction network steps only if the new hypothesis is expanded (ready)."""
        return Hypothesis(hyp.tokens + [token], hyp.frames + [t], score, hyp.state, None)

    def ready(hyp: Hypothesis) -> Hypothesis:
        if hyp.pred_proj is None:  # state is still the one before the last token
            out, hyp.state = predictor.step(torch.tensor([hyp.tokens[-1]], device=device), hyp.state)
            hyp.pred_proj = joiner.pred_proj(out)
        return hyp

    out, state = predictor.step(torch.tensor([blank], device=device), predictor.initial_state(1, device))
    finished = [Hypothesis([], [], 0.0, state, joiner.pred_proj(out))]

    def finish(hyp: Hypothesis) -> None:
        same = next((h for h in finished if h.tokens == hyp.tokens), None)
        if same is None:
            finished.append(hyp)
        else:
            same.score = _log_add(same.score, hyp.score)

    for t in range(enc_len):
        active, finished = finished, []
        expansions = 0
        while active and expansions < beam * (max_symbols_per_frame + 1):
            best = max(active, key=lambda h: h.score)
            active.remove(best)
            ready(best)
            expansions += 1
            log_probs = torch.log_softmax(joiner(enc_proj[t:t + 1], best.pred_proj).float(), dim=-1)[0]
            finish(Hypothesis(best.tokens, best.frames, best.score + float(log_probs[blank]), best.state, best.pred_proj))
            if best.frames.count(t) < max_symbols_per_frame:
                values, tokens = log_probs.topk(min(beam + 1, log_probs.shape[0]))
                extended = [extend(best, token, t, best.score + value)
                            for value, token in zip(values.tolist(), tokens.tolist()) if token != blank]
                if label_ends_frame:  # the label moved it to the next frame
                    for hyp in extended:
                        finish(hyp)
                else:
                    active += extended
            finished = sorted(finished, key=lambda h: h.score, reverse=True)[:beam]
            if len(finished) >= beam and (not active or finished[-1].score >= max(h.score for h in active)):
                break
        finished = sorted(finished, key=lambda h: h.score, reverse=True)[:beam]
    return [ready(h) for h in finished]


@torch.no_grad()
def modified_beam_search(model, enc: torch.Tensor, enc_lens: torch.Tensor, beam: int = 4) -> list[list[Hypothesis]]:
    """Beam search with at most one symbol per frame, all utterances' hypotheses evaluated together
    every frame; the n-best of each utterance, best first. Equal label sequences are merged."""
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    B, T, _ = enc.shape
    device = enc.device
    enc_proj = joiner.enc_proj(enc)
    state = predictor.initial_state(1, device)
    out, state = predictor.step(torch.full((1,), blank, dtype=torch.long, device=device), state)
    beams = [[Hypothesis([], [], 0.0, state, joiner.pred_proj(out))] for _ in range(B)]
    lengths = enc_lens.tolist()
    for t in range(T):
        live = [b for b in range(B) if t < lengths[b]]
        if not live:
            break
        hyps = [h for b in live for h in beams[b]]
        owner = torch.tensor([b for b in live for _ in beams[b]], device=device)
        pred_proj = torch.cat([h.pred_proj for h in hyps])
        log_probs = torch.log_softmax(joiner(enc_proj[owner, t], pred_proj).float(), dim=-1)
        scores = log_probs + torch.tensor([h.score for h in hyps], device=device)[:, None]
        start = 0
        expand: list[tuple[int, Hypothesis, int, float]] = []  # (utterance, parent, token, score)
        for b in live:
            n = len(beams[b])
            values, flat = scores[start:start + n].reshape(-1).topk(min(beam, n * scores.shape[1]))
            for value, index in zip(values.tolist(), flat.tolist()):
                expand.append((b, hyps[start + index // scores.shape[1]], index % scores.shape[1], value))
            start += n
        labelled = [(i, parent, token) for i, (_, parent, token, _) in enumerate(expand) if token != blank]
        new_outputs = {}
        if labelled:
            tokens = torch.tensor([token for _, _, token in labelled], device=device)
            states = _stack_states(predictor, [parent.state for _, parent, _ in labelled])
            out, states = predictor.step(tokens, states)
            projected = joiner.pred_proj(out)
            for k, (i, _, _) in enumerate(labelled):
                new_outputs[i] = (_select_state(predictor, states, k), projected[k:k + 1])
        for b in live:
            beams[b] = []
        for i, (b, parent, token, value) in enumerate(expand):
            if token == blank:
                hyp = Hypothesis(parent.tokens, parent.frames, value, parent.state, parent.pred_proj)
            else:
                state_k, proj_k = new_outputs[i]
                hyp = Hypothesis(parent.tokens + [token], parent.frames + [t], value, state_k, proj_k)
            same = next((h for h in beams[b] if h.tokens == hyp.tokens), None)
            if same is None:
                beams[b].append(hyp)
            else:
                same.score = _log_add(same.score, hyp.score)
    return [sorted(hs, key=lambda h: h.score, reverse=True) for hs in beams]


def _stack_states(predictor, states: list):
    if predictor.config.kind == "lstm":
        return torch.cat([s[0] for s in states], dim=1), torch.cat([s[1] for s in states], dim=1)
    return torch.cat(states, dim=0)


def _select_state(predictor, states, k: int):
    return predictor.select_state(states, torch.tensor([k], device=states[0].device if isinstance(states, tuple)
                                                      else states.device))

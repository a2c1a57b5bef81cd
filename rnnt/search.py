"""Decoding a transducer: greedy search (batched)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Hypothesis:
    tokens: list[int]
    frames: list[int]  # the encoder frame at which each token was emitted
    score: float = 0.0


@torch.no_grad()
def greedy_search(model, enc: torch.Tensor, enc_lens: torch.Tensor, max_symbols_per_frame: int = 3) -> list[Hypothesis]:
    """The best symbol at every step, all utterances of the batch at once; at most max_symbols_per_frame
    labels are emitted before the search moves to the next frame."""
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    B, T, _ = enc.shape
    enc_proj = joiner.enc_proj(enc)
    state = predictor.initial_state(B, enc.device)
    out, state = predictor.step(torch.full((B,), blank, dtype=torch.long, device=enc.device), state)
    pred_proj = joiner.pred_proj(out)
    hyps = [Hypothesis([], []) for _ in range(B)]
    for t in range(T):
        active = t < enc_lens.to(enc.device)
        for _ in range(max_symbols_per_frame):
            log_probs = torch.log_softmax(joiner(enc_proj[:, t], pred_proj).float(), dim=-1)
            score, best = log_probs.max(dim=-1)
            emit = (best != blank) & active
            for b in range(B):
                if active[b]:
                    hyps[b].score += float(score[b])
            if not emit.any():
                break
            for b in emit.nonzero()[:, 0].tolist():
                hyps[b].tokens.append(int(best[b]))
                hyps[b].frames.append(t)
            new_out, new_state = predictor.step(torch.where(emit, best, torch.full_like(best, blank)), state)
            state = predictor.merge_state(new_state, state, emit)
            pred_proj = torch.where(emit[:, None], joiner.pred_proj(new_out), pred_proj)
    return hyps

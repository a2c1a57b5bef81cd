"""Modified beam search (at most one symbol per frame), every utterance's beam evaluated together each
frame, with the beams kept on the device: scores, label-sequence hashes, the prediction network's states
and, per frame, each slot's parent and symbol. The host reads them once, at the end, to spell out the
hypotheses (on a GPU nothing waits for the device between frames; rnnt.host_reads).

Each utterance has `beam` slots. A frame extends every slot by every symbol, keeps the best `beam`
extensions, and merges those with the same labels (same label count and hash: a 31-bit polynomial hash of
the sequence, collisions about one in 2^31 per pair) by adding their probabilities into the best of them;
the others' slots go dead (score -inf). An utterance past its last frame only carries its slots on.
"""

from __future__ import annotations

import torch

from rnnt import host_reads
from rnnt.search import Hypothesis, joint_log_probs

HASH_MODULUS = 2**31 - 1
HASH_BASE = 1_000_003


@torch.no_grad()
def modified_beam_search(model, enc: torch.Tensor, enc_lens: torch.Tensor, beam: int = 4) -> list[list[Hypothesis]]:
    """The n-best of each utterance of enc (B, T, D), best first; equal label sequences are merged."""
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    B, T, _ = enc.shape
    device, slots = enc.device, B * beam
    enc_proj = joiner.enc_proj(enc)
    out, state = predictor.step(torch.full((1,), blank, dtype=torch.long, device=device),
                                predictor.initial_state(1, device))
    state = predictor.select_state(state, torch.zeros(slots, dtype=torch.long, device=device))
    pred_proj = joiner.pred_proj(out).expand(slots, -1)
    scores = torch.full((B, beam), float("-inf"), dtype=torch.float64, device=device)
    scores[:, 0] = 0.0
    hashes = torch.zeros(B, beam, dtype=torch.long, device=device)
    counts = torch.zeros(B, beam, dtype=torch.long, device=device)
    lengths = enc_lens.to(device)
    carry_on = _blank_only(model.vocab_size, blank, device)  # an utterance past its last frame
    parents, symbols = [], []  # per frame, (B, beam) each: where each slot came from, and the symbol it took
    for t in range(T):
        log_probs = joint_log_probs(joiner, enc_proj[:, t].repeat_interleave(beam, dim=0), pred_proj).view(B, beam, -1)
        log_probs = torch.where((t < lengths)[:, None, None], log_probs, carry_on)
        top, index = (scores[:, :, None] + log_probs).view(B, -1).topk(beam, dim=1)
        parent, symbol = index // model.vocab_size, index % model.vocab_size
        labelled = symbol != blank
        hashes, counts = _extend(hashes.gather(1, parent), counts.gather(1, parent), symbol, labelled)
        scores = _merge_equal_labels(top, hashes, counts)
        rows = (parent + torch.arange(B, device=device)[:, None] * beam).view(-1)
        state, pred_proj = _step_labelled(model, symbol.view(-1), labelled.view(-1),
                                          predictor.select_state(state, rows), pred_proj[rows])
        parents.append(parent)
        symbols.append(symbol)
    return _spell_out(model, scores, parents, symbols, state, pred_proj)


def _blank_only(vocab: int, blank: int, device) -> torch.Tensor:
    """Log-probs that carry a slot on unchanged: 0 for the blank, -inf for every label."""
    row = torch.full((vocab,), float("-inf"), device=device)
    row[blank] = 0.0
    return row


def _extend(hashes, counts, symbol, labelled):
    """The hash and count of each slot's labels after its symbol (a blank changes neither)."""
    extended = (hashes * HASH_BASE + symbol + 1) % HASH_MODULUS
    return torch.where(labelled, extended, hashes), counts + labelled.long()


def _merge_equal_labels(scores: torch.Tensor, hashes: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Slots (B, beam) sorted best first: each group with equal labels gets the log of its summed
    probability in its first (best) slot; the rest of the group -inf."""
    finite = torch.isfinite(scores)
    same = (hashes[:, :, None] == hashes[:, None, :]) & (counts[:, :, None] == counts[:, None, :]) \
        & finite[:, :, None] & finite[:, None, :]
    first = same.int().argmax(dim=2)  # the first slot of each one's group (itself if alone)
    summed = torch.logsumexp(scores[:, None, :].masked_fill(~same, float("-inf")), dim=2)
    slot = torch.arange(scores.shape[1], device=scores.device)[None, :]
    return torch.where(finite & (first == slot), summed, float("-inf"))


def _step_labelled(model, symbols, labelled, state, pred_proj):
    """The prediction network stepped by each slot's label; slots that took a blank keep theirs. Where the
    host reads for free (the CPU), only the labelled slots are stepped; elsewhere all are, and masked."""
    predictor, joiner = model.predictor, model.joiner
    if host_reads.free(symbols.device):
        rows = labelled.nonzero()[:, 0]
        if rows.numel() == 0:
            return state, pred_proj
        out, new = predictor.step(symbols[rows], predictor.select_state(state, rows))
        position = (labelled.long().cumsum(0) - 1).clamp(min=0)  # each slot's row among the stepped ones
        projected, new = joiner.pred_proj(out)[position], predictor.select_state(new, position)
    else:
        out, new = predictor.step(torch.where(labelled, symbols, model.blank), state)
        projected = joiner.pred_proj(out)
    return predictor.merge_state(new, state, labelled), torch.where(labelled[:, None], projected, pred_proj)


def _spell_out(model, scores, parents, symbols, state, pred_proj) -> list[list[Hypothesis]]:
    """The live slots' hypotheses, best first: labels and frames traced back through the parents."""
    B, beam = scores.shape
    score_rows = scores.tolist()
    states, projections = model.predictor.unstack_states(state), pred_proj.split(1)  # (B * beam) each
    parent_frames = torch.stack(parents).tolist() if parents else []  # (T, B, beam)
    symbol_frames = torch.stack(symbols).tolist() if symbols else []
    nbests = []
    for b in range(B):
        hyps = []
        for k in sorted((k for k in range(beam) if score_rows[b][k] > float("-inf")), key=lambda k: -score_rows[b][k]):
            tokens, frames = _trace(parent_frames, symbol_frames, b, k, model.blank)
            row = b * beam + k
            hyps.append(Hypothesis(tokens, frames, score_rows[b][k], states[row], projections[row]))
        nbests.append(hyps)
    return nbests


def _trace(parent_frames, symbol_frames, b: int, k: int, blank: int) -> tuple[list[int], list[int]]:
    """The labels of utterance b's slot k and their frames, followed back from the last frame."""
    tokens, frames = [], []
    for t in range(len(parent_frames) - 1, -1, -1):
        if symbol_frames[t][b][k] != blank:
            tokens.append(symbol_frames[t][b][k])
            frames.append(t)
        k = parent_frames[t][b][k]
    return tokens[::-1], frames[::-1]

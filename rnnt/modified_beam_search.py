"""Modified beam search (at most one symbol per frame), every utterance's beam evaluated together each
frame, with the beams kept on the device: scores, label-sequence hashes, the prediction network's states
and, per frame, each slot's parent and symbol. The host reads them once, at the end, to spell out the
hypotheses (on a GPU nothing waits for the device between frames; rnnt.host_reads).

Each utterance has `beam` slots. A frame extends every slot by every symbol, merges the extensions with the
same labels, then keeps the best `beam` (as the LM-fused search, rnnt.modified_beam_search_lm, and as an
exhaustive search sums; pruned first, copies of one label sequence took slots from others and the alignments
they pushed out were lost). With one symbol a frame and the slots' label sequences distinct, a sequence S comes
at most two ways: S's slot by the blank, and the slot of S less its last label by that label, found by label
count and hash (a 31-bit polynomial hash of the sequence, collisions about one in 2^31 per pair) and the slot's
last label. The pair's summed probability goes to the likelier of the two (whose alignment the hypothesis's
frames follow), the other -inf. Slots without a live extension go dead (score -inf). An utterance past its last
frame only carries its slots on.
"""

from __future__ import annotations

import torch

from rnnt import host_reads
from rnnt.search import Hypothesis, joint_log_probs

HASH_MODULUS = 2**31 - 1
HASH_BASE = 1_000_003


@torch.no_grad()
def modified_beam_search(model, enc: torch.Tensor, enc_lens: torch.Tensor, beam: int = 4) -> list[list[Hypothesis]]:
    """The n-best of each utterance of enc (B, T, D), best first; equal label sequences are merged before pruning."""
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
    last = torch.zeros(B, beam, dtype=torch.long, device=device)  # each slot's last label (where it has one)
    lengths = enc_lens.to(device)
    carry_on = _blank_only(model.vocab_size, blank, device)  # an utterance past its last frame
    parents, symbols = [], []  # per frame, (B, beam) each: where each slot came from, and the symbol it took
    for t in range(T):
        log_probs = joint_log_probs(joiner, enc_proj[:, t].repeat_interleave(beam, dim=0), pred_proj).view(B, beam, -1)
        log_probs = torch.where((t < lengths)[:, None, None], log_probs, carry_on)
        extensions = _merge_equal_labels(scores[:, :, None] + log_probs, scores, hashes, counts, last, blank)
        scores, index = extensions.view(B, -1).topk(beam, dim=1)
        parent, symbol = index // model.vocab_size, index % model.vocab_size
        labelled = symbol != blank
        hashes, counts = _extend(hashes.gather(1, parent), counts.gather(1, parent), symbol, labelled)
        last = torch.where(labelled, symbol, last.gather(1, parent))
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


def _merge_equal_labels(extensions: torch.Tensor, scores: torch.Tensor, hashes: torch.Tensor, counts: torch.Tensor,
                        last: torch.Tensor, blank: int) -> torch.Tensor:
    """extensions (B, beam, V): each slot's score extended by each symbol; of the two extensions with one slot's
    labels (the slot by the blank, its prefix's slot by its last label), the likelier gets their summed
    probability and the other -inf. In place; returned."""
    B, beam, vocab = extensions.shape
    alive = torch.isfinite(scores)
    prefix = (counts[:, :, None] == counts[:, None, :] + 1) & alive[:, :, None] & alive[:, None, :] \
        & (hashes[:, :, None] == (hashes[:, None, :] * HASH_BASE + last[:, :, None] + 1) % HASH_MODULUS)
    has_prefix = prefix.any(dim=2)
    flat = extensions.view(B, beam * vocab)
    by_blank = (torch.arange(beam, device=flat.device) * vocab + blank).expand(B, beam)
    by_label = prefix.int().argmax(dim=2) * vocab + last  # the prefix slot's extension by the last label
    blank_score = flat.gather(1, by_blank)
    label_score = torch.where(has_prefix, flat.gather(1, by_label), float("-inf"))
    label_kept = has_prefix & (label_score > blank_score)
    dropped = torch.where(has_prefix & ~label_kept, by_label, by_blank)
    flat.scatter_(1, dropped, torch.where(has_prefix, float("-inf"), blank_score))  # (each index once: no race)
    flat.scatter_(1, torch.where(label_kept, by_label, by_blank), torch.logaddexp(blank_score, label_score))
    return extensions


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

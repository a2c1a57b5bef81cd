"""Modified beam search (at most one symbol per frame) with an n-gram LM fused in (rnnt.lm.fusion: over
the units, over words through a lexicon, with or without LODR). The networks run batched over every
hypothesis of every utterance each frame; the LM's states live on the host, so the hypotheses do too.

A frame extends each hypothesis by the blank, by each of its beam + 1 most probable labels and by the label
that makes it another hypothesis of its beam, every label scored by the acoustic model and the LM; extensions
with the same labels and LM state are merged by adding their probabilities (they are alignments of one label
sequence that the LM scored alike), and the `beam` best of each utterance go on. (Without the LM a label outside
the beam + 1 cannot make one of the `beam` best once the extensions are merged, but it can add its probability to
one: the search is then rnnt.modified_beam_search's.) A hypothesis's score is log P(its labels) over the alignments
merged into it plus the LM's score of the labels, and at the end the LM's score of ending there.
"""

from __future__ import annotations

import heapq

import torch

from rnnt.label_path import LabelPath, SearchHypothesis
from rnnt.lm.fusion import Fusion
from rnnt.search import Hypothesis, ended, hand_out_states, joint_log_probs, log_add, start_hypotheses


@torch.no_grad()
def modified_beam_search_lm(model, enc: torch.Tensor, enc_lens: torch.Tensor, beam: int,
                            fusion: Fusion) -> list[list[Hypothesis]]:
    """The n-best of each utterance of enc (B, T, D), best first, with `fusion`'s scores in theirs."""
    enc_proj = model.joiner.enc_proj(enc)
    lengths = enc_lens.tolist()
    beams = [[SearchHypothesis(LabelPath(), 0.0, h.state, h.pred_proj, fusion.start())]
             for h in start_hypotheses(model, enc.shape[0], enc.device)]
    for t in range(enc.shape[1]):
        live = [b for b, length in enumerate(lengths) if t < length]
        if not live:
            break
        hyps = [h for b in live for h in beams[b]]
        rows = torch.tensor([b for b in live for _ in beams[b]], device=enc.device)
        log_probs = joint_log_probs(model.joiner, enc_proj[rows, t], torch.cat([h.pred_proj for h in hyps]))
        blanks = log_probs[:, model.blank].tolist()
        values, tokens = (x.tolist() for x in log_probs.topk(min(beam + 1, log_probs.shape[1]), dim=1))
        _add_labels_into_others(beams, live, log_probs, values, tokens)
        first = 0
        for b in live:
            extended = _next_beam(beams[b], first, blanks, values, tokens, model.blank, t, fusion, beam)
            first += len(beams[b])
            beams[b] = extended
        _step_predictor(model, [h for b in live for h in beams[b] if h.pred_proj is None], enc.device)
    return [ended(hyps, fusion, beam) for hyps in beams]


def _add_labels_into_others(beams: list[list[SearchHypothesis]], live: list[int], log_probs: torch.Tensor,
                            values: list[list[float]], tokens: list[list[int]]) -> None:
    """Adds to each row's labels (tokens, and their log-probabilities in values) the label, where one is not
    among them, that extends its hypothesis into another of its beam (whose prefix it is; homophones of a word LM
    share a path: each of their rows)."""
    pairs, first = set(), 0
    for b in live:
        rows_of: dict[LabelPath, list[int]] = {}
        for k, hyp in enumerate(beams[b]):
            rows_of.setdefault(hyp.path, []).append(first + k)
        pairs |= {(row, hyp.path.token) for hyp in beams[b] for row in rows_of.get(hyp.path.parent, ())}
        first += len(beams[b])
    pairs = sorted((row, label) for row, label in pairs if label not in tokens[row])
    if pairs:
        rows, labels = zip(*pairs)
        for row, label, value in zip(rows, labels, log_probs[list(rows), list(labels)].tolist()):
            tokens[row].append(label)
            values[row].append(value)


def _next_beam(hyps: list[SearchHypothesis], first: int, blanks: list[float], values: list[list[float]],
               tokens: list[list[int]], blank: int, t: int, fusion: Fusion, beam: int) -> list[SearchHypothesis]:
    """The `beam` best extensions at frame t of one utterance's hypotheses (rows first, first + 1, ... of
    the frame's log-probabilities): each by the blank and by each of its labels in tokens, scored by the
    model (values) and the LM (a word LM may allow none of a label's extensions, or several: homophones).
    Extensions are merged by key (SearchHypothesis.key) as HypothesisMap merges them, the likeliest one's
    alignment kept, but as plain entries: only the survivors become hypotheses (the prediction network is stepped
    later)."""
    merged: dict[tuple, list] = {}  # key -> [summed score, the likeliest's score, the hypothesis it extended, its
    # path or None (a blank)]: the frames and the posteriors read at them follow the likeliest alignment
    for k, hyp in enumerate(hyps):
        row = first + k
        allowed = fusion.allowed(hyp.lm_state)
        candidates = [(hyp.score + blanks[row], None, hyp.lm_state)]
        for value, token in zip(values[row], tokens[row]):
            if token != blank and (allowed is None or token in allowed):
                path = hyp.path.extended(token, t)
                candidates += [(hyp.score + value + added, path, lm_state)
                               for added, lm_state in fusion.expansions(hyp.lm_state, token)]
        for score, path, lm_state in candidates:
            key = (hyp.path if path is None else path, lm_state)
            same = merged.get(key)
            if same is None:
                merged[key] = [score, score, hyp, path]
            else:
                same[0] = log_add(same[0], score)
                if score > same[1]:
                    same[1:] = score, hyp, path
    best = heapq.nlargest(beam, merged.items(), key=lambda item: item[1][0])  # as sorted()[:beam]: ties in order
    return [hyp.with_score(score) if path is None else hyp.extended(path, score, lm_state)
            for (_, lm_state), (score, _, hyp, path) in best]


def _step_predictor(model, hyps: list[SearchHypothesis], device: torch.device) -> None:
    """The prediction network stepped by each hypothesis's last label, all at once; each gets its state
    after the label and its projected output."""
    if not hyps:
        return
    predictor = model.predictor
    last = torch.tensor([h.path.token for h in hyps], device=device)
    out, state = predictor.step(last, predictor.stack_states([h.state for h in hyps]))
    hand_out_states(hyps, predictor, state, model.joiner.pred_proj(out))


"""Decoding a transducer: greedy search (batched) and beam search (Graves 2012, per utterance); modified
beam search (one symbol per frame, batched over utterances) is rnnt.modified_beam_search.

Every result carries the tokens, the encoder frame of each token and the log-probability score of
the alignments the search found for those tokens (a single one for greedy search, several merged for
the beam searches), all in one lattice:
  - a standard transducer emits up to max_symbols_per_frame labels in a frame, and a blank ends the
    frame; a search that reaches the cap ends the frame with that blank and counts its probability;
  - a modified transducer (trained one symbol per frame) searched one symbol a frame: a label moves to
    the next frame itself, as in its training lattice. Asked for more, it is searched as a standard one.
So the score of any hypothesis is at most log P(tokens) summed over every alignment in that lattice.
Modified beam search (rnnt.modified_beam_search) on a standard transducer is the exception: it moves a
label to the next frame as icefall's does, without the blank that ends the frame in that model's lattice,
so its scores there are above the lattice's (its ranking is what decoding uses; greedy and beam search
score the lattice).
"""

from __future__ import annotations

import array
import hashlib
import math
from dataclasses import dataclass, field

import torch

from rnnt import host_reads
from rnnt.label_path import LabelPath, SearchHypothesis


@dataclass
class Hypothesis:
    tokens: list[int]
    frames: list[int]  # the encoder frame at which each token was emitted
    score: float = 0.0
    # The prediction network's state after tokens and its projected output (greedy search resumes a stream from
    # them); the host-side searches' hypotheses are rnnt.label_path.SearchHypothesis until they end.
    state: object = field(default=None, repr=False, compare=False)
    pred_proj: torch.Tensor | None = field(default=None, repr=False, compare=False)
    words: list[str] | None = None  # a word LM's words (rnnt.lm.lexicon_search); else the tokens spell the text
    # each token's posterior where it was emitted (rnnt.confidence; decoding sets them on the best hypothesis)
    unit_posteriors: list[float] | None = field(default=None, repr=False, compare=False)


LN2 = math.log(2.0)


def log_add(a: float, b: float) -> float:
    """ln(e^a + e^b) of two floats, as numpy.logaddexp computes it, without a call into numpy (the
    host-side searches merge hypotheses millions of times)."""
    if a == b:
        return a + LN2  # also -inf and -inf
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


def remembered_scores(memo: dict, where, hyps: list[Hypothesis], compute) -> list[float]:
    """A score of each hypothesis's labels at `where` (an utterance), computing (compute(hyps) -> floats)
    only for labels not in memo, each once (homophones share their labels); memo keeps them by (where, a 128-bit
    digest of the labels) for later searches of the same utterance (a tuple of 150 labels is 1.2 kB, the digest
    49 bytes: a tuning grid's memos reached gigabytes on a large dev set)."""
    keys = [(where, labels_digest(h.tokens)) for h in hyps]
    missing = {key: h for key, h in zip(keys, hyps) if key not in memo}
    for key, value in zip(missing, compute(list(missing.values())) if missing else []):
        memo[key] = value
    return [memo[key] for key in keys]


def labels_digest(tokens: list[int]) -> bytes:
    return hashlib.blake2b(array.array("q", tokens).tobytes(), digest_size=16).digest()


class HypothesisMap(dict):
    """Search hypotheses (rnnt.label_path) by their key: adding one whose key is there already adds its
    probability to theirs (the two are different alignments of the same labels; with the same LM state, the LM
    scored them alike), and the likelier alignment is kept (its frames, and the posteriors read at them)."""

    def add(self, hyp: SearchHypothesis, key=None) -> None:
        key = hyp.key if key is None else key
        same = self.get(key)
        if same is None:
            self[key] = hyp
        elif hyp.score > same.score:
            self[key] = hyp.with_score(log_add(same.score, hyp.score))
        else:
            same.score = log_add(same.score, hyp.score)

    def best(self, n: int) -> list[SearchHypothesis]:
        return sorted(self.values(), key=lambda h: h.score, reverse=True)[:n]


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


def label_ends_frame(model, max_symbols_per_frame: int) -> bool:
    """A modified transducer searched one symbol a frame: a label moves to the next frame, no blank."""
    return one_symbol_per_frame(model) and max_symbols_per_frame == 1


def joint_log_probs(joiner, enc_proj: torch.Tensor, pred_proj: torch.Tensor) -> torch.Tensor:
    """The joiner's log-probabilities over the units, in float32, for projected encoder and predictor outputs."""
    return torch.log_softmax(joiner(enc_proj, pred_proj).float(), dim=-1)


@torch.no_grad()
def start_hypotheses(model, batch: int, device: torch.device | str = "cpu") -> list[Hypothesis]:
    """Empty hypotheses, each with the prediction network's state and projected output after the start
    symbol: what greedy_search starts from, or resumes a stream from."""
    state = model.predictor.initial_state(batch, device)
    out, state = model.predictor.step(torch.full((batch,), model.blank, dtype=torch.long, device=device), state)
    hyps = [Hypothesis([], []) for _ in range(batch)]
    hand_out_states(hyps, model.predictor, state, model.joiner.pred_proj(out))
    return hyps


def hand_out_states(hyps: list[Hypothesis], predictor, state, pred_proj: torch.Tensor) -> None:
    """Each hypothesis gets its row of a batch's prediction-network state and projected output (views)."""
    for hyp, hyp_state, projected in zip(hyps, predictor.unstack_states(state), pred_proj.split(1)):
        hyp.state, hyp.pred_proj = hyp_state, projected


@torch.no_grad()
def greedy_search(model, enc: torch.Tensor, enc_lens: torch.Tensor, max_symbols_per_frame: int | None = None,
                  resume: list[Hypothesis] | None = None, frame_offset: int = 0) -> list[Hypothesis]:
    """The best symbol at every step, all utterances of the batch at once; at most max_symbols_per_frame
    labels are emitted before the search moves to the next frame (default: symbols_per_frame).

    resume: the hypotheses the previous frames of these sequences left (a stream decoded chunk by chunk,
    frame_offset frames so far); they go on as if the frames had come at once, their token and frame lists
    extended in place and shared with the returned hypotheses (copied, a stream's chunk cost grew with its
    transcript): resume each once, from what the last search returned. Every returned hypothesis keeps its
    prediction network state, so it can be resumed in turn."""
    max_symbols_per_frame = symbols_per_frame(model, max_symbols_per_frame)
    charge_blank_at_cap = not label_ends_frame(model, max_symbols_per_frame)
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    B, T, _ = enc.shape
    enc_proj = joiner.enc_proj(enc)
    start = resume or start_hypotheses(model, B, enc.device)
    state = predictor.stack_states([h.state for h in start])
    pred_proj = torch.cat([h.pred_proj for h in start])
    lengths = enc_lens.to(enc.device)
    scores = torch.tensor([h.score for h in start], dtype=torch.float64, device=enc.device)
    read_freely = host_reads.free(enc.device)  # else tokens and scores stay on the device until the end
    emissions = []  # (frame, best symbol (B,), emitted (B,)) of every symbol step
    for t in range(T):
        pending = t < lengths  # sequences still emitting in this frame
        for _ in range(max_symbols_per_frame):
            score, best = joint_log_probs(joiner, enc_proj[:, t], pred_proj).max(dim=-1)
            scores += torch.where(pending, score.double(), 0.0)
            emit = (best != blank) & pending
            pending = emit  # a blank ends the frame for that sequence
            if read_freely and not emit.any():
                break
            emissions.append((frame_offset + t, best, emit, score))
            new_out, new_state = predictor.step(torch.where(emit, best, torch.full_like(best, blank)), state)
            state = predictor.merge_state(new_state, state, emit)
            pred_proj = torch.where(emit[:, None], joiner.pred_proj(new_out), pred_proj)
        if charge_blank_at_cap and (not read_freely or pending.any()):  # the cap ends these frames with a blank
            blank_scores = joint_log_probs(joiner, enc_proj[:, t], pred_proj)[:, blank]
            scores += torch.where(pending, blank_scores.double(), 0.0)
    hyps = [Hypothesis(h.tokens, h.frames, score, unit_posteriors=h.unit_posteriors if h.unit_posteriors is not None
                       else []) for h, score in zip(start, scores.tolist())]
    _append_emissions(hyps, emissions)
    hand_out_states(hyps, predictor, state, pred_proj)
    return hyps


def _append_emissions(hyps: list[Hypothesis], emissions: list) -> None:
    """Adds to each hypothesis the symbols emitted for it, their frames and their posteriors (rnnt.confidence):
    one read of the device."""
    if not emissions:
        return
    # (3, B, steps): symbols (exact in float64), whether emitted, posteriors
    symbols, emitted, posteriors = torch.stack([torch.stack([best.double(), emit.double(), score.double().exp()])
                                                for _, best, emit, score in emissions], dim=2).tolist()
    for hyp, symbols_b, emitted_b, posteriors_b in zip(hyps, symbols, emitted, posteriors):
        for (frame, _, _, _), symbol, emit, posterior in zip(emissions, symbols_b, emitted_b, posteriors_b):
            if emit:
                hyp.tokens.append(int(symbol))
                hyp.frames.append(frame)
                hyp.unit_posteriors.append(posterior)


@torch.no_grad()
def beam_search(model, enc: torch.Tensor, enc_len: int, beam: int = 4, max_symbols_per_frame: int | None = None,
                fusion=None) -> list[Hypothesis]:
    """Graves (2012) beam search over one utterance's encoder output enc (T, D); the n-best, best first.

    Within a frame, the best unfinished hypothesis is expanded until `beam` hypotheses that end the frame
    score better than every unfinished one, or after beam * (cap + 1) expansions (a bound on the work, which
    may leave a better one unexpanded). Equal labels merge, adding their probabilities: finished hypotheses
    by labels, unfinished ones by labels and labels emitted in this frame (the cap holds for each alignment),
    and those left unexpanded at the frame's end into finished ones.

    fusion: an n-gram LM (rnnt.lm.fusion: over the units, or over words through a lexicon) fused into the
    scores of every label and of each hypothesis's end; hypotheses are then kept apart by LM state too.
    """
    max_symbols_per_frame = symbols_per_frame(model, max_symbols_per_frame)
    labels_end_frames = label_ends_frame(model, max_symbols_per_frame)
    joiner, predictor, blank = model.joiner, model.predictor, model.blank
    device = enc.device
    enc_proj = joiner.enc_proj(enc[:enc_len])

    def ready(hyp: SearchHypothesis) -> SearchHypothesis:
        if hyp.pred_proj is None and hyp.path.length:  # state is still the one before the last label
            out, hyp.state = predictor.step(torch.tensor([hyp.path.token], device=device), hyp.state)
            hyp.pred_proj = joiner.pred_proj(out)
        return hyp

    def frame_log_probs(hyp: SearchHypothesis, t: int) -> torch.Tensor:
        return joint_log_probs(joiner, enc_proj[t:t + 1], ready(hyp).pred_proj)[0]

    out, state = predictor.step(torch.tensor([blank], device=device), predictor.initial_state(1, device))
    empty = SearchHypothesis(LabelPath(), 0.0, state, joiner.pred_proj(out), fusion.start() if fusion else None)
    finished = HypothesisMap({empty.key: empty})
    for t in range(enc_len):
        finished = _beam_frame(finished, lambda hyp: frame_log_probs(hyp, t), t, beam, max_symbols_per_frame,
                               labels_end_frames, blank, fusion)
    return ended(finished.values(), fusion, beam, ready)


def _beam_frame(finished: HypothesisMap, log_probs_of, t: int, beam: int, cap: int, labels_end_frames: bool,
                blank: int, fusion) -> HypothesisMap:
    """The hypotheses that end frame t, from those that ended frame t - 1 (log_probs_of(hyp): the frame's output
    distribution after hyp's labels); beam_search says how."""
    active = HypothesisMap(((h.key, 0), h) for h in finished.values())  # (key, labels emitted in frame t)
    finished = HypothesisMap()
    blank_of = {}  # key -> the frame's blank log-probability after its labels (they alone decide it)
    expansions = 0
    while active and expansions < beam * (cap + 1):
        (_, emitted), best = max(active.items(), key=lambda item: item[1].score)
        del active[best.key, emitted]
        expansions += 1
        log_probs = log_probs_of(best)
        blank_of[best.key] = float(log_probs[blank])
        finished.add(best.with_score(best.score + blank_of[best.key]))
        if emitted < cap:
            values, tokens = (x.tolist() for x in log_probs.topk(min(beam + 1, log_probs.shape[0])))
            into = {h.path.token for h in (*active.values(), *finished.values()) if h.path.parent == best.path}
            for token in sorted(into - set(tokens)):  # the label into another of the frame's (Graves's prefix
                tokens.append(token)  # sum), where it is not among the likeliest (modified_beam_search_lm's too)
                values.append(float(log_probs[token]))
            for extended in _with_label(best, values, tokens, blank, t, fusion):
                if labels_end_frames:
                    finished.add(extended)
                else:
                    active.add(extended, (extended.key, emitted + 1))
        finished = HypothesisMap((h.key, h) for h in finished.best(beam))
        if len(finished) >= beam and (not active or min(h.score for h in finished.values())
                                      >= max(h.score for h in active.values())):
            break
    for (key, _), hyp in active.items():  # alignments left unexpanded, of labels the beam holds: their blank
        if key in finished:  # ending the frame is probability of those labels (it was lost, 0.22 nats a case)
            blank_log_prob = blank_of[key] if key in blank_of else float(log_probs_of(hyp)[blank])
            finished.add(hyp.with_score(hyp.score + blank_log_prob))
    return finished


def _with_label(hyp: SearchHypothesis, values: list[float], tokens: list[int], blank: int, t: int, fusion):
    """hyp extended by each label of tokens at frame t (log-probabilities values), with the LM's score where
    fused (a word LM may allow none, or lead to several words); the prediction network is not stepped."""
    allowed = fusion.allowed(hyp.lm_state) if fusion else None
    for value, token in zip(values, tokens):
        if token == blank or (allowed is not None and token not in allowed):
            continue
        path = hyp.path.extended(token, t)
        for added, lm_state in fusion.expansions(hyp.lm_state, token) if fusion else [(0.0, None)]:
            yield hyp.extended(path, hyp.score + value + added, lm_state)


def ended(hyps, fusion, n: int, ready=lambda hyp: hyp) -> list[Hypothesis]:
    """The n best of the search hypotheses at the end of the utterance, as hypotheses, best first (ready(hyp):
    hyp with the prediction network's state after its labels): with an LM, each with the score of its end (and
    a word LM's words), those that end inside a word dropped; if none is left, one empty hypothesis scored
    -inf."""
    ends = [(h, 0.0, None) for h in hyps] if fusion is None else \
        [(h, added, words) for h in hyps for added, words in fusion.finish(h.lm_state)]
    done = []
    for hyp, added, words in sorted(ends, key=lambda end: -(end[0].score + end[1]))[:n]:
        hyp = ready(hyp)
        done.append(Hypothesis(hyp.path.tokens(), hyp.path.frames(), hyp.score + added, hyp.state, hyp.pred_proj,
                               words))
    return done or ([] if fusion is None else [Hypothesis([], [], float("-inf"), words=[])])

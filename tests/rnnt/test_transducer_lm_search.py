"""The transducer searches with an n-gram LM fused in (beam_lm, modified_beam_lm and their LODR forms)
against exhaustive enumeration on random small models: over the units, over words through a lexicon
(homophones kept apart), and with a low-order LM subtracted."""

import itertools
import math

import pytest
import torch

from rnnt.lm.fusion import LN10, LowOrderSubtraction, NgramScorer, ShallowFusion
from rnnt.lm.kneser_ney import BOS, EOS, estimate
from rnnt.lm.lexicon_search import LexiconTree, WordLexiconFusion
from rnnt.modified_beam_search import modified_beam_search
from rnnt.modified_beam_search_lm import modified_beam_search_lm
from rnnt.search import beam_search, label_ends_frame, symbols_per_frame
from search_reference import EXACT, all_sequences, encoder_output, random_model, sequence_log_prob

UNIT_SENTENCES = [["a", "b", "b"], ["b", "a"], ["a", "a", "b", "b"]]


def unit_lm(order: int) -> NgramScorer:
    return NgramScorer(estimate(UNIT_SENTENCES, order, ["a", "b"]), dict(enumerate(["<blank>", "a", "b"])), "test")


def lm_log_prob(lm: NgramScorer, words: list[str]) -> float:
    """ln P(words </s>) under lm, the obvious way."""
    history, total = (BOS,), 0.0
    for word in words + [EOS]:
        total += lm.log10_prob(history[1 - lm.order:] if lm.order > 1 else (), word) * LN10
        history = history + (word,)
    return total


def searches(model, enc, frames: int, fusion):
    """Every LM-fused search the lattice of the model allows, exhaustive: (name, n-best, cap, ends)."""
    cap = symbols_per_frame(model, None if model.config.loss.one_sym_per_frame else 2)
    ends = label_ends_frame(model, cap)
    found = [("beam", beam_search(model, enc, frames, EXACT, cap, fusion), cap, ends)]
    if ends:  # the modified search walks the one-symbol lattice
        found.append(("modified_beam", modified_beam_search_lm(model, enc[None], torch.tensor([frames]), EXACT,
                                                               fusion)[0], cap, ends))
    return found


CASES = [(seed, kind, one_sym) for seed in range(2) for kind in ("lstm", "stateless") for one_sym in (False, True)]


@pytest.mark.parametrize("seed,kind,one_sym", CASES)
def test_unit_lm_fusion_finds_the_best_fused_score(seed, kind, one_sym):
    model = random_model(seed, kind, one_sym)
    frames = 3 if not one_sym else 5
    enc = encoder_output(seed, model, frames)[0]
    lm = unit_lm(3)
    fusion = ShallowFusion(lm, weight=0.8, length_bonus=0.4)
    for name, nbest, cap, ends in searches(model, enc, frames, fusion):
        def fused(tokens):
            return (sequence_log_prob(model, enc, tokens, cap, ends) + 0.8 * lm_log_prob(lm, ["_ab"[t] for t in tokens])
                    + 0.4 * len(tokens))

        best = max(all_sequences([1, 2], frames * (1 if ends else cap)), key=fused)
        assert nbest[0].tokens == best, name
        assert all(h.score == pytest.approx(fused(h.tokens), abs=1e-4) for h in nbest[:20]), name
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)


@pytest.mark.parametrize("seed,kind,one_sym", CASES)
def test_lodr_subtracts_the_low_order_lm_from_the_fused_score(seed, kind, one_sym):
    model = random_model(seed, kind, one_sym)
    frames = 3 if not one_sym else 4
    enc = encoder_output(seed, model, frames)[0]
    lm, low = unit_lm(3), unit_lm(2)
    fusion = LowOrderSubtraction(ShallowFusion(lm, 0.9, 0.5), ShallowFusion(low, 0.3))
    for name, nbest, cap, ends in searches(model, enc, frames, fusion):
        def fused(tokens):
            units = ["_ab"[t] for t in tokens]
            return (sequence_log_prob(model, enc, tokens, cap, ends) + 0.9 * lm_log_prob(lm, units)
                    - 0.3 * lm_log_prob(low, units) + 0.5 * len(tokens))

        best = max(all_sequences([1, 2], frames * (1 if ends else cap)), key=fused)
        assert nbest[0].tokens == best and nbest[0].score == pytest.approx(fused(best), abs=1e-4), name
        assert all(h.score == pytest.approx(fused(h.tokens), abs=1e-4) for h in nbest[:20]), name


A, B, SEP = 1, 2, 3  # units of a 4-unit model: <blank> 0, two "phones" and the word boundary
SPELLINGS = {"AB": [(A, B)], "BA": [(B, A)], "A": [(A,)], "TO": [(B,)], "TWO": [(B,)]}  # TO and TWO sound alike
SENTENCES = [["A", "TO", "AB"], ["TWO", "BA"], ["A", "TWO"], ["BA", "TO", "A"], ["AB"]]


def word_sequences(longest: int):
    """Every word sequence of up to three words whose units (with boundaries) number at most `longest`."""
    for n in range(4):
        for words in itertools.product(SPELLINGS, repeat=n):
            units = list(itertools.chain(*[[SEP] * (i > 0) + list(SPELLINGS[w][0]) for i, w in enumerate(words)]))
            if len(units) <= longest:
                yield list(words), units


@pytest.mark.parametrize("seed,kind", [(seed, kind) for seed in range(3) for kind in ("lstm", "stateless")])
def test_a_word_lm_through_the_lexicon_finds_the_best_word_sequence(seed, kind):
    model = random_model(seed, kind, one_sym_per_frame=True, vocab_size=4)
    frames = 5
    enc = encoder_output(seed, model, frames)[0]
    lm = NgramScorer(estimate(SENTENCES, 3, list(SPELLINGS)), {}, "test")
    fusion = WordLexiconFusion(lm, LexiconTree(SPELLINGS, lambda w: lm.log10_prob((), w)), SEP, 0.7, 0.3)
    for name, nbest, cap, ends in searches(model, enc, frames, fusion):
        scores = {tuple(words): sequence_log_prob(model, enc, units, cap, ends) + 0.7 * lm_log_prob(lm, words)
                  + 0.3 * len(words) for words, units in word_sequences(frames)}
        best = max(scores, key=scores.get)
        assert tuple(nbest[0].words) == best and nbest[0].score == pytest.approx(scores[best], abs=1e-4), name
        assert all(h.score == pytest.approx(scores[tuple(h.words)], abs=1e-4) for h in nbest[:20]), name
        # homophones are hypotheses of their own, each scored by its words
        assert any(len({tuple(h.words) for h in nbest if h.tokens == hyp.tokens}) >= 2 for hyp in nbest[:20]), name


def test_a_word_lm_that_allows_nothing_gives_one_empty_hypothesis_scored_minus_infinity():
    model = random_model(0, "stateless", one_sym_per_frame=True, vocab_size=4)
    enc = encoder_output(0, model, 1)[0]
    with torch.no_grad():
        model.joiner.output.bias.copy_(torch.tensor([-30.0, 30.0, -30.0, -30.0]))  # a label, A, every frame
    lm = NgramScorer(estimate([["AB"]], 2, ["AB"]), {}, "test")
    fusion = WordLexiconFusion(lm, LexiconTree({"AB": [(A, B)]}, lambda w: lm.log10_prob((), w)), SEP, 1.0)
    for nbest in (beam_search(model, enc, 1, 1, None, fusion),
                  modified_beam_search_lm(model, enc[None], torch.tensor([1]), 1, fusion)[0]):
        assert nbest[0].tokens == [] and nbest[0].words == [] and nbest[0].score == -math.inf


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_with_a_weightless_lm_the_fused_modified_search_is_the_plain_one(kind):
    """Weight and bonus 0 over the units: the LM adds nothing, so the search with its beams on the host finds
    what the device-resident one finds (labels, scores and frames), with beams wide enough for every hypothesis
    and at narrow beams too (the device search pruned before merging equal label sequences: a third of these
    n-bests differed); in a ragged batch at a narrow beam each utterance gets what it gets alone."""
    model = random_model(3, kind, one_sym_per_frame=True, vocab_size=5)
    units = ["<blank>", "a", "b", "c", "d"]
    fusion = ShallowFusion(NgramScorer(estimate([["a", "b"]], 2, units[1:]), dict(enumerate(units)), "test"), 0.0)
    enc, lens = encoder_output(3, model, 4, batch=2), torch.tensor([4, 3])
    fused = modified_beam_search_lm(model, enc, lens, 400, fusion)
    plain = modified_beam_search(model, enc, lens, 400)
    for b in range(2):
        assert [h.tokens for h in fused[b][:20]] == [h.tokens for h in plain[b][:20]]
        assert [h.score for h in fused[b][:20]] == pytest.approx([h.score for h in plain[b][:20]], abs=1e-5)
    for seed in range(20):
        enc, lens = encoder_output(seed, model, 6, batch=2), torch.tensor([6, 5])
        for beam in (2, 3, 4):
            fused, plain = modified_beam_search_lm(model, enc, lens, beam, fusion), modified_beam_search(model, enc,
                                                                                                    lens, beam)
            for b in range(2):  # and the same alignments: of two merged, the likelier's frames (the fused
                # search kept the first one's, a unit a frame early in 8 of 80 cases: ctm times, confidences)
                assert [(h.tokens, h.frames) for h in fused[b]] == [(h.tokens, h.frames) for h in plain[b]], \
                    (seed, beam, b)
                assert [h.score for h in fused[b]] == pytest.approx([h.score for h in plain[b]], abs=1e-5)
    enc, lens = encoder_output(4, model, 9, batch=3), torch.tensor([9, 4, 7])
    fused = modified_beam_search_lm(model, enc, lens, 3, fusion)
    for b in range(3):
        alone = modified_beam_search_lm(model, enc[b:b + 1, :lens[b]], lens[b:b + 1], 3, fusion)[0]
        assert [(h.tokens, h.frames) for h in fused[b]] == [(h.tokens, h.frames) for h in alone]
        assert [h.score for h in fused[b]] == pytest.approx([h.score for h in alone], abs=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_exhaustive_graves_and_modified_searches_give_the_same_alignments_on_the_one_symbol_lattice(kind):
    """Both merge the alignments of equal labels frame by frame and keep the likelier's frames (the Graves
    search kept the first one's: 188 of 600 hypotheses of 10 seeds differed in their frames)."""
    for seed in range(2):
        model = random_model(seed, kind, one_sym_per_frame=True, vocab_size=4)
        enc = encoder_output(seed, model, 5)[0]
        graves = {tuple(h.tokens): h.frames for h in beam_search(model, enc, 5, EXACT, 1)}
        modified = modified_beam_search(model, enc[None], torch.tensor([5]), EXACT)[0][:30]
        assert [graves[tuple(h.tokens)] for h in modified] == [h.frames for h in modified], seed


def test_each_hypothesis_offers_once_the_label_that_makes_it_another_of_its_beam():
    """Homophones of a word LM share a path with other LM states: each of their rows offers the label that
    extends the path into a third hypothesis, once (twice, its probability was added twice when merged), a row
    with the label among its best none more, and an utterance's rows only its own beam's."""
    from rnnt.label_path import LabelPath, SearchHypothesis
    from rnnt.modified_beam_search_lm import _add_labels_into_others

    prefix = LabelPath().extended(1, 0)
    beams = [[SearchHypothesis(prefix, -1.0, lm_state="a"), SearchHypothesis(prefix, -1.5, lm_state="b"),
              SearchHypothesis(prefix.extended(3, 1), -2.0, lm_state="a"),
              SearchHypothesis(prefix.extended(3, 1), -2.5, lm_state="b")],
             [SearchHypothesis(LabelPath().extended(3, 0), -1.0)]]  # its prefix, the empty path, is in no beam
    log_probs = torch.log_softmax(torch.arange(25.0).view(5, 5), dim=1)
    tokens, values = [[0, 1], [0, 2], [0, 1], [0, 1], [0, 1]], [[-1.0, -2.0] for _ in range(5)]
    _add_labels_into_others(beams, [0, 1], log_probs, values, tokens)
    assert tokens == [[0, 1, 3], [0, 2, 3], [0, 1], [0, 1], [0, 1]]
    assert values[0][2] == pytest.approx(log_probs[0, 3].item()) and values[1][2] == pytest.approx(log_probs[1, 3])
    tokens = [[0, 3], [0, 2], [0, 1], [0, 1], [0, 1]]
    _add_labels_into_others(beams, [0, 1], log_probs, [[-1.0, -2.0] for _ in range(5)], tokens)
    assert tokens == [[0, 3], [0, 2, 3], [0, 1], [0, 1], [0, 1]]

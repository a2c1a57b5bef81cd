"""rnnt.pooled_search (the method pooled_beam_lm): the transducer's log-likelihood of a hypothesis against the
sum over every alignment computed the obvious way, the LM's score replayed along a hypothesis against the LM's
own probabilities, and on small random models with beams wide enough for everything, the pooled search's best
is the word sequence of the best transducer + LM score of all there are."""

import math

import pytest
import torch
from search_reference import EXACT, all_sequences, encoder_output, random_model, sequence_log_prob
from test_transducer_lm_search import SENTENCES, SEP, SPELLINGS, lm_log_prob, unit_lm, word_sequences

from rnnt.lm.fusion import NgramScorer, ShallowFusion
from rnnt.lm.kneser_ney import estimate
from rnnt.lm.lexicon_search import LexiconTree, WordLexiconFusion
from rnnt import pooled_search
from rnnt.pooled_search import fusion_score, pooled_beam_search_lm, transducer_log_likelihoods
from rnnt.search import Hypothesis
from rnnt.search_methods import SearchOptions, search


@pytest.mark.parametrize("seed,kind,one_sym", [(s, k, o) for s in range(2) for k in ("lstm", "stateless")
                                               for o in (False, True)])
def test_the_transducer_log_likelihood_sums_every_alignment(seed, kind, one_sym):
    model = random_model(seed, kind, one_sym)
    frames = 4
    enc = encoder_output(seed, model, frames)[0]
    sequences = [[], [1], [2, 1], [1, 1, 2], [2, 2, 1, 1], [1, 2, 1, 2, 1]]
    got = transducer_log_likelihoods(model, enc, frames, [Hypothesis(tokens, []) for tokens in sequences])
    for tokens, value in zip(sequences, got):
        if one_sym and len(tokens) > frames:
            assert value == -math.inf  # one symbol a frame: 5 labels do not fit in 4 frames
            continue
        cap = 1 if one_sym else len(tokens)  # the standard lattice: any number of labels a frame
        assert value == pytest.approx(sequence_log_prob(model, enc, tokens, cap, one_sym), abs=1e-4), tokens


def test_the_fusion_score_of_units_is_the_lms_probability_and_the_bonus():
    lm = unit_lm(3)
    fusion = ShallowFusion(lm, weight=0.8, length_bonus=0.4)
    for tokens in all_sequences([1, 2], 4):
        expected = 0.8 * lm_log_prob(lm, ["_ab"[t] for t in tokens]) + 0.4 * len(tokens)
        assert fusion_score(fusion, Hypothesis(tokens, [])) == pytest.approx(expected, abs=1e-9)


def word_fusion() -> tuple[NgramScorer, WordLexiconFusion]:
    lm = NgramScorer(estimate(SENTENCES, 3, list(SPELLINGS)), {}, "test")
    return lm, WordLexiconFusion(lm, LexiconTree(SPELLINGS, lambda w: lm.log10_prob((), w)), SEP, 0.7, 0.3)


def test_the_fusion_score_of_words_follows_the_hypothesis_words_among_homophones():
    lm, fusion = word_fusion()
    for words, units in word_sequences(7):
        expected = 0.7 * lm_log_prob(lm, words) + 0.3 * len(words)
        assert fusion_score(fusion, Hypothesis(units, [], words=words)) == pytest.approx(expected, abs=1e-9), words
    assert fusion_score(fusion, Hypothesis([1, 1], [], words=["AA"])) == -math.inf  # no such word


@pytest.mark.parametrize("seed,kind", [(seed, kind) for seed in range(2) for kind in ("lstm", "stateless")])
def test_the_pooled_search_finds_the_best_transducer_and_lm_score_of_all_word_sequences(seed, kind):
    model = random_model(seed, kind, one_sym_per_frame=True, vocab_size=4, ctc_weight=0.5)
    frames = 5
    enc = encoder_output(seed, model, frames)
    lm, fusion = word_fusion()
    nbest = pooled_beam_search_lm(model, enc, torch.tensor([frames]), EXACT, fusion)[0]
    scores = {tuple(words): sequence_log_prob(model, enc[0], units, 1, True) + 0.7 * lm_log_prob(lm, words)
              + 0.3 * len(words) for words, units in word_sequences(frames)}
    best = max(scores, key=scores.get)
    assert tuple(nbest[0].words) == best and nbest[0].score == pytest.approx(scores[best], abs=1e-4)
    assert all(h.score == pytest.approx(scores[tuple(h.words)], abs=1e-4) for h in nbest)
    assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)


def test_the_method_needs_a_ctc_head_and_rescores_with_it():
    lm, fusion = word_fusion()
    enc, lens = encoder_output(0, random_model(0, "lstm", True, 4), 5), torch.tensor([5])
    with pytest.raises(ValueError, match="needs a CTC head"):
        search(random_model(0, "lstm", True, 4), enc, lens, "pooled_beam_lm", SearchOptions(4, fusion=fusion))
    model = random_model(0, "lstm", True, 4, ctc_weight=0.5)
    plain, rescored = ({tuple(h.words): h.score for h in search(model, enc, lens, "pooled_beam_lm",
                                                                 SearchOptions(4, fusion=fusion, ctc_weight=w))[0]}
                       for w in (0.0, 1.0))
    assert rescored.keys() == plain.keys()  # the same pool, each lower by its (negative) CTC log-likelihood
    assert all(rescored[words] < plain[words] for words in plain)


def test_log_likelihoods_kept_for_the_next_search_of_the_batch(monkeypatch):
    """steps/tune_lm_fusion.py searches one batch at every grid point: with a dict of the batch's, the
    transducer scores each pooled hypothesis of a row once, and every search finds what one without it finds."""
    model = random_model(1, "stateless", True, 4, ctc_weight=0.5)
    enc, lens = encoder_output(1, model, 6).repeat(2, 1, 1), torch.tensor([6, 4])  # two rows, two lengths
    _, fusion = word_fusion()
    memo: dict = {}
    scored = []  # the hypotheses the searches with the memo sent to the transducer
    real = pooled_search.transducer_log_likelihoods
    for weight in (0.7, 0.7, 0.2):  # a grid point, the same again, another
        fusion.weight = weight
        fresh = pooled_beam_search_lm(model, enc, lens, 4, fusion)
        monkeypatch.setattr(pooled_search, "transducer_log_likelihoods",
                            lambda model, enc, length, hyps: scored.append(len(hyps)) or real(model, enc, length, hyps))
        known, calls = len(memo), len(scored)
        kept = pooled_beam_search_lm(model, enc, lens, 4, fusion, memo)
        monkeypatch.setattr(pooled_search, "transducer_log_likelihoods", real)
        assert [[(h.tokens, h.words) for h in nbest] for nbest in kept] == \
            [[(h.tokens, h.words) for h in nbest] for nbest in fresh]
        assert all(a.score == pytest.approx(b.score, abs=1e-5) for x, y in zip(kept, fresh) for a, b in zip(x, y))
        assert sum(scored[calls:]) == len(memo) - known  # only the hypotheses not scored before
        if weight == 0.7 and known:
            assert len(scored) == calls  # the same point again: nothing scored
    assert {row for row, _ in memo} == {0, 1} and len(memo) > 2

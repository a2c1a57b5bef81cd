"""The searches against exhaustive enumeration, on random small models of both predictor kinds, several
seeds, standard and modified transducers: what must hold for any model, trained or not."""

import math

import numpy as np
import pytest
import torch

from rnnt.modified_beam_search import modified_beam_search
from rnnt.search import beam_search, greedy_search, label_ends_frame, log_add, symbols_per_frame
from search_reference import (EXACT, alignment_log_prob, best_sequence, encoder_output, random_model,
                              sequence_log_prob)

CASES = [(seed, kind, one_sym) for seed in range(3) for kind in ("lstm", "stateless") for one_sym in (False, True)]


@pytest.mark.parametrize("seed,kind,one_sym", CASES)
def test_exhaustive_beam_searches_find_the_most_probable_labels(seed, kind, one_sym):
    model = random_model(seed, kind, one_sym)
    frames = 3 if not one_sym else 5
    enc = encoder_output(seed, model, frames)[0]
    cap = symbols_per_frame(model, 2 if not one_sym else None)
    ends = label_ends_frame(model, cap)
    tokens, score = best_sequence(model, enc, cap, ends)
    graves = beam_search(model, enc, frames, beam=EXACT, max_symbols_per_frame=cap)
    assert graves[0].tokens == tokens and graves[0].score == pytest.approx(score, abs=1e-4)
    for hyp in graves[:20]:  # every hypothesis carries the probability of all its alignments
        assert hyp.score == pytest.approx(sequence_log_prob(model, enc, hyp.tokens, cap, ends), abs=1e-4)
    if one_sym:  # the modified search walks the same lattice
        modified = modified_beam_search(model, enc[None], torch.tensor([frames]), beam=EXACT)[0]
        assert modified[0].tokens == tokens and modified[0].score == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("seed,kind,one_sym", CASES)
def test_greedy_scores_its_own_alignment_and_never_beats_the_best(seed, kind, one_sym):
    model = random_model(seed, kind, one_sym)
    enc = encoder_output(seed, model, 3)[0]
    for cap in (1, 2):
        ends = label_ends_frame(model, cap)
        hyp = greedy_search(model, enc[None], torch.tensor([3]), max_symbols_per_frame=cap)[0]
        assert hyp.score == pytest.approx(alignment_log_prob(model, enc, hyp.tokens, hyp.frames, cap, ends), abs=1e-4)
        assert hyp.score <= best_sequence(model, enc, cap, ends)[1] + 1e-4


@pytest.mark.parametrize("seed,kind,one_sym", CASES)
def test_narrow_beams_never_claim_more_probability_than_their_labels_have(seed, kind, one_sym):
    model = random_model(seed, kind, one_sym)
    frames = 6
    enc = encoder_output(seed, model, frames)[0]
    cap = symbols_per_frame(model, None)
    ends = label_ends_frame(model, cap)
    nbests = [beam_search(model, enc, frames, beam=3)]
    if one_sym:
        nbests.append(modified_beam_search(model, enc[None], torch.tensor([frames]), beam=3)[0])
    for nbest in nbests:
        assert len({tuple(h.tokens) for h in nbest}) == len(nbest)  # merged: distinct label sequences
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
        for hyp in nbest:
            assert hyp.frames == sorted(hyp.frames) and all(0 <= f < frames for f in hyp.frames)
            assert hyp.score <= sequence_log_prob(model, enc, hyp.tokens, cap, ends) + 1e-4


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_batched_searches_equal_one_utterance_at_a_time(kind):
    model = random_model(7, kind, one_sym_per_frame=False, vocab_size=5)
    enc = encoder_output(7, model, 9, batch=3)
    lens = torch.tensor([9, 4, 7])
    greedy = greedy_search(model, enc, lens)
    modified = modified_beam_search(model, enc, lens, beam=3)
    for b in range(3):
        alone = greedy_search(model, enc[b:b + 1, :lens[b]], lens[b:b + 1])[0]
        assert (greedy[b].tokens, greedy[b].frames) == (alone.tokens, alone.frames)
        assert greedy[b].score == pytest.approx(alone.score, abs=1e-5)
        alone_nbest = modified_beam_search(model, enc[b:b + 1, :lens[b]], lens[b:b + 1], beam=3)[0]
        assert [h.tokens for h in modified[b]] == [h.tokens for h in alone_nbest]
        assert [h.score for h in modified[b]] == pytest.approx([h.score for h in alone_nbest], abs=1e-5)


def test_a_cap_reached_ends_the_frame_with_a_blank():
    """A standard transducer that wants many labels in a frame: greedy stops at the cap and counts the
    blank that ends the frame, so its score is that of a path of the lattice."""
    model = random_model(0, "lstm", one_sym_per_frame=False)
    with torch.no_grad():
        model.joiner.output.bias.copy_(torch.tensor([-6.0, 6.0, 0.0]))  # label 1 almost always
    enc = encoder_output(0, model, 2)[0] * 0
    hyp = greedy_search(model, enc[None], torch.tensor([2]), max_symbols_per_frame=2)[0]
    assert hyp.tokens == [1, 1, 1, 1] and hyp.frames == [0, 0, 1, 1]
    assert hyp.score == pytest.approx(alignment_log_prob(model, enc, hyp.tokens, hyp.frames, 2, False), abs=1e-5)
    assert hyp.score < -10  # two improbable blanks
    with pytest.raises(ValueError, match="max_symbols_per_frame"):
        greedy_search(model, enc[None], torch.tensor([2]), max_symbols_per_frame=0)


def test_log_add_is_numpys_logaddexp_to_the_bit():
    """The searches merge hypotheses with rnnt.search.log_add; their n-bests stay what numpy's gave."""
    rng = np.random.default_rng(0)
    values = [-math.inf, 0.0, -1e-300, -745.0, -0.5, 3.0] + rng.normal(0, 30, 200).tolist()
    for a in values:
        for b in values[:40]:
            assert log_add(a, b) == float(np.logaddexp(a, b)) == log_add(b, a), (a, b)


def test_beam_search_adds_the_blank_of_alignments_left_unexpanded_to_labels_it_holds():
    """When the frame's stopping rule fired, alignments of labels the beam held that were not yet expanded never
    added their blank-ended probability: [1, 1] scored -4.741 where its alignments sum to -4.523, and lost the
    first place to [1] (-4.733). Graves sums a prefix's alignments; each hypothesis is now its exact sum here."""
    model = random_model(6, "lstm", False, 3)
    enc = encoder_output(1006, model, 4)[0]
    hyps = beam_search(model, enc, 4, beam=4, max_symbols_per_frame=2)
    assert hyps[0].tokens == [1, 1] and hyps[1].tokens == [1]
    for hyp in hyps[:2]:
        assert hyp.score == pytest.approx(sequence_log_prob(model, enc, hyp.tokens, 2, False), abs=1e-6)
    for hyp in hyps:  # never more than the labels' probability
        assert hyp.score <= sequence_log_prob(model, enc, hyp.tokens, 2, False) + 1e-6


def test_beam_search_extends_a_hypothesis_by_the_label_into_another_outside_its_likeliest():
    """A hypothesis was extended by its beam + 1 likeliest labels alone: where the label into another of the frame's
    ([] into [2]) was not among them, that hypothesis lost the alignments through it (-6.2005 where [2]'s alignments
    sum to -6.0556). Graves's prefix step adds them, as modified_beam_search_lm does."""
    model = random_model(0, "lstm", False, vocab_size=5)
    enc = encoder_output(0, model, 3)[0]
    hyps = beam_search(model, enc, 3, beam=2, max_symbols_per_frame=2)
    two = next(hyp for hyp in hyps if hyp.tokens == [2])
    assert two.score == pytest.approx(sequence_log_prob(model, enc, [2], 2, False), abs=1e-6)
    for hyp in hyps:
        assert hyp.score <= sequence_log_prob(model, enc, hyp.tokens, 2, False) + 1e-6

"""CTC decoding of the model's CTC head against exhaustive enumeration on random small models."""

import math
from types import SimpleNamespace

import pytest
import torch

from ctc_reference import ctc_model, sequence_log_prob
from rnnt.ctc_search import ctc_greedy_search, ctc_prefix_beam_search
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.transducer import ModelConfig, Transducer
from search_reference import all_sequences


@pytest.mark.parametrize("seed", range(4))
def test_prefix_beam_search_finds_the_most_probable_labels(seed):
    model = ctc_model(seed)
    enc = torch.randn(5, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2
    with torch.no_grad():
        scored = [(sequence_log_prob(model, enc, s), s) for s in all_sequences([1, 2], 5)]
    best_score, best = max(scored, key=lambda pair: pair[0])
    nbest = ctc_prefix_beam_search(model, enc, 5, beam=200)
    assert nbest[0].tokens == best and nbest[0].score == pytest.approx(best_score, abs=1e-4)
    for hyp in nbest[:10]:
        assert hyp.score == pytest.approx(sequence_log_prob(model, enc, hyp.tokens), abs=1e-4)
        assert len(hyp.frames) == len(hyp.tokens) and hyp.frames == sorted(hyp.frames)
    narrow = ctc_prefix_beam_search(model, enc, 5, beam=2)
    assert all(h.score <= sequence_log_prob(model, enc, h.tokens) + 1e-4 for h in narrow)


@pytest.mark.parametrize("seed", range(3))
def test_greedy_collapses_the_best_path(seed):
    model = ctc_model(seed, vocab_size=4)
    enc = torch.randn(2, 7, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2
    lens = torch.tensor([7, 5])
    with torch.no_grad():
        log_probs = torch.log_softmax(model.ctc(enc), dim=-1)
    for b, hyp in enumerate(ctc_greedy_search(model, enc, lens)):
        path = log_probs[b, :lens[b]].argmax(-1).tolist()
        collapsed = [s for t, s in enumerate(path) if s != 0 and (t == 0 or s != path[t - 1])]
        assert hyp.tokens == collapsed and [path[f] for f in hyp.frames] == collapsed
        assert hyp.score == pytest.approx(float(log_probs[b, :lens[b]].max(-1).values.sum()), abs=1e-5)


def test_a_model_without_a_ctc_head_is_refused_by_name():
    from rnnt.search_methods import check_method

    model = Transducer(ModelConfig(encoder=LSTMEncoderConfig(input_dim=4, hidden=6, pre_layers=1, post_layers=0)), 3)
    with pytest.raises(ValueError, match="needs a CTC head"):
        check_method(model, "ctc_greedy")
    with pytest.raises(ValueError, match="has no CTC head"):
        ctc_greedy_search(model, torch.zeros(1, 2, 6), torch.tensor([2]))


@pytest.mark.parametrize("seed", range(3))
def test_a_beam_wider_than_the_prefixes_returns_no_impossible_hypothesis(seed):
    """A repeat with no blank between (1, 1 in two frames) has no path: it was kept, scored -inf, and reached
    nbest.json as a score of null."""
    model = ctc_model(seed, vocab_size=4)
    enc = torch.randn(2, model.encoder.output_dim, generator=torch.Generator().manual_seed(seed)) * 2
    nbest = ctc_prefix_beam_search(model, enc, 2, beam=40)
    assert all(torch.isfinite(torch.tensor(h.score)) for h in nbest)
    assert sorted(tuple(h.tokens) for h in nbest) == sorted({(), (1,), (2,), (3,)} | {(a, b) for a in (1, 2, 3)
                                                                                       for b in (1, 2, 3) if a != b})


def test_a_prefix_keeps_the_paths_staying_on_its_label_where_the_label_is_not_among_the_frames_likeliest():
    """Frame 1 tries its beam + 1 likeliest labels (b, c) and the blank: prefix 'a' lost the path 'a a' (.6 x .28),
    scored .072 where it holds .24 on its kept paths, and 'a b' (.18) came out best at beam 1."""
    probs = torch.tensor([[.1, .6, .3, 1e-9], [.12, .28, .3, .3]])
    model = SimpleNamespace(ctc=lambda enc: enc, blank=0)  # the "encoder output" is the CTC head's logits
    best = ctc_prefix_beam_search(model, probs.log(), 2, beam=1)[0]
    assert best.tokens == [1] and math.exp(best.score) == pytest.approx(.6 * (.12 + .28), rel=1e-5)

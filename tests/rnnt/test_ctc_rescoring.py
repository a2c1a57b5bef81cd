"""rnnt.ctc_rescoring: a hypothesis's CTC log-likelihood is the sum over every frame-level path that collapses
to its labels (enumerated here path by path), -inf where none does; rescoring adds it weighted and sorts
each n-best again; search() applies it to a transducer's n-best through SearchOptions.ctc_weight, and the
weight travels with an LM-fused method's yaml."""

import itertools
import math

import pytest
import torch
from search_reference import encoder_output, random_model

from rnnt import ctc_rescoring
from rnnt.ctc_rescoring import ctc_forward, ctc_log_likelihoods, ctc_rescored, rescored
from rnnt.lm.fusion import FusionConfig, read_fusion_config, write_fusion_config
from rnnt.search import Hypothesis
from rnnt.search_methods import SearchOptions, search


def enumerated_log_likelihood(log_probs: torch.Tensor, tokens: list[int], blank: int = 0) -> float:
    """log of the summed probability of every path over the frames that collapses to tokens (repeats merged,
    then blanks removed)."""
    T, V = log_probs.shape
    total = -math.inf
    for path in itertools.product(range(V), repeat=T):
        collapsed = [s for i, s in enumerate(path) if s != blank and (i == 0 or s != path[i - 1])]
        if collapsed == tokens:
            total = float(torch.logaddexp(torch.tensor(total), sum(log_probs[t, s] for t, s in enumerate(path))))
    return total


def test_ctc_log_likelihoods_are_the_sum_over_every_path():
    model = random_model(0, "stateless", False, vocab_size=3, ctc_weight=0.5)
    enc = encoder_output(1, model, frames=6)[0]
    hyps = [Hypothesis(tokens, []) for tokens in ([], [1], [2, 1], [1, 1], [1, 2, 1], [1, 1, 1])]
    got = ctc_log_likelihoods(model, enc, 5, hyps)  # the utterance's first 5 frames
    with torch.no_grad():
        log_probs = torch.log_softmax(model.ctc(enc[:5]).double(), dim=-1)
    for hyp, value in zip(hyps, got.tolist()):
        assert value == pytest.approx(enumerated_log_likelihood(log_probs, hyp.tokens), abs=1e-4), hyp.tokens
    assert all(math.isfinite(value) for value in got.tolist())
    # [1, 1, 1] needs a blank between repeats, 1 _ 1 _ 1: 5 frames; in 4 no path collapses to it
    assert ctc_log_likelihoods(model, enc, 4, hyps[5:]).tolist() == [-math.inf]


def test_the_rolling_forward_is_the_sum_over_every_path_and_pytorchs_ctc_loss(monkeypatch):
    """ctc_forward holds one frame's alphas (an hour's n-best took tens of GB in PyTorch's loss): equal to the
    enumeration on a small case, to PyTorch's CTC loss on ragged, repeated, empty and unalignable labels, and
    ctc_log_likelihoods takes it past HELD_ALPHAS."""
    log_probs = torch.log_softmax(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)) * 2, dim=-1)
    small = [[], [1], [2, 1], [1, 1], [1, 2, 1], [1, 1, 1]]
    got = ctc_forward(log_probs, small, 0).tolist()
    assert got == pytest.approx([enumerated_log_likelihood(log_probs.double(), t) for t in small], abs=1e-5)
    assert ctc_forward(log_probs[:4], small, 0).tolist()[5] == -math.inf  # 1 _ 1 _ 1 takes 5 frames
    assert ctc_forward(log_probs.double(), small, 0).dtype == ctc_forward(log_probs.double()[:1], small, 0).dtype \
        == torch.float64
    assert ctc_forward(log_probs[:1], [[], [2], [1, 2]], 0).tolist() == [log_probs[0, 0].item(), log_probs[0, 2].item(),
                                                                         -math.inf]  # one frame
    generator = torch.Generator().manual_seed(1)
    log_probs = torch.log_softmax(torch.randn(40, 6, generator=generator) * 3, dim=-1)
    labels = [torch.randint(1, 6, (int(n),), generator=generator).tolist() for n in torch.randint(0, 25, (12,))]
    labels += [[3] * 20, [3] * 21, [2, 2, 4, 4, 4, 1] * 4, []]  # 20 repeats fit 40 frames, 21 do not
    want = -torch.nn.functional.ctc_loss(log_probs[:, None].expand(-1, len(labels), -1),
                                         torch.tensor([x for tokens in labels for x in tokens]),
                                         torch.full((len(labels),), 40), torch.tensor([len(t) for t in labels]),
                                         reduction="none")
    got = ctc_forward(log_probs, labels, 0)
    finite = torch.isfinite(want)
    assert finite[12] and not finite[13] and finite[14] and finite[15] and finite.sum() > 10
    assert (got[~finite] == -math.inf).all() and torch.allclose(got[finite], want[finite], rtol=1e-5, atol=1e-3)
    model = random_model(0, "stateless", False, vocab_size=3, ctc_weight=0.5)
    enc = encoder_output(1, model, frames=30)[0]
    hyps = [Hypothesis(tokens, []) for tokens in ([], [1, 2, 2, 1], [2] * 9, [1, 2] * 8)]
    assert ctc_rescoring.HELD_ALPHAS > 4 * 30 * 33
    held = ctc_log_likelihoods(model, enc, 30, hyps)
    monkeypatch.setattr(ctc_rescoring, "HELD_ALPHAS", 0)
    assert torch.allclose(ctc_log_likelihoods(model, enc, 30, hyps), held, atol=1e-4)


def test_an_utterance_without_a_frame_is_rescored_not_refused():
    """No encoder frame (a clip shorter than the encoder's stride): only the empty labels, likelihood 1; the
    search's n-best with a CTC weight and the pooled search take it (torch's ctc_loss refused it, stopping the
    decode of the whole set)."""
    model = random_model(4, "lstm", True, vocab_size=4, ctc_weight=0.5)
    enc = encoder_output(5, model, frames=7, batch=2)
    hyps = [Hypothesis([], []), Hypothesis([1], [])]
    assert ctc_log_likelihoods(model, enc[1], 0, hyps).tolist() == [0.0, -math.inf]
    from rnnt.pooled_search import transducer_log_likelihoods
    assert transducer_log_likelihoods(model, enc[1], 0, hyps) == [0.0, -math.inf]
    enc_lens = torch.tensor([7, 0])
    rescored = search(model, enc, enc_lens, "modified_beam", SearchOptions(beam=4, ctc_weight=2.0))
    assert rescored[1][0].tokens == [] and rescored[0][0].tokens


def test_rescoring_adds_the_weighted_likelihood_and_sorts_again():
    model = random_model(2, "stateless", False, vocab_size=3, ctc_weight=0.5)
    enc = encoder_output(3, model, frames=6, batch=2)
    enc_lens = torch.tensor([6, 4])
    nbests = [[Hypothesis([1, 2], [], -1.0), Hypothesis([2], [], -1.5), Hypothesis([1, 1], [], -2.0)],
              [Hypothesis([2, 2], [], -0.5), Hypothesis([], [], -3.0)]]
    assert ctc_rescored(model, enc, enc_lens, nbests, 0.0) is nbests
    rescored = ctc_rescored(model, enc, enc_lens, nbests, 0.7)
    for b, nbest in enumerate(nbests):
        likelihoods = ctc_log_likelihoods(model, enc[b], int(enc_lens[b]), nbest).tolist()
        want = sorted(((h.score + 0.7 * ll, h.tokens) for h, ll in zip(nbest, likelihoods)), reverse=True)
        assert [(pytest.approx(h.score), h.tokens) for h in rescored[b]] == want
    assert [h.score for h in nbests[0]] == [-1.0, -1.5, -2.0]  # the search's own hypotheses stay as they were
    with pytest.raises(ValueError, match="needs a CTC head"):
        ctc_rescored(random_model(2, "stateless", False), enc, enc_lens, nbests, 0.7)


def test_search_rescores_a_transducers_nbest_by_the_options_weight():
    model = random_model(4, "lstm", True, vocab_size=4, ctc_weight=0.5)
    enc = encoder_output(5, model, frames=7, batch=3)
    enc_lens = torch.tensor([7, 5, 3])
    plain = search(model, enc, enc_lens, "modified_beam", SearchOptions(beam=4))
    rescored = search(model, enc, enc_lens, "modified_beam", SearchOptions(beam=4, ctc_weight=2.0))
    assert rescored == ctc_rescored(model, enc, enc_lens, plain, 2.0)
    assert [[h.tokens for h in n] for n in rescored] != [[h.tokens for h in n] for n in plain]  # it reorders
    with pytest.raises(ValueError, match="CTC rescoring"):
        search(model, enc, enc_lens, "ctc_prefix_beam", SearchOptions(beam=4, ctc_weight=1.0))


def test_the_weight_travels_with_the_methods_yaml(tmp_path):
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t</s>\n\n\\end\\\n")
    config = FusionConfig(str(arpa), "units", 0.5, 1.0, 8, "dev", ctc_weight=0.4)
    write_fusion_config(str(tmp_path / "modified_beam_lm.yaml"), config)
    assert read_fusion_config(str(tmp_path / "modified_beam_lm.yaml")) == config
    write_fusion_config(str(tmp_path / "plain.yaml"), FusionConfig(str(arpa), "units", 0.5, 1.0, 8))
    assert "ctc_weight" not in (tmp_path / "plain.yaml").read_text()  # as the yaml of an earlier version
    assert read_fusion_config(str(tmp_path / "plain.yaml")).ctc_weight == 0.0
    with pytest.raises(ValueError, match="no LM weights for this method yet: build the LM"):  # was a bare ENOENT
        read_fusion_config(str(tmp_path / "lm" / "modified_beam_lm.yaml"))
    with pytest.raises(ValueError, match="a directory, not an LM weights file"):  # --lm-fusion exp/lm: "not yet"
        read_fusion_config(str(tmp_path))


@pytest.mark.parametrize("key,value,message", [
    ("weight", ".nan", "weight must be a finite number, got nan"),  # decoded to %WER 1163.75, exit 0
    ("length_bonus", ".inf", "length_bonus must be a finite number, got inf"),
    ("weight", "-0.5", "weight must be 0 or more"),
    ("beam", "0", "beam must be a whole number, 1 or more, got 0"),  # an IndexError traceback
    ("beam", "2.5", "beam must be a whole number, 1 or more, got 2.5"),  # cut to 2 in silence
    ("over", "phones", "over must be one of units, words, got 'phones'"),
    ("arpa", "", "arpa must name an ARPA file .*got None"),  # a TypeError traceback of os.path.join
    ("lodr_arpa", "3", "lodr_arpa must name an ARPA file .*got 3"),
])
def test_a_weights_file_with_a_value_out_of_range_is_refused_by_key(tmp_path, key, value, message):
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t</s>\n\n\\end\\\n")
    path = tmp_path / "modified_beam_lm.yaml"
    write_fusion_config(str(path), FusionConfig(str(arpa), "units", 0.5, 1.0, 8, "dev"))
    lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}:")]
    path.write_text("\n".join(lines + [f"{key}: {value}"]) + "\n")
    with pytest.raises(ValueError, match=f"^{path}: {message}"):
        read_fusion_config(str(path))


def test_a_weight_of_0_adds_nothing_even_to_a_hypothesis_the_ctc_head_cannot_give():
    """0 x a -inf CTC log-likelihood is nan: tune_lm_fusion.py's column without rescoring got nan scores."""
    hyps = [Hypothesis([1, 1], [0, 1], -1.0), Hypothesis([2], [0], -2.0)]
    assert [[h.score for h in nbest] for nbest in rescored([hyps], [[-math.inf, -3.0]], 0.0)] == [[-1.0, -2.0]]
    assert [h.score for h in rescored([hyps], [[-math.inf, -3.0]], 0.5)[0]] == [-3.5, -math.inf]

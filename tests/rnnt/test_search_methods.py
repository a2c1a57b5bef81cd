"""rnnt.search_methods: every method by name through the one signature, on a model with both heads; what
each needs (a head, an LM, a low-order LM) refused by name when missing."""

import pytest
import torch

from rnnt.lm.fusion import LowOrderSubtraction, NgramScorer, ShallowFusion
from rnnt.lm.kneser_ney import estimate
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer
from rnnt.search_methods import LM_METHODS, METHODS, SearchOptions, check_method, search
from search_reference import encoder_output, random_model

UNITS = ["<blank>", "a", "b", "c", "d"]


def unit_fusion(order: int, weight: float) -> ShallowFusion:
    lm = NgramScorer(estimate([["a", "b", "c"], ["d", "a"]], order, UNITS[1:]), dict(enumerate(UNITS)), "test")
    return ShallowFusion(lm, weight, 0.5)


def options_for(name: str) -> SearchOptions:
    lm = METHODS[name].lm
    fusion = None if not lm else unit_fusion(3, 0.5)
    if lm == "lodr":
        fusion = LowOrderSubtraction(fusion, unit_fusion(2, 0.2))
    return SearchOptions(beam=3, fusion=fusion)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_gives_each_utterance_its_nbest_best_first(name):
    model = random_model(5, "stateless", one_sym_per_frame=True, vocab_size=5, ctc_weight=0.5)
    enc, lens = encoder_output(5, model, 7, batch=3), torch.tensor([7, 3, 5])
    nbests = search(model, enc, lens, name, options_for(name))
    assert len(nbests) == 3
    for nbest, length in zip(nbests, lens.tolist()):
        assert 1 <= len(nbest) <= (6 if name == "pooled_beam_lm" else 3)  # pooled: two searches' n-bests
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
        assert all(all(0 <= f < length for f in h.frames) and len(h.frames) == len(h.tokens) for h in nbest)
        assert all(0 < t < 5 for h in nbest for t in h.tokens)
    if not METHODS[name].lm and name != "modified_beam":  # the same search of one utterance alone
        alone = search(model, enc[1:2, :3], lens[1:2], name, options_for(name))[0]
        assert [h.tokens for h in alone] == [h.tokens for h in nbests[1]]


def test_what_a_method_needs_is_refused_by_name_when_missing():
    model = random_model(0, "stateless", one_sym_per_frame=True, vocab_size=5)  # no CTC head
    with_ctc = random_model(0, "stateless", one_sym_per_frame=True, vocab_size=5, ctc_weight=0.5)
    ctc_only = Transducer(ModelConfig(encoder=LSTMEncoderConfig(input_dim=4, hidden=6, pre_layers=1, post_layers=0),
                                      loss=LossConfig(type="ctc")), 5)
    with pytest.raises(ValueError, match="must be one of"):
        check_method(model, "viterbi")
    with pytest.raises(ValueError, match="needs a CTC head"):
        check_method(model, "ctc_prefix_beam")
    with pytest.raises(ValueError, match="this is a CTC model"):
        check_method(ctc_only, "modified_beam")
    for name in LM_METHODS:
        with pytest.raises(ValueError, match=f"lm/{name}.yaml"):
            check_method(with_ctc, name, SearchOptions())
    with pytest.raises(ValueError, match="its LM-fused method is beam_lm"):
        check_method(model, "beam", SearchOptions(fusion=unit_fusion(2, 0.5)))
    with pytest.raises(ValueError, match="lacks a low-order LM"):
        check_method(model, "modified_beam_lodr", SearchOptions(fusion=unit_fusion(2, 0.5)))
    with pytest.raises(ValueError, match="has a low-order LM"):
        check_method(model, "modified_beam_lm", options_for("modified_beam_lodr"))


def test_a_recipe_asks_before_training_whether_its_model_can_decode_with_its_methods(capsys):
    """python3 -m rnnt.search_methods CONFIG METHOD... (utils/decoding.sh check_methods): a misspelt --methods entry,
    or a transducer search of DeepSpeech 2 (a CTC model), failed at the decode stage after the whole training."""
    from conftest import ROOT
    from rnnt.search_methods import main

    conf = ROOT / "egs" / "an4" / "conf"
    transducer, ctc = str(conf / "transducer_conv_pruned_from_ctc_20ep.yaml"), str(conf / "deepspeech_40ep.yaml")
    assert main([transducer, "greedy", "modified_beam_lm"]) == 0 and main([ctc, "ctc_prefix_beam_lm"]) == 0
    assert main([transducer, "modifed_beam"]) == 1
    assert "got 'modifed_beam' (a model of " in capsys.readouterr().err
    assert main([ctc, "ctc_greedy", "greedy"]) == 1
    assert capsys.readouterr().err == ("search_methods: --method greedy searches a transducer; this is a CTC model: "
                                       f"use ctc_greedy, ctc_prefix_beam or ctc_prefix_beam_lm (a model of {ctc})\n")
    assert main([transducer]) == 1  # --methods "": it trained, then failed at its decode stage
    assert "no decoding method given (--methods is empty)" in capsys.readouterr().err


def test_a_recipes_model_config_that_cannot_be_read_is_named_as_run_sh_was_given_it(tmp_path, capsys):
    """Said before any stage: a --train-config copy not made yet was named as 'the config of the model to decode'
    by search_methods, neither the option nor the tool the user ran."""
    from rnnt.search_methods import main
    assert main([str(tmp_path / "quick.yaml"), "greedy"]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"run.sh: cannot read the model config {tmp_path / 'quick.yaml'} (--train-config or the "
                           "like): ") and "No such file" in said, said

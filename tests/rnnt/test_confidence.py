"""rnnt.confidence: unit posteriors against each unit computed alone, words' confidences, NCE, and the ctm's
column. decode.py's and sherpa-onnx's confidences on real audio: tests/rnnt/test_decoding.py and
tests/rnnt/export/test_deploy.py."""

import json
import math
import random

import pytest
import torch

from rnnt.confidence import (CALIBRATION_FILE, Calibration, add_unit_posteriors, area_under_curve, confidence_line,
                             experiment_calibration, fit_calibration, normalised_cross_entropy, usable_calibration,
                             word_confidence)
from rnnt.prep.download import hex_digest
from rnnt.ctm import write_ctm
from rnnt.model.lstm_encoder import LSTMEncoderConfig
from rnnt.model.predictor import PredictorConfig
from rnnt.model.transducer import LossConfig, ModelConfig, Transducer
from rnnt.search import Hypothesis, greedy_search, joint_log_probs
from rnnt.transcriber import words_with_times


def random_hypotheses(rng: random.Random, count: int, frames: int, vocab: int) -> list[Hypothesis]:
    hyps = []
    for _ in range(count):
        length = rng.randrange(0, 7)
        hyps.append(Hypothesis(tokens=[rng.randrange(1, vocab) for _ in range(length)],
                               frames=sorted(rng.randrange(frames) for _ in range(length))))
    return hyps


@pytest.mark.parametrize("predictor", [PredictorConfig(), PredictorConfig(kind="stateless", context=2)])
def test_posteriors_of_a_batch_are_each_units_alone(predictor):
    """Hypotheses of 0-6 units at random frames, padded into one batch: each unit's posterior is the joint
    network's at its frame after the units before it, computed for that prefix alone."""
    torch.manual_seed(0)
    model = Transducer(ModelConfig(encoder=LSTMEncoderConfig(input_dim=4, hidden=8, pre_layers=1, post_layers=0),
                                   predictor=predictor, loss=LossConfig(ctc_weight=0.3)), 7).eval()
    rng = random.Random(0)
    for _ in range(5):
        enc = torch.randn(4, 9, model.encoder.output_dim)
        hyps = random_hypotheses(rng, 4, 9, 7)
        add_unit_posteriors(model, enc, hyps)
        ctc = [Hypothesis(list(h.tokens), list(h.frames)) for h in hyps]
        add_unit_posteriors(model, enc, ctc, head="ctc")
        with torch.no_grad():
            for b, hyp in enumerate(hyps):
                alone = []
                for u, (token, frame) in enumerate(zip(hyp.tokens, hyp.frames)):
                    context = model.predictor(torch.tensor([hyp.tokens[:u]], dtype=torch.long))[0, -1]
                    log_probs = joint_log_probs(model.joiner, model.joiner.enc_proj(enc[b, frame]),
                                                model.joiner.pred_proj(context))
                    alone.append(log_probs[token].exp().item())
                assert hyp.unit_posteriors == pytest.approx(alone, abs=1e-6)
                ctc_alone = [torch.log_softmax(model.ctc(enc[b, f]), -1)[t].exp().item()
                             for t, f in zip(hyp.tokens, hyp.frames)]
                assert ctc[b].unit_posteriors == pytest.approx(ctc_alone, abs=1e-6)


@pytest.mark.parametrize("symbols", [1, 3])
def test_greedy_search_keeps_the_posteriors_the_post_pass_gives(symbols):
    """Greedy search records each unit's posterior as it emits it (a stream has no encoder output left to run
    again): the same as add_unit_posteriors gives its units afterwards, up to three symbols a frame too."""
    torch.manual_seed(1)
    model = Transducer(ModelConfig(encoder=LSTMEncoderConfig(input_dim=4, hidden=8, pre_layers=1, post_layers=0)),
                       5).eval()
    enc = torch.randn(3, 20, model.encoder.output_dim) * 3
    hyps = greedy_search(model, enc, torch.tensor([20, 13, 7]), max_symbols_per_frame=symbols)
    again = [Hypothesis(list(h.tokens), list(h.frames)) for h in hyps]
    add_unit_posteriors(model, enc, again)
    assert sum(len(h.tokens) for h in hyps) > 10
    for kept, computed in zip(hyps, again):
        assert kept.unit_posteriors == pytest.approx(computed.unit_posteriors, abs=1e-5)


def test_nce_is_one_for_certainty_zero_for_the_share_right_and_none_without_both():
    correct = [True, True, True, False]
    assert normalised_cross_entropy([1.0, 1.0, 1.0, 0.0], correct) == pytest.approx(1.0)
    assert normalised_cross_entropy([0.75] * 4, correct) == pytest.approx(0.0)
    assert normalised_cross_entropy([0.5, 0.5, 0.5, 0.9], correct) < 0  # sure of its error
    expected = 1 + (3 * math.log2(0.9) + math.log2(0.8)) / -(3 * math.log2(0.75) + math.log2(0.25))
    assert normalised_cross_entropy([0.9, 0.9, 0.9, 0.2], correct) == pytest.approx(expected)
    assert normalised_cross_entropy([0.9, 0.1], [True, True]) is None
    assert area_under_curve([0.9, 0.9, 0.9, 0.2], correct) == 1.0 and area_under_curve([0.75] * 4, correct) == 0.5
    assert area_under_curve([0.9, 0.5, 0.3, 0.5], correct) == pytest.approx((1 + 0.5 + 0) / 3)
    assert area_under_curve([0.9], [True]) is None


def test_a_words_confidence_is_its_units_product_and_the_ctm_holds_it(tmp_path):
    class Chars:
        kind = "char"
        symbols = {2: "▁", 3: "N", 4: "O", 5: "Y"}

        def decode(self, tokens):
            return "".join(self.symbols[t] for t in tokens)

        def starts_word(self, token):
            return self.symbols[token] == "▁"

    hyp = Hypothesis([3, 4, 2, 5, 4], [0, 1, 2, 3, 4], unit_posteriors=[0.9, 0.5, 0.1, 0.8, 1.0])
    words = words_with_times(Chars(), hyp, 0.1)
    assert [(w["word"], w["confidence"]) for w in words] == [("NO", 0.45), ("YO", 0.8)]  # not the boundary's 0.1
    assert word_confidence([0.5, 0.5, 0.5]) == 0.125
    assert "confidence" not in words_with_times(Chars(), Hypothesis([3, 4], [0, 1]), 0.1)[0]
    write_ctm(str(tmp_path / "ctm"), {"u1": words}, str(tmp_path))
    assert (tmp_path / "ctm").read_text() == "u1 1 0.00 0.20 NO 0.4500\nu1 1 0.30 0.20 YO 0.8000\n"
    line = confidence_line({"u1": "NO YES"}, {"u1": words})  # YO wrong, and surer than NO: worse than none
    assert line == "NCE -0.737, AUC 0.000 over 2 words (1 right: mean confidence 0.450; 1 wrong: 0.800)"
    assert confidence_line({"u1": "NO YO"}, {"u1": words}).startswith("NCE -, AUC - over 2 words (2 right")
    assert confidence_line({"u1": "NO YO"}, {"u1": [{"word": "NO"}]}) is None  # no confidences: no line


def test_the_calibration_fitted_is_the_one_the_words_were_drawn_with(tmp_path):
    """3000 words whose chance of being right is a known logistic map of their raw confidence: the fit finds its
    scale and offset, its confidences average the share right, and a set all right has nothing to fit."""
    rng = random.Random(0)
    truth = Calibration(2.0, -1.0)
    raw = [rng.uniform(0.3, 0.99) for _ in range(3000)]
    correct = [rng.random() < truth.apply(c) for c in raw]
    fitted = fit_calibration(raw, correct)
    assert (fitted.scale, fitted.offset) == pytest.approx((2.0, -1.0), abs=0.25)
    assert sum(fitted.apply(c) for c in raw) / len(raw) == pytest.approx(sum(correct) / len(correct), abs=1e-3)
    assert normalised_cross_entropy([fitted.apply(c) for c in raw], correct) > normalised_cross_entropy(raw, correct)
    assert word_confidence([0.5, 0.5], fitted) == round(fitted.apply(0.25), 4)
    with pytest.raises(ValueError, match="all 2 words right: nothing to calibrate on"):
        fit_calibration([0.9, 0.8], [True, True])
    (tmp_path / CALIBRATION_FILE).write_text('{"scale": 2.0, "offset": -1.0, "method": "greedy"}\n')
    assert experiment_calibration(str(tmp_path)) == truth and experiment_calibration(str(tmp_path / "x")) is None
    (tmp_path / CALIBRATION_FILE).write_text('{"scale": 2.0}\n')
    with pytest.raises(ValueError, match=f"{CALIBRATION_FILE}: not a confidence calibration"):
        experiment_calibration(str(tmp_path))


def test_a_fit_on_confident_words_settles_and_maps_every_confidence(tmp_path):
    """Words of a well-trained model: log-odds about 6 for right words, 2 for wrong ones, many of them at 1.0 to
    the float (an undamped Newton's method swung off to a scale of 1e7 there, and its map overflowed)."""
    rng = random.Random(1)
    correct = [rng.random() < 0.85 for _ in range(3000)]
    raw = [1 / (1 + math.exp(-rng.gauss(6 if ok else 2, 3))) for ok in correct] + [1.0] * 50
    correct += [rng.random() < 0.9 for _ in range(50)]
    fitted = fit_calibration(raw, correct)
    assert 0 < fitted.scale < 2 and all(0 < fitted.apply(c) < 1 for c in (0.0, 0.2, 1.0, 1 - 1e-12))
    assert sum(fitted.apply(c) for c in raw) / len(raw) == pytest.approx(sum(correct) / len(correct), abs=2e-3)
    with pytest.raises(ValueError, match="no word to calibrate on"):
        fit_calibration([], [])


def test_a_calibration_serves_the_checkpoint_and_head_it_was_fitted_with(tmp_path):
    (tmp_path / "a.pt").write_bytes(b"weights a")
    (tmp_path / "b.pt").write_bytes(b"weights b")
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps(
        {"scale": 0.5, "offset": 0.2, "checkpoint": "a.pt", "checkpoint_sha256": hex_digest(str(tmp_path / "a.pt")),
         "head": "transducer"}))
    calibration, note = usable_calibration(str(tmp_path), str(tmp_path / "a.pt"), "transducer")
    assert calibration == Calibration(0.5, 0.2) and note == f"calibrated by {tmp_path / CALIBRATION_FILE}"
    for checkpoint, head, why in [("b.pt", "transducer", "fitted with another checkpoint than"),
                                  ("a.pt", "ctc", "fitted on the transducer head's words, not the ctc head's")]:
        calibration, note = usable_calibration(str(tmp_path), str(tmp_path / checkpoint), head)
        assert calibration is None and note.startswith("uncalibrated posteriors: ") and why in note
    (tmp_path / "b.pt").write_bytes(b"weights a")  # the same weights under another name: the same model
    assert usable_calibration(str(tmp_path), str(tmp_path / "b.pt"), "transducer")[0] == Calibration(0.5, 0.2)
    for scale in ("NaN", "-0.5"):  # (a negative one reversed the words' order)
        (tmp_path / CALIBRATION_FILE).write_text(f'{{"scale": {scale}, "offset": 0}}')
        with pytest.raises(ValueError, match="scale and offset are finite numbers, the scale at least 0"):
            experiment_calibration(str(tmp_path))


def test_a_calibration_never_changes_the_words_order():
    """Confidences that run against the words' being right fitted a negative scale, which reversed their order in
    every decode; and confidences above 1 - 1e-6 (many of a confident model's words) were all one value."""
    rng = random.Random(2)
    raw = [rng.uniform(0.05, 0.95) for _ in range(400)]
    correct = [rng.random() > c for c in raw]  # the surer, the likelier wrong
    fitted = fit_calibration(raw, correct)
    assert fitted.scale == 0 and fitted.apply(0.1) == fitted.apply(0.9)
    assert fitted.apply(0.5) == pytest.approx(sum(correct) / len(correct), abs=1e-6)
    near_one = [1 - 1e-7, 1 - 1e-8, 1 - 1e-9, 1 - 1e-10]
    mapped = [Calibration(1.0, 0.0).apply(c) for c in near_one]
    assert mapped == sorted(mapped) and len(set(mapped)) == 4 and all(0 < c < 1 for c in mapped)


@pytest.mark.parametrize("words, outcome", [([], "no word decoded from dev.list"),
                                            ([("u1", "YES", 0.9)], "all 1 words of dev.list right")])
def test_a_dev_set_of_no_word_or_of_one_outcome_is_an_outcome_not_a_failed_stage(monkeypatch, tmp_path, words,
                                                                                 outcome):
    """A first short training on a new corpus decodes no word on dev: calibrate_confidence.py failed ('no word to
    calibrate on'), and with it the recipe's stage 6 on every rerun until the model improved."""
    import importlib.util
    import sys

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("calibrate_confidence", ROOT / "steps" / "calibrate_confidence.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    monkeypatch.setattr(tool, "reference_texts", lambda *args: ({"u1": "YES"}, None))
    monkeypatch.setattr(tool, "decoded_words", lambda *args: ({}, str(tmp_path / "avg-2.pt")))
    monkeypatch.setattr(tool, "scored_words", lambda refs, hyps: ([c for *_, c in words], [True] * len(words)))
    monkeypatch.setattr(sys, "argv", ["calibrate_confidence.py", str(tmp_path), "dev.list"])
    assert tool.main() == f"{outcome}: nothing to calibrate on; avg-2.pt's words' confidences stay uncalibrated"
    assert not (tmp_path / CALIBRATION_FILE).exists()
    (tmp_path / CALIBRATION_FILE).write_text("{}")  # one of before stays in force: said so (it said uncalibrated)
    assert tool.main() == f"{outcome}: nothing to calibrate on; {CALIBRATION_FILE}, as it was, still calibrates " \
        "what it names"
    monkeypatch.setattr(tool, "decoded_words", lambda *args: ({"x9": []}, str(tmp_path / "avg-2.pt")))
    with pytest.raises(tool.ToolError, match="dev.list: a reference for none of the 1 utterances decoded from "):
        tool.main()  # another set's text: it said 'no word decoded', exit 0


def test_decode_no_ema_leaves_a_calibration_of_the_ema_weights_uncalibrated(tmp_path, capsys):
    """The calibration names the checkpoint by its digest, which holds both weights: decode.py --no-ema decoded the
    raw ones and applied the EMA weights' calibration to their words."""
    import argparse
    import importlib.util

    import torch

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("decode_tool", ROOT / "steps" / "decode.py")
    decode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(decode)
    for name, state in (("ema.pt", {"model": {}, "ema": {}, "meta": {}}), ("plain.pt", {"model": {}, "meta": {}})):
        torch.save(state, tmp_path / name)
        (tmp_path / CALIBRATION_FILE).write_text(json.dumps({"scale": 0.5, "offset": 0.2, "checkpoint": name,
                                                             "checkpoint_sha256": hex_digest(str(tmp_path / name))}))
        for no_ema in (False, True):
            args = argparse.Namespace(raw_confidences=False, exp_dir=str(tmp_path), method="greedy", no_ema=no_ema)
            calibration, note = decode.confidence_calibration(args, str(tmp_path / name))
            left_raw = no_ema and name == "ema.pt"
            assert (calibration is None) == left_raw, (name, no_ema)
            assert note.endswith("was fitted on the checkpoint's EMA weights, not its raw ones (--no-ema)") == left_raw

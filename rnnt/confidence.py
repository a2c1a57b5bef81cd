"""Word confidences: the probability the model gives each unit of the best hypothesis where the search emitted it
(the joint network's at the unit's encoder frame after the units before it; a CTC search's, the CTC head's at
its frame), and a word's the product of its units' (AN4's dev: a higher normalised cross entropy than their
smallest or their geometric mean). They are the model's posteriors, not calibrated: an LM or hotwords that chose
a unit do not raise its confidence, and a model sure of its errors gives them high ones. How well they tell right
words from wrong ones: the normalised cross entropy (NCE) that NIST's sclite reports for a CTM's confidences (1
perfect, 0 no better than the decode's share of right words for every word, below 0 worse: it takes calibrated
probabilities, and a model's posteriors are not), and the area under the ROC curve (AUC: 0.5 chance, 1 a threshold
that parts them all; the order alone counts).
"""

from __future__ import annotations

import bisect
import json
import math
import os
from dataclasses import dataclass, field

import torch

from rnnt.prep.download import changed_since
from rnnt.scoring import align, words
from rnnt.search import Hypothesis, joint_log_probs


@torch.no_grad()
def add_unit_posteriors(model, enc: torch.Tensor, hyps: list[Hypothesis], head: str = "transducer") -> None:
    """Sets each hypothesis's unit_posteriors, hyps[b] being one of utterance b of the batch enc (B, T, D)."""
    if not any(hyp.tokens for hyp in hyps):
        for hyp in hyps:
            hyp.unit_posteriors = []
        return
    longest = max(len(hyp.tokens) for hyp in hyps)
    tokens = torch.zeros(len(hyps), longest, dtype=torch.long, device=enc.device)  # blank-padded
    frames = torch.zeros(len(hyps), longest, dtype=torch.long, device=enc.device)
    for b, hyp in enumerate(hyps):
        tokens[b, :len(hyp.tokens)] = torch.tensor(hyp.tokens, dtype=torch.long)
        frames[b, :len(hyp.frames)] = torch.tensor(hyp.frames, dtype=torch.long)
    at_frames = enc.gather(1, frames[:, :, None].expand(-1, -1, enc.shape[-1]))  # (B, U, D)
    if head == "ctc":
        log_probs = torch.log_softmax(model.ctc(at_frames).float(), dim=-1)
    else:
        before = model.predictor(tokens)[:, :-1]  # each unit's context: the units before it
        log_probs = joint_log_probs(model.joiner, model.joiner.enc_proj(at_frames), model.joiner.pred_proj(before))
    posteriors = log_probs.gather(2, tokens[:, :, None])[:, :, 0].exp().tolist()
    for b, hyp in enumerate(hyps):
        hyp.unit_posteriors = posteriors[b][:len(hyp.tokens)]


CALIBRATION_FILE = "confidence_calibration.json"  # in an experiment dir: written by steps/calibrate_confidence.py
EDGE = 1e-12  # confidences are kept inside (EDGE, 1 - EDGE) for their log-odds (1e-6 tied every one above
# 1 - 1e-6, many of a confident model's words: products of float32 posteriors, distinct down to 6e-8 from 1)


def log_odds(p: float) -> float:
    p = min(max(p, EDGE), 1 - EDGE)
    return math.log(p / (1 - p))


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-max(min(z, 36.0), -36.0)))  # inside (0, 1): 1 / (1 + e^-37) is 1.0 in a float


@dataclass(frozen=True)
class Calibration:
    """Logistic calibration of a word's raw confidence c (Kaldi's steps/conf, without its other features):
    1 / (1 + exp(-(scale * log(c / (1 - c)) + offset))), fitted on a dev set's words right and wrong with one
    checkpoint's posteriors of one head's search (the transducer's or the CTC head's)."""
    scale: float = 1.0
    offset: float = 0.0
    fitted_with: str = field(default="", compare=False)  # the checkpoint's file name
    checkpoint_sha256: str = field(default="", compare=False)  # and its content's digest
    head: str = field(default="transducer", compare=False)

    def apply(self, confidence: float) -> float:
        return sigmoid(self.scale * log_odds(confidence) + self.offset)

    def problem(self, checkpoint: str, head: str | None = None, raw_of_ema: bool = False) -> str | None:
        """Why it does not calibrate the words of that checkpoint's search of that head (None: it does; head None:
        whatever the head); raw_of_ema: the checkpoint's raw weights decode, where it holds EMA ones, which
        steps/calibrate_confidence.py fits on."""
        if head is not None and self.head != head:
            return f"fitted on the {self.head} head's words, not the {head} head's"
        if raw_of_ema:
            return "fitted on the checkpoint's EMA weights, not its raw ones (--no-ema)"
        if changed_since(checkpoint, self.checkpoint_sha256):
            return (f"fitted with another checkpoint than {checkpoint} ({self.fitted_with} as it was then): "
                    "calibrate again")
        return None


def _log_likelihood(x: list[float], correct: list[bool], scale: float, offset: float, ridge: float) -> float:
    total = 0.0
    for xi, yi in zip(x, correct):
        z = scale * xi + offset
        total -= math.log1p(math.exp(-abs(z))) + max(-z, 0.0) if yi else math.log1p(math.exp(-abs(z))) + max(z, 0.0)
    return total - ridge * (scale * scale + offset * offset) / 2


def fit_calibration(confidences: list[float], correct: list[bool], steps: int = 100) -> Calibration:
    """The scale and offset that maximise the likelihood of the words' being right: Newton's method on the two,
    from no scale and the share of right words, each step halved until the likelihood rises (an undamped one swung
    off to 1e7 on words of confidences near 1), a little ridge keeping them finite where the words part cleanly.
    Words both right and wrong are needed, and a fit that settles: a ValueError otherwise. Confidences that run
    against the words' being right (a fitted scale below 0, a model early in its training) would reverse their
    order: the scale is 0 then, every word given the share of right ones."""
    if all(correct) or not any(correct):
        raise ValueError("no word to calibrate on" if not correct else
                         f"all {len(correct)} words {'right' if all(correct) else 'wrong'}: nothing to calibrate on")
    x, ridge = [log_odds(c) for c in confidences], 1e-3
    scale, offset = 0.0, log_odds(sum(correct) / len(correct))
    likelihood = _log_likelihood(x, correct, scale, offset, ridge)
    for _ in range(steps):
        p = [sigmoid(scale * xi + offset) for xi in x]
        gradient = [sum((yi - pi) * xi for pi, yi, xi in zip(p, correct, x)) - ridge * scale,
                    sum(yi - pi for pi, yi in zip(p, correct)) - ridge * offset]
        weights = [pi * (1 - pi) for pi in p]
        xx = sum(w * xi * xi for w, xi in zip(weights, x)) + ridge
        x1, ones = sum(w * xi for w, xi in zip(weights, x)), sum(weights) + ridge
        det = xx * ones - x1 * x1
        step = [(ones * gradient[0] - x1 * gradient[1]) / det, (xx * gradient[1] - x1 * gradient[0]) / det]
        size = 1.0
        while (tried := _log_likelihood(x, correct, scale + size * step[0], offset + size * step[1], ridge)) \
                < likelihood and size > 1e-6:
            size /= 2
        scale, offset, likelihood = scale + size * step[0], offset + size * step[1], tried
        if max(abs(size * step[0]), abs(size * step[1])) < 1e-9:
            return Calibration(round(scale, 6), round(offset, 6)) if scale >= 0 else \
                Calibration(0.0, round(log_odds(sum(correct) / len(correct)), 6))
    raise ValueError(f"the calibration of {len(correct)} words did not settle in {steps} steps")


def calibration_of(values, where: str, remedy: str) -> Calibration:
    """The calibration a JSON object gives ({"scale", "offset"}, and the checkpoint, its digest and the head it was
    fitted with); anything else, or a scale or offset that is not finite, is a ValueError naming where and the
    remedy."""
    try:
        calibration = Calibration(float(values["scale"]), float(values["offset"]), str(values.get("checkpoint", "")),
                                  str(values.get("checkpoint_sha256", "")), str(values.get("head", "transducer")))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{where}: not a confidence calibration ({type(error).__name__}: {error}); {remedy}") \
            from None
    if not all(math.isfinite(v) for v in (calibration.scale, calibration.offset)) or calibration.scale < 0:
        raise ValueError(f"{where}: a confidence calibration's scale and offset are finite numbers, the scale at "
                         f"least 0 (below, it reverses the words' order); {remedy}")
    return calibration


def read_calibration(path: str) -> Calibration:
    """A calibration file's (calibration_of)."""
    remedy = "write it again with steps/calibrate_confidence.py"
    with open(path, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path}: not JSON ({error}); {remedy}") from None
    return calibration_of(values, path, remedy)


def experiment_calibration(exp_dir: str) -> Calibration | None:
    """The experiment's calibration (CALIBRATION_FILE), None where it has none."""
    path = os.path.join(exp_dir, CALIBRATION_FILE)
    return read_calibration(path) if os.path.isfile(path) else None


def usable_calibration(exp_dir: str, checkpoint: str, head: str,
                       raw_of_ema: bool = False) -> tuple[Calibration | None, str]:
    """The experiment's calibration where it calibrates that checkpoint's words of that head (raw_of_ema:
    Calibration.problem's), and what a decode's confidence file says of its words' confidences ('calibrated by
    ...', 'uncalibrated posteriors[: why]')."""
    calibration = experiment_calibration(exp_dir)
    if calibration is None:
        return None, "uncalibrated posteriors"
    path = os.path.join(exp_dir, CALIBRATION_FILE)
    if problem := calibration.problem(checkpoint, head, raw_of_ema):
        return None, f"uncalibrated posteriors: {path} was {problem}"
    return calibration, f"calibrated by {path}"


def word_confidence(unit_posteriors: list[float], calibration: Calibration | None = None,
                    rounded: bool = True) -> float:
    """The product of the units' posteriors, calibrated where given; to 4 decimals unless not rounded (a fit takes
    them whole: 0.99996 is not 1)."""
    confidence = math.prod(unit_posteriors)
    confidence = calibration.apply(confidence) if calibration else confidence
    return round(confidence, 4) if rounded else confidence


def normalised_cross_entropy(confidences: list[float], correct: list[bool]) -> float | None:
    """sclite's NCE of word confidences against whether each word is right; None where every word is right or
    none is (it has no baseline then)."""
    right = sum(correct)
    if right in (0, len(correct)):
        return None
    share = right / len(correct)
    baseline = -(right * math.log2(share) + (len(correct) - right) * math.log2(1 - share))
    floor = 1e-10  # a confidence of exactly 0 or 1 for a word that says otherwise
    total = sum(math.log2(max(c, floor)) if ok else math.log2(max(1 - c, floor)) for c, ok in zip(confidences,
                                                                                                    correct))
    return (baseline + total) / baseline


def area_under_curve(confidences: list[float], correct: list[bool]) -> float | None:
    """The chance that a right word has a higher confidence than a wrong one (ties half): the area under the ROC
    curve of telling them apart by a threshold, whatever the calibration; None without both."""
    right = [c for c, ok in zip(confidences, correct) if ok]
    wrong = sorted(c for c, ok in zip(confidences, correct) if not ok)
    if not right or not wrong:
        return None
    below = sum(bisect.bisect_left(wrong, c) + (bisect.bisect_right(wrong, c) - bisect.bisect_left(wrong, c)) / 2
                for c in right)
    return below / (len(right) * len(wrong))


def scored_words(refs: dict[str, str], decoded_words: dict[str, list[dict]]) -> tuple[list[float], list[bool]]:
    """The confidences of the decoded words ({"word", "confidence", ...} of each utterance) that have them and a
    reference, and whether each is right: the alignment with its reference matches it."""
    confidences, correct = [], []
    for key, utterance in decoded_words.items():
        if key not in refs or not utterance or "confidence" not in utterance[0]:
            continue
        hypothesis = [word["word"] for word in utterance]
        ops = [op for _, _, op in align(words(refs[key]), hypothesis) if op != "D"]
        confidences += [word["confidence"] for word in utterance]
        correct += [op == "C" for op in ops]
    return confidences, correct


def confidence_line(refs: dict[str, str], decoded_words: dict[str, list[dict]]) -> str | None:
    """'NCE N, AUC A over W words (R right: mean confidence C; E wrong: mean D)' of the decoded words' confidences,
    each word right where the alignment with its reference matches it; None where the words have no confidences.
    NCE rewards calibrated confidences, AUC only their order."""
    confidences, correct = scored_words(refs, decoded_words)
    if not confidences:
        return None
    right = [c for c, ok in zip(confidences, correct) if ok]
    wrong = [c for c, ok in zip(confidences, correct) if not ok]

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    return (f"NCE {shown(normalised_cross_entropy(confidences, correct))}, AUC "
            f"{shown(area_under_curve(confidences, correct))} over {len(confidences)} words ({len(right)} right: "
            f"mean confidence {shown(sum(right) / len(right) if right else None)}; {len(wrong)} wrong: "
            f"{shown(sum(wrong) / len(wrong) if wrong else None)})")

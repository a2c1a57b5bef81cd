"""System combination of n-best lists: several models' decodes of one data list (steps/decode.py --nbest)
pooled per utterance, and every hypothesis in a pool scored again by each model, whatever search found it:
its transducer's log-probability of the labels over all alignments (rnnt.pooled_search) and its CTC
head's (rnnt.ctc_rescoring), plus an LM's score (rnnt.pooled_search.fusion_score). A weighted sum of
those features picks each pool's transcript; the weights are chosen on dev (steps/combine_nbest.py).
Models trained apart make different errors: on speechocean762 two phone transducers at 47.2 and 47.5 dev
WER differ on 179 of 200 dev utterances (egs/speechocean762/RESULTS.md). The models must share their units.
"""

from __future__ import annotations

import itertools
import json
import math

import torch

from rnnt.ctc_rescoring import ctc_log_likelihoods
from rnnt.pooled_search import fusion_score, transducer_log_likelihoods
from rnnt.search import Hypothesis

LM = "lm"


def read_nbest(path: str) -> dict[str, list[Hypothesis]]:
    """utterance -> its hypotheses (labels and words) from a decode.py nbest.json."""
    nbests = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                nbests[row["key"]] = [Hypothesis([unit["id"] for unit in hyp["tokens"]], [0] * len(hyp["tokens"]),
                                                 0.0, words=hyp["text"].split()) for hyp in row["hyps"]]
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a decode.py n-best line ({error})") from error
    return nbests


def pool(nbests: list[dict[str, list[Hypothesis]]]) -> dict[str, list[Hypothesis]]:
    """utterance -> the distinct hypotheses (labels and words) of every n-best that has it, in order."""
    pools: dict[str, dict] = {}
    for nbest in nbests:
        for key, hyps in nbest.items():
            for hyp in hyps:
                pools.setdefault(key, {}).setdefault((tuple(hyp.tokens), tuple(hyp.words)), hyp)
    return {key: list(hyps.values()) for key, hyps in pools.items()}


def feature_names(system: str, model) -> list[str]:
    """The features a model scores: 'SYSTEM transducer' (with a joiner), 'SYSTEM ctc' (with a CTC head)."""
    kinds = (("transducer", model.is_transducer), ("ctc", model.ctc is not None))
    return [f"{system} {kind}" for kind, present in kinds if present]


@torch.no_grad()
def model_features(model, enc: torch.Tensor, enc_len: int, hyps: list[Hypothesis]) -> list[list[float]]:
    """Per hypothesis the model's features (feature_names' order), from one utterance's encoder output."""
    columns = []
    if model.is_transducer:
        columns.append(transducer_log_likelihoods(model, enc, enc_len, hyps))
    if model.ctc is not None:
        columns.append([float(x) for x in ctc_log_likelihoods(model, enc, enc_len, hyps)])
    return [list(row) for row in zip(*columns)]


def lm_features(fusion, hyps: list[Hypothesis]) -> list[list[float]]:
    return [[fusion_score(fusion, hyp)] for hyp in hyps]


def choose(hyps: list[Hypothesis], features: list[list[float]], weights: list[float]) -> Hypothesis:
    """The hypothesis of the highest weighted sum (a feature of weight 0 left out; -inf where a weighted
    feature is -inf); the first where none is finite."""
    def total(row):
        used = [(w, x) for w, x in zip(weights, row) if w]
        return sum(w * x for w, x in used) if all(math.isfinite(x) for _, x in used) else -math.inf
    return max(zip(hyps, features), key=lambda pair: total(pair[1]))[0]


def weight_grid(names: list[str], values: list[float]):
    """Every weighting of the features: the first feature 1, the LM 1 (its weight is its fusion's), the
    others each of values."""
    free = [name for name in names[1:] if name != LM]
    for chosen in itertools.product(values, repeat=len(free)):
        weights = dict(zip(free, chosen), **{names[0]: 1.0, LM: 1.0})
        yield [weights[name] for name in names]

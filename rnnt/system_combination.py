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
import sys

import torch

from rnnt.ctc_rescoring import ctc_log_likelihoods
from rnnt.pooled_search import fusion_score, transducer_log_likelihoods
from rnnt.scoring import count_errors, words
from rnnt.search import Hypothesis

LM = "lm"


def read_nbest(path: str, vocab_size: int) -> dict[str, list[Hypothesis]]:
    """utterance -> its hypotheses (labels and words) from a decode.py nbest.json, whose units are ids of a
    vocabulary of vocab_size; a line that is not one (a unit id that is no unit, the blank, not a whole number)
    is named and left out, and the rest kept (one ended the whole combination in a traceback); so is a second line
    of an utterance (it replaced the first in silence). Blank lines are skipped."""
    nbests = {}
    with open(path, "rb") as f:  # a line that is not UTF-8 is one line left out too (it ended the reading)
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8"))
                if not isinstance(row["key"], str):
                    raise TypeError(f"key {row['key']!r} is not a string")
                hyps = [Hypothesis([unit_id(unit["id"], vocab_size) for unit in hyp["tokens"]],
                                   [0] * len(hyp["tokens"]), 0.0, words=words(hyp["text"])) for hyp in row["hyps"]]
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
                print(f"{path}:{number}: not a decode.py n-best line ({type(error).__name__}: {error}); left out",
                      file=sys.stderr)
                continue
            if row["key"] in nbests:
                print(f"{path}:{number}: {row['key']} again (its first line is kept); left out", file=sys.stderr)
                continue
            nbests[row["key"]] = hyps
    return nbests


def unit_id(value, vocab_size: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < vocab_size:
        raise ValueError(f"unit id {value!r} is none of the model's units 1 to {vocab_size - 1}")
    return value


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


def weighted_totals(features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """(points, hypotheses): each weighting's (points, K) sum of a pool's (hypotheses, K) features, float64,
    -inf where a feature it weighs is not finite (one of weight 0 is left out). Summed feature by feature
    in order, so a weighting gives the same floats alone as in a grid of any size."""
    finite = torch.isfinite(features)
    totals = torch.zeros(weights.shape[0], features.shape[0], dtype=torch.float64)
    for k in range(features.shape[1]):
        totals += weights[:, k, None] * torch.where(finite[:, k], features[:, k], 0.0)
    unusable = (weights != 0).double() @ (~finite).double().T > 0
    return totals.masked_fill(unusable, -math.inf)


def as_tensor(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def choose(hyps: list[Hypothesis], features: list[list[float]], weights: list[float]) -> Hypothesis:
    """The hypothesis of the highest weighted sum (weighted_totals); the first on a tie or where none is
    finite."""
    return hyps[int(weighted_totals(as_tensor(features), as_tensor([weights]))[0].argmax())]


def grid_errors(pools: dict[str, list[Hypothesis]], rows: dict[str, list[list[float]]], references: dict[str, str],
                grid: list[list[float]]) -> list[int]:
    """Each weighting's word errors over the references, as rnnt.scoring.score counts those of choose's
    transcripts (a reference without a pool as an empty hypothesis), for the whole grid at once: every
    pooled hypothesis is aligned once, and each weighting adds up the errors of the ones it picks."""
    weights = as_tensor(grid)
    errors = torch.zeros(len(grid), dtype=torch.long)
    for key, reference in references.items():
        if key not in pools:
            errors += len(words(reference))
            continue
        own = torch.tensor([count_errors(reference, " ".join(hyp.words)).errors for hyp in pools[key]])
        errors += own[weighted_totals(as_tensor(rows[key]), weights).argmax(dim=1)]
    return errors.tolist()


def weight_grid(names: list[str], values: list[float]):
    """Every weighting of the features: the first feature 1, the LM 1 (its weight is its fusion's), the
    others each of values."""
    free = [name for name in names[1:] if name != LM]
    for chosen in itertools.product(values, repeat=len(free)):
        weights = dict(zip(free, chosen), **{names[0]: 1.0, LM: 1.0})
        yield [weights[name] for name in names]

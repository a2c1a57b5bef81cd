"""Shallow fusion: a search adds weight * ln p_LM(unit | units before it) + length_bonus for every unit
it emits, and weight * ln p_LM(</s> | the last units) when a hypothesis ends. The LM is an ARPA model
whose words are the model's unit symbols (steps/build_ngram_lm.py writes one)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import yaml

from rnnt.lm.arpa import read_arpa
from rnnt.lm.kneser_ney import BOS, EOS

LN10 = math.log(10.0)
LMState = tuple[str, ...]  # the last (order - 1) words, <s> first at the start


class NgramScorer:
    """Natural-log probabilities of unit ids from an ARPA model over unit symbols, backing off as ARPA does."""

    def __init__(self, model: dict[tuple[str, ...], tuple[float, float]], symbols: dict[int, str], source: str):
        self.model, self.symbols = model, symbols
        self.order = max(len(ngram) for ngram in model)
        missing = [s for i, s in sorted(symbols.items()) if i != 0 and (s,) not in model]
        if missing and ("<unk>",) not in model:
            raise ValueError(f"{source}: the LM has no unigram for {len(missing)} of the model's units "
                             f"({' '.join(missing[:10])}) and no <unk>: build it over these units")
        self.unknown = set(missing)
        self.cache: dict[tuple[LMState, str], float] = {}

    def log10_prob(self, history: LMState, word: str) -> float:
        key = (history, word)
        if key not in self.cache:
            if word in self.unknown:
                word = "<unk>"
            total = 0.0
            while (history + (word,)) not in self.model:
                if not history:
                    raise KeyError(word)
                total += self.model.get(history, (0.0, 0.0))[1]
                history = history[1:]
            self.cache[key] = total + self.model[history + (word,)][0]
        return self.cache[key]

    def start(self) -> LMState:
        return (BOS,) if self.order > 1 else ()

    def next_state(self, state: LMState, word: str) -> LMState:
        return (state + (word,))[1 - self.order:] if self.order > 1 else ()


@dataclass
class ShallowFusion:
    lm: NgramScorer
    weight: float = 0.5
    length_bonus: float = 0.0

    def extend(self, state: LMState, token: int) -> tuple[float, LMState]:
        """The score a unit adds after `state`, and the state after it."""
        word = self.lm.symbols[token]
        score = self.weight * LN10 * self.lm.log10_prob(state, word) + self.length_bonus
        return score, self.lm.next_state(state, word)

    def end(self, state: LMState) -> float:
        return self.weight * LN10 * self.lm.log10_prob(state, EOS)


def load_fusion(arpa: str, symbols: dict[int, str], weight: float, length_bonus: float) -> ShallowFusion:
    return ShallowFusion(NgramScorer(read_arpa(arpa), symbols, arpa), weight, length_bonus)


def fusion_config_path(exp_dir: str) -> str:
    """Where an experiment keeps its LM's fusion.yaml (steps/tune_lm_fusion.py writes it, decoding reads it)."""
    return os.path.join(exp_dir, "lm", "fusion.yaml")


def write_fusion_config(path: str, arpa: str, weight: float, length_bonus: float, beam: int, chosen_on: str) -> None:
    """fusion.yaml: the ARPA file (a path relative to the yaml's folder), the LM weight and length bonus, and
    the beam they were chosen with."""
    values = {"arpa": os.path.relpath(arpa, os.path.dirname(os.path.abspath(path))), "weight": weight,
              "length_bonus": length_bonus, "beam": beam, "chosen_on": chosen_on}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(values, f, sort_keys=False)


def read_fusion_config(path: str, symbols: dict[int, str]) -> tuple[ShallowFusion, int]:
    """The fusion that fusion.yaml describes, and the beam its weights were chosen with."""
    with open(path, encoding="utf-8") as f:
        values = yaml.safe_load(f) or {}
    missing = {"arpa", "weight", "length_bonus", "beam"} - set(values)
    if missing:
        raise ValueError(f"{path}: missing {', '.join(sorted(missing))}")
    arpa = os.path.join(os.path.dirname(os.path.abspath(path)), values["arpa"])
    return load_fusion(arpa, symbols, float(values["weight"]), float(values["length_bonus"])), int(values["beam"])

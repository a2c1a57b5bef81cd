"""Shallow fusion: a search adds weight * ln p_LM(unit | units before it) + length_bonus for every unit
it emits, and weight * ln p_LM(</s> | the last units) when a hypothesis ends. The LM is an ARPA model
whose words are the model's unit symbols (steps/build_ngram_lm.py writes one); an LM over words is
searched through a lexicon instead (rnnt.lm.lexicon_search), both behind the same three calls."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Protocol

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


class Fusion(Protocol):
    """What rnnt.ctc_search asks of an LM: its start state; the states a unit may lead to, each with the
    score it adds (none: the unit is not allowed there); the score of ending in a state, with the words
    the LM chose (None: the units spell the text)."""

    def start(self) -> object: ...

    def expansions(self, state, token: int) -> list[tuple[float, object]]: ...

    def finish(self, state) -> list[tuple[float, list[str] | None]]: ...


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

    # The Fusion interface: a unit leads to one state here (the LM's history follows from the units).
    def start(self) -> LMState:
        return self.lm.start()

    def expansions(self, state: LMState, token: int) -> list[tuple[float, LMState]]:
        return [self.extend(state, token)]

    def finish(self, state: LMState) -> list[tuple[float, None]]:
        return [(self.end(state), None)]


OVER = ("units", "words")  # what an LM's words are: the model's units, or words (searched through a lexicon)


def load_fusion(arpa: str, tokenizer, weight: float, length_bonus: float, over: str = "units") -> Fusion:
    """The fusion of an ARPA LM for a model with `tokenizer`'s units: a ShallowFusion over the units, or
    (over="words") a rnnt.lm.lexicon_search.WordLexiconFusion."""
    if over not in OVER:
        raise ValueError(f"{arpa}: an LM is over one of {OVER}, not '{over}'")
    model = read_arpa(arpa)
    if over == "words":
        from rnnt.lm.lexicon_search import load_word_fusion  # it builds on this module

        return load_word_fusion(model, tokenizer, arpa, weight, length_bonus)
    return ShallowFusion(NgramScorer(model, tokenizer.symbols, arpa), weight, length_bonus)


def fusion_config_path(exp_dir: str) -> str:
    """Where an experiment keeps its LM's fusion.yaml (steps/tune_lm_fusion.py writes it, decoding reads it)."""
    return os.path.join(exp_dir, "lm", "fusion.yaml")


def write_fusion_config(path: str, arpa: str, over: str, weight: float, length_bonus: float, beam: int,
                        chosen_on: str) -> None:
    """fusion.yaml: the ARPA file (a path relative to the yaml's folder), what its words are (units or words),
    the LM weight and length bonus, and the beam they were chosen with."""
    values = {"arpa": os.path.relpath(arpa, os.path.dirname(os.path.abspath(path))), "over": over, "weight": weight,
              "length_bonus": length_bonus, "beam": beam, "chosen_on": chosen_on}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(values, f, sort_keys=False)


def read_fusion_config(path: str, tokenizer) -> tuple[Fusion, int]:
    """The fusion that fusion.yaml describes, and the beam its weights were chosen with."""
    with open(path, encoding="utf-8") as f:
        values = yaml.safe_load(f) or {}
    missing = {"arpa", "weight", "length_bonus", "beam"} - set(values)
    if missing:
        raise ValueError(f"{path}: missing {', '.join(sorted(missing))}")
    arpa = os.path.join(os.path.dirname(os.path.abspath(path)), values["arpa"])
    fusion = load_fusion(arpa, tokenizer, float(values["weight"]), float(values["length_bonus"]),
                         values.get("over", "units"))
    return fusion, int(values["beam"])

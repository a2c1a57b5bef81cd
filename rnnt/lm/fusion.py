"""Shallow fusion: a search adds weight * ln p_LM(unit | units before it) + length_bonus for every unit
it emits, and weight * ln p_LM(</s> | the last units) when a hypothesis ends. The LM is an ARPA model
whose words are the model's unit symbols (steps/build_ngram_lm.py writes one); an LM over words is
searched through a lexicon instead (rnnt.lm.lexicon_search), both behind the same four calls (Fusion),
as is LODR, an LM's fusion less a low-order LM over the units (LowOrderSubtraction). The CTC prefix beam
search and the transducer searches (rnnt.search_methods: the *_lm and *_lodr methods) fuse any of them."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Protocol

import yaml

from rnnt.config import read_yaml
from rnnt.lm.arpa import read_arpa
from rnnt.lm.kneser_ney import BOS, EOS, IMPOSSIBLE

UNK = "<unk>"  # the LM's word for what it has no unigram of

LN10 = math.log(10.0)
LMState = tuple[str, ...]  # the last (order - 1) words, <s> first at the start
CACHE_ENTRIES = 500_000  # the scores an NgramScorer keeps at most (about 75 MB), then starts again


class NgramScorer:
    """Natural-log probabilities of unit ids from an ARPA model over unit symbols, backing off as ARPA does."""

    def __init__(self, model: dict[tuple[str, ...], tuple[float, float]], symbols: dict[int, str], source: str):
        if (EOS,) not in model:
            raise ValueError(f"{source}: the LM has no unigram for {EOS}, the end of a sentence, which every "
                             "hypothesis is scored with: not an LM over sentences")
        if (UNK,) not in model and ("<UNK>",) in model:  # the CMU toolkit's spelling (AN4's an4.lm): a word before
            model = {tuple(UNK if w == "<UNK>" else w for w in ngram): values for ngram, values in model.items()}
        # A closed-vocabulary LM (SRILM's without -unk) scores the model's <unk> unit as ARPA scores the impossible.
        self.model = model if (UNK,) in model else {**model, (UNK,): (IMPOSSIBLE, 0.0)}
        self.symbols = symbols
        self.order = max(len(ngram) for ngram in model)
        missing = [s for i, s in sorted(symbols.items()) if i != 0 and (s,) not in self.model]
        units = set(symbols.values())
        strangers = sorted(w for (w, *rest) in model if not rest and w not in units and w not in (BOS, EOS, UNK))
        if missing and strangers:  # missing units alone: text that never used them (scored as its <unk>, or as
            # the impossible where a closed vocabulary has none)
            raise ValueError(f"{source}: the LM has no unigram for {len(missing)} of the model's units "
                             f"({' '.join(missing[:10])}) and words that are not units ({' '.join(strangers[:10])})"
                             ": it is over other units; build it over these (steps/build_ngram_lm.py with this "
                             "model's lang dir)")
        self.unknown = set(missing)
        self.cache: dict[tuple[LMState, str], float] = {}

    def log10_prob(self, history: LMState, word: str) -> float:
        key = (history, word)
        if key not in self.cache:
            if word in self.unknown:
                word = UNK
            total = 0.0
            while (history + (word,)) not in self.model:
                if not history:
                    raise KeyError(word)
                total += self.model.get(history, (0.0, 0.0))[1]
                history = history[1:]
            if len(self.cache) >= CACHE_ENTRIES:  # a decode of a large set grew it without end (8 KB a character)
                self.cache.clear()
            self.cache[key] = total + self.model[history + (word,)][0]
        return self.cache[key]

    def start(self) -> LMState:
        return (BOS,) if self.order > 1 else ()

    def next_state(self, state: LMState, word: str) -> LMState:
        """The history after word; a unit the LM does not know is <unk> there too, as KenLM and SRILM read it."""
        word = UNK if word in self.unknown else word
        return (state + (word,))[1 - self.order:] if self.order > 1 else ()


class Fusion(Protocol):
    """What an LM-fused search asks of an LM: its start state; the units with any expansion from a state
    (None: every unit), which a search asks once a hypothesis instead of asking each unit; the states a
    unit may lead to, each with the score it adds (none: the unit is not allowed there); the score of
    ending in a state, with the words the LM chose (None: the units spell the text)."""

    def start(self) -> object: ...

    def allowed(self, state) -> frozenset[int] | None: ...

    def expansions(self, state, token: int) -> list[tuple[float, object]]: ...

    def finish(self, state) -> list[tuple[float, list[str] | None]]: ...


@dataclass
class ShallowFusion:
    lm: NgramScorer
    weight: float = 0.5
    length_bonus: float = 0.0

    def extend(self, state: LMState, token: int) -> tuple[float, LMState]:
        """The score a unit adds after `state`, and the state after it. A sentence marker a model of word units
        emits (<s>, </s>: units of a text that holds them, which steps/build_ngram_lm.py leaves out of the LM's text,
        the LM adding its own) adds nothing and leaves the history: the LM scored <s> as impossible (-99) and </s>
        as a sentence's end in the middle of one."""
        word = self.lm.symbols[token]
        if word in (BOS, EOS):
            return 0.0, state
        score = self.weight * LN10 * self.lm.log10_prob(state, word) + self.length_bonus
        return score, self.lm.next_state(state, word)

    def end(self, state: LMState) -> float:
        return self.weight * LN10 * self.lm.log10_prob(state, EOS)

    # The Fusion interface: a unit leads to one state here (the LM's history follows from the units).
    def start(self) -> LMState:
        return self.lm.start()

    def allowed(self, state: LMState) -> None:
        return None

    def expansions(self, state: LMState, token: int) -> list[tuple[float, LMState]]:
        return [self.extend(state, token)]

    def finish(self, state: LMState) -> list[tuple[float, None]]:
        return [(self.end(state), None)]


@dataclass
class LowOrderSubtraction:
    """An LM's fusion less a low-order n-gram over the units (LODR, Zheng et al. 2022): the low-order LM,
    trained on the same text as the transducer, stands in for the internal LM that the transducer's
    prediction network learnt, so its weighted log-probability of every unit (and of the end) is
    subtracted while the LM's is added. The state is the pair of the two LMs' states."""

    lm: Fusion
    low_order: ShallowFusion  # its weight is the weight subtracted; its length bonus 0

    def start(self) -> tuple:
        return self.lm.start(), self.low_order.start()

    def allowed(self, state: tuple) -> frozenset[int] | None:
        return self.lm.allowed(state[0])

    def expansions(self, state: tuple, token: int) -> list[tuple[float, tuple]]:
        subtracted, low_state = self.low_order.extend(state[1], token)
        return [(score - subtracted, (after, low_state)) for score, after in self.lm.expansions(state[0], token)]

    def finish(self, state: tuple) -> list[tuple[float, list[str] | None]]:
        subtracted = self.low_order.end(state[1])
        return [(score - subtracted, words) for score, words in self.lm.finish(state[0])]


OVER = ("units", "words")  # what an LM's words are: the model's units, or words (searched through a lexicon)


def load_fusion(arpa: str, tokenizer, weight: float, length_bonus: float, over: str = "units",
                lodr_arpa: str | None = None, lodr_weight: float = 0.0) -> Fusion:
    """The fusion of an ARPA LM for a model with `tokenizer`'s units: a ShallowFusion over the units, or
    (over="words") a rnnt.lm.lexicon_search.WordLexiconFusion; with lodr_arpa (a low-order LM over the
    units), that less lodr_weight times it (LowOrderSubtraction)."""
    if over not in OVER:
        raise ValueError(f"{arpa}: an LM is over one of {OVER}, not '{over}'")
    model = read_arpa(arpa)
    if over == "words":
        from rnnt.lm.lexicon_search import load_word_fusion  # it builds on this module

        fusion = load_word_fusion(model, tokenizer, arpa, weight, length_bonus)
    else:
        fusion = ShallowFusion(NgramScorer(model, tokenizer.symbols, arpa), weight, length_bonus)
    if lodr_arpa is None:
        return fusion
    return LowOrderSubtraction(fusion, ShallowFusion(NgramScorer(read_arpa(lodr_arpa), tokenizer.symbols, lodr_arpa),
                                                     lodr_weight))


def fusion_config_path(exp_dir: str, method: str) -> str:
    """Where an experiment keeps the LM of a search method and its weights, <exp_dir>/lm/<method>.yaml
    (steps/tune_lm_fusion.py writes it, decoding reads it)."""
    return os.path.join(exp_dir, "lm", f"{method}.yaml")


@dataclass(frozen=True)
class FusionConfig:
    """What an LM-fused search decodes with: the ARPA file, what its words are (units or words), the LM
    weight and length bonus, the beam they were chosen with, where they were chosen, and for LODR the
    low-order LM over the units and its weight; and the weight of the CTC head's rescoring of a transducer
    search's n-best (rnnt.ctc_rescoring; 0: none); the SHA-256 of the checkpoint they were chosen with."""

    arpa: str
    over: str
    weight: float
    length_bonus: float
    beam: int
    chosen_on: str = ""
    lodr_arpa: str | None = None
    lodr_weight: float = 0.0
    ctc_weight: float = 0.0
    checkpoint_sha256: str = ""

    def load(self, tokenizer) -> Fusion:
        return load_fusion(self.arpa, tokenizer, self.weight, self.length_bonus, self.over, self.lodr_arpa,
                           self.lodr_weight)

    def weigh(self, fusion: Fusion) -> None:
        """Gives a fusion loaded from these LMs these weights (a grid of weights tried on one loaded LM)."""
        lm = fusion.lm if isinstance(fusion, LowOrderSubtraction) else fusion
        lm.weight, lm.length_bonus = self.weight, self.length_bonus
        if isinstance(fusion, LowOrderSubtraction):
            fusion.low_order.weight = self.lodr_weight


def write_fusion_config(path: str, config: FusionConfig) -> None:
    """The yaml of a FusionConfig; its ARPA files are named relative to the yaml's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    values = dataclasses.asdict(config)
    for key in ("arpa", "lodr_arpa"):
        if values[key] is not None:
            values[key] = os.path.relpath(values[key], folder)
    if config.lodr_arpa is None:
        del values["lodr_arpa"], values["lodr_weight"]
    if not config.ctc_weight:
        del values["ctc_weight"]
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(values, f, sort_keys=False)


def read_fusion_config(path: str) -> FusionConfig:
    """The FusionConfig a yaml of write_fusion_config describes."""
    if os.path.isdir(path):
        raise ValueError(f"{path}: a directory, not an LM weights file (lm/<method>.yaml, steps/tune_lm_fusion.py's)")
    if not os.path.isfile(path):  # an LM method decoded before its LM's weights were chosen
        raise ValueError(f"{path}: no LM weights for this method yet: build the LM (steps/build_ngram_lm.py) and "
                         "choose its weights on dev (steps/tune_lm_fusion.py), as a recipe's LM stage does, or "
                         "give a weights file (--lm-fusion)")
    values = read_yaml(path) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of arpa, weight, length_bonus, beam, ...")
    missing = {"arpa", "weight", "length_bonus", "beam"} - set(values)
    if missing:
        raise ValueError(f"{path}: missing {', '.join(sorted(missing))}")
    unknown = set(values) - {field.name for field in dataclasses.fields(FusionConfig)}
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    folder = os.path.dirname(os.path.abspath(path))
    lodr = values.get("lodr_arpa")
    for key in ("arpa", "lodr_arpa"):
        if key in values and not (isinstance(values[key], str) and values[key].strip()):
            raise ValueError(f"{path}: {key} must name an ARPA file (a path, relative to the yaml's folder), "
                             f"got {values[key]!r}")
    for key in ("weight", "length_bonus", "beam", "lodr_weight", "ctc_weight"):
        if key in values and (isinstance(values[key], bool) or not isinstance(values[key], (int, float))
                              or not math.isfinite(values[key])):  # .nan decoded to %WER 1163 in silence
            raise ValueError(f"{path}: {key} must be a finite number, got {values[key]!r}")
    for key in ("weight", "lodr_weight", "ctc_weight"):
        if values.get(key, 0) < 0:
            raise ValueError(f"{path}: {key} must be 0 or more (lodr_weight is subtracted), got {values[key]!r}")
    if values["beam"] != int(values["beam"]) or values["beam"] < 1:
        raise ValueError(f"{path}: beam must be a whole number, 1 or more, got {values['beam']!r}")
    if values.get("over", "units") not in OVER:
        raise ValueError(f"{path}: over must be one of {', '.join(OVER)}, got {values['over']!r}")
    return FusionConfig(os.path.join(folder, values["arpa"]), values.get("over", "units"), float(values["weight"]),
                        float(values["length_bonus"]), int(values["beam"]), str(values.get("chosen_on", "")),
                        os.path.join(folder, lodr) if lodr else None, float(values.get("lodr_weight", 0.0)),
                        float(values.get("ctc_weight", 0.0)), str(values.get("checkpoint_sha256", "")))

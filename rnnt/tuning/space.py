"""A hyper-parameter search: its YAML (what to search, and how), checked before any trial runs.

    trials: 20                     # trials that end complete or pruned (failed ones are not counted)
    minutes_per_trial: 5           # the training-time limit of each trial (0: none)
    pruner: {type: median, startup_trials: 2, warmup_epochs: 1}   # or {type: none}; no pruning before
                                   # epoch warmup_epochs, nor while fewer trials than startup_trials completed
    sampler: {type: tpe, seed: 0, startup_trials: 10}               # tpe or random; tpe draws at random for
                                   # its first startup_trials trials (optuna's default 10): a search of no
                                   # more trials than that is a random search; each trial's draws are
                                   # seeded by seed and its number (no sampler section: seed 0; one
                                   # without seed: unseeded)
    target_wer: 45                 # optional: the objective is the minutes to reach this dev WER (%)
                                   # (as the seed's SDA), not the lowest dev WER within the time limit;
                                   # it takes pruner: {type: none} (epochs of other lengths)
    space:                          # dotted keys of the experiment config
      train.optimizer.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
      train.schedule.warmup_steps: {type: int, low: 0, high: 400, step: 50}
      model.joiner.activation: {type: categorical, choices: [tanh, relu]}

A trial's config is the base experiment config with its sampled values put in at those keys. Before
the first trial, steps/tune.py builds the config and model of each value at a parameter's ends, alone and with
each value at another's (values_to_check), with the base config's others: values the trainer refuses stop the
search there.
With target_wer a trial stops at the first epoch whose dev WER reaches the target, and scores its
training minutes to there; one that does not reach it within minutes_per_trial (needed, then) scores
minutes_per_trial x its best WER / the target, so that it ranks below every trial that reached the
target, and the nearer its WER came, the higher.
"""

from __future__ import annotations

import copy
import itertools
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from rnnt.config import read_yaml

KINDS = {"float": ("low", "high"), "int": ("low", "high"), "categorical": ("choices",)}
OPTIONAL = {"float": ("log", "step"), "int": ("log", "step"), "categorical": ()}
PRUNERS = ("median", "none")
SAMPLERS = ("tpe", "random")
# each section's keys but type, with the whole numbers they take (rnnt.tuning.study reads them): a misspelt one
# was ignored for its default (pruning from epoch 1 for warmup_epoch: 5, an unseeded search for sead: 7)
SECTION_KEYS = {"pruner": ("startup_trials", "warmup_epochs"), "sampler": ("seed", "startup_trials")}


@dataclass(frozen=True)
class Search:
    space: dict[str, dict]
    trials: int = 20
    minutes_per_trial: float = 0.0
    pruner: dict = field(default_factory=lambda: {"type": "median", "startup_trials": 2, "warmup_epochs": 1})
    sampler: dict = field(default_factory=lambda: {"type": "tpe", "seed": 0})
    target_wer: float | None = None

    def score(self, best_wer: float, minutes_to_target: float | None) -> float:
        """A trial's objective (lower is better): its best dev WER, or with target_wer its minutes to the
        target (minutes_to_target; None: not reached, scored as the module's doc says)."""
        if self.target_wer is None:
            return best_wer
        if minutes_to_target is not None:
            return minutes_to_target
        return self.minutes_per_trial * max(best_wer, self.target_wer) / self.target_wer  # never below the limit


def has_key(config: dict, dotted: str) -> bool:
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def with_values(config: dict, values: dict) -> dict:
    """A copy of config with each dotted key set to its value."""
    out = copy.deepcopy(config)
    for dotted, value in values.items():
        *parents, last = dotted.split(".")
        node = out
        for part in parents:
            if not isinstance(node.get(part), dict):  # absent, or left empty (`optimizer:`, its defaults)
                node[part] = {}
            node = node[part]
        node[last] = value
    return out


def _finite(value) -> float | None:
    """value as a finite number (YAML 1.1 reads 1e-4 as a string), else None (.inf made int()'s OverflowError, as a
    traceback; null, a list or a word float()'s TypeError or ValueError, naming neither file nor key)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def check_parameter(path: str, key: str, spec) -> None:
    where = f"{path}: space.{key}"
    if not isinstance(spec, dict) or spec.get("type") not in KINDS:
        raise ValueError(f"{where}: give a mapping with type one of {', '.join(KINDS)}")
    kind = spec["type"]
    missing = [name for name in KINDS[kind] if name not in spec]
    unknown = sorted(set(spec) - {"type", *KINDS[kind], *OPTIONAL[kind]})
    if missing or unknown:
        raise ValueError(f"{where}: {kind} needs {', '.join(KINDS[kind])}"
                         + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    if kind == "categorical" and not (isinstance(spec["choices"], list) and spec["choices"]):
        raise ValueError(f"{where}: choices must be a non-empty list")
    if kind == "categorical":
        return
    low, high = _finite(spec["low"]), _finite(spec["high"])
    if low is None or high is None:
        raise ValueError(f"{where}: low and high must be finite numbers, got {spec['low']!r} and {spec['high']!r}")
    if "step" in spec and _finite(spec["step"]) is None:
        raise ValueError(f"{where}: step must be a finite number, got {spec['step']!r}")
    if not low < high:
        raise ValueError(f"{where}: low ({spec['low']}) must be below high ({spec['high']})")
    if not isinstance(spec.get("log", False), bool):  # a string "false" is true to optuna: a log scale
        raise ValueError(f"{where}: log must be true or false, got {spec['log']!r}")
    whole = [name for name in ("low", "high", "step") if name in spec and float(spec[name]) != int(float(spec[name]))]
    if kind == "int" and whole:  # low 1.5 drew 1, below it; low 0.5 high 0.9 always 0
        raise ValueError(f"{where}: an int's {' and '.join(whole)} must be whole numbers, got "
                         + ", ".join(f"{name} {spec[name]}" for name in whole))
    try:  # what optuna refuses only when a trial draws (log with step, log from 0, step 0): before any trial
        distribution(spec)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


def distribution(spec: dict):
    """The optuna distribution of a float or int parameter's spec."""
    from optuna.distributions import FloatDistribution, IntDistribution

    options = {k: v for k, v in spec.items() if k in OPTIONAL[spec["type"]]}
    if spec["type"] == "float":
        return FloatDistribution(float(spec["low"]), float(spec["high"]), **options)
    return IntDistribution(int(float(spec["low"])), int(float(spec["high"])), **options)


def load_search(path: str, base_config: dict) -> Search:
    """The search in the YAML file at path; every key of its space must exist in base_config (the
    resolved experiment config), so that a typo fails before the first trial, not in it."""
    values = read_yaml(path) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping with a space section")
    unknown = sorted(set(values) - {"space", "trials", "minutes_per_trial", "pruner", "sampler", "target_wer"})
    if unknown:
        raise ValueError(f"{path}: unknown keys {', '.join(unknown)}")
    space = values.get("space")
    if not isinstance(space, dict) or not space:
        raise ValueError(f"{path}: space must map config keys (like train.optimizer.lr) to ranges")
    for key, spec in space.items():
        if not has_key(base_config, key):
            raise ValueError(f"{path}: space.{key} is not a key of the experiment config")
        if key.startswith("paths.") or key == "train.valid_wer":  # paths.valid_list: the test list could choose
            raise ValueError(f"{path}: space.{key}: the data and what trials are scored on are not searched (a "
                             "trial's dev list is tune.py's --valid-list)")
        check_parameter(path, key, spec)
    trials, minutes = values.get("trials", 20), values.get("minutes_per_trial", 0.0)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise ValueError(f"{path}: trials must be a whole number, at least 1, got {trials!r}")
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not 0 <= minutes < math.inf:
        raise ValueError(f"{path}: minutes_per_trial must be a number of minutes, 0 or more, got {minutes!r}")
    search = Search(**values)
    for section, allowed in (("pruner", PRUNERS), ("sampler", SAMPLERS)):
        settings = getattr(search, section)
        if not isinstance(settings, dict) or settings.get("type") not in allowed:
            raise ValueError(f"{path}: {section}.type must be one of {', '.join(allowed)}")
        for key, value in settings.items():
            if key != "type" and key not in SECTION_KEYS[section]:
                raise ValueError(f"{path}: {section}.{key} is not a setting of the {section} (its keys: type, "
                                 f"{', '.join(SECTION_KEYS[section])})")
            if key != "type" and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"{path}: {section}.{key} must be a whole number, 0 or more, got {value!r}")
    target = search.target_wer
    if target is not None and not (isinstance(target, (int, float)) and 0 < target < 100
                                   and search.minutes_per_trial > 0):
        raise ValueError(f"{path}: target_wer must be a WER (%) above 0 and below 100, with minutes_per_trial "
                         "above 0 (the time a trial that misses the target is scored by)")
    if target is not None and search.pruner["type"] != "none":  # it cut the fast epochs' trials (batch 20, bf16)
        raise ValueError(f"{path}: a target_wer search is scored in minutes, and the median pruner compares trials "
                         "epoch by epoch, whose lengths the space changes (batch size, precision): give pruner: "
                         "{type: none} (minutes_per_trial bounds each trial)")
    return search


def values_at_the_ends(spec: dict) -> list:
    """What a trial can draw at a parameter's ends, as suggest draws it: a float's low and high as floats, an
    int's as whole numbers (high as optuna takes it: the last step at or below it), or every choice."""
    if spec["type"] == "categorical":
        return list(spec["choices"])
    with warnings.catch_warnings():  # a high off the steps: optuna warns as the search is loaded, and as it draws
        warnings.simplefilter("ignore")
        drawn = distribution(spec)
    return [drawn.low, drawn.high]


def values_to_check(space: dict[str, dict]) -> Iterator[dict]:
    """The values to try a trial's config with before any trial: each parameter's values at its ends alone
    (values_at_the_ends), then those of every two parameters together (what only two values make: the fused
    loss with a joiner dropout), the base config's for the others."""
    ends = {key: values_at_the_ends(spec) for key, spec in space.items()}
    for key, values in ends.items():
        for value in values:
            yield {key: value}
    for first, second in itertools.combinations(ends, 2):
        for pair in itertools.product(ends[first], ends[second]):
            yield dict(zip((first, second), pair))


def suggest(trial, space: dict[str, dict]) -> dict:
    """The values an optuna trial draws for each key of the space."""
    values = {}
    for key, spec in space.items():
        options = {k: v for k, v in spec.items() if k in OPTIONAL[spec["type"]]}
        if spec["type"] == "float":
            values[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]), **options)
        elif spec["type"] == "int":
            values[key] = trial.suggest_int(key, int(float(spec["low"])), int(float(spec["high"])), **options)
        else:
            values[key] = trial.suggest_categorical(key, spec["choices"])
    return values

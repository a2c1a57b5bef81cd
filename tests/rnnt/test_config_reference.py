"""docs/config.md, the reference of every experiment config key: it is what the generator gives for the
dataclasses as they are, every key has a meaning, every key and default it states is real (a YAML setting
them all loads, to the same values as an empty one), and the recipes' configs use only keys it lists."""

import dataclasses
import re
import typing

import yaml

from conftest import ROOT
from rnnt.config_reference import COMMAND, reference_page
from rnnt.training.config_change import flat
from rnnt.training.experiment import Experiment, load_experiment
from rnnt.tuning.space import with_values

PAGE = ROOT / "docs" / "config.md"
TYPES = {"int": int, "float": (int, float), "str": str, "bool": bool}


def documented(text: str) -> dict[str, dict[str, str]]:
    """Key -> {type, default, meaning, kind} from the page's tables (cells as written, default without
    backticks); kind: the member of a tagged union whose section the row is in ('' for other sections).
    A key two kinds share is listed once per kind: `rows[(kind, key)]` for those, see by_kind."""
    rows, kind = {}, ""
    for line in text.splitlines():
        if line.startswith("## "):
            tagged = re.fullmatch(r"## (\S+) \(kind: (\w+)\)", line)
            kind = tagged.group(2) if tagged else ""
        if line.startswith("| `"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            assert len(cells) == 4, line
            rows[(kind, cells[0].strip("`"))] = {"type": cells[1], "default": cells[2].strip("`"), "meaning": cells[3]}
    return rows


def by_kind(rows: dict) -> dict[str, dict[str, dict[str, str]]]:
    """kind -> key -> row (kind '' holds the keys of the sections that are no tagged union's member)."""
    kinds = {}
    for (kind, key), row in rows.items():
        kinds.setdefault(kind, {})[key] = row
    return kinds


def leaf_keys(cls, prefix: str = "") -> list[str]:
    """The dotted keys of every field of cls that is not itself a dataclass, through nested (or optional) ones."""
    keys = []
    for name, hint in typing.get_type_hints(cls).items():
        path = f"{prefix}.{name}" if prefix else name
        inner = [t for t in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(t)]
        keys += [key for member in inner for key in leaf_keys(member, path)] if inner else [path]
    return sorted(set(keys))


def value_at(experiment, key: str):
    value = experiment
    for part in key.split("."):
        value = getattr(value, part)
    return list(value) if isinstance(value, tuple) else value


def fits(value, type_text: str) -> bool:
    """Whether a value is of the page's readable type (int, list of float, str or null, mapping or null)."""
    if value is None or type_text.startswith("mapping"):
        return type_text.endswith("or null") or type_text.startswith("mapping")
    kind = type_text.removesuffix(" or null")
    if kind.startswith("list of "):
        return isinstance(value, list) and all(fits(v, kind.removeprefix("list of ")) for v in value)
    return isinstance(value, TYPES[kind]) and (kind == "bool" or not isinstance(value, bool))


def load(tmp_path, name: str, values: dict):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    return load_experiment(str(path))


def test_page_is_the_generators_output():
    assert PAGE.is_file() and PAGE.read_text() == reference_page(), \
        f"docs/config.md is not what the config dataclasses give: regenerate it with {COMMAND}"


def test_every_leaf_key_is_documented_with_a_meaning():
    rows = {key: row for (_, key), row in documented(PAGE.read_text()).items()}
    keys = leaf_keys(Experiment)
    assert len(keys) > 80 and "train.keep_whole_epochs" in keys and "data.spec_augment.value" in keys
    missing = [k for k in keys if k not in rows]
    assert not missing, f"keys missing from docs/config.md (regenerate it with {COMMAND}): {missing}"
    without = [k for k in keys if not rows[k]["meaning"]]
    assert not without, f"keys with no meaning: add a comment at the field, then regenerate docs/config.md: {without}"


# Keys an optional section turned on must be given: their default ('') is refused (the lists of recordings)
GIVEN = {"data.noise.wav_scp": "noise.scp", "data.reverb.wav_scp": "rooms.scp"}


def test_every_documented_key_and_default_is_real(tmp_path):
    kinds = by_kind(documented(PAGE.read_text()))
    silent = load(tmp_path, "silent", {})  # an empty YAML is the default experiment
    default_kind = silent.model.encoder.kind
    rows = {**kinds.pop(""), **kinds.pop(default_kind)}
    optional = {k for k in rows if any(other.startswith(f"{k}.") for other in rows)}  # a key and a section
    leaves = {k: yaml.safe_load(row["default"]) for k, row in rows.items() if k not in optional}
    expected = {k: v for k, v in leaves.items() if k not in GIVEN}
    every = load(tmp_path, "every", with_values({}, {**expected, **GIVEN}))  # each key set to its stated default
    defaults = load(tmp_path, "defaults", with_values({}, {**{k: {} for k in optional}, **GIVEN}))  # optional ones on
    wrong = [f"{k}: set to {v!r}, loads as {value_at(every, k)!r}" for k, v in expected.items()
             if value_at(every, k) != v]
    wrong += [f"{k}: the page says {rows[k]['default']}, the default is {value_at(defaults, k)!r}"
              for k, v in expected.items() if value_at(defaults, k) != v]
    wrong += [f"{k}: the page says {rows[k]['default']}, the default is {value_at(silent, k)!r}"
              for k in optional if value_at(silent, k) != yaml.safe_load(rows[k]["default"])]
    wrong += [f"{k}: {rows[k]['default']} is not of type {rows[k]['type']}" for k, value in leaves.items()
              if not fits(value, rows[k]["type"])]
    for kind, kind_rows in kinds.items():  # the other kinds: every key set, against the kind alone
        values = {k: yaml.safe_load(row["default"]) for k, row in kind_rows.items()}
        kind_key = next(k for k in values if k.endswith(".kind"))
        every_of_kind = load(tmp_path, kind, with_values({}, values))
        alone = load(tmp_path, f"{kind}-alone", with_values({}, {kind_key: kind}))
        wrong += [f"{k} ({kind}): set to {v!r}, loads as {value_at(every_of_kind, k)!r}, alone as "
                  f"{value_at(alone, k)!r}" for k, v in values.items()
                  if not value_at(every_of_kind, k) == value_at(alone, k) == v]
        wrong += [f"{k} ({kind}): {kind_rows[k]['default']} is not of type {kind_rows[k]['type']}"
                  for k, value in values.items() if not fits(value, kind_rows[k]["type"])]
    assert not wrong, wrong
    assert every == defaults
    assert len(leaves) > 80 and optional == {"data.spec_augment", "data.noise", "data.reverb"}
    assert default_kind == "lstm" and all(leaves[k] == "" for k in GIVEN)
    assert set(kinds) == {"conformer"} and len(kinds["conformer"]) > 8


def test_recipe_configs_use_only_documented_keys():
    rows = {key for _, key in documented(PAGE.read_text())}
    configs = sorted((ROOT / "egs").glob("*/conf/*.yaml"))
    used = {}
    for path in configs:
        values = yaml.safe_load(path.read_text()) or {}
        # a search (steps/tune.py) names experiment keys in its space; an experiment config sets them
        used[path] = list(values["space"]) if "space" in values else list(flat(values))
    unknown = {str(p.relative_to(ROOT)): [k for k in keys if k not in rows] for p, keys in used.items()}
    assert not any(unknown.values()), {p: keys for p, keys in unknown.items() if keys}
    assert len(configs) > 10 and sum(len(keys) for keys in used.values()) > 100

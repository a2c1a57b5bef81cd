"""Typed configs from YAML mappings: nested dataclasses, defaults, and unknown keys as errors.

A field typed as a union of dataclasses (`encoder: LSTMEncoderConfig | ConformerConfig`) is a tagged
union: each member has a `kind` field whose default names it, and the mapping's `kind` picks the member
(left out: the first member)."""

from __future__ import annotations

import dataclasses
import typing


def from_dict(cls, values, where: str):
    """An instance of dataclass cls from a mapping; nested dataclass fields from nested mappings."""
    if values is None:
        return cls()
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; known keys are {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        kinds = dataclasses_in(hints[key])
        if kinds and (value is None or isinstance(value, dict)):
            kwargs[key] = None if value is None else from_dict(member_of(kinds, value, f"{where}.{key}"), value,
                                                               f"{where}.{key}")
        elif typing.get_origin(hints[key]) is tuple:
            kwargs[key] = tuple(value or ())
        else:
            kwargs[key] = value
    return cls(**kwargs)


def dataclasses_in(hint) -> list[type]:
    """The dataclass types of a field hint: [X] for X or X | None, [X, Y] for X | Y; [] for other types."""
    if dataclasses.is_dataclass(hint):
        return [hint]
    return [arg for arg in typing.get_args(hint) if dataclasses.is_dataclass(arg)]


def kind_of(cls) -> str:
    """The name a tagged union's member answers to: the default of its `kind` field."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == "kind")


def member_of(kinds: list[type], values: dict | None, where: str) -> type:
    """The dataclass of kinds that the mapping's `kind` names (the first when it names none)."""
    if len(kinds) == 1:
        return kinds[0]
    by_name = {kind_of(cls): cls for cls in kinds}
    name = (values or {}).get("kind", kind_of(kinds[0]))
    if name not in by_name:
        raise ValueError(f"{where}.kind: unknown kind {name!r}; known kinds are {sorted(by_name)}")
    return by_name[name]


def to_dict(config) -> dict:
    """The plain mapping of a config (tuples as lists), for saving as YAML."""
    def plain(value):
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(dataclasses.asdict(config))

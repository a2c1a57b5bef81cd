"""Typed configs from YAML mappings: nested dataclasses, defaults, and unknown keys as errors."""

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
        kind = _dataclass_in(hints[key])
        if kind is not None and (value is None or isinstance(value, dict)):
            kwargs[key] = None if value is None else from_dict(kind, value, f"{where}.{key}")
        elif typing.get_origin(hints[key]) is tuple:
            kwargs[key] = tuple(value or ())
        else:
            kwargs[key] = value
    return cls(**kwargs)


def _dataclass_in(hint):
    """The dataclass type of a field hint (X, or X | None), else None."""
    if dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def to_dict(config) -> dict:
    """The plain mapping of a config (tuples as lists), for saving as YAML."""
    def plain(value):
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(dataclasses.asdict(config))

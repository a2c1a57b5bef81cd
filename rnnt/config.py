"""Typed configs from YAML mappings: nested dataclasses, defaults, and unknown keys as errors.

A field typed as a union of dataclasses (`encoder: LSTMEncoderConfig | ConformerConfig`) is a tagged
union: each member has a `kind` field whose default names it, and the mapping's `kind` picks the member
(left out: the first member)."""

from __future__ import annotations

import dataclasses
import math
import types
import typing

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (safe_load keeps the last in silence:
    a second `train:` block would drop the whole first one)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: merged (the keys written win), not
                continue  # built here (it was refused as 'not valid YAML')
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key '{key}' is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def read_yaml(path: str):
    """The YAML document at path (None for an empty file); a malformed one, one that gives a key twice, or one
    that is not UTF-8, is a ValueError naming the file and the line (and column) at fault."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:  # a comment saved in another encoding (cp1252's é)
        line = raw[:error.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: byte 0x{raw[error.start]:02x} is not UTF-8; save the file as UTF-8") from None
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"{where}: not valid YAML ({problem})") from None


def from_dict(cls, values, where: str):
    """An instance of dataclass cls from a mapping (None or empty: the defaults); nested dataclass fields
    from nested mappings; every value checked against its field's type, a mistake named by its dotted key."""
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
        if kinds:
            optional = type(None) in typing.get_args(hints[key])
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{where}.{key}: expected a mapping{' or nothing' if optional else ''}, got {value!r}")
            kwargs[key] = None if value is None and optional else \
                from_dict(member_of(kinds, value, f"{where}.{key}"), value, f"{where}.{key}")
        else:
            kwargs[key] = checked(value, hints[key], f"{where}.{key}")
    return cls(**kwargs)


def checked(value, hint, where: str):
    """value as a field of type hint takes it, or a ValueError naming where. A float field takes a number
    YAML left as a string (YAML 1.1 reads 1e-5 as one; 1.0e-5 is a number)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (hint,) = [arg for arg in args if arg is not type(None)]
        args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        return tuple(checked(item, args[0] if args else typing.Any, f"{where}[{i}]") for i, item in enumerate(value))
    if hint is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if hint is float and isinstance(value, float) and math.isnan(value):  # no setting is NaN: every check passed it
        raise ValueError(f"{where}: expected a number, got {value!r}")
    wanted = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}.get(hint)
    if wanted and (not isinstance(value, wanted) or (hint is not bool and isinstance(value, bool))):
        what = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}[hint]
        raise ValueError(f"{where}: expected {what}, got {value!r}")
    return value


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

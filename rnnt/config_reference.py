"""The reference of every experiment config key (docs/config.md), generated from the config dataclasses so
that it cannot drift: the sections and keys by walking Experiment's field types, as rnnt.config.from_dict
reads them, and each key's meaning from the comments at its field in the source.

A field's meaning is its trailing comment with the comment lines directly below it (a continuation), or,
where the field has no trailing comment, the comment lines directly above it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import types
import typing
from dataclasses import dataclass

import yaml

from rnnt.config import dataclasses_in, kind_of
from rnnt.training.experiment import Experiment

COMMAND = "tools/venv/bin/python utils/config_reference.py --output docs/config.md"

INTRO = f"""\
# Experiment config reference

An experiment is one YAML file (egs/*/conf/*.yaml, given to steps/train.py) with up to four sections:
`model`, `data`, `train` and `paths`, each a mapping nested as the keys below are dotted
(`model.encoder.hidden` is `hidden` in `encoder` in `model`). `load_experiment`
(rnnt/training/experiment.py) refuses an unknown key or section, naming the known ones, a value not of
its key's type below (a float takes `1e-5`, which YAML alone reads as a string), a key given twice and
broken YAML, each by the file and the dotted key or line; a key left out takes its default, and so does
a section left out or left empty. Some keys must agree with each other, so a config
sets them together: `model.encoder.input_dim` is `data.stack` x `data.features.num_mel_bins`. Training
saves the resolved config, every key in it, as config.yaml in the experiment dir.

This page is generated from the config dataclasses; after changing one, regenerate it from the
repository root with `{COMMAND}`.
"""


@dataclass(frozen=True)
class Key:
    path: str  # as written in YAML, dotted: model.encoder.hidden
    type: str  # readable: int, list of float, mapping or null
    default: str  # as YAML writes it
    meaning: str


@dataclass(frozen=True)
class Section:
    path: str  # model.encoder
    cls: type
    intro: str
    keys: tuple[Key, ...]


def sections(cls: type = Experiment, prefix: str = "") -> list[Section]:
    """The sections below cls, depth first in field order; a section that is optional (X | None) is also
    a key of its parent, which may be null."""
    hints = typing.get_type_hints(cls)
    meanings = field_meanings(cls)
    keys, nested = [], []
    for f in dataclasses.fields(cls):
        path = f"{prefix}.{f.name}" if prefix else f.name
        inner = dataclasses_in(hints[f.name])
        optional = type(None) in typing.get_args(hints[f.name])
        if not inner or optional:
            keys.append(Key(path, type_name(hints[f.name]), yaml_text(default_of(f)), meanings.get(f.name, "")))
        for member in inner:
            nested += sections_of(member, path, optional and default_of(f) is None, tagged=len(inner) > 1)
    return ([Section(prefix, cls, class_intro(cls), tuple(keys))] if keys else []) + nested


def sections_of(cls: type, path: str, optional: bool, tagged: bool = False) -> list[Section]:
    """The sections at path; an optional one's intro says how it is turned on, and a member of a tagged
    union (rnnt.config) is titled by its kind."""
    found = sections(cls, path)
    if found and found[0].path == path:
        notes = []
        if tagged:
            notes.append(f"With `{path}.kind: {kind_of(cls)}`; the keys of one kind may not be given to another.")
        if optional:
            notes.append(f"Off unless given: `{path}: null` (the default) leaves it out; a mapping, even `{{}}`, "
                         "turns it on with the defaults below.")
        title = f"{path} (kind: {kind_of(cls)})" if tagged else path
        found[0] = dataclasses.replace(found[0], path=title, intro="\n\n".join([found[0].intro, *notes]).strip())
    return found


def default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise ValueError(f"config field {f.name} has no default: a YAML that leaves it out could not load")


def yaml_text(value) -> str:
    """The value as YAML writes it in flow style (tuples as lists): 0.001, [0.9, 0.999], null, ''."""
    plain = list(value) if isinstance(value, tuple) else value
    text = yaml.safe_dump(plain, default_flow_style=True, width=1_000_000).strip()
    return text.removesuffix("...").strip()


def type_name(hint) -> str:
    """A readable name of a field's type: int, float, str, bool, list of float, str or null, mapping."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        named = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(named + (["null"] if type(None) in args else []))
    if origin in (tuple, list):
        return f"list of {type_name(args[0])}"
    if origin is dict or hint is dict or dataclasses.is_dataclass(hint):
        return "mapping"
    if hint in (int, float, str, bool):
        return hint.__name__
    raise TypeError(f"no readable name for the config type {hint!r}: add one to rnnt.config_reference.type_name")


def class_intro(cls: type) -> str:
    """The first paragraph of the class's docstring (if any), then where the class is defined."""
    doc = ast.get_docstring(_class_node(textwrap.dedent(inspect.getsource(cls)))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    where = f"Defined by `{cls.__name__}` in {cls.__module__.replace('.', '/')}.py."
    return f"{first} {where}".strip()


def _class_node(source: str) -> ast.ClassDef:
    return next(node for node in ast.parse(source).body if isinstance(node, ast.ClassDef))


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Line -> (the comment's text, whether the comment is alone on its line), read with tokenize."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            found[row] = (token.string.lstrip("#").strip(), not token.line[:column].strip())
    return found


def field_meanings(cls: type) -> dict[str, str]:
    """Field name -> the comment that explains it (see the module docstring), for every commented field,
    those it inherits from dataclasses it extends included."""
    meanings = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base) and "__dataclass_fields__" in vars(base):
            meanings.update(own_field_meanings(base))
    return meanings


def own_field_meanings(cls: type) -> dict[str, str]:
    """field_meanings of the fields cls's own source defines."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments = _comments(source)
    fields = [node for node in _class_node(source).body
              if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)]
    meanings, continued = {}, set()
    for node in fields:
        trailing = [comments[row][0] for row in range(node.lineno, node.end_lineno + 1)
                    if row in comments and not comments[row][1]]
        if trailing:
            row = node.end_lineno + 1
            while row in comments and comments[row][1]:
                trailing.append(comments[row][0])
                continued.add(row)
                row += 1
        above, row = [], node.lineno - 1
        while not trailing and row in comments and comments[row][1] and row not in continued:
            above.insert(0, comments[row][0])
            row -= 1
        text = " ".join(part for part in above + trailing if part)
        if text:
            meanings[node.target.id] = text
    return meanings


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(found: list[Section]) -> str:
    """The markdown page: the introduction, then a table of keys per section."""
    parts = [INTRO.rstrip("\n")]
    for section in found:
        parts.append(f"\n## {section.path}\n\n{section.intro}\n\n| key | type | default | meaning |\n|---|---|---|---|")
        parts += [f"| `{key.path}` | {_cell(key.type)} | `{_cell(key.default)}` | {_cell(key.meaning)} |"
                  for key in section.keys]
    return "\n".join(parts) + "\n"


def reference_page() -> str:
    return render(sections())

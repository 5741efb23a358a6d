"""The configuration reference (`docs/configuration.md`), written from the dataclasses themselves.

Every configuration file the project reads goes through one loader (`asynctrain.components.shared.yaml_config`) into
frozen dataclasses whose `Attributes:` docstrings document each field. This module walks those
dataclasses from each file's root (`PipelineConfig`, `FeatureConfig`, `TFJobSettings`) and writes
one table per section: every field with its type, its default (or `required`), its allowed values
and its documentation. Allowed values come from the constant a field's documentation names
("One of `OPTIMIZERS`"), read from the field's own module, so the page cannot list a value the
code no longer accepts. `asynctrain docs` writes the page; a test fails when the committed page
differs from `render()`.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any, Union

from asynctrain.components.trainer.kubernetes.values import TFJobSettings
from asynctrain.components.transform.feature_config import FeatureConfig
from asynctrain.docs_generation import markdown
from asynctrain.pipelines.config import PipelineConfig

# (root dataclass, the file it reads, what the file is): one part of the page each.
FILES = (
    (
        PipelineConfig,
        'config.yaml',
        'The pipeline config (`asynctrain run --config`, `asynctrain compile --config`): every '
        'key is optional. `trainer:` alone is also what `asynctrain train --config` reads.',
    ),
    (
        FeatureConfig,
        'features.yaml',
        "A dataset's preprocessing (`asynctrain/schemas/<dataset>/features.yaml`, or the spec folder "
        '`asynctrain init` writes): the label and one entry per feature.',
    ),
    (
        TFJobSettings,
        'tfjob-values.yaml',
        'The TFJob values file (`trainer.kubernetes.tfjob_values`, by default '
        '`kubeflow/tfjob-values.yaml`): the cluster settings of the `tfjob` cluster mode.',
    ),
)
# Fields whose documentation spells the allowed values out in words: the constant that holds them,
# in the field's own module. Every other choice field names its constant ("One of `X`").
ALLOWED_CONSTANTS = {
    ('LabelSettings', 'task'): 'TASK_TYPES',
    ('LabelSettings', 'loss'): 'REGRESSION_LOSSES',
    ('EvaluationSettings', 'baseline'): 'BASELINES',
    ('EvaluationSettings', 'confidence_interval_method'): 'CONFIDENCE_INTERVAL_METHODS',
    ('ReplicaSettings', 'restartPolicy'): 'RESTART_POLICIES',
    ('TFJobSettings', 'replicas'): 'REPLICA_TYPES',
}
REQUIRED = 'required'
_ONE_OF = re.compile(r'\b[Oo]ne of `([A-Z][A-Z0-9_]+)`')
_ATTRIBUTE = re.compile(r'^(\w+): ?(.*)$')


@dataclasses.dataclass(frozen=True)
class Field:
    """One documented field of a configuration section.

    Attributes:
      name: The key as written in the file.
      type: The YAML type, in words (`int`, `list of str`, `str or null`, a section's name).
      default: The default as YAML; `required`; empty for a section (its own fields have them).
      allowed: The values the field accepts when they are a fixed set; empty otherwise.
      doc: The field's documentation from the `Attributes:` block, on one line.
    """

    name: str
    type: str
    default: str
    allowed: tuple[str, ...]
    doc: str


@dataclasses.dataclass(frozen=True)
class Section:
    """One dataclass of a configuration file, at its key path.

    Attributes:
      path: The key path from the file's root (`trainer.training`); empty for the root.
      cls: The dataclass.
      fields: Its fields, in declaration order.
    """

    path: str
    cls: type
    fields: tuple[Field, ...]


def attribute_docs(cls: type) -> dict[str, str]:
    """Each field's text from the `Attributes:` block of `cls`'s docstring, joined onto one line."""
    docs: dict[str, str] = {}
    lines = inspect.cleandoc(cls.__doc__ or '').splitlines()
    try:
        start = lines.index('Attributes:') + 1
    except ValueError:
        return docs
    name = None
    for line in lines[start:]:
        if not line.strip():
            break
        text = line.strip()
        match = _ATTRIBUTE.match(text)
        if match and not line.startswith('    '):
            name = match.group(1)
            docs[name] = match.group(2)
        elif name is not None:
            docs[name] += ' ' + text
    return docs


def _nested(tp: Any) -> list[type]:
    """The dataclasses inside an annotation (`X | None`, `tuple[X, ...]`, `dict[str, X]`)."""
    if dataclasses.is_dataclass(tp):
        return [tp]
    return [cls for arg in typing.get_args(tp) for cls in _nested(arg)]


def type_name(tp: Any) -> str:
    """An annotation in YAML's words."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        names = [type_name(a) for a in args if a is not type(None)]
        return ' or '.join(names) + (' or null' if type(None) in args else '')
    if origin is tuple:
        return f'list of {type_name(typing.get_args(tp)[0])}'
    if origin is dict or tp is dict:
        args = typing.get_args(tp)
        return f'mapping of {type_name(args[0])} to {type_name(args[1])}' if args else 'mapping'
    if dataclasses.is_dataclass(tp):
        return f'section `{tp.__name__}`'
    return getattr(tp, '__name__', str(tp))


def yaml_value(value: Any) -> str:
    """A default as it would be written in the YAML file."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (tuple, list)):
        return '[' + ', '.join(yaml_value(v) for v in value) + ']'
    if isinstance(value, dict):
        return '{' + ', '.join(f'{k}: {yaml_value(v)}' for k, v in value.items()) + '}'
    return repr(value)


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return yaml_value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        return '' if dataclasses.is_dataclass(value) else yaml_value(value)
    return REQUIRED


def allowed_values(cls: type, name: str, doc: str) -> tuple[str, ...]:
    """The fixed set of values field `name` of `cls` accepts, from the constant its documentation
    names (or `ALLOWED_CONSTANTS`), looked up in `cls`'s module; empty when it has none."""
    tp = typing.get_type_hints(cls)[name]
    if typing.get_origin(tp) is typing.Literal:
        return tuple(str(v) for v in typing.get_args(tp))
    match = _ONE_OF.search(doc)
    constant = ALLOWED_CONSTANTS.get((cls.__name__, name)) or (match and match.group(1))
    if not constant:
        return ()
    values = getattr(sys.modules[cls.__module__], constant)
    return tuple(str(v) for v in values)


def sections(root: type, file: str) -> Iterator[Section]:
    """Every section of `file`, rooted at dataclass `root`, depth first, each once."""
    seen: set[type] = set()

    def walk(cls: type, path: str) -> Iterator[Section]:
        seen.add(cls)
        docs = attribute_docs(cls)
        hints = typing.get_type_hints(cls)
        fields, children = [], []
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            doc = docs.get(field.name, '')
            tp = hints[field.name]
            nested = [c for c in _nested(tp) if c not in seen]
            key = field.name + {tuple: '[]', dict: '.<key>'}.get(typing.get_origin(tp), '')
            links = []
            for child in nested:
                child_path = f'{path}.{key}' if path else key
                if len(nested) > 1:
                    child_path += f' ({child.__name__})'
                children.append((child, child_path))
                links.append(f'[{child.__name__}](#{markdown.anchor(title(file, child_path))})')
            kind = type_name(tp)
            for child in nested:
                kind = kind.replace(f'section `{child.__name__}`', 'section')
            fields.append(
                Field(
                    name=field.name,
                    type=kind + (': ' + ', '.join(links) if links else ''),
                    default=_default(field),
                    allowed=allowed_values(cls, field.name, doc),
                    doc=doc,
                )
            )
        yield Section(path, cls, tuple(fields))
        for child, child_path in children:
            yield from walk(child, child_path)

    yield from walk(root, '')


def _cell(text: str) -> str:
    return text.replace('|', '\\|')


def title(file: str, path: str) -> str:
    """A section's heading: the file and the key path."""
    return f'{file}: `{path}`' if path else f'{file}: top level'


def render_section(section: Section, file: str) -> list[str]:
    summary = _cell(inspect.cleandoc(section.cls.__doc__ or '').split('\n\n')[0].replace('\n', ' '))
    lines = [
        f'### {title(file, section.path)}',
        '',
        f'{summary} (`{section.cls.__module__}.{section.cls.__name__}`)',
        '',
        '| field | type | default | allowed | what it does |',
        '|---|---|---|---|---|',
    ]
    for field in section.fields:
        allowed = ', '.join(f'`{v}`' for v in field.allowed)
        default = field.default
        if default and default != REQUIRED:
            default = f'`{_cell(default)}`'
        lines.append(
            f'| `{field.name}` | {_cell(field.type)} | {default} | {allowed} | {_cell(field.doc)} |'
        )
    return lines + ['']


def render() -> str:
    """The whole page."""
    lines = [
        '# Configuration reference',
        '',
        '<!-- Generated by `asynctrain docs` from the configuration dataclasses; do not edit. -->',
        '',
        'Every configuration file is YAML read by one loader (`asynctrain/components/shared/yaml_config.py`) into',
        'frozen dataclasses. Unknown keys, wrong types and values outside the allowed ones fail',
        'before any work starts, with an error naming the file and the field path',
        "(`config.yaml: trainer.training.batch_size: expected int, got 'x'`). A nested section is a",
        'nested mapping: `trainer: {training: {batch_size: 1024}}`. A `list of` field takes a YAML',
        'list.',
        '',
    ]
    parts = [(root, file, about, list(sections(root, file))) for root, file, about in FILES]
    for _, file, _, found in parts:
        links = ', '.join(
            f'[{s.path or "top level"}](#{markdown.anchor(title(file, s.path))})' for s in found
        )
        lines.append(f'- `{file}`: {links}')
    lines.append('')
    for _, file, about, found in parts:
        lines += [f'## {file}', '', about, '']
        for section in found:
            lines += render_section(section, file)
    return '\n'.join(lines).rstrip('\n') + '\n'

"""The one configuration loader: YAML files into frozen dataclasses, with one error type.

Every configuration file of the project goes through here: the pipeline config, its `trainer:`
section, a dataset's `features.yaml` and the TFJob values file. A field is typed by its
annotation (`int`, `float`, `str`, `bool`, `tuple[...]`, `X | None`, `Literal[...]`, a nested
dataclass); each dataclass checks its own values in `__post_init__` by calling `fail` with the field's
whole path from the root of its file. Any error,
from reading the file to a value out of range, is a `ConfigError` whose message names the file and
the field path, for example:

    runs/config.yaml: trainer.training.batch_size: expected int, got 'big'

A URI (gs://, s3://) is read through `tf.io.gfile`, so that a replica reads the config its
executor wrote to the pipeline's storage; a local path with `open`, which imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import types
import typing
from typing import Any, NoReturn, TypeVar, Union

import yaml

T = TypeVar('T')


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and the field path."""


def fail(where: str, message: str) -> NoReturn:
    """Raises the ConfigError for field path `where` (e.g. `trainer.training.batch_size`)."""
    raise ConfigError(f'{where}: {message}' if where else message)


def _read_text(path: str) -> str:
    if '://' in path:
        import tensorflow as tf

        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        with tf.io.gfile.GFile(path, 'rb') as f:
            return f.read().decode('utf-8')
    with open(path, encoding='utf-8') as f:
        return f.read()


def read_yaml(path: str, what: str = 'config') -> Any:
    """The YAML document at `path` (safe loader), or a ConfigError naming the file and why not."""
    try:
        text = _read_text(path)
    except OSError as e:
        raise ConfigError(f'{path}: cannot read the {what}: {e.strerror or e}') from None
    except UnicodeDecodeError as e:
        raise ConfigError(f'{path}: not UTF-8 text (byte {e.start}): {e.reason}') from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f'{path}: not valid YAML: {e}') from None


def read_mapping(path: str, what: str = 'config', section: str | None = None) -> dict:
    """`read_yaml`, checked to be a mapping (empty file: `{}`); with `section`, the mapping under
    that key when the file has it (a pipeline config's `trainer:`), else the whole file."""
    data = read_yaml(path, what)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: expected a mapping of {what} fields at the top level')
    if section is not None and section in data:
        data = data[section] or {}
        if not isinstance(data, dict):
            raise ConfigError(f'{path}: {section}: expected a mapping')
    return data


def _type_name(tp: Any) -> str:
    return getattr(tp, '__name__', str(tp))


def _convert(value: Any, tp: Any, where: str) -> Any:
    """Checks `value` against the annotation `tp`, building nested dataclasses."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for candidate in inner:
            try:
                return _convert(value, candidate, where)
            except ConfigError as e:
                errors.append(e)
        if len(errors) == 1:
            raise errors[0]
        fail(where, f'expected {" or ".join(_type_name(a) for a in inner)}, got {value!r}')
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            fail(where, f'expected a list, got {type(value).__name__}')
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return tuple(_convert(v, item, f'{where}[{i}]') for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            fail(where, f'expected a mapping, got {type(value).__name__}')
        args = typing.get_args(tp)
        if not args:
            return dict(value)
        return {
            _convert(k, args[0], where): _convert(v, args[1], f'{where}.{k}')
            for k, v in value.items()
        }
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            fail(where, f'got {value!r}; allowed: {list(allowed)}')
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return value  # An int is a float's value; kept as written, so messages quote it as given.
    if tp in (int, float, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            fail(where, f'expected {tp.__name__}, got {value!r}')
        return value
    return value


def build(cls: type[T], data: Any, where: str = '') -> T:
    """Builds dataclass `cls` from a mapping (nested dataclasses from nested mappings).

    Unknown keys, wrong types and what `cls.__post_init__` rejects raise a ConfigError naming the
    field path under `where`; an instance of `cls` passes through.
    """
    if isinstance(data, cls):
        return data
    prefix = f'{where}.' if where else ''
    if not isinstance(data, dict):
        fail(where or 'config', f'expected a mapping, got {type(data).__name__}')
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - fields)
    if unknown:
        fail(f'{prefix}{unknown[0]}', f'unknown field; allowed: {sorted(fields)}')
    required = sorted(
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and f.name not in data
    )
    if required:
        fail(f'{prefix}{required[0]}', 'required field is missing')
    kwargs = {k: _convert(v, hints[k], prefix + k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        # A dataclass's own checks name the whole field path (`trainer.training.batch_size`).
        raise
    except (ValueError, TypeError) as e:
        fail(where or 'config', str(e))


def load(cls: type[T], path: str, what: str = 'config', section: str | None = None) -> T:
    """`build(cls, ...)` from the YAML file at `path`; every error also names the file."""
    data = read_mapping(path, what, section)
    try:
        return build(cls, data)
    except ConfigError as e:
        raise ConfigError(f'{path}: {e}') from None


def to_dict(instance: Any) -> dict:
    """A dataclass as plain JSON-able data (tuples become lists): what `build` reads back."""

    def plain(value):
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(instance))

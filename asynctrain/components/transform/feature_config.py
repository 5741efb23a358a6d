"""The feature configuration (`asynctrain/schemas/<dataset>/features.yaml`): the label and how each raw feature
is preprocessed.

It is read through the project's one loader (`asynctrain.components.shared.yaml_config`) and validated against the
dataset's schema once, when a pipeline is built, so that an unknown feature, an unsupported
transform or a label the data cannot give fails before any work starts, with an error naming the
file and the field.

The label takes one of two forms:

    label: {column: Species, task: multiclass}                 # a column of the data
    label: {column: sex, task: binary, positive: FEMALE}
    label: {column: Body Mass (g), task: regression, loss: huber}
    label: {name: big_tipper, rule: greater_than_fraction,     # derived from two columns (taxi)
            value: tips, reference: fare, fraction: 0.2}
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.shared import yaml_config
from asynctrain.components.shared.feature_types import load_schema
from asynctrain.components.shared.tasks import REGRESSION_LOSSES, TASK_TYPES
from asynctrain.components.transform import datetime_formats
from asynctrain.components.transform.datetime_formats import (
    DATE_PARTS,
    DATETIME_MISSING,
    TIME_PARTS,
)

ZSCORE = 'zscore'
VOCABULARY = 'vocabulary'
IDENTITY = 'identity'
BUCKETIZE = 'bucketize'
HASH = 'hash'
DATETIME = datetime_formats.DATETIME
# The transforms that give one transformed feature under the feature's own name.
TRANSFORMS = (ZSCORE, VOCABULARY, IDENTITY, BUCKETIZE, HASH)
# Every transform features.yaml takes: those, and `datetime`, which gives one feature per part.
ALL_TRANSFORMS = (*TRANSFORMS, DATETIME)

GREATER_THAN_FRACTION = 'greater_than_fraction'
LABEL_RULES = (GREATER_THAN_FRACTION,)

# The tasks and losses are the Trainer's (`trainer.task`), defined once there.
TASKS = TASK_TYPES
BINARY, MULTICLASS, REGRESSION = TASK_TYPES
LOSSES = REGRESSION_LOSSES
MSE, HUBER, MSLE = REGRESSION_LOSSES

_NUMERIC = (schema_pb2.INT, schema_pb2.FLOAT)
# Which raw schema types each transform accepts.
_ACCEPTED_TYPES = {
    ZSCORE: _NUMERIC,
    VOCABULARY: (schema_pb2.BYTES, schema_pb2.INT),
    IDENTITY: (schema_pb2.INT,),
    BUCKETIZE: _NUMERIC,
    HASH: (schema_pb2.BYTES, schema_pb2.INT),
    # Text in a date format, or a number of seconds (milliseconds) since 1970-01-01 UTC.
    DATETIME: (schema_pb2.BYTES, schema_pb2.INT, schema_pb2.FLOAT),
}
# Which raw schema types a label column of each task accepts.
_LABEL_TYPES = {
    BINARY: (schema_pb2.INT, schema_pb2.BYTES),
    MULTICLASS: (schema_pb2.INT, schema_pb2.BYTES),
    REGRESSION: _NUMERIC,
}


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """How one raw feature becomes one transformed feature of the same name.

    Attributes:
      name: The raw feature's name in the schema.
      transform: One of `ALL_TRANSFORMS`.
      fill: For `zscore`: value for a missing feature, `'mean'` (with `log`, the mean of
        log(1 + x)) or a number (in the column's own units, also with `log`).
      log: For `zscore`: standardize log(1 + x) instead of x, for a non-negative column with a
        long right tail (counts, prices, sizes): its mean and standard deviation are no longer
        set by a few large values, and products and ratios of such columns become sums and
        differences a small network forms. A negative value gives -log(1 + |x|), the same curve
        mirrored, so that it stays finite and ordered instead of becoming NaN.
      top_k: For `vocabulary`: keep the top_k most frequent values of the train split; the
        table has top_k + oov_buckets rows whatever `frequency_threshold` keeps (the same shape
        from one run to the next).
      frequency_threshold: For `vocabulary`: keep only values seen at least this many times in
        the train split, the rarer ones sharing the OOV buckets; 0: no threshold.
      oov_buckets: For `vocabulary`: hashed ids for values outside the vocabulary and missing ones.
      num_buckets: For `identity` (ids in [0, num_buckets), anything else -> num_buckets),
        `bucketize` (quantile buckets) and `hash` (a string's fingerprint modulo num_buckets; a
        missing value gets id num_buckets).
      parts: For `datetime`: which of `DATETIME_PARTS` to give; empty: the date's parts
        (`DATE_PARTS`), and `TIME_PARTS` too for a number or a `strptime` with `%H`.
      strptime: For `datetime` on text in another format than ISO 8601 (`2014-03-05`,
        `2014-03-05T08:15:00`, an offset or `Z` accepted and ignored: the wall-clock time is
        kept) or `YYYY/MM/DD [HH:MM[:SS]]`: its strptime format, of the directives
        `STRPTIME_DIRECTIVES` (`%Y` or `%y`, `%m` and `%d` required), e.g. `'%d.%m.%Y %H:%M'`.
      unit: For `datetime` on a number: `seconds` or `milliseconds` since 1970-01-01 UTC.
    """

    name: str
    transform: str
    fill: str | float = 'mean'
    log: bool = False
    top_k: int = 1000
    frequency_threshold: int = 0
    oov_buckets: int = 1
    num_buckets: int = 10
    parts: tuple[str, ...] = ()
    strptime: str = ''
    unit: str = 'seconds'

    @property
    def datetime_parts(self) -> tuple[str, ...]:
        """For `datetime`: the parts given, `parts` or its default."""
        if self.parts:
            return self.parts
        return DATE_PARTS + TIME_PARTS if '%H' in self.strptime else DATE_PARTS

    @property
    def output_names(self) -> tuple[str, ...]:
        """The transformed features this feature gives: its own name, or for `datetime` one
        `<name>_<part>` per part and `<name>_missing`."""
        if self.transform != DATETIME:
            return (self.name,)
        names = []
        for part in self.datetime_parts:
            if part == 'day_of_year_cyclical':
                names += [f'{self.name}_day_of_year_sin', f'{self.name}_day_of_year_cos']
            else:
                names.append(f'{self.name}_{part}')
        return (*names, f'{self.name}_{DATETIME_MISSING}')

    @property
    def is_categorical(self) -> bool:
        return self.transform != ZSCORE

    @property
    def cardinality(self) -> int | None:
        """Number of distinct transformed ids (upper bound), or None for a numeric feature."""
        if self.transform == VOCABULARY:
            return self.top_k + self.oov_buckets
        if self.transform == IDENTITY:
            return self.num_buckets + 1
        if self.transform == BUCKETIZE:
            return self.num_buckets
        if self.transform == HASH:
            return self.num_buckets + 1
        return None


@dataclasses.dataclass(frozen=True)
class ColumnLabel:
    """A label that is a column of the data.

    Attributes:
      column: The raw column (any name the schema has, spaces and parentheses included); the
        transformed label keeps this name.
      task: One of `TASKS`. `binary`: an INT 0/1 column, or an INT or BYTES column whose value
        `positive` means 1 (every other value 0). `multiclass`: an INT or BYTES column, mapped to
        ids 0..C-1 by a vocabulary of the train split. `regression`: a numeric column, as float32.
      positive: For `binary`: the value that means 1 (a string for a BYTES column, an int for an
        INT column); unset when the column already holds 0/1.
      loss: For `regression`: one of `LOSSES`.
    """

    column: str
    task: str
    positive: str | int | None = None
    loss: str = MSE

    @property
    def key(self) -> str:
        """The transformed label's name."""
        return self.column


@dataclasses.dataclass(frozen=True)
class DerivedLabel:
    """A binary label derived from two numeric columns (the taxi sample's `big_tipper`).

    Attributes:
      name: The transformed label's name (an int64 0/1 feature).
      rule: One of `LABEL_RULES`. `greater_than_fraction`: 1 if value > fraction * reference.
      value: Raw feature compared (missing counts as 0).
      reference: Raw feature scaled by `fraction` (missing counts as 0).
      fraction: The scale applied to `reference`.
    """

    name: str
    rule: str
    value: str
    reference: str
    fraction: float

    @property
    def key(self) -> str:
        """The transformed label's name."""
        return self.name

    @property
    def task(self) -> str:
        return BINARY

    @property
    def loss(self) -> str:
        return MSE


LabelSpec = ColumnLabel | DerivedLabel


@dataclasses.dataclass(frozen=True)
class FeatureConfig:
    """A dataset's preprocessing: its label and its features, in order.

    Attributes:
      label: The label; None only when a `preprocessing_module` does the preprocessing and the
        pipeline config names the label.
      features: One entry per transformed feature (may be empty with a `preprocessing_module`).
    """

    label: LabelSpec | None
    features: tuple[FeatureSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The raw features' names, in order (the label's not included); each is also its
        transformed feature's name, but for a `datetime` feature's (see `output_names`)."""
        return tuple(spec.name for spec in self.features)

    @property
    def output_names(self) -> tuple[str, ...]:
        """The transformed features' names, in order (the label's not included)."""
        return tuple(name for spec in self.features for name in spec.output_names)

    def feature(self, name: str) -> FeatureSpec:
        for spec in self.features:
            if spec.name == name:
                return spec
        raise KeyError(name)


_LABEL_FORMS = (
    'expected {column: NAME, task: binary|multiclass|regression} for a label that is a column, '
    'or {name, rule, value, reference, fraction} for a derived label'
)


def build_label(data: Any, where: str = 'label') -> LabelSpec:
    """A ColumnLabel or DerivedLabel from its mapping, by the keys it has (schema not checked)."""
    if isinstance(data, (ColumnLabel, DerivedLabel)):
        return data
    if not isinstance(data, dict):
        yaml_config.fail(where, f'{_LABEL_FORMS}; got {type(data).__name__}')
    if 'column' in data:
        label = yaml_config.build(ColumnLabel, data, where)
    elif 'rule' in data:
        label = yaml_config.build(DerivedLabel, data, where)
    else:
        yaml_config.fail(where, f'{_LABEL_FORMS}; got keys {sorted(data)}')
    if isinstance(label, DerivedLabel) and label.rule not in LABEL_RULES:
        yaml_config.fail(
            f'{where}.rule', f'unsupported rule {label.rule!r}; allowed: {list(LABEL_RULES)}'
        )
    if isinstance(label, ColumnLabel):
        if label.task not in TASKS:
            yaml_config.fail(f'{where}.task', f'got {label.task!r}; allowed: {list(TASKS)}')
        if label.loss not in LOSSES:
            yaml_config.fail(f'{where}.loss', f'got {label.loss!r}; allowed: {list(LOSSES)}')
        if label.loss != MSE and label.task != REGRESSION:
            yaml_config.fail(
                f'{where}.loss', f'only a regression label takes a loss, not {label.task}'
            )
        if label.positive is not None and label.task != BINARY:
            yaml_config.fail(f'{where}.positive', f'only a binary label takes it, not {label.task}')
    return label


def check_label(
    label: LabelSpec,
    schema: schema_pb2.Schema,
    feature_names: tuple[str, ...] = (),
    where: str = 'label',
) -> None:
    """Checks that the schema can give `label`; raises a ConfigError naming the field if not."""
    types = {f.name: f.type for f in schema.feature}
    if isinstance(label, DerivedLabel):
        for key in ('value', 'reference'):
            name = getattr(label, key)
            if types.get(name) not in _NUMERIC:
                yaml_config.fail(
                    f'{where}.{key}', f'{name!r} is not a numeric feature of the schema'
                )
        if label.name in feature_names:
            yaml_config.fail(f'{where}.name', f'{label.name!r} is also a feature name')
        return
    if label.column not in types:
        yaml_config.fail(
            f'{where}.column', f'{label.column!r} is not in the schema; columns: {sorted(types)}'
        )
    kind = types[label.column]
    if kind not in _LABEL_TYPES[label.task]:
        allowed = [schema_pb2.FeatureType.Name(t) for t in _LABEL_TYPES[label.task]]
        yaml_config.fail(
            f'{where}.column',
            f'a {label.task} label must be a column of type {" or ".join(allowed)}; '
            f'{label.column!r} is {schema_pb2.FeatureType.Name(kind)}',
        )
    if label.task == BINARY:
        expected = str if kind == schema_pb2.BYTES else int
        if label.positive is None and kind == schema_pb2.BYTES:
            yaml_config.fail(
                f'{where}.positive',
                f'{label.column!r} holds text: name the value that means 1, e.g. positive: yes',
            )
        if label.positive is not None and (
            not isinstance(label.positive, expected) or isinstance(label.positive, bool)
        ):
            yaml_config.fail(
                f'{where}.positive',
                f'{label.column!r} is {schema_pb2.FeatureType.Name(kind)}: expected '
                f'{"a string (quote it)" if expected is str else "an integer"}, '
                f'got {label.positive!r}',
            )
    if label.column in feature_names:
        yaml_config.fail(
            f'{where}.column', f'{label.column!r} is also a feature: a label cannot be an input'
        )


def _check_feature(spec: FeatureSpec, types: Mapping[str, int], where: str) -> None:
    if spec.name not in types:
        yaml_config.fail(where, f'unknown feature {spec.name!r}: not in the schema')
    if spec.transform not in ALL_TRANSFORMS:
        yaml_config.fail(
            f'{where}: transform',
            f'unsupported transform {spec.transform!r}; allowed: {list(ALL_TRANSFORMS)}',
        )
    if types[spec.name] not in _ACCEPTED_TYPES[spec.transform]:
        yaml_config.fail(
            where,
            f'transform {spec.transform!r} does not accept a '
            f'{schema_pb2.FeatureType.Name(types[spec.name])} feature',
        )
    if spec.transform == ZSCORE and spec.fill != 'mean' and isinstance(spec.fill, str):
        yaml_config.fail(f'{where}: fill', f'expected "mean" or a number, got {spec.fill!r}')
    if spec.log and spec.transform != ZSCORE:
        yaml_config.fail(f'{where}: log', f'only for transform {ZSCORE!r}, not {spec.transform!r}')
    datetime_formats.check(spec, types[spec.name], where)
    for key in ('top_k', 'num_buckets'):
        if getattr(spec, key) < 1:
            yaml_config.fail(f'{where}: {key}', 'expected a positive integer')
    if spec.oov_buckets < 1:
        yaml_config.fail(f'{where}: oov_buckets', 'expected an integer >= 1')
    if spec.frequency_threshold < 0:
        yaml_config.fail(f'{where}: frequency_threshold', 'expected an integer >= 0 (0: none)')
    if spec.frequency_threshold and spec.transform != VOCABULARY:
        yaml_config.fail(
            f'{where}: frequency_threshold',
            f'only for transform {VOCABULARY!r}, not {spec.transform!r}',
        )


def _parse(data: Any, schema: schema_pb2.Schema, with_module: bool) -> FeatureConfig:
    if data is None and with_module:
        data = {}
    if not isinstance(data, dict):
        yaml_config.fail('', 'expected a mapping with the keys "label" and "features"')
    unknown = sorted(set(data) - {'label', 'features'})
    if unknown:
        yaml_config.fail(unknown[0], "unknown field; allowed: ['features', 'label']")
    if not with_module and ('label' not in data or 'features' not in data):
        yaml_config.fail('', 'expected top-level keys "label" and "features"')
    types = {f.name: f.type for f in schema.feature}
    items = data.get('features') or []
    if not isinstance(items, list) or (not items and not with_module):
        yaml_config.fail('features', 'expected a non-empty list')
    specs = []
    for i, item in enumerate(items):
        spec = yaml_config.build(FeatureSpec, item, f'features[{i}]')
        _check_feature(spec, types, f'features[{i}] ({spec.name})')
        specs.append(datetime_formats.with_parts(spec, types[spec.name]))
    names = tuple(s.name for s in specs)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        yaml_config.fail('features', f'listed more than once: {duplicates}')
    datetime_formats.check_output_names(specs, types)
    outputs = tuple(name for s in specs for name in s.output_names)
    label = None
    if data.get('label') is not None:
        label = build_label(data['label'])
        check_label(label, schema, tuple(dict.fromkeys(names + outputs)))
    return FeatureConfig(label=label, features=tuple(specs))


def parse_feature_config(
    data: Any,
    schema: schema_pb2.Schema,
    source: str = '<feature config>',
    with_module: bool = False,
) -> FeatureConfig:
    """Builds a FeatureConfig from parsed YAML and validates it against `schema`.

    With `with_module` (a `preprocessing_module` does the preprocessing) the label and the
    features are optional. Errors are ConfigErrors starting with `source: field path`.
    """
    try:
        return _parse(data, schema, with_module)
    except yaml_config.ConfigError as e:
        raise yaml_config.ConfigError(f'{source}: {e}') from None


def load_feature_config(path: str, schema_path: str, with_module: bool = False) -> FeatureConfig:
    """Reads `features.yaml` and validates it against the schema at `schema_path`.

    With `with_module`, a missing file is an empty configuration (no label, no features).
    """
    return read_feature_config(path, load_schema(schema_path), with_module)


def read_feature_config(
    path: str, schema: schema_pb2.Schema, with_module: bool = False
) -> FeatureConfig:
    """`load_feature_config` against a schema already read."""
    if with_module and not os.path.exists(path) and '://' not in path:
        return FeatureConfig(label=None, features=())
    data = yaml_config.read_yaml(path, 'feature config')
    return parse_feature_config(data, schema, path, with_module)


def to_dict(config: FeatureConfig) -> dict:
    """Plain JSON-able data that `from_dict` reads back (a Transform custom_config carries it)."""
    return yaml_config.to_dict(config)


def from_dict(data: Mapping[str, Any]) -> FeatureConfig:
    """The FeatureConfig `to_dict` wrote."""
    return FeatureConfig(
        label=build_label(data['label']) if data.get('label') is not None else None,
        features=tuple(yaml_config.build(FeatureSpec, f) for f in data.get('features') or ()),
    )

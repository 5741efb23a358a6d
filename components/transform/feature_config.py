"""The feature configuration (`schemas/<dataset>/features.yaml`): how each raw feature is preprocessed.

It is read and validated against the dataset's schema once, when a pipeline is built, so that an
unknown feature or an unsupported transform fails before any work starts, with an error naming it.
"""

from __future__ import annotations

import dataclasses

import yaml
from tensorflow_metadata.proto.v0 import schema_pb2

ZSCORE = 'zscore'
VOCABULARY = 'vocabulary'
IDENTITY = 'identity'
BUCKETIZE = 'bucketize'
TRANSFORMS = (ZSCORE, VOCABULARY, IDENTITY, BUCKETIZE)

GREATER_THAN_FRACTION = 'greater_than_fraction'
LABEL_RULES = (GREATER_THAN_FRACTION,)

_NUMERIC = (schema_pb2.INT, schema_pb2.FLOAT)
# Which raw schema types each transform accepts.
_ACCEPTED_TYPES = {
    ZSCORE: _NUMERIC,
    VOCABULARY: (schema_pb2.BYTES, schema_pb2.INT),
    IDENTITY: (schema_pb2.INT,),
    BUCKETIZE: _NUMERIC,
}


class FeatureConfigError(ValueError):
    """A feature configuration that cannot be used; the message names the field."""


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """How one raw feature becomes one transformed feature of the same name.

    Attributes:
      name: The raw feature's name in the schema.
      transform: One of `TRANSFORMS`.
      fill: For `zscore`: value for a missing feature, `'mean'` or a number.
      top_k: For `vocabulary`: keep the top_k most frequent values of the train split.
      oov_buckets: For `vocabulary`: hashed ids for values outside the vocabulary and missing ones.
      num_buckets: For `identity` (ids in [0, num_buckets), anything else -> num_buckets) and
        `bucketize` (quantile buckets).
    """

    name: str
    transform: str
    fill: str | float = 'mean'
    top_k: int = 1000
    oov_buckets: int = 1
    num_buckets: int = 10

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
        return None


@dataclasses.dataclass(frozen=True)
class LabelSpec:
    """How the label is derived from raw features.

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


@dataclasses.dataclass(frozen=True)
class FeatureConfig:
    """A dataset's preprocessing: its label and its features, in order.

    Attributes:
      label: How the label is derived.
      features: One entry per transformed feature.
    """

    label: LabelSpec
    features: tuple[FeatureSpec, ...]

    def feature(self, name: str) -> FeatureSpec:
        for spec in self.features:
            if spec.name == name:
                return spec
        raise KeyError(name)


def _build(cls, data, where: str):
    if not isinstance(data, dict):
        raise FeatureConfigError(f'{where}: expected a mapping, got {type(data).__name__}')
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise FeatureConfigError(f'{where}: unknown key(s) {unknown}; allowed: {sorted(fields)}')
    try:
        return cls(**data)
    except TypeError as e:
        raise FeatureConfigError(f'{where}: {e}') from None


def parse_feature_config(
    data: dict, schema: schema_pb2.Schema, source: str = '<feature config>'
) -> FeatureConfig:
    """Builds a FeatureConfig from parsed YAML and validates it against `schema`."""
    if not isinstance(data, dict) or 'label' not in data or 'features' not in data:
        raise FeatureConfigError(f'{source}: expected top-level keys "label" and "features"')
    types = {f.name: f.type for f in schema.feature}
    label = _build(LabelSpec, data['label'], f'{source}: label')
    if label.rule not in LABEL_RULES:
        raise FeatureConfigError(
            f'{source}: label.rule: unsupported rule {label.rule!r}; allowed: {list(LABEL_RULES)}'
        )
    for key in ('value', 'reference'):
        name = getattr(label, key)
        if types.get(name) not in _NUMERIC:
            raise FeatureConfigError(
                f'{source}: label.{key}: {name!r} is not a numeric feature of the schema'
            )
    if not isinstance(data['features'], list) or not data['features']:
        raise FeatureConfigError(f'{source}: features: expected a non-empty list')
    specs = []
    for i, item in enumerate(data['features']):
        where = f'{source}: features[{i}]'
        spec = _build(FeatureSpec, item, where)
        where = f'{where} ({spec.name})'
        if spec.name not in types:
            raise FeatureConfigError(f'{where}: unknown feature {spec.name!r}: not in the schema')
        if spec.transform not in TRANSFORMS:
            raise FeatureConfigError(
                f'{where}: transform: unsupported transform {spec.transform!r}; '
                f'allowed: {list(TRANSFORMS)}'
            )
        if types[spec.name] not in _ACCEPTED_TYPES[spec.transform]:
            raise FeatureConfigError(
                f'{where}: transform {spec.transform!r} does not accept a '
                f'{schema_pb2.FeatureType.Name(types[spec.name])} feature'
            )
        if (
            spec.transform == ZSCORE
            and spec.fill != 'mean'
            and not isinstance(spec.fill, (int, float))
        ):
            raise FeatureConfigError(
                f'{where}: fill: expected "mean" or a number, got {spec.fill!r}'
            )
        for key in ('top_k', 'num_buckets'):
            if not isinstance(getattr(spec, key), int) or getattr(spec, key) < 1:
                raise FeatureConfigError(f'{where}: {key}: expected a positive integer')
        if not isinstance(spec.oov_buckets, int) or spec.oov_buckets < 1:
            raise FeatureConfigError(f'{where}: oov_buckets: expected an integer >= 1')
        specs.append(spec)
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise FeatureConfigError(f'{source}: features: listed more than once: {duplicates}')
    if label.name in names:
        raise FeatureConfigError(f'{source}: label.name: {label.name!r} is also a feature name')
    return FeatureConfig(label=label, features=tuple(specs))


def load_schema(path: str) -> schema_pb2.Schema:
    """Reads a schema text proto (`schemas/<dataset>/schema.pbtxt`)."""
    from google.protobuf import text_format

    try:
        with open(path, encoding='utf-8') as f:
            return text_format.Parse(f.read(), schema_pb2.Schema())
    except OSError as e:
        raise FeatureConfigError(f'{path}: cannot read the schema: {e.strerror}') from None
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise FeatureConfigError(f'{path}: not a valid Schema text proto: {e}') from None


def load_feature_config(path: str, schema_path: str) -> FeatureConfig:
    """Reads `features.yaml` (safe loader) and validates it against the schema at `schema_path`."""
    try:
        with open(path, encoding='utf-8') as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise FeatureConfigError(f'{path}: cannot read the feature config: {e.strerror}') from None
    except yaml.YAMLError as e:
        raise FeatureConfigError(f'{path}: not valid YAML: {e}') from None
    except UnicodeDecodeError as e:
        raise FeatureConfigError(f'{path}: not UTF-8 text (byte {e.start}): {e.reason}') from None
    return parse_feature_config(data, load_schema(schema_path), source=path)

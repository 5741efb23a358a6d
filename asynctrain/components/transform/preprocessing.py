"""The `preprocessing_fn` that stock TFX Transform runs, generated from a FeatureConfig.

Transform analyzes the train split once (means, variances, vocabularies, quantiles), materializes
the transformed examples the Trainer reads, and exports the same graph for serving, so training
never redoes preprocessing. Every transformed feature is a dense rank-1 tensor: float32 for
`zscore`, int64 ids for the categorical transforms, with the id range recorded in the transformed
schema's int_domain so the Trainer can size embeddings from it. A feature keeps its raw name, but
a `datetime` one, which gives one feature per calendar part (`<name>_year`, `<name>_month`, ...).

The label keeps its key (the derived rule's `name`, or the column's own name, spaces and all) and
takes its task's form: int64 0/1 for binary, int64 class ids for multiclass (the class names, in
id order, are the `label_classes` vocabulary the Trainer exports), float32 in the label's units
for regression. A user's `preprocessing_module` gets the label in its `custom_config` and may
call `transform_label` to produce the same thing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import analyzers as tft_analyzers
from tensorflow_transform import schema_inference

from asynctrain.components.shared.tasks import LABEL_VOCABULARY
from asynctrain.components.transform import calendar_parts, datetime_formats, vocabularies
from asynctrain.components.transform import feature_config as fc

# Keys of the Transform component's custom_config: the whole feature configuration (generated
# preprocessing_fn) or only the label (a user's preprocessing_module).
FEATURE_CONFIG_KEY = 'feature_config'
LABEL_KEY = 'label'
Tensor = Any  # tf.Tensor or tf.SparseTensor
# `tft.experimental.approximate_vocabulary` refuses a larger top_k; such vocabularies are
# counted by `tft.vocabulary` in Beam stages of its own, which scale past what one analyzer
# holding every count in memory should.
APPROXIMATE_VOCABULARY_MAX_TOP_K = tft_analyzers.LARGE_VOCAB_TOP_K
# From this many `vocabulary` features on, one analyzer counts them all (`vocabularies`): each
# vocabulary analyzer of TFT's own adds about five Beam stages (85 of them: 447 bundles), but is
# in the analyzer cache, which the shared one is not. The taxi config's six keep TFT's own.
SHARED_VOCABULARIES_FROM = 16


def _present_values(x: Tensor) -> tf.Tensor:
    """The values actually present in a batch, flat (missing features contribute nothing)."""
    if isinstance(x, tf.SparseTensor):
        return x.values
    return tf.reshape(x, [-1])


def _densify(x: Tensor, default) -> tf.Tensor:
    """A [batch] tensor: each example's single value, or `default` where the feature is missing."""
    if isinstance(x, tf.SparseTensor):
        batch = x.dense_shape[0]
        x = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, [batch, 1]),
            default_value=tf.cast(default, x.dtype),
        )
    elif x.shape.rank == 1:
        return x
    return tf.reshape(x, [-1])


def _cast(x: Tensor, dtype: tf.DType) -> Tensor:
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.cast(x.values, dtype), x.dense_shape)
    return tf.cast(x, dtype)


def _signed_log1p(x: tf.Tensor) -> tf.Tensor:
    """log(1 + x) for x >= 0, mirrored (-log(1 + |x|)) below: finite and increasing everywhere."""
    return tf.sign(x) * tf.math.log1p(tf.abs(x))


def _zscore(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    scale = _signed_log1p if spec.log else tf.identity
    values = scale(tf.cast(_present_values(x), tf.float32))
    mean = tft.mean(values)
    std = tf.sqrt(tft.var(values))
    fill = mean if spec.fill == 'mean' else scale(tf.constant(float(spec.fill), tf.float32))
    dense = scale(_densify(_cast(x, tf.float32), 0.0))
    present = _densify(_presence(x), False)
    filled = tf.where(present, dense, fill)
    # A constant column has std 0: it carries no information, so it maps to 0 instead of NaN.
    return tf.where(std > 0, (filled - mean) / tf.where(std > 0, std, 1.0), 0.0)


def _presence(x: Tensor) -> Tensor:
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.bool), x.dense_shape)
    return tf.ones_like(x, tf.bool)


def _as_strings(x: Tensor) -> Tensor:
    if x.dtype == tf.string:
        return x
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.strings.as_string(x.values), x.dense_shape)
    return tf.strings.as_string(x)


def _counted_together(spec: fc.FeatureSpec) -> bool:
    """Whether a `vocabulary` feature's vocabulary comes from the one shared analyzer
    (`vocabularies.vocabulary_files`) rather than a `tft.vocabulary` of its own."""
    return not spec.frequency_threshold and spec.top_k <= APPROXIMATE_VOCABULARY_MAX_TOP_K


def _shared_vocabularies(inputs: Mapping[str, Tensor], config: fc.FeatureConfig) -> dict:
    """The vocabulary file of every `vocabulary` feature counted together, by feature name; none
    below `SHARED_VOCABULARIES_FROM` such features.

    One analyzer for all of them: TFT gives each vocabulary analyzer its own ordering and writing
    stages, and 85 vocabulary columns of 5,822 rows took 75 s to analyze that way. Its counts are
    not in TFT's analyzer cache, so a config with few vocabularies keeps TFT's own analyzers.
    """
    specs = [s for s in config.features if s.transform == fc.VOCABULARY and _counted_together(s)]
    if len(specs) < SHARED_VOCABULARIES_FROM:
        return {}
    files = vocabularies.vocabulary_files(
        [_present_values(_as_strings(inputs[s.name])) for s in specs],
        [s.name for s in specs],
        [s.top_k for s in specs],
    )
    return {s.name: f for s, f in zip(specs, files, strict=True)}


def _vocabulary(x: Tensor, spec: fc.FeatureSpec, vocab: tf.Tensor | None = None) -> tf.Tensor:
    """Ids from `vocab`, the feature's vocabulary file when counted together with others', or
    from an analyzer of its own: the files are `tft.vocabulary`'s either way."""
    strings = _as_strings(x)
    values = _present_values(strings)
    if vocab is None and not _counted_together(spec):
        # The combiner below takes no threshold and refuses a top_k this large; `tft.vocabulary`
        # counts in Beam stages of its own, exactly, which is what a table of this size needs.
        vocab = tft.vocabulary(
            values,
            top_k=spec.top_k,
            frequency_threshold=spec.frequency_threshold or None,
            vocab_filename=spec.name,
        )
    elif vocab is None:
        # TFT's combiner-based vocabulary: counted inside TF and packed with the other analyzers'
        # combiners into one Beam stage, where `tft.vocabulary` counts tokens as Python elements
        # in a dozen stages of its own (Transform on 300 taxi rows: 67 s -> 55 s). Its counts are
        # exact, so the vocabulary is `tft.vocabulary`'s, ties and order included, while a
        # feature's distinct values fit in `top_k` (tests/components/transform/
        # vocabulary_test.py); beyond, its order and rarest tokens may differ, and every token
        # more frequent than rows / top_k is kept.
        vocab = tft.experimental.approximate_vocabulary(
            values, top_k=spec.top_k, vocab_filename=spec.name
        )
    # A missing value is the empty string, which no present value can be (an empty CSV cell is a
    # missing feature), so it lands in an OOV bucket.
    ids = tft.apply_vocabulary(_densify(strings, ''), vocab, num_oov_buckets=spec.oov_buckets)
    return _with_domain(ids, spec.cardinality)


def _identity(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    ids = _densify(_cast(x, tf.int64), -1)
    ids = tf.where(
        (ids >= 0) & (ids < spec.num_buckets), ids, tf.constant(spec.num_buckets, tf.int64)
    )
    return _with_domain(ids, spec.cardinality)


def _bucketize(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    values = tf.cast(_present_values(x), tf.float32)
    mean = tft.mean(values)
    boundaries = tft.quantiles(values, num_buckets=spec.num_buckets, epsilon=0.01)
    dense = _densify(_cast(x, tf.float32), 0.0)
    filled = tf.where(_densify(_presence(x), False), dense, mean)
    ids = tft.apply_buckets(filled, boundaries)
    return _with_domain(tf.minimum(ids, spec.num_buckets - 1), spec.cardinality)


def _hash(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    # No analyzer: a column with very many distinct values (more than a vocabulary could hold
    # usefully) is hashed; a value never seen in training still gets a stable id.
    strings = _densify(_as_strings(x), '')
    ids = tf.strings.to_hash_bucket_fast(strings, spec.num_buckets)
    missing = tf.equal(strings, '')
    ids = tf.where(missing, tf.constant(spec.num_buckets, tf.int64), ids)
    return _with_domain(ids, spec.cardinality)


def _with_domain(ids: tf.Tensor, cardinality: int) -> tf.Tensor:
    schema_inference.set_tensor_schema_override(
        ids, tf.constant(0, tf.int64), tf.constant(cardinality - 1, tf.int64)
    )
    return ids


def _standardized(values: tf.Tensor, valid: tf.Tensor) -> tf.Tensor:
    """(value - mean) / std over the valid values of the train split; 0 (the mean) elsewhere."""
    values = tf.cast(values, tf.float32)
    present = tf.boolean_mask(values, valid)
    mean = tft.mean(present)
    std = tf.sqrt(tft.var(present))
    scaled = tf.where(std > 0, (values - mean) / tf.where(std > 0, std, 1.0), 0.0)
    return tf.where(valid, scaled, 0.0)


def _datetime(x: Tensor, spec: fc.FeatureSpec) -> dict[str, tf.Tensor]:
    """One transformed feature per calendar part (see `datetime_formats.DATETIME_PARTS`) and `_missing`.

    The year and the numeric day of year are standardized over the train split; the cyclical
    day of year is its angle's sine and cosine (31 December next to 1 January); month, day of
    month, day of week, hour and minute are ids. A value that is missing or does not parse gives
    the mean (0) for a numeric part, (0, 0) for the cyclical one, the extra id n for an id part,
    and 1 in `_missing`.
    """
    if x.dtype == tf.string:
        civil = calendar_parts.parse_text(_densify(x, ''), spec.strptime)
    else:
        present = _densify(_presence(x), False)
        civil = calendar_parts.parse_epoch(_densify(x, 0), present, spec.unit)
    valid = civil.valid
    outputs = {}
    for part in spec.datetime_parts:
        if part == 'year':
            # Shifted first: float32 squares of years near 2000 would lose the variance.
            outputs[f'{spec.name}_year'] = _standardized(civil.year - 2000, valid)
        elif part == 'day_of_year':
            outputs[f'{spec.name}_day_of_year'] = _standardized(civil.day_of_year, valid)
        elif part == 'day_of_year_cyclical':
            angle = 2 * math.pi * tf.cast(civil.day_of_year - 1, tf.float32) / 365.25
            outputs[f'{spec.name}_day_of_year_sin'] = tf.where(valid, tf.sin(angle), 0.0)
            outputs[f'{spec.name}_day_of_year_cos'] = tf.where(valid, tf.cos(angle), 0.0)
        else:
            ids = datetime_formats.DATETIME_PART_IDS[part]
            value = getattr(civil, part)
            # Months and days of the month count from 1; every id counts from 0.
            if part in ('month', 'day'):
                value = value - 1
            value = tf.where(valid, value, tf.constant(ids, tf.int64))
            outputs[f'{spec.name}_{part}'] = _with_domain(value, ids + 1)
    outputs[f'{spec.name}_{datetime_formats.DATETIME_MISSING}'] = _with_domain(
        tf.cast(~valid, tf.int64), 2
    )
    return outputs


def _single(transform: Callable[[Tensor, fc.FeatureSpec], tf.Tensor]):
    """A one-feature transform as one that gives a dict, keyed by the feature's own name."""
    return lambda x, spec: {spec.name: transform(x, spec)}


_TRANSFORMS: Mapping[str, Callable[[Tensor, fc.FeatureSpec], dict[str, tf.Tensor]]] = {
    fc.ZSCORE: _single(_zscore),
    fc.VOCABULARY: _single(_vocabulary),
    fc.IDENTITY: _single(_identity),
    fc.BUCKETIZE: _single(_bucketize),
    fc.HASH: _single(_hash),
    fc.DATETIME: _datetime,
}


def _derived_label(inputs: Mapping[str, Tensor], label: fc.DerivedLabel) -> tf.Tensor:
    if label.rule == fc.GREATER_THAN_FRACTION:
        value = _densify(_cast(inputs[label.value], tf.float32), 0.0)
        reference = _densify(_cast(inputs[label.reference], tf.float32), 0.0)
        return tf.cast(value > label.fraction * reference, tf.int64)
    raise ValueError(f'label.rule: unsupported rule {label.rule!r}')


def _column_label(x: Tensor, label: fc.ColumnLabel) -> tf.Tensor:
    # ExampleGen sends a row without its label to the dead letter, so a missing label reaches
    # this graph only when serving scores a raw example that has none: it then becomes -1 (no
    # class) or NaN, never a made-up class or value.
    if label.task == fc.REGRESSION:
        return _densify(_cast(x, tf.float32), float('nan'))
    if label.task == fc.MULTICLASS:
        # Ids 0..C-1 by frequency on the train split; the class names, in id order, are the
        # vocabulary file. A class seen only outside the train split gets -1.
        strings = _as_strings(x)
        classes = tft.vocabulary(_present_values(strings), vocab_filename=LABEL_VOCABULARY)
        return tft.apply_vocabulary(
            _densify(strings, ''), classes, num_oov_buckets=0, default_value=-1
        )
    if label.positive is None:
        return _densify(_cast(x, tf.int64), -1)
    if x.dtype == tf.string:
        is_positive = _densify(x, '') == tf.constant(str(label.positive))
    else:
        is_positive = _densify(_cast(x, tf.int64), 0) == tf.constant(int(label.positive), tf.int64)
    present = _densify(_presence(x), False)
    return tf.where(present, tf.cast(is_positive, tf.int64), tf.constant(-1, tf.int64))


def transform_label(inputs: Mapping[str, Tensor], label: fc.LabelSpec) -> tf.Tensor:
    """The transformed label, a dense [batch] tensor: int64 0/1 (binary), int64 class ids with
    the `LABEL_VOCABULARY` vocabulary (multiclass), or float32 in the label's units (regression).

    A user's `preprocessing_fn` may call it with the label from `label_from_custom_config` so that
    its label is the one the Trainer and Evaluator expect.
    """
    if isinstance(label, fc.DerivedLabel):
        return _derived_label(inputs, label)
    return _column_label(inputs[label.column], label)


def build_preprocessing_fn(config: fc.FeatureConfig) -> Callable[[dict], dict]:
    """Returns a `preprocessing_fn` applying `config` (for tests and in-process use)."""

    def preprocessing_fn(inputs: dict) -> dict:
        outputs = {}
        shared = _shared_vocabularies(inputs, config)
        for spec in config.features:
            if spec.name in shared:
                outputs[spec.name] = _vocabulary(inputs[spec.name], spec, shared[spec.name])
            else:
                outputs.update(_TRANSFORMS[spec.transform](inputs[spec.name], spec))
        outputs[config.label.key] = transform_label(inputs, config.label)
        return outputs

    return preprocessing_fn


def config_to_custom_config(config: fc.FeatureConfig) -> dict:
    """The Transform component's custom_config carrying `config` (plain JSON, no file paths)."""
    return {FEATURE_CONFIG_KEY: fc.to_dict(config)}


def config_from_custom_config(custom_config: Mapping[str, Any]) -> fc.FeatureConfig:
    return fc.from_dict(custom_config[FEATURE_CONFIG_KEY])


def label_to_custom_config(label: fc.LabelSpec) -> dict:
    """The custom_config a user's `preprocessing_fn(inputs, custom_config)` receives."""
    return {LABEL_KEY: dataclasses.asdict(label)}


def label_from_custom_config(custom_config: Mapping[str, Any]) -> fc.LabelSpec:
    """The pipeline's label, in a user's `preprocessing_fn(inputs, custom_config)`."""
    return fc.build_label(custom_config[LABEL_KEY])


def preprocessing_fn(inputs: dict, custom_config: Mapping[str, Any]) -> dict:
    """Entry point for TFX Transform (`preprocessing_fn='asynctrain.components.transform.preprocessing.preprocessing_fn'`).

    The feature configuration arrives validated, in `custom_config`, from the pipeline builder.
    """
    return build_preprocessing_fn(config_from_custom_config(custom_config))(inputs)

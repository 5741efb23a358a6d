"""The `preprocessing_fn` that stock TFX Transform runs, generated from a FeatureConfig.

Transform analyzes the train split once (means, variances, vocabularies, quantiles), materializes
the transformed examples the Trainer reads, and exports the same graph for serving, so training
never redoes preprocessing. Every transformed feature is a dense rank-1 tensor: float32 for
`zscore`, int64 ids for the categorical transforms, with the id range recorded in the transformed
schema's int_domain so the Trainer can size embeddings from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import schema_inference

from components.transform import feature_config as fc

# Key of the feature configuration in the Transform component's custom_config.
FEATURE_CONFIG_KEY = 'feature_config'

Tensor = Any  # tf.Tensor or tf.SparseTensor


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


def _zscore(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    values = tf.cast(_present_values(x), tf.float32)
    mean = tft.mean(values)
    std = tf.sqrt(tft.var(values))
    fill = mean if spec.fill == 'mean' else tf.constant(float(spec.fill), tf.float32)
    dense = _densify(
        tf.cast(x, tf.float32)
        if not isinstance(x, tf.SparseTensor)
        else tf.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape),
        0.0,
    )
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


def _vocabulary(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    strings = _as_strings(x)
    vocab = tft.vocabulary(_present_values(strings), top_k=spec.top_k, vocab_filename=spec.name)
    # A missing value is the empty string, which no present value can be (an empty CSV cell is a
    # missing feature), so it lands in an OOV bucket.
    ids = tft.apply_vocabulary(_densify(strings, ''), vocab, num_oov_buckets=spec.oov_buckets)
    return _with_domain(ids, spec.cardinality)


def _identity(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    ids = _densify(
        tf.cast(x, tf.int64)
        if not isinstance(x, tf.SparseTensor)
        else tf.SparseTensor(x.indices, tf.cast(x.values, tf.int64), x.dense_shape),
        -1,
    )
    ids = tf.where(
        (ids >= 0) & (ids < spec.num_buckets), ids, tf.constant(spec.num_buckets, tf.int64)
    )
    return _with_domain(ids, spec.cardinality)


def _bucketize(x: Tensor, spec: fc.FeatureSpec) -> tf.Tensor:
    values = tf.cast(_present_values(x), tf.float32)
    mean = tft.mean(values)
    boundaries = tft.quantiles(values, num_buckets=spec.num_buckets, epsilon=0.01)
    dense = _densify(
        tf.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape)
        if isinstance(x, tf.SparseTensor)
        else tf.cast(x, tf.float32),
        0.0,
    )
    filled = tf.where(_densify(_presence(x), False), dense, mean)
    ids = tft.apply_buckets(filled, boundaries)
    return _with_domain(tf.minimum(ids, spec.num_buckets - 1), spec.cardinality)


def _with_domain(ids: tf.Tensor, cardinality: int) -> tf.Tensor:
    schema_inference.set_tensor_schema_override(
        ids, tf.constant(0, tf.int64), tf.constant(cardinality - 1, tf.int64)
    )
    return ids


_TRANSFORMS: Mapping[str, Callable[[Tensor, fc.FeatureSpec], tf.Tensor]] = {
    fc.ZSCORE: _zscore,
    fc.VOCABULARY: _vocabulary,
    fc.IDENTITY: _identity,
    fc.BUCKETIZE: _bucketize,
}


def _label(inputs: Mapping[str, Tensor], label: fc.LabelSpec) -> tf.Tensor:
    def as_float(name):
        x = inputs[name]
        if isinstance(x, tf.SparseTensor):
            x = tf.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape)
        else:
            x = tf.cast(x, tf.float32)
        return _densify(x, 0.0)

    if label.rule == fc.GREATER_THAN_FRACTION:
        positive = as_float(label.value) > label.fraction * as_float(label.reference)
        return tf.cast(positive, tf.int64)
    raise ValueError(f'label.rule: unsupported rule {label.rule!r}')


def build_preprocessing_fn(config: fc.FeatureConfig) -> Callable[[dict], dict]:
    """Returns a `preprocessing_fn` applying `config` (for tests and in-process use)."""

    def preprocessing_fn(inputs: dict) -> dict:
        outputs = {
            spec.name: _TRANSFORMS[spec.transform](inputs[spec.name], spec)
            for spec in config.features
        }
        outputs[config.label.name] = _label(inputs, config.label)
        return outputs

    return preprocessing_fn


def config_to_custom_config(config: fc.FeatureConfig) -> dict:
    """The Transform component's custom_config carrying `config` (plain JSON, no file paths)."""
    return {FEATURE_CONFIG_KEY: dataclasses.asdict(config)}


def config_from_custom_config(custom_config: Mapping[str, Any]) -> fc.FeatureConfig:
    data = custom_config[FEATURE_CONFIG_KEY]
    return fc.FeatureConfig(
        label=fc.LabelSpec(**data['label']),
        features=tuple(fc.FeatureSpec(**f) for f in data['features']),
    )


def preprocessing_fn(inputs: dict, custom_config: Mapping[str, Any]) -> dict:
    """Entry point for TFX Transform (`preprocessing_fn='components.transform.preprocessing.preprocessing_fn'`).

    The feature configuration arrives validated, in `custom_config`, from the pipeline builder.
    """
    return build_preprocessing_fn(config_from_custom_config(custom_config))(inputs)

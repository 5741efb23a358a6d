"""The Evaluator's metrics, computed as TFMA computes them, from states that add up.

Each metric of the pipeline's `tfma.EvalConfig` is a tf-keras metric whose variables are sums
(counts, totals, confusion-matrix buckets), so a worker's state for its batches and the state of
the whole split differ only by addition: `Accumulator.update` per batch, `merge_states` across
bundles and workers, `metric_values` once at the end. AUC uses TFMA's default of 10,000
thresholds with interpolated summation.

Only what the pipeline's EvalConfig asks for is supported: the overall slice, unweighted
examples, one output per model. Anything else is refused by name (`metric_specs`), never
silently evaluated differently from TFMA.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

# TFMA's default number of thresholds for AUC (binary_confusion_matrices.DEFAULT_NUM_THRESHOLDS).
AUC_NUM_THRESHOLDS = 10_000
EXAMPLE_COUNT = 'ExampleCount'
EXAMPLE_COUNT_NAME = 'example_count'

# Metric class -> how it reads (labels, predictions): 'column' takes both as [batch, 1] (a
# probability or a regression output), 'sparse' keeps [batch, classes] predictions against [batch]
# class ids, 'count' only counts.
_SHAPES = {
    EXAMPLE_COUNT: 'count',
    'AUC': 'column',
    'BinaryAccuracy': 'column',
    'SparseCategoricalAccuracy': 'sparse',
    'MeanSquaredError': 'column',
    'RootMeanSquaredError': 'column',
}
SUPPORTED_METRICS = tuple(_SHAPES)


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """One metric of the EvalConfig.

    Attributes:
      class_name: The TFMA/Keras class name, one of `SUPPORTED_METRICS`.
      name: The name its value has in the evaluation (`auc`, `accuracy`, ...).
    """

    class_name: str
    name: str


def metric_specs(eval_config) -> tuple[MetricSpec, ...]:
    """The metrics of `eval_config` (a `tfma.EvalConfig`); ValueError names what is unsupported."""
    if any(spec != type(spec)() for spec in eval_config.slicing_specs):
        raise ValueError('eval_config.slicing_specs: only the overall slice ({}) is supported')
    if eval_config.cross_slicing_specs:
        raise ValueError('eval_config.cross_slicing_specs: not supported')
    if eval_config.options.compute_confidence_intervals.value:
        raise ValueError('eval_config.options.compute_confidence_intervals: not supported')
    specs = []
    for index, metrics_spec in enumerate(eval_config.metrics_specs):
        where = f'eval_config.metrics_specs[{index}]'
        if metrics_spec.output_names:
            raise ValueError(f'{where}.output_names: not supported')
        for field in ('binarize', 'aggregate', 'example_weights'):
            if metrics_spec.HasField(field):
                raise ValueError(f'{where}.{field}: not supported')
        for metric in metrics_spec.metrics:
            if metric.class_name not in _SHAPES:
                raise ValueError(
                    f'{where}: metric class {metric.class_name!r} is not supported; expected one '
                    f'of {", ".join(SUPPORTED_METRICS)}'
                )
            config = json.loads(metric.config) if metric.config else {}
            unknown = set(config) - {'name'}
            if unknown:
                raise ValueError(
                    f'{where}: metric {metric.class_name} config keys {sorted(unknown)} are not '
                    'supported (only "name")'
                )
            # TFMA's and Keras' default names differ (`mse` against `mean_squared_error`), so
            # every metric but the count must name itself.
            name = config.get(
                'name', EXAMPLE_COUNT_NAME if metric.class_name == EXAMPLE_COUNT else ''
            )
            if not name:
                raise ValueError(
                    f'{where}: metric {metric.class_name} needs a config with its name, e.g. '
                    '\'{"name": "auc"}\''
                )
            specs.append(MetricSpec(metric.class_name, name))
    names = [spec.name for spec in specs]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f'eval_config.metrics_specs: metric names {duplicated} appear twice')
    return tuple(specs)


def _make_metric(spec: MetricSpec) -> tf.keras.metrics.Metric:
    name = spec.name
    if spec.class_name == EXAMPLE_COUNT:
        return tf.keras.metrics.Sum(name=name, dtype=tf.float64)
    # Accumulated in float64, as TFMA does: float32 sums of squared errors drift by 1e-4 relative
    # over a few thousand examples.
    if spec.class_name == 'AUC':
        return tf.keras.metrics.AUC(num_thresholds=AUC_NUM_THRESHOLDS, name=name, dtype=tf.float64)
    return getattr(tf.keras.metrics, spec.class_name)(name=name, dtype=tf.float64)


# A model's state: metric name -> the values of that metric's variables.
State = dict[str, list[np.ndarray]]


class Accumulator:
    """The metrics of one model, updated batch by batch."""

    def __init__(self, specs: tuple[MetricSpec, ...]):
        self._metrics = {spec.name: (spec, _make_metric(spec)) for spec in specs}

    def update(self, labels: np.ndarray, predictions: np.ndarray) -> None:
        """Adds a batch: `labels` from `transform_features`, `predictions` from the signature."""
        labels = np.asarray(labels)
        predictions = np.asarray(predictions)
        batch = labels.shape[0]
        if predictions.shape[0] != batch:
            raise ValueError(
                f'labels and predictions differ in batch size: {labels.shape} vs {predictions.shape}'
            )
        for spec, metric in self._metrics.values():
            shape = _SHAPES[spec.class_name]
            if shape == 'count':
                metric.update_state(float(batch))
            elif shape == 'column':
                # [batch, 1]: Keras' mean metrics average over the last axis first, so a [batch]
                # vector would count as one example.
                metric.update_state(
                    labels.reshape(batch, -1)[:, :1].astype(np.float64),
                    _one_column(predictions, spec).astype(np.float64),
                )
            else:
                metric.update_state(labels.reshape(batch, -1)[:, 0], predictions.reshape(batch, -1))

    def state(self) -> State:
        return {
            name: [v.numpy() for v in metric.variables]
            for name, (_, metric) in self._metrics.items()
        }


def _one_column(predictions: np.ndarray, spec: MetricSpec) -> np.ndarray:
    flat = predictions.reshape(predictions.shape[0], -1)
    if flat.shape[1] != 1:
        raise ValueError(
            f'metric {spec.name} ({spec.class_name}) needs one prediction per example, got shape '
            f'{predictions.shape}'
        )
    return flat


def merge_states(a: Mapping[str, State], b: Mapping[str, State]) -> dict[str, State]:
    """Adds two {model name: State} maps; a model or metric missing from one is taken as is."""
    merged = {model: dict(state) for model, state in a.items()}
    for model, state in b.items():
        target = merged.setdefault(model, {})
        for name, values in state.items():
            if name in target:
                target[name] = [x + y for x, y in zip(target[name], values)]
            else:
                target[name] = list(values)
    return merged


def metric_values(specs: tuple[MetricSpec, ...], state: State) -> dict[str, float]:
    """{metric name: value} of one model's merged state."""
    values = {}
    for spec in specs:
        metric = _make_metric(spec)
        for variable, value in zip(metric.variables, state[spec.name]):
            variable.assign(value)
        values[spec.name] = float(metric.result().numpy())
    return values

"""The Evaluator's metrics, computed as TFMA computes them, from states that add up.

Each metric of the pipeline's `tfma.EvalConfig` keeps the state its tf-keras metric would keep,
as NumPy sums (counts, totals, confusion-matrix buckets), so a worker's state for its batches and the state of
the whole split differ only by addition: `Accumulator.update` per batch, `merge_states` across
bundles and workers, `metric_values` once at the end. AUC is computed as TFMA computes it, not
as Keras does: a calibration histogram of 10,000 prediction buckets (sums of labels,
predictions and examples per bucket, `np.bincount` per batch), rebinned onto TFMA's 10,000
thresholds and summed by interpolation with TFMA's own functions. The two differ by up to 1e-4 on
a few hundred examples.

States are kept per slice key and model (`merge_sliced_states`); the slices are TFMA's
(`slicing`). Each metric is computed weighted, unweighted or both as TFMA decides
(`example_weights` of the metrics spec, else weighted exactly when a model spec has an
`example_weight_key`), the weight being each metric's `sample_weight`. One output per model is
supported, and both of TFMA's confidence intervals (the jackknife's partitions and the Poisson
bootstrap's multiplicities are `scoring`'s); anything else (`output_names`, ...) is refused by
name (`metric_specs`, `slicing.slice_specs`), never silently evaluated differently from TFMA.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    confusion_matrix_metrics,
    multi_class_confusion_matrix_metrics,
)
from tensorflow_model_analysis.metrics import metric_specs as tfma_metric_specs

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
    # Plots, from the same calibration histogram as AUC (TFMA's own derivations).
    'CalibrationPlot': 'column',
    'ConfusionMatrixPlot': 'column',
    'MultiClassConfusionMatrixPlot': 'sparse',
    'BinaryAccuracy': 'column',
    'SparseCategoricalAccuracy': 'sparse',
    'MeanSquaredError': 'column',
    'RootMeanSquaredError': 'column',
}
SUPPORTED_METRICS = tuple(_SHAPES)
# TFMA's plot classes: their keys are `PlotKey`s, their values protos, written to `plots-*`.
PLOTS = {
    'CalibrationPlot': tfma.metrics.CalibrationPlot,
    'ConfusionMatrixPlot': tfma.metrics.ConfusionMatrixPlot,
    'MultiClassConfusionMatrixPlot': tfma.metrics.MultiClassConfusionMatrixPlot,
}
# Metrics whose state is TFMA's calibration histogram.
_FROM_HISTOGRAM = ('AUC', *PLOTS)


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """One metric of the EvalConfig.

    Attributes:
      class_name: The TFMA/Keras class name, one of `SUPPORTED_METRICS`.
      name: The name its value has in the evaluation (`auc`, `accuracy`, ...).
      example_weighted: Whether examples count by their weight (the MetricKey's
        `example_weighted`).
    """

    class_name: str
    name: str
    example_weighted: bool = False

    @property
    def is_plot(self) -> bool:
        return self.class_name in PLOTS

    @property
    def key(self) -> str:
        """The metric's key in a `State`."""
        return f'{self.name}@weighted' if self.example_weighted else self.name


def metric_specs(eval_config) -> tuple[MetricSpec, ...]:
    """The metrics of `eval_config` (a `tfma.EvalConfig`); ValueError names what is unsupported
    (the slices' own refusals are `slicing.slice_specs`')."""
    specs = []
    for index, metrics_spec in enumerate(eval_config.metrics_specs):
        where = f'eval_config.metrics_specs[{index}]'
        if metrics_spec.output_names:
            raise ValueError(f'{where}.output_names: not supported')
        for field in ('binarize', 'aggregate'):
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
            default = EXAMPLE_COUNT_NAME if metric.class_name == EXAMPLE_COUNT else ''
            if metric.class_name in PLOTS:
                default = PLOTS[metric.class_name]().name
            name = config.get('name', default)
            if not name:
                raise ValueError(
                    f'{where}: metric {metric.class_name} needs a config with its name, e.g. '
                    '\'{"name": "auc"}\''
                )
            # TFMA's own choice of weighted and unweighted for this metrics spec.
            for weighted in tfma_metric_specs._example_weight_options(eval_config, metrics_spec):  # pylint: disable=protected-access
                specs.append(MetricSpec(metric.class_name, name, bool(weighted)))
    names = [spec.key for spec in specs]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f'eval_config.metrics_specs: metric names {duplicated} appear twice')
    return tuple(specs)


class _Mean:
    """A Keras mean metric's state in NumPy: [total, count], as `tf.keras.metrics.Mean` keeps it
    (`total += sum(values * weight)`, `count += sum(weight)`, or the number of values without a
    weight), with each class's per-example values as tf_keras computes them in float64.

    Plain NumPy, not Keras metric objects: Keras variables belong to TensorFlow's global eager
    context, which a ParameterServerStrategy earlier in the same process connects to its cluster;
    states that are arrays add up the same wherever they are made."""

    def __init__(self, class_name: str):
        self.class_name = class_name
        self.variables = [np.zeros((), np.float64), np.zeros((), np.float64)]

    def _values(self, labels: np.ndarray, predictions: np.ndarray) -> np.ndarray:
        if self.class_name == 'BinaryAccuracy':
            # tf_keras `binary_accuracy`: predictions above 0.5 are 1, averaged over the last axis.
            return np.mean(labels == (predictions > 0.5).astype(np.float64), axis=-1)
        if self.class_name == 'SparseCategoricalAccuracy':
            # tf_keras `sparse_categorical_matches`: the arg max against the class id.
            return (labels == np.argmax(predictions, axis=-1).astype(labels.dtype)).astype(
                np.float64
            )
        squared = np.square(predictions - labels)
        # MeanSquaredError averages the last axis first; RootMeanSquaredError keeps each element.
        return np.mean(squared, axis=-1) if self.class_name == 'MeanSquaredError' else squared

    def update_state(self, labels, predictions, sample_weight=None) -> None:
        values = self._values(np.asarray(labels, np.float64), np.asarray(predictions, np.float64))
        if sample_weight is None:
            self.variables[0] += values.sum()
            self.variables[1] += values.size
            return
        weight = np.broadcast_to(
            np.asarray(sample_weight, np.float64).reshape(
                values.shape[0], *([1] * (values.ndim - 1))
            ),
            values.shape,
        )
        self.variables[0] += (values * weight).sum()
        self.variables[1] += weight.sum()

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]

    @staticmethod
    def result(class_name: str, state: list[np.ndarray]) -> float:
        total, count = (float(v) for v in state)
        mean = total / count if count else 0.0  # tf.math.divide_no_nan, as Keras divides
        return float(np.sqrt(mean)) if class_name == 'RootMeanSquaredError' else mean


class _Count:
    """The example count (`tf.keras.metrics.Sum`): [total]."""

    def __init__(self):
        self.variables = [np.zeros((), np.float64)]

    def update_state(self, count: float) -> None:
        self.variables[0] += count

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]


# TFMA's calibration histogram (`calibration_histogram.py`): buckets 1..N of width 1/N over
# [0, 1], bucket 0 below and N + 1 above.
_HISTOGRAM_BUCKETS = calibration_histogram.DEFAULT_NUM_BUCKETS


def histogram_buckets(predictions: np.ndarray) -> np.ndarray:
    """TFMA's `_bucket_index` of each prediction, vectorized (the same float64 arithmetic)."""
    index = (predictions.astype(np.float64) - 0.0) / 1.0 * _HISTOGRAM_BUCKETS + 1
    return np.where(
        index < 0, 0, np.where(index >= _HISTOGRAM_BUCKETS + 1, _HISTOGRAM_BUCKETS + 1, index)
    ).astype(np.int64)


class _Histogram:
    """An AUC as TFMA computes it, from [sum of labels, of predictions, of examples] per bucket."""

    def __init__(self):
        self.variables = [np.zeros(_HISTOGRAM_BUCKETS + 2) for _ in range(3)]

    def update_state(
        self, labels: np.ndarray, predictions: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> None:
        labels, predictions = labels.reshape(-1), predictions.reshape(-1)
        weight = np.ones_like(predictions) if sample_weight is None else sample_weight.reshape(-1)
        buckets = histogram_buckets(predictions)
        size = _HISTOGRAM_BUCKETS + 2
        for variable, sums in zip(self.variables, (labels * weight, predictions * weight, weight)):
            variable += np.bincount(buckets, weights=sums, minlength=size)

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]

    @staticmethod
    def buckets(state: list[np.ndarray]) -> list:
        """TFMA's `Histogram`: its non-empty buckets, in order."""
        labels, predictions, examples = state
        return [
            calibration_histogram.Bucket(int(i), labels[i], predictions[i], examples[i])
            for i in np.flatnonzero(examples)
        ]

    @staticmethod
    def plot(spec: MetricSpec, state: list[np.ndarray]):
        """The plot's proto, by TFMA's own computations of it from the histogram: the plot
        class's first computation is the histogram, every later one derives from those before."""
        computations = PLOTS[spec.class_name](name=spec.name).computations(
            example_weighted=spec.example_weighted
        )
        first, derived = computations[0], computations[1:]
        if not isinstance(
            first.combiner, calibration_histogram._CalibrationHistogramCombiner
        ) or any(  # pylint: disable=protected-access
            not isinstance(c, tfma.metrics.DerivedMetricComputation) for c in derived
        ):
            raise ValueError(f'{spec.class_name}: TFMA computes it otherwise than from a histogram')
        values = {first.keys[0]: _Histogram.buckets(state)}
        for computation in derived:
            values.update(computation.result(values))
        return values[computations[-1].keys[-1]]

    @staticmethod
    def auc(state: list[np.ndarray]) -> float:
        histogram = _Histogram.buckets(state)
        # What TFMA's binary_confusion_matrices does with a histogram: rebin it onto the
        # thresholds (with its epsilon fences), derive the matrices, then AUC's interpolation.
        epsilon = binary_confusion_matrices._EPSILON  # pylint: disable=protected-access
        thresholds = binary_confusion_matrices._interpolated_thresholds(AUC_NUM_THRESHOLDS)  # pylint: disable=protected-access
        rebin_thresholds = [t + epsilon if t != 0 else t for t in thresholds]
        histogram = calibration_histogram.rebin(rebin_thresholds, histogram)
        matrices = binary_confusion_matrices._histogram_to_binary_confusion_matrices(  # pylint: disable=protected-access
            thresholds, histogram
        )
        return float(
            confusion_matrix_metrics.AUC()._metric_value(  # pylint: disable=protected-access
                'ROC', 'interpolation', None, matrices
            )
        )


# A model's state: metric name -> the values of that metric's variables.
State = dict[str, list[np.ndarray]]


class Accumulator:
    """The metrics of one model, updated batch by batch."""

    def __init__(self, specs: tuple[MetricSpec, ...]):
        self._metrics = {spec.key: (spec, _state_metric(spec)) for spec in specs}

    def update(
        self,
        labels: np.ndarray,
        predictions: np.ndarray,
        weights: np.ndarray | None = None,
        multiplicities: np.ndarray | None = None,
    ) -> None:
        """Adds a batch: `labels` from `transform_features`, `predictions` from the signature,
        `weights` (one per example) for the weighted metrics; none weighs every example 1, as
        TFMA does without an `example_weight_key`. `multiplicities` (one count > 0 per example, a
        bootstrap sample's) add each example as many times: unweighted metrics count it m times,
        weighted ones weigh it weight * m, as the replicated examples would."""
        labels = np.asarray(labels)
        predictions = np.asarray(predictions)
        batch = labels.shape[0]
        if predictions.shape[0] != batch:
            raise ValueError(
                f'labels and predictions differ in batch size: {labels.shape} vs {predictions.shape}'
            )
        column = None if weights is None else np.asarray(weights, np.float64).reshape(batch, 1)
        times = None if multiplicities is None else np.asarray(multiplicities, np.float64)
        times = None if times is None else times.reshape(batch, 1)
        for spec, metric in self._metrics.values():
            weight = column if spec.example_weighted else None
            if times is not None:
                weight = times if weight is None else weight * times
            shape = _SHAPES[spec.class_name]
            if shape == 'count':
                metric.update_state(float(batch) if weight is None else weight.sum())
            elif shape == 'column':
                # [batch, 1]: Keras' mean metrics average over the last axis first, so a [batch]
                # vector would count as one example.
                metric.update_state(
                    labels.reshape(batch, -1)[:, :1].astype(np.float64),
                    _one_column(predictions, spec).astype(np.float64),
                    sample_weight=weight,
                )
            else:
                metric.update_state(
                    labels.reshape(batch, -1)[:, 0],
                    predictions.reshape(batch, -1),
                    sample_weight=None if weight is None else weight[:, 0],
                )

    def state(self) -> State:
        return {name: metric.state() for name, (_, metric) in self._metrics.items()}


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
            mine = target.get(name) or []
            if mine and values:
                target[name] = [x + y for x, y in zip(mine, values)]
            else:  # a confusion matrix's state is [] until an example gives it its classes
                target[name] = list(mine or values)
    return merged


def merge_sliced_states(
    a: Mapping[tuple, Mapping[str, State]], b: Mapping[tuple, Mapping[str, State]]
) -> dict[tuple, dict[str, State]]:
    """Adds two {(slice key, partition): {model name: State}} maps, key by key."""
    merged = {key: dict(states) for key, states in a.items()}
    for key, states in b.items():
        merged[key] = merge_states(merged.get(key, {}), states)
    return merged


def _state_metric(spec: MetricSpec):
    if spec.class_name == 'MultiClassConfusionMatrixPlot':
        return _ClassMatrix()
    if spec.class_name in _FROM_HISTOGRAM:
        return _Histogram()
    if spec.class_name == EXAMPLE_COUNT:
        return _Count()
    return _Mean(spec.class_name)


class _ClassMatrix:
    """TFMA's multi-class confusion matrix at its default threshold 0.0: [weight, examples] per
    (actual class id, predicted class id), ids offset by one so that -1 (TFMA's "no prediction",
    when the top probability is <= the threshold) is index 0."""

    THRESHOLD = 0.0

    def __init__(self):
        self.variables: list[np.ndarray] = []

    def update_state(self, labels, predictions, sample_weight=None) -> None:
        labels = np.asarray(labels).astype(np.int64)
        classes = predictions.shape[1]
        if not self.variables:
            self.variables = [np.zeros((classes + 1, classes + 1)) for _ in range(2)]
        if labels.size and (labels.min() < -1 or labels.max() >= classes):
            raise ValueError(
                f'MultiClassConfusionMatrixPlot: class ids {labels.min()}..{labels.max()} '
                f'outside the {classes} classes of the predictions'
            )
        predicted = np.argmax(predictions, axis=1)
        top = predictions[np.arange(labels.size), predicted]
        predicted = np.where(top <= self.THRESHOLD, -1, predicted)
        weight = np.ones(labels.size) if sample_weight is None else sample_weight
        for variable, values in zip(self.variables, (weight, np.ones(labels.size))):
            np.add.at(variable, (labels + 1, predicted + 1), values)

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]

    @staticmethod
    def plot(state: list[np.ndarray]):
        """TFMA's `Matrices(...).to_proto()` of the entries that examples reached (none when no
        example reached the state: a bootstrap sample that drew none of a slice's)."""
        weights, seen = state or (np.zeros((1, 1)), np.zeros((1, 1)))
        entries = {
            multi_class_confusion_matrix_metrics.MatrixEntryKey(int(a) - 1, int(p) - 1): float(
                weights[a, p]
            )
            for a, p in zip(*np.nonzero(seen))
        }
        matrices = multi_class_confusion_matrix_metrics.Matrices({_ClassMatrix.THRESHOLD: entries})
        return matrices.to_proto().multi_class_confusion_matrix_at_thresholds


def metric_values(specs: tuple[MetricSpec, ...], state: State) -> dict[MetricSpec, float]:
    """{metric: value} of one model's merged state."""
    values = {}
    for spec in specs:
        if spec.class_name == 'AUC':
            values[spec] = _Histogram.auc(state[spec.key])
            continue
        if spec.class_name == 'MultiClassConfusionMatrixPlot':
            values[spec] = _ClassMatrix.plot(state[spec.key])
            continue
        if spec.is_plot:
            values[spec] = _Histogram.plot(spec, state[spec.key])
            continue
        if spec.class_name == EXAMPLE_COUNT:
            values[spec] = float(state[spec.key][0])
            continue
        values[spec] = _Mean.result(spec.class_name, state[spec.key])
    return values

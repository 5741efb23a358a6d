"""The Evaluator's metrics, computed as TFMA computes them, from states that add up.

Each metric of the pipeline's `config_pb2.EvalConfig` keeps the state its tf-keras or TFMA metric
would keep, as NumPy sums (`metric_states`: totals and counts, TFMA's calibration histogram, the
multi-class confusion matrix), so a worker's state for its batches and the state of the whole
split differ only by addition: `Accumulator.update` per batch, `merge_states` across bundles and
workers, `metric_values` once at the end. AUC and the plots derive from the histogram as TFMA
derives them.

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
from tensorflow_model_analysis.metrics import metric_specs as tfma_metric_specs

from asynctrain.components.evaluator import metric_states

AUC_NUM_THRESHOLDS = metric_states.AUC_NUM_THRESHOLDS

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
    """The metrics of `eval_config` (a `config_pb2.EvalConfig`); ValueError names what is unsupported
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


# The value of a metric that a slice does not define: AUC of a slice with one class (no positive
# or no negative example). Written as NaN; no gate fails on it but the whole split's.
UNDEFINED = float('nan')

# Each metric's range, where it has one: the confidence intervals are clipped to it (the
# t-interval of a bounded metric runs past its bounds on a small or lopsided slice).
_RANGES = {
    'AUC': (0.0, 1.0),
    'BinaryAccuracy': (0.0, 1.0),
    'SparseCategoricalAccuracy': (0.0, 1.0),
    'MeanSquaredError': (0.0, float('inf')),
    'RootMeanSquaredError': (0.0, float('inf')),
    EXAMPLE_COUNT: (0.0, float('inf')),
}


def value_range(spec: MetricSpec, difference: bool = False) -> tuple[float, float]:
    """The values `spec`'s metric can take; with `difference`, those of a difference of two of
    them (a diff against the baseline, a cross slice): [low - high, high - low]."""
    low, high = _RANGES.get(spec.class_name, (-float('inf'), float('inf')))
    return (low - high, high - low) if difference else (low, high)


# A model's state: metric name -> the values of that metric's variables.
State = dict[str, list]  # arrays, or one HistogramState
# The state's unweighted count of examples, kept whatever the metrics (no metric has this name).
EXAMPLES_STATE = '__examples__'


def example_count(state: State) -> float:
    """The examples a model's state has seen, unweighted (bootstrap multiplicities counted)."""
    return float(state[EXAMPLES_STATE][0]) if EXAMPLES_STATE in state else 0.0


class Accumulator:
    """The metrics of one model, updated batch by batch."""

    def __init__(self, specs: tuple[MetricSpec, ...]):
        self._metrics = {spec.key: (spec, _state_metric(spec)) for spec in specs}
        # The examples counted, whatever the metrics: TFMA's slice size for `min_slice_size`.
        self._examples = metric_states.Count()

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
        self._examples.update_state(float(batch) if times is None else times.sum())
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
        state = {name: metric.state() for name, (_, metric) in self._metrics.items()}
        state[EXAMPLES_STATE] = self._examples.state()
        return state


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
        return metric_states.ClassMatrix()
    if spec.class_name in _FROM_HISTOGRAM:
        return metric_states.Histogram()
    if spec.class_name == EXAMPLE_COUNT:
        return metric_states.Count()
    return metric_states.Mean(spec.class_name)


def metric_values(specs: tuple[MetricSpec, ...], state: State) -> dict[MetricSpec, float]:
    """{metric: value} of one model's merged state."""
    values = {}
    for spec in specs:
        if spec.class_name == 'AUC':
            # Undefined with one class (TFMA says 0, which fails any gate): NaN, `UNDEFINED`.
            histogram = state[spec.key]
            one_class = metric_states.Histogram.one_class(histogram)
            values[spec] = UNDEFINED if one_class else metric_states.Histogram.auc(histogram)
            continue
        if spec.class_name == 'MultiClassConfusionMatrixPlot':
            values[spec] = metric_states.ClassMatrix.plot(state[spec.key])
            continue
        if spec.is_plot:
            values[spec] = metric_states.Histogram.plot(
                PLOTS[spec.class_name](name=spec.name), spec.example_weighted, state[spec.key]
            )
            continue
        if spec.class_name == EXAMPLE_COUNT:
            values[spec] = float(state[spec.key][0])
            continue
        values[spec] = metric_states.Mean.result(spec.class_name, state[spec.key])
    return values

"""TFMA's EvalConfig for a pipeline's Evaluator, from the config's `evaluation:` settings and the
resolved label: the blessing metric and its gates (whole split, slices, change against the
baseline), the metrics reported beside it, slices, weights, intervals and plots.
"""

from __future__ import annotations

import json

import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import config_pb2

from asynctrain.components.trainer.training.export import (
    PREDICTIONS,
    PROBABILITIES,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
)
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines.config import PipelineConfig
from asynctrain.pipelines.evaluation_settings import (
    CONFIDENCE_INTERVAL_METHODS,
    UPPER_BOUND_METRICS,
    EvaluationSettings,
)

# Each blessing metric of `evaluation.metric`: the TFMA (or Keras) metric class that computes it
# and the name its value has in the evaluation, which the run summary prints.
TFMA_METRICS = {
    'AUC': ('AUC', 'auc'),
    'BinaryAccuracy': ('BinaryAccuracy', 'binary_accuracy'),
    'Accuracy': ('SparseCategoricalAccuracy', 'accuracy'),
    'RMSE': ('RootMeanSquaredError', 'rmse'),
    'MSE': ('MeanSquaredError', 'mse'),
}
# Metrics reported beside the blessing one, per task (not gated).
_REPORTED = {fc.BINARY: ('AUC', 'BinaryAccuracy'), fc.MULTICLASS: (), fc.REGRESSION: ('MSE',)}
# TFMA's plots per task (`evaluation.plots`): none it computes for regression.
_PLOTS = {
    fc.BINARY: ('CalibrationPlot', 'ConfusionMatrixPlot'),
    fc.MULTICLASS: ('MultiClassConfusionMatrixPlot',),
    fc.REGRESSION: (),
}


def _metric_config(
    metric: str, threshold: config_pb2.MetricThreshold | None = None
) -> config_pb2.MetricConfig:
    class_name, name = TFMA_METRICS[metric]
    return config_pb2.MetricConfig(
        class_name=class_name, config=json.dumps({'name': name}), threshold=threshold
    )


def _options(settings: EvaluationSettings) -> config_pb2.Options | None:
    """TFMA's options for the confidence intervals and `min_slice_size`; the jackknife, TFMA's
    default method, is left unset so that the eval_config (and the Evaluator's cache key) stays
    as it was before the choice existed."""
    if not settings.confidence_intervals and not settings.min_slice_size:
        return None
    options = config_pb2.Options()
    if settings.min_slice_size:
        options.min_slice_size.value = settings.min_slice_size
    if not settings.confidence_intervals:
        return options
    options.compute_confidence_intervals.value = True
    method = CONFIDENCE_INTERVAL_METHODS[settings.confidence_interval_method]
    if method != 'JACKKNIFE':
        options.confidence_intervals.method = getattr(config_pb2.ConfidenceIntervalOptions, method)
    return options


def eval_config(config: PipelineConfig, label: fc.LabelSpec) -> config_pb2.EvalConfig:
    """Evaluates on raw examples: `transform_features` derives the label, `serving_default` scores.

    The blessing metric follows the label's task (AUC, accuracy, RMSE, or `evaluation.metric`)
    with its bound: at least `min_value` for AUC and accuracies, at most `max_value` for RMSE and
    MSE; with `baseline: latest_blessed`, also no worse than the last blessed model by more than
    `max_regression` (TFX drops that comparison when there is no blessed model yet). With
    `evaluation.slices`, each is a `slicing_specs` entry, and `slice_min_value`/`slice_max_value`
    and `slice_max_regression` gate each of their slices (`per_slice_thresholds`). With
    `evaluation.example_weight`, every metric is computed weighted and unweighted; with
    `evaluation.confidence_intervals`, with TFMA's jackknife or Poisson bootstrap intervals
    (`confidence_interval_method`); with `evaluation.plots`, TFMA's calibration and
    confusion-matrix plots (binary) or its multi-class confusion matrix.
    """
    settings = config.evaluation
    metric = settings.metric_for(label.task)
    upper = metric in UPPER_BOUND_METRICS
    threshold = _threshold(upper, settings.max_value if upper else settings.min_value)
    if settings.baseline == 'latest_blessed':
        threshold.change_threshold.CopyFrom(_change_threshold(upper, settings.max_regression))
    slicing_specs = [config_pb2.SlicingSpec(feature_keys=list(keys)) for keys in settings.slices]
    gated = _gated_metric(settings, metric, threshold, slicing_specs)
    reported = [m for m in _REPORTED[label.task] if m != metric]
    return config_pb2.EvalConfig(
        model_specs=[
            config_pb2.ModelSpec(
                signature_name=SERVING_SIGNATURE,
                label_key=label.key,
                prediction_key=PREDICTIONS if label.task == fc.REGRESSION else PROBABILITIES,
                preprocessing_function_names=[TRANSFORM_SIGNATURE],
                example_weight_key=settings.example_weight,
            )
        ],
        slicing_specs=[config_pb2.SlicingSpec(), *slicing_specs],
        options=_options(settings),
        metrics_specs=[
            config_pb2.MetricsSpec(
                example_weights=config_pb2.ExampleWeightOptions(weighted=True, unweighted=True)
                if settings.example_weight
                else None,
                metrics=[
                    config_pb2.MetricConfig(class_name='ExampleCount'),
                    *(_metric_config(m) for m in reported),
                    gated,
                    *(
                        config_pb2.MetricConfig(class_name=name)
                        for name in (_PLOTS[label.task] if settings.plots else ())
                    ),
                ],
            )
        ],
    )


def _gated_metric(
    settings: EvaluationSettings,
    metric: str,
    threshold: config_pb2.MetricThreshold,
    slicing_specs: list[config_pb2.SlicingSpec],
) -> config_pb2.MetricConfig:
    """The blessing metric with its gate: `threshold` on the whole split, and with slices the
    slice bound and `slice_max_regression` on each of their slices."""
    if not slicing_specs:
        return _metric_config(metric, threshold)
    upper = metric in UPPER_BOUND_METRICS
    slice_bound = settings.slice_bound_for(metric)
    # TFMA checks a metric's `threshold` on every slice (metrics_validator.validate_metrics),
    # so the whole-split gate is a per-slice threshold of the overall slice alone.
    gates = [
        config_pb2.PerSliceMetricThreshold(
            slicing_specs=[config_pb2.SlicingSpec()], threshold=threshold
        )
    ]
    if slice_bound is not None or settings.slice_max_regression is not None:
        slice_threshold = (
            _threshold(upper, slice_bound)
            if slice_bound is not None
            else config_pb2.MetricThreshold()
        )
        if settings.slice_max_regression is not None:
            slice_threshold.change_threshold.CopyFrom(
                _change_threshold(upper, settings.slice_max_regression)
            )
        gates.append(
            config_pb2.PerSliceMetricThreshold(
                slicing_specs=slicing_specs, threshold=slice_threshold
            )
        )
    gated = _metric_config(metric)
    gated.per_slice_thresholds.extend(gates)
    return gated


def _threshold(upper: bool, bound: float | None) -> config_pb2.MetricThreshold:
    return config_pb2.MetricThreshold(
        value_threshold=config_pb2.GenericValueThreshold(
            upper_bound={'value': bound} if upper else None,
            lower_bound=None if upper else {'value': bound},
        )
    )


def _change_threshold(upper: bool, max_regression: float) -> config_pb2.GenericChangeThreshold:
    return config_pb2.GenericChangeThreshold(
        direction=tfma.MetricDirection.LOWER_IS_BETTER
        if upper
        else tfma.MetricDirection.HIGHER_IS_BETTER,
        absolute={'value': max_regression if upper else -max_regression},
    )

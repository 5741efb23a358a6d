"""The Evaluator's outputs, in TFMA's own format: what `tfma.load_eval_result`,
`tfma.load_validation_result`, TFMA's notebook views and the run summary read.

A `ModelEvaluation` directory holds `eval_config.json` (the `EvalRun`), `metrics-*.tfrecord` (one
`MetricsForSlice` per slice and cross slice), `plots-*` and `attributions-*` (empty per slice, as
TFMA writes them when no plot or attribution is configured) and `validations.tfrecord` (one
`ValidationResult`). The metric keys, the cross-slice and candidate-minus-baseline diffs and the
threshold checks are TFMA's: `tfma.metrics.MetricKey`, and the checks of `checks` (TFMA's own
`metrics_validator.validate_metrics` per slice and its writer's `CombineValidations`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis import version as tfma_version
from tensorflow_model_analysis.evaluators import (
    confidence_intervals_util,
    jackknife,
    poisson_bootstrap,
)
from tensorflow_model_analysis.evaluators import (
    metrics_plots_and_validations_evaluator as tfma_evaluator,
)
from tensorflow_model_analysis.metrics import metric_specs as tfma_metric_specs
from tensorflow_model_analysis.post_export_metrics import metric_keys as tfma_metric_keys
from tensorflow_model_analysis.proto import config_pb2, metrics_for_slice_pb2, validation_result_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer

from asynctrain.components.evaluator import metrics

EVAL_CONFIG_FILE = 'eval_config.json'
METRICS_FILE = 'metrics-00000-of-00001.tfrecord'
PLOTS_FILE = 'plots-00000-of-00001.tfrecord'
ATTRIBUTIONS_FILE = 'attributions-00000-of-00001.tfrecord'
VALIDATIONS_FILE = 'validations.tfrecord'
# The overall slice's key.
OVERALL_SLICE = ()
# A slice key as TFMA writes it (`slicing.SliceKey`).
SliceKey = tuple
# TFMA's key and words for a slice it leaves out for its size (`slicer_lib.FilterOutSlices`).
ERROR_METRIC = tfma_metric_keys.ERROR_METRIC
SMALL_SLICE_MESSAGE = (
    'Example count for this slice key is lower than the minimum required value: %d. '
    'No data is aggregated for this slice.'
)


def keyed_values(
    specs: tuple[metrics.MetricSpec, ...],
    states: Mapping[str, metrics.State],
    eval_config: config_pb2.EvalConfig,
) -> dict[tfma.metrics.MetricKey, float]:
    """{MetricKey: value} of one slice for every model (no diffs yet)."""
    values = {}
    for model_name, state in states.items():
        for spec, value in metrics.metric_values(specs, state).items():
            key_type = tfma.metrics.PlotKey if spec.is_plot else tfma.metrics.MetricKey
            key = key_type(spec.name, model_name=model_name, example_weighted=spec.example_weighted)
            values[key] = value
    return values


def _with_diffs(
    values: Mapping[tfma.metrics.MetricKey, float], baseline: str | None
) -> dict[tfma.metrics.MetricKey, float]:
    """`values` plus each candidate metric minus the baseline's (TFMA's `add_diff_metrics`)."""
    out = dict(values)
    if baseline is None:
        return out
    for key, value in values.items():
        if isinstance(key, tfma.metrics.PlotKey):  # TFMA diffs numbers only
            continue
        baseline_key = key.make_baseline_key(baseline)
        if not key.is_diff and key.model_name != baseline and baseline_key in values:
            out[key.make_diff_key()] = value - values[baseline_key]
    return out


def _applies(slice_key: SliceKey, slicing_specs) -> bool:
    return any(
        slicer_lib.SingleSliceSpec(spec=s).is_slice_applicable(slice_key) for s in slicing_specs
    )


def _cross_slice_values(
    per_slice: Mapping[SliceKey, Mapping[tfma.metrics.MetricKey, float]],
    eval_config: config_pb2.EvalConfig,
) -> dict[tuple, dict[tfma.metrics.MetricKey, float]]:
    """TFMA's cross slices (`_AddCrossSliceMetrics`): for each cross spec, every slice of its
    baseline spec against every slice of its comparison specs (every slice not of the baseline
    spec when it has none), each metric the baseline slice's value minus the comparison's."""
    out = {}
    for cross in eval_config.cross_slicing_specs:
        for baseline_key, baseline_values in per_slice.items():
            if not _applies(baseline_key, [cross.baseline_spec]):
                continue
            for comparison_key, comparison_values in per_slice.items():
                if cross.slicing_specs:
                    if not _applies(comparison_key, cross.slicing_specs):
                        continue
                elif _applies(comparison_key, [cross.baseline_spec]):
                    continue
                out[(baseline_key, comparison_key)] = {
                    key: baseline_values[key] - value
                    for key, value in comparison_values.items()
                    if key in baseline_values and not isinstance(key, tfma.metrics.PlotKey)
                }
    return out


def sliced_values(
    specs: tuple[metrics.MetricSpec, ...],
    states: Mapping[SliceKey, Mapping[str, metrics.State]],
    eval_config: config_pb2.EvalConfig,
) -> dict[tuple, dict[tfma.metrics.MetricKey, float]]:
    """{slice key or cross slice key: {MetricKey: value}}, with the candidate's diffs against
    the baseline for every slice and cross slice when there is a baseline."""
    baseline = next((m.name for m in eval_config.model_specs if m.is_baseline), None)
    per_slice = {
        key: keyed_values(specs, by_model, eval_config) for key, by_model in states.items()
    }
    per_slice.update(_cross_slice_values(per_slice, eval_config))
    return {key: _with_diffs(values, baseline) for key, values in per_slice.items()}


def num_jackknife_partitions(eval_config: config_pb2.EvalConfig) -> int:
    """TFMA's number of jackknife partitions for `eval_config` (with its defaults): 20 when it
    asks for confidence intervals by the jackknife (its default method), else 0."""
    params = tfma_evaluator._get_confidence_interval_params(  # pylint: disable=protected-access
        eval_config, eval_config.metrics_specs
    )
    return params.num_jackknife_samples


def num_bootstrap_samples(eval_config: config_pb2.EvalConfig) -> int:
    """TFMA's number of Poisson bootstrap samples for `eval_config`: its evaluator's fixed 20
    when it asks for confidence intervals by `POISSON_BOOTSTRAP` (no field sets it), else 0."""
    params = tfma_evaluator._get_confidence_interval_params(  # pylint: disable=protected-access
        eval_config, eval_config.metrics_specs
    )
    return params.num_bootstrap_samples


def evaluate(
    specs: tuple[metrics.MetricSpec, ...],
    states: Mapping[tuple, Mapping[str, metrics.State]],
    eval_config: config_pb2.EvalConfig,
    num_partitions: int,
    num_bootstrap_samples: int = 0,
) -> dict[tuple, dict]:
    """{slice or cross slice key: {MetricKey: value}} from {(slice key, partition or sample):
    {model: State}}.

    With partitions, TFMA's delete-d jackknife: each value a `ValueWithTDistribution` whose
    samples are the metrics (cross-slice values and diffs included) of all partitions but one,
    combined by TFMA's own `_JackknifeSampleCombineFn` (pseudo-values, n - 1 degrees of freedom).
    With bootstrap samples, TFMA's Poisson bootstrap: the point value is the unsampled state's
    (`scoring.FULL_SAMPLE`), the samples each sample's state's, combined by TFMA's own
    `_BootstrapSampleCombineFn` (mean, standard deviation with ddof 1, n - 1 degrees of freedom).
    Either way, the metrics TFMA skips keep a plain value. A slice of fewer examples than
    `options.min_slice_size` keeps TFMA's note alone (`_without_small_slices`)."""
    by_slice: dict[SliceKey, dict[int, Mapping[str, metrics.State]]] = {}
    for (slice_key, partition), by_model in states.items():
        by_slice.setdefault(slice_key, {})[partition] = by_model
    full = poisson_bootstrap._FULL_SAMPLE_ID if num_bootstrap_samples else None  # pylint: disable=protected-access
    whole = _sample(by_slice, full) if full is not None else _merged(by_slice, exclude=None)
    return _without_small_slices(
        _evaluate(specs, by_slice, eval_config, num_partitions, num_bootstrap_samples),
        whole,
        eval_config.options.min_slice_size.value,
    )


def _without_small_slices(
    values: dict[tuple, dict], whole: Mapping[SliceKey, Mapping[str, metrics.State]], size: int
) -> dict[tuple, dict]:
    """`values`, each slice but the overall one with fewer than `size` examples (unweighted, as
    TFMA counts them) replaced by TFMA's note: no metric, no plot, as TFMA writes it."""
    if size <= 1:
        return values
    out = dict(values)
    for slice_key, by_model in whole.items():
        count = max((metrics.example_count(state) for state in by_model.values()), default=0.0)
        if slice_key != OVERALL_SLICE and count < size:
            out[slice_key] = {ERROR_METRIC: SMALL_SLICE_MESSAGE % size}
    return out


def _evaluate(
    specs: tuple[metrics.MetricSpec, ...],
    by_slice: dict[SliceKey, dict[int, Mapping[str, metrics.State]]],
    eval_config: config_pb2.EvalConfig,
    num_partitions: int,
    num_bootstrap_samples: int,
) -> dict[tuple, dict]:
    skip = tfma_metric_specs.metric_keys_to_skip_for_confidence_intervals(
        eval_config.metrics_specs, eval_config=eval_config
    )
    # TFMA's sample combiner keeps numbers only: plots take their point value, so the samples
    # leave them out (each is 1,000 thresholds' matrices per slice).
    numeric = tuple(spec for spec in specs if not spec.is_plot)
    if num_bootstrap_samples:
        full = poisson_bootstrap._FULL_SAMPLE_ID  # pylint: disable=protected-access
        point = sliced_values(specs, _sample(by_slice, full), eval_config)
        samples = [
            sliced_values(numeric, _sample(by_slice, i), eval_config)
            for i in range(num_bootstrap_samples)
        ]
        return _with_intervals(
            point,
            samples,
            lambda: poisson_bootstrap._BootstrapSampleCombineFn(num_bootstrap_samples, skip),  # pylint: disable=protected-access
            full,
        )
    point = sliced_values(specs, _merged(by_slice, exclude=None), eval_config)
    if not num_partitions:
        return point
    samples = [
        sliced_values(numeric, _merged(by_slice, exclude=i), eval_config)
        for i in range(num_partitions)
    ]
    return _with_intervals(
        point,
        samples,
        lambda: jackknife._JackknifeSampleCombineFn(num_partitions, skip),  # pylint: disable=protected-access
        jackknife._FULL_SAMPLE_ID,  # pylint: disable=protected-access
    )


def _with_intervals(point: dict, samples: list[dict], make_combine, full_sample_id: int) -> dict:
    """Each slice's values combined with its samples' by a TFMA `SampleCombineFn` (made anew per
    slice by `make_combine`), as TFMA's `CombineSamplesPerSlice` combines them."""
    out = {}
    for key, values in point.items():
        combine = make_combine()
        accumulator = combine.create_accumulator()
        full = confidence_intervals_util.SampleMetrics(dict(values), full_sample_id)
        accumulator = combine.add_input(accumulator, full)
        for sample_id, sample in enumerate(samples):
            if key in sample:
                accumulator = combine.add_input(
                    accumulator, confidence_intervals_util.SampleMetrics(sample[key], sample_id)
                )
        out[key] = combine.extract_output(accumulator)
    return out


def _sample(by_slice, sample: int) -> dict[SliceKey, Mapping[str, metrics.State]]:
    """Per slice, the state of one bootstrap sample (or of the unsampled examples)."""
    return {key: samples[sample] for key, samples in by_slice.items() if sample in samples}


def _merged(by_slice, exclude: int | None) -> dict[SliceKey, dict[str, metrics.State]]:
    """Per slice, the states of its partitions but `exclude`; a slice with none left is out."""
    out = {}
    for slice_key, partitions in by_slice.items():
        merged = {}
        for partition, by_model in partitions.items():
            if partition != exclude:
                merged = metrics.merge_states(merged, by_model)
        if merged:
            out[slice_key] = merged
    return out


def write_evaluation(
    output_dir: str,
    eval_config: config_pb2.EvalConfig,
    values: Mapping[tuple, Mapping[tfma.metrics.MetricKey, float]],
    validation: validation_result_pb2.ValidationResult,
    model_locations: Mapping[str, str],
    data_location: str,
) -> None:
    """Writes the evaluation's files into `output_dir` (the ModelEvaluation artifact's URI)."""
    tf.io.gfile.makedirs(output_dir)
    eval_run = config_pb2.EvalRun(
        eval_config=eval_config,
        version=tfma_version.VERSION,
        data_location=data_location,
        file_format='tfrecords_gzip',
        model_locations=dict(model_locations),
    )
    with tf.io.gfile.GFile(os.path.join(output_dir, EVAL_CONFIG_FILE), 'w') as f:
        f.write(json_format.MessageToJson(eval_run))
    # One record per slice and cross slice in each file, as TFMA's writer writes them (empty
    # plots and attributions when none is configured).
    by_name = {spec.name: spec for spec in metrics.metric_specs(eval_config)}
    records = {
        METRICS_FILE: [
            _clipped(
                tfma_writer.convert_slice_metrics_to_proto(
                    (key, metrics_only(v)), add_metrics_callbacks=None
                ),
                by_name,
            )
            for key, v in values.items()
        ],
        PLOTS_FILE: [
            tfma_writer.convert_slice_plots_to_proto(
                (key, {k: p for k, p in v.items() if isinstance(k, tfma.metrics.PlotKey)}),
                add_metrics_callbacks=None,
            )
            for key, v in values.items()
        ],
        ATTRIBUTIONS_FILE: [
            _empty_for_slice(metrics_for_slice_pb2.AttributionsForSlice, key) for key in values
        ],
        VALIDATIONS_FILE: [validation],
    }
    for name, protos in records.items():
        with tf.io.TFRecordWriter(os.path.join(output_dir, name)) as writer:
            for record in protos:
                writer.write(record.SerializeToString())


def _clipped(
    record: metrics_for_slice_pb2.MetricsForSlice, by_name: Mapping[str, metrics.MetricSpec]
):
    """`record` with each confidence interval clipped to its metric's range (`metrics.value_range`:
    [0, 1] for AUC and accuracies, at least 0 for errors and counts; the range of a difference
    for a diff against the baseline or a cross slice). TFMA's t-interval, point value plus or minus
    t times the standard error, is symmetric and runs past the range on a small or lopsided
    slice; only the bounds move, the value and standard error stay TFMA's."""
    cross = record.HasField('cross_slice_key')
    for item in record.metric_keys_and_values:
        spec = by_name.get(item.key.name)
        if spec is None or not item.HasField('confidence_interval'):
            continue
        low, high = metrics.value_range(spec, difference=cross or item.key.is_diff)
        for bound in (item.confidence_interval.lower_bound, item.confidence_interval.upper_bound):
            bound.double_value.value = float(np.clip(bound.double_value.value, low, high))
    return record


def metrics_only(values: Mapping) -> dict:
    """The values of `MetricKey`s, without the plots (TFMA's `_filter_by_key_type`)."""
    return {k: v for k, v in values.items() if not isinstance(k, tfma.metrics.PlotKey)}


def _empty_for_slice(message_type, key: tuple):
    if slicer_lib.is_cross_slice_key(key):
        return message_type(cross_slice_key=slicer_lib.serialize_cross_slice_key(key))
    return message_type(slice_key=slicer_lib.serialize_slice_key(key))

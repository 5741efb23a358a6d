"""The Evaluator's threshold checks: TFMA's own (`metrics_validator.validate_metrics`, combined as
TFMA's writer combines them), less those no slice but the overall one fails on purpose, and the
lines the console prints for the checks that failed and for those not applied.

A check is not applied on a slice (not the overall one) where its metric is undefined
(`metrics.UNDEFINED`: the AUC of a one-class slice, which TFMA computes as 0 and so fails), or on
a slice with fewer examples than `options.min_slice_size` (`results.ERROR_METRIC`: TFMA fails its
checks there as "Metric not found"). Each such check is one line of `unapplied_checks`, which the
executor logs and the run summary prints.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.evaluators import metrics_validator
from tensorflow_model_analysis.proto import config_pb2, validation_result_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer

from asynctrain.components.evaluator import results


def validate(
    values: Mapping[tuple, Mapping[tfma.metrics.MetricKey, float]],
    eval_config: config_pb2.EvalConfig,
) -> validation_result_pb2.ValidationResult:
    """TFMA's threshold checks of every slice and cross slice, combined as TFMA's writer combines
    them (`CombineValidations`: a failing slice fails the whole; a gated slice spec that matched
    no slice is listed in `missing_slices` and fails too), less the checks set aside on slices
    other than the overall one (`unapplied_checks`).

    Note, from TFMA's code (`metrics_validator.validate_metrics`): a metric's `threshold` without
    slicing specs is checked on every single slice, not only the overall one; and a value with a
    confidence interval is checked by its point value (`float(ValueWithTDistribution)` is the
    unsampled value), never by its bounds."""
    combine = tfma_writer.CombineValidations(eval_config)
    accumulator = combine.create_accumulator()
    for slice_key, slice_values in values.items():
        result, _ = _checked_slice(slice_key, slice_values, eval_config)
        accumulator = combine.add_input(accumulator, result)
    return combine.extract_output(accumulator)


def unapplied_checks(
    values: Mapping[tuple, Mapping[tfma.metrics.MetricKey, float]],
    eval_config: config_pb2.EvalConfig,
) -> list[str]:
    """One line per threshold check that `validate` does not apply, naming the slice, the metric,
    why and the threshold: a slice (not the overall one) where the metric is undefined (AUC of
    one class, `metrics.UNDEFINED`: TFMA's 0 would fail any gate), or that has fewer examples
    than `min_slice_size` (TFMA fails its checks as "Metric not found")."""
    lines = []
    for slice_key, slice_values in values.items():
        lines += _checked_slice(slice_key, slice_values, eval_config)[1]
    return lines


def _checked_slice(
    slice_key: tuple, slice_values: Mapping, eval_config: config_pb2.EvalConfig
) -> tuple[validation_result_pb2.ValidationResult, list[str]]:
    """TFMA's checks of one slice, and the lines of those set aside (`unapplied_checks`)."""
    if results.ERROR_METRIC in slice_values:
        # Its gates count as checked, so that a gated spec of small slices only is not missing.
        lines, specs = _small_slice_lines(slice_key, eval_config)
        result = validation_result_pb2.ValidationResult(validation_ok=True)
        for spec in specs:
            result.validation_details.slicing_details.add(slicing_spec=spec, num_matching_slices=1)
        return result, lines
    result = metrics_validator.validate_metrics(
        (slice_key, results.metrics_only(slice_values)), eval_config
    )
    if slice_key == results.OVERALL_SLICE:
        return result, []
    lines = []
    for per_slice in result.metric_validations_per_slice:
        kept = []
        for failure in per_slice.failures:
            if _is_undefined(failure):
                where, name, bound = _failure_words(per_slice, failure)
                lines.append(
                    f'slice {where}: {name} undefined (one class in the slice), '
                    f'threshold {bound} not applied'
                )
            else:
                kept.append(failure)
        del per_slice.failures[:]
        per_slice.failures.extend(kept)
    failing = [p for p in result.metric_validations_per_slice if p.failures]
    del result.metric_validations_per_slice[:]
    result.metric_validations_per_slice.extend(failing)
    result.validation_ok = not failing
    return result, lines


def _small_slice_lines(
    slice_key: tuple, eval_config: config_pb2.EvalConfig
) -> tuple[list[str], list[config_pb2.SlicingSpec]]:
    """The thresholds of the candidate that apply to a slice too small to evaluate, one line
    each (TFMA fails them all there, whatever their slicing specs, as "Metric not found"), and
    their slicing specs."""
    baseline = next((m.name for m in eval_config.model_specs if m.is_baseline), None)
    thresholds = tfma.metrics.metric_thresholds_from_metrics_specs(
        eval_config.metrics_specs, eval_config=eval_config
    )
    size = eval_config.options.min_slice_size.value
    lines, specs = [], []
    for metric_key, specs_and_thresholds in thresholds.items():
        if metric_key.model_name == baseline:  # as TFMA: no check of the baseline's own
            continue
        for slice_spec, threshold in specs_and_thresholds:
            if isinstance(slice_spec, config_pb2.CrossSlicingSpec):
                continue
            if slice_spec is not None and not slicer_lib.SingleSliceSpec(
                spec=slice_spec
            ).is_slice_applicable(slice_key):
                continue
            failure = validation_result_pb2.ValidationFailure(metric_key=metric_key.to_proto())
            _set_threshold(failure, threshold)
            per_slice = validation_result_pb2.MetricsValidationForSlice(
                slice_key=slicer_lib.serialize_slice_key(slice_key)
            )
            where, name, bound = _failure_words(per_slice, failure)
            line = (
                f'slice {where}: {name} not evaluated (fewer than min_slice_size, {size}, '
                f'examples), threshold {bound} not applied'
            )
            if line not in lines:
                lines.append(line)
            specs.append(config_pb2.SlicingSpec() if slice_spec is None else slice_spec)
    return lines, specs


def _set_threshold(failure, threshold) -> None:
    if isinstance(threshold, config_pb2.GenericValueThreshold):
        failure.metric_threshold.value_threshold.CopyFrom(threshold)
    else:
        failure.metric_threshold.change_threshold.CopyFrom(threshold)


def _is_undefined(failure) -> bool:
    return failure.HasField('metric_value') and math.isnan(failure.metric_value.double_value.value)


def _failure_words(per_slice, failure) -> tuple[str, str, str]:
    """(the slice, the metric, the threshold) of a failure, as the console words them."""
    if per_slice.HasField('cross_slice_key'):
        key = slicer_lib.deserialize_cross_slice_key(per_slice.cross_slice_key)
        where = (
            f'{slicer_lib.stringify_slice_key(key[0])} vs {slicer_lib.stringify_slice_key(key[1])}'
        )
    else:
        where = slicer_lib.stringify_slice_key(
            slicer_lib.deserialize_slice_key(per_slice.slice_key)
        )
    key = tfma.metrics.MetricKey.from_proto(failure.metric_key)
    name = key.name + (f' ({key.model_name})' if key.model_name else '')
    name += ' change against the baseline' if key.is_diff else ''
    threshold = failure.metric_threshold
    bound = json_format.MessageToDict(
        threshold.value_threshold
        if threshold.HasField('value_threshold')
        else threshold.change_threshold
    )
    return where, name, str(bound)


def failures(validation: validation_result_pb2.ValidationResult) -> list[str]:
    """One line per failed check: the slice, the metric, its value and the threshold; and the
    gated slices no example fell into."""
    lines = []
    for per_slice in validation.metric_validations_per_slice:
        for failure in per_slice.failures:
            where, name, bound = _failure_words(per_slice, failure)
            if _is_undefined(failure):
                value = 'undefined (one class)'
            elif failure.HasField('metric_value'):
                value = f'{failure.metric_value.double_value.value:.6g}'
            else:
                value = failure.message.strip()
            lines.append(f'slice {where}: {name} {value}, threshold {bound}')
    for spec in validation.missing_slices:
        lines.append(
            f'slice spec {json_format.MessageToDict(spec)}: no example in it (missing slice)'
        )
    for spec in validation.missing_cross_slices:
        lines.append(f'cross slice spec {json_format.MessageToDict(spec)}: missing')
    return lines


def read_values(output_dir: str) -> dict[tuple, dict]:
    """{slice or cross slice key: {MetricKey: value}} of a written evaluation, with TFMA's note
    (`results.ERROR_METRIC`) where it has one, as `validate` and `unapplied_checks` take them."""
    out = {}
    for record in tfma_writer.load_and_deserialize_metrics(output_dir):
        if record.HasField('cross_slice_key'):
            key = slicer_lib.deserialize_cross_slice_key(record.cross_slice_key)
        else:
            key = slicer_lib.deserialize_slice_key(record.slice_key)
        values = {
            tfma.metrics.MetricKey.from_proto(kv.key): kv.value.double_value.value
            for kv in record.metric_keys_and_values
        }
        if results.ERROR_METRIC in record.metrics:
            values[results.ERROR_METRIC] = record.metrics[results.ERROR_METRIC].debug_message
        out[key] = values
    return out


def read_unapplied_checks(output_dir: str) -> list[str]:
    """`unapplied_checks` of the evaluation written in `output_dir`; [] when none is written."""
    path = os.path.join(output_dir, results.EVAL_CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as f:
        eval_run = json_format.Parse(f.read(), config_pb2.EvalRun())
    return unapplied_checks(read_values(output_dir), eval_run.eval_config)

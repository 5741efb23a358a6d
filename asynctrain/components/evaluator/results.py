"""The Evaluator's outputs, in TFMA's own format: what `tfma.load_eval_result`,
`tfma.load_validation_result`, TFMA's notebook views and the run summary read.

A `ModelEvaluation` directory holds `eval_config.json` (the `EvalRun`), `metrics-*.tfrecord` (one
`MetricsForSlice` per slice), `plots-*` and `attributions-*` (empty for the overall slice, as TFMA
writes them when no plot or attribution is configured) and `validations.tfrecord` (one
`ValidationResult`). The metric keys, the candidate-minus-baseline diffs and the threshold checks
are TFMA's: `tfma.metrics.MetricKey`, and TFMA's own `metrics_validator.validate_metrics`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis import version as tfma_version
from tensorflow_model_analysis.evaluators import metrics_validator
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


def keyed_values(
    specs: tuple[metrics.MetricSpec, ...],
    states: Mapping[str, metrics.State],
    eval_config: tfma.EvalConfig,
) -> dict[tfma.metrics.MetricKey, float]:
    """{MetricKey: value} for every model, plus the candidate's diffs when there is a baseline."""
    baseline = next((m.name for m in eval_config.model_specs if m.is_baseline), None)
    values = {}
    per_model = {name: metrics.metric_values(specs, state) for name, state in states.items()}
    for model_name, model_values in per_model.items():
        for name, value in model_values.items():
            values[tfma.metrics.MetricKey(name, model_name=model_name, example_weighted=False)] = (
                value
            )
    if baseline is not None:
        for model_name, model_values in per_model.items():
            if model_name == baseline:
                continue
            for name, value in model_values.items():
                key = tfma.metrics.MetricKey(
                    name, model_name=model_name, example_weighted=False, is_diff=True
                )
                values[key] = value - per_model[baseline][name]
    return values


def validate(
    values: Mapping[tfma.metrics.MetricKey, float], eval_config: tfma.EvalConfig
) -> validation_result_pb2.ValidationResult:
    """TFMA's threshold checks of the overall slice's values."""
    return metrics_validator.validate_metrics((OVERALL_SLICE, dict(values)), eval_config)


def write_evaluation(
    output_dir: str,
    eval_config: tfma.EvalConfig,
    values: Mapping[tfma.metrics.MetricKey, float],
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
    slice_key = slicer_lib.serialize_slice_key(OVERALL_SLICE)
    records = {
        METRICS_FILE: tfma_writer.convert_slice_metrics_to_proto(
            (OVERALL_SLICE, dict(values)), add_metrics_callbacks=None
        ),
        PLOTS_FILE: metrics_for_slice_pb2.PlotsForSlice(slice_key=slice_key),
        ATTRIBUTIONS_FILE: metrics_for_slice_pb2.AttributionsForSlice(slice_key=slice_key),
        VALIDATIONS_FILE: validation,
    }
    for name, record in records.items():
        with tf.io.TFRecordWriter(os.path.join(output_dir, name)) as writer:
            writer.write(record.SerializeToString())

"""The Evaluator's executor: artifacts in, model paths and the EvalConfig with TFMA's defaults
out, then one Beam pipeline (`scoring.ScoreExamples`, then `write_evaluation`) and the blessing,
as stock Evaluator records it."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
import tensorflow as tf
import tensorflow_model_analysis as tfma
from absl import logging
from tensorflow_model_analysis.proto import config_pb2
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer
from tfx import types
from tfx.components.evaluator import constants
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from asynctrain.components.evaluator import checks, metrics, results, scoring, slicing, spec
from asynctrain.components.shared import beam_runner, drift_properties


def check_model_specs(eval_config: config_pb2.EvalConfig) -> None:
    """ValueError naming the field a model spec lacks for this Evaluator."""
    if not eval_config.model_specs:
        raise ValueError('eval_config.model_specs: expected the candidate model spec, got none')
    for index, model_spec in enumerate(eval_config.model_specs):
        where = f'eval_config.model_specs[{index}]'
        if len(model_spec.preprocessing_function_names) != 1:
            raise ValueError(
                f'{where}.preprocessing_function_names: expected one signature that returns the '
                f'label (transform_features), got {list(model_spec.preprocessing_function_names)}'
            )
        for field in ('label_key', 'prediction_key'):
            if not getattr(model_spec, field):
                raise ValueError(f'{where}.{field}: required')
        for field in ('label_keys', 'prediction_keys', 'example_weight_keys'):
            if getattr(model_spec, field):
                raise ValueError(f'{where}.{field}: not supported (one output per model)')


def models_to_score(
    eval_config: config_pb2.EvalConfig, model: types.Artifact, baseline: types.Artifact | None
) -> list[scoring.ModelToScore]:
    """The models of `eval_config` (with TFMA's defaults applied), each with its SavedModel path."""
    out = []
    for model_spec in eval_config.model_specs:
        artifact = baseline if model_spec.is_baseline else model
        path = path_utils.serving_model_path(
            artifact.uri, path_utils.is_old_model_artifact(artifact)
        )
        out.append(
            scoring.ModelToScore(
                name=model_spec.name,
                path=path,
                signature=model_spec.signature_name or 'serving_default',
                preprocessing=model_spec.preprocessing_function_names[0],
                label_key=model_spec.label_key,
                prediction_key=model_spec.prediction_key,
                example_weight_key=model_spec.example_weight_key,
            )
        )
    return out


def evaluate_and_write(
    states: dict,
    output_dir: str,
    eval_config: config_pb2.EvalConfig,
    specs: tuple[metrics.MetricSpec, ...],
    model_locations: dict[str, str],
    data_location: str,
) -> None:
    """The merged states' metrics, TFMA's checks of them, and the evaluation's files."""
    if not states:
        raise ValueError(f'{data_location}: no examples to evaluate on (the splits are empty)')
    values = results.evaluate(
        specs,
        states,
        eval_config,
        results.num_jackknife_partitions(eval_config),
        results.num_bootstrap_samples(eval_config),
    )
    validation = checks.validate(values, eval_config)
    for line in checks.unapplied_checks(values, eval_config):
        logging.info('Threshold check not applied: %s', line)
    results.write_evaluation(
        output_dir, eval_config, values, validation, model_locations, data_location
    )


def add_evaluation(
    pipeline: beam.Pipeline,
    file_patterns: Sequence[str],
    models: Sequence[scoring.ModelToScore],
    eval_config: config_pb2.EvalConfig,
    output_dir: str,
    batch_size: int,
) -> None:
    """Adds to `pipeline` the evaluation of `models` on `file_patterns`, written to `output_dir`.

    `eval_config` has TFMA's defaults applied (`tfma.utils.update_eval_config_with_defaults`).
    """
    specs = metrics.metric_specs(eval_config)
    _ = (
        pipeline
        | 'ScoreExamples'
        >> scoring.ScoreExamples(
            file_patterns,
            models,
            specs,
            batch_size,
            slicing.slice_specs(eval_config),
            results.num_jackknife_partitions(eval_config),
            num_bootstrap_samples=results.num_bootstrap_samples(eval_config),
        )
        | 'WriteEvaluation'
        >> beam.Map(
            evaluate_and_write,
            output_dir,
            eval_config,
            specs,
            {m.name: m.path for m in models},
            ', '.join(file_patterns),
        )
    )


def _holds_model(artifact: types.Artifact) -> bool:
    return tf.saved_model.contains_saved_model(
        path_utils.serving_model_path(artifact.uri, path_utils.is_old_model_artifact(artifact))
    )


# A subclass of stock Evaluator's executor for one reason: TFX's Kubeflow V2 entrypoint rewrites
# the blessing's model ids into the pipeline's artifact names (`refactor_model_blessing`) only for
# that class, so the blessing carries on every backend exactly what stock's carries. `Do` is ours.
class Executor(beam_runner.DirectRunnerExecutor, evaluator_executor.Executor):
    """Scores the splits with the candidate (and baseline), writes the evaluation and blessing."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model = artifact_utils.get_single_instance(input_dict[spec.MODEL_KEY])
        baselines = input_dict.get(spec.BASELINE_MODEL_KEY) or []
        if len(baselines) > 1:
            raise ValueError(f'baseline_model: expected at most one model, got {len(baselines)}')
        # The empty model `LatestBlessedModel` hands on before the first push is no baseline.
        baseline = baselines[0] if baselines and _holds_model(baselines[0]) else None
        eval_config = config_pb2.EvalConfig()
        proto_utils.json_to_proto(exec_properties[spec.EVAL_CONFIG_KEY], eval_config)
        check_model_specs(eval_config)
        # As stock: with no baseline yet, change thresholds are dropped ("rubber stamp").
        eval_config = tfma.utils.update_eval_config_with_defaults(
            eval_config, has_baseline=baseline is not None, rubber_stamp=True
        )
        tfma.utils.verify_eval_config(eval_config)
        models = models_to_score(eval_config, model, baseline)

        examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
        splits = json_utils.loads(exec_properties.get(spec.EXAMPLE_SPLITS_KEY) or 'null') or [
            'eval'
        ]
        patterns = _split_patterns(examples, splits)
        output_dir = artifact_utils.get_single_uri(output_dict[spec.EVALUATION_KEY])
        batch_size = int(exec_properties[spec.BATCH_SIZE_KEY])
        logging.info(
            'Evaluating %s on %s, %d examples per batch.',
            {m.name: m.path for m in models},
            patterns,
            batch_size,
        )
        with self._make_beam_pipeline() as pipeline:
            add_evaluation(pipeline, patterns, models, eval_config, output_dir, batch_size)
        validation = tfma.load_validation_result(output_dir)
        logging.info('Evaluation written to %s: %s', output_dir, _metrics_line(output_dir))
        for line in checks.failures(validation):
            logging.info('Validation failed: %s', line)

        if not tfma.metrics.metric_thresholds_from_metrics_specs(
            eval_config.metrics_specs, eval_config=eval_config
        ):
            # As stock: no thresholds, no blessing (a model is never blessed by omission).
            logging.info('No threshold configured: the model is not validated.')
            return
        blessing = artifact_utils.get_single_instance(output_dict[spec.BLESSING_KEY])
        drifted = _blocking_drift(input_dict.get(spec.DRIFT_ANOMALIES_KEY) or [])
        if drifted and validation.validation_ok:
            logging.info('Not blessed: unaccepted data drift in %s.', ', '.join(drifted))
        _record_blessing(
            blessing, model, baseline, validation.validation_ok and not drifted, exec_properties
        )
        if drifted:
            blessing.set_string_custom_property(WITHHELD_FOR_DRIFT_PROPERTY, json.dumps(drifted))


# Custom property of a blessing withheld for data drift: JSON list of the drifted features.
WITHHELD_FOR_DRIFT_PROPERTY = 'withheld_for_drift'


def _blocking_drift(anomalies: Sequence[types.Artifact]) -> list[str]:
    """The features of unaccepted drift that DriftValidator recorded ([] when none)."""
    features = []
    for artifact in anomalies:
        # Read whatever its value type: through KFP's artifact metadata an int comes back a float.
        if artifact.has_custom_property(drift_properties.BLOCKING_PROPERTY) and int(
            artifact.get_custom_property(drift_properties.BLOCKING_PROPERTY)
        ):
            drifts = json.loads(
                artifact.get_string_custom_property(drift_properties.DRIFTED_FEATURES_PROPERTY)
                or '[]'
            )
            features += [drift['feature'] for drift in drifts]
    return features


def _split_patterns(examples: types.Artifact, splits: Sequence[str]) -> list[str]:
    known = artifact_utils.decode_split_names(examples.split_names)
    missing = [s for s in splits if s not in known]
    if missing:
        raise ValueError(f'examples {examples.uri}: no split {missing}; it has {known}')
    return [
        io_utils.all_files_pattern(artifact_utils.get_split_uri([examples], split))
        for split in splits
    ]


def _metrics_line(output_dir: str) -> str:
    parts = []
    for slice_metrics in tfma_writer.load_and_deserialize_metrics(output_dir):
        # The overall slice only: the other slices are in the evaluation, one line each is noise.
        if slice_metrics.HasField('cross_slice_key') or slice_metrics.slice_key.single_slice_keys:
            continue
        for item in slice_metrics.metric_keys_and_values:
            model = f' ({item.key.model_name})' if item.key.model_name else ''
            diff = ' diff' if item.key.is_diff else ''
            parts.append(f'{item.key.name}{model}{diff} {item.value.double_value.value:.6g}')
    return ', '.join(parts)


def _record_blessing(
    blessing: types.Artifact,
    model: types.Artifact,
    baseline: types.Artifact | None,
    blessed: bool,
    exec_properties: dict[str, Any],
) -> None:
    """The blessing file and custom properties, exactly as stock Evaluator sets them."""
    blessing.set_string_custom_property(
        constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY, model.uri
    )
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model.id)
    if baseline is not None:
        blessing.set_string_custom_property(
            constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY, baseline.uri
        )
        blessing.set_int_custom_property(
            constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY, baseline.id
        )
    if 'current_component_id' in exec_properties:
        blessing.set_string_custom_property('component_id', exec_properties['current_component_id'])
    name = constants.BLESSED_FILE_NAME if blessed else constants.NOT_BLESSED_FILE_NAME
    io_utils.write_string_file(os.path.join(blessing.uri, name), '')
    blessing.set_int_custom_property(
        constants.ARTIFACT_PROPERTY_BLESSED_KEY,
        constants.BLESSED_VALUE if blessed else constants.NOT_BLESSED_VALUE,
    )
    logging.info('Blessing result %s written to %s.', blessed, blessing.uri)

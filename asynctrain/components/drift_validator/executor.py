"""The DriftValidator executor: reads today's train statistics, the schema and the statistics the
served model was trained on, calls `comparison.compare`, writes TFDV's anomalies the way
ExampleValidator does, records the verdict on the output and stops the run when told to."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import tensorflow as tf
import tensorflow_data_validation as tfdv
from absl import logging
from tfx import types
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils, writer_utils

from asynctrain.components.drift_validator import comparison, spec, thresholds
from asynctrain.components.shared import drift_properties


def _serving_model_dir(model: types.Artifact) -> str:
    return path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))


_FIRST_RUN_REASONS = {
    drift_properties.NO_MODEL: 'no model pushed yet',
    drift_properties.NO_MODEL_STATISTICS: (
        'the served model carries no statistics of its training data (pushed before models '
        f'kept them in {spec.MODEL_STATISTICS_PATH})'
    ),
}


def model_statistics_path(model: types.Artifact) -> str:
    """Where `model` (a Model artifact) carries the statistics of its training data."""
    return os.path.join(_serving_model_dir(model), spec.MODEL_STATISTICS_PATH)


def baseline_statistics(model: types.Artifact | None) -> tuple[str, str]:
    """(path of the served model's statistics, '') or ('', why there are none to compare with:
    `drift_properties.NO_MODEL` or `drift_properties.NO_MODEL_STATISTICS`)."""
    if model is None:
        return '', drift_properties.NO_MODEL
    path = model_statistics_path(model)
    if fileio.exists(path):
        return path, ''
    if tf.saved_model.contains_saved_model(_serving_model_dir(model)):
        return '', drift_properties.NO_MODEL_STATISTICS
    return '', drift_properties.NO_MODEL


def split_accepted(
    drifts: Sequence[comparison.Drift], accepted: Sequence[str]
) -> tuple[list[comparison.Drift], list[comparison.Drift]]:
    """(unaccepted, accepted) drifts; `spec.ACCEPT_ALL` among `accepted` accepts every one."""
    if spec.ACCEPT_ALL in accepted:
        return [], list(drifts)
    return (
        [drift for drift in drifts if drift.feature not in accepted],
        [drift for drift in drifts if drift.feature in accepted],
    )


def describe(drift: comparison.Drift) -> str:
    """One drift in words, for the log and the error."""
    if drift.absent_from == comparison.ABSENT_FROM_CURRENT:
        return f'{drift.feature} (no values today; the served model was trained with them)'
    if drift.absent_from == comparison.ABSENT_FROM_PREVIOUS:
        return f"{drift.feature} (values today; none in the served model's training data)"
    return f'{drift.feature} ({drift.comparator} {drift.distance:.4g} > threshold {drift.threshold:.4g})'


def kept_anomalies_path(output_uri: str) -> str:
    """Where a stopped run's anomalies stay: beside the output, whose directory TFX's local
    launcher deletes when an execution fails (a KFP backend keeps it; the copy does no harm)."""
    return os.path.join(
        f'{output_uri.rstrip("/")}{spec.STOPPED_SUFFIX}',
        f'Split-{spec.SPLIT}',
        spec.ANOMALIES_FILE_NAME,
    )


def drift_error(
    unaccepted: Sequence[comparison.Drift], compared_with: str, anomalies_path: str
) -> str:
    """The message that stops a run: what drifted, where to look, how to go on."""
    names = ','.join(drift.feature for drift in unaccepted)
    return (
        f"Data drift in the {spec.SPLIT} split against the statistics of the served model's "
        f'training data ({compared_with}): '
        + '; '.join(describe(drift) for drift in unaccepted)
        + f". TFDV's anomalies: {anomalies_path}. If this change is expected, accept it for "
        f'one run with: asynctrain run --accept-drift {names}'
    )


def _as_json(drift: comparison.Drift) -> dict[str, Any]:
    return {
        'feature': drift.feature,
        'comparator': drift.comparator,
        'distance': drift.distance,
        'threshold': drift.threshold,
        'absent_from': drift.absent_from,
    }


class Executor(base_executor.BaseExecutor):
    """Compares today's train statistics with the served model's and records the drift."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        statistics_artifact = artifact_utils.get_single_instance(input_dict[spec.STATISTICS_KEY])
        splits = artifact_utils.decode_split_names(statistics_artifact.split_names)
        if spec.SPLIT not in splits:
            raise ValueError(
                f'statistics: expected a {spec.SPLIT!r} split, got splits {splits} '
                f'({statistics_artifact.uri})'
            )
        statistics = stats_artifact_utils.load_statistics(statistics_artifact, spec.SPLIT).proto()
        schema = io_utils.SchemaReader().read(
            io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri(input_dict[spec.SCHEMA_KEY]))
        )
        limits = thresholds.Thresholds(
            numeric=exec_properties[spec.NUMERIC_THRESHOLD_KEY],
            categorical=exec_properties[spec.CATEGORICAL_THRESHOLD_KEY],
            features=json.loads(exec_properties.get(spec.FEATURE_THRESHOLDS_KEY) or '{}'),
        )
        action = exec_properties.get(spec.ACTION_KEY) or spec.STOP
        if action not in spec.ACTIONS:
            raise ValueError(f'action: expected one of {", ".join(spec.ACTIONS)}, got {action!r}')
        accepted_names = json.loads(exec_properties.get(spec.ACCEPTED_FEATURES_KEY) or '[]')
        baselines = input_dict.get(spec.BASELINE_MODEL_KEY) or []
        compared_with, first_run_reason = baseline_statistics(baselines[0] if baselines else None)
        previous = tfdv.load_stats_binary(compared_with) if compared_with else None

        result = comparison.compare(statistics, previous, schema, limits)
        unaccepted, accepted = split_accepted(result.drifts, accepted_names)

        anomalies = artifact_utils.get_single_instance(output_dict[spec.ANOMALIES_KEY])
        anomalies.split_names = artifact_utils.encode_split_names([spec.SPLIT])
        anomalies.span = statistics_artifact.span
        anomalies_path = os.path.join(
            artifact_utils.get_split_uri([anomalies], spec.SPLIT), spec.ANOMALIES_FILE_NAME
        )
        writer_utils.write_anomalies(anomalies_path, result.anomalies)
        anomalies.set_string_custom_property(
            drift_properties.DRIFTED_FEATURES_PROPERTY,
            json.dumps([_as_json(drift) for drift in unaccepted]),
        )
        anomalies.set_string_custom_property(
            drift_properties.ACCEPTED_FEATURES_PROPERTY,
            json.dumps([drift.feature for drift in accepted]),
        )
        anomalies.set_string_custom_property(drift_properties.COMPARED_WITH_PROPERTY, compared_with)
        anomalies.set_int_custom_property(
            drift_properties.FIRST_RUN_PROPERTY, int(result.first_run)
        )
        anomalies.set_string_custom_property(
            drift_properties.FIRST_RUN_REASON_PROPERTY, first_run_reason
        )
        anomalies.set_int_custom_property(drift_properties.BLOCKING_PROPERTY, int(bool(unaccepted)))

        if result.first_run:
            logging.info(
                'Drift: nothing to compare with, %s; the %s split is judged on the schema alone. '
                'Anomalies: %s',
                _FIRST_RUN_REASONS[first_run_reason],
                spec.SPLIT,
                anomalies_path,
            )
            return
        logging.info(
            'Drift: %d of %d features drifted (%s), %d accepted (%s), against %s. Anomalies: %s',
            len(result.drifts),
            len(result.compared) + len(result.appeared) + len(result.disappeared),
            '; '.join(describe(drift) for drift in unaccepted) or 'none unaccepted',
            len(accepted),
            ', '.join(drift.feature for drift in accepted) or 'none',
            compared_with,
            anomalies_path,
        )
        if unaccepted and action == spec.STOP:
            kept = kept_anomalies_path(anomalies.uri)
            writer_utils.write_anomalies(kept, result.anomalies)
            raise RuntimeError(drift_error(unaccepted, compared_with, kept))

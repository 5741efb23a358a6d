"""DriftValidator's executor on hand-built artifacts: today's statistics in StatisticsGen's
layout, the schema, and a served model carrying (or not) the statistics of its training data."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import tensorflow as tf
from tensorflow_data_validation.utils import anomalies_util
from tfx.types import channel, standard_artifacts
from tfx.utils import io_utils

from asynctrain.components.drift_validator import executor, spec
from asynctrain.components.drift_validator.component import DriftValidator
from asynctrain.components.shared import drift_properties
from tests.components.drift_validator import drift_testdata as data

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('components.drift_validator.executor_test')


def _statistics_artifact(root, statistics) -> standard_artifacts.ExampleStatistics:
    """StatisticsGen's output: `Split-<name>/FeatureStats.pb` for train and eval."""
    artifact = standard_artifacts.ExampleStatistics()
    artifact.uri = str(root)
    artifact.split_names = '["train", "eval"]'
    artifact.span = 3
    for split in ('train', 'eval'):
        io_utils.write_bytes_file(
            os.path.join(root, f'Split-{split}', 'FeatureStats.pb'), statistics.SerializeToString()
        )
    return artifact


@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
    """Statistics of the served model's data and today's (unchanged, drifted), the schema, and
    a tiny SavedModel standing for the served model."""
    root = tmp_path_factory.mktemp('inputs')
    schema = standard_artifacts.Schema()
    schema.uri = str(root / 'schema')
    io_utils.write_pbtxt_file(os.path.join(schema.uri, 'schema.pbtxt'), data.schema())
    module = tf.Module()
    module.f = tf.function(lambda: tf.constant(1.0), input_signature=[])
    tf.saved_model.save(module, str(root / 'savedmodel'))
    baseline = data.statistics(data.baseline_frame())
    return {
        'baseline': baseline,
        'unchanged': _statistics_artifact(root / 'unchanged', baseline),
        'drifted': _statistics_artifact(root / 'drifted', data.statistics(data.drifted_frame())),
        'schema': schema,
        'savedmodel': root / 'savedmodel',
    }


def _model(inputs, root, statistics=True, saved_model=True) -> standard_artifacts.Model:
    """LatestBlessedModel's output: the served model under `Format-Serving`, its training data's
    statistics in `assets.extra`; with neither, the empty model of the days before a push."""
    model = standard_artifacts.Model()
    model.uri = str(root / 'model')
    os.makedirs(model.uri)
    serving = root / 'model' / 'Format-Serving'
    if saved_model:
        shutil.copytree(inputs['savedmodel'], serving)
    if statistics:
        io_utils.write_bytes_file(
            str(serving / spec.MODEL_STATISTICS_PATH), inputs['baseline'].SerializeToString()
        )
    return model


def _run(inputs, today, tmp_path, model, action=spec.STOP, accepted=(), thresholds=None):
    anomalies = standard_artifacts.ExampleAnomalies()
    anomalies.uri = str(tmp_path / 'anomalies')
    input_dict = {spec.STATISTICS_KEY: [inputs[today]], spec.SCHEMA_KEY: [inputs['schema']]}
    if model is not None:
        input_dict[spec.BASELINE_MODEL_KEY] = [model]
    exec_properties = {
        spec.NUMERIC_THRESHOLD_KEY: 0.1,
        spec.CATEGORICAL_THRESHOLD_KEY: 0.1,
        spec.FEATURE_THRESHOLDS_KEY: json.dumps(thresholds or {}),
        spec.ACTION_KEY: action,
        spec.ACCEPTED_FEATURES_KEY: json.dumps(list(accepted)),
    }
    error = None
    try:
        executor.Executor().Do(input_dict, {spec.ANOMALIES_KEY: [anomalies]}, exec_properties)
    except RuntimeError as raised:
        error = raised
    return anomalies, error


def _properties(anomalies) -> dict:
    return {
        'drifted': [
            d['feature']
            for d in json.loads(anomalies.get_string_custom_property('drifted_features'))
        ],
        'accepted': json.loads(anomalies.get_string_custom_property('accepted_features')),
        'compared_with': anomalies.get_string_custom_property('compared_with'),
        'first_run': anomalies.get_int_custom_property('first_run'),
        'first_run_reason': anomalies.get_string_custom_property('first_run_reason'),
        'blocking': anomalies.get_int_custom_property('blocking'),
    }


def _written(anomalies):
    return anomalies_util.load_anomalies_binary(
        os.path.join(anomalies.uri, 'Split-train', 'SchemaDiff.pb')
    )


def test_unchanged_data_passes_with_every_distance_recorded(inputs, tmp_path):
    model = _model(inputs, tmp_path)
    anomalies, error = _run(inputs, 'unchanged', tmp_path, model)

    assert error is None
    assert _properties(anomalies) == {
        'drifted': [],
        'accepted': [],
        'compared_with': executor.model_statistics_path(model),
        'first_run': 0,
        'first_run_reason': '',
        'blocking': 0,
    }
    assert executor.model_statistics_path(model) == str(
        tmp_path / 'model' / 'Format-Serving' / 'assets.extra' / 'statistics' / 'FeatureStats.pb'
    )
    assert anomalies.split_names == '["train"]'
    assert anomalies.span == 3
    written = _written(anomalies)
    assert {
        '.'.join(d.path.step): d.drift_measurements[0].value for d in written.drift_skew_info
    } == {
        'fare': 0.0,
        'payment_type': 0.0,
        'pickup_area': 0.0,
        'tips': 0.0,
        'trip_start_hour': 0.0,
    }


def test_drift_stops_the_run_after_writing_the_anomalies(inputs, tmp_path):
    anomalies, error = _run(inputs, 'drifted', tmp_path, _model(inputs, tmp_path))

    assert _properties(anomalies)['drifted'] == ['fare', 'payment_type']
    assert _properties(anomalies)['blocking'] == 1
    drifted = json.loads(anomalies.get_string_custom_property('drifted_features'))
    payment_type = drifted[1]
    assert payment_type['comparator'] == 'l_infinity'
    assert payment_type['distance'] == pytest.approx(data.PAYMENT_TYPE_L_INFINITY)
    assert payment_type['threshold'] == 0.1
    assert payment_type['absent_from'] == ''
    message = str(error)
    assert 'payment_type (l_infinity 0.2 > threshold 0.1)' in message
    assert (
        f'fare (jensen_shannon_divergence {drifted[0]["distance"]:.4g} > threshold 0.1)' in message
    )
    # The message names the copy kept beside the output (the local launcher deletes a failed
    # execution's output), which holds the same anomalies.
    kept = os.path.join(f'{anomalies.uri}-stopped', 'Split-train', 'SchemaDiff.pb')
    assert f"TFDV's anomalies: {kept}." in message
    assert message.endswith('asynctrain run --accept-drift fare,payment_type')
    # What a person opens: TFDV's own verdict on the two features.
    assert sorted(_written(anomalies).anomaly_info) == ['fare', 'payment_type']
    assert anomalies_util.load_anomalies_binary(kept) == _written(anomalies)


def test_no_push_blocks_the_blessing_without_stopping(inputs, tmp_path):
    anomalies, error = _run(
        inputs, 'drifted', tmp_path, _model(inputs, tmp_path), action=spec.NO_PUSH
    )

    assert error is None
    assert _properties(anomalies)['drifted'] == ['fare', 'payment_type']
    assert _properties(anomalies)['blocking'] == 1


@pytest.mark.parametrize(
    'accepted, drifted, accepted_drifts',
    [
        (['payment_type'], ['fare'], ['payment_type']),
        (['fare', 'payment_type', 'tips'], [], ['fare', 'payment_type']),
        (['all'], [], ['fare', 'payment_type']),
    ],
)
def test_accepted_drift_does_not_block(inputs, tmp_path, accepted, drifted, accepted_drifts):
    anomalies, error = _run(
        inputs, 'drifted', tmp_path, _model(inputs, tmp_path), accepted=accepted
    )

    assert _properties(anomalies)['drifted'] == drifted
    assert _properties(anomalies)['accepted'] == accepted_drifts
    assert _properties(anomalies)['blocking'] == int(bool(drifted))
    assert (error is None) == (not drifted)


def test_a_feature_threshold_reaches_the_comparison(inputs, tmp_path):
    anomalies, error = _run(
        inputs, 'drifted', tmp_path, _model(inputs, tmp_path), thresholds={'fare': 1.0}
    )

    assert _properties(anomalies)['drifted'] == ['payment_type']
    fare = [d for d in _written(anomalies).drift_skew_info if d.path.step == ['fare']]
    assert fare[0].drift_measurements[0].threshold == 1.0


@pytest.mark.parametrize(
    'statistics, saved_model, reason',
    [
        (False, False, drift_properties.NO_MODEL),  # no model pushed yet: an empty Model artifact
        (
            False,
            True,
            drift_properties.NO_MODEL_STATISTICS,
        ),  # pushed before models carried statistics
        (None, None, drift_properties.NO_MODEL),  # no baseline_model input
    ],
)
def test_without_statistics_to_compare_with_the_run_goes_on(
    inputs, tmp_path, statistics, saved_model, reason
):
    model = None if statistics is None else _model(inputs, tmp_path, statistics, saved_model)
    anomalies, error = _run(inputs, 'drifted', tmp_path, model)

    assert error is None
    assert _properties(anomalies) == {
        'drifted': [],
        'accepted': [],
        'compared_with': '',
        'first_run': 1,
        'first_run_reason': reason,
        'blocking': 0,
    }
    written = _written(anomalies)
    assert len(written.drift_skew_info) == 0
    assert not written.anomaly_info


@pytest.mark.parametrize(
    'arguments, message',
    [
        ({'action': 'warn'}, r"action: expected one of stop, no_push, got 'warn'"),
        ({'numeric_threshold': 0}, r'numeric_threshold: expected a threshold in \(0, 1\]'),
        ({'categorical_threshold': 2}, r'categorical_threshold: expected a threshold'),
        ({'feature_thresholds': {'fare': 0}}, r"feature_thresholds\['fare'\]: expected"),
        ({'accepted_features': 'fare'}, r'accepted_features: expected a list of feature names'),
    ],
)
def test_the_constructor_names_the_argument_that_is_wrong(arguments, message):
    with pytest.raises(ValueError, match=message):
        DriftValidator(
            statistics=channel.Channel(type=standard_artifacts.ExampleStatistics),
            schema=channel.Channel(type=standard_artifacts.Schema),
            **arguments,
        )


def test_the_constructor_passes_its_parameters_as_the_executor_reads_them():
    component = DriftValidator(
        statistics=channel.Channel(type=standard_artifacts.ExampleStatistics),
        schema=channel.Channel(type=standard_artifacts.Schema),
        baseline_model=channel.Channel(type=standard_artifacts.Model),
        numeric_threshold=1,
        feature_thresholds={'tips': 0.3, 'fare': 0.2},
        action='no_push',
        accepted_features=['tips', 'fare'],
    )

    assert component.exec_properties == {
        'numeric_threshold': 1.0,
        'categorical_threshold': 0.1,
        'feature_thresholds': '{"fare": 0.2, "tips": 0.3}',
        'action': 'no_push',
        'accepted_features': '["fare", "tips"]',
    }
    assert set(component.inputs) == {'statistics', 'schema', 'baseline_model'}
    assert component.outputs['anomalies'].type is standard_artifacts.ExampleAnomalies

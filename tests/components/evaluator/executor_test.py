"""The Evaluator's executor on hand-built artifacts: the evaluation TFMA reads back, the blessing
file and custom properties stock Evaluator sets, the splits it reads; and the checks that refuse
what it does not evaluate, by field."""

import json
import os

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.proto import config_pb2
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer
from tfx.types import channel, standard_artifacts

from asynctrain.components.evaluator import component, executor, results, spec
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import tfma_config
from asynctrain.pipelines.config import load_config
from tests.components.evaluator import evaluator_testdata as data

pytestmark = pytest.mark.integration


def _eval_config(tmp_path, evaluation):
    config = load_config(work_dir=str(tmp_path / 'work'), evaluation=evaluation)
    return tfma_config.eval_config(config, fc.ColumnLabel(data.LABEL, fc.MULTICLASS))


def _examples(tmp_path):
    """Raw examples with a train and an eval split, as ExampleGen writes them."""
    rows = data.random_rows(fc.MULTICLASS, 900, seed=3)
    data.write_gzip_tfrecords(
        str(tmp_path / 'examples' / 'Split-train' / 'data'), data.serialize(rows[:600]), 2
    )
    data.write_gzip_tfrecords(
        str(tmp_path / 'examples' / 'Split-eval' / 'data'), data.serialize(rows[600:]), 2
    )
    return data.artifact(
        standard_artifacts.Examples, tmp_path / 'examples', split_names=['train', 'eval']
    )


def _run(tmp_path, eval_config, baseline_slope=None, splits=None, examples=None, drift=None):
    """The executor on a multiclass model (and a baseline with `baseline_slope`, and
    DriftValidator's anomalies `drift`)."""
    model = data.artifact(standard_artifacts.Model, tmp_path / 'model', 21)
    data.save_model(fc.MULTICLASS, os.path.join(model.uri, 'Format-Serving'))
    inputs = {spec.EXAMPLES_KEY: [examples or _examples(tmp_path)], spec.MODEL_KEY: [model]}
    if drift is not None:
        inputs[spec.DRIFT_ANOMALIES_KEY] = [drift]
    if baseline_slope is not None:
        baseline = data.artifact(standard_artifacts.Model, tmp_path / 'baseline', 12)
        data.save_model(fc.MULTICLASS, os.path.join(baseline.uri, 'Format-Serving'), baseline_slope)
        inputs[spec.BASELINE_MODEL_KEY] = [baseline]
    evaluation_artifact = data.artifact(standard_artifacts.ModelEvaluation, tmp_path / 'evaluation')
    blessing = data.artifact(standard_artifacts.ModelBlessing, tmp_path / 'blessing')
    os.makedirs(blessing.uri)
    executor.Executor().Do(
        inputs,
        {spec.EVALUATION_KEY: [evaluation_artifact], spec.BLESSING_KEY: [blessing]},
        {
            spec.EVAL_CONFIG_KEY: json_format.MessageToJson(eval_config),
            spec.EXAMPLE_SPLITS_KEY: json.dumps(splits) if splits else None,
            spec.BATCH_SIZE_KEY: 64,
        },
    )
    return evaluation_artifact.uri, blessing


def _count(output_dir, model_name=''):
    (slice_metrics,) = tfma_writer.load_and_deserialize_metrics(output_dir)
    key = tfma.metrics.MetricKey('example_count', model_name=model_name, example_weighted=False)
    return {
        tfma.metrics.MetricKey.from_proto(kv.key): kv.value.double_value.value
        for kv in slice_metrics.metric_keys_and_values
    }[key]


def test_blesses_as_stock_and_reads_the_eval_split(tmp_path):
    output, blessing = _run(tmp_path, _eval_config(tmp_path, {'min_value': 0.5}))
    assert _count(output) == 300  # the eval split only
    result = tfma.load_eval_result(output)
    assert result.model_location == os.path.join(str(tmp_path / 'model'), 'Format-Serving')
    assert os.listdir(blessing.uri) == ['BLESSED']
    assert blessing.get_int_custom_property('blessed') == 1
    assert blessing.get_string_custom_property('current_model') == str(tmp_path / 'model')
    assert blessing.get_int_custom_property('current_model_id') == 21
    assert not blessing.has_custom_property('baseline_model')


def _drift_anomalies(tmp_path, blocking: float, drifted: list[str]):
    anomalies = data.artifact(standard_artifacts.ExampleAnomalies, tmp_path / 'drift')
    # As it arrives through KFP's artifact metadata, where an int comes back a float.
    anomalies.set_float_custom_property('blocking', blocking)
    anomalies.set_string_custom_property(
        'drifted_features',
        json.dumps([{'feature': name, 'distance': 0.9, 'threshold': 0.3} for name in drifted]),
    )
    return anomalies


def test_unaccepted_drift_withholds_the_blessing_of_a_model_that_clears_the_bar(tmp_path):
    evaluation = _eval_config(tmp_path, {'min_value': 0.5})
    _, blessing = _run(tmp_path, evaluation, drift=_drift_anomalies(tmp_path, 1.0, ['fare']))
    assert os.listdir(blessing.uri) == ['NOT_BLESSED']
    assert blessing.get_int_custom_property('blessed') == 0
    assert json.loads(blessing.get_string_custom_property('withheld_for_drift')) == ['fare']


def test_drift_that_does_not_block_leaves_the_blessing_to_the_metrics(tmp_path):
    evaluation = _eval_config(tmp_path, {'min_value': 0.5})
    _, blessing = _run(tmp_path, evaluation, drift=_drift_anomalies(tmp_path, 0.0, []))
    assert os.listdir(blessing.uri) == ['BLESSED']
    assert not blessing.has_custom_property('withheld_for_drift')


def test_with_a_baseline_both_are_scored_on_every_split_and_the_bound_decides(tmp_path):
    # The baseline is the same model, so the change check (no regression beyond 0) passes and
    # only the value bound, above any accuracy these noisy labels allow, fails.
    evaluation = {'min_value': 0.99, 'baseline': 'latest_blessed', 'max_regression': 0.0}
    output, blessing = _run(
        tmp_path, _eval_config(tmp_path, evaluation), baseline_slope=4.0, splits=['train', 'eval']
    )
    assert _count(output, 'candidate') == _count(output, 'baseline') == 900
    assert os.listdir(blessing.uri) == ['NOT_BLESSED']
    assert blessing.get_int_custom_property('blessed') == 0
    assert blessing.get_string_custom_property('baseline_model') == str(tmp_path / 'baseline')
    assert blessing.get_int_custom_property('baseline_model_id') == 12
    validation = tfma.load_validation_result(output)
    (per_slice,) = validation.metric_validations_per_slice
    assert [(f.metric_key.name, f.metric_key.is_diff) for f in per_slice.failures] == [
        ('accuracy', False)
    ]


def test_an_empty_split_is_an_error_naming_it(tmp_path):
    examples = _examples(tmp_path)
    for name in os.listdir(os.path.join(examples.uri, 'Split-eval')):
        os.remove(os.path.join(examples.uri, 'Split-eval', name))
    data.write_gzip_tfrecords(str(tmp_path / 'examples' / 'Split-eval' / 'data'), [])
    with pytest.raises(Exception, match='Split-eval.*no examples to evaluate'):
        _run(tmp_path, _eval_config(tmp_path, {'min_value': 0.5}), examples=examples)


@pytest.mark.parametrize(
    'change, message',
    [
        (
            lambda c: c.slicing_specs.add(slice_keys_sql='SELECT 1'),
            r'eval_config.slicing_specs\[1\].slice_keys_sql: not supported',
        ),
        (
            # TFMA counts the examples of single slices only: it has none for a cross slice.
            lambda c: (
                setattr(c.options.min_slice_size, 'value', 10),
                c.cross_slicing_specs.add(baseline_spec={}),
            ),
            r'eval_config.options.min_slice_size: not supported with cross_slicing_specs',
        ),
        (
            lambda c: c.cross_slicing_specs.add(baseline_spec={'slice_keys_sql': 'SELECT 1'}),
            r'eval_config.cross_slicing_specs\[0\].baseline_spec.slice_keys_sql: not supported',
        ),
        (
            lambda c: c.metrics_specs[0].output_names.append('head'),
            r'eval_config.metrics_specs\[0\].output_names: not supported',
        ),
        (
            lambda c: c.metrics_specs[0].binarize.top_k_list.values.append(1),
            r'eval_config.metrics_specs\[0\].binarize: not supported',
        ),
        (
            lambda c: c.metrics_specs[0].metrics.add(class_name='Precision'),
            r"metrics_specs\[0\]: metric class 'Precision' is not supported",
        ),
        (
            lambda c: c.metrics_specs[0].metrics.add(class_name='AUC'),
            r'metric AUC needs a config with its name',
        ),
        (
            lambda c: c.model_specs[0].ClearField('preprocessing_function_names'),
            r'model_specs\[0\].preprocessing_function_names: expected one signature',
        ),
        (
            lambda c: c.model_specs[0].ClearField('label_key'),
            r'model_specs\[0\].label_key: required',
        ),
    ],
)
def test_what_it_does_not_evaluate_is_refused_by_field(tmp_path, change, message):
    eval_config = _eval_config(tmp_path, {'min_value': 0.5})
    change(eval_config)
    with pytest.raises(ValueError, match=message):
        component.Evaluator(
            examples=channel.Channel(type=standard_artifacts.Examples),
            model=channel.Channel(type=standard_artifacts.Model),
            eval_config=eval_config,
        )


@pytest.mark.parametrize('method', ['JACKKNIFE', 'POISSON_BOOTSTRAP'])
def test_both_of_tfmas_confidence_interval_methods_are_accepted(tmp_path, method):
    eval_config = _eval_config(tmp_path, {'min_value': 0.5})
    eval_config.options.compute_confidence_intervals.value = True
    eval_config.options.confidence_intervals.method = getattr(
        config_pb2.ConfidenceIntervalOptions, method
    )
    component.Evaluator(
        examples=channel.Channel(type=standard_artifacts.Examples),
        model=channel.Channel(type=standard_artifacts.Model),
        eval_config=eval_config,
    )
    # What the executor then resamples: TFMA's 20 partitions or 20 bootstrap samples.
    eval_config = tfma.utils.update_eval_config_with_defaults(eval_config)
    counts = (
        results.num_jackknife_partitions(eval_config),
        results.num_bootstrap_samples(eval_config),
    )
    assert counts == ((20, 0) if method == 'JACKKNIFE' else (0, 20))


def test_a_label_key_the_model_lacks_is_an_error_naming_signature_and_key(tmp_path):
    eval_config = _eval_config(tmp_path, {'min_value': 0.5})
    eval_config.model_specs[0].label_key = 'species'
    with pytest.raises(Exception, match=r"signature 'transform_features'.*label_key 'species'"):
        _run(tmp_path, eval_config)

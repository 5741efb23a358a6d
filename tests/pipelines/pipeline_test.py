"""create_pipeline: which components, in what order, wired with what settings."""

import json

import pytest

from components.transform.feature_config import FeatureConfigError
from pipelines import pipeline as pipeline_lib
from pipelines.config import load_config


@pytest.fixture
def config(tmp_path):
    return load_config(work_dir=str(tmp_path / 'work'))


def test_components_are_wired_in_pipeline_order(config):
    pipeline = pipeline_lib.create_pipeline(config)
    components = {c.id: c for c in pipeline.components}
    example_gen = next(i for i in components if i.endswith('ExampleGen'))
    upstream = {i: sorted(u.id for u in c.upstream_nodes) for i, c in components.items()}
    assert upstream == {
        example_gen: [],
        'StatisticsGen': [example_gen],
        'ImportSchemaGen': [],
        'ExampleValidator': ['ImportSchemaGen', 'StatisticsGen'],
        'Transform': sorted([example_gen, 'ImportSchemaGen']),
        'Trainer': ['ImportSchemaGen', 'Transform'],
        'Evaluator': sorted([example_gen, 'Trainer']),
        'Pusher': ['Evaluator', 'Trainer'],
    }
    assert pipeline.pipeline_info.pipeline_root == config.pipeline_root
    assert pipeline.enable_cache is True
    assert pipeline.beam_pipeline_args == list(config.beam_pipeline_args)


def test_transform_runs_the_generated_preprocessing_fn_with_the_feature_config(config):
    transform = {c.id: c for c in pipeline_lib.create_pipeline(config).components}['Transform']
    assert transform.exec_properties['preprocessing_fn'] == pipeline_lib.PREPROCESSING_FN
    custom = json.loads(transform.exec_properties['custom_config'])
    features = custom['feature_config']
    assert features['label']['name'] == 'big_tipper'
    assert {f['name'] for f in features['features']} >= {'fare', 'company', 'trip_start_hour'}


def test_evaluator_gates_on_the_configured_threshold_with_the_label(config):
    evaluator = {c.id: c for c in pipeline_lib.create_pipeline(config).components}['Evaluator']
    eval_config = json.loads(evaluator.exec_properties['eval_config'])
    spec = eval_config['model_specs'][0]
    assert spec['label_key'] == 'big_tipper'
    assert spec['preprocessing_function_names'] == ['transform_features']
    gated = [m for m in eval_config['metrics_specs'][0]['metrics'] if 'threshold' in m]
    assert [m['class_name'] for m in gated] == ['AUC']
    assert gated[0]['threshold']['value_threshold']['lower_bound'] == config.evaluation.min_value


def test_pusher_writes_to_the_serving_dir_under_the_work_dir(config):
    pusher = {c.id: c for c in pipeline_lib.create_pipeline(config).components}['Pusher']
    destination = json.loads(pusher.exec_properties['push_destination'])
    assert destination['filesystem']['base_directory'] == config.serving_dir


def test_a_user_preprocessing_module_replaces_the_generated_function(tmp_path):
    module = tmp_path / 'my_preprocessing.py'
    module.write_text('def preprocessing_fn(inputs):\n    return inputs\n')
    config = load_config(work_dir=str(tmp_path), preprocessing_module=str(module))
    transform = {c.id: c for c in pipeline_lib.create_pipeline(config).components}['Transform']
    assert transform.exec_properties['module_file'] == str(module)
    assert transform.exec_properties.get('preprocessing_fn') is None


def test_an_unknown_feature_fails_at_build_time_naming_it(tmp_path):
    dataset = tmp_path / 'mydata'
    dataset.mkdir()
    (dataset / 'schema.pbtxt').write_text(
        'feature { name: "x" type: FLOAT }\nfeature { name: "y" type: FLOAT }\n'
    )
    (dataset / 'features.yaml').write_text(
        'label: {name: l, rule: greater_than_fraction, value: x, reference: y, fraction: 0.5}\n'
        'features:\n  - {name: speed, transform: zscore}\n'
    )
    config = load_config(work_dir=str(tmp_path), dataset=str(dataset))
    with pytest.raises(
        FeatureConfigError, match=r"features\[0\] \(speed\): unknown feature 'speed'"
    ):
        pipeline_lib.create_pipeline(config)


def test_a_date_selects_that_days_span_and_the_trainer_warm_starts(tmp_path):
    config = load_config(
        work_dir=str(tmp_path),
        date='2024-01-02',
        example_gen={'input_pattern': '{YYYY}-{MM}-{DD}/*.csv'},
        retraining={'warm_start': True, 'analyzer_cache': True},
    )
    components = {c.id: c for c in pipeline_lib.create_pipeline(config).components}
    example_gen = next(c for i, c in components.items() if i.endswith('ExampleGen'))
    span = json.loads(example_gen.exec_properties['range_config'])['static_range']
    assert span == {'start_span_number': 19724, 'end_span_number': 19724}  # days since 1970-01-01
    assert (
        components['Trainer'].inputs['base_model'].producer_component_id == 'latest_blessed_model'
    )
    assert components['Transform'].inputs['analyzer_cache'].producer_component_id == (
        'latest_transform_cache'
    )


def test_a_date_without_a_dated_input_pattern_is_rejected(tmp_path):
    from pipelines.config import ConfigError

    with pytest.raises(ConfigError, match=r'example_gen.input_pattern: a run for one date needs'):
        load_config(work_dir=str(tmp_path), date='2024-01-02')
    with pytest.raises(ConfigError, match=r"date: expected YYYY-MM-DD, got '2024-13-01'"):
        load_config(
            work_dir=str(tmp_path),
            date='2024-13-01',
            example_gen={'input_pattern': '{YYYY}{MM}{DD}/*'},
        )


def test_retraining_inputs_are_off_by_default_so_a_rerun_is_a_cache_hit(config):
    components = {c.id: c for c in pipeline_lib.create_pipeline(config).components}
    assert 'latest_blessed_model' not in components
    assert 'latest_transform_cache' not in components
    assert 'base_model' not in components['Trainer'].inputs
    assert 'analyzer_cache' not in components['Transform'].inputs

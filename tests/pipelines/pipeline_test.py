"""create_pipeline: which components, in what order, wired with what settings."""

import json

import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import config_pb2

from asynctrain.components.evaluator import results as evaluator_results
from asynctrain.components.example_gen import spec as example_gen_spec
from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing
from asynctrain.pipelines import dataset as dataset_lib
from asynctrain.pipelines import pipeline as pipeline_lib
from asynctrain.pipelines import run_summary, tfma_config
from asynctrain.pipelines.config import load_config

PENGUIN_SCHEMA = """
feature { name: "Species" type: BYTES }
feature { name: "Island" type: BYTES }
feature { name: "Culmen Length (mm)" type: FLOAT }
feature { name: "Body Mass (g)" type: FLOAT }
"""
PENGUIN_FEATURES = """
label: {column: Species, task: multiclass}
features:
  - {name: Island, transform: vocabulary}
  - {name: Culmen Length (mm), transform: zscore}
"""


def _build(config):
    """`create_pipeline` as the runners call it: over the config's loaded dataset."""
    return pipeline_lib.create_pipeline(config, dataset_lib.load(config))


@pytest.fixture
def config(tmp_path):
    return load_config(work_dir=str(tmp_path / 'work'))


def test_components_are_wired_in_pipeline_order(config):
    pipeline = _build(config)
    components = {c.id: c for c in pipeline.components}
    example_gen = next(i for i in components if i.endswith('ExampleGen'))
    upstream = {i: sorted(u.id for u in c.upstream_nodes) for i, c in components.items()}
    assert upstream == {
        example_gen: [],
        'ImportSchemaGen': [],
        # The ExampleGen's statistics: no StatisticsGen reads the examples back.
        'ExampleValidator': sorted([example_gen, 'ImportSchemaGen']),
        'latest_blessed_model': [example_gen],
        'DriftValidator': sorted([example_gen, 'ImportSchemaGen', 'latest_blessed_model']),
        # Drift stops the run before Transform (the default action, `stop`).
        'Transform': sorted([example_gen, 'DriftValidator', 'ImportSchemaGen']),
        # Transform analyzes only; the batcher transforms the raw examples with its graph.
        'ExampleBatcher': sorted([example_gen, 'Transform']),
        # The Trainer stores the training data's statistics in the model.
        'Trainer': sorted([example_gen, 'ExampleBatcher', 'ImportSchemaGen', 'Transform']),
        'Evaluator': sorted([example_gen, 'Trainer']),
        'Pusher': ['Evaluator', 'Trainer'],
    }
    assert pipeline.pipeline_info.pipeline_root == config.pipeline_root
    assert pipeline.enable_cache is True
    assert pipeline.beam_pipeline_args == list(config.beam_pipeline_args)


def _extra_packages(executor) -> list[str]:
    """The `--extra_package` arguments TFX added for remote Beam workers when it built
    `executor`."""
    args = executor._beam_pipeline_args or []  # noqa: SLF001
    return [a for a in args if a.startswith('--extra_package')]


def test_beam_components_build_a_tfx_package_for_remote_workers_only_off_a_direct_runner(
    config, tmp_path, monkeypatch
):
    """TFX's Beam executors, given any Beam argument, build an sdist of TFX (seconds, 49 MB left
    in the temporary directory) for remote workers; ours leave it out on a direct runner, whose
    workers never read it (`components.shared.beam_runner`), and keep it for any other runner."""
    import tempfile

    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

    pipeline = _build(config)
    executors = {
        c.id: c.executor_spec.executor_class
        for c in pipeline.components
        if issubclass(getattr(c.executor_spec, 'executor_class', object), BaseBeamExecutor)
    }
    assert {'CsvExampleGen', 'Transform', 'ExampleBatcher', 'Evaluator'} <= set(executors)
    scratch = tmp_path / 'tmp'
    scratch.mkdir()
    monkeypatch.setattr(tempfile, 'tempdir', str(scratch))

    direct = ['--direct_num_workers=2', '--direct_running_mode=multi_processing']
    for beam_args in (pipeline.beam_pipeline_args, direct, ['--runner=DirectRunner']):
        for component_id, executor_class in executors.items():
            context = BaseBeamExecutor.Context(beam_pipeline_args=list(beam_args))
            executor = executor_class(context)
            assert _extra_packages(executor) == [], (component_id, beam_args)
            # The arguments reach Beam as given.
            assert executor._beam_pipeline_args == list(beam_args)  # noqa: SLF001
    assert list(scratch.iterdir()) == []
    # A runner whose workers are elsewhere still gets TFX's package.
    remote = ['--runner=PortableRunner', '--job_endpoint=localhost:8099']
    context = BaseBeamExecutor.Context(beam_pipeline_args=remote)
    remote_transform = executors['Transform'](context)
    (package,) = _extra_packages(remote_transform)
    assert package.endswith('.tar.gz') and package.split('=', 1)[1].startswith(str(scratch))
    # And Beam's pipeline as it is: its `run`, state cache included (`beam_runner_test`).
    assert 'run' not in vars(remote_transform._make_beam_pipeline())  # noqa: SLF001


def test_transform_runs_the_generated_preprocessing_fn_with_the_feature_config(config):
    transform = {c.id: c for c in _build(config).components}['Transform']
    assert transform.exec_properties['preprocessing_fn'] == pipeline_lib.PREPROCESSING_FN
    custom = json.loads(transform.exec_properties['custom_config'])
    features = custom['feature_config']
    assert features['label']['name'] == 'big_tipper'
    assert {f['name'] for f in features['features']} >= {'fare', 'company', 'trip_start_hour'}


def test_evaluator_gates_on_the_configured_threshold_with_the_label(config):
    evaluator = {c.id: c for c in _build(config).components}['Evaluator']
    eval_config = json.loads(evaluator.exec_properties['eval_config'])
    spec = eval_config['model_specs'][0]
    assert spec['label_key'] == 'big_tipper'
    assert spec['preprocessing_function_names'] == ['transform_features']
    gated = [m for m in eval_config['metrics_specs'][0]['metrics'] if 'threshold' in m]
    assert [m['class_name'] for m in gated] == ['AUC']
    assert gated[0]['threshold']['value_threshold']['lower_bound'] == config.evaluation.min_value


def test_pusher_writes_to_the_serving_dir_under_the_work_dir(config):
    pusher = {c.id: c for c in _build(config).components}['Pusher']
    destination = json.loads(pusher.exec_properties['push_destination'])
    assert destination['filesystem']['base_directory'] == config.serving_dir
    assert config.serving_dir == str(config.state_dir) + '/serving_model'
    assert config.state_dir.endswith('/work/asynctrain-taxi')


def test_the_trainer_records_the_identity_the_latest_blessed_model_looks_for(config):
    """One identity, the pipeline's: written into its models, asked of a push before taking it."""
    from asynctrain.components.latest_blessed_model import spec as latest_spec
    from asynctrain.components.shared import model_identity
    from asynctrain.components.trainer import spec as trainer_spec

    components = {c.id: c for c in _build(config).components}
    latest = components[pipeline_lib.LATEST_BLESSED_MODEL].exec_properties
    # The node whose `passed_over` property the run summary reads.
    assert run_summary.LATEST_BLESSED_MODEL == pipeline_lib.LATEST_BLESSED_MODEL
    recorded = components['Trainer'].exec_properties[trainer_spec.MODEL_IDENTITY_KEY]
    assert latest[latest_spec.MODEL_IDENTITY_KEY] == recorded
    assert latest[latest_spec.PUSH_DESTINATION_KEY] == config.serving_dir
    assert json.loads(recorded) == {
        'pipeline_name': 'asynctrain-taxi',
        'label': 'big_tipper',
        'schema_fingerprint': model_identity.schema_file_fingerprint(config.schema_path),
    }


def test_a_user_preprocessing_module_replaces_the_generated_function(tmp_path):
    module = tmp_path / 'my_preprocessing.py'
    module.write_text('def preprocessing_fn(inputs):\n    return inputs\n')
    config = load_config(work_dir=str(tmp_path), preprocessing_module=str(module))
    transform = {c.id: c for c in _build(config).components}['Transform']
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
    with pytest.raises(ConfigError, match=r"features\[0\] \(speed\): unknown feature 'speed'"):
        _build(config)


def test_a_date_selects_that_days_span_and_the_trainer_warm_starts(tmp_path):
    config = load_config(
        work_dir=str(tmp_path),
        date='2024-01-02',
        example_gen={'input_pattern': '{YYYY}-{MM}-{DD}/*.csv'},
        retraining={'warm_start': True, 'analyzer_cache': True},
    )
    components = {c.id: c for c in _build(config).components}
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
    from asynctrain.components.shared.yaml_config import ConfigError

    with pytest.raises(ConfigError, match=r'example_gen.input_pattern: a run for one date needs'):
        load_config(work_dir=str(tmp_path), date='2024-01-02')
    with pytest.raises(ConfigError, match=r"date: expected YYYY-MM-DD, got '2024-13-01'"):
        load_config(
            work_dir=str(tmp_path),
            date='2024-13-01',
            example_gen={'input_pattern': '{YYYY}{MM}{DD}/*'},
        )


def test_transform_statistics_are_off_by_default_and_on_when_asked(config, tmp_path):
    statistics = {
        'pre_transform_schema',
        'pre_transform_stats',
        'post_transform_schema',
        'post_transform_stats',
        'post_transform_anomalies',
    }
    transform = _components(config)['Transform']
    assert transform.exec_properties['disable_statistics'] == 1
    assert not statistics & set(transform.outputs)
    # The graph alone: the ExampleBatcher transforms the examples, Transform materializes none.
    assert set(transform.outputs) == {'transform_graph'}
    batcher = _components(config)['ExampleBatcher']
    assert batcher.exec_properties['transform'] == 1

    on = load_config(work_dir=str(tmp_path / 'on'), transform={'statistics': True})
    transform = _components(on)['Transform']
    assert transform.exec_properties['disable_statistics'] == 0
    assert statistics <= set(transform.outputs)
    with pytest.raises(ConfigError, match=r'transform\.statistics'):
        load_config(work_dir=str(tmp_path / 'bad'), transform={'statistics': 'sometimes'})


def test_the_example_batcher_files_per_split_come_from_the_config(config, tmp_path):
    assert _components(config)['ExampleBatcher'].exec_properties['num_files'] == 0
    fixed = load_config(work_dir=str(tmp_path / 'fixed'), example_batcher={'num_files': 64})
    assert _components(fixed)['ExampleBatcher'].exec_properties['num_files'] == 64


def test_retraining_inputs_are_off_by_default_so_a_rerun_is_a_cache_hit(config):
    components = {c.id: c for c in _build(config).components}
    assert 'latest_transform_cache' not in components
    assert 'base_model' not in components['Trainer'].inputs
    assert 'baseline_model' not in components['Evaluator'].inputs
    assert 'analyzer_cache' not in components['Transform'].inputs
    # Without the cache Transform neither reads nor writes one.
    assert 'updated_analyzer_cache' not in components['Transform'].outputs
    # The latest blessed model feeds drift only (it is triggered by the examples, so a rerun on
    # the same data is still a cache hit).
    consumers = [
        c.id for c in components.values() if components['latest_blessed_model'] in c.upstream_nodes
    ]
    assert consumers == ['DriftValidator']


def test_drift_settings_reach_the_drift_validator(tmp_path):
    config = load_config(
        work_dir=str(tmp_path / 'work'),
        drift={
            'numeric_threshold': 0.25,
            'categorical_threshold': 0.05,
            'features': {'fare': 0.5},
            'accept': ['tips'],
        },
    )
    drift = _components(config)['DriftValidator'].exec_properties
    assert (drift['numeric_threshold'], drift['categorical_threshold']) == (0.25, 0.05)
    assert json.loads(drift['feature_thresholds']) == {'fare': 0.5}
    assert json.loads(drift['accepted_features']) == ['tips']
    assert drift['action'] == 'stop'


def test_drift_no_push_trains_and_lets_the_evaluator_withhold_the_blessing(tmp_path):
    config = load_config(work_dir=str(tmp_path / 'work'), drift={'action': 'no_push'})
    components = _components(config)
    assert components['DriftValidator'] not in components['Transform'].upstream_nodes
    evaluator = components['Evaluator']
    assert evaluator.inputs['drift_anomalies'].producer_component_id == 'DriftValidator'


def test_drift_off_leaves_no_drift_nodes(tmp_path):
    components = _components(load_config(work_dir=str(tmp_path / 'work'), drift={'enabled': False}))
    assert 'DriftValidator' not in components and 'latest_blessed_model' not in components


@pytest.mark.parametrize(
    ('drift', 'field', 'named'),
    [
        ({'features': {'fares': 0.5}}, 'drift.features', "'fares'"),
        ({'accept': ['fares']}, 'drift.accept', "'fares'"),
    ],
)
def test_drift_names_outside_the_schema_are_refused_by_field(tmp_path, drift, field, named):
    config = load_config(work_dir=str(tmp_path / 'work'), drift=drift)
    with pytest.raises(ConfigError) as error:
        _build(config)
    assert str(error.value).startswith(f'{field}: ') and named in str(error.value)
    assert 'fare' in str(error.value)  # the schema's features are listed


@pytest.mark.parametrize(
    ('drift', 'field'),
    [
        ({'numeric_threshold': 0}, 'drift.numeric_threshold'),
        ({'categorical_threshold': 1.5}, 'drift.categorical_threshold'),
        ({'features': {'fare': -0.1}}, 'drift.features.fare'),
        ({'action': 'warn'}, 'drift.action'),
    ],
)
def test_bad_drift_settings_are_refused_by_field(tmp_path, drift, field):
    with pytest.raises(ConfigError, match=f'^{field}'):
        load_config(work_dir=str(tmp_path / 'work'), drift=drift)


def _penguins(tmp_path, features: str | None = PENGUIN_FEATURES) -> str:
    dataset = tmp_path / 'penguins'
    dataset.mkdir()
    (dataset / 'schema.pbtxt').write_text(PENGUIN_SCHEMA)
    if features is not None:
        (dataset / 'features.yaml').write_text(features)
    return str(dataset)


def _components(config) -> dict:
    return {c.id: c for c in _build(config).components}


def _gated_metric(evaluator) -> tuple[dict, dict]:
    eval_config = json.loads(evaluator.exec_properties['eval_config'])
    gated = [m for m in eval_config['metrics_specs'][0]['metrics'] if 'threshold' in m]
    assert len(gated) == 1
    return eval_config['model_specs'][0], gated[0]


def test_a_column_label_reaches_example_gen_transform_trainer_and_evaluator(tmp_path):
    config = load_config(work_dir=str(tmp_path / 'work'), dataset=_penguins(tmp_path))
    components = _components(config)
    example_gen = next(c for i, c in components.items() if i.endswith('ExampleGen'))
    assert example_gen.exec_properties[example_gen_spec.LABEL_COLUMN_KEY] == 'Species'
    custom = json.loads(components['Transform'].exec_properties['custom_config'])
    assert custom['feature_config']['label'] == {
        'column': 'Species',
        'task': 'multiclass',
        'positive': None,
        'loss': 'mse',
    }
    trainer = components['Trainer'].exec_properties
    assert trainer['label_key'] == 'Species'
    assert json.loads(trainer['config'])['task'] == {
        'type': 'multiclass',
        'loss': 'mse',
        'huber_delta': 1.0,
    }
    spec, gated = _gated_metric(components['Evaluator'])
    assert (spec['label_key'], spec['prediction_key']) == ('Species', 'probabilities')
    assert gated['class_name'] == 'SparseCategoricalAccuracy'
    assert json.loads(gated['config']) == {'name': 'accuracy'}
    assert gated['threshold']['value_threshold'] == {'lower_bound': config.evaluation.min_value}


def test_the_taxi_label_is_derived_so_example_gen_checks_no_label_column(config):
    components = _components(config)
    example_gen = next(c for i, c in components.items() if i.endswith('ExampleGen'))
    assert example_gen.exec_properties.get(example_gen_spec.LABEL_COLUMN_KEY) is None
    assert json.loads(components['Trainer'].exec_properties['config'])['task']['type'] == 'binary'


def test_with_a_module_the_pipeline_config_gives_the_label_and_task(tmp_path):
    module = tmp_path / 'my_preprocessing.py'
    module.write_text('def preprocessing_fn(inputs, custom_config):\n    return inputs\n')
    config = load_config(
        work_dir=str(tmp_path / 'work'),
        dataset=_penguins(tmp_path, features=None),  # no features.yaml at all
        preprocessing_module=str(module),
        label={'column': 'Body Mass (g)', 'task': 'regression', 'loss': 'huber'},
        evaluation={'max_value': 400.0},
    )
    components = _components(config)
    custom = json.loads(components['Transform'].exec_properties['custom_config'])
    assert preprocessing.label_from_custom_config(custom) == fc.ColumnLabel(
        'Body Mass (g)', 'regression', loss='huber'
    )
    trainer = components['Trainer'].exec_properties
    assert trainer['label_key'] == 'Body Mass (g)'
    assert json.loads(trainer['config'])['task']['type'] == 'regression'
    assert json.loads(trainer['config'])['task']['loss'] == 'huber'
    spec, gated = _gated_metric(components['Evaluator'])
    assert (spec['label_key'], spec['prediction_key']) == ('Body Mass (g)', 'predictions')
    assert (gated['class_name'], json.loads(gated['config'])) == (
        'RootMeanSquaredError',
        {'name': 'rmse'},
    )
    assert gated['threshold']['value_threshold'] == {'upper_bound': 400.0}


def test_the_pipeline_config_label_overrides_features_yaml(tmp_path):
    config = load_config(
        work_dir=str(tmp_path / 'work'),
        dataset=_penguins(tmp_path),
        label={'column': 'Island', 'task': 'binary', 'positive': 'Biscoe'},
    )
    with pytest.raises(ConfigError, match="pipeline config: label.column: 'Island' is also a"):
        _components(config)
    config = load_config(
        work_dir=str(tmp_path / 'work'),
        dataset=config.dataset,
        label={'column': 'Species', 'task': 'binary', 'positive': 'Adelie'},
    )
    components = _components(config)
    custom = json.loads(components['Transform'].exec_properties['custom_config'])
    assert custom['feature_config']['label']['positive'] == 'Adelie'
    assert json.loads(components['Trainer'].exec_properties['config'])['task']['type'] == 'binary'
    _, gated = _gated_metric(components['Evaluator'])
    assert gated['class_name'] == 'AUC'


def test_no_label_anywhere_fails_naming_both_places(tmp_path):
    module = tmp_path / 'my_preprocessing.py'
    module.write_text('def preprocessing_fn(inputs):\n    return inputs\n')
    config = load_config(
        work_dir=str(tmp_path / 'work'),
        dataset=_penguins(tmp_path, features='features: []\n'),
        preprocessing_module=str(module),
    )
    with pytest.raises(ConfigError) as error:
        _components(config)
    assert 'label: no label' in str(error.value)
    assert f'in {config.feature_config_path} or in the pipeline config' in str(error.value)


def test_a_penguin_user_with_the_old_label_form_is_told_the_new_one(tmp_path):
    dataset = _penguins(
        tmp_path, PENGUIN_FEATURES.replace('column: Species, task: multiclass', 'name: Species')
    )
    config = load_config(work_dir=str(tmp_path / 'work'), dataset=dataset)
    with pytest.raises(ConfigError) as error:
        _components(config)
    assert str(error.value).startswith(
        f'{config.feature_config_path}: label: expected {{column: NAME'
    )


@pytest.mark.parametrize(
    'task, evaluation, class_name, name, bound',
    [
        ('binary', {}, 'AUC', 'auc', {'lower_bound': 0.6}),
        (
            'binary',
            {'metric': 'BinaryAccuracy', 'min_value': 0.7},
            'BinaryAccuracy',
            'binary_accuracy',
            {'lower_bound': 0.7},
        ),
        (
            'multiclass',
            {'min_value': 0.5},
            'SparseCategoricalAccuracy',
            'accuracy',
            {'lower_bound': 0.5},
        ),
        ('regression', {'max_value': 2.5}, 'RootMeanSquaredError', 'rmse', {'upper_bound': 2.5}),
        (
            'regression',
            {'metric': 'MSE', 'max_value': 6.0},
            'MeanSquaredError',
            'mse',
            {'upper_bound': 6.0},
        ),
    ],
)
def test_eval_config_per_task(tmp_path, task, evaluation, class_name, name, bound):
    config = load_config(work_dir=str(tmp_path), evaluation=evaluation)
    label = fc.ColumnLabel('Body Mass (g)', task)
    eval_config = tfma_config.eval_config(config, label)
    (spec,) = eval_config.model_specs
    assert spec.label_key == 'Body Mass (g)'
    assert spec.prediction_key == ('predictions' if task == 'regression' else 'probabilities')
    assert spec.signature_name == 'serving_default'
    metrics = eval_config.metrics_specs[0].metrics
    gated = [m for m in metrics if m.HasField('threshold')]
    assert [(m.class_name, json.loads(m.config)['name']) for m in gated] == [(class_name, name)]
    value_threshold = gated[0].threshold.value_threshold
    assert {f.name: v.value for f, v in value_threshold.ListFields()} == bound
    assert metrics[0].class_name == 'ExampleCount'


def test_slices_gate_each_slice_and_the_whole_split_apart(tmp_path):
    config = load_config(
        work_dir=str(tmp_path),
        evaluation={
            'min_value': 0.8,
            'baseline': 'latest_blessed',
            'max_regression': 0.01,
            'slices': [['payment_type'], ['payment_type', 'trip_start_hour']],
            'slice_min_value': 0.7,
            'slice_max_regression': 0.05,
        },
    )
    eval_config = tfma_config.eval_config(config, fc.ColumnLabel('tips', 'binary'))
    specs = [config_pb2.SlicingSpec(feature_keys=['payment_type'])]
    specs.append(config_pb2.SlicingSpec(feature_keys=['payment_type', 'trip_start_hour']))
    assert list(eval_config.slicing_specs) == [config_pb2.SlicingSpec(), *specs]
    (gated,) = [m for m in eval_config.metrics_specs[0].metrics if m.per_slice_thresholds]
    # TFMA checks a `threshold` on every slice: the whole split's gate is the overall slice's.
    assert not gated.HasField('threshold')
    overall, sliced = gated.per_slice_thresholds
    assert list(overall.slicing_specs) == [config_pb2.SlicingSpec()]
    assert overall.threshold.value_threshold.lower_bound.value == 0.8
    assert overall.threshold.change_threshold.absolute.value == -0.01
    assert list(sliced.slicing_specs) == specs
    assert sliced.threshold.value_threshold.lower_bound.value == 0.7
    assert sliced.threshold.change_threshold.absolute.value == -0.05
    assert run_summary.gated_metric_names(eval_config) == ['auc']


def test_min_slice_size_is_tfmas_option_and_leaves_the_intervals_unset(tmp_path):
    config = load_config(
        work_dir=str(tmp_path), evaluation={'slices': [['payment_type']], 'min_slice_size': 20}
    )
    eval_config = tfma_config.eval_config(config, fc.ColumnLabel('tips', 'binary'))
    assert eval_config.options == config_pb2.Options(min_slice_size={'value': 20})
    unsized = tfma_config.eval_config(
        load_config(work_dir=str(tmp_path), evaluation={'slices': [['payment_type']]}),
        fc.ColumnLabel('tips', 'binary'),
    )
    assert not unsized.HasField('options')


def test_an_example_weight_column_weighs_every_metric_and_keeps_the_unweighted_ones(tmp_path):
    config = load_config(work_dir=str(tmp_path), evaluation={'example_weight': 'trip_miles'})
    eval_config = tfma_config.eval_config(config, fc.ColumnLabel('tips', 'binary'))
    assert eval_config.model_specs[0].example_weight_key == 'trip_miles'
    options = eval_config.metrics_specs[0].example_weights
    assert (options.weighted, options.unweighted) == (True, True)
    unweighted = tfma_config.eval_config(
        load_config(work_dir=str(tmp_path)), fc.ColumnLabel('tips', 'binary')
    )
    assert not unweighted.metrics_specs[0].HasField('example_weights')
    assert not unweighted.model_specs[0].example_weight_key
    assert not unweighted.options.compute_confidence_intervals.value


def test_plots_per_task(tmp_path):
    config = load_config(work_dir=str(tmp_path), evaluation={'plots': True})
    names = [
        m.class_name
        for m in tfma_config.eval_config(config, fc.ColumnLabel('tips', 'binary'))
        .metrics_specs[0]
        .metrics
    ]
    assert names[-2:] == ['CalibrationPlot', 'ConfusionMatrixPlot']
    multiclass = tfma_config.eval_config(config, fc.ColumnLabel('species', 'multiclass'))
    assert multiclass.metrics_specs[0].metrics[-1].class_name == 'MultiClassConfusionMatrixPlot'


def test_confidence_intervals_ask_tfma_for_its_default_jackknife(tmp_path):
    config = load_config(work_dir=str(tmp_path), evaluation={'confidence_intervals': True})
    eval_config = tfma_config.eval_config(config, fc.ColumnLabel('tips', 'binary'))
    assert eval_config.options.compute_confidence_intervals.value
    with_defaults = tfma.utils.update_eval_config_with_defaults(eval_config)
    method = with_defaults.options.confidence_intervals.method
    assert method == config_pb2.ConfidenceIntervalOptions.JACKKNIFE


def test_confidence_interval_method_bootstrap_asks_tfma_for_its_poisson_bootstrap(tmp_path):
    config = load_config(
        work_dir=str(tmp_path),
        evaluation={'confidence_intervals': True, 'confidence_interval_method': 'bootstrap'},
    )
    eval_config = tfma_config.eval_config(config, fc.ColumnLabel('tips', 'binary'))
    assert eval_config.options.compute_confidence_intervals.value
    method = eval_config.options.confidence_intervals.method
    assert method == config_pb2.ConfidenceIntervalOptions.POISSON_BOOTSTRAP
    # Our Evaluator takes it, with TFMA's 20 samples.
    evaluator = _components(config)['Evaluator']
    options = json.loads(evaluator.exec_properties['eval_config'])['options']
    assert options['confidence_intervals'] == {'method': 'POISSON_BOOTSTRAP'}
    with_defaults = tfma.utils.update_eval_config_with_defaults(eval_config)
    assert evaluator_results.num_bootstrap_samples(with_defaults) == 20


@pytest.mark.parametrize(
    'evaluation, message',
    [
        (
            {'confidence_intervals': True, 'confidence_interval_method': 'poisson'},
            r"evaluation.confidence_interval_method: got 'poisson'; allowed: "
            r"\['jackknife', 'bootstrap'\]",
        ),
        (
            {'confidence_interval_method': 'bootstrap'},
            r'evaluation.confidence_interval_method: needs `confidence_intervals: true`',
        ),
    ],
)
def test_a_confidence_interval_method_it_cannot_use_fails_naming_the_field(
    tmp_path, evaluation, message
):
    with pytest.raises(ConfigError, match=message):
        load_config(work_dir=str(tmp_path), evaluation=evaluation)


def test_a_regression_metric_without_its_upper_bound_fails_naming_the_field(tmp_path):
    config = load_config(work_dir=str(tmp_path))
    with pytest.raises(ConfigError, match='evaluation.max_value: required for RMSE'):
        tfma_config.eval_config(config, fc.ColumnLabel('y', 'regression'))


def test_baseline_latest_blessed_compares_with_the_last_blessed_model(tmp_path):
    config = load_config(
        work_dir=str(tmp_path),
        evaluation={'baseline': 'latest_blessed', 'max_regression': 0.02},
    )
    components = _components(config)
    evaluator = components['Evaluator']
    assert evaluator.inputs['baseline_model'].producer_component_id == 'latest_blessed_model'
    assert 'base_model' not in components['Trainer'].inputs  # warm start stays off
    _, gated = _gated_metric(evaluator)
    assert gated['threshold']['change_threshold'] == {
        'direction': 'HIGHER_IS_BETTER',
        'absolute': -0.02,
    }


def test_chunk_mb_reaches_the_example_gen_and_must_be_positive(tmp_path):
    from asynctrain.components.shared.yaml_config import ConfigError

    config = load_config(work_dir=str(tmp_path), example_gen={'chunk_mb': 0.5})
    components = {c.id: c for c in _build(config).components}
    example_gen = next(c for i, c in components.items() if i.endswith('ExampleGen'))
    assert example_gen.exec_properties['chunk_bytes'] == 2**19
    with pytest.raises(ConfigError, match=r'example_gen.chunk_mb: expected a number of megabytes'):
        load_config(work_dir=str(tmp_path), example_gen={'chunk_mb': 0})

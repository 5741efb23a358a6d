"""PipelineConfig: YAML loading and validation errors that name the field."""

import pytest

from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.components.shared.yaml_config import build as from_dict
from asynctrain.pipelines.config import (
    BUNDLED_DATA,
    ExampleGenSettings,
    LabelSettings,
    PipelineConfig,
    load_config,
)
from asynctrain.pipelines.evaluation_settings import EvaluationSettings


def test_defaults_point_at_the_bundled_sample_and_taxi_schema():
    config = load_config()
    assert config.data == BUNDLED_DATA
    assert config.data_dir.endswith('tfx/examples/chicago_taxi_pipeline/data/simple')
    assert config.schema_path.endswith('asynctrain/schemas/taxi/schema.pbtxt')
    assert config.feature_config_path.endswith('asynctrain/schemas/taxi/features.yaml')
    assert config.enable_cache is True


def test_yaml_sections_build_nested_dataclasses(tmp_path):
    path = tmp_path / 'config.yaml'
    path.write_text(
        'pipeline_name: daily\n'
        'example_gen: {train_buckets: 4, null_markers: [NA, "-"]}\n'
        'evaluation: {min_value: 0.7}\n'
    )
    config = load_config(str(path), work_dir=str(tmp_path / 'w'))
    assert config.pipeline_name == 'daily'
    assert config.example_gen == ExampleGenSettings(train_buckets=4, null_markers=('NA', '-'))
    assert config.evaluation == EvaluationSettings(min_value=0.7)
    assert config.metadata_path == str(tmp_path / 'w' / 'daily' / 'metadata.sqlite')


def test_command_line_overrides_win_over_yaml(tmp_path):
    path = tmp_path / 'config.yaml'
    path.write_text('work_dir: from-yaml\n')
    assert load_config(str(path), work_dir='from-cli').work_dir == 'from-cli'
    assert load_config(str(path), work_dir=None).work_dir == 'from-yaml'


@pytest.mark.parametrize(
    'data, message',
    [
        ({'example_gen': {'train_bucket': 2}}, 'example_gen.train_bucket: unknown field'),
        (
            {'example_gen': {'train_buckets': 'two'}},
            "example_gen.train_buckets: expected int, got 'two'",
        ),
        (
            {'example_gen': {'train_buckets': 0}},
            'example_gen.train_buckets: expected an integer >= 1',
        ),
        ({'example_gen': {'delimiter': ';;'}}, 'example_gen.delimiter: expected one character'),
        ({'evaluation': {'metric': 'F1'}}, "evaluation.metric: unsupported metric 'F1'"),
        ({'evaluation': {'min_value': 2}}, 'evaluation.min_value: expected a number in [0, 1]'),
        ({'enable_cache': 'yes'}, "enable_cache: expected bool, got 'yes'"),
        ({'beam_pipeline_args': '--runner=DataflowRunner'}, 'beam_pipeline_args: expected a list'),
        ({'workdir': 'x'}, 'workdir: unknown field'),
        (
            {'example_batcher': {'num_files': -1}},
            'example_batcher.num_files: expected an integer >= 0 (0: by size), got -1',
        ),
        (
            {'example_batcher': {'num_files': 'x'}},
            "example_batcher.num_files: expected int, got 'x'",
        ),
    ],
)
def test_invalid_values_name_the_field(data, message):
    with pytest.raises(ConfigError) as error:
        from_dict(PipelineConfig, data)
    assert message in str(error.value)


def test_unreadable_and_malformed_files_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match='missing.yaml: cannot read the config'):
        load_config(str(tmp_path / 'missing.yaml'))
    bad = tmp_path / 'bad.yaml'
    bad.write_text('pipeline_name: [unclosed\n')
    with pytest.raises(ConfigError, match='bad.yaml: not valid YAML'):
        load_config(str(bad))
    listed = tmp_path / 'list.yaml'
    listed.write_text('- a\n- b\n')
    with pytest.raises(ConfigError, match='list.yaml: expected a mapping'):
        load_config(str(listed))


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / 'evil.yaml'
    path.write_text('pipeline_name: !!python/object/apply:os.system ["echo pwned"]\n')
    with pytest.raises(ConfigError, match='not valid YAML'):
        load_config(str(path))


def test_uris_pass_through_and_local_paths_become_absolute(tmp_path, monkeypatch):
    config = load_config(data='gs://bucket/taxi', work_dir='gs://bucket/runs')
    assert config.data_dir == 'gs://bucket/taxi'
    assert config.pipeline_root == 'gs://bucket/runs/asynctrain-taxi/pipeline_root'
    assert config.serving_dir == 'gs://bucket/runs/asynctrain-taxi/serving_model'
    monkeypatch.chdir(tmp_path)
    local = load_config(data='data', work_dir='runs')
    assert local.data_dir == str(tmp_path / 'data')
    assert local.pipeline_root == str(tmp_path / 'runs' / 'asynctrain-taxi' / 'pipeline_root')


def test_label_settings_define_the_label_and_task(tmp_path):
    path = tmp_path / 'config.yaml'
    path.write_text(
        'label: {column: Culmen Length (mm), task: regression, loss: huber}\n'
        'evaluation: {max_value: 4.5}\n'
    )
    config = load_config(str(path))
    assert config.label == LabelSettings(
        column='Culmen Length (mm)', task='regression', positive=None, loss='huber'
    )
    assert config.evaluation.metric_for('regression') == 'RMSE'
    assert load_config().label is None


@pytest.mark.parametrize(
    'data, message',
    [
        ({'label': {'column': 'y', 'task': 'ranking'}}, "label.task: got 'ranking'; allowed:"),
        ({'label': {'task': 'binary'}}, 'label.column: required field is missing'),
        (
            {'label': {'column': 'y', 'task': 'multiclass', 'positive': 'a'}},
            "label.positive: only for task binary, got task 'multiclass'",
        ),
        ({'label': {'column': 'y', 'task': 'regression', 'loss': 'l1'}}, "label.loss: got 'l1'"),
        ({'evaluation': {'max_value': -1}}, 'evaluation.max_value: expected a number > 0'),
        ({'evaluation': {'baseline': 'last'}}, "evaluation.baseline: got 'last'; allowed:"),
        ({'evaluation': {'max_regression': -0.1}}, 'evaluation.max_regression: expected a number'),
        ({'evaluation': {'slices': [[]]}}, 'evaluation.slices[0]: expected a list of distinct'),
        (
            {'evaluation': {'slices': [['a', 'a']]}},
            'evaluation.slices[0]: expected a list of distinct',
        ),
        ({'evaluation': {'slice_min_value': 0.5}}, 'evaluation.slice_min_value: needs `evaluation'),
        (
            {'evaluation': {'slices': [['a']], 'slice_min_value': 2}},
            'evaluation.slice_min_value: expected a number in [0, 1]',
        ),
        (
            {'evaluation': {'slices': [['a']], 'slice_max_regression': 0.1}},
            'evaluation.slice_max_regression: needs `baseline: latest_blessed`',
        ),
        ({'evaluation': {'min_slice_size': 20}}, 'evaluation.min_slice_size: needs `evaluation'),
        (
            {'evaluation': {'slices': [['a']], 'min_slice_size': -1}},
            'evaluation.min_slice_size: expected a number >= 0, got -1',
        ),
    ],
)
def test_invalid_label_and_evaluation_settings_name_the_field(data, message):
    with pytest.raises(ConfigError) as error:
        from_dict(PipelineConfig, data)
    assert message in str(error.value)


def test_the_blessing_metric_follows_the_task():
    default = EvaluationSettings()
    assert [default.metric_for(t) for t in ('binary', 'multiclass')] == ['AUC', 'Accuracy']
    with pytest.raises(ConfigError, match='evaluation.max_value: required for RMSE'):
        default.metric_for('regression')
    assert EvaluationSettings(metric='MSE', max_value=2.0).metric_for('regression') == 'MSE'
    with pytest.raises(ConfigError, match='evaluation.metric: AUC does not apply to a regression'):
        EvaluationSettings(metric='AUC').metric_for('regression')
    with pytest.raises(ConfigError, match=r"allowed: \['Accuracy'\]"):
        EvaluationSettings(metric='BinaryAccuracy').metric_for('multiclass')


def test_a_slice_bound_must_fit_the_metric():
    sliced = EvaluationSettings(slices=(('a',),), slice_min_value=0.7)
    assert sliced.slice_bound_for('AUC') == 0.7
    with pytest.raises(ConfigError, match='evaluation.slice_min_value: does not apply to RMSE'):
        sliced.slice_bound_for('RMSE')
    assert EvaluationSettings(slices=(('a',),)).slice_bound_for('AUC') is None


def test_a_file_error_names_the_file_and_the_field(tmp_path):
    path = tmp_path / 'config.yaml'
    path.write_text('trainer:\n  training: {batch_size: big}\n')
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    assert str(error.value) == (f"{path}: trainer.training.batch_size: expected int, got 'big'")


def test_accept_drift_adds_its_features_to_the_configs_for_one_run():
    from asynctrain.cli.run_command import with_accepted_drift

    config = load_config(drift={'accept': ['tips']})
    assert with_accepted_drift(config, None) is config
    assert with_accepted_drift(config, 'fare, company').drift.accept == ('tips', 'fare', 'company')
    assert with_accepted_drift(config, 'all').drift.accept == ('tips', 'all')
    with pytest.raises(ConfigError, match='--accept-drift'):
        with_accepted_drift(config, ' , ')


def test_each_pipeline_keeps_its_state_in_a_folder_of_the_work_dir_named_after_it(tmp_path):
    penguins = load_config(pipeline_name='penguins-species', work_dir=str(tmp_path / 'runs'))
    diabetes = load_config(pipeline_name='diabetes-target', work_dir=str(tmp_path / 'runs'))
    state = tmp_path / 'runs' / 'penguins-species'
    assert penguins.state_dir == str(state)
    assert penguins.pipeline_root == str(state / 'pipeline_root')
    assert penguins.metadata_path == str(state / 'metadata.sqlite')
    assert penguins.serving_dir == str(state / 'serving_model')
    assert diabetes.serving_dir == str(tmp_path / 'runs' / 'diabetes-target' / 'serving_model')
    assert diabetes.metadata_path == str(tmp_path / 'runs' / 'diabetes-target' / 'metadata.sqlite')


def test_a_work_dir_of_the_shared_layout_is_used_as_it_is(tmp_path):
    """A work dir of asynctrain 0.1 (metadata.sqlite at its top) keeps its paths for every
    pipeline; nothing is moved."""
    from asynctrain.pipelines import work_dir_layout

    (tmp_path / 'runs').mkdir()
    (tmp_path / 'runs' / 'metadata.sqlite').write_bytes(b'')
    config = load_config(pipeline_name='penguins-species', work_dir=str(tmp_path / 'runs'))
    assert work_dir_layout.is_shared(str(tmp_path / 'runs'))
    assert config.state_dir == str(tmp_path / 'runs')
    assert config.metadata_path == str(tmp_path / 'runs' / 'metadata.sqlite')
    assert config.serving_dir == str(tmp_path / 'runs' / 'serving_model')
    assert config.pipeline_root == str(tmp_path / 'runs' / 'pipeline_root')
    notice = work_dir_layout.shared_notice(str(tmp_path / 'runs'))
    assert notice.startswith(f'note: {tmp_path / "runs"} has the layout of asynctrain 0.1 ')
    assert f'(mv {tmp_path / "runs"} {tmp_path / "runs"}.shared)' in notice
    assert not work_dir_layout.is_shared('gs://bucket/runs')


@pytest.mark.parametrize('name', ['', 'a/b', '..', '-x', 'café', 'x' * 64])
def test_a_pipeline_name_that_is_no_folder_name_is_refused(name):
    with pytest.raises(ConfigError, match=f'pipeline_name: got {name!r}; expected letters'):
        load_config(pipeline_name=name)

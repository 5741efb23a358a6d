"""PipelineConfig: YAML loading and validation errors that name the field."""

import pytest

from pipelines.config import (
    BUNDLED_DATA,
    ConfigError,
    EvaluationSettings,
    ExampleGenSettings,
    PipelineConfig,
    from_dict,
    load_config,
)


def test_defaults_point_at_the_bundled_sample_and_taxi_schema():
    config = load_config()
    assert config.data == BUNDLED_DATA
    assert config.data_dir.endswith('tfx/examples/chicago_taxi_pipeline/data/simple')
    assert config.schema_path.endswith('schemas/taxi/schema.pbtxt')
    assert config.feature_config_path.endswith('schemas/taxi/features.yaml')
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
    assert config.metadata_path == str(tmp_path / 'w' / 'metadata.sqlite')


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
    assert config.pipeline_root == 'gs://bucket/runs/pipeline_root'
    assert config.serving_dir == 'gs://bucket/runs/serving_model'
    monkeypatch.chdir(tmp_path)
    local = load_config(data='data', work_dir='runs')
    assert local.data_dir == str(tmp_path / 'data')
    assert local.pipeline_root == str(tmp_path / 'runs' / 'pipeline_root')

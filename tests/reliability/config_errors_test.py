"""Configuration errors fail before any work starts, naming the field (or the file).

Each case runs the real command line in-process (`asynctrain.cli.main`) and asserts the exit
status, the message, and that no work began: no ML Metadata database, no pipeline root, no logs
(and, for errors in the config file itself, no work directory at all).
"""

import os
import shutil

import pytest

from asynctrain import cli

REPO = os.path.join(os.path.dirname(__file__), '..', '..')
TAXI = os.path.join(REPO, 'asynctrain', 'schemas', 'taxi')


def _run(config_path, work_dir, capsys):
    status = cli.main(['run', '--config', str(config_path), '--work-dir', str(work_dir)])
    captured = capsys.readouterr()
    return status, captured.err


def _assert_no_work(work_dir):
    """Nothing a run produces exists: metadata, artifacts, logs."""
    for produced in ('metadata.sqlite', 'pipeline_root', 'logs', 'serving_model'):
        assert not os.path.exists(os.path.join(work_dir, produced)), produced


def _dataset(tmp_path, features_text=None, schema=True):
    directory = tmp_path / 'dataset'
    directory.mkdir()
    if schema:
        shutil.copy(os.path.join(TAXI, 'schema.pbtxt'), directory / 'schema.pbtxt')
    with open(os.path.join(TAXI, 'features.yaml'), encoding='utf-8') as f:
        text = f.read()
    (directory / 'features.yaml').write_text(features_text(text) if features_text else text)
    return directory


def _config(tmp_path, text):
    path = tmp_path / 'config.yaml'
    path.write_text(text)
    return path


@pytest.mark.integration  # builds the pipeline's components before the feature check fails
def test_unknown_feature_fails_naming_it(tmp_path, capsys):
    """Unknown feature in features.yaml: exit 2 naming the entry, before any work starts"""
    dataset = _dataset(tmp_path, lambda text: text.replace('{name: fare,', '{name: fare_usd,'))
    work_dir = tmp_path / 'work'
    status, err = _run(_config(tmp_path, f'dataset: {dataset}\n'), work_dir, capsys)
    assert status == 2
    assert 'invalid configuration' in err
    assert "features[1] (fare_usd): unknown feature 'fare_usd': not in the schema" in err
    _assert_no_work(work_dir)
    assert not os.path.exists(work_dir)  # The pipeline is built before the work dir is touched.


@pytest.mark.integration
def test_missing_schema_file_fails_naming_it(tmp_path, capsys):
    """Missing schema file: the run stops naming the schema path, before any work starts"""
    dataset = _dataset(tmp_path, schema=False)
    work_dir = tmp_path / 'work'
    status, err = _run(_config(tmp_path, f'dataset: {dataset}\n'), work_dir, capsys)
    assert status == 2
    assert f'invalid configuration: {dataset / "schema.pbtxt"}: cannot read the schema' in err
    assert not os.path.exists(work_dir)


def test_config_that_is_not_utf8_fails_naming_it(tmp_path, capsys):
    """Config file that is not UTF-8 text: exit 2 naming the file and the byte"""
    path = tmp_path / 'config.yaml'
    path.write_bytes(b'pipeline_name: caf\xe9\n')
    status, err = _run(path, tmp_path / 'work', capsys)
    assert status == 2
    assert f'{path}: not UTF-8 text (byte 18)' in err
    assert not os.path.exists(tmp_path / 'work')


@pytest.mark.parametrize(
    'field, section',
    [
        ('trainer.training.checkpoint_dir', 'training: {checkpoint_dir: %s}'),
        ('trainer.input.cache_dir', 'input: {cache_dir: %s}'),
    ],
)
def test_trainer_paths_outside_the_work_dir_are_refused(field, section, tmp_path, capsys):
    """Trainer checkpoint or cache directory outside the work directory: exit 2 naming the field"""
    work_dir = tmp_path / 'work'
    for outside in ('/etc/cron.d', str(work_dir / '..' / 'elsewhere')):
        path = _config(tmp_path, 'trainer:\n  ' + section % outside + '\n')
        status, err = _run(path, work_dir, capsys)
        assert status == 2
        assert f'{field}: {outside!r} is outside the work directory' in err
    inside = _config(tmp_path, 'trainer:\n  ' + section % (work_dir / 'ckpt') + '\n')
    from asynctrain.pipelines.config import load_config

    assert load_config(str(inside), work_dir=str(work_dir)).work_dir == str(work_dir)


def test_missing_schema_file_fails_examplegen_command(tmp_path, capsys):
    """Missing --schema for asynctrain examplegen: exit 1 naming the file, nothing written"""
    input_dir = tmp_path / 'in'
    input_dir.mkdir()
    (input_dir / 'a.csv').write_text('id,price,name\n1,1.5,ant\n')
    missing = tmp_path / 'nowhere' / 'schema.pbtxt'
    status = cli.main(
        [
            'examplegen',
            '--input',
            str(input_dir),
            '--output',
            str(tmp_path / 'out'),
            '--schema',
            str(missing),
        ]
    )
    assert status == 1
    assert str(missing) in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize(
    'text,field',
    [
        (
            'trainer:\n  training: {batch_size: x}\n',
            "trainer.training.batch_size: expected int, got 'x'",
        ),
        (
            'trainer:\n  training: {optimizer: adamw}\n',
            "trainer.training.optimizer: got 'adamw'; allowed:",
        ),
        ('trainer:\n  input: {cache: disk}\n', "trainer.input.cache: got 'disk'; allowed:"),
        ('trainer:\n  training: {batch_sise: 8}\n', 'trainer.training.batch_sise: unknown'),
        ('example_gen: {max_bad_fraction: 2}\n', 'example_gen.max_bad_fraction: expected a number'),
        ('evaluation: {metric: F1}\n', "evaluation.metric: unsupported metric 'F1'"),
        ('pipeline_nam: x\n', 'pipeline_nam: unknown field'),
    ],
    ids=[
        'trainer-batch-size-type',
        'trainer-optimizer',
        'trainer-cache-mode',
        'trainer-typo',
        'example-gen-range',
        'evaluation-metric',
        'top-level-typo',
    ],
)
def test_bad_field_fails_naming_it(text, field, tmp_path, capsys):
    """Bad trainer or pipeline field: exit 2 naming the field, no work directory created"""
    work_dir = tmp_path / 'work'
    status, err = _run(_config(tmp_path, text), work_dir, capsys)
    assert status == 2
    assert field in err
    assert not work_dir.exists()


@pytest.mark.parametrize(
    'make,message',
    [
        (lambda tmp: tmp / 'absent.yaml', 'cannot read the config: No such file or directory'),
        (
            lambda tmp: (tmp / 'dir.yaml').mkdir() or tmp / 'dir.yaml',
            'cannot read the config: Is a directory',
        ),
        (
            lambda tmp: (tmp / 'bad.yaml').write_text('trainer: [unclosed\n') and tmp / 'bad.yaml',
            'not valid YAML',
        ),
        (
            lambda tmp: (tmp / 'list.yaml').write_text('- a\n- b\n') and tmp / 'list.yaml',
            'expected a mapping of config fields',
        ),
    ],
    ids=['missing', 'directory', 'invalid-yaml', 'not-a-mapping'],
)
def test_unreadable_config_fails_naming_the_file(make, message, tmp_path, capsys):
    """Unreadable config file (missing, a directory, bad YAML, not a mapping): exit 2 naming it"""
    path = make(tmp_path)
    work_dir = tmp_path / 'work'
    status, err = _run(path, work_dir, capsys)
    assert status == 2
    assert f'{path}: {message}' in err
    assert not work_dir.exists()


@pytest.mark.parametrize(
    'cron,field',
    [
        ('0 0 25 * * *', "field hour '25': 25 is out of range 0-23"),
        ('0 61 3 * * *', "field minute '61': 61 is out of range 0-59"),
        ('0 0 3 * * MONX', "field day-of-week 'MONX'"),
        ('0 0 3 * *', 'needs 6 space-separated fields'),
    ],
    ids=['hour', 'minute', 'day-of-week', 'five-fields'],
)
def test_bad_cron_fails_before_contacting_the_server(cron, field, tmp_path, capsys, monkeypatch):
    """Bad cron for asynctrain schedule: exit 2 naming the cron field, no KFP client created"""
    from asynctrain.pipelines.kubeflow.compile import schedule

    def no_client(*args, **kwargs):
        raise AssertionError('a KFP client was created for an invalid cron')

    monkeypatch.setattr(schedule.kfp, 'Client', no_client)
    pipeline = tmp_path / 'pipeline.yaml'
    pipeline.write_text('pipelineInfo: {name: p}\n')
    status = cli.main(
        ['schedule', '--host', 'http://127.0.0.1:9', '--cron', cron, '--pipeline', str(pipeline)]
    )
    assert status == 2
    assert field in capsys.readouterr().out

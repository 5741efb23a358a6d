"""`asynctrain train`: arguments and config files, and the process-based cluster modes run
through it (local processes, and a chief, a worker and a parameter server from TF_CONFIG)."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

from asynctrain.components.shared import ports as ports_lib
from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.components.trainer import cli
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers as cluster
from tests.components.trainer.trainer_testdata import (
    LABEL_KEY,
    REPO_ROOT,
    assert_serves_raw_examples,
    train_command,
)
from tests.repository import child_environment


def _parse(argv):
    # `--label-key` has no default: the tests that are not about it give the taxi label.
    if '--label-key' not in argv:
        argv = [*argv, '--label-key', LABEL_KEY]
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_arguments():
    args = _parse(
        ['--examples', 'e', '--transform-graph', 't', '--output', 'o', '--label-key', 'big_tipper']
    )
    assert (args.examples, args.transform_graph, args.output) == ('e', 't', 'o')
    assert args.config is None and args.label_key == 'big_tipper'


def test_config_file_trainer_section_or_bare(tmp_path):
    pipeline = tmp_path / 'pipeline.yaml'
    pipeline.write_text(
        'pipeline_name: taxi\ntrainer:\n  training: {train_steps: 42}\n'
        '  model: {hidden_units: [8]}\n'
    )
    bare = tmp_path / 'trainer.yaml'
    bare.write_text('distribution: {cluster: local_processes, num_workers: 1}\n')
    assert cli.load_config(str(pipeline)).training.train_steps == 42
    assert cli.load_config(str(pipeline)).model.hidden_units == (8,)
    assert cli.load_config(str(bare)).distribution.cluster == 'local_processes'
    assert cli.load_config(None) == config_lib.TrainerConfig()


def test_invalid_config_exits_2_naming_the_field(tmp_path, capsys):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('trainer:\n  input: {cache: disk}\n')
    code = cli.run(
        _parse(['--examples', 'e', '--transform-graph', 't', '--output', 'o', '--config', str(bad)])
    )
    assert code == 2
    assert "trainer.input.cache: got 'disk'" in capsys.readouterr().err


def _env(tf_config=None):
    env = child_environment()
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    env.pop('TF_CONFIG', None)
    if tf_config is not None:
        env['TF_CONFIG'] = json.dumps(tf_config)
    return env


def _check_output(output, steps, num_workers, num_ps):
    with open(os.path.join(output, 'model_run', 'training_report.json')) as f:
        report = json.load(f)
    assert report['steps'] == steps
    assert (report['num_workers'], report['num_ps']) == (num_workers, num_ps)
    assert report['eval']['examples'] == 2 * 256
    assert report['eval']['auc'] > 0.6
    assert os.path.exists(os.path.join(output, 'model', 'Format-Serving', 'saved_model.pb'))


@pytest.mark.integration
def test_local_processes_cluster_survives_a_killed_worker_which_rejoins(transformed_data, tmp_path):
    """kill -9 a worker mid-training and start it again: the other finishes; it rejoins.

    The other worker finishes the steps; the killed one, started again from a thread that then
    ends, takes steps again in a later round; the model serves."""
    result = subprocess.run(
        [
            sys.executable,
            '-m',
            'tests.components.trainer.worker_failure_scenario',
            transformed_data.examples,
            transformed_data.transform_graph,
            str(tmp_path),
        ],
        env=_env(),
        cwd=REPO_ROOT,
        timeout=480,  # the scenario waits up to its REJOIN_TIMEOUT_S (240 s) for the rejoin
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    # Worker 1 died mid-run (SIGKILL); the coordinator rescheduled its closures on worker 0 and
    # training still reached the requested step count, then exported. Closures run at least
    # once: one that applied some updates before its worker died runs again in full, so a
    # failure can add up to steps_per_execution (5) steps.
    assert outcome['victim_exit'] == -9
    assert outcome['killed_at'] < 60 <= outcome['steps'] <= 60 + 5
    # Back: the restarted worker ran steps of a later round (before the fix, the kernel killed it
    # when the thread that started it ended, and no round ever counted a step of it).
    assert outcome['rejoined_steps'] > 0, outcome
    assert outcome['rounds_until_rejoined'] >= 1
    assert_serves_raw_examples(tmp_path / 'model' / 'Format-Serving')


@pytest.mark.integration
def test_tf_config_chief_worker_and_ps_processes(transformed_data, tmp_path):
    """Chief, worker and parameter server as separate processes from TF_CONFIG, as in a TFJob."""
    ports = ports_lib.free_ports(3)
    cluster_spec = {
        'chief': [f'127.0.0.1:{ports[0]}'],
        'worker': [f'127.0.0.1:{ports[1]}'],
        'ps': [f'127.0.0.1:{ports[2]}'],
    }
    config_path = tmp_path / 'trainer.yaml'
    # The config asks for in_process; TF_CONFIG overrides the cluster mode, as on Kubernetes.
    config_path.write_text(
        'training: {train_steps: 40, steps_per_execution: 5, eval_steps: 2, batch_size: 256}\n'
    )
    command = train_command(transformed_data, tmp_path / 'out', config_path)
    servers = {}
    try:
        for task_type in ('ps', 'worker'):
            servers[(task_type, 0)] = subprocess.Popen(
                command,
                env=_env({'cluster': cluster_spec, 'task': {'type': task_type, 'index': 0}}),
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
            )
        cluster.wait_for_servers(cluster_spec, servers, timeout_seconds=120)
        chief = subprocess.run(
            command,
            env=_env({'cluster': cluster_spec, 'task': {'type': 'chief', 'index': 0}}),
            cwd=REPO_ROOT,
            timeout=300,
            capture_output=True,
            text=True,
        )
        assert chief.returncode == 0, chief.stderr[-3000:]
        # Workers and parameter servers serve until stopped (on Kubernetes, by the TFJob).
        assert all(p.poll() is None for p in servers.values())
    finally:
        cluster.stop_processes(servers)
    _check_output(str(tmp_path / 'out'), 40, 1, 1)


def test_label_key_is_required_with_no_taxi_default(capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(['--examples', 'e', '--transform-graph', 't', '--output', 'o'])
    assert exited.value.code == 2
    assert 'the following arguments are required: --label-key' in capsys.readouterr().err


def test_serving_model_and_model_run_dirs_replace_the_output_layout():
    both = _parse(
        [
            '--examples',
            'e',
            '--transform-graph',
            't',
            '--serving-model-dir',
            'gs://b/model/9/Format-Serving',
            '--model-run-dir',
            'gs://b/model_run/9',
        ]
    )
    assert cli.output_dirs(both) == ('gs://b/model/9/Format-Serving', 'gs://b/model_run/9')
    one = _parse(
        ['--examples', 'e', '--transform-graph', 't', '--output', 'o', '--model-run-dir', 'runs/r']
    )
    assert cli.output_dirs(one) == (os.path.join('o', 'model', 'Format-Serving'), 'runs/r')
    assert cli.output_dirs(
        _parse(['--examples', 'e', '--transform-graph', 't', '--output', 'o'])
    ) == (os.path.join('o', 'model', 'Format-Serving'), os.path.join('o', 'model_run'))


def test_without_output_both_dirs_are_required_as_an_argparse_error(capsys):
    args = _parse(['--examples', 'e', '--transform-graph', 't', '--serving-model-dir', 's'])
    with pytest.raises(SystemExit) as exited:
        cli.run(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith('usage:')
    assert (
        'error: --output is required unless --serving-model-dir and --model-run-dir are both '
        'given (missing: --model-run-dir)'
    ) in err


def test_config_is_read_through_tensorflows_file_systems():
    import tensorflow as tf

    path = 'ram://asynctrain-cli-test/pipeline.yaml'  # a non-local file system, like gs://
    with tf.io.gfile.GFile(path, 'w') as f:
        f.write('trainer:\n  training: {train_steps: 7}\n  distribution: {cluster: tf_config}\n')
    config = cli.load_config(path)
    assert (config.training.train_steps, config.distribution.cluster) == (7, 'tf_config')
    with pytest.raises(
        ConfigError,
        match='ram://asynctrain-cli-test/missing.yaml: cannot read the trainer config: No such file',
    ):
        cli.load_config('ram://asynctrain-cli-test/missing.yaml')


def test_tfjob_mode_without_tf_config_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv('TF_CONFIG', raising=False)
    config = tmp_path / 'trainer.yaml'
    config.write_text('distribution: {cluster: tfjob}\nkubernetes: {image: r/a:1}\n')
    code = cli.run(
        _parse(
            ['--examples', 'e', '--transform-graph', 't', '--output', 'o', '--config', str(config)]
        )
    )
    assert code == 2
    assert 'trainer.distribution.cluster: tfjob is run by the Trainer' in capsys.readouterr().err


def test_log_file_is_the_flag_or_under_the_model_run_dir_and_none_when_verbose_or_a_replica(
    tmp_path,
):
    def args(*extra):
        return _parse(['--examples', 'e', '--transform-graph', 't', '--output', 'o', *extra])

    model_run = str(tmp_path / 'model_run')
    default = cli.log_path(args(), model_run, None)
    assert os.path.dirname(default) == os.path.join(model_run, 'logs')
    assert re.fullmatch(r'train-\d{8}-\d{6}\.log', os.path.basename(default))
    assert os.path.isdir(os.path.dirname(default))
    flag = str(tmp_path / 'elsewhere' / 'train.log')
    assert cli.log_path(args('--log-file', flag), model_run, None) == flag
    assert os.path.isdir(tmp_path / 'elsewhere')
    # A replica's console is its pod's log, unless it is given a log file.
    assert cli.log_path(args(), model_run, 'chief') is None
    assert cli.log_path(args('--log-file', flag), model_run, 'worker') == flag
    assert cli.log_path(args('--verbose', '--log-file', flag), model_run, None) is None
    # Not a local path: the log goes to the temporary directory.
    remote = cli.log_path(args(), 'gs://b/model_run/9', None)
    assert os.path.dirname(remote) == os.path.join(tempfile.gettempdir(), 'logs')


def test_a_failed_quiet_run_shows_the_cause_and_the_log_not_tensorflows_lines(
    tmp_path, capfd, monkeypatch
):
    from asynctrain.components.trainer.cluster import launch

    capfd.readouterr()  # TensorFlow's import-time lines, from before the run.

    def fail(**kwargs):
        os.write(2, b'E0000 00:00:1.0 cuda_fft.cc:479] Unable to register cuFFT factory\n')
        os.write(2, b'[libprotobuf ERROR wire_format_lite.cc:618] invalid UTF-8 data\n')
        raise ValueError('examples: no Split-train under e')

    monkeypatch.setattr(launch, 'train_and_export', fail)
    monkeypatch.delenv('TF_CONFIG', raising=False)
    log_file = tmp_path / 'train.log'
    args = ['--examples', 'e', '--transform-graph', 't', '--output', str(tmp_path / 'o')]
    code = cli.run(_parse([*args, '--log-file', str(log_file)]))
    captured = capfd.readouterr()
    assert code == 1
    assert captured.out == f'asynctrain train: log {log_file}\n'
    assert captured.err.splitlines() == [
        'asynctrain train: failed: ValueError: examples: no Split-train under e',
        f'  log: {log_file}',
        '  last lines that matter:',
        '    [libprotobuf ERROR wire_format_lite.cc:618] invalid UTF-8 data',
    ]
    assert log_file.read_text().splitlines()[:2] == [
        'E0000 00:00:1.0 cuda_fft.cc:479] Unable to register cuFFT factory',
        '[libprotobuf ERROR wire_format_lite.cc:618] invalid UTF-8 data',
    ]


@pytest.mark.integration
def test_train_console_holds_only_asynctrains_lines_and_the_log_tensorflows(
    transformed_data, tmp_path
):
    config_path = tmp_path / 'trainer.yaml'
    config_path.write_text('training: {train_steps: 20, steps_per_execution: 5, eval_steps: 2}\n')
    output = tmp_path / 'out'
    result = subprocess.run(
        train_command(transformed_data, output, config_path),
        env=_env(),
        cwd=REPO_ROOT,
        timeout=300,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    logs = list((output / 'model_run' / 'logs').glob('train-*.log'))
    assert len(logs) == 1
    assert lines[0] == f'asynctrain train: log {logs[0]}'
    # Not a terminal: the live line is a plain `train: ...` line every few seconds.
    assert lines[1:-1] and all(line.startswith('train: ') for line in lines[1:-1])
    assert lines[-2].startswith('train: 100%|') and '20/20' in lines[-2]
    assert json.loads(lines[-1])['steps'] == 20
    assert result.stderr == ''
    log = logs[0].read_text()
    assert 'INFO:tensorflow:ParameterServerStrategyV2 is now connecting to cluster' in log

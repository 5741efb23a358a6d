"""Tests for asynctrain/components/trainer/kubernetes/local.py: a TFJob's replicas as processes on 127.0.0.1.

The first tests replace the container command with a small probe (each replica records its
TF_CONFIG and environment; servers listen on their address; the chief connects to every server)
so that the launcher's own behaviour is checked in seconds. The integration test runs the real
`asynctrain train` in every replica of the TFJob `build_tfjob` makes (1 chief, 2 workers, 1 PS,
ParameterServerStrategy through TF_CONFIG), then reloads the exported model without the
transform output and serves a raw tf.Example.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from asynctrain.components.trainer import train_arguments
from asynctrain.components.trainer.kubernetes import local as tfjob_local
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from asynctrain.components.trainer.kubernetes import values as values_lib
from tests.components.trainer.kubernetes.kubernetes_testdata import VALUES

PROBE = textwrap.dedent("""
    import json, os, socket, sys, time
    config = json.loads(os.environ['TF_CONFIG'])
    task = config['task']
    with open(os.path.join(sys.argv[1], f"{task['type']}-{task['index']}.json"), 'w') as f:
        json.dump({'tf_config': config, 'legacy_keras': os.environ.get('TF_USE_LEGACY_KERAS')}, f)
    if task['type'] == 'chief':
        for rtype in ('ps', 'worker'):
            for address in config['cluster'][rtype]:
                host, port = address.rsplit(':', 1)
                for _ in range(200):
                    try:
                        socket.create_connection((host, int(port)), timeout=1).close()
                        break
                    except OSError:
                        time.sleep(0.05)
                else:
                    sys.exit(f'cannot reach {address}')
        sys.exit(int(sys.argv[2]))
    if task['type'] == 'ps' and task['index'] == 1 and sys.argv[3] == 'ps-fails':
        sys.exit(3)
    host, port = config['cluster'][task['type']][task['index']].rsplit(':', 1)
    server = socket.socket()
    server.bind((host, int(port)))
    server.listen()
    while True:
        server.accept()[0].close()
""")


def _tfjob(name='taxi-train', namespace='ml', train=None):
    settings = values_lib.load_tfjob_settings(VALUES)
    train = train or train_arguments.TrainArguments(
        examples='e', transform_graph='t', output='o', config='c', label_key='l'
    )
    return tfjob_lib.build_tfjob(
        settings, name=name, namespace=namespace, image='registry.example/asynctrain:1', train=train
    )


def _with_probe(tfjob, record_dir, chief_status=0, mode='ok'):
    for spec in tfjob.spec.tf_replica_specs.values():
        container = tfjob_lib.tensorflow_container(spec.template.spec)
        container.command = ['python', '-c', PROBE]
        container.args = [str(record_dir), str(chief_status), mode]
    return tfjob


def test_loopback_tf_config_keeps_the_operators_structure_with_one_port_per_address():
    job = _tfjob()
    addresses = tfjob_local.loopback_addresses(job)

    assert len(addresses) == 5 and len(set(addresses.values())) == 5
    for replica_type, count in (('Chief', 1), ('Worker', 2), ('PS', 2)):
        for index in range(count):
            operator = tfjob_lib.tf_config_for(job, replica_type, index)
            local = tfjob_local.on_loopback(operator, addresses)
            assert local['task'] == operator['task'] and local['environment'] == 'cloud'
            assert {k: len(v) for k, v in local['cluster'].items()} == {
                k: len(v) for k, v in operator['cluster'].items()
            }
            for rtype, hosts in operator['cluster'].items():
                assert local['cluster'][rtype] == [addresses[h] for h in hosts]
                assert all(a.startswith('127.0.0.1:') for a in local['cluster'][rtype])


def test_every_replica_gets_its_operator_tf_config_on_loopback_and_servers_stop_after_the_chief(
    tmp_path,
):
    record_dir = tmp_path / 'records'
    record_dir.mkdir()
    job = _with_probe(_tfjob(), record_dir)

    result = tfjob_local.run_local(job, log_dir=str(tmp_path / 'logs'), timeout_s=120)

    assert result.succeeded, result.message
    assert [(r.replica_type, r.index) for r in result.replicas] == [
        ('Chief', 0),
        ('PS', 0),
        ('PS', 1),
        ('Worker', 0),
        ('Worker', 1),
    ]
    chief_config = result.replicas[0].tf_config
    for replica in result.replicas:
        recorded = json.loads(
            (record_dir / f'{replica.replica_type.lower()}-{replica.index}.json').read_text()
        )
        assert recorded['tf_config'] == replica.tf_config
        assert recorded['tf_config']['cluster'] == chief_config['cluster']  # one cluster for all
        assert recorded['tf_config']['task'] == {
            'type': replica.replica_type.lower(),
            'index': replica.index,
        }
        assert recorded['legacy_keras'] == '1'  # the container's env from the TFJob
        assert os.path.exists(replica.log_path)
    assert result.replicas[0].returncode == 0
    assert {r.returncode for r in result.replicas[1:]} == {
        -15
    }  # stopped like cleanPodPolicy Running


def test_a_server_replica_that_dies_fails_the_run_and_names_it(tmp_path):
    record_dir = tmp_path / 'records'
    record_dir.mkdir()
    job = _with_probe(_tfjob(), record_dir, mode='ps-fails')

    result = tfjob_local.run_local(job, log_dir=str(tmp_path / 'logs'), timeout_s=120)

    assert not result.succeeded
    # The chief keeps retrying the silent PS for seconds; the launcher notices the exit first.
    assert result.message == 'PS 1 exited with status 3 while the chief was running'
    ps1 = next(r for r in result.replicas if (r.replica_type, r.index) == ('PS', 1))
    assert ps1.returncode == 3
    assert all(r.returncode is not None for r in result.replicas)  # nothing left running


def test_the_chiefs_exit_status_is_the_jobs(tmp_path):
    record_dir = tmp_path / 'records'
    record_dir.mkdir()
    job = _with_probe(_tfjob(), record_dir, chief_status=4)

    result = tfjob_local.run_local(job, log_dir=str(tmp_path / 'logs'), timeout_s=120)

    assert (result.succeeded, result.message) == (False, 'Chief 0 exited with status 4')


def test_the_steps_environment_configures_a_local_rehearsal_or_leaves_the_cluster(tmp_path):
    # No variable: None, the Trainer submits to the cluster. With it: the same local runner,
    # whose replicas log in that folder.
    assert tfjob_local.runner_from_environment({}) is None
    run = tfjob_local.runner_from_environment(
        {tfjob_local.LOG_DIR_VARIABLE: str(tmp_path / 'logs')}
    )
    record_dir = tmp_path / 'records'
    record_dir.mkdir()

    result = run(_with_probe(_tfjob(), record_dir), 120)

    assert result.succeeded
    assert {path.name for path in (tmp_path / 'logs').glob('*.log')} == {
        f'{r.replica_type.lower()}-{r.index}.log' for r in result.replicas
    }


def test_a_single_pod_job_runs_without_tf_config(tmp_path, monkeypatch):
    monkeypatch.setenv('TF_CONFIG', '{"leaked": true}')  # the caller's own must not reach the pod
    job = _tfjob()
    for replica_type in ('Worker', 'PS'):
        del job.spec.tf_replica_specs[replica_type]
    container = tfjob_lib.tensorflow_container(job.spec.tf_replica_specs['Chief'].template.spec)
    container.command = [
        'python',
        '-c',
        'import os, sys; sys.exit(3 if "TF_CONFIG" in os.environ else 0)',
    ]
    container.args = []

    result = tfjob_local.run_local(job, log_dir=str(tmp_path / 'logs'), timeout_s=60)

    assert result.succeeded, result.message
    assert [(r.replica_type, r.tf_config) for r in result.replicas] == [('Chief', {})]


@pytest.mark.integration
def test_tfjob_trains_through_tf_config_and_exports_a_standalone_model(tmp_path):
    # The small transformed taxi dataset the Trainer's own tests use (tf.Transform on Beam).
    from tests.components.trainer.trainer_testdata import (
        LABEL_KEY,
        make_transformed_data,
        raw_example,
        raw_feature_spec,
    )

    data = make_transformed_data(str(tmp_path / 'data'), num_train=1000, num_eval=200)
    config = tmp_path / 'trainer.yaml'
    config.write_text(
        yaml.safe_dump(
            {
                'trainer': {
                    'training': {
                        'train_steps': 40,
                        'batch_size': 32,
                        'steps_per_execution': 5,
                        'checkpoint_interval_steps': 20,
                        'summary_interval_steps': 20,
                    },
                    'model': {'hidden_units': [16], 'embedding_dim': 4},
                    'input': {'shuffle_buffer': 100},
                }
            }
        )
    )
    output = tmp_path / 'trainer_output'
    job = _tfjob(
        train=train_arguments.TrainArguments(
            examples=data.examples,
            transform_graph=data.transform_graph,
            output=str(output),
            config=str(config),
            label_key=LABEL_KEY,
        )
    )
    job.spec.tf_replica_specs['PS'].replicas = 1  # 1 chief, 2 workers, 1 PS on two cores

    result = tfjob_local.run_local(job, log_dir=str(tmp_path / 'logs'), timeout_s=900)

    chief_log = Path(result.replicas[0].log_path).read_text()
    assert result.succeeded, f'{result.message}\n--- chief log ---\n{chief_log[-5000:]}'
    report = json.loads((output / 'model_run' / 'training_report.json').read_text())
    assert (report['num_workers'], report['num_ps']) == (2, 1)  # the cluster TF_CONFIG described
    assert report['steps'] >= 40

    # The export stands alone: no transform output needed to serve a raw tf.Example.
    shutil.rmtree(data.transform_graph)
    import tensorflow as tf

    raw_spec = raw_feature_spec()
    model = tf.saved_model.load(str(output / 'model' / 'Format-Serving'))
    serve = model.signatures['serving_default']
    examples = tf.constant([raw_example(row, raw_spec) for row in data.raw_eval_rows[:4]])
    (scores,) = serve(examples=examples).values()
    scores = scores.numpy().reshape(-1)
    assert scores.shape == (4,)
    assert ((scores >= 0) & (scores <= 1)).all()

"""The executor's `tfjob` cluster mode: from TFX artifacts to a TFJob, and back to a Model.

The first tests run the executor's `Do` against the fake Kubernetes API (`fake_kubernetes`,
through the SDK's real `TrainingClient`): what the submitted TFJob's replicas are told, the
config file they read, and the errors of a failed job and of a job that exported nothing. The
integration test runs the TFJob the executor builds as real local processes
(`tfjob_local.runner`: a chief, a worker and a parameter server training through `TF_CONFIG`),
then loads the Model the executor published and serves a raw tf.Example without the transform
output.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from tfx.types import standard_artifacts

from asynctrain.components.trainer import cli, executor, spec
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.kubernetes import client
from asynctrain.components.trainer.kubernetes import local as tfjob_local
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from asynctrain.components.trainer.kubernetes import training as tfjob_training
from tests.components.trainer import fake_kubernetes
from tests.components.trainer.kubernetes.kubernetes_testdata import VALUES
from tests.components.trainer.trainer_testdata import LABEL_KEY, make_artifact

IMAGE = 'registry.example/asynctrain:1'


def _run_do(
    tmp_path,
    config,
    examples='gs://b/Transform/transformed_examples/7',
    transform_graph='gs://b/Transform/transform_graph/7',
    base_model=None,
):
    """Runs `Executor.Do` in `tfjob` mode; returns the Model and ModelRun artifacts."""
    input_dict = {
        spec.EXAMPLES_KEY: [
            make_artifact(standard_artifacts.Examples, examples, ['train', 'eval'])
        ],
        spec.TRANSFORM_GRAPH_KEY: [
            make_artifact(standard_artifacts.TransformGraph, transform_graph)
        ],
        spec.SCHEMA_KEY: [make_artifact(standard_artifacts.Schema, tmp_path / 'schema')],
    }
    if base_model:
        input_dict[spec.BASE_MODEL_KEY] = [make_artifact(standard_artifacts.Model, base_model)]
    model = make_artifact(standard_artifacts.Model, tmp_path / 'Trainer' / 'model' / '9')
    model_run = make_artifact(standard_artifacts.ModelRun, tmp_path / 'Trainer' / 'model_run' / '9')
    exec_properties = {
        spec.CONFIG_KEY: json.dumps(config_lib.to_dict(config)),
        spec.LABEL_KEY_KEY: LABEL_KEY,
    }
    executor.Executor().Do(
        input_dict, {spec.MODEL_KEY: [model], spec.MODEL_RUN_KEY: [model_run]}, exec_properties
    )
    return model, model_run


def _tfjob_config(**kubernetes):
    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(train_steps=123, batch_size=64),
        distribution=config_lib.DistributionConfig(cluster='tfjob', num_shards=2),
        kubernetes=config_lib.KubernetesConfig(image=IMAGE, namespace='ml', **kubernetes),
    )


@pytest.fixture
def cluster(fake_api, monkeypatch):
    """The fake API as the executor's Kubernetes: `run_tfjob` with the fake's `TrainingClient`."""
    server, training_client = fake_api
    monkeypatch.setattr(
        executor,
        'tfjob_runner',
        lambda job, timeout_s: client.run_tfjob(
            training_client, job, timeout_s=timeout_s, poll_interval_s=0.01
        ),
    )
    return server


def _export_a_saved_model(path):
    import tensorflow as tf

    module = tf.Module()
    module.f = tf.function(lambda x: x + 1, input_signature=[tf.TensorSpec([], tf.float32)])
    tf.saved_model.save(module, str(path))


def test_replicas_write_into_the_artifacts_and_read_the_config_the_executor_wrote(
    cluster, tmp_path
):
    serving = tmp_path / 'Trainer' / 'model' / '9' / 'Format-Serving'
    # The chief's export, as it lands in the Model artifact while the job runs.
    cluster.on_get = lambda: serving.exists() or _export_a_saved_model(serving)
    cluster.statuses = [
        {'conditions': [fake_kubernetes.condition('Running')]},
        {'conditions': [fake_kubernetes.condition('Succeeded')]},
    ]
    config = _tfjob_config()

    base_model = tmp_path / 'Trainer' / 'model' / '3'
    # A base model holds a SavedModel (an empty Model artifact is no base model).
    _export_a_saved_model(base_model / 'Format-Serving')

    model, model_run = _run_do(tmp_path, config, base_model=base_model)

    method, path, _, submitted = cluster.requests[0]
    assert (method, path) == ('POST', '/apis/kubeflow.org/v1/namespaces/ml/tfjobs')
    expected_name = 'asynctrain-train-' + hashlib.sha256(model.uri.encode()).hexdigest()[:12]
    assert submitted['metadata']['name'] == expected_name
    config_path = os.path.join(model_run.uri, 'trainer_config.yaml')
    specs = submitted['spec']['tfReplicaSpecs']
    assert {t: s['replicas'] for t, s in specs.items()} == {'Chief': 1, 'Worker': 2, 'PS': 2}
    for replica_type, replica in specs.items():
        (container,) = replica['template']['spec']['containers']
        assert container['image'] == IMAGE
        assert container['command'] + container['args'] == [
            'asynctrain',
            'train',
            '--examples',
            'gs://b/Transform/transformed_examples/7',
            '--transform-graph',
            'gs://b/Transform/transform_graph/7',
            '--serving-model-dir',
            os.path.join(model.uri, 'Format-Serving'),
            '--model-run-dir',
            model_run.uri,
            '--config',
            config_path,
            '--label-key',
            LABEL_KEY,
            '--base-model',
            str(base_model / 'Format-Serving'),
        ], replica_type
    # The file the pods read: the same settings, with the chief in tf_config mode.
    written = yaml.safe_load(Path(config_path).read_text())['trainer']
    assert written['distribution']['cluster'] == 'tf_config'
    assert config_lib.from_dict(written) == config_lib.in_tf_config_mode(config)
    read = cli.load_config(config_path)  # as `asynctrain train --config` reads it
    assert (read.distribution.cluster, read.training.train_steps, read.distribution.num_shards) == (
        'tf_config',
        123,
        2,
    )
    assert [m for m, *_ in cluster.requests].count('DELETE') == 0


def test_a_failed_job_fails_the_step_naming_the_replica_and_the_reason(cluster, tmp_path):
    cluster.statuses = [
        {
            'conditions': [
                fake_kubernetes.condition(
                    'Failed', 'TFJob has failed because 1 PS replica(s) failed.'
                )
            ]
        }
    ]
    config = _tfjob_config()
    name = (
        'asynctrain-train-'
        + hashlib.sha256(str(tmp_path / 'Trainer' / 'model' / '9').encode()).hexdigest()[:12]
    )
    cluster.pods = [
        fake_kubernetes.failed_pod(
            name, 'ps', 1, reason='OOMKilled', exit_code=137, message='memory limit 16Gi'
        )
    ]

    with pytest.raises(client.TFJobFailed) as raised:
        _run_do(tmp_path, config)

    assert f'ps 1 (pod {name}-ps-1): OOMKilled exit code 137: memory limit 16Gi' in str(
        raised.value
    )
    assert '1 PS replica(s) failed' in str(raised.value)


def test_a_succeeded_job_without_the_chiefs_model_fails_the_step(cluster, tmp_path):
    cluster.statuses = [{'conditions': [fake_kubernetes.condition('Succeeded')]}]

    with pytest.raises(tfjob_training.NoModelExported) as raised:
        _run_do(tmp_path, _tfjob_config(job_name_prefix='taxi'))

    serving = tmp_path / 'Trainer' / 'model' / '9' / 'Format-Serving'
    assert 'succeeded, but the chief exported no SavedModel at ' + str(serving) in str(raised.value)
    assert str(raised.value).startswith('TFJob ml/taxi-')


def test_without_a_namespace_outside_a_pod_the_step_says_what_to_set(
    cluster, tmp_path, monkeypatch
):
    monkeypatch.setattr(tfjob_lib, 'SERVICE_ACCOUNT_NAMESPACE_FILE', str(tmp_path / 'absent'))
    config = _tfjob_config()
    config = config_lib.from_dict(
        {**config_lib.to_dict(config), 'kubernetes': {'image': IMAGE, 'namespace': ''}}
    )

    with pytest.raises(ValueError, match='namespace: not set, and the pod namespace file'):
        _run_do(tmp_path, config)

    assert cluster.requests == []  # nothing submitted


@pytest.mark.integration
def test_executor_runs_the_tfjob_as_local_processes_and_publishes_a_serving_model(
    transformed_data, tmp_path, monkeypatch
):
    # One chief, one worker, one parameter server: the deployment's values, resized for two cores.
    values = yaml.safe_load(VALUES.read_text())
    values['replicas']['Worker']['replicas'] = 1
    values['replicas']['PS']['replicas'] = 1
    values_path = tmp_path / 'tfjob-values.yaml'
    values_path.write_text(yaml.safe_dump(values))
    transform_graph = tmp_path / 'transform_graph'
    shutil.copytree(transformed_data.transform_graph, transform_graph)
    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=20,
            eval_steps=2,
            batch_size=32,
            steps_per_execution=5,
            checkpoint_interval_steps=10,
            summary_interval_steps=10,
        ),
        model=config_lib.ModelConfig(hidden_units=(16,), embedding_dim=4),
        input=config_lib.InputConfig(shuffle_buffer=100),
        distribution=config_lib.DistributionConfig(cluster='tfjob'),
        kubernetes=config_lib.KubernetesConfig(
            image='unused-locally',
            namespace='local',
            tfjob_values=str(values_path),
            timeout_seconds=600,
        ),
    )
    log_dir = tmp_path / 'logs'
    monkeypatch.setattr(executor, 'tfjob_runner', tfjob_local.runner(str(log_dir)))

    try:
        model, model_run = _run_do(
            tmp_path,
            config,
            examples=transformed_data.examples,
            transform_graph=str(transform_graph),
        )
    except Exception:
        for log in sorted(log_dir.glob('*.log')):
            print(f'--- {log.name} ---\n{log.read_text()[-3000:]}')
        raise

    with open(os.path.join(model_run.uri, 'training_report.json')) as f:
        report = json.load(f)
    assert (report['num_workers'], report['num_ps']) == (1, 1)  # the TFJob's cluster
    assert report['steps'] >= 20
    assert sorted(p.name for p in log_dir.glob('*.log')) == [
        'chief-0.log',
        'ps-0.log',
        'worker-0.log',
    ]

    # The published Model stands alone: serve raw tf.Examples without the transform output.
    shutil.rmtree(transform_graph)
    import tensorflow as tf

    from tests.components.trainer.trainer_testdata import raw_example, raw_feature_spec

    loaded = tf.saved_model.load(os.path.join(model.uri, 'Format-Serving'))
    assert set(loaded.signatures) == {'serving_default', 'transform_features'}
    raw_spec = raw_feature_spec()
    examples = tf.constant(
        [raw_example(row, raw_spec) for row in transformed_data.raw_eval_rows[:4]]
    )
    (scores,) = loaded.signatures['serving_default'](examples=examples).values()
    scores = scores.numpy().reshape(-1)
    assert scores.shape == (4,)
    assert ((scores >= 0) & (scores <= 1)).all()

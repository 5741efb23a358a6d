"""Tests for components/trainer/tfjob.py: the TFJob and RBAC manifests, TF_CONFIG, and submit/wait/cancel.

No Kubernetes cluster runs here. Manifests are checked against the Kubernetes 1.26 OpenAPI schemas
(`kubernetes_validate`, strict: unknown fields fail) and the Training Operator SDK's models; the
submit/wait/cancel path runs the SDK's real `TrainingClient` against a fake API server on
127.0.0.1 that records each request and answers with scripted TFJob and Pod objects.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from components.trainer.kubernetes import tfjob as tfjob_lib
from tests.components.trainer import fake_kubernetes

REPO = Path(__file__).resolve().parents[3]
VALUES = REPO / 'kubeflow' / 'tfjob-values.yaml'
RBAC = REPO / 'kubeflow' / 'rbac.yaml'
K8S_VERSION = '1.26.0'
TRAIN = tfjob_lib.TrainArguments(
    examples='gs://b/root/Transform/transformed_examples/7',
    transform_graph='gs://b/root/Transform/transform_graph/7',
    output='gs://b/root/Trainer/model/9',
    config='/etc/asynctrain/pipeline.yaml',
)


def _tfjob(name: str = 'taxi-train-9', namespace: str = 'ml'):
    return tfjob_lib.build_tfjob(
        tfjob_lib.load_tfjob_settings(VALUES),
        name=name,
        namespace=namespace,
        image='registry.example/asynctrain:1',
        train=TRAIN,
    )


def test_tfjob_has_chief_workers_and_ps_running_asynctrain_train():
    manifest = tfjob_lib.to_manifest(_tfjob())

    assert manifest['apiVersion'] == 'kubeflow.org/v1'
    assert manifest['kind'] == 'TFJob'
    assert manifest['metadata'] == {
        'name': 'taxi-train-9',
        'namespace': 'ml',
        'labels': {'app.kubernetes.io/part-of': 'asynctrain'},
    }
    specs = manifest['spec']['tfReplicaSpecs']
    assert {t: s['replicas'] for t, s in specs.items()} == {'Chief': 1, 'Worker': 2, 'PS': 2}
    assert {t: s['restartPolicy'] for t, s in specs.items()} == {
        'Chief': 'ExitCode',
        'Worker': 'OnFailure',
        'PS': 'OnFailure',
    }
    assert manifest['spec']['runPolicy'] == {
        'cleanPodPolicy': 'Running',
        'activeDeadlineSeconds': 86400,
        'backoffLimit': 3,
        'ttlSecondsAfterFinished': 86400,
    }
    for spec in specs.values():
        (container,) = spec['template']['spec']['containers']
        assert container['name'] == 'tensorflow'
        assert container['image'] == 'registry.example/asynctrain:1'
        assert container['command'] + container['args'] == [
            'asynctrain',
            'train',
            '--examples',
            TRAIN.examples,
            '--transform-graph',
            TRAIN.transform_graph,
            '--output',
            TRAIN.output,
            '--config',
            TRAIN.config,
        ]
        assert {e['name']: e['value'] for e in container['env']} == {
            'TF_USE_LEGACY_KERAS': '1',
            'GRPC_FAIL_FAST': 'use_caller',
        }
        assert 'TF_CONFIG' not in {e['name'] for e in container['env']}  # the operator injects it
        assert container['ports'] == [
            {'name': 'tfjob-port', 'containerPort': 2222, 'protocol': 'TCP'}
        ]


def test_tfjob_pods_are_non_root_unprivileged_limited_and_scheduled_on_the_training_pool():
    manifest = tfjob_lib.to_manifest(_tfjob())
    for replica_type, spec in manifest['spec']['tfReplicaSpecs'].items():
        pod = spec['template']['spec']
        assert pod['serviceAccountName'] == 'asynctrain-trainer'
        assert pod['automountServiceAccountToken'] is False
        assert pod['securityContext']['runAsNonRoot'] is True
        assert pod['securityContext']['runAsUser'] == 10001
        assert pod['securityContext']['seccompProfile'] == {'type': 'RuntimeDefault'}
        assert pod['nodeSelector'] == {'asynctrain.dev/pool': 'training'}
        (container,) = pod['containers']
        assert container['securityContext'] == {
            'allowPrivilegeEscalation': False,
            'capabilities': {'drop': ['ALL']},
            'privileged': False,
            'runAsNonRoot': True,
        }
        limits = container['resources']['limits']
        assert set(limits) == {'cpu', 'memory'}, replica_type
        assert container['resources']['requests'] == limits, replica_type  # Guaranteed QoS
        assert spec['template']['metadata']['annotations'] == {'sidecar.istio.io/inject': 'false'}


def test_tfjob_pod_templates_validate_against_kubernetes_schema():
    manifest = tfjob_lib.to_manifest(_tfjob())
    for spec in manifest['spec']['tfReplicaSpecs'].values():
        pod_template = {
            'apiVersion': 'v1',
            'kind': 'PodTemplate',
            'metadata': {'name': 'replica', 'namespace': 'ml'},
            'template': spec['template'],
        }
        kubernetes_validate.validate(pod_template, K8S_VERSION, strict=True)


def test_tfjob_round_trips_through_the_sdk_models_and_yaml():
    manifest = tfjob_lib.to_manifest(_tfjob())
    parsed = tfjob_lib.from_manifest(yaml.safe_load(yaml.safe_dump(manifest)))

    assert parsed.spec.tf_replica_specs['PS'].replicas == 2
    assert parsed.spec.tf_replica_specs['Chief'].template.spec.containers[0].resources.limits == {
        'cpu': '2',
        'memory': '8Gi',
    }
    assert tfjob_lib.to_manifest(parsed) == manifest


def test_rbac_manifests_validate_and_grant_only_what_the_submitter_uses():
    documents = list(yaml.safe_load_all(RBAC.read_text()))
    for document in documents:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    by_kind = {}
    for document in documents:
        by_kind.setdefault(document['kind'], []).append(document)
    assert sorted(d['metadata']['name'] for d in by_kind['ServiceAccount']) == [
        'asynctrain-pipeline',
        'asynctrain-trainer',
    ]
    trainer_sa = next(
        d for d in by_kind['ServiceAccount'] if d['metadata']['name'] == 'asynctrain-trainer'
    )
    assert trainer_sa['automountServiceAccountToken'] is False
    (role,) = by_kind['Role']  # namespaced; no ClusterRole
    assert 'ClusterRole' not in by_kind and 'ClusterRoleBinding' not in by_kind
    grants = {
        (tuple(r['apiGroups']), tuple(r['resources']), tuple(r.get('resourceNames', ()))): set(
            r['verbs']
        )
        for r in role['rules']
    }
    assert grants == {
        (('kubeflow.org',), ('tfjobs',), ()): {'create', 'get', 'delete'},
        (('',), ('pods',), ()): {'list'},
        (('',), ('configmaps',), ('kfp-launcher',)): {'get'},
        (('',), ('secrets',), ('mlpipeline-minio-artifact',)): {'get'},
    }
    for verbs in grants.values():
        assert '*' not in verbs
    (binding,) = by_kind['RoleBinding']
    assert binding['roleRef'] == {
        'apiGroup': 'rbac.authorization.k8s.io',
        'kind': 'Role',
        'name': role['metadata']['name'],
    }
    assert binding['subjects'] == [
        {'kind': 'ServiceAccount', 'name': 'asynctrain-pipeline', 'namespace': 'kubeflow-user'}
    ]
    # The TFJob's pods use the account that has no Role bound to it.
    assert tfjob_lib.load_tfjob_settings(VALUES).service_account == 'asynctrain-trainer'


@pytest.mark.parametrize(
    'edit, message',
    [
        (lambda v: v['replicas']['Chief'].update(replicas=2), 'replicas.Chief.replicas must be 1'),
        (
            lambda v: v['replicas']['Worker'].update(replicas=0),
            'replicas.Worker.replicas must be an integer >= 1',
        ),
        (
            lambda v: v['replicas']['PS']['resources']['limits'].pop('memory'),
            'replicas.PS.resources.limits.memory must be set',
        ),
        (
            lambda v: v['replicas']['PS'].update(restartPolicy='Sometimes'),
            'replicas.PS.restartPolicy must be one of',
        ),
        (
            lambda v: v['replicas'].pop('PS'),
            "replicas must be exactly the keys ['Chief', 'Worker', 'PS']",
        ),
        (lambda v: v.update(port=0), 'port must be a port number'),
    ],
)
def test_invalid_values_name_the_field(tmp_path, edit, message):
    values = yaml.safe_load(VALUES.read_text())
    edit(values)
    path = tmp_path / 'values.yaml'
    path.write_text(yaml.safe_dump(values))
    with pytest.raises(ValueError, match=message.replace('[', r'\[').replace(']', r'\]')):
        tfjob_lib.load_tfjob_settings(path)


def test_tf_config_is_what_the_operator_sets(monkeypatch):
    monkeypatch.delenv(tfjob_lib.CUSTOM_CLUSTER_DOMAIN_ENV, raising=False)
    job = _tfjob(name='taxi-train-9', namespace='ml')

    config = tfjob_lib.tf_config_for(job, 'Worker', 1)

    assert config == {
        'cluster': {
            'chief': ['taxi-train-9-chief-0.ml.svc:2222'],
            'ps': ['taxi-train-9-ps-0.ml.svc:2222', 'taxi-train-9-ps-1.ml.svc:2222'],
            'worker': ['taxi-train-9-worker-0.ml.svc:2222', 'taxi-train-9-worker-1.ml.svc:2222'],
        },
        'task': {'type': 'worker', 'index': 1},
        'environment': 'cloud',
    }
    # Same text as the operator's Go json.Marshal (struct order cluster, task, environment).
    assert json.dumps(config, separators=(',', ':')).startswith('{"cluster":{"chief":')
    assert tfjob_lib.tf_config_for(job, 'Chief', 0)['task'] == {'type': 'chief', 'index': 0}
    assert tfjob_lib.tf_config_for(job, 'PS', 1)['task'] == {'type': 'ps', 'index': 1}


def test_tf_config_uses_custom_cluster_domain_and_named_port(monkeypatch):
    monkeypatch.setenv(tfjob_lib.CUSTOM_CLUSTER_DOMAIN_ENV, 'cluster.local')
    job = _tfjob(name='j', namespace='ns')
    job.spec.tf_replica_specs['PS'].template.spec.containers[0].ports[0].container_port = 3333

    config = tfjob_lib.tf_config_for(job, 'PS', 0)

    assert config['cluster']['ps'] == [
        'j-ps-0.ns.svc.cluster.local:3333',
        'j-ps-1.ns.svc.cluster.local:3333',
    ]
    assert config['cluster']['chief'] == ['j-chief-0.ns.svc.cluster.local:2222']


def test_tf_config_is_absent_for_a_single_pod_job_and_indices_are_checked():
    job = _tfjob()
    for replica_type in ('Worker', 'PS'):
        del job.spec.tf_replica_specs[replica_type]
    assert tfjob_lib.tf_config_for(job, 'Chief', 0) is None
    with pytest.raises(ValueError, match='index must be in'):
        tfjob_lib.tf_config_for(_tfjob(), 'Worker', 2)
    with pytest.raises(ValueError, match='replica_type must be one of'):
        tfjob_lib.tf_config_for(_tfjob(), 'Evaluator', 0)


def test_run_tfjob_submits_waits_and_returns_the_succeeded_job(fake_api):
    server, training_client = fake_api
    server.statuses = [
        {'conditions': [fake_kubernetes.condition('Created')]},
        {
            'conditions': [
                fake_kubernetes.condition('Created'),
                fake_kubernetes.condition('Running'),
            ]
        },
        {
            'conditions': [
                fake_kubernetes.condition('Created'),
                {**fake_kubernetes.condition('Running'), 'status': 'False'},
                fake_kubernetes.condition('Succeeded'),
            ]
        },
    ]

    job = tfjob_lib.run_tfjob(training_client, _tfjob(), timeout_s=30, poll_interval_s=0.01)

    assert [c.type for c in job.status.conditions][-1] == 'Succeeded'
    methods = [(method, path) for method, path, _, _ in server.requests]
    assert methods[0] == ('POST', '/apis/kubeflow.org/v1/namespaces/ml/tfjobs')
    assert methods[1:] == [('GET', '/apis/kubeflow.org/v1/namespaces/ml/tfjobs/taxi-train-9')] * 3
    submitted = server.requests[0][3]
    assert submitted == tfjob_lib.to_manifest(_tfjob())


def test_run_tfjob_reports_the_failed_replica_and_keeps_the_job(fake_api):
    server, training_client = fake_api
    server.statuses = [
        {
            'conditions': [
                fake_kubernetes.condition(
                    'Failed', 'TFJob ml/taxi-train-9 has failed because 1 Worker replica(s) failed.'
                )
            ]
        }
    ]
    labels = {'training.kubeflow.org/job-name': 'taxi-train-9'}
    server.pods = [
        {
            'metadata': {
                'name': 'taxi-train-9-chief-0',
                'labels': {
                    **labels,
                    'training.kubeflow.org/replica-type': 'chief',
                    'training.kubeflow.org/replica-index': '0',
                },
            },
            'status': {
                'phase': 'Running',
                'containerStatuses': [
                    {
                        'name': 'tensorflow',
                        'image': 'i',
                        'imageID': '',
                        'ready': True,
                        'restartCount': 0,
                        'state': {'running': {}},
                    }
                ],
            },
        },
        {
            'metadata': {
                'name': 'taxi-train-9-worker-1',
                'labels': {
                    **labels,
                    'training.kubeflow.org/replica-type': 'worker',
                    'training.kubeflow.org/replica-index': '1',
                },
            },
            'status': {
                'phase': 'Failed',
                'containerStatuses': [
                    {
                        'name': 'tensorflow',
                        'image': 'i',
                        'imageID': '',
                        'ready': False,
                        'restartCount': 3,
                        'state': {
                            'terminated': {
                                'exitCode': 137,
                                'reason': 'OOMKilled',
                                'message': 'memory limit 8Gi',
                            }
                        },
                    }
                ],
            },
        },
    ]

    with pytest.raises(tfjob_lib.TFJobFailed) as raised:
        tfjob_lib.run_tfjob(training_client, _tfjob(), timeout_s=30, poll_interval_s=0.01)

    assert raised.value.failed_replicas == [
        {
            'replica_type': 'worker',
            'index': '1',
            'pod': 'taxi-train-9-worker-1',
            'reason': 'OOMKilled',
            'exit_code': 137,
            'message': 'memory limit 8Gi',
        }
    ]
    assert 'worker 1 (pod taxi-train-9-worker-1): OOMKilled exit code 137' in str(raised.value)
    assert '1 Worker replica(s) failed' in str(raised.value)
    (pod_list,) = [r for r in server.requests if r[1] == '/api/v1/namespaces/ml/pods']
    assert pod_list[2]['labelSelector'] == ['training.kubeflow.org/job-name=taxi-train-9']
    assert 'DELETE' not in {method for method, *_ in server.requests}


def test_sigterm_while_waiting_deletes_the_job(fake_api):
    server, training_client = fake_api
    server.statuses = [{'conditions': [fake_kubernetes.condition('Running')]}]
    gets = []

    def cancel_on_second_get():
        gets.append(1)
        if len(gets) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # what KFP does to a cancelled step's pod

    server.on_get = cancel_on_second_get
    previous = signal.getsignal(signal.SIGTERM)

    with pytest.raises(tfjob_lib.TFJobCancelled):
        tfjob_lib.run_tfjob(training_client, _tfjob(), timeout_s=60, poll_interval_s=0.05)

    assert server.requests[-1][:2] == (
        'DELETE',
        '/apis/kubeflow.org/v1/namespaces/ml/tfjobs/taxi-train-9',
    )
    assert signal.getsignal(signal.SIGTERM) is previous


def test_timeout_deletes_the_job(fake_api):
    server, training_client = fake_api
    server.statuses = [{'conditions': [fake_kubernetes.condition('Running')]}]

    with pytest.raises(TimeoutError, match='did not finish'):
        tfjob_lib.run_tfjob(training_client, _tfjob(), timeout_s=0.05, poll_interval_s=0.01)

    assert server.requests[-1][0] == 'DELETE'


@pytest.mark.parametrize('name', ['Taxi-train', '9train', 'taxi_train', 'a' * 55, 'taxi-'])
def test_job_names_that_break_service_names_are_refused(name):
    with pytest.raises(ValueError, match='name: .* must be lower-case letters'):
        _tfjob(name=name)


def test_train_on_kubernetes_builds_the_job_from_the_values_file_and_runs_it(fake_api):
    server, training_client = fake_api
    server.statuses = [{'conditions': [fake_kubernetes.condition('Succeeded')]}]

    job = tfjob_lib.train_on_kubernetes(
        values_path=VALUES,
        name='taxi-train-9',
        namespace='ml',
        image='registry.example/asynctrain:1',
        train=TRAIN,
        timeout_s=30,
        training_client=training_client,
    )

    assert job.status.conditions[0].type == 'Succeeded'
    assert server.requests[0][3] == tfjob_lib.to_manifest(_tfjob())


def test_module_entry_prints_the_manifest_build_tfjob_makes(capsys):
    code = tfjob_lib.main(
        [
            '--values',
            str(VALUES),
            '--name',
            'taxi-train-9',
            '--namespace',
            'ml',
            '--image',
            'registry.example/asynctrain:1',
            '--examples',
            TRAIN.examples,
            '--transform-graph',
            TRAIN.transform_graph,
            '--output',
            TRAIN.output,
            '--config',
            TRAIN.config,
        ]
    )

    assert code == 0
    assert yaml.safe_load(capsys.readouterr().out) == tfjob_lib.to_manifest(_tfjob())


def test_tolerations_from_the_values_file_reach_the_pods(tmp_path):
    values = yaml.safe_load(VALUES.read_text())
    toleration = {
        'key': 'dedicated',
        'operator': 'Equal',
        'value': 'training',
        'effect': 'NoSchedule',
        'tolerationSeconds': 30,
    }
    values['replicas']['Worker']['tolerations'] = [toleration]
    path = tmp_path / 'values.yaml'
    path.write_text(yaml.safe_dump(values))

    job = tfjob_lib.build_tfjob(
        tfjob_lib.load_tfjob_settings(path), name='j', namespace='ml', image='r/a:1', train=TRAIN
    )
    specs = tfjob_lib.to_manifest(job)['spec']['tfReplicaSpecs']

    assert specs['Worker']['template']['spec']['tolerations'] == [toleration]
    assert 'tolerations' not in specs['PS']['template']['spec']
    kubernetes_validate.validate(
        {
            'apiVersion': 'v1',
            'kind': 'PodTemplate',
            'metadata': {'name': 'w'},
            'template': specs['Worker']['template'],
        },
        K8S_VERSION,
        strict=True,
    )


def test_train_arguments_can_point_the_replicas_at_artifact_uris():
    train = tfjob_lib.TrainArguments(
        examples='gs://b/e/7',
        transform_graph='gs://b/t/7',
        serving_model_dir='gs://b/Trainer/model/9/Format-Serving',
        model_run_dir='gs://b/Trainer/model_run/9',
        config='gs://b/Trainer/model_run/9/trainer_config.yaml',
        label_key='big_tipper',
        base_model='gs://b/m/3/Format-Serving',
    )
    assert train.to_argv() == [
        'train',
        '--examples',
        'gs://b/e/7',
        '--transform-graph',
        'gs://b/t/7',
        '--serving-model-dir',
        'gs://b/Trainer/model/9/Format-Serving',
        '--model-run-dir',
        'gs://b/Trainer/model_run/9',
        '--config',
        'gs://b/Trainer/model_run/9/trainer_config.yaml',
        '--label-key',
        'big_tipper',
        '--base-model',
        'gs://b/m/3/Format-Serving',
    ]
    with pytest.raises(
        ValueError, match='output: required unless serving_model_dir and model_run_dir'
    ):
        tfjob_lib.TrainArguments(
            examples='e', transform_graph='t', serving_model_dir='s', config='c'
        )


def test_job_names_are_deterministic_valid_and_fit_service_names():
    settings = tfjob_lib.load_tfjob_settings(VALUES)
    assert tfjob_lib.job_name('asynctrain-train', '9') == 'asynctrain-train-9'
    uri = 'gs://b/root/asynctrain-taxi/run-2026-11-29/Trainer_1234/model'
    name = tfjob_lib.job_name('asynctrain-train', uri)
    assert name == tfjob_lib.job_name('asynctrain-train', uri)
    assert name != tfjob_lib.job_name('asynctrain-train', uri.replace('1234', '1235'))
    assert len(name) == len('asynctrain-train-') + 12
    # The longest prefix the config allows, with the operator's service names, still builds.
    longest = tfjob_lib.job_name('a' * 30, 'Trainer_' + 'f' * 40)
    tfjob_lib.build_tfjob(settings, name=longest, namespace='ml', image='r/a:1', train=TRAIN)
    with pytest.raises(ValueError, match='execution_id: expected'):
        tfjob_lib.job_name('p', '')


def test_pod_namespace_is_read_from_the_service_account_mount(tmp_path):
    path = tmp_path / 'namespace'
    path.write_text('kubeflow-user\n')
    assert tfjob_lib.pod_namespace(str(path)) == 'kubeflow-user'
    with pytest.raises(
        ValueError, match='namespace: not set, and the pod namespace file .* cannot be read'
    ):
        tfjob_lib.pod_namespace(str(tmp_path / 'missing'))


def test_train_on_kubernetes_hands_the_built_job_to_a_runner():
    runs = []

    result = tfjob_lib.train_on_kubernetes(
        values_path=VALUES,
        name='taxi-train-9',
        namespace='ml',
        image='registry.example/asynctrain:1',
        train=TRAIN,
        timeout_s=30,
        runner=lambda job, timeout_s: runs.append((job, timeout_s)) or 'done',
    )

    assert result == 'done'
    ((job, timeout_s),) = runs
    assert (tfjob_lib.to_manifest(job), timeout_s) == (tfjob_lib.to_manifest(_tfjob()), 30)

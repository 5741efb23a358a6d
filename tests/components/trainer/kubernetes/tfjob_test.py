"""Tests for asynctrain/components/trainer/kubernetes/tfjob.py: the TFJob and RBAC manifests, TF_CONFIG, names.

No Kubernetes cluster runs here. Manifests are checked against the Kubernetes 1.26 OpenAPI schemas
(`kubernetes_validate`, strict: unknown fields fail; a test-only package, tests/test_only.py) and the
Training Operator SDK's models.
"""

from __future__ import annotations

import json

import pytest
import yaml

from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from asynctrain.components.trainer.kubernetes import values as values_lib
from tests import test_only
from tests.components.trainer.kubernetes.kubernetes_testdata import (
    K8S_VERSION,
    RBAC,
    TRAIN,
    VALUES,
    make_tfjob,
)


@pytest.fixture(scope='module')
def kubernetes_validate():
    with test_only.imported('kubernetes_validate') as module:
        yield module


def test_tfjob_has_chief_workers_and_ps_running_asynctrain_train():
    manifest = tfjob_lib.to_manifest(make_tfjob())

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
            '--label-key',
            TRAIN.label_key,
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
    manifest = tfjob_lib.to_manifest(make_tfjob())
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


def test_tfjob_pod_templates_validate_against_kubernetes_schema(kubernetes_validate):
    manifest = tfjob_lib.to_manifest(make_tfjob())
    for spec in manifest['spec']['tfReplicaSpecs'].values():
        pod_template = {
            'apiVersion': 'v1',
            'kind': 'PodTemplate',
            'metadata': {'name': 'replica', 'namespace': 'ml'},
            'template': spec['template'],
        }
        kubernetes_validate.validate(pod_template, K8S_VERSION, strict=True)


def test_tfjob_round_trips_through_the_sdk_models_and_yaml():
    manifest = tfjob_lib.to_manifest(make_tfjob())
    parsed = tfjob_lib.from_manifest(yaml.safe_load(yaml.safe_dump(manifest)))

    assert parsed.spec.tf_replica_specs['PS'].replicas == 2
    assert parsed.spec.tf_replica_specs['Chief'].template.spec.containers[0].resources.limits == {
        'cpu': '2',
        'memory': '8Gi',
    }
    assert tfjob_lib.to_manifest(parsed) == manifest


def test_rbac_manifests_validate_and_grant_only_what_the_submitter_uses(kubernetes_validate):
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
    # What the Role grants, call by call and KFP version by version: rbac_test.py.
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
    assert values_lib.load_tfjob_settings(VALUES).service_account == 'asynctrain-trainer'


def test_tf_config_is_what_the_operator_sets(monkeypatch):
    monkeypatch.delenv(tfjob_lib.CUSTOM_CLUSTER_DOMAIN_ENV, raising=False)
    job = make_tfjob(name='taxi-train-9', namespace='ml')

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
    job = make_tfjob(name='j', namespace='ns')
    job.spec.tf_replica_specs['PS'].template.spec.containers[0].ports[0].container_port = 3333

    config = tfjob_lib.tf_config_for(job, 'PS', 0)

    assert config['cluster']['ps'] == [
        'j-ps-0.ns.svc.cluster.local:3333',
        'j-ps-1.ns.svc.cluster.local:3333',
    ]
    assert config['cluster']['chief'] == ['j-chief-0.ns.svc.cluster.local:2222']


def test_tf_config_is_absent_for_a_single_pod_job_and_indices_are_checked():
    job = make_tfjob()
    for replica_type in ('Worker', 'PS'):
        del job.spec.tf_replica_specs[replica_type]
    assert tfjob_lib.tf_config_for(job, 'Chief', 0) is None
    with pytest.raises(ValueError, match='index must be in'):
        tfjob_lib.tf_config_for(make_tfjob(), 'Worker', 2)
    with pytest.raises(ValueError, match='replica_type must be one of'):
        tfjob_lib.tf_config_for(make_tfjob(), 'Evaluator', 0)


@pytest.mark.parametrize('name', ['Taxi-train', '9train', 'taxi_train', 'a' * 55, 'taxi-'])
def test_job_names_that_break_service_names_are_refused(name):
    with pytest.raises(ValueError, match='name: .* must be lower-case letters'):
        make_tfjob(name=name)


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
            '--label-key',
            TRAIN.label_key,
        ]
    )

    assert code == 0
    assert yaml.safe_load(capsys.readouterr().out) == tfjob_lib.to_manifest(make_tfjob())


def test_tolerations_from_the_values_file_reach_the_pods(tmp_path, kubernetes_validate):
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
        values_lib.load_tfjob_settings(path), name='j', namespace='ml', image='r/a:1', train=TRAIN
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


def test_job_names_are_deterministic_valid_and_fit_service_names():
    settings = values_lib.load_tfjob_settings(VALUES)
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

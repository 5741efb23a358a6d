"""Tests for asynctrain/components/trainer/kubernetes/client.py: submit, wait, report a failure, cancel.

No Kubernetes cluster runs here: the SDK's real `TrainingClient` talks to a fake API server on
127.0.0.1 (`fake_kubernetes`) that records each request and answers with scripted TFJob and Pod
objects.
"""

from __future__ import annotations

import os
import signal

import pytest

from asynctrain.components.trainer.kubernetes import client
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from tests.components.trainer import fake_kubernetes
from tests.components.trainer.kubernetes.kubernetes_testdata import TRAIN, VALUES, make_tfjob


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

    job = client.run_tfjob(training_client, make_tfjob(), timeout_s=30, poll_interval_s=0.01)

    assert [c.type for c in job.status.conditions][-1] == 'Succeeded'
    methods = [(method, path) for method, path, _, _ in server.requests]
    assert methods[0] == ('POST', '/apis/kubeflow.org/v1/namespaces/ml/tfjobs')
    assert methods[1:] == [('GET', '/apis/kubeflow.org/v1/namespaces/ml/tfjobs/taxi-train-9')] * 3
    submitted = server.requests[0][3]
    assert submitted == tfjob_lib.to_manifest(make_tfjob())


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

    with pytest.raises(client.TFJobFailed) as raised:
        client.run_tfjob(training_client, make_tfjob(), timeout_s=30, poll_interval_s=0.01)

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

    with pytest.raises(client.TFJobCancelled):
        client.run_tfjob(training_client, make_tfjob(), timeout_s=60, poll_interval_s=0.05)

    assert server.requests[-1][:2] == (
        'DELETE',
        '/apis/kubeflow.org/v1/namespaces/ml/tfjobs/taxi-train-9',
    )
    assert signal.getsignal(signal.SIGTERM) is previous


def test_timeout_deletes_the_job(fake_api):
    server, training_client = fake_api
    server.statuses = [{'conditions': [fake_kubernetes.condition('Running')]}]

    with pytest.raises(TimeoutError, match='did not finish'):
        client.run_tfjob(training_client, make_tfjob(), timeout_s=0.05, poll_interval_s=0.01)

    assert server.requests[-1][0] == 'DELETE'


def test_train_on_kubernetes_builds_the_job_from_the_values_file_and_runs_it(fake_api):
    server, training_client = fake_api
    server.statuses = [{'conditions': [fake_kubernetes.condition('Succeeded')]}]

    job = client.train_on_kubernetes(
        values_path=VALUES,
        name='taxi-train-9',
        namespace='ml',
        image='registry.example/asynctrain:1',
        train=TRAIN,
        timeout_s=30,
        training_client=training_client,
    )

    assert job.status.conditions[0].type == 'Succeeded'
    assert server.requests[0][3] == tfjob_lib.to_manifest(make_tfjob())


def test_train_on_kubernetes_hands_the_built_job_to_a_runner():
    runs = []

    result = client.train_on_kubernetes(
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
    assert (tfjob_lib.to_manifest(job), timeout_s) == (tfjob_lib.to_manifest(make_tfjob()), 30)

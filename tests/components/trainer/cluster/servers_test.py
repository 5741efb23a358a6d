"""The cluster launcher at the value level: an `in_process` cluster's size and addresses, and the
environment a child process of this package gets."""

import os

from components.trainer import config as config_lib
from components.trainer.cluster import servers


def test_in_process_cluster_has_the_requested_tasks_listening_on_loopback():
    distribution = config_lib.DistributionConfig(cluster='in_process', num_workers=3, num_ps=2)
    with servers.start(distribution) as cluster:
        spec = cluster.resolver.cluster_spec().as_dict()
        assert (cluster.num_workers, cluster.num_ps) == (3, 2)
        assert sorted(spec) == [servers.PS, servers.WORKER]
        assert len(spec[servers.WORKER]) == 3
        assert len(spec[servers.PS]) == 2
        addresses = spec[servers.WORKER] + spec[servers.PS]
        assert all(a.startswith('127.0.0.1:') for a in addresses)
        assert len(set(addresses)) == 5
        assert all(servers._listening(a) for a in addresses)
        assert cluster.resolver.rpc_layer == 'grpc'
        # In-process servers are no processes of their own.
        assert cluster.processes == {}


def test_child_env_drops_tf_config_unless_given_and_puts_the_package_first(monkeypatch):
    monkeypatch.setenv('TF_CONFIG', '{"task": {"type": "chief"}}')
    monkeypatch.setenv('PYTHONPATH', '/elsewhere')
    monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '0')
    monkeypatch.delenv('GRPC_FAIL_FAST', raising=False)

    env = servers.child_env()

    assert 'TF_CONFIG' not in env
    assert env['PYTHONPATH'].split(os.pathsep) == [servers._PACKAGE_ROOT, '/elsewhere']
    assert os.path.isfile(
        os.path.join(servers._PACKAGE_ROOT, 'components', 'trainer', 'cluster', 'servers.py')
    )
    assert env['GRPC_FAIL_FAST'] == 'use_caller'
    # Values already set are kept.
    assert env['TF_CPP_MIN_LOG_LEVEL'] == '0'
    assert env['TF_USE_LEGACY_KERAS'] == '1'


def test_child_env_carries_the_task_it_is_given(monkeypatch):
    monkeypatch.delenv('PYTHONPATH', raising=False)
    spec = {'worker': ['127.0.0.1:1'], 'ps': ['127.0.0.1:2']}

    env = servers.child_env({'cluster': spec, 'task': {'type': 'ps', 'index': 0}})

    assert env['PYTHONPATH'] == servers._PACKAGE_ROOT
    monkeypatch.setenv('TF_CONFIG', env['TF_CONFIG'])
    assert servers.task_from_tf_config() == ('ps', 0)

"""An emulated cluster of one worker and one parameter server, each in a CPU budget of its own and
behind its own link, runs a ParameterServerStrategy step from this (fresh) process; its traffic
crosses the proxies; a worker killed and restarted on the same address serves the next step; and
nothing is left behind (processes, cgroups, the proxy server)."""

import pathlib
import time
import urllib.error

import pytest

from asynctrain.components.trainer.cluster import servers
from asynctrain.testing.emulated_cluster.hosts import EmulatedCluster, Machine

pytestmark = pytest.mark.integration

WORKER, PS = (servers.WORKER, 0), (servers.PS, 0)


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f'{what} not seen in {timeout_s} s')
        time.sleep(0.1)


def _gone(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except FileNotFoundError:
        return True


@pytest.mark.fresh_process
def test_a_step_runs_through_proxies_and_survives_a_worker_restart():
    import tensorflow as tf

    with EmulatedCluster(workers=[Machine(cpus=0.5)], ps=[Machine(cpus=0.5)]) as cluster:
        worker, ps = cluster.host(*WORKER), cluster.host(*PS)
        # The cluster dials the proxies; the servers listen behind them, each in its budget.
        assert cluster.cluster_spec == {
            servers.WORKER: [worker.link.listen],
            servers.PS: [ps.link.listen],
        }
        assert worker.link.upstream == f'127.0.0.1:{worker.bind_port}' != worker.address
        assert ps.link.upstream == f'127.0.0.1:{ps.bind_port}' != ps.address
        assert worker.cgroup.pids() == [worker.process.pid]
        assert ps.cgroup.pids() == [ps.process.pid]

        strategy = tf.distribute.experimental.ParameterServerStrategy(cluster.resolver())
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            total = tf.Variable(0.0)

        @tf.function
        def step():
            total.assign_add(1.0)
            return total.read_value()

        assert coordinator.schedule(step).fetch() == 1.0
        assert 'ps' in total.device

        first = worker.process.pid
        worker.kill()
        assert _gone(first)
        # Bytes are counted when a connection ends: the dead worker's own (from the coordinator,
        # through its link) and its reads of the variable (through the parameter server's).
        for link in (worker.link, ps.link):
            _wait_for(lambda link=link: min(link.bytes_received().values()) > 0, 30, link.name)

        worker.restart()
        assert worker.process.pid != first
        assert worker.address == cluster.cluster_spec[servers.WORKER][0]
        assert worker.cgroup.pids() == [worker.process.pid]
        # The coordinator finds the worker back at its address and runs the next step there.
        assert coordinator.schedule(step).fetch() == 2.0

        assert worker.cpu_stats().usage_s > 0 and ps.cpu_stats().usage_s > 0
        folders = [folder for host in (worker, ps) for folder in host.cgroup.folders]
        pids = [worker.process.pid, ps.process.pid]
        api = ps.link.api

    assert all(_gone(pid) for pid in pids)
    assert not any(pathlib.Path(folder).exists() for folder in folders)
    with pytest.raises(urllib.error.URLError):
        api.version()


def test_an_unbudgeted_host_is_restarted_on_its_address_behind_its_link():
    # Servers in child processes only: this process makes no TensorFlow state.
    with EmulatedCluster(workers=[Machine()], ps=[]) as cluster:
        worker = cluster.host(*WORKER)
        assert worker.cgroup is None and worker.cpu_stats() is None
        first = worker.process.pid

        worker.restart()

        assert _gone(first)
        assert worker.alive() and worker.process.pid != first
        assert servers._listening(worker.link.upstream)
        assert cluster.cluster_spec == {servers.WORKER: [worker.link.listen], servers.PS: []}
        process = worker.process
    assert process.poll() is not None

"""TensorFlow's pool of server threads, one per process and sized by its first server: whichever
server comes first leaves room for later in-process clusters, and a cluster the pool cannot serve
is refused instead of hanging."""

import json
import subprocess
import sys

import pytest
from tensorflow.python.eager import context

from asynctrain.components.trainer.training import process_pool
from tests.repository import REPO_ROOT, child_environment


@pytest.fixture
def no_server_yet(monkeypatch):
    """What a process that has started no server yet, and chose no pool size, would see."""
    monkeypatch.setattr(process_pool, '_pool_threads', None)
    monkeypatch.setattr(context.context(), '_inter_op_parallelism_threads', None)


def test_the_first_in_process_servers_leave_room_and_later_ones_share_the_pool(no_server_yet):
    assert process_pool.in_process_server_threads(1) == process_pool.POOL_THREADS == 8
    assert process_pool.in_process_server_threads(12) == 13
    assert process_pool.in_process_server_threads(1, server_threads=10) == 10

    process_pool.record_servers(8)
    process_pool.record_servers(13)  # a later cluster's servers do not resize the pool
    assert process_pool.in_process_server_threads(7) == 8
    assert process_pool.in_process_server_threads(2, server_threads=3) == 8
    with pytest.raises(ValueError) as refused:
        process_pool.in_process_server_threads(8)
    message = str(refused.value)
    assert message.startswith('distribution.num_workers: 8 in-process workers need 9 threads')
    assert 'made it 8 threads' in message and 'local_processes' in message


def test_a_first_coordinator_server_gets_the_floor_only_while_it_starts(no_server_yet):
    settings = context.context()
    with process_pool.coordinator_server():
        # What connect_to_cluster copies into the coordinator's server settings.
        assert settings.config.inter_op_parallelism_threads == 8
    assert settings._inter_op_parallelism_threads is None
    assert settings.config.inter_op_parallelism_threads == 0
    assert process_pool._pool_threads == 8
    # The pool exists now: a later connection leaves the settings alone.
    with process_pool.coordinator_server():
        assert settings.config.inter_op_parallelism_threads == 0


def test_a_size_the_user_chose_is_kept_and_checked_against(no_server_yet, monkeypatch):
    monkeypatch.setattr(context.context(), '_inter_op_parallelism_threads', 2)
    with process_pool.coordinator_server():
        assert context.context().config.inter_op_parallelism_threads == 2
    assert process_pool._pool_threads == 2
    assert process_pool.in_process_server_threads(1) == 2
    with pytest.raises(ValueError, match='2 in-process workers need 3 threads'):
        process_pool.in_process_server_threads(2)


def _scenario(*clusters: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, '-m', 'tests.components.trainer.training.pool_scenario', *clusters],
        cwd=REPO_ROOT,
        env=child_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.integration
def test_larger_in_process_clusters_train_after_a_smaller_first_server():
    """Both orders that hung in their first steps (every time, on a 2-core machine) when the
    first server sized the pool at 2 threads: a 1-worker in-process cluster, then 2 workers; a
    `local_processes` coordinator, then 1 and 3 in-process workers. Each process runs an eager op
    first, as a test session has, then trains on its clusters in turn; a cluster that does not
    finish in a minute ends the process (exit 3)."""
    runs = {
        'in-process first': _scenario('in_process:1', 'in_process:2'),
        'coordinator first': _scenario('local_processes:1', 'in_process:1', 'in_process:3'),
    }
    results = {}
    for name, process in runs.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, (name, out, err[-3000:])
        results[name] = [json.loads(line) for line in out.splitlines() if line.startswith('{')]
    trained = {name: [r['cluster'] for r in lines] for name, lines in results.items()}
    assert trained == {
        'in-process first': ['in_process:1', 'in_process:2'],
        'coordinator first': ['local_processes:1', 'in_process:1', 'in_process:3'],
    }
    for lines in results.values():
        for result in lines:
            # Every closure's steps ran, and the fit converged: y = sum(x) has zero loss.
            assert result['updates'] == 80, result
            assert result['last_loss'] < 1e-3, result
            assert result['pool_threads'] == process_pool.POOL_THREADS, result

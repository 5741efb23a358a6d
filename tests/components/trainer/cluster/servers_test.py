"""The cluster launcher at the value level: an `in_process` cluster's size and addresses, the
environment a child process of this package gets, and how it is started (no fork handlers, dies
with its parent)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from asynctrain.components.shared import forked_child
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers


@pytest.mark.fresh_process
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
        os.path.join(
            servers._PACKAGE_ROOT, 'asynctrain', 'components', 'trainer', 'cluster', 'servers.py'
        )
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


# A parent that spawns a child, prints the child's pid and its fork hook counter, then waits to be
# killed; the child, on the same stdout, prints `armed` once its parent-death signal is set. Python's fork hooks run when CPython forks for a child (as with a
# `preexec_fn`), not when it starts one with vfork, which runs no fork handlers at all.
_PARENT = """
import os, sys, time
from asynctrain.components.trainer.cluster import servers
forks = []
os.register_at_fork(before=lambda: forks.append(1))
child = servers.spawn(
    [sys.executable, '-c',
     'from asynctrain.components.shared import forked_child; forked_child.die_with_parent(); '
     'print("armed", flush=True); import time; time.sleep(120)'],
    servers.child_env(),
)
print(child.pid, len(forks), flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split(') ')[-1][0] != 'Z'
    except FileNotFoundError:
        return False


def _gone_with_its_parent(parent: subprocess.Popen, child_pid: int) -> bool:
    """SIGKILLs `parent`, then waits (up to 30 s) for `child_pid` to exit; whether it did."""
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while _running(child_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _running(child_pid)


def test_a_spawned_child_runs_no_fork_handlers_and_dies_with_its_parent():
    parent = subprocess.Popen(
        [sys.executable, '-c', _PARENT],
        env=servers.child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = sorted([parent.stdout.readline().split(), parent.stdout.readline().split()])
        # The parent's line (two numbers) and the child's, in either order.
        (child_pid, forks), armed = map(int, lines[0]), lines[1]
        assert forks == 0
        assert armed == ['armed']  # the child has set its parent-death signal
        assert _running(child_pid)
        assert _gone_with_its_parent(parent, child_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_die_with_parent_exits_when_the_parent_is_already_gone():
    env = {**servers.child_env(), forked_child.PARENT_PID_VARIABLE: '1'}
    done = subprocess.run(
        [
            sys.executable,
            '-c',
            'from asynctrain.components.shared import forked_child; forked_child.die_with_parent(); '
            'print("outlived its parent")',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert 'outlived' not in done.stdout


# A parent that starts a program other than Python (sleep) with `spawn_program`, prints its pid
# once the program runs, then waits to be killed.
_PROGRAM_PARENT = """
import os, sys, time
from asynctrain.components.trainer.cluster import servers
child = servers.spawn_program(['/bin/sleep', '120'], servers.child_env())
while open(f'/proc/{child.pid}/comm').read().strip() != 'sleep':
    time.sleep(0.05)
print(child.pid, flush=True)
time.sleep(120)
"""


def test_a_spawned_program_runs_in_the_spawned_process_and_dies_with_its_parent():
    parent = subprocess.Popen(
        [sys.executable, '-c', _PROGRAM_PARENT],
        env=servers.child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child_pid = int(parent.stdout.readline())
        with open(f'/proc/{child_pid}/cmdline', 'rb') as cmdline:
            assert cmdline.read().split(b'\0')[:2] == [b'/bin/sleep', b'120']  # exec'd in place
        assert _gone_with_its_parent(parent, child_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


# A parent that spawns a child from a thread of its own and lets that thread end, then lets the
# child finish; it prints the child's exit status. The child sets its parent-death signal, says
# so (READY), and waits for GO. The kernel sends that signal when the thread that started the
# child ends (prctl(2), PR_SET_PDEATHSIG), so a child started by the short-lived thread itself
# is SIGKILLed there (-9).
_THREAD_PARENT = """
import os, sys, threading, time
from asynctrain.components.trainer.cluster import servers
ready, go = sys.argv[1:3]
child_code = (
    'import os, sys, time\\n'
    'from asynctrain.components.shared import forked_child\\n'
    'forked_child.die_with_parent()\\n'
    'open(sys.argv[1], "w").close()\\n'
    'while not os.path.exists(sys.argv[2]):\\n'
    '    time.sleep(0.02)\\n'
)
children = []

def restart():
    children.append(servers.spawn([sys.executable, '-c', child_code, ready, go], servers.child_env()))
    while not os.path.exists(ready) and children[0].poll() is None:
        time.sleep(0.02)

thread = threading.Thread(target=restart)
thread.start()
thread.join()
while os.path.exists(f'/proc/self/task/{thread.native_id}'):  # ended in the kernel too
    time.sleep(0.02)
open(go, 'w').close()
print(os.path.exists(ready), children[0].wait(timeout=60), flush=True)
"""


def test_a_child_spawned_from_a_thread_outlives_that_thread(tmp_path):
    """A server restarted by a short-lived thread (the async bench's lost worker comes back
    from its disruption thread) must live on after that thread ends."""
    done = subprocess.run(
        [sys.executable, '-c', _THREAD_PARENT, str(tmp_path / 'ready'), str(tmp_path / 'go')],
        env=servers.child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # The child had set its parent-death signal before the thread ended, and exited 0 when told
    # to, not -9.
    assert done.stdout.split() == ['True', '0']

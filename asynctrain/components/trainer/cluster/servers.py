"""The cluster a ParameterServerStrategy runs on, in one of three modes.

- `in_process`: worker and parameter-server gRPC servers inside this process, on free loopback
  ports. The default on one machine; what most tests use.
- `local_processes`: each worker and parameter server a separate OS process on 127.0.0.1 (this
  module run as `python -m asynctrain.components.trainer.cluster.servers` with `TF_CONFIG` naming its task), so that
  a test can kill one. This process is the coordinator. The supervisor (`recovery`) forks them
  from a fork server that imported TensorFlow once (`fork_server_for_children`), not as new
  interpreters that each import it.
- `tf_config`: the cluster `TF_CONFIG` describes. Every replica of a Kubernetes TFJob or a Vertex
  AI job runs the same command; the chief coordinates, workers and parameter servers start their
  server and wait (`serve_forever`).

Servers get `inter_op_parallelism_threads = num_workers + 1`: with fewer, an in-process cluster on
a two-core machine deadlocks, every thread blocked on a remote call. In-process servers share the
pool of the process's first server (`training/process_pool.py`), which they size or are checked
against.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import asynctrain
from asynctrain.components.shared import fork_server, forked_child, tf_environment
from asynctrain.components.shared import ports as ports_lib
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import process_pool

CHIEF, WORKER, PS = 'chief', 'worker', 'ps'
# The folder holding the `asynctrain` package (a checkout or site-packages), put on a child's path so
# that it imports this very package.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(asynctrain.__file__)))


@dataclasses.dataclass
class Cluster:
    """A running cluster, seen from the coordinator.

    Attributes:
      resolver: What `ParameterServerStrategy` connects with.
      num_workers: Workers in the cluster.
      num_ps: Parameter servers in the cluster.
      processes: Server processes this process started (`local_processes`), by task.
    """

    resolver: object
    num_workers: int
    num_ps: int
    processes: dict = dataclasses.field(default_factory=dict)
    _servers: list = dataclasses.field(default_factory=list)


def task_from_tf_config() -> tuple[str | None, int]:
    """(task type, index) from `TF_CONFIG`, or (None, 0) when it is unset or names no task."""
    raw = os.environ.get('TF_CONFIG', '')
    if not raw:
        return None, 0
    task = json.loads(raw).get('task') or {}
    return task.get('type'), int(task.get('index', 0))


def server_config(num_workers: int, server_threads: int = 0):
    import tensorflow as tf

    proto = tf.compat.v1.ConfigProto()
    proto.inter_op_parallelism_threads = server_threads or num_workers + 1
    return proto


def serve_forever(
    cluster_spec: dict, task_type: str, task_id: int, server_threads: int = 0, port: int = 0
) -> None:
    """Starts this task's server and blocks: a worker or parameter server only answers the
    coordinator; it ends when its process is stopped.

    `port`, when not 0, is the port the server binds instead of its cluster-spec address's: the
    address others dial is then a proxy's in front of it (`ServerDef.port`)."""
    import tensorflow as tf

    if task_type not in (WORKER, PS):
        raise ValueError(f'task type: got {task_type!r}; a server task is one of {[WORKER, PS]}')
    server_def = tf.train.ServerDef(
        cluster=tf.train.ClusterSpec(cluster_spec).as_cluster_def(),
        job_name=task_type,
        task_index=task_id,
        protocol='grpc',
        port=port,
    )
    server = tf.distribute.Server(
        server_def,
        config=server_config(len(cluster_spec.get(WORKER, ())), server_threads),
        start=True,
    )
    server.join()


def _cluster_spec(num_workers: int, num_ps: int) -> dict:
    # Outside the ephemeral range: the servers bind them later, in processes of their own.
    ports = ports_lib.free_ports(num_workers + num_ps)
    return {
        WORKER: [f'127.0.0.1:{p}' for p in ports[:num_workers]],
        PS: [f'127.0.0.1:{p}' for p in ports[num_workers:]],
    }


def _simple_resolver(cluster_spec: dict):
    import tensorflow as tf

    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster_spec), rpc_layer='grpc'
    )


def _start_in_process(distribution: config_lib.DistributionConfig) -> Cluster:
    import tensorflow as tf

    threads = process_pool.in_process_server_threads(
        distribution.num_workers, distribution.server_threads
    )
    spec = _cluster_spec(distribution.num_workers, distribution.num_ps)
    proto = server_config(distribution.num_workers, threads)
    servers = [
        tf.distribute.Server(
            tf.train.ClusterSpec(spec),
            job_name=job,
            task_index=i,
            protocol='grpc',
            config=proto,
            start=True,
        )
        for job in (WORKER, PS)
        for i in range(len(spec[job]))
    ]
    process_pool.record_servers(threads)
    return Cluster(
        resolver=_simple_resolver(spec),
        num_workers=distribution.num_workers,
        num_ps=distribution.num_ps,
        _servers=servers,
    )


def _listening(address: str) -> bool:
    host, port = address.rsplit(':', 1)
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
        return True
    return False


def spawn(command: list[str], env: dict) -> subprocess.Popen:
    """Starts `command` (a `python -m` entry point of this package that calls `forked_child.die_with_parent`
    first) with `env`, its stdin closed.

    No `preexec_fn`, on purpose: without one CPython starts the child with vfork, which runs no
    `pthread_atfork` handlers, while with one it forks, and gRPC's fork handlers then run in a
    process whose other threads are inside gRPC (TensorFlow, Beam). gRPC skips them ("Other
    threads are currently calling into gRPC, skipping fork() handlers") and the child aborted
    now and then (`epoll_wait error: Bad file descriptor`, SIGABRT) before it could exec. The
    child sets its own parent-death signal instead (`forked_child.die_with_parent`), and it is
    started from a thread that lasts as long as this process, as that signal requires
    (`forked_child.start_from_lasting_thread`)."""
    env = {**env, forked_child.PARENT_PID_VARIABLE: str(os.getpid())}
    return forked_child.start_from_lasting_thread(
        lambda: subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    )


# Sets the parent-death signal, then becomes the program its arguments name (the signal survives
# exec): how a program other than this package's Python dies with its parent.
_EXEC_DYING_WITH_PARENT = (
    'import os, sys\n'
    'from asynctrain.components.shared import forked_child\n'
    'forked_child.die_with_parent()\n'
    'os.execv(sys.argv[1], sys.argv[1:])\n'
)


def spawn_program(command: list[str], env: dict) -> subprocess.Popen:
    """`spawn` for any program (`command[0]`, a path): it dies with this process too. `env`
    must let a child import this package (`child_env`)."""
    return spawn([sys.executable, '-c', _EXEC_DYING_WITH_PARENT, *command], env)


# What a fork server for the trainer's processes imports: their modules, with TensorFlow.
FORK_SERVER_MODULES = (
    'tensorflow',
    'tensorflow_transform',
    'asynctrain.components.trainer.cluster.servers',
    'asynctrain.components.trainer.cluster.recovery',
    'asynctrain.components.trainer.training.loop',
)


def fork_server_for_children() -> fork_server.ForkServer:
    """A fork server for this package's trainer processes (`FORK_SERVER_MODULES` imported with
    `child_env()`), which `start_server_process` and the coordinator's launcher fork from."""
    return fork_server.ForkServer(FORK_SERVER_MODULES, child_env())


def child_env(tf_config: dict | None = None) -> dict:
    """This process's environment for a child Python process running this package."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ('TF_CONFIG', forked_child.PARENT_PID_VARIABLE)
    }
    if tf_config is not None:
        env['TF_CONFIG'] = json.dumps(tf_config)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get('PYTHONPATH', '')) if p)
    tf_environment.configure(env)
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    return env


def start_server_process(
    cluster_spec: dict,
    task_type: str,
    task_id: int,
    server_threads: int = 0,
    port: int = 0,
    prefix: Sequence[str] = (),
    forks: fork_server.ForkServer | None = None,
) -> subprocess.Popen | fork_server.ForkedProcess:
    """Runs one worker or parameter server as `python -m asynctrain.components.trainer.cluster.servers`; it is
    killed if this process dies.

    Args:
      cluster_spec: The cluster, as every replica sees it.
      task_type: `worker` or `ps`.
      task_id: Its index.
      server_threads: The server's inter-op threads (0: `server_config`'s default).
      port: The port it binds, when not its cluster-spec address's (a proxy's; 0: that one).
      prefix: A command the server's Python runs under, which must `exec` its arguments in the
        same process (one that enters a cgroup first, as `asynctrain.testing`'s hosts do).
      forks: Fork the server from this fork server (`FORK_SERVER_MODULES` imported) instead of
        starting a new interpreter; not with `prefix`.
    """
    env = child_env({'cluster': cluster_spec, 'task': {'type': task_type, 'index': task_id}})
    argv = ['-m', 'asynctrain.components.trainer.cluster.servers']
    if server_threads:
        argv += ['--server-threads', str(server_threads)]
    if port:
        argv += ['--port', str(port)]
    if forks is not None:
        if prefix:
            raise ValueError('a forked server cannot run under a prefix command')
        return forks.start(argv, env)
    return spawn([*prefix, sys.executable, *argv], env)


def wait_for_servers(cluster_spec: dict, processes: dict, timeout_seconds: float) -> None:
    """Returns once every task's port accepts connections; raises if a process dies first."""
    deadline = time.monotonic() + timeout_seconds
    pending = {
        (job, i): address
        for job in (WORKER, PS)
        for i, address in enumerate(cluster_spec.get(job, ()))
    }
    while pending:
        for task, address in list(pending.items()):
            process = processes.get(task)
            if process is not None and process.poll() is not None:
                raise RuntimeError(
                    f'{task[0]} {task[1]} exited with code {process.returncode} '
                    'before its server started'
                )
            if _listening(address):
                del pending[task]
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f'servers not listening after {timeout_seconds}s: {sorted(pending)}')
        if pending:
            time.sleep(0.2)


def start_server_processes(
    distribution: config_lib.DistributionConfig, forks: fork_server.ForkServer | None = None
) -> tuple[dict, dict]:
    """Starts `local_processes` servers on fresh loopback ports (forked from `forks` when given)
    and waits until they listen.

    Returns:
      (cluster spec, {(task type, index): process}).
    """
    spec = _cluster_spec(distribution.num_workers, distribution.num_ps)
    processes = {}
    try:
        for job in (PS, WORKER):
            for i in range(len(spec[job])):
                processes[(job, i)] = start_server_process(
                    spec, job, i, distribution.server_threads, forks=forks
                )
        wait_for_servers(spec, processes, distribution.startup_timeout_seconds)
    except BaseException:
        stop_processes(processes)
        raise
    return spec, processes


def _start_local_processes(
    distribution: config_lib.DistributionConfig, forks: fork_server.ForkServer
) -> Cluster:
    spec, processes = start_server_processes(distribution, forks)
    return Cluster(
        resolver=_simple_resolver(spec),
        num_workers=distribution.num_workers,
        num_ps=distribution.num_ps,
        processes=processes,
    )


def attach(cluster_spec: dict) -> Cluster:
    """The cluster of servers already running at `cluster_spec`'s addresses."""
    return Cluster(
        resolver=_simple_resolver(cluster_spec),
        num_workers=len(cluster_spec.get(WORKER, ())),
        num_ps=len(cluster_spec.get(PS, ())),
    )


def _from_tf_config() -> Cluster:
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type != CHIEF:
        raise ValueError(
            f'TF_CONFIG task type: got {resolver.task_type!r}; only the chief '
            'coordinates training (workers and ps run serve_forever)'
        )
    spec = resolver.cluster_spec().as_dict()
    resolver.rpc_layer = resolver.rpc_layer or 'grpc'
    return Cluster(
        resolver=resolver, num_workers=len(spec.get(WORKER, ())), num_ps=len(spec.get(PS, ()))
    )


def stop_processes(processes: dict) -> None:
    for process in processes.values():
        if process.poll() is None:
            process.terminate()
    for process in processes.values():
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def start(
    distribution: config_lib.DistributionConfig, attach_to: dict | None = None
) -> Iterator[Cluster]:
    """The cluster for `distribution.cluster`, torn down (local processes stopped) on exit.

    In-process servers cannot be stopped (TensorFlow has no `Server.stop`); they live as long as
    the process, like the strategy that connected to them.

    Args:
      distribution: The cluster mode and size.
      attach_to: A cluster spec of servers already running (what `recovery` starts for each
        attempt): connect to it, start nothing, stop nothing.
    """
    with contextlib.ExitStack() as stack:
        if attach_to is not None:
            cluster = attach(attach_to)
        elif distribution.cluster == 'in_process':
            cluster = _start_in_process(distribution)
        elif distribution.cluster == 'local_processes':
            # The servers fork from one process that imported TensorFlow once; it ends after them.
            forks = stack.enter_context(fork_server_for_children())
            cluster = _start_local_processes(distribution, forks)
        else:
            cluster = _from_tf_config()
        try:
            yield cluster
        finally:
            stop_processes(cluster.processes)


def main(argv: list | None = None) -> int:
    """`python -m asynctrain.components.trainer.cluster.servers`: serve as the worker or ps that TF_CONFIG names."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument('--server-threads', type=int, default=0)
    parser.add_argument(
        '--port', type=int, default=0, help="the port to bind, when not TF_CONFIG's address's"
    )
    args = parser.parse_args(argv)
    task_type, task_id = task_from_tf_config()
    cluster_spec = json.loads(os.environ['TF_CONFIG'])['cluster']
    serve_forever(cluster_spec, task_type, task_id, args.server_threads, args.port)
    return 0


if __name__ == '__main__':
    forked_child.die_with_parent()
    tf_environment.configure()
    sys.exit(main())

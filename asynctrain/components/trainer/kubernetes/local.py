"""Runs a TFJob's replicas as processes on 127.0.0.1, each with the `TF_CONFIG` the operator gives it.

This is the Kubernetes run without Kubernetes: the same TFJob object `tfjob.build_tfjob` builds,
the same container command and environment, and the operator's `TF_CONFIG` (`tf_config_for`) with
each `<job>-<type>-<i>.<ns>.svc:<port>` address replaced by `127.0.0.1:<free port>`, the same
replacement for every replica. Like the operator with `cleanPodPolicy: Running`, the job ends
when the chief exits: its exit status is the job's, and the parameter servers and workers still
serving are stopped.

    result = run_local(tfjob, log_dir='/tmp/logs', timeout_s=600)

`runner(log_dir)` is a `client.TFJobRunner`, so the Trainer's executor can run the TFJob
it builds here instead of on a cluster (a rehearsal, or the end-to-end test).

A replica whose command is the `asynctrain` console script runs as `python -m asynctrain` with
the same arguments (the script's own entry point), forked from a fork server that imported the
Trainer's modules once with the replicas' environment (`fork_server`); each replica is still a
process of its own, with its own `TF_CONFIG`. Any other command is started as a new process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from kubeflow.training import models

from asynctrain.components.shared import fork_server
from asynctrain.components.shared import ports as ports_lib
from asynctrain.components.trainer.kubernetes import client
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib

_CHIEF = 'Chief'
_STOP_GRACE_S = 10.0
# What an `asynctrain train` replica imports; its command line module first (it configures
# TensorFlow's environment before TensorFlow is imported).
_REPLICA_MODULES = (
    'asynctrain.components.trainer.cli',
    'tensorflow',
    'tensorflow_transform',
    'asynctrain.cli',
    'asynctrain.components.trainer.cluster.launch',
    'asynctrain.components.trainer.training.loop',
)


@dataclasses.dataclass(frozen=True)
class ReplicaResult:
    """One replica process of a local run.

    Attributes:
      replica_type: `Chief`, `Worker` or `PS`.
      index: Index within its type.
      tf_config: The `TF_CONFIG` it was started with (empty for a single-pod job, which gets none).
      returncode: Its exit status; negative for a signal (-15 when stopped after the chief).
      log_path: File holding its stdout and stderr.
    """

    replica_type: str
    index: int
    tf_config: Mapping[str, Any]
    returncode: int
    log_path: str


@dataclasses.dataclass(frozen=True)
class LocalRunResult:
    """The outcome of `run_local`.

    Attributes:
      succeeded: The chief exited 0 and no replica failed before it.
      message: Why the run failed, naming the replica; empty on success.
      replicas: Every replica, chief first.
    """

    succeeded: bool
    message: str
    replicas: tuple[ReplicaResult, ...]


def loopback_addresses(tfjob: models.KubeflowOrgV1TFJob) -> dict[str, str]:
    """Each cluster address the operator would use, mapped to a free `127.0.0.1` port."""
    any_type = next(iter(tfjob.spec.tf_replica_specs))
    tf_config = tfjob_lib.tf_config_for(tfjob, any_type, 0)
    cluster = tf_config['cluster'] if tf_config else {}
    addresses = [address for hosts in cluster.values() for address in hosts]
    # Outside the ephemeral range: each replica process binds its port later.
    ports = ports_lib.free_ports(len(addresses)) if addresses else []
    return {address: f'127.0.0.1:{port}' for address, port in zip(addresses, ports)}


def on_loopback(tf_config: Mapping[str, Any], addresses: Mapping[str, str]) -> dict[str, Any]:
    """`tf_config` with every cluster address replaced as `addresses` says; all else unchanged."""
    return {
        **tf_config,
        'cluster': {
            rtype: [addresses[a] for a in hosts] for rtype, hosts in tf_config['cluster'].items()
        },
    }


def _command(container: Any) -> list[str]:
    """The container's command line, run with this interpreter's environment.

    The image puts `asynctrain` on PATH; here the console script installed beside this Python is
    the same entry point, so the replicas run exactly what a pod would.
    """
    argv = [*(container.command or []), *(container.args or [])]
    executable = shutil.which(argv[0], path=os.path.dirname(sys.executable)) or shutil.which(
        argv[0]
    )
    if executable is None:
        raise FileNotFoundError(
            f'{argv[0]!r}, the TFJob container command, is not installed beside {sys.executable}'
        )
    return [executable, *argv[1:]]


def _start_replica(command: list[str], env: dict, log, forks: contextlib.ExitStack, servers: dict):
    """The replica's process: forked from the fork server for `env` (started once into `forks`
    and kept in `servers`) when `command` is the `asynctrain` script, else a new process."""
    if os.path.basename(command[0]) != 'asynctrain':
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    key = tuple(sorted(fork_server.import_time_environment(env).items()))
    if key not in servers:
        server_env = {k: v for k, v in env.items() if k != 'TF_CONFIG'}
        servers[key] = forks.enter_context(fork_server.ForkServer(_REPLICA_MODULES, server_env))
    return servers[key].start(
        ['-m', 'asynctrain', *command[1:]], env, None, log.fileno(), log.fileno()
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_local(
    tfjob: models.KubeflowOrgV1TFJob,
    *,
    log_dir: str,
    timeout_s: float,
    extra_env: Mapping[str, str] | None = None,
) -> LocalRunResult:
    """Starts every replica of `tfjob` on loopback, waits for the chief, stops the rest.

    Parameter servers and workers start first (in a pod they may come up in any order; servers
    first just spares the chief's connection retries). A server replica that exits while the
    chief still runs fails the run: on a cluster its restart policy would restart it, which this
    launcher does not imitate.

    Raises:
      TimeoutError: the chief did not exit within `timeout_s`; every replica is stopped first.
    """
    os.makedirs(log_dir, exist_ok=True)
    addresses = loopback_addresses(tfjob)
    specs = tfjob.spec.tf_replica_specs
    order = sorted(specs, key=lambda t: t == _CHIEF)  # chief last
    processes: list[tuple[str, int, dict[str, Any], subprocess.Popen, str]] = []
    forks, servers = contextlib.ExitStack(), {}
    try:
        for replica_type in order:
            container = tfjob_lib.tensorflow_container(specs[replica_type].template.spec)
            command = _command(container)
            for index in range(specs[replica_type].replicas):
                operator_config = tfjob_lib.tf_config_for(tfjob, replica_type, index)
                # A single-pod job gets no TF_CONFIG from the operator, so none here either.
                tf_config = on_loopback(operator_config, addresses) if operator_config else {}
                env = {
                    **{k: v for k, v in os.environ.items() if k != 'TF_CONFIG'},
                    **{e.name: e.value for e in container.env or []},
                    **(extra_env or {}),
                    **({'TF_CONFIG': json.dumps(tf_config)} if tf_config else {}),
                }
                log_path = os.path.join(log_dir, f'{replica_type.lower()}-{index}.log')
                with open(log_path, 'wb') as log:
                    process = _start_replica(command, env, log, forks, servers)
                processes.append((replica_type, index, tf_config, process, log_path))

        chief = next(p for t, _, _, p, _ in processes if t == _CHIEF)
        message = ''
        deadline = time.monotonic() + timeout_s
        while chief.poll() is None:
            early = [
                (t, i, p.returncode)
                for t, i, _, p, _ in processes
                if t != _CHIEF and p.poll() is not None
            ]
            if early:
                t, i, code = early[0]
                message = f'{t} {i} exited with status {code} while the chief was running'
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f'the chief did not finish within {timeout_s} s; logs in {log_dir}'
                )
            time.sleep(0.2)
    finally:
        for *_, process, _ in processes:
            _stop(process)
        forks.close()

    if not message and chief.returncode != 0:
        message = f'{_CHIEF} 0 exited with status {chief.returncode}'
    replicas = tuple(
        ReplicaResult(t, i, c, p.returncode, log)
        for t, i, c, p, log in sorted(processes, key=lambda r: (r[0] != _CHIEF, r[0], r[1]))
    )
    return LocalRunResult(succeeded=not message, message=message, replicas=replicas)


# A rehearsal of the `tfjob` cluster mode on one machine, configured in the step's environment as a
# pod's would be: with this variable naming a folder, the Trainer runs its TFJob's replicas as
# local processes logging there (`runner`) instead of submitting the job to the cluster.
LOG_DIR_VARIABLE = 'ASYNCTRAIN_TFJOB_LOCAL_LOG_DIR'


def runner_from_environment(environ: Mapping[str, str]) -> client.TFJobRunner | None:
    """`runner(environ[LOG_DIR_VARIABLE])` where that variable is set, else None (the cluster)."""
    log_dir = environ.get(LOG_DIR_VARIABLE, '')
    return runner(log_dir) if log_dir else None


def runner(log_dir: str, extra_env: Mapping[str, str] | None = None) -> client.TFJobRunner:
    """A `TFJobRunner` that runs the job with `run_local` and fails as `run_tfjob` would.

    A failed run raises `TFJobFailed` naming each replica that exited with an error (a replica
    stopped after the chief, like `cleanPodPolicy: Running` removes it, is not one), its exit
    status and its log file, so the caller reports the same way for a cluster and this machine.
    """

    def run(tfjob: models.KubeflowOrgV1TFJob, timeout_s: float) -> LocalRunResult:
        result = run_local(tfjob, log_dir=log_dir, timeout_s=timeout_s, extra_env=extra_env)
        if not result.succeeded:
            name = tfjob.metadata.name
            failed = [
                {
                    'replica_type': r.replica_type.lower(),
                    'index': str(r.index),
                    'pod': f'{name}-{r.replica_type.lower()}-{r.index}',
                    'reason': 'Error',
                    'exit_code': r.returncode,
                    'message': f'log {r.log_path}',
                }
                for r in result.replicas
                if r.returncode not in (0, -signal.SIGTERM)
            ]
            raise client.TFJobFailed(name, result.message, failed)
        return result

    return run

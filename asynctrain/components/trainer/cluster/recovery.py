"""The coordinator in a child process: parameter-server failure recovery for `local_processes`
training (restart, restore, go on), and a fresh process for `in_process` training.

`ClusterCoordinator` survives a lost worker by itself (it reschedules the worker's closures on
the others). A lost parameter server is different: the variables it held are gone, `schedule`
and `join` raise `UnavailableError`, and TensorFlow's documented recovery is to bring the server
back and restart the coordinator, which reconnects, recreates the variables and restores the
last checkpoint. A process cannot reconnect its own eager context to a new cluster, so that
restart needs a process boundary; this module is it:

    this process (supervisor)              child process (coordinator)
    start ps/worker servers  ─── spec ───▶  loop.train_and_export on those servers
    watch the servers and the child         restore the latest checkpoint, train, export
    on a cluster failure: stop everything,  exit 0, or EXIT_RETRYABLE on a cluster error,
    start afresh, run a new child           or 1 on any other error

The servers and the coordinator of every attempt are forked from one fork server
(`asynctrain.components.shared.fork_server`), started with the run, which imported TensorFlow and
the trainer's modules once: an attempt costs no interpreter start and no TensorFlow import per
process (3-5 s of CPU each on a 2-core machine), and a restart none either.

A failure is retried when a server process died, the coordinator was killed by a signal, or it
exited with `EXIT_RETRYABLE`; at most `distribution.max_restarts` times, then `TrainingFailed`
names every attempt. Any other coordinator error (bad data, bad config) fails at once: retrying
would only repeat it. Each attempt restarts from the latest checkpoint, so the steps redone are at
most one checkpoint interval plus the executions in flight.

An `in_process` run (`train_in_child`) uses the same child, once and without restarts: the child
starts the in-process servers itself, so the process that called (a TFX executor that ran
Transform before) never hosts the cluster or connects its eager context to it.

`<model_run>/cluster.json` names the current attempt's processes and addresses (for operators,
and for the fault-injection tests); `<model_run>/progress.json` the last step the coordinator
recorded.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time

from asynctrain.components.shared import forked_child, tf_environment
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers as cluster_lib

# The coordinator lost the cluster; a restart can succeed. At least 128, the range the Training
# Operator's `ExitCode` restart policy retries (1-127 are permanent), so a TFJob's chief that exits
# with it restarts, as the supervisor here restarts a local one.
EXIT_RETRYABLE = 203
CLUSTER_FILE = 'cluster.json'
_REQUEST_FILE = 'coordinator_request.json'
_FAILURE_FILE = 'coordinator_failure.json'


class TrainingFailed(RuntimeError):
    """Training failed and restarting would not help, or the restarts ran out."""


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One coordinator run.

    Attributes:
      attempt: 1 for the first run.
      initial_step: The global step it restored (0 when it started fresh).
      last_step: The last global step it recorded (a lower bound of the step it reached).
      outcome: `succeeded`, or why it failed.
    """

    attempt: int
    initial_step: int
    last_step: int
    outcome: str


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f'signal {-code}'


def _describe_exit(code: int) -> str:
    return f'killed by {_signal_name(code)}' if code < 0 else f'exited with status {code}'


def _remove(path: str) -> None:
    import tensorflow as tf

    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def _start_coordinator(request_path: str, forks=None):
    """The coordinator child, forked from `forks` when given, else a new interpreter."""
    argv = ['-m', 'asynctrain.components.trainer.cluster.recovery', request_path]
    if forks is not None:
        return forks.start(argv, cluster_lib.child_env())
    return cluster_lib.spawn([sys.executable, *argv], cluster_lib.child_env())


def _request(*, trainer_config: config_lib.TrainerConfig, **paths) -> dict:
    """The coordinator child's request: `train_and_export`'s arguments as JSON."""
    return {**paths, 'trainer_config': config_lib.to_dict(trainer_config)}


def train_in_child(*, model_run_dir: str, trainer_config: config_lib.TrainerConfig, **arguments):
    """`training.loop.train_and_export` (its arguments, less the cluster: `model_run_dir`,
    `trainer_config` and the rest as `arguments`) on an `in_process` cluster hosted by a fresh child
    process (`python -m asynctrain.components.trainer.cluster.recovery REQUEST`, the coordinator child of
    `train_with_restarts`, which here starts the servers itself), once, without restarts.

    The child is fresh: no function, dataset or thread of what ran before in this process (a
    TFX executor that ran Transform, a test session) lives in the process whose eager context
    connects to the cluster, and the in-process servers, which TensorFlow cannot stop, end with
    it. Returns the `TrainingReport` the child wrote.

    Raises:
      TrainingFailed: the child failed; the message carries its error.
    """
    import tensorflow as tf

    from asynctrain.components.trainer.training import run_files

    tf.io.gfile.makedirs(model_run_dir)
    request_path = os.path.join(model_run_dir, _REQUEST_FILE)
    failure_path = os.path.join(model_run_dir, _FAILURE_FILE)
    _remove(failure_path)
    request = _request(model_run_dir=model_run_dir, trainer_config=trainer_config, **arguments)
    run_files.write_json(request_path, {**request, 'cluster_spec': None})
    child = _start_coordinator(request_path)
    try:
        code = child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if code != 0:
        reported = run_files.read_json(failure_path) or {}
        raise TrainingFailed(
            f'training in its child process (pid {child.pid}) failed: it {_describe_exit(code)}'
            + (f': {reported["details"]}' if reported.get('details') else '')
        )
    return run_files.TrainingReport.read(model_run_dir)


def _server_failure(servers: dict) -> tuple[str, bool]:
    """(Which servers have exited and how, '' if none; whether the cluster is broken: a parameter
    server gone, or every worker. A lost worker alone is not: the coordinator carries on.)"""
    dead = {task: p.returncode for task, p in servers.items() if p.poll() is not None}
    description = '; '.join(
        f'{job} {index} {_describe_exit(code)}' for (job, index), code in sorted(dead.items())
    )
    workers = [task for task in servers if task[0] == cluster_lib.WORKER]
    broken = (
        any(job == cluster_lib.PS for job, _ in dead)
        or bool(workers)
        and all(task in dead for task in workers)
    )
    return description, broken


def _watch(coordinator: subprocess.Popen, servers: dict, grace_seconds: float) -> tuple[str, bool]:
    """Waits for the coordinator to exit; returns `_server_failure` as of then. Once the cluster
    is broken the coordinator gets `grace_seconds` to exit on its own (it normally raises within
    seconds), then is killed."""
    broken_at = None
    while coordinator.poll() is None:
        description, broken = _server_failure(servers)
        if broken and broken_at is None:
            broken_at = time.monotonic()
            logging.warning('Cluster failure: %s; waiting for the coordinator to stop', description)
        if broken_at is not None and time.monotonic() - broken_at > grace_seconds:
            logging.warning(
                'The coordinator did not stop %.0f s after the cluster failure; killing it',
                grace_seconds,
            )
            coordinator.kill()
            coordinator.wait()
            break
        time.sleep(0.2)
    # The coordinator may notice a dead server before this loop does: the server's exit status
    # is collected a moment later.
    time.sleep(0.5)
    return _server_failure(servers)


def train_with_restarts(
    *, model_run_dir: str, trainer_config: config_lib.TrainerConfig, **arguments
):
    """`training.loop.train_and_export` (its arguments, less the cluster) on a `local_processes`
    cluster, restarted after cluster failures (see the module docstring). Returns the `TrainingReport` with its attempts.

    Raises:
      TrainingFailed: the coordinator failed with a non-retryable error, or the cluster kept
        failing for `distribution.max_restarts` restarts.
    """
    import tensorflow as tf

    from asynctrain.components.trainer.training import run_files

    distribution = trainer_config.distribution
    tf.io.gfile.makedirs(model_run_dir)
    request = _request(model_run_dir=model_run_dir, trainer_config=trainer_config, **arguments)
    # Every attempt's servers and coordinator fork from one process that imported TensorFlow
    # once, instead of each importing it anew (`cluster_lib.FORK_SERVER_MODULES`).
    with cluster_lib.fork_server_for_children() as forks:
        attempts = _attempts(forks, distribution, model_run_dir, request)
    report = run_files.TrainingReport.read(model_run_dir)
    report = dataclasses.replace(
        report, restarts=len(attempts) - 1, attempts=tuple(dataclasses.asdict(a) for a in attempts)
    )
    report.write(model_run_dir)
    return report


def _attempts(forks, distribution, model_run_dir: str, request: dict) -> list[Attempt]:
    """Runs attempts until one succeeds; each one's record.

    Raises:
      TrainingFailed: a failure not worth retrying, or `distribution.max_restarts` spent.
    """
    attempts: list[Attempt] = []
    max_attempts = distribution.max_restarts + 1
    for number in range(1, max_attempts + 1):
        attempt, retryable = _attempt(number, forks, distribution, model_run_dir, request)
        attempts.append(attempt)
        if attempt.outcome == 'succeeded':
            return attempts
        if not retryable:
            raise TrainingFailed(
                f'training failed (not retried: the cluster was intact): {attempt.outcome}'
            )
        if number < max_attempts:
            logging.warning(
                'Attempt %d of %d failed: %s. Restarting the cluster and the '
                'coordinator from the latest checkpoint.',
                number,
                max_attempts,
                attempt.outcome,
            )
    history = '\n'.join(
        f'  attempt {a.attempt} (from step {a.initial_step}, reached at least '
        f'{a.last_step}): {a.outcome}'
        for a in attempts
    )
    raise TrainingFailed(
        f'training failed {len(attempts)} times, the last attempt that '
        f'distribution.max_restarts = {distribution.max_restarts} allows:\n{history}'
    )


def _attempt(
    number: int, forks, distribution, model_run_dir: str, request: dict
) -> tuple[Attempt, bool]:
    """One attempt: servers and coordinator started, watched and stopped. Returns its record and
    whether its failure, if any, is worth a restart."""
    from asynctrain.components.trainer.training import run_files

    request_path = os.path.join(model_run_dir, _REQUEST_FILE)
    failure_path = os.path.join(model_run_dir, _FAILURE_FILE)
    _remove(failure_path)
    _remove(os.path.join(model_run_dir, run_files.PROGRESS_FILE))
    spec, servers = cluster_lib.start_server_processes(distribution, forks)
    coordinator = None
    try:
        run_files.write_json(request_path, {**request, 'cluster_spec': spec})
        coordinator = _start_coordinator(request_path, forks)
        run_files.write_json(
            os.path.join(model_run_dir, CLUSTER_FILE),
            {
                'attempt': number,
                'coordinator_pid': coordinator.pid,
                'tasks': {
                    job: [
                        {'address': address, 'pid': servers[(job, i)].pid}
                        for i, address in enumerate(spec[job])
                    ]
                    for job in spec
                },
            },
        )
        server_failure, cluster_failed = _watch(
            coordinator, servers, distribution.failure_grace_seconds
        )
    finally:
        if coordinator is not None and coordinator.poll() is None:
            coordinator.kill()
            coordinator.wait()
        cluster_lib.stop_processes(servers)
    code = coordinator.returncode
    progress = run_files.read_progress(model_run_dir) or {}
    reported = run_files.read_json(failure_path) or {}
    if code == 0:
        outcome = 'succeeded'
    else:
        reasons = [server_failure] if server_failure else []
        reasons.append(
            f'coordinator {_describe_exit(code)}'
            + (f': {reported["error"]}' if reported.get('error') else '')
        )
        outcome = '; '.join(reasons)
    attempt = Attempt(number, progress.get('initial_step', 0), progress.get('step', 0), outcome)
    return attempt, cluster_failed or code < 0 or code == EXIT_RETRYABLE


def is_retryable(error: BaseException) -> bool:
    """Errors a restarted cluster can cure: the remote runtime lost a task."""
    import tensorflow as tf

    return isinstance(
        error,
        (
            tf.errors.UnavailableError,
            tf.errors.AbortedError,
            tf.errors.CancelledError,
            tf.errors.DeadlineExceededError,
        ),
    )


def _gist(message: str) -> str:
    """One line of an error message: TensorFlow's start with a generic line ('Graph execution
    error:'), so prefer the first line naming a remote task, then the first that says more than
    a heading."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if '/job:' in line:
            return line[:300]
    for line in lines:
        if not line.endswith(':'):
            return line[:300]
    return lines[0][:300] if lines else ''


def coordinator_main(request_path: str) -> int:
    """The child: one attempt of `train_and_export` on the servers the request names, or, when
    it names none (`cluster_spec` null), on an `in_process` cluster it starts itself."""
    from asynctrain.components.trainer.training import loop, run_files

    request = run_files.read_json(request_path)
    model_run_dir = request['model_run_dir']
    try:
        trainer_config = config_lib.from_dict(request['trainer_config'])
        with cluster_lib.start(
            trainer_config.distribution, attach_to=request['cluster_spec']
        ) as cluster:
            arguments = {
                k: v for k, v in request.items() if k not in ('cluster_spec', 'trainer_config')
            }
            loop.train_and_export(cluster, trainer_config=trainer_config, **arguments)
    except Exception as e:  # noqa: BLE001 - reported to the supervisor, which decides.
        logging.exception('Coordinator failed')
        run_files.write_json(
            os.path.join(model_run_dir, _FAILURE_FILE),
            {'error': f'{type(e).__name__}: {_gist(str(e))}', 'details': str(e)[:20000]},
        )
        return EXIT_RETRYABLE if is_retryable(e) else 1
    return 0


if __name__ == '__main__':
    forked_child.die_with_parent()
    tf_environment.configure()
    logging.basicConfig(level=logging.INFO)
    code = coordinator_main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    # ClusterCoordinator's threads may still be retrying a lost task; do not wait for them.
    os._exit(code)

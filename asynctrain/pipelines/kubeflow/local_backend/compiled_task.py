"""Runs the tasks of `asynctrain run --compiled`: each container command (`python -m MODULE ARG...`
as `__main__`, `python -c CODE ...` or a program) in a process of its own, forked from one that
imported the task modules once.

TFX's Kubeflow V2 entrypoint imports every TFX component, kfp's client and TensorFlow before it
runs anything: 15-20 s of CPU per task on a 2-core machine, most of a small pipeline's time. A
server process (`--serve`) pays that once; for each task it forks a child that sets the task's
environment, sends its output to the task's log and runs the module with the task's arguments,
as `python -m` would. The server is a process of its own, started before any task runs, so that
no child inherits a running TensorFlow runtime or gRPC server (forking one would be unsafe).

With `tfjob_local`, each task's environment names a folder in the variable
`asynctrain.components.trainer.kubernetes.local.LOG_DIR_VARIABLE`, as a pod's environment
configures its step: the Trainer's `tfjob` cluster mode then runs its TFJob's replicas as local
processes logging there, each with the `TF_CONFIG` the Training Operator would give it, instead
of submitting the job to a cluster.

Each task runs in a pod of its own, as on a cluster: before its command, the child enters a new
mount namespace in which `/gcs`, `/s3`, `/minio`, `/tmp/kfp_outputs` and `/tmp/kfp` are the
task's own folders (`enter_pod`), empty but for what the launcher downloaded into them
(`kfp_launcher`). Nothing a task writes there reaches the next task unless the launcher uploads
it, and tasks of runs side by side never see each other's files. That needs root (or
CAP_SYS_ADMIN); without it a task is refused, never run on shared paths.

`--run REQUEST` runs one task the same way in this process, for `--fresh-processes`. Either way
the task's exit status is what its code returned: the process ends with `os._exit`, so a
library's crash while the interpreter shuts down (tensorflow-io's S3 file system aborts with
"pure virtual method called") cannot change it.

Protocol: one JSON request per line on stdin (`argv`, `env`, `log_path`, `pod_root`), one JSON reply per line on stdout (`returncode`). `TaskProcesses` is the runner's
side of it.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import importlib
import json
import os
import subprocess
import sys

from asynctrain.components.shared import forked_child
from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_launcher

# <sched.h> and <sys/mount.h>.
CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
# The exit status of a task that could not be given a pod of its own.
NO_POD = 125


class PodUnavailable(OSError):
    """This process cannot give a task its own mount namespace."""


# Looked up once, before any fork: a forked child then calls them without the dynamic loader.
_LIBC = ctypes.CDLL(None, use_errno=True)
_CALLS = {'unshare': _LIBC.unshare, 'mount': _LIBC.mount}


def _libc_call(name: str, *args) -> None:
    if _CALLS[name](*args) != 0:
        code = ctypes.get_errno()
        hint = ' (needs root or CAP_SYS_ADMIN)' if code in (errno.EPERM, errno.EACCES) else ''
        raise PodUnavailable(
            code,
            f'{name}{" " + args[1].decode() if name == "mount" else ""}: {os.strerror(code)}'
            f'{hint}; each task needs its own /gcs, /s3, /minio and /tmp/kfp_outputs, as a pod '
            'has',
        )


def enter_pod(pod_root: str) -> None:
    """Enters a new mount namespace in which each of `kfp_launcher.POD_PATHS` shows the same
    path under `pod_root` (created here when missing, the mount points too).

    Raises:
      PodUnavailable: the namespace or a mount could not be made (not root).
    """
    _libc_call('unshare', CLONE_NEWNS)
    # Private: mounts made here stay in this namespace, and the host's later ones stay out.
    _libc_call('mount', b'none', b'/', None, MS_REC | MS_PRIVATE, None)
    for path in kfp_launcher.POD_PATHS:
        source = pod_root + path
        os.makedirs(source, exist_ok=True)
        os.makedirs(path, exist_ok=True)
        _libc_call('mount', source.encode(), path.encode(), None, MS_BIND | MS_REC, None)


def check_pods() -> None:
    """Refuses before any task runs when this process cannot make a task's mount namespace
    (tried in a child that exits at once).

    Raises:
      PodUnavailable: the reason, in the words a task's log would have.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            _libc_call('unshare', CLONE_NEWNS)
            _libc_call('mount', b'none', b'/', None, MS_REC | MS_PRIVATE, None)
            os._exit(0)
        except PodUnavailable as e:
            os.write(write_end, str(e.strerror).encode())
        os._exit(1)
    os.close(write_end)
    with os.fdopen(read_end, 'rb') as f:
        reason = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise PodUnavailable(errno.EPERM, reason or 'the mount namespace could not be made')


def _run_argv(argv: list[str]) -> None:
    """The container command, the interpreter left out: `-m MODULE ...` runs in this process, as
    `python -m` would run it; `-c CODE ...` replaces this process with the interpreter, any other
    command with that program (the pod's mount namespace stays theirs)."""
    if argv[:1] == ['-m']:
        forked_child.run_module_argv(argv)
    elif argv[:1] == ['-c']:
        os.execv(sys.executable, [sys.executable, *argv])
    else:
        os.execv(argv[0], argv)


def _child(request: dict) -> None:
    """In the task's process: its pod, environment and log, then its command. Never returns."""
    forked_child.exit_with_status(lambda: _run_task(request))


def _run_task(request: dict) -> None:
    fd = os.open(request['log_path'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, 'w', buffering=1)
    sys.stderr = os.fdopen(2, 'w', buffering=1)
    try:
        enter_pod(request['pod_root'])
    except PodUnavailable as e:
        print(f'asynctrain: this task cannot run in a pod of its own: {e.strerror}')
        raise SystemExit(NO_POD) from e
    os.environ.clear()
    os.environ.update(request['env'])
    # The task's failure goes to its log, for the runner to show.
    _run_argv(request['argv'])


def serve(modules: list[str]) -> None:
    """Imports `modules`, then forks a child per request until stdin closes."""
    for module in modules:
        importlib.import_module(module)
    replies = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({'returncode': os.waitstatus_to_exitcode(status)}) + '\n')
        replies.flush()


def modules(pipeline: compiled_pipeline.PipelineSpec) -> list[str]:
    """The modules the pipeline's containers run with `python -m`, and those of the executor
    classes they name (`--executor_class_path`), in a stable order."""
    modules = set()
    for executor in compiled_pipeline.executors(pipeline).values():
        command, args = list(executor.container.command), list(executor.container.args)
        if command[:2] in (['python', '-m'], ['python3', '-m']) and len(command) > 2:
            modules.add(command[2])
        for flag, value in zip(args, args[1:]):
            if flag == '--executor_class_path':
                modules.add(value.rsplit('.', 1)[0])
    return sorted(modules)


class TaskProcesses:
    """Runs task commands: `python -m MODULE ...` forked from a server that imported the modules
    once (`asynctrain.pipelines.kubeflow.local_backend.compiled_task`), or, `fresh`, every command as a new process."""

    def __init__(self, modules: list[str], log_dir: str, tfjob_local: bool, fresh: bool):
        self._tfjob_env = {}
        if tfjob_local:
            from asynctrain.components.trainer.kubernetes import local as tfjob_local_runner

            self._tfjob_env = {tfjob_local_runner.LOG_DIR_VARIABLE: os.path.join(log_dir, 'tfjob')}
        self._server = None
        self._fresh = fresh
        if not fresh:
            preload = [arg for module in modules for arg in ('--preload', module)]
            self._server_log = open(os.path.join(log_dir, 'task-server.log'), 'w')  # noqa: SIM115
            self._server = subprocess.Popen(
                [
                    sys.executable,
                    '-m',
                    'asynctrain.pipelines.kubeflow.local_backend.compiled_task',
                    '--serve',
                    *preload,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._server_log,
                text=True,
            )

    def run(self, argv: list[str], env: dict[str, str], log_path: str, pod_root: str) -> int:
        """The command's exit status; its stdout and stderr go to `log_path`; it sees the pod
        paths under `pod_root` (`compiled_task.enter_pod`)."""
        request = {
            # The interpreter is the task process itself; any other program replaces it.
            'argv': argv[1:] if argv[0] == sys.executable else argv,
            'env': {**env, **self._tfjob_env},
            'log_path': os.path.abspath(log_path),
            'pod_root': pod_root,
        }
        if self._fresh or argv[1:2] != ['-m']:
            with open(log_path, 'w', encoding='utf-8') as log:
                return subprocess.call(
                    [
                        sys.executable,
                        '-m',
                        'asynctrain.pipelines.kubeflow.local_backend.compiled_task',
                        '--run',
                        json.dumps(request),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
        self._server.stdin.write(json.dumps(request) + '\n')
        self._server.stdin.flush()
        reply = self._server.stdout.readline()
        if not reply:
            raise RuntimeError(f'the task server exited; see {self._server_log.name}')
        return json.loads(reply)['returncode']

    def close(self) -> None:
        if self._server is not None:
            self._server.stdin.close()
            self._server.wait()
            self._server_log.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog='python -m asynctrain.pipelines.kubeflow.local_backend.compiled_task'
    )
    parser.add_argument('--serve', action='store_true', help='read task requests from stdin')
    parser.add_argument('--preload', action='append', default=[], help='module to import first')
    parser.add_argument('--run', metavar='REQUEST_JSON', help='run this one request here')
    args = parser.parse_args(argv)
    if args.run:
        _child(json.loads(args.run))
    if not args.serve:
        parser.error('--serve or --run is required')
    serve(args.preload)


if __name__ == '__main__':
    main(sys.argv[1:])

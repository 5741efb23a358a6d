"""Starts the suite's child Python processes (`python -m MODULE ARG...`) by forking them from a
server that imported TensorFlow, TFX and this package once, instead of a new interpreter each.

Each `python -m asynctrain run ...` a test starts, and each body of a `fresh_process` test, paid
the imports again: 6-7 s of CPU for TensorFlow, TFX and Beam on these 2-core machines, about a
quarter of a small pipeline run. A child forked from the server starts with those modules loaded
and nothing run: no TensorFlow context, server or thread pool exists in the server (it imports and
waits), so the child holds no state a fresh interpreter would not, and it is a process of its own
as before (its own pid, environment, working directory and standard streams).

    pytest worker (`run`)                      server (python -m tests.fork_server)
    env, cwd, argv; fds 0, 1, 2 ──────────────▶ import the preloaded modules once; per request:
                                               fork ─▶ child: take the fds, env and cwd,
                                                       run MODULE as __main__, exit with its code
    pid, then the exit status ◀─────────────── wait for the child

The request travels on a Unix socket with the caller's standard streams attached (SCM_RIGHTS), so
the child writes where a `subprocess` child of the caller would: into pytest's capture, or into
the files `run` collects its output in. A server dies with the process that started it, and each
child with its server (the parent-death signal, `servers.die_with_parent`). Modules whose import
reads the environment (TensorFlow reads `TF_*` variables, Python `PYTHON*`) see the server's
environment, so a request whose such variables differ gets a server of its own.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from asynctrain.components.shared import forked_child
from asynctrain.components.trainer.cluster import servers
from tests.repository import REPO_ROOT

# What the suite's children import: `python -m asynctrain` (the command line and the local runner
# with TFX and Beam) and `python -m tests.fresh_process` (TensorFlow and the trainer's modules).
PRELOAD = (
    'tensorflow',
    'asynctrain.cli.run_command',
    'asynctrain.pipelines.local_runner',
    'asynctrain.components.trainer.training.loop',
    'tests.fresh_process',
)
# Environment variables read while those modules import: a server serves only requests that
# agree with the environment it was started with on these.
_IMPORT_TIME_PREFIXES = ('TF_', 'PYTHON', 'KERAS')
_MAX_MESSAGE = 1 << 20


def _import_time_environment(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(_IMPORT_TIME_PREFIXES)))


@dataclasses.dataclass
class _Server:
    process: subprocess.Popen
    socket: socket.socket
    log_path: str


_servers: dict[tuple[tuple[str, str], ...], _Server] = {}
_lock = threading.Lock()


def _start(env: dict[str, str]) -> _Server:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    command = [sys.executable, '-m', 'tests.fork_server', str(theirs.fileno()), *PRELOAD]
    # The checkout first on the server's import path (this module is `tests.fork_server`); its
    # children get the request's environment as given. As `servers.spawn`: no `preexec_fn` (no
    # fork handlers run in this threaded process), and the server dies with this process.
    python_path = os.pathsep.join(p for p in (str(REPO_ROOT), env.get('PYTHONPATH')) if p)
    env = {**env, 'PYTHONPATH': python_path, servers.PARENT_PID_VARIABLE: str(os.getpid())}
    # Its own output (an import's warning, a traceback) to a log, not into a test's capture.
    with tempfile.NamedTemporaryFile(
        'w', prefix='fork-server-', suffix='.log', delete=False
    ) as log:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(theirs.fileno(),),
            cwd=os.getcwd(),
        )
    theirs.close()
    return _Server(process, ours, log.name)


def _close(key) -> None:
    server = _servers.pop(key, None)
    if server is not None:
        server.socket.close()  # the server's loop ends at end of file
        try:
            server.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@atexit.register
def close_all() -> None:
    """Stops every server this process started."""
    for key in list(_servers):
        _close(key)


def run(
    argv: list[str],
    env: dict[str, str],
    cwd: str | os.PathLike | None = None,
    timeout: float | None = None,
    stdout: int = 1,
    stderr: int = 2,
) -> int:
    """`python ARGV` (`-m MODULE ARG...`) as a child with `env`, in `cwd` (this process's by
    default), writing to the file descriptors `stdout` and `stderr` of this process; its stdin is
    empty. Returns its exit status as `subprocess` does (negative: killed by that signal).

    Raises:
      subprocess.TimeoutExpired: still running after `timeout` seconds (it was killed).
    """
    if argv[:1] != ['-m'] or len(argv) < 2:
        raise ValueError(f'expected -m MODULE ARG..., got {argv[:3]}')
    key = _import_time_environment(env)
    request = json.dumps({'argv': argv, 'env': env, 'cwd': os.fspath(cwd or os.getcwd())})
    with _lock, open(os.devnull, 'rb') as stdin:
        server = _servers.get(key)
        if server is None or server.process.poll() is not None:
            _close(key)
            server = _servers[key] = _start(env)
        try:
            socket.send_fds(server.socket, [request.encode()], [stdin.fileno(), stdout, stderr])
            started = server.socket.recv(_MAX_MESSAGE)
            if not started:
                raise RuntimeError(f'the fork server exited; see {server.log_path}')
            pid = json.loads(started)['pid']
            server.socket.settimeout(timeout)
            try:
                reply = server.socket.recv(_MAX_MESSAGE)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(argv, timeout) from None
            finally:
                server.socket.settimeout(None)
            if not reply:
                raise RuntimeError(
                    f'the fork server exited while its child ran; see {server.log_path}'
                )
            return json.loads(reply)['returncode']
        except BaseException:
            # Interrupted (a timeout, pytest-timeout's signal, the server gone): the server may
            # still owe a reply, so it serves no one else.
            _close(key)
            raise


def run_captured(
    argv: list[str],
    env: dict[str, str],
    cwd: str | os.PathLike | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """`run`, its output collected as `subprocess.run(..., capture_output=True, text=True)`
    collects it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        returncode = run(argv, env, cwd, timeout, out.fileno(), err.fileno())
        texts = []
        for file in (out, err):
            file.seek(0)
            texts.append(file.read().decode(errors='replace'))
    return subprocess.CompletedProcess([sys.executable, *argv], returncode, *texts)


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: the caller's streams, environment and directory, then the module as
    `__main__`. Never returns."""
    forked_child.exit_with_status(lambda: _run_request(request, fds))


def _run_request(request: dict, fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request['env'])
    os.environ[servers.PARENT_PID_VARIABLE] = str(os.getppid())
    servers.die_with_parent()
    os.chdir(request['cwd'])
    sys.path[0] = request['cwd']  # as `python -m` sets it
    forked_child.run_module_argv(request['argv'])


def serve(channel: socket.socket, modules: list[str]) -> None:
    """Imports `modules`, then forks a child per request until the channel closes."""
    for module in modules:
        importlib.import_module(module)
    while True:
        message, fds, _, _ = socket.recv_fds(channel, _MAX_MESSAGE, 3)
        if not message:
            return
        pid = os.fork()
        if pid == 0:
            channel.close()
            _child(json.loads(message), fds)
        for fd in fds:
            os.close(fd)
        try:
            channel.send(json.dumps({'pid': pid}).encode())
            _, status = os.waitpid(pid, 0)
            channel.send(json.dumps({'returncode': os.waitstatus_to_exitcode(status)}).encode())
        except OSError:  # the caller gave up on this child (`run`): nothing more to serve
            return


if __name__ == '__main__':
    servers.die_with_parent()
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])

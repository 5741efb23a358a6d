"""Child Python processes (`python -m MODULE ARG...`) forked from a server that imported their
modules once, handled as `subprocess.Popen` children are.

A fresh interpreter that imports TensorFlow pays 3-5 s of CPU on these 2-core machines before it
runs a line of its own; a `local_processes` training attempt starts one per parameter server and
worker and one for its coordinator, and starts them all again on each restart. A `ForkServer`
pays it once: a process of its own (`python -m asynctrain.components.shared.fork_server`), which
imports the modules it is given and then, for each request, forks a child that takes the
request's environment, working directory and standard streams and runs the module as `python -m`
would. The server imports and waits: no TensorFlow context, gRPC server or thread exists in it,
so its children start from the state a fresh interpreter has after those imports. Forking the
calling process instead would be unsafe: its other threads may be inside gRPC or TensorFlow.

    caller (`ForkServer.start`)                  server
    argv, env, cwd; fds 0, 1, 2 and a socket ──▶  fork ─▶ child: the fds, env and cwd, then
                                                          `-m MODULE` as __main__
    `ForkedProcess`: pid, pidfd ◀──────────────── on the child's socket
    poll / wait ◀───────────────────────────────  its exit status, once it has ended
    closes the child's socket (or dies) ───────▶  the child is killed (SIGKILL)
    closes the server (or dies) ───────────────▶  the server ends; its children get SIGKILL

Each child's parent-death signal is the server (a single thread: the signal cannot fire while
the server lives), and the server ends when the caller's end of its socket closes, which the
kernel does when the caller dies, however it dies: no child outlives the caller. Signals to a
child go through its pidfd (`pidfd_send_signal`), never a pid that may have been reused.
Modules whose import reads the environment (TensorFlow reads `TF_*` variables, Python `PYTHON*`)
see the server's environment: `start` refuses a request whose such variables differ.
"""

from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

from asynctrain.components.shared import forked_child

_IMPORT_TIME_PREFIXES = ('TF_', 'PYTHON', 'KERAS')
_MAX_MESSAGE = 1 << 20
# Variables a child's environment may differ in from the server's: read after the imports.
_NOT_READ_AT_IMPORT = ('TF_CONFIG',)


def import_time_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` that modules read as they are imported."""
    return {
        k: v
        for k, v in env.items()
        if k.startswith(_IMPORT_TIME_PREFIXES) and k not in _NOT_READ_AT_IMPORT
    }


def module_argv(argv: Sequence[str]) -> list[str]:
    """`argv` as a list, checked to be `-m MODULE ARG...`.

    Raises:
      ValueError: it is not.
    """
    argv = list(argv)
    if argv[:1] != ['-m'] or len(argv) < 2:
        raise ValueError(f'expected -m MODULE ARG..., got {argv[:3]}')
    return argv


class ForkedProcess:
    """A child of a `ForkServer`, with `subprocess.Popen`'s `pid`, `args`, `returncode`, `poll`,
    `wait`, `send_signal`, `terminate` and `kill`. It dies with this handle: when the handle's
    socket closes (`close`, collection, this process's death), the server kills the child."""

    def __init__(self, args: list[str], connection: socket.socket):
        self.args = args
        self.returncode: int | None = None
        self._connection = connection
        self._pidfd: int | None = None
        message, fds, _, _ = socket.recv_fds(connection, _MAX_MESSAGE, 1)
        if not message:
            connection.close()
            raise ChildProcessError(f'the fork server exited before it started {args[:2]}')
        self.pid: int = json.loads(message)['pid']
        self._pidfd = fds[0]

    def poll(self) -> int | None:
        """The exit status (negative: killed by that signal), or None while it runs."""
        if self.returncode is None:
            self._connection.setblocking(False)
            try:
                message = self._connection.recv(_MAX_MESSAGE)
            except BlockingIOError:
                return None
            self._ended(message)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, once it has ended.

        Raises:
          subprocess.TimeoutExpired: still running after `timeout` seconds.
        """
        if self.returncode is None:
            self._connection.settimeout(timeout)
            try:
                message = self._connection.recv(_MAX_MESSAGE)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            self._ended(message)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, signum)
            except ProcessLookupError:  # Ended since the poll; its status follows.
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Lets go of the child: the server kills it if it still runs."""
        self._connection.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _ended(self, message: bytes) -> None:
        # No message: the server is gone, and the child with it (its parent-death signal).
        self.returncode = json.loads(message)['returncode'] if message else -signal.SIGKILL
        self.close()

    def __del__(self) -> None:
        if self._pidfd is not None:
            self.close()


class ForkServer:
    """A server that imported `preload` with `env` and forks children on request (`start`);
    stopped by `close` or on leaving its `with` block, and with this process.

    Args:
      preload: Modules the server imports before its first fork.
      env: The server's environment, which the modules' imports read.
      log: Where the server's own output goes (an import's warning): a file object, or None for
        this process's standard streams.
      cwd: The server's working directory, first on its import path (`python -m`'s rule).
    """

    def __init__(
        self,
        preload: Sequence[str],
        env: Mapping[str, str],
        log=None,
        cwd: str | os.PathLike | None = None,
    ):
        self._import_env = import_time_environment(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, '-m', __name__, str(theirs.fileno()), *preload]
        self._process = subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(theirs.fileno(),),
            cwd=cwd,
        )
        theirs.close()
        self._socket = ours

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str | os.PathLike | None = None,
        stdout: int = 1,
        stderr: int = 2,
    ) -> ForkedProcess:
        """`python ARGV` (`-m MODULE ARG...`) as a child with `env`, in `cwd` (this process's by
        default), writing to this process's file descriptors `stdout` and `stderr`; its stdin is
        empty.

        Raises:
          ValueError: `argv` is not `-m MODULE ...`, or `env` differs from the server's in a
            variable read at import.
          ChildProcessError: the server has exited.
        """
        argv = module_argv(argv)
        differing = sorted(
            set(self._import_env.items()) ^ set(import_time_environment(env).items())
        )
        if differing:
            raise ValueError(
                'the fork server imported its modules with another environment: '
                f'{sorted({k for k, _ in differing})} differ'
            )
        request = json.dumps({'argv': argv, 'env': dict(env), 'cwd': os.fspath(cwd or os.getcwd())})
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(os.devnull, 'rb') as stdin:
                socket.send_fds(
                    self._socket,
                    [request.encode()],
                    [stdin.fileno(), stdout, stderr, theirs.fileno()],
                )
        except ConnectionError as error:
            ours.close()
            raise ChildProcessError(f'the fork server has exited: {error}') from error
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return ForkedProcess([sys.executable, *argv], ours)

    def running(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        """Stops the server; children still running are killed with it."""
        self._socket.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Children:
    """The server's side: each child's pid, pidfd and socket."""

    def __init__(self, control: socket.socket):
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ, ('request', 0))
        self.sockets: dict[int, socket.socket] = {}
        self.pidfds: dict[int, int] = {}

    def fork(self, request: dict, fds: list[int]) -> None:
        stdio, connection = fds[:3], socket.socket(fileno=fds[3])
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            # First: a server that ended between the fork and this call is seen to have.
            os.environ[forked_child.PARENT_PID_VARIABLE] = str(server)
            forked_child.die_with_parent()
            self._in_child(connection)
            forked_child.exit_with_status(lambda: _run_request(request, stdio, server))
        for fd in stdio:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(connection, [json.dumps({'pid': pid}).encode()], [pidfd])
        except OSError:  # The caller is gone already.
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        self.sockets[pid], self.pidfds[pid] = connection, pidfd
        self.selector.register(pidfd, selectors.EVENT_READ, ('exit', pid))
        self.selector.register(connection, selectors.EVENT_READ, ('released', pid))

    def _in_child(self, own: socket.socket) -> None:
        self.selector.close()
        for fd in (self.control, own, *self.sockets.values()):
            fd.close()
        for pidfd in self.pidfds.values():
            os.close(pidfd)

    def reap(self, pid: int) -> None:
        _, status = os.waitpid(pid, 0)
        pidfd, connection = self.pidfds.pop(pid), self.sockets.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if connection.fileno() in self.selector.get_map():
            self.selector.unregister(connection)
        try:
            connection.send(json.dumps({'returncode': os.waitstatus_to_exitcode(status)}).encode())
        except OSError:  # The caller let go of it.
            pass
        connection.close()

    def release(self, pid: int) -> None:
        """The caller closed the child's socket: the child is killed (reaped on its exit)."""
        if pid not in self.sockets:
            return  # Reaped already: its exit came in the same batch of events, first.
        self.selector.unregister(self.sockets[pid])
        try:
            signal.pidfd_send_signal(self.pidfds[pid], signal.SIGKILL)
        except ProcessLookupError:
            pass


def _run_request(request: dict, stdio: list[int], server: int) -> None:
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request['env'])
    # For the module, which may call `die_with_parent` itself (the trainer's do).
    os.environ[forked_child.PARENT_PID_VARIABLE] = str(server)
    os.chdir(request['cwd'])
    sys.path[0] = request['cwd']  # as `python -m` sets it
    forked_child.run_module_argv(request['argv'])


def serve(control: socket.socket, modules: Sequence[str]) -> None:
    """Imports `modules`, then forks a child per request until the caller's end closes."""
    for module in modules:
        importlib.import_module(module)
    children = _Children(control)
    while True:
        for key, _ in children.selector.select():
            kind, pid = key.data
            if kind == 'exit':
                children.reap(pid)
            elif kind == 'released':
                children.release(pid)
            else:
                message, fds, _, _ = socket.recv_fds(control, _MAX_MESSAGE, 4)
                if not message:
                    return  # Children still running get SIGKILL as this process exits.
                children.fork(json.loads(message), fds)


if __name__ == '__main__':
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])
    # Without the interpreter's teardown of what the imports loaded.
    os._exit(0)

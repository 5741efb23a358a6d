"""Starts the suite's child Python processes (`python -m MODULE ARG...`) by forking them from a
server that imported TensorFlow, TFX and this package once, instead of a new interpreter each.

Each `python -m asynctrain run ...` a test starts, and each body of a `fresh_process` test, paid
the imports again: 6-7 s of CPU for TensorFlow, TFX and Beam on these 2-core machines, about a
quarter of a small pipeline run. A child forked from the server starts with those modules loaded
and nothing run: no TensorFlow context, server or thread pool exists in the server (it imports and
waits), so the child holds no state a fresh interpreter would not, and it is a process of its own
as before (its own pid, environment, working directory and standard streams).

The server is the package's own (`asynctrain.components.shared.fork_server`, which the Trainer
forks its cluster's processes from), started once per environment read at import (TensorFlow
reads `TF_*` variables, Python `PYTHON*`): a request whose such variables differ gets a server of
its own. The child writes where a `subprocess` child of the caller would: into pytest's capture,
or into the files `run_captured` collects its output in. A server ends with the process that
started it, and its children with it.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import threading

from asynctrain.components.shared import fork_server
from tests.repository import REPO_ROOT

# What the suite's children import: `python -m asynctrain` (the command line and the local runner
# with TFX and Beam) and `python -m tests.fresh_process` (TensorFlow and the trainer's modules).
PRELOAD = (
    # First: TFX imports IPython, which puts `IPython/extensions` on the import path, and the
    # regular `tests` package there would then win over this checkout's namespace package.
    'tests',
    'tensorflow',
    'asynctrain.cli.run_command',
    'asynctrain.pipelines.local_runner',
    'asynctrain.components.trainer.training.loop',
    'tests.fresh_process',
)

_servers: dict[tuple[tuple[str, str], ...], fork_server.ForkServer] = {}
_lock = threading.Lock()


def _server(env: dict[str, str]) -> fork_server.ForkServer:
    key = tuple(sorted(fork_server.import_time_environment(env).items()))
    with _lock:
        server = _servers.get(key)
        if server is None or not server.running():
            # Its own output (an import's warning, a traceback) to a log, not into a test's
            # capture; started in the checkout, so that `tests` imports (`python -m` puts the
            # working directory first on the path).
            with tempfile.NamedTemporaryFile(
                'w', prefix='fork-server-', suffix='.log', delete=False
            ) as log:
                server = _servers[key] = fork_server.ForkServer(PRELOAD, env, log, cwd=REPO_ROOT)
        return server


@atexit.register
def close_all() -> None:
    """Stops every server this process started."""
    with _lock:
        while _servers:
            _servers.popitem()[1].close()


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
    argv = fork_server.module_argv(argv)
    child = _server(env).start(argv, env, cwd, stdout, stderr)
    try:
        return child.wait(timeout)
    except BaseException:  # A timeout, or pytest-timeout's signal: the child goes too.
        child.kill()
        child.wait()
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

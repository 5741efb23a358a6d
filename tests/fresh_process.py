"""Calls a test's function in a fresh Python process and raises its failure here.

TensorFlow keeps process-wide state that nothing can undo: the eager context, once connected to a
cluster (`ParameterServerStrategy`, `tf.config.experimental_connect_to_cluster`), stays connected
to it after its servers are gone, and the process's first server sizes the pool of threads every
later server of the process runs on (`ComputePool`, tensorflow/core/common_runtime/process_util.cc).
A test that starts servers in a pytest worker leaves that state to every later test of the worker;
the suite hung and failed that way, depending on which tests a worker had run before. A test whose
body runs here starts from a process that has run nothing else: it is forked from the suite's
server (`tests.fork_server`), which imported TensorFlow and this package and ran nothing.

    parent (pytest worker)                     child (-m tests.fresh_process, forked)
    set up the test's fixtures                 import the test's module (asserts rewritten as
    pickle (function, fixture values) ──────▶  pytest does), call the function with the values
    wait; raise the child's failure  ◀──────  pickle the outcome: passed, skipped or the traceback
    tear the fixtures down

Only what pickles crosses: a fixture value must be data (paths, dataclasses, configs), not a live
object (`monkeypatch`, `caplog`); `call` names the fixture that does not. The output captures have
a child-side twin: `capfd` and `capsys` become a capture of the child's file descriptors 1 and 2
(for `capsys`, a superset: it holds what native code wrote too), with the same `readouterr()`,
whose output is passed on to the parent's. The child gets the parent's environment and standard
streams, so its output lands in what pytest captures for the test. It dies with its server, the
server with the parent (the cluster launcher's parent-death signal), and a child still running
after `timeout` seconds prints every thread's stack and exits.
"""

from __future__ import annotations

import ast
import dataclasses
import faulthandler
import importlib.util
import os
import pickle
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import pytest
from _pytest.assertion.rewrite import rewrite_asserts
from _pytest.capture import CaptureFixture, FDCapture, SysCapture

from asynctrain.components.shared import forked_child
from tests import fork_server
from tests.repository import child_environment

# The outcome the child writes before it calls the function: still there when the child exits
# with faulthandler's status 1, it timed out; with any other status, it died.
_TIMED_OUT = 'timed out'


class FreshProcessError(AssertionError):
    """The function failed in its fresh process; the message is the child's own traceback."""


class FreshProcessSkip(Exception):
    """The function called `pytest.skip` in its fresh process; the message is the reason."""


class CapturedOutput(NamedTuple):
    """What `readouterr()` returns, as pytest's `CaptureResult`."""

    out: str
    err: str


class _CaptureInChild:
    """Stands for `capfd` or `capsys` in the request; the child makes an `_FdCapture` of it."""


class _FdCapture:
    """`capfd` in the child: what file descriptors 1 and 2 received since the last `readouterr()`.
    Each read is written on to the descriptors the child inherited, so the parent's capture (and
    so pytest's report of a failure) still holds all of the child's output."""

    def __init__(self) -> None:
        self._streams = {}
        for fd in (1, 2):
            inherited = os.dup(fd)
            spool = tempfile.TemporaryFile(buffering=0)
            os.dup2(spool.fileno(), fd)  # shares the spool's offset: a rewind rewinds both
            self._streams[fd] = (inherited, spool)

    def readouterr(self) -> CapturedOutput:
        sys.stdout.flush()
        sys.stderr.flush()
        texts = []
        for inherited, spool in self._streams.values():
            spool.seek(0)
            data = spool.read()
            spool.seek(0)
            spool.truncate()
            os.write(inherited, data)
            texts.append(data.decode(errors='replace'))
        return CapturedOutput(*texts)


def _is_output_capture(value: Any) -> bool:
    """Whether `value` is pytest's `capfd` or `capsys` (text captures of the output)."""
    return isinstance(value, CaptureFixture) and value.captureclass in (FDCapture, SysCapture)


@dataclasses.dataclass(frozen=True)
class _Request:
    """What the child runs.

    Attributes:
      module_name: the function's module, as the parent imported it.
      module_file: that module's source file (a test module need not be importable by name).
      qualname: the function's qualified name in the module.
      kwargs: the arguments (fixture values), by name.
      sys_path: the parent's import path, so the child resolves imports as the parent did.
      timeout: seconds after which the child prints its stacks and exits.
    """

    module_name: str
    module_file: str
    qualname: str
    kwargs: dict[str, Any]
    sys_path: list[str]
    timeout: float


def call(
    function: Callable[..., Any],
    kwargs: dict[str, Any],
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> None:
    """`function(**kwargs)` in a fresh Python process, with `env` added to its environment (a
    variable read at interpreter start, such as PYTHONHASHSEED, gets a server of its own).

    Raises:
      TypeError: a value of `kwargs` does not pickle (the message names it).
      FreshProcessError: the function raised, or the child died or timed out.
      FreshProcessSkip: the function skipped itself.
    """
    kwargs = {
        name: _CaptureInChild() if _is_output_capture(value) else value
        for name, value in kwargs.items()
    }
    request = _Request(
        module_name=function.__module__,
        module_file=sys.modules[function.__module__].__file__,
        qualname=function.__qualname__,
        kwargs=kwargs,
        sys_path=list(sys.path),
        timeout=timeout,
    )
    with tempfile.TemporaryDirectory(prefix='fresh-process-') as scratch:
        request_path = os.path.join(scratch, 'request.pickle')
        outcome_path = os.path.join(scratch, 'outcome.pickle')
        with open(request_path, 'wb') as file:
            try:
                pickle.dump(request, file)
            except Exception as error:
                raise _unpicklable(function, kwargs, error) from error
        argv = ['-m', 'tests.fresh_process', request_path, outcome_path]
        returncode = fork_server.run(argv, {**child_environment(), **(env or {})})
        outcome = _read_outcome(outcome_path)
    _raise_outcome(request, outcome, returncode)


def _unpicklable(function: Callable[..., Any], kwargs: dict[str, Any], error: Exception):
    """The error naming the first fixture value of `kwargs` that does not pickle."""
    for name, value in kwargs.items():
        try:
            pickle.dumps(value)
        except Exception as value_error:
            return TypeError(
                f'{function.__qualname__}: fixture {name!r} ({type(value).__name__}) cannot be '
                f'sent to a fresh process ({value_error}); give the test data, not a live object'
            )
    return TypeError(f'{function.__qualname__}: cannot be sent to a fresh process ({error})')


def _read_outcome(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with open(path, 'rb') as file:
        return pickle.load(file)


def _raise_outcome(request: _Request, outcome: dict | None, returncode: int) -> None:
    where = f'{request.module_name}.{request.qualname} in a fresh process'
    if outcome is None or (outcome['status'] == _TIMED_OUT and returncode != 1):
        raise FreshProcessError(
            f'{where}: the child exited with status {returncode} before reporting an outcome '
            '(killed, or it crashed; its output is in the captured stderr above)'
        )
    if outcome['status'] == 'passed':
        return
    if outcome['status'] == 'skipped':
        raise FreshProcessSkip(outcome['message'])
    if outcome['status'] == _TIMED_OUT:
        raise FreshProcessError(
            f'{where}: still running after {request.timeout:.0f} s; every thread stack of the '
            'child is in the captured stderr'
        )
    raise FreshProcessError(f'{where} failed:\n{outcome["traceback"]}')


def _load_module(request: _Request):
    """The test's module, its asserts rewritten as pytest rewrites them (so a failed assert shows
    the values), registered under the parent's name for it."""
    with open(request.module_file, 'rb') as file:
        source = file.read()
    tree = ast.parse(source, filename=request.module_file)
    rewrite_asserts(tree, source, request.module_file)
    spec = importlib.util.spec_from_file_location(request.module_name, request.module_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[request.module_name] = module
    exec(compile(tree, request.module_file, 'exec'), module.__dict__)
    return module


def _run(request: _Request) -> dict:
    try:
        target = _load_module(request)
        for part in request.qualname.split('.'):
            target = getattr(target, part)
        capture = None
        kwargs = dict(request.kwargs)
        for name, value in kwargs.items():
            if isinstance(value, _CaptureInChild):
                capture = capture or _FdCapture()
                kwargs[name] = capture
        try:
            target(**kwargs)
        finally:
            if capture is not None:
                capture.readouterr()  # the rest on to the parent
    except pytest.skip.Exception as skipped:
        return {'status': 'skipped', 'message': str(skipped)}
    except BaseException:
        return {'status': 'failed', 'traceback': traceback.format_exc()}
    return {'status': 'passed'}


def _write_outcome(path: str, outcome: dict) -> None:
    partial = f'{path}.partial'
    with open(partial, 'wb') as file:
        pickle.dump(outcome, file)
    os.replace(partial, path)


def main(request_path: str, outcome_path: str) -> int:
    forked_child.die_with_parent()
    with open(request_path, 'rb') as file:
        request: _Request = pickle.load(file)
    sys.path[:] = request.sys_path
    # On a hang: every thread's stack to stderr, an outcome that says so, and out.
    _write_outcome(outcome_path, {'status': _TIMED_OUT})
    faulthandler.dump_traceback_later(request.timeout, exit=True)
    outcome = _run(request)
    faulthandler.cancel_dump_traceback_later()
    _write_outcome(outcome_path, outcome)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: servers the test left running would otherwise be torn down with
    # the process's threads still inside them, which can hang or crash after the outcome is known.
    os._exit(0)


if __name__ == '__main__':
    # Through the module's own name, so the request's classes are the ones `_run` checks for.
    from tests import fresh_process

    sys.exit(fresh_process.main(*sys.argv[1:]))

"""A pytest plugin: tests marked `fresh_process` run their body in a fresh Python process, and no
other test may start TensorFlow servers or connect the eager context in the pytest process.

    pytest_plugins = ['tests.fresh_process_plugin']      # tests/conftest.py

    @pytest.mark.fresh_process
    def test_two_workers_train(transformed_data, tmp_path):
        with servers.start(...) as cluster:  # starts servers: in the child, not in the worker
            ...

Fixtures are set up and torn down in the pytest process as usual; only the function's body moves
(`fresh_process.call`), so session fixtures (data built once for the run) are still built once.

Every other test runs with TensorFlow's doors to process-wide state shut (while TensorFlow is
loaded, which collecting the test modules does): starting a server (`tf.distribute.Server`,
tensorflow/python/training/server_lib.py) and connecting the eager context to a cluster
(`Context.set_server_def`, `update_server_def`, `enable_collective_ops`,
tensorflow/python/eager/context.py, which `ParameterServerStrategy`, `MultiWorkerMirroredStrategy`
and `connect_to_cluster` go through) raise an error that names the marker. So the state is never
made in a pytest worker, and no later test can inherit it. A check after each test backs this up
for state made before TensorFlow was loaded: it fails the test that left it, once per process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import pytest

from tests import fresh_process

MARKER = 'fresh_process'
# A child still running this long before pytest-timeout's limit prints its own stacks first.
_CHILD_TIMEOUT_MARGIN_S = 30
_leak_reported = False


class ProcessStateRefused(RuntimeError):
    """A test without the marker tried to make process-wide TensorFlow state."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        'markers',
        f'{MARKER}: the test body runs in a fresh Python process (it starts TensorFlow servers or '
        'connects the eager context to a cluster: state a process cannot undo)',
    )


def _timeout_s(item: pytest.Item) -> float:
    marker = item.get_closest_marker('timeout')
    if marker is not None and marker.args:
        limit = float(marker.args[0])
    else:
        try:
            limit = float(item.config.getini('timeout') or 0)
        except ValueError:  # no pytest-timeout: its ini key is unknown
            limit = 0.0
    if limit <= 0:
        return 24 * 3600.0
    return max(limit - _CHILD_TIMEOUT_MARGIN_S, limit / 2)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker(MARKER) is None:
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    # `from None`: the report shows the child's traceback alone, not this frame's too.
    try:
        fresh_process.call(pyfuncitem.obj, kwargs, timeout=_timeout_s(pyfuncitem))
    except fresh_process.FreshProcessSkip as skipped:
        raise pytest.skip.Exception(str(skipped)) from None
    except fresh_process.FreshProcessError as failed:
        raise pytest.fail.Exception(str(failed), pytrace=False) from None
    return True


def _refusal(what: str):
    def refuse(*args, **kwargs):
        raise ProcessStateRefused(
            f'{what} in the pytest process: TensorFlow cannot undo that for the tests after this '
            f'one. Mark the test @pytest.mark.{MARKER} so that its body runs in a fresh process.'
        )

    return refuse


@contextlib.contextmanager
def process_state_refused() -> Iterator[None]:
    """Within: starting a TensorFlow server or connecting the eager context raises
    `ProcessStateRefused` (a no-op while TensorFlow is not loaded)."""
    server_lib = sys.modules.get('tensorflow.python.training.server_lib')
    context = sys.modules.get('tensorflow.python.eager.context')
    doors = []
    if server_lib is not None:
        doors.append((server_lib.Server, '__init__', 'starting a TensorFlow server'))
    if context is not None:
        for name in ('set_server_def', 'update_server_def', 'enable_collective_ops'):
            doors.append((context.Context, name, 'connecting the eager context to a cluster'))
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in doors]
    try:
        for owner, name, what in doors:
            setattr(owner, name, _refusal(what))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@contextlib.contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker(MARKER) is not None:
        yield
        return
    with process_state_refused():
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with _guarded(item):
        return (yield)


def leaked_tensorflow_state() -> list[str]:
    """What of TensorFlow's process-wide state this process holds that a later test would
    inherit (nothing is imported here: a module not loaded yet holds none)."""
    found = []
    context_module = sys.modules.get('tensorflow.python.eager.context')
    if context_module is not None:
        context = context_module.context_safe()
        if context is not None and (
            context._server_def is not None or context._collective_ops_server_def is not None
        ):
            found.append('the eager context is connected to a cluster')
    pool = sys.modules.get('asynctrain.components.trainer.training.process_pool')
    if pool is not None and pool.pool_threads() is not None:
        found.append(
            f'TensorFlow servers started in this process (their pool: {pool.pool_threads()} '
            'threads, sized for good)'
        )
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    with _guarded(item):
        result = yield
    global _leak_reported
    if _leak_reported or item.get_closest_marker(MARKER) is not None:
        return result
    leaked = leaked_tensorflow_state()
    if leaked:
        _leak_reported = True
        raise pytest.fail.Exception(
            f'{item.nodeid} left process-wide TensorFlow state to the tests after it in this '
            f'process: {"; ".join(leaked)}. Mark it @pytest.mark.{MARKER} so that its body runs '
            'in a fresh process.',
            pytrace=False,
        )
    return result

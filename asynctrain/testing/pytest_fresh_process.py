"""A pytest plugin: tests marked `fresh_process` run their body in a fresh Python process, and a
test that leaves TensorFlow's process-wide state behind without the marker fails, by name.

    pytest -p asynctrain.testing.pytest_fresh_process      # or pytest_plugins = [...] in conftest

    @pytest.mark.fresh_process
    def test_two_workers_train(transformed_data, tmp_path):
        with servers.start(...) as cluster:  # starts servers: in the child, not in the worker
            ...

Fixtures are set up and torn down in the pytest process as usual; only the function's body moves
(`fresh_process.call`), so session fixtures (data built once for the run) are still built once.
What the check after every other test looks for, once per process (the first test that leaves it
is the one to mark; later tests are not blamed for it):

- an eager context connected to a cluster (`context.set_server_def`, which
  `ParameterServerStrategy` and `connect_to_cluster` call; tensorflow/python/eager/context.py);
- TensorFlow servers started by this package in the process (their pool of threads is sized for
  good by the first: `process_pool`).
"""

from __future__ import annotations

import sys

import pytest

from asynctrain.testing import fresh_process

MARKER = 'fresh_process'
# A child still running this long before pytest-timeout's limit prints its own stacks first.
_CHILD_TIMEOUT_MARGIN_S = 30
_leak_reported = False


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
    try:
        fresh_process.call(pyfuncitem.obj, kwargs, timeout=_timeout_s(pyfuncitem))
    except fresh_process.FreshProcessSkip as skipped:
        reason = str(skipped)
    except fresh_process.FreshProcessError as failed:
        failure = str(failed)
    else:
        return True
    # Outside the handlers: the report shows the child's traceback alone, not this frame's too.
    if 'failure' in locals():
        pytest.fail(failure, pytrace=False)
    pytest.skip(reason)


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

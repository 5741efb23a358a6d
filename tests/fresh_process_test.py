"""The `fresh_process` marker and the leak check (tests/fresh_process_plugin.py), run on
small test files by pytest's own `pytester`: where a marked body runs, what comes back of its
outcome, and what the check says of a test that leaves TensorFlow's state behind."""

import os

import pytest

from tests import fresh_process
from tests.repository import REPO_ROOT

pytest_plugins = ['pytester']

_CONFTEST = """
pytest_plugins = ['tests.fresh_process_plugin']
"""


@pytest.fixture
def pytester(pytester, monkeypatch):
    """pytest's own, its runs able to import this checkout's `tests` package."""
    monkeypatch.setenv('PYTHONPATH', str(REPO_ROOT))
    return pytester


def _run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_planted=source)
    # A process of its own: the runs below connect TensorFlow's eager context on purpose.
    return pytester.runpytest_subprocess('-p', 'no:randomly', '-p', 'no:cacheprovider', *args)


def _parent_of(pid: int) -> int:
    with open(f'/proc/{pid}/stat') as file:
        # pid (comm) state ppid ...: comm may hold spaces, so split after its closing parenthesis.
        return int(file.read().rsplit(')', 1)[1].split()[1])


def _record_pids(path: str) -> None:
    with open(path, 'w') as file:
        file.write(f'{os.getpid()} {os.getppid()} {_parent_of(os.getppid())}')


def test_call_runs_the_function_in_a_process_forked_from_a_server_this_process_started(tmp_path):
    pid_files = [tmp_path / 'first', tmp_path / 'second']
    for pid_file in pid_files:
        fresh_process.call(_record_pids, {'path': str(pid_file)}, timeout=60)
    (first, server, grandparent), (second, second_server, _) = (
        map(int, f.read_text().split()) for f in pid_files
    )
    # A process of its own each time, forked from one server, the child of this process.
    assert len({first, second, os.getpid()}) == 3
    assert server == second_server and grandparent == os.getpid()


def test_outcomes_cross_back_assertions_rewritten(pytester):
    result = _run(
        pytester,
        """
import os
import pytest

@pytest.fixture
def parent_pid():
    return os.getpid()

def _parent_of(pid):
    with open(f'/proc/{pid}/stat') as file:
        return int(file.read().rsplit(')', 1)[1].split()[1])

@pytest.mark.fresh_process
def test_elsewhere(parent_pid, tmp_path):
    # Forked from the fork server, which pytest's process started.
    assert os.getpid() != parent_pid and _parent_of(os.getppid()) == parent_pid
    (tmp_path / 'mark').write_text('child')

@pytest.mark.fresh_process
def test_fails(parent_pid):
    values = [1, 2]
    assert values == [1, 3]

@pytest.mark.fresh_process
def test_skips():
    pytest.skip('no data today')

@pytest.fixture
def lock():
    import threading
    return threading.Lock()

@pytest.mark.fresh_process
def test_live_fixture(lock):
    pass

@pytest.mark.fresh_process
def test_output(capfd):
    print('before')
    assert capfd.readouterr().out == 'before\\n'
    os.write(2, b'native\\n')
    assert capfd.readouterr().err == 'native\\n'
""",
        '-rA',
    )
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    out = result.stdout.str()
    # The child's traceback, with pytest's rewritten assert: the values that differ.
    assert 'test_planted.test_fails in a fresh process failed' in out
    assert 'assert [1, 2] == [1, 3]' in out
    assert 'During handling' not in out  # the child's traceback alone
    assert [line for line in out.splitlines() if line.startswith('SKIPPED')][0].endswith(
        'no data today'
    )
    # A live object cannot cross: the test fails, naming its fixture.
    assert "test_live_fixture: fixture 'lock' (lock) cannot be sent to a fresh process" in out


_LEAK = """
import pytest
from tests.fresh_process_plugin import leaked_tensorflow_state

def _connect_and_leave():
    import tensorflow as tf
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import servers

    distribution = config_lib.DistributionConfig(cluster='in_process', num_workers=1, num_ps=1)
    with servers.start(distribution) as cluster:
        tf.distribute.experimental.ParameterServerStrategy(cluster.resolver)

IMPORT

MARK
def test_a_connects_and_leaves():
    _connect_and_leave()

def test_b_after_it():
    assert leaked_tensorflow_state() == EXPECTED
"""


def test_an_unmarked_test_cannot_start_servers_in_the_worker(pytester):
    # TensorFlow loaded at collection (as the suite's test modules load it): refused at once.
    source = _LEAK.replace('IMPORT', 'import tensorflow').replace('MARK', '')
    result = _run(pytester, source.replace('EXPECTED', '[]'))
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert 'ProcessStateRefused: starting a TensorFlow server in the pytest process' in out
    assert 'Mark the test @pytest.mark.fresh_process' in out


def test_state_made_before_tensorflow_loaded_fails_the_test_that_left_it(pytester):
    # TensorFlow first loaded inside the test: nothing to refuse yet, so the check after it
    # names the test, once; the test after it is not blamed for what it inherited.
    source = _LEAK.replace('IMPORT', '').replace('MARK', '')
    source = source.replace(
        'EXPECTED', "['the eager context is connected to a cluster', leaked_tensorflow_state()[1]]"
    )
    # -rN: no short summary, whose copy of the message is cut to the terminal's width, so the
    # count below is of the reports themselves whatever COLUMNS the run inherits.
    result = _run(pytester, source, '-rN')
    result.assert_outcomes(passed=2, errors=1)
    out = result.stdout.str()
    assert 'ERROR at teardown of test_a_connects_and_leaves' in out
    assert 'the eager context is connected to a cluster' in out
    assert 'TensorFlow servers started in this process' in out
    assert out.count('left process-wide TensorFlow state') == 1


def test_a_marked_test_leaves_nothing_to_the_next(pytester):
    source = _LEAK.replace('IMPORT', 'import tensorflow').replace(
        'MARK', '@pytest.mark.fresh_process'
    )
    result = _run(pytester, source.replace('EXPECTED', '[]'))
    result.assert_outcomes(passed=2)

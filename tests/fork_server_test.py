"""The suite's fork server (tests/fork_server.py): a child gets the caller's environment, working
directory and streams, its exit status comes back, it starts with the preloaded modules imported
and nothing of TensorFlow run, and a child past its timeout is killed without stopping the next."""

import json
import os
import subprocess

import pytest

from tests import fork_server

_PROBE = """
import json, os, sys
from tensorflow.python.eager import context

def parent_of(pid):
    with open(f'/proc/{pid}/stat') as file:
        return int(file.read().rsplit(')', 1)[1].split()[1])

print(json.dumps({
    'pid': os.getpid(),
    'server': os.getppid(),
    'server_parent': parent_of(os.getppid()),
    'cwd': os.getcwd(),
    'argv': sys.argv[1:],
    'variable': os.environ.get('FORK_SERVER_TEST'),
    'tensorflow_loaded': 'tensorflow' in sys.modules,
    'eager_context': context._context is not None,
}))
print('to stderr', file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def probe(tmp_path):
    """A module `probe` in `tmp_path`: `-m probe CODE` prints what its process sees and exits
    with CODE."""
    (tmp_path / 'probe.py').write_text(_PROBE)
    return tmp_path


def _run_probe(directory, code: int, **env) -> tuple[dict, subprocess.CompletedProcess]:
    result = fork_server.run_captured(
        ['-m', 'probe', str(code)], env={**os.environ, **env}, cwd=directory, timeout=120
    )
    return json.loads(result.stdout), result


def test_children_see_the_callers_environment_directory_and_streams(probe):
    first, result = _run_probe(probe, 0, FORK_SERVER_TEST='one')
    second, failed = _run_probe(probe, 3, FORK_SERVER_TEST='two')

    assert (result.returncode, failed.returncode) == (0, 3)
    assert result.stderr == failed.stderr == 'to stderr\n'
    assert (first['variable'], second['variable']) == ('one', 'two')
    assert first['cwd'] == second['cwd'] == str(probe)
    assert (first['argv'], second['argv']) == (['0'], ['3'])
    # Two processes of their own, forked from one server that this process started.
    assert len({first['pid'], second['pid'], os.getpid()}) == 3
    assert first['server'] == second['server'] and first['server_parent'] == os.getpid()
    # TensorFlow imported in the server, but no eager context made there for a child to inherit.
    assert first['tensorflow_loaded'] and not first['eager_context']


def test_a_different_import_time_environment_gets_a_server_of_its_own(probe):
    default, _ = _run_probe(probe, 0)
    other, _ = _run_probe(probe, 0, TF_FORK_SERVER_TEST='1')
    again, _ = _run_probe(probe, 0)

    assert other['server'] != default['server']
    assert again['server'] == default['server']


def test_a_child_past_its_timeout_is_killed_and_the_next_request_runs(tmp_path):
    (tmp_path / 'forever.py').write_text(
        'import os, signal\nprint(os.getpid(), flush=True)\nsignal.pause()\n'
    )
    out = tmp_path / 'out'
    with open(out, 'w') as file, pytest.raises(subprocess.TimeoutExpired):
        fork_server.run(
            ['-m', 'forever'], dict(os.environ), cwd=tmp_path, timeout=2, stdout=file.fileno()
        )
    pid = int(out.read_text())
    # The child is gone: killed, then reaped by its server.
    assert not os.path.exists(f'/proc/{pid}') or _state(pid) == 'Z'

    (tmp_path / 'quick.py').write_text('import sys\nsys.exit(7)\n')
    assert fork_server.run(['-m', 'quick'], dict(os.environ), cwd=tmp_path, timeout=60) == 7


def _state(pid: int) -> str:
    with open(f'/proc/{pid}/stat') as file:
        return file.read().rsplit(')', 1)[1].split()[0]


def test_only_python_dash_m_is_accepted():
    with pytest.raises(ValueError, match='expected -m MODULE'):
        fork_server.run(['-c', 'pass'], dict(os.environ))

"""The fork server at the value level: a child runs its module with the request's environment,
directory and streams; its handle polls, waits, signals and reports as `subprocess.Popen` does;
a child dies with its handle, and the server and its children with the process that started
them."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from asynctrain.components.shared import fork_server

# A module the children run: prints what it sees, then exits with the status it is given, or
# waits (on a pipe nobody writes) when given none.
_PROBE = """
import json, os, sys
print(json.dumps({
    'argv': sys.argv[1:], 'cwd': os.getcwd(), 'ppid': os.getppid(),
    'probe': os.environ.get('PROBE'), 'json_loaded': 'json' in sys.modules,
    'email_loaded': 'email.mime.text' in sys.modules,
}), flush=True)
print('to stderr', file=sys.stderr, flush=True)
if len(sys.argv) > 1:
    sys.exit(int(sys.argv[1]))
os.read(os.pipe()[0], 1)
"""


@pytest.fixture
def probe_dir(tmp_path):
    (tmp_path / 'fork_probe.py').write_text(_PROBE)
    return tmp_path


@pytest.fixture
def server():
    with fork_server.ForkServer(['email.mime.text'], dict(os.environ)) as running:
        yield running


def _read(path) -> str:
    with open(path) as f:
        return f.read()


def _dead(pid: int) -> bool:
    """Exited: no such process, or a zombie no one has reaped yet."""
    try:
        return _read(f'/proc/{pid}/stat').rsplit(') ', 1)[1][0] in 'ZX'
    except FileNotFoundError:
        return True


def _wait_dead(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _dead(pid)


def test_a_child_runs_the_module_with_the_requests_environment_directory_and_streams(
    server, probe_dir, tmp_path
):
    out, err = tmp_path / 'out', tmp_path / 'err'
    with open(out, 'w') as stdout, open(err, 'w') as stderr:
        child = server.start(
            ['-m', 'fork_probe', '7'],
            {**os.environ, 'PROBE': 'value'},
            cwd=probe_dir,
            stdout=stdout.fileno(),
            stderr=stderr.fileno(),
        )
        assert child.wait(timeout=60) == 7

    seen = json.loads(_read(out))
    assert seen['argv'] == ['7']
    assert seen['cwd'] == str(probe_dir)
    assert seen['probe'] == 'value'
    # Forked from the server, which imported its preload; the child is not this process's.
    assert seen['email_loaded'] is True
    assert seen['ppid'] != os.getpid()
    assert child.pid != os.getpid()
    assert _read(err) == 'to stderr\n'
    assert child.returncode == 7 and child.poll() == 7
    assert child.args == [sys.executable, '-m', 'fork_probe', '7']


def test_poll_wait_terminate_and_kill_report_as_popen_does(server, probe_dir):
    with open(os.devnull, 'w') as devnull:
        waiting = server.start(['-m', 'fork_probe'], dict(os.environ), probe_dir, devnull.fileno())
        killed = server.start(['-m', 'fork_probe'], dict(os.environ), probe_dir, devnull.fileno())
    assert waiting.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        waiting.wait(timeout=0.2)
    waiting.terminate()
    killed.kill()
    assert waiting.wait(timeout=60) == -signal.SIGTERM
    assert killed.wait(timeout=60) == -signal.SIGKILL
    # Signalling an ended child is a no-op, as Popen's is.
    waiting.kill()
    assert waiting.returncode == -signal.SIGTERM


def test_a_child_whose_handle_is_closed_is_killed(server, probe_dir):
    with open(os.devnull, 'w') as devnull:
        child = server.start(['-m', 'fork_probe'], dict(os.environ), probe_dir, devnull.fileno())
    assert not _dead(child.pid)
    child.close()
    assert _wait_dead(child.pid)


def test_a_request_whose_import_time_environment_differs_is_refused(server, probe_dir):
    with pytest.raises(ValueError, match=r"\['TF_CPP_MIN_LOG_LEVEL'\] differ"):
        server.start(
            ['-m', 'fork_probe', '0'], {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}, probe_dir
        )
    with pytest.raises(ValueError, match='expected -m MODULE'):
        server.start(['-c', 'pass'], dict(os.environ))


# A caller that starts a server and a child, prints their pids, then waits to be killed.
_CALLER = textwrap.dedent(
    """
    import os, sys
    from asynctrain.components.shared import fork_server
    server = fork_server.ForkServer([], dict(os.environ))
    child = server.start(['-m', 'fork_probe'], dict(os.environ), sys.argv[1], os.open(os.devnull, os.O_WRONLY))
    print(server._process.pid, child.pid, flush=True)
    os.read(os.pipe()[0], 1)
    """
)


def test_the_server_and_its_children_die_with_the_caller_killed_by_sigkill(probe_dir):
    caller = subprocess.Popen(
        [sys.executable, '-c', _CALLER, str(probe_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        server_pid, child_pid = map(int, caller.stdout.readline().split())
        assert not _dead(server_pid) and not _dead(child_pid)
        caller.kill()
        caller.wait()
        assert _wait_dead(server_pid)
        assert _wait_dead(child_pid)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def test_closing_the_server_kills_its_running_children_and_their_handles_say_so(probe_dir):
    server = fork_server.ForkServer([], dict(os.environ))
    with open(os.devnull, 'w') as devnull:
        child = server.start(['-m', 'fork_probe'], dict(os.environ), probe_dir, devnull.fileno())
    server.close()
    assert _wait_dead(child.pid)
    assert child.wait(timeout=60) == -signal.SIGKILL


def test_a_release_that_follows_the_childs_exit_in_one_batch_of_events_is_ignored():
    """The server's loop may see a child's exit and its caller's release in one `select`: the exit
    is reaped first (its pid forgotten), and the release that follows must not stop the server."""
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    children = fork_server._Children(theirs)
    try:
        children.release(os.getpid())  # a pid the server no longer holds
        assert children.sockets == {} and children.pidfds == {}
        assert [key.data for key in children.selector.get_map().values()] == [('request', 0)]
    finally:
        children.selector.close()
        ours.close()
        theirs.close()

"""Local processes in process groups of their own: readiness, and stopping a process
together with every process it started (which inherit its group), zombies aside."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import time

HOST = '127.0.0.1'


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((HOST, port)) == 0


def kill_group(process: subprocess.Popen, sig: signal.Signals, grace_s: float) -> None:
    """Sends `sig` to the process's group, SIGKILLs it after `grace_s`, and waits until the whole
    group is gone (the group's leader is the process; its children inherited the group)."""
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
    deadline = time.monotonic() + grace_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        process.poll()
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            raise RuntimeError(f'process group {pgid} ({process.args[:3]}) survived SIGKILL')
        time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (zombies, which a container's init may
    never reap, do not count)."""
    for stat in pathlib.Path('/proc').glob('[0-9]*/stat'):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(')', 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != 'Z':
                return True
    return False

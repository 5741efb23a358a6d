"""Ports for servers that another process will bind later: picked below the kernel's ephemeral range.

A port found free by binding port 0 (as `portpicker` does first) comes from the kernel's
ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), the range the kernel also draws the
source port of every outgoing TCP connection from. Between the pick and the moment a child process
binds it, any connection on the machine (gRPC between replicas, HTTP to a store, a Spark executor)
can take it as its source port, and the child's server fails with "address already in use". A port
below that range is only ever taken by an explicit bind, so one found free here stays free unless
another picker binds it first; picks are random over some twenty thousand ports, and each is
checked free when picked.

A port found free is still free for anyone until its server binds it, seconds later: two pickers
in different processes (two local clusters, two test workers) could hand out the same one in that
window. So every pick is also reserved for `RESERVED_S` in a directory that all pickers on the
machine share (`reservations_dir()`): a port another picker reserved within that time is not
picked, whether or not it is bound yet. Picks are made under an exclusive lock on that directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator

HOST = '127.0.0.1'
# The kernel's own default range, where /proc cannot be read.
_DEFAULT_EPHEMERAL = (32768, 60999)
# Below this are the well-known and commonly configured service ports.
_LOWEST = 10000
_ATTEMPTS = 200
# How long a picked port stays reserved: longer than a server takes to start and bind it.
RESERVED_S = 120.0
RESERVATIONS_VARIABLE = 'ASYNCTRAIN_PORT_RESERVATIONS'
_LOCK_NAME = '.lock'


def ephemeral_range(path: str = '/proc/sys/net/ipv4/ip_local_port_range') -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections, lowest and highest."""
    try:
        with open(path, encoding='ascii') as file:
            low, high = (int(part) for part in file.read().split())
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return low, high


def _bindable(port: int) -> bool:
    """Whether TCP `port` can be bound on every IPv4 address now (as a TF or gRPC server binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(('', port))
        except OSError:
            return False
    return True


def reservations_dir() -> str:
    """Where picks are reserved: `$ASYNCTRAIN_PORT_RESERVATIONS`, else a folder of the system's
    temporary directory (shared by every process of the machine)."""
    return os.environ.get(RESERVATIONS_VARIABLE) or os.path.join(
        tempfile.gettempdir(), 'asynctrain-ports'
    )


@contextlib.contextmanager
def _reservations(directory: str) -> Iterator[set[int]]:
    """Under an exclusive lock on `directory`: the ports reserved there less than `RESERVED_S`
    ago (older reservations are removed)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, _LOCK_NAME), 'a', encoding='ascii') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            now = time.time()
            reserved: set[int] = set()
            for entry in os.scandir(directory):
                if not entry.name.isdigit():
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if now - entry.stat().st_mtime < RESERVED_S:
                        reserved.add(int(entry.name))
                    else:
                        os.remove(entry.path)
            yield reserved
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _reserve(directory: str, port: int) -> None:
    with open(os.path.join(directory, str(port)), 'w', encoding='ascii') as mark:
        mark.write(f'{os.getpid()}\n')


def free_ports(
    count: int,
    rng: random.Random | None = None,
    ephemeral: tuple[int, int] | None = None,
    reservations: str | None = None,
) -> list[int]:
    """`count` distinct TCP ports, each free now, outside the kernel's ephemeral range and not
    reserved by another pick in the last `RESERVED_S`; reserved for that long in turn.

    Args:
      count: how many.
      rng: the random source (a seeded one replays the picks).
      ephemeral: the ephemeral range, lowest and highest; by default the kernel's.
      reservations: the shared reservations folder; by default `reservations_dir()`.

    Raises:
      RuntimeError: no free port found in that many attempts (the range is full or too small).
    """
    low, high = ephemeral or ephemeral_range()
    # Below the ephemeral range, or above it where the range starts too low to leave room below.
    candidates = range(_LOWEST, low) if low - _LOWEST >= 1000 else range(high + 1, 65536)
    rng = rng or random.SystemRandom()
    directory = reservations or reservations_dir()
    ports: list[int] = []
    with _reservations(directory) as reserved:
        for _ in range(_ATTEMPTS * count):
            port = rng.choice(candidates)
            if port not in ports and port not in reserved and _bindable(port):
                ports.append(port)
                if len(ports) == count:
                    for picked in ports:
                        _reserve(directory, picked)
                    return ports
    raise RuntimeError(
        f'no {count} free TCP ports found in {_ATTEMPTS * count} attempts over ports '
        f'{candidates.start}-{candidates.stop - 1} (outside the ephemeral range {low}-{high}, '
        f'not reserved in {directory})'
    )


def free_port() -> int:
    """One TCP port, free now, outside the kernel's ephemeral range and reserved (`free_ports`)."""
    (port,) = free_ports(1)
    return port

"""Ports for servers that another process will bind later: picked below the kernel's ephemeral range.

A port found free by binding port 0 (as `portpicker` does first) comes from the kernel's
ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), the range the kernel also draws the
source port of every outgoing TCP connection from. Between the pick and the moment a child process
binds it, any connection on the machine (gRPC between replicas, HTTP to a store, a Spark executor)
can take it as its source port, and the child's server fails with "address already in use". A port
below that range is only ever taken by an explicit bind, so one found free here stays free unless
another picker binds it first; picks are random over some twenty thousand ports, and each is
checked free when picked.
"""

from __future__ import annotations

import random
import socket

HOST = '127.0.0.1'
# The kernel's own default range, where /proc cannot be read.
_DEFAULT_EPHEMERAL = (32768, 60999)
# Below this are the well-known and commonly configured service ports.
_LOWEST = 10000
_ATTEMPTS = 200


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


def free_ports(
    count: int, rng: random.Random | None = None, ephemeral: tuple[int, int] | None = None
) -> list[int]:
    """`count` distinct TCP ports, each free now and outside the kernel's ephemeral range.

    Args:
      count: how many.
      rng: the random source (a seeded one replays the picks).
      ephemeral: the ephemeral range, lowest and highest; by default the kernel's.

    Raises:
      RuntimeError: no free port found in that many attempts (the range is full or too small).
    """
    low, high = ephemeral or ephemeral_range()
    # Below the ephemeral range, or above it where the range starts too low to leave room below.
    candidates = range(_LOWEST, low) if low - _LOWEST >= 1000 else range(high + 1, 65536)
    rng = rng or random.SystemRandom()
    ports: list[int] = []
    for _ in range(_ATTEMPTS * count):
        port = rng.choice(candidates)
        if port not in ports and _bindable(port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(
        f'no {count} free TCP ports found in {_ATTEMPTS * count} attempts over ports '
        f'{candidates.start}-{candidates.stop - 1} (outside the ephemeral range {low}-{high})'
    )


def free_port() -> int:
    """One TCP port, free now and outside the kernel's ephemeral range."""
    (port,) = free_ports(1)
    return port

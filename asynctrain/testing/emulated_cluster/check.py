"""`python -m asynctrain.testing.emulated_cluster.check`: whether this machine can emulate
unequal hosts, and what it measures: the CPU share a busy process gets under a budget (from its
group's counters, not a clock) and a round trip through a link, plain and with latency.

    cpu: cgroup v1 at /sys/fs/cgroup/cpu; budget 0.25 CPUs: 0.25 used, throttled 20 of 20 periods
    link: toxiproxy v2.5.0; round trip 0.4 ms plain, 51.2 ms with 50 ms latency; cut: refused

The measurements are functions the kit's tests assert on, too.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator

from asynctrain.components.trainer.cluster import servers
from asynctrain.testing.emulated_cluster import cpu_budget, toxiproxy


@dataclasses.dataclass(frozen=True)
class CpuShare:
    """What a busy process got under a budget, from its group's counters.

    Attributes:
      version: the cgroup version that held the budget.
      cpus: the budget, in CPUs.
      used_cpus: CPU time it used per period's worth of time, in CPUs.
      periods: the periods measured.
      throttled_periods: those in which it ran out of quota.
    """

    version: int
    cpus: float
    used_cpus: float
    periods: int
    throttled_periods: int


def measure_cpu(cpus: float, periods: int) -> CpuShare:
    """Runs a busy process under a budget of `cpus` for `periods` periods of 100 ms (after its
    first two: the interpreter's start), then removes it and its group."""
    hierarchy = cpu_budget.find_hierarchy()
    group = cpu_budget.CpuCgroup.create(cpu_budget.group_name('check'), cpus, hierarchy)
    try:
        busy = servers.spawn_program(
            [*group.entering_command(), sys.executable, '-c', 'while True: pass'],
            servers.child_env(),
        )
        try:
            first = _after_periods(group, 2)
            last = _after_periods(group, first.periods + periods)
        finally:
            busy.kill()
            busy.wait()
    finally:
        group.remove()
    counted = last.periods - first.periods
    return CpuShare(
        version=hierarchy.version,
        cpus=cpus,
        used_cpus=(last.usage_s - first.usage_s) / (counted * cpu_budget.PERIOD_US / 1e6),
        periods=counted,
        throttled_periods=last.throttled_periods - first.throttled_periods,
    )


def _after_periods(group: cpu_budget.CpuCgroup, periods: int) -> cpu_budget.CpuStats:
    while (stats := group.stats()).periods < periods:
        time.sleep(0.05)
    return stats


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@contextlib.contextmanager
def echo_server() -> Iterator[str]:
    """A TCP echo server on 127.0.0.1 (its address), stopped on exit."""
    server = socketserver.ThreadingTCPServer((toxiproxy.HOST, 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'{toxiproxy.HOST}:{server.server_address[1]}'
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def round_trip(address: str, payload: bytes = b'ping') -> tuple[bytes, float]:
    """What one round trip to an echo server at `address` brought back, and its seconds."""
    host, port = address.rsplit(':', 1)
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        start = time.monotonic()
        connection.sendall(payload)
        echoed = b''
        while len(echoed) < len(payload) and (chunk := connection.recv(len(payload))):
            echoed += chunk
        return echoed, time.monotonic() - start


def measure_link(latency_ms: int) -> str:
    """A round trip through a link to an echo server, plain and with `latency_ms`, and whether
    the link, cut, refuses."""
    with echo_server() as echo, toxiproxy.ToxiproxyServer() as proxies:
        link = proxies.link('check', echo)
        plain = round_trip(link.listen)[1] * 1000
        link.latency(latency_ms)
        delayed = round_trip(link.listen)[1] * 1000
        link.cut()
        try:
            round_trip(link.listen)
            cut = 'not refused'
        except ConnectionRefusedError:
            cut = 'refused'
    return (
        f'link: toxiproxy {toxiproxy.VERSION}; round trip {plain:.1f} ms plain, '
        f'{delayed:.1f} ms with {latency_ms} ms latency; cut: {cut}'
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cpus', type=float, default=0.25, help='the budget tried, in CPUs')
    parser.add_argument('--periods', type=int, default=20, help='periods of 100 ms measured')
    parser.add_argument('--latency-ms', type=int, default=50)
    args = parser.parse_args(argv)
    try:
        share = measure_cpu(args.cpus, args.periods)
        print(
            f'cpu: cgroup v{share.version}; budget {share.cpus:g} CPUs: {share.used_cpus:.2f} '
            f'used, throttled {share.throttled_periods} of {share.periods} periods',
            flush=True,
        )
    except cpu_budget.CpuBudgetUnavailable as refused:
        print(f'cpu: unavailable: {refused}', flush=True)
    print(measure_link(args.latency_ms), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())

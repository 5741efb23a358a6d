"""Emulated links through a real toxiproxy-server (built from its Go module into the cache on a
new machine): a latency toxic adds at least its latency to a round trip, a cut link refuses and
then recovers, a black-holed link blocks and then recovers, and bytes are counted per link."""

import pathlib
import re
import socket
import time

import pytest

from asynctrain.testing.emulated_cluster import check, toxiproxy

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group('testing.emulated_cluster.toxiproxy_test'),
]

LATENCY_MS = 150


@pytest.fixture(scope='module')
def echo_address():
    with check.echo_server() as address:
        yield address


@pytest.fixture(scope='module')
def proxies():
    with toxiproxy.ToxiproxyServer() as server:
        yield server


@pytest.fixture
def link(proxies, echo_address, request):
    made = proxies.link(request.node.name[:40], echo_address)
    yield made
    made.remove()


def _connect(address: str, timeout_s: float) -> socket.socket:
    host, port = address.rsplit(':', 1)
    return socket.create_connection((host, int(port)), timeout=timeout_s)


def test_latency_adds_at_least_its_delay_to_a_round_trip(link):
    assert check.round_trip(link.listen)[0] == b'ping'

    name = link.latency(LATENCY_MS, jitter_ms=20)
    echoed, seconds = check.round_trip(link.listen)

    assert echoed == b'ping'
    assert seconds >= (LATENCY_MS - 20) / 1000  # a lower bound only: the machine is shared
    assert link.toxics() == [
        {
            'name': name,
            'type': 'latency',
            'stream': 'downstream',
            'toxicity': 1,
            'attributes': {'latency': LATENCY_MS, 'jitter': 20},
        }
    ]


def test_a_cut_link_refuses_connections_then_recovers(link):
    link.cut()
    assert not link.enabled()
    with pytest.raises(ConnectionRefusedError):
        check.round_trip(link.listen)

    link.restore()
    assert check.round_trip(link.listen)[0] == b'ping'


def test_a_timed_cut_ends_by_itself(link):
    timer = link.cut_for(0.5)
    with pytest.raises(ConnectionRefusedError):
        check.round_trip(link.listen)
    timer.join()
    assert link.enabled()
    assert check.round_trip(link.listen)[0] == b'ping'


def test_a_black_holed_link_accepts_but_delivers_nothing_until_cleared(link):
    link.blackhole()
    with _connect(link.listen, timeout_s=0.5) as connection:
        connection.sendall(b'lost')
        with pytest.raises(socket.timeout):
            connection.recv(4)

    link.clear()
    assert link.toxics() == []
    assert check.round_trip(link.listen)[0] == b'ping'


def test_bytes_are_counted_per_link_and_direction_once_a_connection_closes(link):
    check.round_trip(link.listen, b'x' * 1000)

    deadline = time.monotonic() + 10
    while min(link.bytes_received().values()) < 1000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert link.bytes_received() == {toxiproxy.UPSTREAM: 1000, toxiproxy.DOWNSTREAM: 1000}


def test_bytes_of_a_connection_still_open_are_counted_live(link):
    with _connect(link.listen, timeout_s=10) as connection:
        for size in (1000, 2500):
            connection.sendall(b'y' * size)
            echoed = b''
            while len(echoed) < size:
                echoed += connection.recv(size - len(echoed))
        # Open: the proxy's own metrics have nothing yet; the kernel's counters have it all.
        assert link.bytes_received() == {toxiproxy.UPSTREAM: 0, toxiproxy.DOWNSTREAM: 0}
        assert link.bytes_through() == {toxiproxy.UPSTREAM: 3500, toxiproxy.DOWNSTREAM: 3500}


def test_a_built_server_is_reused_without_go(tmp_path, monkeypatch):
    built = tmp_path / 'v9.9.9' / 'server'
    built.parent.mkdir()
    built.write_text('')
    monkeypatch.setenv('PATH', '')

    assert toxiproxy.server_binary('v9.9.9', tmp_path) == built


def test_no_go_and_no_built_server_is_refused_with_the_way_out(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', '')

    with pytest.raises(RuntimeError, match='`go` .* is not on PATH') as refused:
        toxiproxy.server_binary('v9.9.9', tmp_path)

    assert str(pathlib.Path(tmp_path, 'v9.9.9', 'server')) in str(refused.value)


def test_the_check_command_reports_the_delayed_round_trip_and_the_refused_cut(capsys):
    assert check.main(['--cpus', '0.5', '--periods', '3', '--latency-ms', '60']) == 0

    cpu, link = capsys.readouterr().out.splitlines()
    assert cpu.startswith('cpu: cgroup v') and 'throttled' in cpu
    delayed = re.search(r', ([0-9.]+) ms with 60 ms latency; cut: refused$', link)
    assert delayed is not None, link
    assert float(delayed.group(1)) >= 60

"""Tests for asynctrain/components/shared/ports.py: free ports outside the ephemeral range."""

import socket

from asynctrain.components.shared import ports


def test_the_ephemeral_range_is_read_from_the_kernels_file(tmp_path):
    path = tmp_path / 'ip_local_port_range'
    path.write_text('40000\t50000\n')

    assert ports.ephemeral_range(str(path)) == (40000, 50000)
    # Where the file cannot be read, the kernel's own default.
    assert ports.ephemeral_range(str(tmp_path / 'missing')) == (32768, 60999)


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    low, _ = ports.ephemeral_range()

    picked = ports.free_ports(8)

    assert len(set(picked)) == 8
    assert all(10000 <= port < low for port in picked), picked
    for port in picked:
        with socket.socket() as server:
            server.bind(('127.0.0.1', port))


class _Picks:
    """Stands for the random source: its choices are given, in order."""

    def __init__(self, picks):
        self._picks = iter(picks)

    def choice(self, seq):
        pick = next(self._picks)
        assert pick in seq
        return pick


def test_a_port_already_bound_is_not_picked():
    held, free = ports.free_ports(2)
    with socket.socket() as holder:
        holder.bind(('', held))
        holder.listen()

        picked = ports.free_ports(1, rng=_Picks([held, held, free]))

    assert picked == [free]


def test_a_range_that_starts_too_low_leaves_the_ports_above_it():
    picked = ports.free_ports(4, ephemeral=(10500, 60000))

    assert all(60000 < port <= 65535 for port in picked), picked

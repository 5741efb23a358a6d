"""Tests for asynctrain/components/shared/ports.py: free ports outside the ephemeral range."""

import json
import os
import socket
import subprocess
import sys
import time

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


def test_a_port_already_bound_is_not_picked(tmp_path):
    held, free = ports.free_ports(2)
    with socket.socket() as holder:
        holder.bind(('', held))
        holder.listen()

        picked = ports.free_ports(1, rng=_Picks([held, held, free]), reservations=str(tmp_path))

    assert picked == [free]


def test_a_range_that_starts_too_low_leaves_the_ports_above_it():
    picked = ports.free_ports(4, ephemeral=(10500, 60000))

    assert all(60000 < port <= 65535 for port in picked), picked


def test_a_port_reserved_by_an_earlier_pick_is_not_picked_again(tmp_path):
    first, second = ports.free_ports(2)

    picked = ports.free_ports(1, rng=_Picks([first]), reservations=str(tmp_path))
    again = ports.free_ports(1, rng=_Picks([first, second]), reservations=str(tmp_path))

    assert (picked, again) == ([first], [second])
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.isdigit()) == sorted(
        [str(first), str(second)]
    )


def test_a_reservation_older_than_its_time_is_dropped_and_the_port_picked(tmp_path):
    (port,) = ports.free_ports(1, reservations=str(tmp_path))
    mark = tmp_path / str(port)
    old = time.time() - ports.RESERVED_S - 1
    os.utime(mark, (old, old))

    assert ports.free_ports(1, rng=_Picks([port]), reservations=str(tmp_path)) == [port]
    assert time.time() - mark.stat().st_mtime < ports.RESERVED_S


_PICKER = """
import json, sys
from asynctrain.components.shared import ports
picked = []
for _ in range(40):
    picked += ports.free_ports(5, ephemeral=(11000, 65000), reservations=sys.argv[1])
print(json.dumps(picked))
"""


def test_pickers_in_two_processes_never_hand_out_the_same_port(tmp_path):
    # 200 picks each over the 1,000 ports below 11000: without reservations, dozens would repeat.
    pickers = [
        subprocess.Popen(
            [sys.executable, '-c', _PICKER, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    picks = []
    for picker in pickers:
        out, _ = picker.communicate(timeout=120)
        assert picker.returncode == 0
        picks.append(json.loads(out))

    assert [len(each) for each in picks] == [200, 200]
    assert len(set(picks[0]) | set(picks[1])) == 400
    assert all(10000 <= port < 11000 for port in picks[0] + picks[1])

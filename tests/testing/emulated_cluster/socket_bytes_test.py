"""The kernel's per-socket byte counters over netlink (socket_bytes.py), on a real TCP connection."""

import socket

from asynctrain.testing.emulated_cluster import socket_bytes


def _read(connection: socket.socket, size: int) -> bytes:
    data = b''
    while len(data) < size:
        data += connection.recv(size - len(data))
    return data


def test_an_open_connections_bytes_are_read_on_the_accepting_side_exactly():
    with socket.socket() as listener:
        listener.bind(('127.0.0.1', 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(('127.0.0.1', port)) as client:
            accepted, _ = listener.accept()
            with accepted:
                client.sendall(b'x' * 1_000_000)
                assert len(_read(accepted, 1_000_000)) == 1_000_000
                accepted.sendall(b'y' * 12_345)
                assert len(_read(client, 12_345)) == 12_345

                assert socket_bytes.port_totals(port) == {'received': 1_000_000, 'sent': 12_345}
                client_port = client.getsockname()[1]
                (client_side,) = [
                    s for s in socket_bytes.tcp_sockets() if s.local_port == client_port
                ]
                assert client_side.remote_port == port
                assert (client_side.received, client_side.sent) == (12_345, 1_000_000)


def test_a_port_with_no_connection_counts_nothing():
    with socket.socket() as listener:
        listener.bind(('127.0.0.1', 0))
        listener.listen()
        assert socket_bytes.port_totals(listener.getsockname()[1]) == {'received': 0, 'sent': 0}

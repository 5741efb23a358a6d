"""Bytes through the TCP connections of a local port, live, from the kernel's own counters.

Toxiproxy (v2.5.0, `link.go`: `ToxicLink.read` and `write`) adds a connection's bytes to its
metrics only when that connection closes, and gRPC keeps its connections open for the whole run:
its counters read 0 while a cluster trains. The kernel counts every TCP socket's bytes as they
cross: `struct tcp_info`'s `tcpi_bytes_received` (payload bytes received) and `tcpi_bytes_sent`
less `tcpi_bytes_retrans` (payload bytes sent, each once), read here over netlink's sock_diag
interface (as `ss -ti` does; `linux/inet_diag.h`, `linux/tcp.h`), with no tool to install.

    totals = socket_bytes.port_totals(link_port)   # {'received': ..., 'sent': ...}

For a proxy's listening port, the accepted sockets' `received` is what the clients sent through
the link and `sent` what the server answered. Connections already closed are not counted (the
proxy's own metrics count those).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import struct

# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_INET_DIAG_INFO = 2
_TCP_ESTABLISHED_AND_AFTER = 0xFFF & ~(1 << 10)  # every state but LISTEN (10)
_NLMSG_HEADER = struct.Struct('=IHHII')
# family, protocol, extensions, pad, states; then inet_diag_sockid: sport, dport (network
# order), src[4], dst[4] (network order), interface, cookie[2].
_REQUEST = struct.Struct('=BBBBI')
_SOCKID = struct.Struct('>HH16s16sI8s')
# inet_diag_msg: family, state, timer, retransmits; inet_diag_sockid; then five u32: expires,
# rqueue, wqueue, uid, inode.
_DIAG_MESSAGE = struct.Struct('=BBBB')
_DIAG_MESSAGE_SIZE = _DIAG_MESSAGE.size + _SOCKID.size + 5 * 4
_ATTRIBUTE = struct.Struct('=HH')
# struct tcp_info (linux/tcp.h): u64 tcpi_bytes_received at 128 (Linux 4.1), tcpi_bytes_sent and
# tcpi_bytes_retrans at 200 and 208 (Linux 4.19). Not tcpi_bytes_acked (120): a receiver's
# delayed acknowledgement leaves it behind what was delivered.
_BYTES_RECEIVED_AT, _BYTES_SENT_AT, _BYTES_RETRANS_AT = 128, 200, 208


@dataclasses.dataclass(frozen=True)
class SocketBytes:
    """One TCP socket's local and remote port and its payload bytes so far."""

    local_port: int
    remote_port: int
    received: int
    sent: int


def _align(length: int) -> int:
    return (length + 3) & ~3


def _request(sequence: int) -> bytes:
    body = _REQUEST.pack(
        socket.AF_INET,
        socket.IPPROTO_TCP,
        1 << (_INET_DIAG_INFO - 1),
        0,
        _TCP_ESTABLISHED_AND_AFTER,
    ) + _SOCKID.pack(0, 0, bytes(16), bytes(16), 0, bytes(8))
    header = _NLMSG_HEADER.pack(
        _NLMSG_HEADER.size + len(body),
        _SOCK_DIAG_BY_FAMILY,
        _NLM_F_REQUEST | _NLM_F_DUMP,
        sequence,
        0,
    )
    return header + body


def _parse(message: bytes) -> SocketBytes | None:
    local_port, remote_port = struct.unpack_from('>HH', message, _DIAG_MESSAGE.size)
    offset = _DIAG_MESSAGE_SIZE
    while offset + _ATTRIBUTE.size <= len(message):
        length, kind = _ATTRIBUTE.unpack_from(message, offset)
        if length < _ATTRIBUTE.size:
            break
        if kind == _INET_DIAG_INFO:
            if length - _ATTRIBUTE.size < _BYTES_RETRANS_AT + 8:
                raise OSError(
                    'sock_diag: tcp_info has no tcpi_bytes_sent (Linux 4.19 or newer needed)'
                )
            info = offset + _ATTRIBUTE.size
            received, sent, retransmitted = (
                struct.unpack_from('=Q', message, info + at)[0]
                for at in (_BYTES_RECEIVED_AT, _BYTES_SENT_AT, _BYTES_RETRANS_AT)
            )
            return SocketBytes(local_port, remote_port, received, sent - retransmitted)
        offset += _align(length)
    return None


def tcp_sockets() -> list[SocketBytes]:
    """Every IPv4 TCP socket of this network namespace but listening ones, with its bytes.

    Raises:
      OSError: netlink's sock_diag answered with an error (its errno), or is not available.
    """
    sockets: list[SocketBytes] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
        link.sendto(_request(1), (0, 0))
        while True:
            data = link.recv(1 << 16)
            offset = 0
            while offset + _NLMSG_HEADER.size <= len(data):
                length, kind, _, _, _ = _NLMSG_HEADER.unpack_from(data, offset)
                if kind == _NLMSG_DONE:
                    return sockets
                if kind == _NLMSG_ERROR:
                    (code,) = struct.unpack_from('=i', data, offset + _NLMSG_HEADER.size)
                    if code:
                        raise OSError(-code, f'sock_diag: {os.strerror(-code)}')
                elif kind == _SOCK_DIAG_BY_FAMILY:
                    found = _parse(data[offset + _NLMSG_HEADER.size : offset + length])
                    if found is not None:
                        sockets.append(found)
                if length < _NLMSG_HEADER.size:
                    return sockets
                offset += _align(length)


def port_totals(port: int) -> dict[str, int]:
    """Bytes `received` and `sent` over the open connections whose local port is `port`."""
    received = sent = 0
    for each in tcp_sockets():
        if each.local_port == port:
            received += each.received
            sent += each.sent
    return {'received': received, 'sent': sent}

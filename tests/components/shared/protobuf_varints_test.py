"""`protobuf_varints`: sizes at the byte boundaries, and the bytes protobuf writes."""

import numpy as np

from asynctrain.components.shared import protobuf_varints


def test_varint_sizes_at_boundaries():
    values = np.array([0, 127, 128, 2**14 - 1, 2**14, 2**63, 2**64 - 1], np.uint64)
    assert protobuf_varints.varint_sizes(values).tolist() == [1, 1, 2, 2, 3, 10, 10]


def test_put_varints_writes_the_wire_format_at_each_cursor():
    values = np.array([0, 1, 127, 128, 300, -1], np.int64).view(np.uint64)
    cursor = np.concatenate([[0], np.cumsum(protobuf_varints.varint_sizes(values))])
    out = np.zeros(int(cursor[-1]), np.uint8)

    end = protobuf_varints.put_varints(out, cursor[:-1], values)

    assert out.tobytes() == b'\x00\x01\x7f\x80\x01\xac\x02' + b'\xff' * 9 + b'\x01'
    assert cursor.tolist() == [0, 1, 2, 3, 5, 7, 17]
    assert end.tolist() == cursor[1:].tolist()


def test_one_varint():
    assert [protobuf_varints.varint(n) for n in (0, 127, 128, 300)] == [
        b'\x00',
        b'\x7f',
        b'\x80\x01',
        b'\xac\x02',
    ]

"""Protobuf varints, one value or many at once with NumPy.

Shared by the two encoders that write `tf.train.Example` bytes without building protos: the
ExampleGen's (`example_gen/example_encoder.py`, one example per row) and the ExampleBatcher's
(`example_wire.py`, column-wise records). A varint holds 7 bits a byte, low bits
first, the high bit set on every byte but the last; a negative int64 is its two's complement as
an unsigned 64-bit value (ten bytes).
"""

from __future__ import annotations

import numpy as np

_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)


def varint(value: int) -> bytes:
    """One non-negative integer as a varint."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes each unsigned 64-bit value takes as a protobuf varint."""
    values = values.astype(np.uint64, copy=False)
    return np.searchsorted(_VARINT_LIMITS, values, side='right').astype(np.int64) + 1


def put_varints(out: np.ndarray, cursor: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Writes `values` as varints into the uint8 array `out` at `cursor` (one offset per value);
    returns the advanced cursor."""
    values = values.astype(np.uint64, copy=False)
    if not len(values):
        return cursor
    if values.max() < 0x80:  # The common case: one byte each, one scatter.
        out[cursor] = values.astype(np.uint8)
        return cursor + 1
    sizes = varint_sizes(values)
    remaining = values.copy()
    for j in range(int(sizes.max())):
        active = sizes > j
        byte = (remaining & np.uint64(0x7F)).astype(np.uint8)
        byte |= np.where(sizes > j + 1, np.uint8(0x80), np.uint8(0))
        out[cursor[active] + j] = byte[active]
        remaining >>= np.uint64(7)
    return cursor + sizes

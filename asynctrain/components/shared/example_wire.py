"""Column-wise `tf.Example`s serialized straight from NumPy columns.

A record holds up to `examples_per_record` examples, each feature's values example after example.
Building `tf.train.Example` protos from arrays converts every value in Python, the ExampleBatcher's
largest Python cost in a profile (py-spy) of a million taxi rows; here NumPy lays the values out in
the protobuf wire format, column by column, and Python writes only the few header bytes of each
record and feature. The bytes are those of
`Example.SerializeToString(deterministic=True)` (map entries sorted by key), so a rerun with the
same seed writes the same files (tests/components/shared/example_wire_test.py compares
them with protobuf's own serialization).

Wire format (tensorflow/core/example/example.proto, feature.proto): Example.features = 1;
Features.feature = 1, a map whose entries are key = 1, value = 2; Feature is one of
bytes_list = 1, float_list = 2, int64_list = 3; each list's values are field 1, packed for floats
(little-endian float32) and int64s (varints, `asynctrain/components/shared/protobuf_varints`), one field per value
for bytes. The ExampleGen's encoder (`example_gen/example_encoder.py`) writes one example per row
from Arrow columns with missing cells; this one writes many examples per record from dense
NumPy columns.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from asynctrain.components.shared.protobuf_varints import put_varints, varint, varint_sizes

_LENGTH_DELIMITED = {1: b'\x0a', 2: b'\x12', 3: b'\x1a'}  # field number -> tag (wire type 2)
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3


def _field(number: int, payload: bytes) -> bytes:
    return _LENGTH_DELIMITED[number] + varint(len(payload)) + payload


def _varints(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """int64 `values` as concatenated varints, and the byte offset where each value starts
    (one more offset at the end)."""
    unsigned = np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)
    offsets = np.concatenate([[0], np.cumsum(varint_sizes(unsigned))])
    out = np.empty(int(offsets[-1]), np.uint8)
    put_varints(out, offsets[:-1], unsigned)
    return out.tobytes(), offsets


def _column(values: np.ndarray) -> tuple[int, bytes, np.ndarray]:
    """A feature's list kind, the wire bytes of its values and each value's starting offset."""
    flat = values.reshape(-1)
    if flat.dtype == np.float32:
        return _FLOAT_LIST, flat.astype('<f4').tobytes(), np.arange(len(flat) + 1) * 4
    if flat.dtype == np.int64:
        data, offsets = _varints(flat)
        return _INT64_LIST, data, offsets
    fields = [_field(1, bytes(v)) for v in flat]
    offsets = np.concatenate([[0], np.cumsum([len(f) for f in fields], dtype=np.int64)])
    return _BYTES_LIST, b''.join(fields), offsets


def encode_records(columns: Mapping[str, np.ndarray], examples_per_record: int) -> list[bytes]:
    """The rows of `columns` (float32, int64 or bytes arrays of equal length, any trailing shape)
    as serialized column-wise `tf.Example`s of `examples_per_record` examples each (the last may
    hold fewer), in order."""
    rows = len(next(iter(columns.values())))
    starts = np.append(np.arange(0, rows, examples_per_record, dtype=np.int64), rows)
    encoded = []
    for name in sorted(columns, key=lambda n: n.encode('utf-8')):
        kind, data, offsets = _column(columns[name])
        width = (len(offsets) - 1) // rows if rows else 0
        bounds = offsets[starts * width].tolist()
        encoded.append((_field(1, name.encode('utf-8')), kind, data, bounds))
    records = []
    for r in range(len(starts) - 1):
        entries = []
        for key, kind, data, bounds in encoded:
            values = data[bounds[r] : bounds[r + 1]]
            listed = values if kind == _BYTES_LIST or not values else _field(1, values)
            entries.append(_field(1, key + _field(2, _field(kind, listed))))
        records.append(_field(1, b''.join(entries)))
    return records

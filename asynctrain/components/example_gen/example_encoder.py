"""Encodes typed columns as serialized `tf.train.Example`s, vectorized with numpy.

The bytes are exactly `Example.SerializeToString(deterministic=True)` of the example stock
CsvExampleGen builds for the same row: features in key order, a missing cell as an empty typed
list. Stock hashes those bytes to pick a row's split, so equal bytes give equal splits.
tfx-bsl's `RecordBatchToExamples` is as fast but writes the feature map in hash order, so its
bytes (and therefore the split of a row) differ from stock's; that is why this module exists.

Each column is written with a handful of numpy scatters over all rows at once; there is no
Python loop per row or per cell. The output can reserve bytes before and after every example
so that TFRecord framing (`tfrecord_writer`) needs no copy.
"""

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.shared.protobuf_varints import put_varints, varint, varint_sizes

# tf.train.Feature field tags: bytes_list = 1, float_list = 2, int64_list = 3 (wire type 2).
_BYTES_LIST_TAG, _FLOAT_LIST_TAG, _INT64_LIST_TAG = 0x0A, 0x12, 0x1A
_LEN_TAG = 0x0A  # Field 1, length-delimited: Example.features, Features.feature, *List.value.
_VALUE_TAG = 0x12  # Map entry field 2 (the Feature).


class EncodedExamples(NamedTuple):
    """Serialized examples laid out in one buffer.

    Attributes:
      buffer: uint8 array holding every example, each preceded by `prefix` and followed by
        `suffix` reserved bytes.
      starts: Offset of each example's first byte.
      ends: Offset just past each example's last byte.
    """

    buffer: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def example(self, i: int) -> bytes:
        return self.buffer[self.starts[i] : self.ends[i]].tobytes()


def _put_constant(out: np.ndarray, cursor: np.ndarray, constant: bytes) -> np.ndarray:
    if len(constant) == 1:
        out[cursor] = constant[0]
    else:
        out[cursor[:, None] + np.arange(len(constant))] = np.frombuffer(constant, np.uint8)
    return cursor + len(constant)


class _Column(NamedTuple):
    """One column prepared for writing: its map-entry sizes and what writes its value."""

    key: bytes
    column_type: ColumnType
    valid: np.ndarray  # bool, True where the cell is present.
    value_size: np.ndarray  # Bytes of the serialized Feature, per row.
    payload: object  # int64 values, float32 values, or (offsets, data) of UTF-8 strings.


def _prepare(name: str, column_type: ColumnType, array: pa.Array) -> _Column:
    n = len(array)
    key = name.encode('utf-8')
    if column_type == ColumnType.UNKNOWN:
        return _Column(key, column_type, np.zeros(n, bool), np.zeros(n, np.int64), None)
    valid = ~np.asarray(array.is_null(), bool) if array.null_count else np.ones(n, bool)
    if column_type == ColumnType.INT:
        values = np.asarray(array.fill_null(0), np.int64).view(np.uint64)
        value_size = np.where(valid, 4 + varint_sizes(values), 2)
        return _Column(key, column_type, valid, value_size, values)
    if column_type == ColumnType.FLOAT:
        with np.errstate(over='ignore'):  # Beyond float32 becomes inf, as in stock's FloatList.
            values = np.asarray(array.fill_null(0.0), np.float64).astype(np.float32)
        return _Column(key, column_type, valid, np.where(valid, 8, 2).astype(np.int64), values)
    offset_type = np.int64 if array.type in (pa.large_string(), pa.large_binary()) else np.int32
    offsets = np.frombuffer(array.buffers()[1], offset_type)[array.offset : array.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = (
        np.frombuffer(array.buffers()[2], np.uint8) if array.buffers()[2] else np.zeros(0, np.uint8)
    )
    lengths = np.diff(offsets)
    list_size = 1 + varint_sizes(lengths) + lengths
    value_size = np.where(valid, 1 + varint_sizes(list_size) + list_size, 2)
    return _Column(key, column_type, valid, value_size, (offsets, data, lengths, list_size))


def _entry_sizes(column: _Column) -> tuple[np.ndarray, np.ndarray]:
    """(size of the map entry body, size of the whole `feature` field) per row."""
    key_part = 1 + len(varint(len(column.key))) + len(column.key)
    body = key_part + 1 + varint_sizes(column.value_size) + column.value_size
    return body, 1 + varint_sizes(body) + body


def _put_value(out: np.ndarray, cursor: np.ndarray, column: _Column) -> np.ndarray:
    """Writes the serialized Feature of every row; returns the advanced cursor."""
    if column.column_type == ColumnType.UNKNOWN:
        return cursor
    tag = {
        ColumnType.INT: _INT64_LIST_TAG,
        ColumnType.FLOAT: _FLOAT_LIST_TAG,
        ColumnType.BYTES: _BYTES_LIST_TAG,
    }[column.column_type]
    out[cursor] = tag
    valid = column.valid
    missing = ~valid
    out[cursor[missing] + 1] = 0  # An empty list: the typed field with no values.
    at = cursor[valid] + 1
    if column.column_type == ColumnType.INT:
        values = column.payload[valid]
        sizes = column.value_size[valid] - 4
        out[at] = (sizes + 2).astype(np.uint8)
        out[at + 1] = _LEN_TAG
        out[at + 2] = sizes.astype(np.uint8)
        put_varints(out, at + 3, values)
    elif column.column_type == ColumnType.FLOAT:
        value_bytes = column.payload[valid].view(np.uint8).reshape(-1, 4)
        out[at] = 6
        out[at + 1] = _LEN_TAG
        out[at + 2] = 4
        for j in range(4):
            out[at + 3 + j] = value_bytes[:, j]
    else:
        offsets, data, lengths, list_size = column.payload
        at = put_varints(out, at, list_size[valid])
        out[at] = _LEN_TAG
        at = put_varints(out, at + 1, lengths[valid])
        valid_lengths = lengths[valid]
        total = int(valid_lengths.sum())
        if total:
            # Byte k of the concatenated strings goes from `source + k` to `dest + k`.
            before = np.cumsum(valid_lengths) - valid_lengths
            counter = np.arange(total, dtype=np.int64)
            out[np.repeat(at - before, valid_lengths) + counter] = data[
                np.repeat(offsets[:-1][valid] - before, valid_lengths) + counter
            ]
    return cursor + column.value_size


def encode_examples(
    columns: Mapping[str, pa.Array],
    column_types: Mapping[str, ColumnType],
    prefix: int = 0,
    suffix: int = 0,
) -> EncodedExamples:
    """Serializes one `tf.train.Example` per row of `columns`, deterministically.

    Args:
      columns: Equal-length Arrow arrays: int64 for INT, float64 for FLOAT (rounded to float32),
        string for BYTES, anything for UNKNOWN (written as an empty `Feature()`); nulls are
        missing cells.
      column_types: The type of each column.
      prefix: Bytes to reserve before each example (for TFRecord framing).
      suffix: Bytes to reserve after each example.
    """
    names = sorted(columns, key=lambda name: name.encode('utf-8'))
    n = len(columns[names[0]]) if names else 0
    prepared = [_prepare(name, column_types[name], columns[name]) for name in names]
    sizes = [_entry_sizes(column) for column in prepared]
    features_size = np.zeros(n, np.int64)
    for _, field_size in sizes:
        features_size += field_size
    example_size = 1 + varint_sizes(features_size) + features_size
    record_size = prefix + example_size + suffix
    record_starts = np.zeros(n, np.int64)
    np.cumsum(record_size[:-1], out=record_starts[1:])
    out = np.zeros(int(record_size.sum()), np.uint8)
    starts = record_starts + prefix
    cursor = _put_constant(out, starts, bytes([_LEN_TAG]))
    cursor = put_varints(out, cursor, features_size)
    for column, (body_size, _) in zip(prepared, sizes):
        key_part = bytes([_LEN_TAG]) + varint(len(column.key)) + column.key + bytes([_VALUE_TAG])
        if n and body_size.max() < 0x80 and column.value_size.max() < 0x80:
            # Usual case: both sizes fit one byte, so the whole entry header is one 2-D scatter.
            header = np.empty((n, len(key_part) + 3), np.uint8)
            header[:, 0] = _LEN_TAG
            header[:, 1] = body_size
            header[:, 2:-1] = np.frombuffer(key_part, np.uint8)
            header[:, -1] = column.value_size
            out[cursor[:, None] + np.arange(header.shape[1])] = header
            cursor = cursor + header.shape[1]
        else:
            cursor = _put_constant(out, cursor, bytes([_LEN_TAG]))
            cursor = put_varints(out, cursor, body_size)
            cursor = _put_constant(out, cursor, key_part)
            cursor = put_varints(out, cursor, column.value_size)
        cursor = _put_value(out, cursor, column)
    return EncodedExamples(out, starts, starts + example_size)

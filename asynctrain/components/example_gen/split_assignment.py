"""Assigns rows to output splits exactly as stock ExampleGen does, for whole chunks at once.

Stock (`base_example_gen_executor._PartitionFn`) takes the SHA-256 of the example's
deterministic serialization (or of the partition feature's serialization), reads it as a
big-endian integer, takes it modulo the total hash buckets, and finds the split whose cumulative
bucket count is above it. The same arithmetic on the same bytes gives the same split; the one
Python step per row is the hash itself.
"""

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from asynctrain.components.example_gen import example_encoder
from asynctrain.components.shared.feature_types import ColumnType


def bucket_bounds(hash_buckets: Sequence[int]) -> np.ndarray:
    """Cumulative bucket counts, e.g. (2, 1) -> [2, 3]."""
    if not hash_buckets or any(b <= 0 for b in hash_buckets):
        raise ValueError(f'hash_buckets must be positive, got {list(hash_buckets)}')
    return np.cumsum(np.asarray(hash_buckets, np.int64))


def splits_of_keys(keys: Sequence[bytes], bounds: np.ndarray) -> np.ndarray:
    """Split index of each partition key, as stock's `_PartitionFn`."""
    total = int(bounds[-1])
    buckets = np.fromiter(
        (int.from_bytes(hashlib.sha256(key).digest(), 'big') % total for key in keys),
        np.int64,
        count=len(keys),
    )
    return np.searchsorted(bounds, buckets, side='right')


def hash_splits_and_crcs(
    data: bytes, starts: np.ndarray, ends: np.ndarray, bounds: np.ndarray | None, crc_fn
) -> tuple[np.ndarray | None, list]:
    """Split index of each example (hashing its bytes, as stock) and its CRC32C, in one pass.

    With `bounds` None only CRCs are computed (input splits are kept, nothing to hash). Row bytes
    are sliced once and not kept, so memory stays at one chunk's buffer.
    """
    crcs = []
    if bounds is None:
        for a, b in zip(starts.tolist(), ends.tolist()):
            crcs.append(crc_fn(data[a:b]))
        return None, crcs
    total = int(bounds[-1])
    buckets = np.empty(len(starts), np.int64)
    sha256 = hashlib.sha256
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        row = data[a:b]
        crcs.append(crc_fn(row))
        buckets[i] = int.from_bytes(sha256(row).digest(), 'big') % total
    return np.searchsorted(bounds, buckets, side='right'), crcs


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def feature_keys(name: str, column_type: ColumnType, column: pa.Array) -> list[bytes]:
    """Each row's `Feature.SerializeToString(deterministic=True)` for the partition feature.

    Raises:
      ValueError: the column is not INT or BYTES (stock allows only int64_list and bytes_list).
    """
    if column_type not in (ColumnType.INT, ColumnType.BYTES):
        raise ValueError(
            f'partition_feature_name {name!r} is {column_type.name}; only INT and '
            'BYTES features can partition, as in stock ExampleGen.'
        )
    encoded = example_encoder.encode_examples({name: column}, {name: column_type})
    data = encoded.buffer.tobytes()
    keys = []
    for start, end in zip(encoded.starts.tolist(), encoded.ends.tolist()):
        # Example{features(1){feature(1){key(1), value(2): Feature}}}: skip to the Feature.
        _, pos = _read_varint(data, start + 1)
        _, pos = _read_varint(data, pos + 1)
        key_size, pos = _read_varint(data, pos + 1)
        _, pos = _read_varint(data, pos + key_size + 1)
        keys.append(data[pos:end])
    return keys

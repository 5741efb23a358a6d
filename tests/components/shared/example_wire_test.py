"""`example_wire.encode_records`: the bytes protobuf's deterministic serialization writes for the
same column-wise `tf.Example`s, for every kind of value the ExampleBatcher writes."""

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.shared import example_wire


def _reference(columns, examples_per_record):
    """Records built as `tf.train.Example` protos and serialized by protobuf itself."""
    rows = len(next(iter(columns.values())))
    records = []
    for start in range(0, rows, examples_per_record):
        features = {}
        for name, values in columns.items():
            flat = values[start : start + examples_per_record].reshape(-1)
            if flat.dtype == np.float32:
                feature = tf.train.Feature(float_list=tf.train.FloatList(value=flat))
            elif flat.dtype == np.int64:
                feature = tf.train.Feature(int64_list=tf.train.Int64List(value=flat))
            else:
                feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(flat)))
            features[name] = feature
        example = tf.train.Example(features=tf.train.Features(feature=features))
        records.append(example.SerializeToString(deterministic=True))
    return records


def _columns(rows, seed=0):
    rng = np.random.default_rng(seed)
    ints = rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64, endpoint=True)
    ints[: min(rows, 4)] = [0, 127, 128, -1][: min(rows, 4)]
    return {
        'zscore': rng.normal(size=rows).astype(np.float32),
        'ids': rng.integers(0, 1010, rows),
        'label': rng.integers(-1, 2, rows),
        'wide ints': ints,
        'embedding': rng.normal(size=(rows, 3)).astype(np.float32),
        'pairs': rng.integers(0, 300, (rows, 2)),
        'text': np.array([b'', b'a', 'é'.encode(), b'x' * 200] * rows, dtype=object)[:rows],
        'Upper': np.full(rows, np.float32('nan')),
    }


@pytest.mark.parametrize(
    ('rows', 'examples_per_record'), [(1, 1), (7, 3), (256, 256), (1000, 64), (300, 1000)]
)
def test_records_are_protobufs_deterministic_serialization_byte_for_byte(rows, examples_per_record):
    columns = _columns(rows)

    records = example_wire.encode_records(columns, examples_per_record)

    assert len(records) == -(-rows // examples_per_record)
    assert records == _reference(columns, examples_per_record)


def test_records_parse_back_to_the_columns():
    columns = {'x': np.arange(10, dtype=np.float32), 'y': np.arange(10, dtype=np.int64) - 5}

    records = example_wire.encode_records(columns, 4)

    parsed = [tf.train.Example.FromString(r).features.feature for r in records]
    assert [list(p['y'].int64_list.value) for p in parsed] == [
        [-5, -4, -3, -2],
        [-1, 0, 1, 2],
        [3, 4],
    ]
    assert list(parsed[2]['x'].float_list.value) == [8.0, 9.0]

"""The encoder writes stock's deterministic bytes; TFRecord files read back in TensorFlow; rows
land in the same split as stock's `_PartitionFn` puts them."""

import google_crc32c
import numpy as np
import pyarrow as pa
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from tfx.components.example_gen import base_example_gen_executor
from tfx.proto import example_gen_pb2

from asynctrain.components.example_gen import example_encoder, split_assignment, tfrecord_writer
from asynctrain.components.shared.feature_types import ColumnType

TYPES = {
    'zeta': ColumnType.INT,
    'alpha': ColumnType.FLOAT,
    'mid': ColumnType.BYTES,
    'empty': ColumnType.UNKNOWN,
}


def stock_example(row):
    """The tf.Example stock CsvExampleGen builds for a row (None = missing)."""
    feature = {}
    for name, column_type in TYPES.items():
        value = row[name]
        values = [] if value is None else [value]
        if column_type == ColumnType.UNKNOWN:
            feature[name] = tf.train.Feature()
        elif column_type == ColumnType.INT:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        elif column_type == ColumnType.FLOAT:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[v.encode() for v in values])
            )
    return tf.train.Example(features=tf.train.Features(feature=feature))


def encode(rows, prefix=0, suffix=0):
    columns = {
        'zeta': pa.array([r['zeta'] for r in rows], pa.int64()),
        'alpha': pa.array([r['alpha'] for r in rows], pa.float64()),
        'mid': pa.array([r['mid'] for r in rows], pa.string()),
        'empty': pa.nulls(len(rows)),
    }
    return example_encoder.encode_examples(columns, TYPES, prefix, suffix)


rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            'zeta': st.none() | st.integers(-(2**63), 2**63 - 1),
            'alpha': st.none() | st.floats(allow_nan=False, width=64),
            'mid': st.none() | st.text(max_size=300),
            'empty': st.none(),
        }
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_bytes_equal_stock_deterministic_serialization(rows):
    encoded = encode(rows)
    for i, row in enumerate(rows):
        assert encoded.example(i) == stock_example(row).SerializeToString(deterministic=True)


def test_gzip_tfrecords_read_back_in_tensorflow(tmp_path):
    rows = [{'zeta': i, 'alpha': i / 3, 'mid': 'x' * i, 'empty': None} for i in range(50)]
    encoded = encode(rows, tfrecord_writer.HEADER_BYTES, tfrecord_writer.FOOTER_BYTES)
    crcs = tfrecord_writer.crc32c_each(encoded.buffer.tobytes(), encoded.starts, encoded.ends)
    tfrecord_writer.frame(encoded, crcs)
    keep = np.arange(50) % 2 == 0
    path = tmp_path / 'even.gz'
    path.write_bytes(tfrecord_writer.gzip_bytes(tfrecord_writer.select_records(encoded, keep)))
    read = [
        tf.train.Example.FromString(r)
        for r in tf.data.TFRecordDataset(str(path), compression_type='GZIP').as_numpy_iterator()
    ]
    assert [e.features.feature['zeta'].int64_list.value[0] for e in read] == list(range(0, 50, 2))
    assert read[3].features.feature['mid'].bytes_list.value[0] == b'x' * 6


@settings(max_examples=30, deadline=None)
@given(rows_strategy, st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_split_of_each_row_matches_stock_partition_fn(rows, hash_buckets):
    split_config = example_gen_pb2.SplitConfig(
        splits=[
            example_gen_pb2.SplitConfig.Split(name=f's{i}', hash_buckets=b)
            for i, b in enumerate(hash_buckets)
        ]
    )
    bounds = split_assignment.bucket_bounds(hash_buckets)
    encoded = encode(rows)
    keys = [encoded.example(i) for i in range(len(rows))]
    ours = split_assignment.splits_of_keys(keys, bounds).tolist()
    data = encoded.buffer.tobytes()
    one_pass, crcs = split_assignment.hash_splits_and_crcs(
        data, encoded.starts, encoded.ends, bounds, google_crc32c.value
    )
    assert one_pass.tolist() == ours
    assert crcs == [google_crc32c.value(key) for key in keys]
    stock = [
        base_example_gen_executor._PartitionFn(  # pylint: disable=protected-access
            stock_example(row), len(hash_buckets), bounds.tolist(), split_config
        )
        for row in rows
    ]
    assert ours == stock


def test_partition_feature_split_matches_stock():
    rows = [{'zeta': i * 7 - 20, 'alpha': 1.0, 'mid': f'm{i}', 'empty': None} for i in range(40)]
    split_config = example_gen_pb2.SplitConfig(
        splits=[
            example_gen_pb2.SplitConfig.Split(name='a', hash_buckets=3),
            example_gen_pb2.SplitConfig.Split(name='b', hash_buckets=2),
        ],
        partition_feature_name='zeta',
    )
    keys = split_assignment.feature_keys(
        'zeta', ColumnType.INT, pa.array([r['zeta'] for r in rows], pa.int64())
    )
    ours = split_assignment.splits_of_keys(keys, np.array([3, 5])).tolist()
    stock = [
        base_example_gen_executor._PartitionFn(  # pylint: disable=protected-access
            stock_example(row), 2, [3, 5], split_config
        )
        for row in rows
    ]
    assert ours == stock
    assert set(ours) == {0, 1}

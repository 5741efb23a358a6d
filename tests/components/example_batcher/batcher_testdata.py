"""Small synthetic splits of tf.Examples, every dtype and shape the batched format carries, each
example numbered by `id` so that a test can tell which examples and records it got back."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

FEATURE_SPEC = {
    'id': tf.io.FixedLenFeature([], tf.int64),
    'fare': tf.io.FixedLenFeature([], tf.float32),
    'company': tf.io.FixedLenFeature([1], tf.int64),
    'pickup': tf.io.FixedLenFeature([2], tf.float32),
    'payment': tf.io.FixedLenFeature([], tf.string),
    'label': tf.io.FixedLenFeature([], tf.int64),
}
LABEL_KEY = 'label'


def columns(count: int, first_id: int = 0) -> dict[str, np.ndarray]:
    """`count` examples with ids first_id.. and values derived from the id."""
    ids = np.arange(first_id, first_id + count, dtype=np.int64)
    return {
        'id': ids,
        'fare': (ids * 0.25).astype(np.float32),
        'company': (ids % 7).reshape(-1, 1),
        'pickup': np.stack([ids * 0.5, -ids * 1.0], axis=1).astype(np.float32),
        'payment': np.array([f'pay{i % 3}'.encode() for i in ids], dtype=object),
        'label': ids % 2,
    }


def _example(values: dict[str, np.ndarray], row: int) -> bytes:
    features = {}
    for name, column in values.items():
        value = np.asarray(column[row]).reshape(-1)
        if column.dtype == np.float32:
            features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        elif column.dtype == np.int64:
            features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
        else:
            features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(value)))
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)


def write_examples(split_dir: str, count: int, num_files: int = 2, first_id: int = 0) -> str:
    """Writes `count` examples, one tf.Example per record, as Transform does: GZIP TFRecords in
    `split_dir`. Returns the file pattern."""
    os.makedirs(split_dir, exist_ok=True)
    values = columns(count, first_id)
    options = tf.io.TFRecordOptions(compression_type='GZIP')
    per_file = -(-count // num_files)
    for index in range(num_files):
        path = os.path.join(split_dir, f'transformed_examples-{index:05d}-of-{num_files:05d}.gz')
        with tf.io.TFRecordWriter(path, options) as writer:
            for row in range(index * per_file, min(count, (index + 1) * per_file)):
                writer.write(_example(values, row))
    return os.path.join(split_dir, '*.gz')

"""A tiny transformed dataset with one categorical feature hashed into 10^6 ids: enough rows for
the tables' placement, resharding and export tests, whose subject is the size of the table, not
the data.

Raw rows: `score` (float), `item` (a string id drawn Zipf-like from 5,000 items) and `clicked`
(0/1, more likely for a high score and for even items). The `preprocessing_fn` keeps `score`,
hashes `item` into `TABLE_ROWS` ids (recording the id range as the int domain the Trainer sizes
the table with, as Transform's hashing does) and passes the label through; it runs on Beam's
DirectRunner through `trainer_testdata.write_transformed_data`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.components.trainer.trainer_testdata import write_transformed_data

TABLE_ROWS = 1_000_000
NUMERIC = 'score'
CATEGORICAL = 'item'
LABEL = 'clicked'
NUM_TRAIN = 2000
NUM_EVAL = 200


@dataclasses.dataclass(frozen=True)
class ShardedTableData:
    """Attributes:
    examples: `Split-train/` and `Split-eval/` of GZIP TFRecords of transformed tf.Examples.
    transform_graph: `transform_fn/`, `transformed_metadata/`, and the raw `metadata/`.
    eval_rows: The raw eval rows (dicts of Python values).
    """

    examples: str
    transform_graph: str
    eval_rows: tuple


def rows(count: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    items = np.minimum(rng.zipf(1.2, count), 5000)
    scores = rng.normal(size=count)
    logits = 2.0 * scores + np.where(items % 2 == 0, 1.0, -1.0)
    clicked = rng.random(count) < 1.0 / (1.0 + np.exp(-logits))
    return [
        {NUMERIC: float(s), CATEGORICAL: f'item-{i}', LABEL: int(c)}
        for s, i, c in zip(scores, items, clicked)
    ]


def raw_example(row: dict) -> bytes:
    import tensorflow as tf

    feature = {}
    for name, value in row.items():
        if isinstance(value, float):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        elif isinstance(value, str):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def preprocessing_fn(inputs: dict) -> dict:
    import tensorflow as tf
    import tensorflow_transform as tft
    from tensorflow_transform import schema_inference

    ids = tft.hash_strings(inputs[CATEGORICAL], TABLE_ROWS)
    schema_inference.set_tensor_schema_override(
        ids, tf.constant(0, tf.int64), tf.constant(TABLE_ROWS - 1, tf.int64)
    )
    return {NUMERIC: inputs[NUMERIC], CATEGORICAL: ids, LABEL: inputs[LABEL]}


def make(root: str) -> ShardedTableData:
    import tensorflow as tf
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    raw_spec = {
        NUMERIC: tf.io.FixedLenFeature([], tf.float32),
        CATEGORICAL: tf.io.FixedLenFeature([], tf.string),
        LABEL: tf.io.FixedLenFeature([], tf.int64),
    }
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    train, evaluation = rows(NUM_TRAIN, seed=1), rows(NUM_EVAL, seed=2)
    examples, transform_graph = write_transformed_data(
        root, preprocessing_fn, metadata, train, evaluation
    )
    return ShardedTableData(examples, transform_graph, tuple(evaluation))

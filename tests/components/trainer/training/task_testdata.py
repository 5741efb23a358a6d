"""Tiny transformed datasets for the multiclass and regression tasks, made with tf.Transform.

Generated rows (seeded), penguin-like, with the quirks of real column names: spaces, parentheses
and units (`Culmen Length (mm)`), and class names with spaces and parentheses. A small
`preprocessing_fn` of its own (z-scored numeric feature, a vocabulary for the categorical one,
the trainer's `LABEL_VOCABULARY` for a multiclass label, a float label as is for regression) runs
on Beam's DirectRunner through `trainer_testdata.write_transformed_data`, which lays the output out
as TFX Transform does.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from asynctrain.components.shared.tasks import LABEL_VOCABULARY
from tests.components.trainer.trainer_testdata import write_transformed_data

NUMERIC = 'Culmen Length (mm)'
CATEGORICAL = 'Island'
MULTICLASS_LABEL = 'Species'
REGRESSION_LABEL = 'Body Mass (g)'
CLASSES = ('Adelie (P. adeliae)', 'Chinstrap penguin', 'Gentoo (P. papua)')
ISLANDS = ('Biscoe', 'Dream', 'Torgersen')
# An eval row may hold a class the train split never had: Transform gives it id -1.
UNSEEN_CLASS = 'Emperor (A. forsteri)'
NUM_TRAIN = 240
NUM_EVAL = 60


@dataclasses.dataclass(frozen=True)
class TinyData:
    """Attributes:
    examples: `Split-train/` and `Split-eval/` of GZIP TFRecords of transformed tf.Examples.
    transform_graph: `transform_fn/`, `transformed_metadata/`, and the raw `metadata/`.
    label_key: The transformed label.
    train_rows, eval_rows: The raw rows (dicts of Python values).
    """

    examples: str
    transform_graph: str
    label_key: str
    train_rows: tuple
    eval_rows: tuple


def rows(task_type: str, count: int, seed: int) -> list[dict]:
    """Raw rows: the culmen length and island carry the class (multiclass) or the body mass
    (regression, in grams: mean about 4200, so predictions must be de-standardized)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        k = i % len(CLASSES)
        island = ISLANDS[k] if rng.random() < 0.7 else ISLANDS[rng.integers(3)]
        length = float(38.0 + 5.0 * k + rng.normal(0.0, 1.5))
        row = {NUMERIC: length, CATEGORICAL: island}
        if task_type == 'multiclass':
            row[MULTICLASS_LABEL] = CLASSES[k]
        else:
            mass = 3000.0 + 30.0 * length + 400.0 * ISLANDS.index(island) + rng.normal(0, 50)
            row[REGRESSION_LABEL] = float(mass)
        out.append(row)
    return out


def raw_feature_spec(task_type: str) -> dict:
    import tensorflow as tf

    label = MULTICLASS_LABEL if task_type == 'multiclass' else REGRESSION_LABEL
    return {
        NUMERIC: tf.io.FixedLenFeature([], tf.float32),
        CATEGORICAL: tf.io.FixedLenFeature([], tf.string),
        label: tf.io.VarLenFeature(tf.string if task_type == 'multiclass' else tf.float32),
    }


def raw_example(row: dict) -> bytes:
    """A raw row as a serialized tf.Example; keys missing from `row` are left out."""
    import tensorflow as tf

    feature = {}
    for name, value in row.items():
        if isinstance(value, str):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        else:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _preprocessing_fn(task_type: str):
    import tensorflow as tf
    import tensorflow_transform as tft

    def densify(sparse, default):
        # The label is optional in the raw schema, so that serving rows need not carry it.
        dense = tft.sparse_tensor_to_dense_with_shape(sparse, [None, 1], default_value=default)
        return tf.squeeze(dense, axis=1)

    def preprocessing_fn(inputs):
        outputs = {
            NUMERIC: tft.scale_to_z_score(inputs[NUMERIC]),
            CATEGORICAL: tft.compute_and_apply_vocabulary(inputs[CATEGORICAL], num_oov_buckets=1),
        }
        if task_type == 'multiclass':
            label = densify(inputs[MULTICLASS_LABEL], '')
            outputs[MULTICLASS_LABEL] = tft.compute_and_apply_vocabulary(
                label, default_value=-1, vocab_filename=LABEL_VOCABULARY
            )
        else:
            outputs[REGRESSION_LABEL] = densify(inputs[REGRESSION_LABEL], 0.0)
        return outputs

    return preprocessing_fn


def make(root: str, task_type: str) -> TinyData:
    """Runs the tiny tf.Transform pipeline for `task_type` ('multiclass' or 'regression')."""
    import tensorflow as tf
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    train = rows(task_type, NUM_TRAIN, seed=1)
    evaluation = rows(task_type, NUM_EVAL, seed=2)
    if task_type == 'multiclass':
        evaluation[-1] = dict(evaluation[-1], **{MULTICLASS_LABEL: UNSEEN_CLASS})
    spec = raw_feature_spec(task_type)

    def instance(row):
        out = {}
        for name, feature_spec in spec.items():
            value = row[name]
            if isinstance(value, str):
                value = value.encode()
            if isinstance(feature_spec, tf.io.FixedLenFeature):
                out[name] = value
            else:
                out[name] = np.array([value], dtype=feature_spec.dtype.as_numpy_dtype)
        return out

    examples, transform_graph = write_transformed_data(
        root,
        _preprocessing_fn(task_type),
        dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec)),
        [instance(r) for r in train],
        [instance(r) for r in evaluation],
    )
    label_key = MULTICLASS_LABEL if task_type == 'multiclass' else REGRESSION_LABEL
    return TinyData(
        examples=examples,
        transform_graph=transform_graph,
        label_key=label_key,
        train_rows=tuple(train),
        eval_rows=tuple(evaluation),
    )

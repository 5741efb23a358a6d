"""Tiny transformed datasets for the multiclass and regression tasks, made with tf.Transform.

Generated rows (seeded), penguin-like, with the quirks of real column names: spaces, parentheses
and units (`Culmen Length (mm)`), and class names with spaces and parentheses. A small
`preprocessing_fn` of its own (z-scored numeric feature, a vocabulary for the categorical one,
the `label_classes` vocabulary for a multiclass label, a float label as is for regression) runs
on Beam's DirectRunner, and the output is laid out as TFX Transform lays it out (see
`trainer_testdata.make_transformed_data`).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

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
                label, default_value=-1, vocab_filename='label_classes'
            )
        else:
            outputs[REGRESSION_LABEL] = densify(inputs[REGRESSION_LABEL], 0.0)
        return outputs

    return preprocessing_fn


def make(root: str, task_type: str) -> TinyData:
    """Runs the tiny tf.Transform pipeline for `task_type` ('multiclass' or 'regression')."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

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

    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    examples = os.path.join(root, 'transformed_examples')
    transform_graph = os.path.join(root, 'transform_graph')
    with (
        beam.Pipeline() as p,
        tft_beam.Context(temp_dir=os.path.join(root, 'tmp'), force_tf_compat_v1=False),
    ):
        (transformed_train, transformed_metadata), transform_fn = (
            p | 'CreateTrain' >> beam.Create([instance(r) for r in train]),
            metadata,
        ) | 'AnalyzeAndTransform' >> tft_beam.AnalyzeAndTransformDataset(
            _preprocessing_fn(task_type)
        )
        transformed_eval, _ = (
            (p | 'CreateEval' >> beam.Create([instance(r) for r in evaluation]), metadata),
            transform_fn,
        ) | 'TransformEval' >> tft_beam.TransformDataset()
        coder = tft.coders.ExampleProtoCoder(transformed_metadata.schema)
        for split, data in (('train', transformed_train), ('eval', transformed_eval)):
            _ = (
                data
                | f'Encode{split}' >> beam.Map(coder.encode)
                | f'Write{split}'
                >> beam.io.WriteToTFRecord(
                    os.path.join(examples, f'Split-{split}', 'transformed_examples'),
                    file_name_suffix='.gz',
                    compression_type=beam.io.filesystem.CompressionTypes.GZIP,
                )
            )
        _ = transform_fn | 'WriteTransformFn' >> tft_beam.WriteTransformFn(transform_graph)
    metadata_io.write_metadata(metadata, os.path.join(transform_graph, 'metadata'))
    label_key = MULTICLASS_LABEL if task_type == 'multiclass' else REGRESSION_LABEL
    return TinyData(
        examples=examples,
        transform_graph=transform_graph,
        label_key=label_key,
        train_rows=tuple(train),
        eval_rows=tuple(evaluation),
    )

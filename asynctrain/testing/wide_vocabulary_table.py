"""A wide table of integer codes, every column a `vocabulary` feature, and Transform on it both
ways: one stock vocabulary analyzer per column, and our preprocessing (one analyzer for all).

It stands in for the COIL 2000 insurance table (5,822 rows, 85 integer-coded columns given the
`vocabulary` role by `asynctrain init`, a 6%-positive binary label), which is not committed: the
same shape, each column with 2 to 40 distinct codes of unequal frequency, drawn from a seed.
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing

ROWS = 5822
COLUMNS = 85
LABEL = 'CARAVAN'
POSITIVE_FRACTION = 0.06


def column_names(columns: int) -> list[str]:
    return [f'code_{i:02d}' for i in range(columns)]


def generate_rows(rows: int = ROWS, columns: int = COLUMNS, seed: int = 0) -> list[dict]:
    """`rows` instance dicts: `columns` integer codes (2 to 40 distinct per column, skewed, so
    counts tie and differ) and the 0/1 label."""
    rng = random.Random(seed)
    names = column_names(columns)
    distinct = [rng.randint(2, 40) for _ in names]
    weights = [[1.0 / (1 + k // 3) for k in range(d)] for d in distinct]
    codes = [rng.choices(range(d), w, k=rows) for d, w in zip(distinct, weights)]
    labels = [int(rng.random() < POSITIVE_FRACTION) for _ in range(rows)]
    return [
        {**{name: column[r] for name, column in zip(names, codes)}, LABEL: labels[r]}
        for r in range(rows)
    ]


def schema(columns: int = COLUMNS) -> schema_pb2.Schema:
    """Every column and the label: one INT value in every row (dense features)."""
    return schema_utils.schema_from_feature_spec(
        {name: tf.io.FixedLenFeature([], tf.int64) for name in [*column_names(columns), LABEL]}
    )


def feature_config(columns: int = COLUMNS) -> fc.FeatureConfig:
    """What `asynctrain init` gives the table: every column a `vocabulary`, the binary label."""
    return fc.parse_feature_config(
        {
            'label': {'column': LABEL, 'task': 'binary'},
            'features': [{'name': n, 'transform': 'vocabulary'} for n in column_names(columns)],
        },
        schema(columns),
    )


def stock_preprocessing_fn(config: fc.FeatureConfig) -> Callable[[dict], dict]:
    """The stock way: one `tft.vocabulary` per column (as `tft.compute_and_apply_vocabulary`),
    applied with the same OOV buckets and domain as ours, and the same label."""

    def preprocessing_fn(inputs: dict) -> dict:
        outputs = {}
        for spec in config.features:
            strings = tf.strings.as_string(inputs[spec.name])
            vocab = tft.vocabulary(
                tf.reshape(strings, [-1]), top_k=spec.top_k, vocab_filename=spec.name
            )
            outputs[spec.name] = tft.apply_vocabulary(
                tf.reshape(strings, [-1]), vocab, num_oov_buckets=spec.oov_buckets
            )
        outputs[config.label.key] = preprocessing.transform_label(inputs, config.label)
        return outputs

    return preprocessing_fn


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One AnalyzeAndTransformDataset run.

    Attributes:
      seconds: Wall time of building and running the Beam pipeline.
      cpu_seconds: CPU time of this process in it (the DirectRunner works in-process).
      vocabularies: Each vocabulary file's tokens, by vocabulary name.
      transformed: Each transformed feature's values over the rows, in row order.
    """

    seconds: float
    cpu_seconds: float
    vocabularies: dict[str, list[bytes]]
    transformed: dict[str, np.ndarray]


def analyze_and_transform(
    rows: list[dict], table_schema: schema_pb2.Schema, preprocessing_fn, temp_dir: str | None = None
) -> Analysis:
    """Analyzes `rows` and transforms them with `preprocessing_fn` on Beam's DirectRunner."""
    temp_dir = temp_dir or tempfile.mkdtemp()
    metadata = dataset_metadata.DatasetMetadata(table_schema)
    start, cpu_start = time.perf_counter(), time.process_time()
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
        (transformed, _), transform_fn = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            preprocessing_fn
        )
        output = f'{temp_dir}/transform_fn'
        _ = transform_fn | tft_beam.WriteTransformFn(output)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    graph = tft.TFTransformOutput(output)
    assets = tf.io.gfile.listdir(f'{output}/transform_fn/assets')
    return Analysis(
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        vocabularies={name: graph.vocabulary_by_name(name) for name in sorted(assets)},
        transformed={name: np.array([row[name] for row in transformed]) for name in transformed[0]},
    )

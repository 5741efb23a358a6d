"""Test data for the Trainer tests: a small transformed taxi dataset and raw examples.

The data is the taxi sample bundled with TFX, preprocessed by our own `preprocessing_fn` with
tf.Transform on Beam's DirectRunner, and written the way TFX Transform writes it: GZIP TFRecords of
transformed tf.Examples under `Split-train/` and `Split-eval/`, and the transform graph
(`transform_fn/`, `transformed_metadata/`) in a directory of its own.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
import sys

from asynctrain.components.trainer import train_arguments
from asynctrain.pipelines.config import BUNDLED_SCHEMAS

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
FEATURES_YAML = BUNDLED_SCHEMAS / 'taxi' / 'features.yaml'
SCHEMA_PBTXT = BUNDLED_SCHEMAS / 'taxi' / 'schema.pbtxt'
LABEL_KEY = 'big_tipper'

# Rows of the bundled CSV used for training and evaluation: enough for AUC well above 0.5 in a
# few hundred steps, small enough that tf.Transform on the DirectRunner takes seconds.
NUM_TRAIN_ROWS = 4000
NUM_EVAL_ROWS = 1000


@dataclasses.dataclass(frozen=True)
class TransformedData:
    """Paths laid out as TFX Transform lays them out.

    Attributes:
      examples: Directory with `Split-train/` and `Split-eval/` (GZIP TFRecords of tf.Examples).
      transform_graph: Directory with `transform_fn/` and `transformed_metadata/`.
      raw_eval_rows: A few raw CSV rows of the eval split (dicts of strings), for serving tests.
    """

    examples: str
    transform_graph: str
    raw_eval_rows: tuple


def taxi_csv_path() -> str:
    import tfx

    return os.path.join(
        os.path.dirname(tfx.__file__),
        'examples',
        'chicago_taxi_pipeline',
        'data',
        'simple',
        'data.csv',
    )


def read_taxi_rows(limit: int) -> list[dict]:
    with open(taxi_csv_path(), newline='', encoding='utf-8') as f:
        reader = csv.DictReader(f)
        rows = []
        for row in reader:
            rows.append(row)
            if len(rows) >= limit:
                break
    return rows


def raw_instance(row: dict, feature_spec: dict) -> dict:
    """A CSV row as a tf.Transform instance dict: scalars for fixed-length features, lists for
    variable-length ones (empty when the cell is empty)."""
    import numpy as np
    import tensorflow as tf

    out = {}
    for name, spec in feature_spec.items():
        text = row.get(name, '')
        if spec.dtype == tf.string:
            value = text.encode('utf-8')
        elif spec.dtype == tf.int64:
            value = int(float(text)) if text else 0
        else:
            value = float(text) if text else 0.0
        if isinstance(spec, tf.io.FixedLenFeature):
            out[name] = value
        else:
            out[name] = np.array([value] if text else [], dtype=spec.dtype.as_numpy_dtype)
    return out


def raw_example(row: dict, feature_spec: dict) -> bytes:
    """A CSV row as a serialized raw tf.Example (empty cells left out)."""
    import tensorflow as tf

    feature = {}
    for name, spec in feature_spec.items():
        text = row.get(name, '')
        if not text:
            continue
        if spec.dtype == tf.string:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
        elif spec.dtype == tf.int64:
            feature[name] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[int(float(text))])
            )
        else:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(text)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_transformed_data(
    root: str, preprocessing_fn, metadata, train: list[dict], evaluation: list[dict]
) -> tuple[str, str]:
    """Runs `preprocessing_fn` with tf.Transform on Beam's DirectRunner (analyzed on `train`,
    applied to both splits) and writes the output as TFX Transform lays it out under `root`.

    Args:
      root: A fresh directory.
      preprocessing_fn: The tf.Transform preprocessing function.
      metadata: The raw data's `DatasetMetadata`.
      train, evaluation: tf.Transform instance dicts of the two splits.

    Returns:
      The examples directory (`Split-train/`, `Split-eval/`: GZIP TFRecords of transformed
      tf.Examples) and the transform graph directory (`transform_fn/`, `transformed_metadata/`,
      and the raw `metadata/`).
    """
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import metadata_io

    examples = os.path.join(root, 'transformed_examples')
    transform_graph = os.path.join(root, 'transform_graph')
    with (
        beam.Pipeline() as p,
        tft_beam.Context(temp_dir=os.path.join(root, 'tmp'), force_tf_compat_v1=False),
    ):
        (transformed_train, transformed_metadata), transform_fn = (
            p | 'CreateTrain' >> beam.Create(train),
            metadata,
        ) | 'AnalyzeAndTransform' >> tft_beam.AnalyzeAndTransformDataset(preprocessing_fn)
        transformed_eval, _ = (
            (p | 'CreateEval' >> beam.Create(evaluation), metadata),
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
    # TFX Transform also records the raw schema beside the transform graph (`metadata/`), which
    # `TFTransformOutput.raw_feature_spec()` reads.
    metadata_io.write_metadata(metadata, os.path.join(transform_graph, 'metadata'))
    return examples, transform_graph


def make_transformed_data(
    root: str, num_train: int = NUM_TRAIN_ROWS, num_eval: int = NUM_EVAL_ROWS
) -> TransformedData:
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from asynctrain.components.shared import feature_types
    from asynctrain.components.transform import feature_config, preprocessing

    config = feature_config.load_feature_config(str(FEATURES_YAML), str(SCHEMA_PBTXT))
    schema = feature_types.load_schema(str(SCHEMA_PBTXT))
    raw_spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    rows = read_taxi_rows(num_train + num_eval)
    examples, transform_graph = write_transformed_data(
        root,
        preprocessing.build_preprocessing_fn(config),
        dataset_metadata.DatasetMetadata(schema),
        [raw_instance(r, raw_spec) for r in rows[:num_train]],
        [raw_instance(r, raw_spec) for r in rows[num_train:]],
    )
    return TransformedData(
        examples=examples,
        transform_graph=transform_graph,
        raw_eval_rows=tuple(rows[num_train : num_train + 16]),
    )


def train_command(transformed_data: TransformedData, output, config_path) -> list[str]:
    """`asynctrain train` on `transformed_data` into `output` with the config file at
    `config_path`, run as `python -m asynctrain`, the way every TFJob replica runs it."""
    train = train_arguments.TrainArguments(
        examples=transformed_data.examples,
        transform_graph=transformed_data.transform_graph,
        output=str(output),
        config=str(config_path),
        label_key=LABEL_KEY,
    )
    return [sys.executable, '-m', 'asynctrain', *train.to_argv()]


@dataclasses.dataclass(frozen=True)
class TrainedModel:
    """One in-process training run shared by the tests that only inspect its outputs.

    Attributes:
      report: The TrainingReport.
      serving_model_dir: The exported SavedModel.
      model_run_dir: Summaries, checkpoints, training_report.json.
      transform_graph: A private copy of the transform graph it was exported with (a test may
        delete it).
    """

    report: object
    serving_model_dir: str
    model_run_dir: str
    transform_graph: str


# Enough steps for the taxi label (eval AUC around 0.95 at 300 steps), few enough for 2 cores.
TRAIN_STEPS = 300


def raw_feature_spec() -> dict:
    from tensorflow_transform.tf_metadata import schema_utils

    from asynctrain.components.shared import feature_types

    schema = feature_types.load_schema(str(SCHEMA_PBTXT))
    return schema_utils.schema_as_feature_spec(schema).feature_spec


def label_of(row: dict) -> int:
    """The taxi label as features.yaml defines it: tips > 0.2 * fare, missing counting as 0."""
    return int(float(row['tips'] or 0) > 0.2 * float(row['fare'] or 0))


def make_artifact(cls, uri, split_names=None):
    """A TFX artifact of type `cls` at `uri`, with its split names when given."""
    import json

    artifact = cls()
    artifact.uri = str(uri)
    if split_names:
        artifact.split_names = json.dumps(split_names)
    return artifact


def assert_serves_raw_examples(serving_model_dir) -> None:
    """The exported model scores 400 held-out raw tf.Examples through `serving_default` with
    finite probabilities that rank the positive class higher on average."""
    import numpy as np
    import tensorflow as tf

    from asynctrain.components.trainer.training import export

    rows = read_taxi_rows(5000)[4000:4400]
    spec = raw_feature_spec()
    loaded = tf.saved_model.load(str(serving_model_dir))
    probabilities = loaded.signatures[export.SERVING_SIGNATURE](
        examples=tf.constant([raw_example(r, spec) for r in rows])
    )[export.PROBABILITIES].numpy()
    assert probabilities.shape == (len(rows), 1)
    assert np.isfinite(probabilities).all()
    labels = np.array([label_of(r) for r in rows])
    assert probabilities[labels == 1].mean() > probabilities[labels == 0].mean()

"""What the end-to-end tests share: the pipeline's component names, the committed datasets and what
their runs must achieve, and the readers and scorers their assertions use.

`asynctrain run` on a committed dataset (own_data_e2e_test) and `asynctrain init` then `run` on
the same CSV (init_e2e_test) check runs of different specs, so each has runs of its own; the
datasets, the serving request and the trivial baseline are defined once, here.
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import os
import pathlib
import subprocess

import numpy as np
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from tests import fork_server
from tests.repository import REPO_ROOT

# Every component of the default `create_pipeline` (drift on), sorted as the run summary lists
# them: `latest_blessed_model` reads the push destination for DriftValidator.
COMPONENTS = sorted(
    [
        'CsvExampleGen',
        'DriftValidator',
        'Evaluator',
        'ExampleBatcher',
        'ExampleValidator',
        'ImportSchemaGen',
        'Pusher',
        'Trainer',
        'Transform',
        'latest_blessed_model',
    ]
)


def components_for(config) -> list[str]:
    """The components `config`'s pipeline runs, sorted the same way: COMPONENTS without
    DriftValidator when drift is off, and without `latest_blessed_model` when nothing reads it
    (no drift, no warm start, no baseline)."""
    names = set(COMPONENTS)
    if not config.drift.enabled:
        names.discard('DriftValidator')
        if not (config.retraining.warm_start or config.evaluation.baseline == 'latest_blessed'):
            names.discard('latest_blessed_model')
    return sorted(names)


NULL_MARKERS = ('', 'NA')
# Names TFMA may give each blessing metric in the run summary (lower case).
METRIC_NAMES = {
    'Accuracy': {'accuracy'},
    'AUC': {'auc'},
    'RMSE': {'rmse', 'root_mean_squared_error'},
}
RUN_TIMEOUT_SECONDS = 900


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One committed dataset and what its run must achieve (numbers from its README).

    Attributes:
      name: Folder under datasets/.
      label: The label column.
      metric: The task's blessing metric.
      baseline: The trivial predictor's metric on the eval split.
      margin: How much better than `baseline` the model must be (higher for Accuracy and AUC,
        lower for RMSE).
      rows: ExampleGen's expected rows_read, rows_written, rows_rejected.
      unlabeled_lines: 1-based CSV lines whose label is missing (the dead letter's lines).
    """

    name: str
    label: str
    metric: str
    baseline: float
    margin: float
    rows: tuple[int, int, int]
    unlabeled_lines: tuple[int, ...] = ()

    @property
    def directory(self) -> pathlib.Path:
        return REPO_ROOT / 'datasets' / self.name

    @property
    def config_path(self) -> str:
        return str(self.directory / 'config.yaml')

    def beats_baseline(self, value: float) -> bool:
        if self.metric == 'RMSE':
            return value <= self.baseline * (1 - self.margin)
        return value >= self.baseline + self.margin


PENGUIN_SPECIES = {
    'Adelie Penguin (Pygoscelis adeliae)',
    'Chinstrap penguin (Pygoscelis antarctica)',
    'Gentoo penguin (Pygoscelis papua)',
}
DATASETS = {
    'penguins': Dataset(
        'penguins',
        label='Species',
        metric='Accuracy',
        baseline=0.4453,  # the majority class (Adelie), 57 of 128 eval rows
        margin=0.35,
        rows=(344, 339, 5),
        unlabeled_lines=(11, 60, 250, 282, 307),
    ),
    'diabetes': Dataset(
        'diabetes',
        label='disease_progression',
        metric='RMSE',
        baseline=83.63,  # predicting the train mean, 143.75
        margin=0.15,  # 15% lower RMSE
        rows=(442, 442, 0),
    ),
    'breast_cancer': Dataset(
        'breast_cancer',
        label='diagnosis',
        metric='AUC',
        baseline=0.5,  # any constant score
        margin=0.40,
        rows=(569, 569, 0),
    ),
}


def read_csv(dataset: Dataset) -> list[dict[str, str]]:
    """The rows of the dataset's one CSV file, as strings."""
    (path,) = glob.glob(str(dataset.directory / 'data' / '*.csv'))
    with open(path, newline='', encoding='utf-8') as f:
        return list(csv.DictReader(f))


def raw_example(row: dict[str, str], types: dict[str, int], label: str) -> bytes:
    """A serving request: the CSV row typed by the schema, missing cells and the label left out."""
    feature = {}
    for name, value in row.items():
        if name == label or value in NULL_MARKERS:
            continue
        if types[name] == schema_pb2.INT:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        elif types[name] == schema_pb2.FLOAT:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a positive row outscores a negative one (ties count half)."""
    pos, neg = scores[positive], scores[~positive]
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + 0.5 * ties)


def split_labels(config, dataset: Dataset, split: str) -> list:
    """The label of every example ExampleGen wrote to `split`."""
    (examples,) = glob.glob(
        os.path.join(config.pipeline_root, 'CsvExampleGen', 'examples', '*', f'Split-{split}')
    )
    labels = []
    for record in tf.data.TFRecordDataset(
        sorted(glob.glob(os.path.join(examples, '*.gz'))), compression_type='GZIP'
    ):
        feature = tf.train.Example.FromString(record.numpy()).features.feature[dataset.label]
        values = getattr(feature, feature.WhichOneof('kind') or 'bytes_list').value
        # A row without its label is in the dead letter, never in a split.
        assert len(values) == 1, f'an example of Split-{split} has no {dataset.label}'
        labels.append(values[0])
    return labels


def trivial_baseline(config, dataset: Dataset) -> float:
    """The metric of the trivial predictor fit on train, scored on eval, from the run's examples."""
    train, evaluation = (split_labels(config, dataset, s) for s in ('train', 'eval'))
    if dataset.metric == 'Accuracy':
        majority = max(set(train), key=train.count)
        return evaluation.count(majority) / len(evaluation)
    if dataset.metric == 'RMSE':
        return float(np.sqrt(np.mean((np.array(evaluation) - np.mean(train)) ** 2)))
    return 0.5  # AUC of any constant score


def run_cli(*args: str, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """`asynctrain ARGS` in a process of its own, from `cwd` (the repository root by default),
    forked from the suite's server that imported TensorFlow and TFX once (`tests.fork_server`)."""
    return fork_server.run_captured(
        ['-m', 'asynctrain', *args],
        env=dict(os.environ),
        cwd=cwd or REPO_ROOT,
        timeout=RUN_TIMEOUT_SECONDS,
    )

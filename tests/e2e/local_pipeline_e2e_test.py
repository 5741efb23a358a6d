"""End to end: `asynctrain run`'s pipeline on a small taxi sample with LocalDagRunner.

Asserts every component executed once, a model was pushed whose `serving_default` scores a raw
serialized tf.Example, and that a second run with nothing changed executes nothing (cache hits).
"""

import csv
import os
import pathlib

import pytest
import tensorflow as tf

from pipelines.config import bundled_data_dir, load_config
from pipelines.local_runner import run_local

pytestmark = pytest.mark.e2e

SAMPLE_ROWS = 3000
COMPONENTS = [
    'CsvExampleGen',
    'Evaluator',
    'ExampleValidator',
    'ImportSchemaGen',
    'Pusher',
    'StatisticsGen',
    'Trainer',
    'Transform',
]


@pytest.fixture(scope='module')
def sample_dir(tmp_path_factory) -> pathlib.Path:
    """The first SAMPLE_ROWS rows of the bundled taxi CSV."""
    out = tmp_path_factory.mktemp('data')
    with (
        open(os.path.join(bundled_data_dir(), 'data.csv'), newline='') as src,
        open(out / 'data.csv', 'w', newline='') as dst,
    ):
        for i, line in enumerate(src):
            if i > SAMPLE_ROWS:
                break
            dst.write(line)
    return out


def _raw_example(row: dict) -> bytes:
    feature = {}
    for name, value in row.items():
        if value == '':
            continue
        if name in ('payment_type', 'company'):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        elif '.' in value or name in ('fare', 'tips', 'trip_miles') or 'itude' in name:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_pipeline_runs_pushes_a_serving_model_and_reruns_from_cache(sample_dir, tmp_path):
    config = load_config(data=str(sample_dir), work_dir=str(tmp_path / 'work'))

    first = run_local(config)

    assert first.executed == COMPONENTS
    assert first.cached == []
    assert first.blessed is True
    assert first.eval_metric[0].lower() == 'auc' and first.eval_metric[1] > 0.6
    assert first.pushed_model and first.pushed_model.startswith(config.serving_dir)

    with open(sample_dir / 'data.csv', newline='') as f:
        rows = list(csv.DictReader(f))[:4]
    loaded = tf.saved_model.load(first.pushed_model)
    scores = loaded.signatures['serving_default'](
        examples=tf.constant([_raw_example(r) for r in rows])
    )['probabilities'].numpy()
    assert scores.shape == (4, 1)
    assert ((scores >= 0) & (scores <= 1)).all()

    second = run_local(config)

    assert second.executed == []
    assert second.cached == COMPONENTS
    assert second.pushed_model == first.pushed_model

"""End to end: `asynctrain run`'s pipeline on a small taxi sample with LocalDagRunner (the
shared `taxi_pipeline_run` of tests/conftest.py: 3,000 rows, 150 training steps).

Asserts every component executed once, a model was pushed whose `serving_default` scores a raw
serialized tf.Example, and that a second run with nothing changed executes nothing (cache hits).
"""

import csv

import pytest
import tensorflow as tf

from asynctrain.pipelines.local_runner import run_local
from tests.e2e.e2e_helpers import COMPONENTS

pytestmark = pytest.mark.e2e


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


def test_first_run_pushes_a_model_that_serves_and_a_rerun_is_all_cache_hits(taxi_pipeline_run):
    """One test, in this order: the rerun adds a run to the shared run's metadata."""
    _check_first_run(taxi_pipeline_run)
    _check_pushed_model_scores_raw_serialized_examples(taxi_pipeline_run)
    _check_rerun_with_nothing_changed_executes_nothing(taxi_pipeline_run)


def _check_first_run(taxi_pipeline_run):
    config, first = taxi_pipeline_run.config, taxi_pipeline_run.summary

    assert first.executed == COMPONENTS
    assert first.cached == []
    assert first.blessed is True
    assert first.eval_metric[0].lower() == 'auc' and first.eval_metric[1] > 0.6
    assert first.pushed_model and first.pushed_model.startswith(config.serving_dir)


def _check_pushed_model_scores_raw_serialized_examples(taxi_pipeline_run):
    with open(taxi_pipeline_run.sample_dir / 'data.csv', newline='') as f:
        rows = list(csv.DictReader(f))[:4]
    loaded = tf.saved_model.load(taxi_pipeline_run.summary.pushed_model)
    scores = loaded.signatures['serving_default'](
        examples=tf.constant([_raw_example(r) for r in rows])
    )['probabilities'].numpy()
    assert scores.shape == (4, 1)
    assert ((scores >= 0) & (scores <= 1)).all()


def _check_rerun_with_nothing_changed_executes_nothing(taxi_pipeline_run):
    first = taxi_pipeline_run.summary

    second = run_local(taxi_pipeline_run.config)

    assert second.executed == []
    assert second.cached == COMPONENTS
    assert second.pushed_model == first.pushed_model

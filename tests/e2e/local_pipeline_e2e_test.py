"""End to end: `asynctrain run`'s pipeline on a small taxi sample with LocalDagRunner (the
shared `taxi_pipeline_run` of tests/conftest.py: 3,000 rows, 150 training steps).

Asserts every component executed once, a model was pushed whose `serving_default` scores a raw
serialized tf.Example, and that a second run with nothing changed executes nothing (cache hits).
A third run adds slices with their own gate (two slice keys and a feature cross, with plots;
the penguins e2e of own_data_e2e_test compares intervals too): only the Evaluator and the Pusher
run again; the same model, which passes the whole split's gate, fails the gate of some slices,
so it is not blessed and nothing is pushed, and the run summary names each failing slice with
its value and bound. That evaluation, slices, plots and checks, equals stock TFMA's
(`tfma.run_model_analysis`) on the same model and eval examples, within 1e-6.
"""

import csv
import dataclasses
import glob
import os

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma

from asynctrain.pipelines.local_runner import run_local
from asynctrain.testing import evaluation_outputs
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


def test_first_run_pushes_a_model_that_serves_and_a_rerun_is_all_cache_hits(
    taxi_pipeline_run, tmp_path
):
    """One test, in this order: the rerun adds a run to the shared run's metadata."""
    _check_first_run(taxi_pipeline_run)
    _check_pushed_model_scores_raw_serialized_examples(taxi_pipeline_run)
    _check_rerun_with_nothing_changed_executes_nothing(taxi_pipeline_run)
    _check_a_failed_slice_gate_blocks_the_push_as_stock_tfma_judges_it(taxi_pipeline_run, tmp_path)


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


SLICES = (('payment_type',), ('trip_start_hour',), ('payment_type', 'trip_start_day'))


def _newest(config, component: str, output: str) -> str:
    uris = glob.glob(os.path.join(config.pipeline_root, component, output, '*'))
    return max(uris, key=lambda uri: int(os.path.basename(uri)))


def _check_a_failed_slice_gate_blocks_the_push_as_stock_tfma_judges_it(taxi_pipeline_run, tmp_path):
    first = taxi_pipeline_run.summary
    overall_auc = first.eval_metric[1]
    # Every slice must reach the whole split's AUC: some slices are below it, so some fail.
    evaluation = dataclasses.replace(
        taxi_pipeline_run.config.evaluation,
        slices=SLICES,
        slice_min_value=round(overall_auc, 3),
        plots=True,
    )
    config = dataclasses.replace(taxi_pipeline_run.config, evaluation=evaluation)

    third = run_local(config)

    assert third.executed == ['Evaluator', 'Pusher']
    assert third.eval_metric == first.eval_metric  # the same model on the same split
    assert third.eval_metric[1] >= config.evaluation.min_value  # the whole split passes
    assert third.blessed is False
    assert third.pushed_model is None
    assert len(os.listdir(config.serving_dir)) == 1  # the first run's push only
    ours_dir = _newest(config, 'Evaluator', 'evaluation')
    values = evaluation_outputs.values(ours_dir)
    auc = tfma.metrics.MetricKey('auc', example_weighted=False)
    # A slice with one class has no AUC (NaN): its gate is not applied, and the run says so.
    below = {
        key
        for key, metrics in values.items()
        if key and metrics[auc] == metrics[auc] and metrics[auc] < config.evaluation.slice_min_value
    }
    assert below and () not in below
    # One line per failing slice, naming it, the metric, its value and the bound.
    failed = third.failed_checks
    assert len(failed) == len(below)
    undefined = {key for key, metrics in values.items() if metrics[auc] != metrics[auc]}
    assert undefined and len(third.unapplied_checks) == len(undefined)
    for key in below:
        where = tfma.slicer.stringify_slice_key(key)
        (line,) = [c for c in failed if c.startswith(f'slice {where}: auc ')]
        assert f'{config.evaluation.slice_min_value:g}' in line
    # Keys of every slice: each value of each key, and each pair of the cross.
    payments = {k for k in values if [name for name, _ in k] == ['payment_type']}
    crossed = {k for k in values if [name for name, _ in k] == ['payment_type', 'trip_start_day']}
    assert len(payments) >= 3 and len(crossed) > len(payments)

    # Stock TFMA, on the same model and eval examples, with the eval config ours wrote.
    eval_config = tfma.load_eval_result(ours_dir).config
    model = os.path.join(_newest(config, 'Trainer', 'model'), 'Format-Serving')
    examples = os.path.join(_newest(config, 'CsvExampleGen', 'examples'), 'Split-eval', '*')
    stock_dir = str(tmp_path / 'stock')
    evaluation_outputs.run_stock(eval_config, {'': model}, examples, stock_dir)
    evaluation_outputs.assert_same(stock_dir, ours_dir)

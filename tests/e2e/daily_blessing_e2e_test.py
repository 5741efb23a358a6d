"""Blessing against the last blessed model: a daily run that got worse than yesterday's is not
pushed, even though it clears the absolute threshold.

Two daily cycles (`--date`, date-partitioned input) on the penguins dataset with
`evaluation: {baseline: latest_blessed, max_regression: 0.05, min_value: 0.6}`:

- day 1: the penguins CSV as committed. No blessed model yet, so the absolute bound alone decides:
  blessed and pushed.
- day 2: the same rows, but the labels of train-split Adelie and Chinstrap rows are partly
  shuffled (swapped in pairs), so the model can no longer tell these two species apart.

TFMA compares the candidate with the baseline on day 2's eval split. Were the eval rows corrupted
too, both models would score worse alike and the comparison would show nothing; so only rows that
land in the train split are corrupted. ExampleGen assigns a split by hashing the example's bytes,
which include the label: a swapped row is kept only if its corrupted version still hashes to
train. The test computes every row's split exactly as ExampleGen does (the same reader, encoder
and hash) and checks it against the run's own eval split.
"""

from __future__ import annotations

import glob
import os

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma

from pipelines.config import load_config
from pipelines.local_runner import run_local
from tests.e2e.penguin_days import (
    ADELIE,
    CHINSTRAP,
    DATASET,
    DAYS,
    EVAL,
    LABEL,
    MAX_REGRESSION,
    MIN_CORRUPTED,
    MIN_VALUE,
    NULL_MARKERS,
    TRAIN,
    write_days,
)
from tests.e2e.penguin_days import splits as _splits

pytestmark = pytest.mark.e2e


@pytest.fixture(scope='module')
def dated_data(tmp_path_factory):
    """data/<YYYY-MM-DD>/penguins_raw.csv: day 1 as committed, day 2 with train labels swapped."""
    root = tmp_path_factory.mktemp('dated')
    rows, day2 = write_days(str(root), str(tmp_path_factory.mktemp('scratch')))
    return root, rows, day2


def test_the_corruption_is_in_train_rows_only(dated_data):
    root, rows, day2 = dated_data
    header = list(rows[0])
    original = _splits(str(root / DAYS[0] / 'penguins_raw.csv'), header)
    corrupted = _splits(str(root / DAYS[1] / 'penguins_raw.csv'), header)
    changed = [i for i, (a, b) in enumerate(zip(rows, day2)) if a != b]

    # Only labels changed, only between Adelie and Chinstrap, only in rows of the train split.
    assert all({k for k in rows[i] if rows[i][k] != day2[i][k]} == {LABEL} for i in changed)
    assert all({rows[i][LABEL], day2[i][LABEL]} == {ADELIE, CHINSTRAP} for i in changed)
    assert all(original[i] == corrupted[i] == TRAIN for i in changed)
    # The eval split holds the same rows both days, unchanged.
    assert {i for i, s in original.items() if s == EVAL} == {
        i for i, s in corrupted.items() if s == EVAL
    }
    assert len(changed) >= MIN_CORRUPTED
    train_chinstraps = [
        i for i, s in corrupted.items() if s == TRAIN and rows[i][LABEL] == CHINSTRAP
    ]
    relabeled = [i for i in train_chinstraps if day2[i][LABEL] == ADELIE]
    # Most train Chinstraps are labeled Adelie on day 2.
    assert len(relabeled) > len(train_chinstraps) / 2, (len(relabeled), len(train_chinstraps))


def _config(root, work_dir: str, day: str):
    return load_config(
        str(DATASET / 'config.yaml'),
        data=str(root),
        work_dir=work_dir,
        date=day,
        pipeline_name='asynctrain-penguins-daily',
        dataset=str(DATASET),
        example_gen={
            'input_pattern': '{YYYY}-{MM}-{DD}/*.csv',
            'null_markers': list(NULL_MARKERS),
            'max_bad_fraction': 0.02,
        },
        evaluation={
            'min_value': MIN_VALUE,
            'baseline': 'latest_blessed',
            'max_regression': MAX_REGRESSION,
        },
    )


def _eval_split(examples: str) -> set[bytes]:
    """The serialized examples of the eval split of the Examples artifact at `examples`."""
    paths = sorted(glob.glob(os.path.join(examples, 'Split-eval', '*.gz')))
    return {r.numpy() for r in tf.data.TFRecordDataset(paths, compression_type='GZIP')}


def _latest(config, component: str, output: str) -> str:
    """The newest artifact of `component`'s `output` (artifact directories are numbered)."""
    uris = glob.glob(os.path.join(config.pipeline_root, component, output, '*'))
    return max(uris, key=lambda uri: int(os.path.basename(uri)))


def test_a_day_worse_than_the_last_blessed_model_is_not_blessed_nor_pushed(dated_data, tmp_path):
    root, _, _ = dated_data
    work_dir = str(tmp_path / 'work')
    day1_config = _config(root, work_dir, DAYS[0])
    day1 = run_local(day1_config)
    day1_eval = _eval_split(_latest(day1_config, 'CsvExampleGen', 'examples'))
    day2_config = _config(root, work_dir, DAYS[1])
    day2 = run_local(day2_config)
    day2_eval = _eval_split(_latest(day2_config, 'CsvExampleGen', 'examples'))

    # Both days evaluate on the same, clean eval examples.
    assert day1_eval == day2_eval and len(day1_eval) == 128
    assert day1.rows == day2.rows == {'rows_read': 344, 'rows_written': 339, 'rows_rejected': 5}

    # Day 1: no blessed model to compare with; the absolute bound alone blesses it.
    name, day1_accuracy = day1.eval_metric
    assert name == 'accuracy'
    assert day1_accuracy >= MIN_VALUE
    assert day1.blessed is True and day1.pushed_model

    # Day 2 clears the absolute bound but is worse than day 1 by more than max_regression.
    name, day2_accuracy = day2.eval_metric
    assert name == 'accuracy'
    assert day2_accuracy >= MIN_VALUE, (day1_accuracy, day2_accuracy)
    assert day1_accuracy - day2_accuracy > MAX_REGRESSION, (day1_accuracy, day2_accuracy)

    evaluation = _latest(day2_config, 'Evaluator', 'evaluation')
    baseline = tfma.load_eval_result(evaluation, model_name='baseline')
    (baseline_metrics,) = [m for _, m in baseline.slicing_metrics]
    # The baseline is day 1's model, scored on the same eval split: day 1's accuracy.
    assert baseline_metrics['']['']['accuracy']['doubleValue'] == pytest.approx(
        day1_accuracy, abs=1e-6
    )
    validation = tfma.load_validation_result(evaluation)
    assert not validation.validation_ok
    failures = [
        failure
        for per_slice in validation.metric_validations_per_slice
        for failure in per_slice.failures
    ]
    # It fails on the change against the baseline only, not on the absolute bound.
    assert [(f.metric_key.name, f.metric_key.is_diff) for f in failures] == [('accuracy', True)]
    assert failures[0].metric_value.double_value.value == pytest.approx(
        day2_accuracy - day1_accuracy, abs=1e-6
    )

    assert day2.blessed is False
    assert day2.pushed_model is None
    # The day-1 model stays the one served.
    assert os.listdir(day1_config.serving_dir) == [os.path.basename(day1.pushed_model)]

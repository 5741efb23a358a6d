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

import csv
import glob
import os
import random

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma

from components.example_gen import csv_convert, csv_dialect, example_encoder, split_assignment
from components.example_gen.feature_types import (
    column_types_from_schema,
    load_schema,
    resolve_column_types,
)
from pipelines.config import REPO_ROOT, load_config
from pipelines.local_runner import run_local

pytestmark = pytest.mark.e2e

DATASET = REPO_ROOT / 'datasets' / 'penguins'
LABEL = 'Species'
ADELIE = 'Adelie Penguin (Pygoscelis adeliae)'
CHINSTRAP = 'Chinstrap penguin (Pygoscelis antarctica)'
NULL_MARKERS = ('NA',)
HASH_BUCKETS = (2, 1)  # train, eval: the config's default split
TRAIN, EVAL = 0, 1
DAYS = ('2024-05-01', '2024-05-02')
MIN_VALUE = 0.6  # accuracy; the majority class scores 0.4453 on eval (datasets/penguins/README.md)
MAX_REGRESSION = 0.05
# At least this many train rows must carry a swapped label for the drop to be clear.
MIN_CORRUPTED = 40


def _read_rows() -> tuple[list[str], list[dict[str, str]]]:
    (path,) = glob.glob(str(DATASET / 'data' / '*.csv'))
    with open(path, newline='', encoding='utf-8') as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames), list(reader)


def _write_rows(path: str, header: list[str], rows: list[dict[str, str]]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)


def _splits(path: str, header: list[str]) -> dict[int, int]:
    """Data row index -> the split ExampleGen writes the row to (rows without a label: none),
    computed with ExampleGen's reader, encoder and hash on the file at `path`."""
    schema_types = column_types_from_schema(load_schema(str(DATASET / 'schema.pbtxt')))
    types = resolve_column_types(header, schema_types)
    dialect = csv_dialect.CsvDialect(null_markers=NULL_MARKERS)
    bounds = split_assignment.bucket_bounds(HASH_BUCKETS)
    splits = {}
    for chunk in csv_convert.convert_file(path, dialect, types, label_column=LABEL):
        encoded = example_encoder.encode_examples(chunk.columns, types)
        indices, _ = split_assignment.hash_splits_and_crcs(
            encoded.buffer.tobytes(), encoded.starts, encoded.ends, bounds, lambda row: 0
        )
        # No cell spans lines in this file: line 2 is row 0.
        splits.update((line - 2, split) for line, split in zip(chunk.lines.tolist(), indices))
    return splits


def _corrupt_train_labels(
    header: list[str], rows: list[dict[str, str]], scratch: str
) -> list[dict[str, str]]:
    """Swaps labels between pairs of train-split Adelie and Chinstrap rows, keeping a swapped
    row only where its corrupted version still hashes to train; every other row unchanged."""
    _write_rows(os.path.join(scratch, 'original.csv'), header, rows)
    original = _splits(os.path.join(scratch, 'original.csv'), header)
    train = [i for i, split in original.items() if split == TRAIN]
    chinstraps = [i for i in train if rows[i][LABEL] == CHINSTRAP]
    adelies = [i for i in train if rows[i][LABEL] == ADELIE]
    random.Random(0).shuffle(adelies)
    swapped = [dict(row) for row in rows]
    for chinstrap, adelie in zip(chinstraps, adelies):
        swapped[chinstrap][LABEL], swapped[adelie][LABEL] = ADELIE, CHINSTRAP
    _write_rows(os.path.join(scratch, 'swapped.csv'), header, swapped)
    corrupted_splits = _splits(os.path.join(scratch, 'swapped.csv'), header)
    return [
        swapped[i] if original.get(i) == TRAIN and corrupted_splits.get(i) == TRAIN else row
        for i, row in enumerate(rows)
    ]


@pytest.fixture(scope='module')
def dated_data(tmp_path_factory):
    """data/<YYYY-MM-DD>/penguins_raw.csv: day 1 as committed, day 2 with train labels swapped."""
    root = tmp_path_factory.mktemp('dated')
    header, rows = _read_rows()
    day2 = _corrupt_train_labels(header, rows, str(tmp_path_factory.mktemp('scratch')))
    for day, day_rows in zip(DAYS, (rows, day2)):
        _write_rows(str(root / day / 'penguins_raw.csv'), header, day_rows)
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

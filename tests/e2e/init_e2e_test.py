"""End to end from a CSV and a target column: `asynctrain init`, then `asynctrain run`, no file
written by hand.

One test per committed dataset (penguins, diabetes, breast_cancer), each in its own temporary
directory, so pytest-xdist runs them side by side. Each runs both commands through the command
line (`init` in the test's process, `run` in a process of its own) and asserts:

- the task init chose, as printed and as written into `features.yaml`;
- the threshold init proposed in `config.yaml` is beyond the trivial baseline of the run's own
  eval split (majority class accuracy, mean predictor RMSE, AUC 0.5), and the run's eval metric
  clears it, so the model beats that baseline by the proposed margin;
- the pushed model serves raw CSV rows (label left out) with the task's outputs, scoring them
  beyond the same threshold.

The penguins run also stands for a CSV as R and many exports write it, grouped by its label:
`NA` in numeric columns and in the label, found by init with no `--null-marker`. Its proposal
must be the one for the same rows shuffled with `--null-marker NA`, and for them sorted by
`Island` (init only: the run is shared). It is also the input of a daily export: its CSV is gzipped
(`penguins_raw.csv.gz`) and its `Date Egg` column holds dates. init must read the gzipped file
as the plain one (the same schema and features), propose `datetime` for the dates, and the run's
ExampleGen must write exactly the examples of the plain file, with the dead letter naming the
gzipped file and each unlabeled row's line; the dates train as calendar parts (the Transform
output has them) and the pushed model serves rows with the date as text, a bad date included.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
import yaml

from asynctrain import cli
from asynctrain.components.example_gen import csv_dialect, csv_source
from asynctrain.components.example_gen import spec as example_gen_spec
from asynctrain.components.shared.feature_types import column_types_from_schema, load_schema
from asynctrain.pipelines import run_summary
from asynctrain.pipelines.config import load_config
from tests.e2e.e2e_helpers import (
    DATASETS,
    METRIC_NAMES,
    PENGUIN_SPECIES,
    auc,
    components_for,
    raw_example,
    read_csv,
    run_cli,
    trivial_baseline,
)

pytestmark = pytest.mark.e2e

# What init must decide for each dataset, from the dataset's README: the task, the blessing
# metric and its bound, the null markers it finds (none is passed), and the classes (positive
# class for binary).
EXPECTED = {
    'penguins': {
        'task': 'multiclass',
        'metric': 'Accuracy',
        'bound': 'min_value',
        'null_markers': ['NA'],
        'classes': PENGUIN_SPECIES,
        'gzipped': True,
        'dates': {'Date Egg': ('2007-11-09', '2009-12-01')},
        'reordered': 'Island',
    },
    'diabetes': {
        'task': 'regression',
        'metric': 'RMSE',
        'bound': 'max_value',
        'null_markers': [],
    },
    'breast_cancer': {
        'task': 'binary',
        'metric': 'AUC',
        'bound': 'min_value',
        'null_markers': [],
        'positive': 'malignant',
    },
}


def _serve(model_dir: str, schema_path: str, label: str, rows: list[dict[str, str]]) -> dict:
    types = {f.name: f.type for f in load_schema(schema_path).feature}
    loaded = tf.saved_model.load(model_dir)
    examples = tf.constant([raw_example(r, types, label) for r in rows])
    outputs = loaded.signatures['serving_default'](examples=examples)
    return {name: tensor.numpy() for name, tensor in outputs.items()}


def _served_metric(name: str, outputs: dict, rows: list[dict[str, str]]) -> float:
    """Checks the task's serving outputs; returns the task's metric over the CSV's labeled rows."""
    label = DATASETS[name].label
    n = len(rows)
    if name == 'penguins':
        probabilities, classes = outputs['probabilities'], outputs['classes']
        assert probabilities.shape == (n, 3) and classes.shape == (n, 3)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
        names = [c.decode() for c in classes[0]]
        assert set(names) == PENGUIN_SPECIES
        assert all([c.decode() for c in row] == names for row in classes)
        predicted = [c.decode() for c in outputs['predicted_class']]
        assert set(predicted) <= PENGUIN_SPECIES
        assert predicted == [names[i] for i in probabilities.argmax(axis=1)]
        labeled = [(p, r[label]) for p, r in zip(predicted, rows) if r[label] in PENGUIN_SPECIES]
        assert len(labeled) == 339
        return float(np.mean([p == species for p, species in labeled]))
    if name == 'diabetes':
        predictions = outputs['predictions']
        assert predictions.shape == (n, 1)
        assert predictions.dtype == np.float32
        labels = np.array([float(r[label]) for r in rows])
        # In the label's units (25 to 346), not standardized.
        assert 25 <= predictions.mean() <= 346
        return float(np.sqrt(np.mean((predictions[:, 0] - labels) ** 2)))
    probabilities = outputs['probabilities']
    assert probabilities.shape == (n, 1)
    assert ((probabilities >= 0) & (probabilities <= 1)).all()
    malignant = np.array([r[label] == 'malignant' for r in rows])
    assert malignant.sum() == 212
    # The probability is of the positive class init chose, malignant.
    return auc(probabilities[:, 0], malignant)


def _beyond(bound: str, value: float, threshold: float) -> bool:
    return value >= threshold if bound == 'min_value' else value <= threshold


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_init_then_run_trains_the_chosen_task_beyond_the_proposed_threshold_and_serves(
    name, tmp_path, capsys
):
    dataset, expected = DATASETS[name], EXPECTED[name]
    spec_dir, work_dir = tmp_path / 'spec', tmp_path / 'work'
    data_dir = dataset.directory / 'data'
    if expected.get('gzipped'):
        data_dir = _gzipped_copy(dataset, tmp_path / 'data')

    # init in this process (it only reads the CSV and writes three files: no process of its own
    # needed to keep TensorFlow's state apart); run in one of its own, as a user runs it.
    code = cli.main(
        [
            'init',
            '--data',
            str(data_dir),
            '--label',
            dataset.label,
            '--output',
            str(spec_dir),
        ]
    )
    init = capsys.readouterr()

    init_output = f'stdout:\n{init.out[-4000:]}\nstderr:\n{init.err[-4000:]}'
    assert code == 0, init_output
    assert f'label {dataset.label!r}: {expected["task"]} (' in init.out, init_output
    assert f'asynctrain run --config {spec_dir / "config.yaml"}' in init.out
    features = yaml.safe_load((spec_dir / 'features.yaml').read_text())
    assert features['label']['column'] == dataset.label
    assert features['label']['task'] == expected['task']
    assert features['label'].get('positive') == expected.get('positive')
    assert dataset.label not in {f['name'] for f in features['features']}
    if 'classes' in expected:
        printed = re.search(r'^  classes: (.*)$', init.out, re.MULTILINE)
        assert printed, init_output
        assert all(repr(species) in printed.group(1) for species in expected['classes'])
    written = yaml.safe_load((spec_dir / 'config.yaml').read_text())
    evaluation = written['evaluation']
    assert evaluation['metric'] == expected['metric']
    assert evaluation['baseline'] == 'latest_blessed'
    assert written['example_gen']['null_markers'] == expected['null_markers']
    if expected['null_markers']:
        markers = ', '.join(map(repr, expected['null_markers']))
        assert f'  missing values: {markers} (found without --null-marker in columns' in init.out
    threshold = evaluation[expected['bound']]
    # Small data, small training: batches of 32, at least 100 steps.
    assert written['trainer']['training']['batch_size'] == 32
    assert written['trainer']['training']['train_steps'] >= 100

    for column, (first, last) in expected.get('dates', {}).items():
        (date,) = [f for f in features['features'] if f['name'] == column]
        assert date['transform'] == 'datetime', date
        assert re.search(rf'^  {column} +datetime +dates from {first} to {last}', init.out, re.M)
    if expected.get('gzipped'):
        _check_init_reads_the_plain_file_alike(dataset, spec_dir, tmp_path, capsys)
    if expected.get('reordered'):
        _check_the_proposal_is_that_of_the_rows_in_any_order(
            dataset, expected, spec_dir, tmp_path, capsys
        )

    run = run_cli('run', '--config', str(spec_dir / 'config.yaml'), '--work-dir', str(work_dir))

    output = f'stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}'
    assert run.returncode == 0, output
    config = load_config(str(spec_dir / 'config.yaml'), work_dir=str(work_dir))
    summary = run_summary.read_summary(config, started=0.0)
    assert summary.executed == components_for(config)
    assert summary.rows == dict(zip(run_summary.ROW_COUNT_PROPERTIES, dataset.rows))
    # The proposed threshold is beyond the trivial predictor on the run's eval split, so clearing
    # it beats that baseline; the run's metric clears it.
    # (Computed from the run's splits: init's schema may type a column differently from the
    # dataset's hand-written one, e.g. diabetes' whole-number floats as INT, and the hash split
    # of an example depends on its bytes, so the eval rows may differ from the README's.)
    baseline = trivial_baseline(config, dataset)
    assert not _beyond(expected['bound'], baseline, threshold), (baseline, threshold)
    metric_name, value = summary.eval_metric
    assert metric_name.lower() in METRIC_NAMES[expected['metric']]
    assert _beyond(expected['bound'], value, threshold), (metric_name, value, threshold, baseline)
    assert summary.blessed is True
    assert re.search(rf'^eval {metric_name}: [0-9.]+, blessed: yes$', run.stdout, re.MULTILINE)

    assert summary.pushed_model and summary.pushed_model.startswith(config.serving_dir)
    rows = read_csv(dataset)
    outputs = _serve(summary.pushed_model, str(spec_dir / 'schema.pbtxt'), dataset.label, rows)
    served = _served_metric(name, outputs, rows)
    assert _beyond(expected['bound'], served, threshold), (served, threshold)

    if expected.get('gzipped'):
        _check_examples_are_the_plain_files(dataset, config, tmp_path)
        _check_dead_letter_names_the_gzipped_file(dataset, config)
    for column in expected.get('dates', {}):
        _check_dates_train_as_calendar_parts(name, column, config, summary, spec_dir, rows)


def _gzipped_copy(dataset, directory) -> str:
    """The dataset's CSV as the one gzipped file of `directory`, as a daily export arrives."""
    (csv_path,) = glob.glob(str(dataset.directory / 'data' / '*.csv'))
    directory.mkdir()
    with open(csv_path, 'rb') as f:
        (directory / (os.path.basename(csv_path) + '.gz')).write_bytes(gzip.compress(f.read()))
    return str(directory)


def _check_init_reads_the_plain_file_alike(dataset, spec_dir, tmp_path, capsys):
    """init on the plain CSV proposes the same schema and features as on the gzipped one."""
    plain_dir = tmp_path / 'spec-plain'
    code = cli.main(
        [
            'init',
            '--data',
            str(dataset.directory / 'data'),
            '--label',
            dataset.label,
            '--output',
            str(plain_dir),
        ]
    )
    capsys.readouterr()
    assert code == 0
    for name in ('schema.pbtxt', 'features.yaml'):
        assert (plain_dir / name).read_text() == (spec_dir / name).read_text(), name


def _proposal(spec_dir) -> tuple[str, str, dict]:
    """What init proposed in `spec_dir`: the schema and features as written, the config's values
    but those naming the folders (comments, which say how the markers were found, left out)."""
    config = yaml.safe_load((spec_dir / 'config.yaml').read_text())
    for key in ('pipeline_name', 'data', 'dataset'):
        config.pop(key)
    return (
        (spec_dir / 'schema.pbtxt').read_text(),
        (spec_dir / 'features.yaml').read_text(),
        config,
    )


def _check_the_proposal_is_that_of_the_rows_in_any_order(
    dataset, expected, spec_dir, tmp_path, capsys
):
    """The same rows shuffled, with `--null-marker` naming the markers init found, and the same
    rows sorted by another column, without it: the same proposal as the file as published
    (grouped by its label)."""
    import csv
    import random

    (csv_path,) = glob.glob(str(dataset.directory / 'data' / '*.csv'))
    with open(csv_path, newline='', encoding='utf-8') as f:
        header, *rows = list(csv.reader(f))
    shuffled = list(rows)
    random.Random(0).shuffle(shuffled)
    column = header.index(expected['reordered'])
    flags = [arg for marker in expected['null_markers'] for arg in ('--null-marker', marker)]
    for name, order, markers in (
        ('shuffled', shuffled, flags),
        ('sorted', sorted(rows, key=lambda row: row[column]), []),
    ):
        (tmp_path / name).mkdir()
        with open(tmp_path / name / 'rows.csv', 'w', newline='', encoding='utf-8') as f:
            csv.writer(f, lineterminator='\n').writerows([header, *order])
        out = tmp_path / f'spec-{name}'
        code = cli.main(
            ['init', '--data', str(tmp_path / name), '--label', dataset.label]
            + ['--output', str(out), *markers]
        )
        capsys.readouterr()
        assert code == 0
        assert _proposal(out) == _proposal(spec_dir), name


def _examples(directory: str) -> dict[str, list[bytes]]:
    examples = {}
    for split in ('train', 'eval'):
        paths = sorted(glob.glob(os.path.join(directory, f'Split-{split}', '*.gz')))
        records = tf.data.TFRecordDataset(paths, compression_type='GZIP')
        examples[split] = sorted(record.numpy() for record in records)
    return examples


def _examples_dir(config) -> str:
    (examples,) = glob.glob(os.path.join(config.pipeline_root, 'CsvExampleGen', 'examples', '*'))
    return examples


def _check_examples_are_the_plain_files(dataset, config, tmp_path) -> None:
    """The run's examples from the gzipped file are those of the plain file, split alike."""
    out = tmp_path / 'plain-examples'
    plain = csv_source.CsvSourceConfig(
        input_splits=(('single_split', str(dataset.directory / 'data' / '*.csv')),),
        output_splits=(('train', 2), ('eval', 1)),
        examples_dir=str(out),
        dead_letter_dir=str(out / 'dead_letter'),
        summary_path=str(out / 'summary.json'),
        dialect=csv_dialect.CsvDialect(null_markers=config.example_gen.null_markers),
        column_types=column_types_from_schema(load_schema(config.schema_path)),
        label_column=dataset.label,
    )
    with beam.Pipeline() as pipeline:
        _ = pipeline | csv_source.CsvToExampleFiles(plain)
    run_examples, plain_examples = _examples(_examples_dir(config)), _examples(str(out))
    assert sum(len(examples) for examples in run_examples.values()) == dataset.rows[1]
    assert run_examples == plain_examples


def _check_dead_letter_names_the_gzipped_file(dataset, config) -> None:
    dead_letter = os.path.join(_examples_dir(config), example_gen_spec.DEAD_LETTER_DIR_NAME)
    records = []
    for path in sorted(glob.glob(os.path.join(dead_letter, 'rejected-*.jsonl'))):
        with open(path, encoding='utf-8') as f:
            records.extend(json.loads(line) for line in f if line.strip())
    assert sorted(r['line'] for r in records) == list(dataset.unlabeled_lines)
    (csv_path,) = glob.glob(str(dataset.directory / 'data' / '*.csv'))
    with open(csv_path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    for record in records:
        assert record['file'].endswith(os.path.basename(csv_path) + '.gz'), record
        assert record['raw'] == lines[record['line'] - 1]


def _check_dates_train_as_calendar_parts(name, column, config, summary, spec_dir, rows) -> None:
    """The date's parts are transformed features the model was trained on, and the pushed
    model serves rows with the date as text, a date that does not parse included."""
    import tensorflow_transform as tft

    (transform_graph,) = glob.glob(
        os.path.join(config.pipeline_root, 'Transform', 'transform_graph', '*')
    )
    transformed = tft.TFTransformOutput(transform_graph).transformed_feature_spec()
    for part in ('year', 'month', 'day', 'day_of_week', 'missing'):
        assert f'{column}_{part}' in transformed, sorted(transformed)
    assert column not in transformed
    schema_path = str(spec_dir / 'schema.pbtxt')
    label = DATASETS[name].label
    outputs = _serve(summary.pushed_model, schema_path, label, rows[:20])
    # The same rows with their dates unreadable: still served (each date as missing), and the
    # date mattered to the model: some probabilities move.
    unreadable = [{**row, column: 'not a date'} for row in rows[:20]]
    undated = _serve(summary.pushed_model, schema_path, label, unreadable)
    np.testing.assert_allclose(undated['probabilities'].sum(axis=1), 1.0, rtol=1e-5)
    assert not np.allclose(undated['probabilities'], outputs['probabilities'], atol=1e-6)

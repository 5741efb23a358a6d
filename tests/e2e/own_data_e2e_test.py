"""End to end on three datasets other than taxi: `asynctrain run --config datasets/<name>/config.yaml`.

One test per dataset, each in its own work directory, so pytest-xdist runs them side by side:

- penguins (multiclass, a string label with spaces and parentheses, `NA` cells, five rows
  without a label), diabetes (regression, a float label), breast_cancer (binary, `diagnosis`
  with `positive: malignant`).

Each runs the whole pipeline through the command line and asserts that every component ran, that
the eval metric beats the trivial baseline by the margin stated in the dataset's README, that the
pushed model serves raw CSV rows (label removed) with the task's documented outputs and scores them
well, and that `asynctrain compile` accepts the same config. For penguins, the unlabeled rows are
in ExampleGen's dead letter with their reason, and counted.
"""

from __future__ import annotations

import glob
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from asynctrain import cli
from asynctrain.components.example_gen import spec as example_gen_spec
from asynctrain.components.shared.feature_types import load_schema
from asynctrain.pipelines import run_summary
from asynctrain.pipelines.config import load_config
from asynctrain.testing import evaluation_outputs
from tests.e2e.e2e_helpers import (
    COMPONENTS,
    DATASETS,
    METRIC_NAMES,
    PENGUIN_SPECIES,
    Dataset,
    auc,
    components_for,
    raw_example,
    read_csv,
    run_cli,
    trivial_baseline,
)
from tests.repository import REPO_ROOT

pytestmark = pytest.mark.e2e


def _serve(model_dir: str, dataset: Dataset, rows: list[dict[str, str]]) -> dict[str, np.ndarray]:
    schema = load_schema(str(dataset.directory / 'schema.pbtxt'))
    types = {f.name: f.type for f in schema.feature}
    loaded = tf.saved_model.load(model_dir)
    examples = tf.constant([raw_example(r, types, dataset.label) for r in rows])
    outputs = loaded.signatures['serving_default'](examples=examples)
    return {name: tensor.numpy() for name, tensor in outputs.items()}


def _check_multiclass_serving(outputs: dict[str, np.ndarray], rows: list[dict[str, str]]) -> None:
    n = len(rows)
    probabilities, classes = outputs['probabilities'], outputs['classes']
    predicted = [c.decode() for c in outputs['predicted_class']]
    assert probabilities.shape == (n, 3)
    assert classes.shape == (n, 3)
    assert outputs['predicted_class'].shape == (n,)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert ((probabilities >= 0) & (probabilities <= 1)).all()
    names = [c.decode() for c in classes[0]]
    # The class names, in one fixed order for every row.
    assert set(names) == PENGUIN_SPECIES
    assert all([c.decode() for c in row] == names for row in classes)
    assert predicted == [names[i] for i in probabilities.argmax(axis=1)]
    labeled = [
        (p, r['Species']) for p, r in zip(predicted, rows) if r['Species'] in PENGUIN_SPECIES
    ]
    accuracy = np.mean([p == species for p, species in labeled])
    assert accuracy >= DATASETS['penguins'].baseline + DATASETS['penguins'].margin, accuracy


def _check_regression_serving(outputs: dict[str, np.ndarray], rows: list[dict[str, str]]) -> None:
    predictions = outputs['predictions']
    assert predictions.shape == (len(rows), 1)
    labels = np.array([float(r['disease_progression']) for r in rows])
    # In the label's own units: a standardized output would be off by ~150 on every row.
    rmse = float(np.sqrt(np.mean((predictions[:, 0] - labels) ** 2)))
    dataset = DATASETS['diabetes']
    assert rmse <= dataset.baseline * (1 - dataset.margin), rmse
    assert 25 <= predictions.mean() <= 346


def _check_binary_serving(outputs: dict[str, np.ndarray], rows: list[dict[str, str]]) -> None:
    probabilities = outputs['probabilities']
    assert probabilities.shape == (len(rows), 1)
    assert ((probabilities >= 0) & (probabilities <= 1)).all()
    malignant = np.array([r['diagnosis'] == 'malignant' for r in rows])
    assert malignant.sum() == 212
    # The probability is of `positive: malignant`, not of benign.
    score = auc(probabilities[:, 0], malignant)
    dataset = DATASETS['breast_cancer']
    assert score >= dataset.baseline + dataset.margin, score


SERVING_CHECKS = {
    'penguins': _check_multiclass_serving,
    'diabetes': _check_regression_serving,
    'breast_cancer': _check_binary_serving,
}


def _check_dead_letter(config, dataset: Dataset) -> None:
    (examples,) = glob.glob(os.path.join(config.pipeline_root, 'CsvExampleGen', 'examples', '*'))
    dead_letter = os.path.join(examples, example_gen_spec.DEAD_LETTER_DIR_NAME)
    records = []
    for path in sorted(glob.glob(os.path.join(dead_letter, 'rejected-*.jsonl'))):
        with open(path, encoding='utf-8') as f:
            records.extend(json.loads(line) for line in f if line.strip())
    assert sorted(r['line'] for r in records) == list(dataset.unlabeled_lines)
    (csv_path,) = glob.glob(str(dataset.directory / 'data' / '*.csv'))
    with open(csv_path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    for record in records:
        assert record['file'].endswith(os.path.basename(csv_path))
        # The reason names the label column and says it is missing.
        assert repr(dataset.label) in record['reason'], record
        assert 'missing' in record['reason'], record
        assert record['raw'] == lines[record['line'] - 1]
    with open(os.path.join(examples, example_gen_spec.SUMMARY_FILE_NAME), encoding='utf-8') as f:
        summary = json.load(f)
    assert (summary['rows_read'], summary['rows_written'], summary['rows_rejected']) == dataset.rows


@pytest.mark.parametrize('name', sorted(DATASETS))
def test_asynctrain_run_on_the_dataset_blesses_pushes_and_serves_raw_rows(
    name, tmp_path, monkeypatch
):
    dataset = DATASETS[name]
    work_dir = tmp_path / 'work'

    result = run_cli('run', '--config', dataset.config_path, '--work-dir', str(work_dir))

    output = f'stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}'
    assert result.returncode == 0, output
    # Paths in the config are relative to the repository root, as for the command above.
    monkeypatch.chdir(REPO_ROOT)
    config = load_config(dataset.config_path, work_dir=str(work_dir))
    summary = run_summary.read_summary(config, started=0.0)
    assert summary.executed == components_for(config)
    assert summary.cached == []
    assert summary.rows == dict(zip(run_summary.ROW_COUNT_PROPERTIES, dataset.rows))

    metric_name, value = summary.eval_metric
    assert metric_name.lower() in METRIC_NAMES[dataset.metric]
    assert dataset.beats_baseline(value), (dataset.metric, value, dataset.baseline)
    assert summary.blessed is True
    assert trivial_baseline(config, dataset) == pytest.approx(dataset.baseline, abs=5e-3)
    printed = re.search(r'^eval (\S+): ([0-9.]+), blessed: yes$', result.stdout, re.MULTILINE)
    assert printed, output
    assert printed.group(1).lower() in METRIC_NAMES[dataset.metric]
    assert float(printed.group(2)) == pytest.approx(value, abs=1e-4)

    assert summary.pushed_model and summary.pushed_model.startswith(config.serving_dir)
    rows = read_csv(dataset)
    SERVING_CHECKS[name](_serve(summary.pushed_model, dataset, rows), rows)

    if dataset.unlabeled_lines:
        _check_dead_letter(config, dataset)
    if config.evaluation.slices:
        _check_slices_equal_stock_tfmas(config, tmp_path)


def _newest(config, component: str, output: str) -> str:
    uris = glob.glob(os.path.join(config.pipeline_root, component, output, '*'))
    return max(uris, key=lambda uri: int(os.path.basename(uri)))


def _check_slices_equal_stock_tfmas(config, tmp_path) -> None:
    """Every slice's metrics, the keys of their intervals, the plots and the checks equal stock
    TFMA's on the same model and eval examples, with the eval config the Evaluator wrote."""
    ours_dir = _newest(config, 'Evaluator', 'evaluation')
    eval_config = tfma.load_eval_result(ours_dir).config
    model = os.path.join(_newest(config, 'Trainer', 'model'), 'Format-Serving')
    examples = os.path.join(_newest(config, 'CsvExampleGen', 'examples'), 'Split-eval', '*')
    evaluation_outputs.run_stock(eval_config, {'': model}, examples, str(tmp_path / 'stock'))
    ours = evaluation_outputs.assert_same(str(tmp_path / 'stock'), ours_dir)
    sliced = {tuple(name for name, _ in key) for key in ours if key}
    assert sliced == {tuple(s) for s in config.evaluation.slices}
    assert evaluation_outputs.intervals(ours_dir)  # the jackknife's, on the larger slices
    assert evaluation_outputs.plots(ours_dir)


@pytest.mark.parametrize('name', sorted(DATASETS))
def test_asynctrain_compile_accepts_the_dataset_config(name, tmp_path, monkeypatch):
    dataset = DATASETS[name]
    monkeypatch.chdir(REPO_ROOT)
    output = tmp_path / 'pipeline.yaml'

    code = cli.main(
        [
            'compile',
            '--target',
            'kubeflow',
            '--output',
            str(output),
            '--config',
            dataset.config_path,
        ]
    )

    assert code == 0
    (document,) = yaml.safe_load_all(output.read_text())
    spec = json_format.ParseDict(document, pipeline_spec_pb2.PipelineSpec())
    with open(dataset.config_path, encoding='utf-8') as f:
        assert spec.pipeline_info.name == yaml.safe_load(f)['pipeline_name']
    assert set(COMPONENTS) <= set(spec.root.dag.tasks)


@pytest.mark.parametrize('name', sorted(DATASETS))
def test_the_config_blesses_only_beyond_the_stated_margin_over_the_baseline(name, monkeypatch):
    dataset = DATASETS[name]
    monkeypatch.chdir(REPO_ROOT)

    evaluation = load_config(dataset.config_path).evaluation

    assert evaluation.metric in ('', dataset.metric)
    if dataset.metric == 'RMSE':
        assert evaluation.max_value <= dataset.baseline * (1 - dataset.margin)
    else:
        assert evaluation.min_value >= dataset.baseline + dataset.margin

"""The compiled Kubeflow pipeline, run task by task as open-source KFP 2.x would run it
(`asynctrain compile --target kubeflow`, then `asynctrain run --compiled`).

- The taxi pipeline on a small sample, its Trainer in the `tfjob` cluster mode: the TFJob's
  chief, workers and parameter server run as local processes. Every task succeeds, the blessing
  names the model as TFX's Kubeflow V2 entrypoint names it for stock Evaluator, and the pushed
  model serves raw rows with Transform's output gone.
- Penguins, one compiled spec run on three days, as a daily recurring run would: day 1 has no
  blessed model yet and is pushed; day 2 (train labels partly swapped, `penguin_days`) finds
  day 1's pushed model through `latest_blessed_model`, warm-starts from it, is judged against it
  and, worse by more than `max_regression` though above the absolute bound, is not pushed (the
  blessing against the last blessed model); day 3's culmen lengths arrive in centimetres: DriftValidator
  compares them with day 1's data (the served model's) and stops the run before Transform.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import shutil

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
import yaml
from tensorflow_metadata.proto.v0 import schema_pb2

from components import model_statistics
from components.example_gen.feature_types import load_schema
from pipelines import cli
from pipelines.config import REPO_ROOT, bundled_data_dir
from tests.e2e.e2e_helpers import raw_example
from tests.e2e.penguin_days import (
    DATASET,
    DAYS,
    DRIFTED_FEATURE,
    MAX_REGRESSION,
    MIN_VALUE,
    NULL_MARKERS,
    write_days,
    write_drifted_day,
)

pytestmark = pytest.mark.e2e

TAXI_ROWS = 3000
# The order a run takes: every producer before its consumers, ties by name.
TASKS = [
    'CsvExampleGen',
    'ImportSchemaGen',
    'ExampleValidator',
    'latest_blessed_model',
    'DriftValidator',
    'Transform',
    'ExampleBatcher',
    'Trainer',
    'Evaluator',
    'Pusher',
]


def _compile_and_run(tmp_path, config: dict, name: str, *run_args: str):
    """Compiles `config` once (kept as `<name>.yaml`) and runs it; returns (exit code, run.json)."""
    spec = tmp_path / f'{name}.yaml'
    if not spec.exists():
        config_file = tmp_path / f'{name}-config.yaml'
        config_file.write_text(yaml.safe_dump(config))
        assert (
            cli.main(
                ['compile', '--target', 'kubeflow', '--output', str(spec)]
                + ['--config', str(config_file)]
            )
            == 0
        )
    code = cli.main(['run', '--compiled', str(spec), *run_args])
    runs = sorted(glob.glob(str(tmp_path / 'runs' / 'compiled' / '*' / '*' / 'run.json')))
    with open(max(runs, key=os.path.getmtime)) as f:
        return code, json.load(f)


def _outputs(run: dict) -> dict[str, dict]:
    """Task -> output -> the one published artifact."""
    return {t['name']: {k: v[0] for k, v in t['outputs'].items()} for t in run['tasks']}


def _task_log(run: dict, task: str) -> str:
    (log_path,) = [t['log_path'] for t in run['tasks'] if t['name'] == task]
    with open(log_path) as f:
        return f.read()


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `runs/compiled/...` logs under the test's directory
    return tmp_path


def test_taxi_compiled_runs_every_task_with_the_trainer_as_a_local_tfjob(in_tmp, capsys):
    sample = in_tmp / 'taxi'
    sample.mkdir()
    with open(os.path.join(bundled_data_dir(), 'data.csv')) as src:
        lines = [line for _, line in zip(range(TAXI_ROWS + 1), src)]
    (sample / 'data.csv').write_text(''.join(lines))
    work_dir = in_tmp / 'work'
    config = {
        'pipeline_name': 'taxi-compiled',
        'data': str(sample),
        'work_dir': str(work_dir),
        'trainer': {
            'training': {'train_steps': 150, 'eval_steps': 10},
            'distribution': {'cluster': 'tfjob'},
            'kubernetes': {'image': 'registry.example/asynctrain:test', 'namespace': 'ml'},
        },
    }

    code, run = _compile_and_run(in_tmp, config, 'taxi', '--tfjob-local', '--run-id', 'r1')

    assert code == 0
    printed = capsys.readouterr().out
    assert [t['name'] for t in run['tasks']] == TASKS
    for index, task in enumerate(run['tasks'], start=1):
        assert f'[{index}/{len(TASKS)}] {task["name"]}: done in' in printed
    assert run['run_root'] == f'{work_dir}/pipeline_root/taxi-compiled/r1'
    outputs = _outputs(run)
    # Every output lies under the run's root, in a per-execution folder, as the driver puts it.
    for task, artifacts in outputs.items():
        for name, artifact in artifacts.items():
            assert artifact['uri'].startswith(f'{run["run_root"]}/{task}/'), (task, name)
            assert artifact['uri'].endswith(f'/{name}')

    # The Trainer trained as a TFJob whose replicas ran here.
    assert 'Training as TFJob ml/' in _task_log(run, 'Trainer')
    replica_logs = sorted(os.path.basename(p) for p in glob.glob('runs/compiled/*/r1/tfjob/*'))
    assert any('chief' in p.lower() for p in replica_logs), replica_logs
    assert sum('worker' in p.lower() for p in replica_logs) == 2, replica_logs
    assert any('ps' in p.lower() for p in replica_logs), replica_logs

    # The blessing, as TFX's V2 entrypoint publishes stock Evaluator's: the model named by the
    # name the run gave the Trainer's model, not by a number.
    blessing = outputs['Evaluator']['blessing']['metadata']
    assert blessing['blessed'] == 1
    assert blessing['current_model_id'] == outputs['Trainer']['model']['name']
    assert blessing['current_model'] == outputs['Trainer']['model']['uri']
    pushed = outputs['Pusher']['pushed_model']['metadata']
    assert pushed['pushed'] == 1
    assert pushed['pushed_destination'].startswith(f'{work_dir}/serving_model/')
    assert f'pushed: {pushed["pushed_destination"]}' in printed

    # The pushed model stands alone: Transform's output removed, it scores raw rows.
    shutil.rmtree(os.path.dirname(outputs['Transform']['transform_graph']['uri']))
    loaded = tf.saved_model.load(pushed['pushed_destination'])
    schema = load_schema(str(REPO_ROOT / 'schemas' / 'taxi' / 'schema.pbtxt'))
    types = {f.name: f.type for f in schema.feature}
    with open(sample / 'data.csv', newline='') as f:
        rows = list(csv.DictReader(f))[:8]
    scores = loaded.signatures['serving_default'](
        examples=tf.constant([raw_example(r, types, 'tips') for r in rows])
    )['probabilities'].numpy()
    assert scores.shape == (8, 1)
    assert ((scores > 0) & (scores < 1)).all() and len(set(scores.ravel().tolist())) > 1
    assert types['company'] == schema_pb2.BYTES  # raw text went in, not a vocabulary index


def test_penguins_compiled_once_run_daily_warm_starts_keeps_a_worse_day_out_stops_on_drift(
    in_tmp, capsys
):
    data = in_tmp / 'data'
    write_days(str(data), str(in_tmp / 'scratch'))
    day2_data = in_tmp / 'later' / DAYS[1]
    os.makedirs(day2_data.parent)
    # Day 2's folder arrives after day 1's run.
    os.rename(data / DAYS[1], day2_data)
    work_dir = in_tmp / 'work'
    config = {
        'pipeline_name': 'penguins-daily',
        'dataset': str(DATASET),
        'data': str(data),
        'work_dir': str(work_dir),
        'example_gen': {
            'input_pattern': '{YYYY}-{MM}-{DD}/*.csv',
            'null_markers': list(NULL_MARKERS),
            'max_bad_fraction': 0.02,
        },
        'retraining': {'warm_start': True},
        'evaluation': {
            'min_value': MIN_VALUE,
            'baseline': 'latest_blessed',
            'max_regression': MAX_REGRESSION,
        },
    }

    code, day1 = _compile_and_run(in_tmp, config, 'penguins', '--run-id', 'day1')
    assert code == 0
    os.rename(day2_data, data / DAYS[1])
    code, day2 = _compile_and_run(in_tmp, config, 'penguins', '--run-id', 'day2')
    assert code == 0

    first, second = _outputs(day1), _outputs(day2)
    # Day 1: nothing pushed before, so no base model, no baseline; blessed on the bound alone.
    assert first['latest_blessed_model']['model']['metadata']['pushed_model'] == ''
    assert 'Warm start' not in _task_log(day1, 'Trainer')
    assert 'baseline_model_id' not in first['Evaluator']['blessing']['metadata']
    assert first['Evaluator']['blessing']['metadata']['blessed'] == 1
    day1_push = first['Pusher']['pushed_model']['metadata']['pushed_destination']
    assert first['Pusher']['pushed_model']['metadata']['pushed'] == 1

    # Day 2 reads day 1's push (its own span: the newest folder) and warm-starts from it.
    assert second['latest_blessed_model']['model']['metadata']['pushed_model'] == day1_push
    trainer_log = _task_log(day2, 'Trainer')
    assert 'Warm start: ' in trainer_log
    assert second['latest_blessed_model']['model']['uri'] in trainer_log
    # Judged against it: the baseline is the model latest_blessed_model handed on.
    blessing = second['Evaluator']['blessing']['metadata']
    assert blessing['baseline_model_id'] == second['latest_blessed_model']['model']['name']
    assert blessing['current_model_id'] == second['Trainer']['model']['name']
    evaluation = second['Evaluator']['evaluation']['uri']
    candidate = tfma.load_eval_result(evaluation, model_name='candidate')
    baseline = tfma.load_eval_result(evaluation, model_name='baseline')
    ((_, candidate_metrics),) = candidate.slicing_metrics
    ((_, baseline_metrics),) = baseline.slicing_metrics
    day2_accuracy = candidate_metrics['']['']['accuracy']['doubleValue']
    day1_accuracy = baseline_metrics['']['']['accuracy']['doubleValue']
    assert day1_accuracy - day2_accuracy > MAX_REGRESSION, (day1_accuracy, day2_accuracy)
    validation = tfma.load_validation_result(evaluation)
    failures = [f for s in validation.metric_validations_per_slice for f in s.failures]
    assert [(f.metric_key.name, f.metric_key.is_diff) for f in failures] == [('accuracy', True)]
    # Not blessed, not pushed: day 1's model is still the one served.
    assert blessing['blessed'] == 0
    assert second['Pusher']['pushed_model']['metadata']['pushed'] == 0
    assert os.listdir(work_dir / 'serving_model') == [os.path.basename(day1_push)]

    # Both days scored the same clean eval examples; day 2 cleared the absolute bound and failed
    # on the change against the baseline only, whose accuracy is day 1's model's, re-measured.
    assert _eval_split(first) == _eval_split(second) and len(_eval_split(first)) == 128
    for run in (first, second):
        rows = run['CsvExampleGen']['examples']['metadata']
        assert (rows['rows_read'], rows['rows_written'], rows['rows_rejected']) == (344, 339, 5)
    assert day2_accuracy >= MIN_VALUE
    day1_evaluation = tfma.load_eval_result(first['Evaluator']['evaluation']['uri'])
    ((_, day1_metrics),) = day1_evaluation.slicing_metrics
    assert day1_accuracy == pytest.approx(day1_metrics['']['']['accuracy']['doubleValue'], abs=1e-6)
    # Day 2's data is day 1's with labels swapped in pairs: no drift against it.
    drift = second['DriftValidator']['anomalies']['metadata']
    assert drift['first_run'] == 0 and json.loads(drift['drifted_features']) == []
    assert drift['compared_with'] == os.path.join(
        second['latest_blessed_model']['model']['uri'],
        'Format-Serving',
        model_statistics.MODEL_STATISTICS_PATH,
    )

    # Day 3, drifted: stopped at DriftValidator, before Transform, naming the feature; compared
    # with day 1's data, since day 1's model is still the one served.
    write_drifted_day(str(data))
    capsys.readouterr()
    code, _ = _compile_and_run(in_tmp, config, 'penguins', '--run-id', 'day3')
    printed = capsys.readouterr()
    assert code == 1
    assert 'task DriftValidator failed' in printed.err
    assert f'{DRIFTED_FEATURE} (jensen_shannon_divergence ' in printed.err
    assert '] Transform' not in printed.out
    drift_log = _task_log_at(in_tmp, 'day3', 'DriftValidator')
    assert f'--accept-drift {DRIFTED_FEATURE}' in drift_log
    assert os.listdir(work_dir / 'serving_model') == [os.path.basename(day1_push)]


def _eval_split(outputs: dict) -> set[bytes]:
    """The serialized examples of the eval split of a run's CsvExampleGen output."""
    uri = outputs['CsvExampleGen']['examples']['uri']
    paths = sorted(glob.glob(os.path.join(uri, 'Split-eval', '*.gz')))
    return {r.numpy() for r in tf.data.TFRecordDataset(paths, compression_type='GZIP')}


def _task_log_at(root, run_id: str, task: str) -> str:
    (path,) = glob.glob(str(root / 'runs' / 'compiled' / '*' / run_id / f'{task}.log'))
    with open(path) as f:
        return f.read()

"""The compiled Kubeflow pipeline, run task by task as open-source KFP 2.x's driver and launcher
run it (`asynctrain compile --target kubeflow`, then `asynctrain run --compiled --kfp-version`),
on an S3 endpoint on 127.0.0.1 (moto's server): the pipeline root, the input CSVs and the push
destination all in the store, every task in a pod of its own that starts with nothing but what the
launcher downloaded. Each KFP line runs a whole pipeline:

- 2.17 (the newest): taxi, its Trainer in the `tfjob` cluster mode, the TFJob's chief, workers
  and parameter servers as local processes reading and writing the store themselves. The blessing
  names the model as TFX's entrypoint names it for stock Evaluator, the pushed model, read back
  from the store, serves raw rows.
- 2.5: taxi with the store a stock Kubeflow install uses, `minio://` (which neither TensorFlow
  nor Beam can open): every URI published is a minio:// one, the launcher's /minio/ copies never
  leak into what a task publishes.
- 2.0 (Kubeflow 1.8): penguins, one compiled spec run on three days, as a daily recurring run
  would: day 1 has no blessed model yet and is pushed; day 2 (train labels partly swapped,
  `penguin_days`) finds day 1's pushed model through `latest_blessed_model`, warm-starts from it,
  is judged against it and, worse by more than `max_regression` though above the absolute bound,
  is not pushed; day 3's culmen lengths arrive in centimetres: DriftValidator compares them with
  day 1's data (the served model's) and stops the run before Transform.

tests/e2e/stock_entrypoint_on_kfp_e2e_test.py runs the same spec with stock TFX's entrypoint put
back, and sees it fail as it fails on a cluster.
"""

from __future__ import annotations

import csv
import glob
import json
import os

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
import yaml
from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain import cli
from asynctrain.components.shared import model_statistics
from asynctrain.components.shared.feature_types import load_schema
from asynctrain.pipelines.config import BUNDLED_SCHEMAS, bundled_data_dir
from tests.e2e.e2e_helpers import raw_example
from tests.e2e.penguin_days import (
    DATASET,
    DAYS,
    DRIFTED_DAY,
    DRIFTED_FEATURE,
    MAX_REGRESSION,
    MIN_VALUE,
    NULL_MARKERS,
    write_days,
    write_drifted_day,
)

pytestmark = pytest.mark.e2e

TAXI_ROWS = 2000
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


def _compile(tmp_path, config: dict, name: str, pipeline_root: str) -> str:
    """Compiles `config` once (kept as `<name>.yaml`) for `pipeline_root`; returns its path."""
    spec = tmp_path / f'{name}.yaml'
    config_file = tmp_path / f'{name}-config.yaml'
    config_file.write_text(yaml.safe_dump(config))
    args = ['compile', '--target', 'kubeflow', '--output', str(spec), '--config', str(config_file)]
    assert cli.main([*args, '--pipeline-root', pipeline_root]) == 0
    return str(spec)


def _run(spec: str, *run_args: str) -> tuple[int, dict]:
    """`asynctrain run --compiled spec ...`; returns (exit code, the run's run.json)."""
    code = cli.main(['run', '--compiled', spec, *run_args])
    runs = glob.glob(os.path.join('runs', 'compiled', '*', '*', 'run.json'))
    with open(max(runs, key=os.path.getmtime)) as f:
        return code, json.load(f)


def _outputs(run: dict) -> dict[str, dict]:
    """Task -> output -> the one published artifact."""
    return {t['name']: {k: v[0] for k, v in t['outputs'].items()} for t in run['tasks']}


def _task_log(run: dict, task: str) -> str:
    (log_path,) = [t['log_path'] for t in run['tasks'] if t['name'] == task]
    with open(log_path) as f:
        return f.read()


def _as_s3(uri: str) -> str:
    """The store's name for an artifact URI: minio://B/K is bucket B of the same S3 endpoint."""
    return 's3://' + uri.split('://', 1)[1]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `runs/compiled/...` logs under the test's directory
    return tmp_path


def _taxi_sample(store, bucket: str, tmp_path) -> str:
    """The first TAXI_ROWS rows of the bundled CSV, uploaded to `s3://bucket/taxi/`."""
    sample = tmp_path / 'taxi'
    sample.mkdir()
    with open(os.path.join(bundled_data_dir(), 'data.csv')) as src:
        lines = [line for _, line in zip(range(TAXI_ROWS + 1), src)]
    (sample / 'data.csv').write_text(''.join(lines))
    store.upload_dir(str(sample), f's3://{bucket}/taxi')
    return str(sample / 'data.csv')


def _assert_serves_raw_rows(store, pushed_uri: str, csv_path: str, local_dir: str) -> None:
    """The pushed model, downloaded from the store alone (no Transform output beside it), scores
    raw taxi rows."""
    loaded = tf.saved_model.load(store.download_dir(pushed_uri, local_dir))
    schema = load_schema(str(BUNDLED_SCHEMAS / 'taxi' / 'schema.pbtxt'))
    types = {f.name: f.type for f in schema.feature}
    with open(csv_path, newline='') as f:
        rows = list(csv.DictReader(f))[:8]
    scores = loaded.signatures['serving_default'](
        examples=tf.constant([raw_example(r, types, 'tips') for r in rows])
    )['probabilities'].numpy()
    assert scores.shape == (8, 1)
    assert ((scores > 0) & (scores < 1)).all() and len(set(scores.ravel().tolist())) > 1
    assert types['company'] == schema_pb2.BYTES  # raw text went in, not a vocabulary index


def test_taxi_on_s3_kfp_2_17_trainer_as_a_tfjob_whose_replicas_use_the_store(
    in_tmp, capsys, s3_store
):
    bucket = s3_store.new_bucket()
    csv_path = _taxi_sample(s3_store, bucket, in_tmp)
    config = {
        'pipeline_name': 'taxi-compiled',
        'data': f's3://{bucket}/taxi',
        'work_dir': f's3://{bucket}/work',
        'trainer': {
            'training': {'train_steps': 150, 'eval_steps': 10},
            'distribution': {'cluster': 'tfjob'},
            'kubernetes': {'image': 'registry.example/asynctrain:test', 'namespace': 'ml'},
        },
    }
    spec = _compile(in_tmp, config, 'taxi', f's3://{bucket}/root')

    code, run = _run(spec, '--kfp-version', '2.17', '--tfjob-local', '--run-id', 'r1')

    assert code == 0
    printed = capsys.readouterr().out
    assert [t['name'] for t in run['tasks']] == TASKS
    for index, task in enumerate(run['tasks'], start=1):
        assert f'[{index}/{len(TASKS)}] {task["name"]}: done in' in printed
    assert run['run_root'] == f's3://{bucket}/root/taxi-compiled/r1'
    outputs = _outputs(run)
    # Every output is in the store under the run's root, in a per-execution folder, as the
    # driver puts it; the launcher uploaded what each step wrote.
    for task, artifacts in outputs.items():
        for name, artifact in artifacts.items():
            if name == 'executor-logs':
                continue
            assert artifact['uri'].startswith(f'{run["run_root"]}/{task}/'), (task, name)
            assert artifact['uri'].endswith(f'/{name}')
    for task, name in (
        ('CsvExampleGen', 'examples'),
        ('Transform', 'transform_graph'),
        ('ExampleBatcher', 'batched_examples'),
        ('Trainer', 'model'),
        ('Evaluator', 'evaluation'),
    ):
        assert s3_store.keys(outputs[task][name]['uri']), (task, name)

    # The Trainer trained as a TFJob whose replicas ran here, reading and writing the store
    # themselves (no pod's local copy reaches another pod).
    assert 'Training as TFJob ml/' in _task_log(run, 'Trainer')
    replica_logs = sorted(glob.glob('runs/compiled/*/r1/tfjob/*'))
    names = [os.path.basename(p).lower() for p in replica_logs]
    assert any('chief' in n for n in names) and any('ps' in n for n in names), names
    assert sum('worker' in n for n in names) == 2, names
    # The step handed them the store's URIs (its executor's inputs), never a pod's local copy;
    # the chief exported the model into the store itself (nothing was staged to upload).
    trainer_log = _task_log(run, 'Trainer')
    assert f'uri: "{outputs["ExampleBatcher"]["batched_examples"]["uri"]}"' in trainer_log
    assert 'uri: "/s3/' not in trainer_log
    assert s3_store.keys(outputs['Trainer']['model']['uri'] + '/Format-Serving')

    # The blessing, as TFX's V2 entrypoint publishes stock Evaluator's: the model named by the
    # name the run gave the Trainer's model, and by its URI in the store, not a pod's path.
    blessing = outputs['Evaluator']['blessing']['metadata']
    assert blessing['blessed'] == 1
    assert blessing['current_model_id'] == outputs['Trainer']['model']['name']
    assert blessing['current_model'] == outputs['Trainer']['model']['uri']
    pushed = outputs['Pusher']['pushed_model']['metadata']
    assert pushed['pushed'] == 1
    # The pipeline's own folder of the work dir (`work_dir_layout`).
    assert pushed['pushed_destination'].startswith(
        f's3://{bucket}/work/taxi-compiled/serving_model/'
    )
    assert f'pushed: {pushed["pushed_destination"]}' in printed
    _assert_serves_raw_rows(s3_store, pushed['pushed_destination'], csv_path, str(in_tmp / 'm'))


def test_taxi_on_kfps_default_minio_store_kfp_2_5_publishes_minio_uris_only(in_tmp, s3_store):
    bucket = s3_store.new_bucket('mlpipeline')
    csv_path = _taxi_sample(s3_store, bucket, in_tmp)
    config = {
        'pipeline_name': 'taxi-minio',
        'data': f's3://{bucket}/taxi',
        'work_dir': f's3://{bucket}/work',
        'drift': {'enabled': False},
        'trainer': {'training': {'train_steps': 150, 'eval_steps': 10}},
    }
    # A stock install's root: minio://mlpipeline/v2/artifacts (here the bucket is the test's).
    spec = _compile(in_tmp, config, 'taxi', f'minio://{bucket}/v2/artifacts')

    code, run = _run(spec, '--kfp-version', '2.5', '--run-id', 'm1')

    assert code == 0
    outputs = _outputs(run)
    assert 'DriftValidator' not in outputs
    for task, artifacts in outputs.items():
        for artifact in artifacts.values():
            assert artifact['uri'].startswith(
                f'minio://{bucket}/v2/artifacts/taxi-minio/m1/{task}/'
            )
    # Nothing a task published names the launcher's local copies.
    assert '/minio/' not in json.dumps(run['tasks'])
    for task, name in (('CsvExampleGen', 'examples'), ('Trainer', 'model')):
        assert s3_store.keys(_as_s3(outputs[task][name]['uri'])), (task, name)
    blessing = outputs['Evaluator']['blessing']['metadata']
    assert blessing['blessed'] == 1
    assert blessing['current_model'] == outputs['Trainer']['model']['uri']
    pushed = outputs['Pusher']['pushed_model']['metadata']
    assert pushed['pushed'] == 1
    _assert_serves_raw_rows(s3_store, pushed['pushed_destination'], csv_path, str(in_tmp / 'm'))


def test_penguins_on_kfp_2_0_compiled_once_run_daily_warm_starts_keeps_a_worse_day_out_stops_on_drift(
    in_tmp, capsys, s3_store
):
    bucket = s3_store.new_bucket()
    data = in_tmp / 'data'
    write_days(str(data), str(in_tmp / 'scratch'))
    write_drifted_day(str(data))
    store_data = f's3://{bucket}/penguins'
    serving = f's3://{bucket}/work/penguins-daily/serving_model'

    def arrive(day: str) -> None:  # A day's folder lands in the store before that day's run.
        s3_store.upload_dir(str(data / day), f'{store_data}/{day}')

    config = {
        'pipeline_name': 'penguins-daily',
        'dataset': str(DATASET),
        'data': store_data,
        'work_dir': f's3://{bucket}/work',
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
    spec = _compile(in_tmp, config, 'penguins', f's3://{bucket}/root')
    profile = ('--kfp-version', '2.0')

    arrive(DAYS[0])
    code, day1 = _run(spec, *profile, '--run-id', 'day1')
    assert code == 0
    arrive(DAYS[1])
    capsys.readouterr()
    code, day2 = _run(spec, *profile, '--run-id', 'day2')
    assert code == 0
    day2_printed = capsys.readouterr().out

    first, second = _outputs(day1), _outputs(day2)
    # KFP's cache, on by default: the schema is day 1's execution again, but the day's
    # ExampleGen ran (`compile` turns its cache off: its parameters are the same every day).
    assert '] ImportSchemaGen: from cache' in day2_printed
    assert second['ImportSchemaGen']['schema'] == first['ImportSchemaGen']['schema']
    assert '] CsvExampleGen: done in' in day2_printed
    assert second['CsvExampleGen']['examples']['uri'].startswith(
        f's3://{bucket}/root/penguins-daily/day2/'
    )
    # KFP 2.0.x: no executor-logs output, no uuid folder in the driver's URIs.
    assert 'executor-logs' not in first['Trainer']
    assert (
        first['Trainer']['model']['uri'] == f's3://{bucket}/root/penguins-daily/day1/Trainer/model'
    )
    # Day 1: nothing pushed before, so no base model, no baseline; blessed on the bound alone.
    assert first['latest_blessed_model']['model']['metadata']['pushed_model'] == ''
    assert 'Warm start' not in _task_log(day1, 'Trainer')
    assert 'baseline_model_id' not in first['Evaluator']['blessing']['metadata']
    assert first['Evaluator']['blessing']['metadata']['blessed'] == 1
    day1_push = first['Pusher']['pushed_model']['metadata']['pushed_destination']
    assert first['Pusher']['pushed_model']['metadata']['pushed'] == 1
    assert day1_push.startswith(serving + '/')

    # Day 2 reads day 1's push from the store (its own span: the newest folder) and warm-starts
    # from it.
    assert second['latest_blessed_model']['model']['metadata']['pushed_model'] == day1_push
    trainer_log = _task_log(day2, 'Trainer')
    assert 'Warm start: ' in trainer_log
    # Judged against it: the baseline is the model latest_blessed_model handed on.
    blessing = second['Evaluator']['blessing']['metadata']
    assert blessing['baseline_model_id'] == second['latest_blessed_model']['model']['name']
    assert blessing['current_model_id'] == second['Trainer']['model']['name']
    evaluation = s3_store.download_dir(
        second['Evaluator']['evaluation']['uri'], str(in_tmp / 'evaluation2')
    )
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
    assert _pushed_versions(s3_store, serving) == {day1_push.rsplit('/', 1)[1]}

    # Both days scored the same clean eval examples; day 2 cleared the absolute bound and failed
    # on the change against the baseline only, whose accuracy is day 1's model's, re-measured.
    assert _eval_split(s3_store, first, in_tmp / 'e1') == _eval_split(
        s3_store, second, in_tmp / 'e2'
    )
    assert len(_eval_split(s3_store, first, in_tmp / 'e1')) == 128
    for run in (first, second):
        rows = run['CsvExampleGen']['examples']['metadata']
        assert (rows['rows_read'], rows['rows_written'], rows['rows_rejected']) == (344, 339, 5)
    assert day2_accuracy >= MIN_VALUE
    day1_evaluation = tfma.load_eval_result(
        s3_store.download_dir(first['Evaluator']['evaluation']['uri'], str(in_tmp / 'ev1'))
    )
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
    arrive(DRIFTED_DAY)
    capsys.readouterr()
    code, _ = _run(spec, *profile, '--run-id', 'day3')
    printed = capsys.readouterr()
    assert code == 1
    assert 'task DriftValidator failed' in printed.err
    assert f'{DRIFTED_FEATURE} (jensen_shannon_divergence ' in printed.err
    assert '] Transform' not in printed.out
    (drift_log,) = glob.glob('runs/compiled/*/day3/DriftValidator.log')
    with open(drift_log) as f:
        assert f'--accept-drift {DRIFTED_FEATURE}' in f.read()
    assert _pushed_versions(s3_store, serving) == {day1_push.rsplit('/', 1)[1]}


def _pushed_versions(store, serving: str) -> set[str]:
    """The version folders under the push destination in the store."""
    return {key.split('/', 1)[0] for key in store.keys(serving)}


def _eval_split(store, outputs: dict, local_dir) -> set[bytes]:
    """The serialized examples of the eval split of a run's CsvExampleGen output."""
    uri = outputs['CsvExampleGen']['examples']['uri']
    local = store.download_dir(uri + '/Split-eval', str(local_dir))
    paths = sorted(glob.glob(os.path.join(local, '*.gz')))
    return {r.numpy() for r in tf.data.TFRecordDataset(paths, compression_type='GZIP')}

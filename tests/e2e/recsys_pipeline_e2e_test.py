"""End to end on a recommender's data: a 10^6-row embedding table trained on two parameter
servers, killed mid-training, resumed, pushed and served.

One test, so the pipeline runs once (twice, with the kill):

- the data: `bench recsys-data` rows (Criteo-like, 20,000 of them, ids Zipf-distributed over
  vocabularies up to 10^6, a planted click signal);
- `asynctrain init` proposes, for the 10^6-id column `C24`, hashing into 2x the distinct values
  of the sample, with its reason line; the reviewer's edits, as a user makes them: `C24` into
  10^6 ids (the column's whole vocabulary, which 20,000 rows cannot show: `num_buckets`
  999,999 and the missing value's id), two parameter servers, checkpoints every 200 steps in a
  folder of their own (so that a rerun resumes);
- `asynctrain run`, killed with SIGKILL once training has passed a checkpoint: nothing of it
  keeps running, and nothing is pushed;
- `asynctrain run` again: the components before the Trainer come from the cache, and the
  Trainer resumes at the killed run's last checkpoint, not step 0, and trains to the end;
  the model is blessed, with an eval AUC under the planted ceiling;
- where the trained variables lived, as the Trainer's report records them from its own
  strategy-built model and optimizer: the 10^6-row table and its Adagrad slot are each split
  over both parameter servers, no shard holding the whole table, and nothing of that size on a
  worker or the coordinator;
- the Trainer's model rebuilt as the Trainer builds it (`sharded_model_probe`, a process of its
  own with a fresh cluster of the run's size) from the run's request and checkpoint: the same
  placement, the shards holding the checkpoint's values; the pushed model scores raw CSV rows as
  that sharded model does (within 1e-6);
- `asynctrain run` once more with three parameter servers and RESHARD_STEPS more steps: the
  Trainer resumes at the two-server run's last step, with the table split over the three.
"""

from __future__ import annotations

import base64
import csv
import glob
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import yaml

from asynctrain import cli
from asynctrain.benchmarks import recsys_data
from asynctrain.components.shared.feature_types import load_schema
from asynctrain.pipelines import run_summary
from asynctrain.pipelines.config import load_config
from tests.e2e.e2e_helpers import raw_example, run_cli
from tests.e2e.sharded_model_probe import MIN_ROWS
from tests.repository import REPO_ROOT

pytestmark = pytest.mark.e2e

ROWS = 20_000
TABLE_COLUMN = 'C24'
TABLE_ROWS = 1_000_000
NUM_PS = 2
# The last run's parameter servers, and the steps it adds to the resumed ones.
RESHARDED_NUM_PS = 3
RESHARD_STEPS = 200
CHECKPOINT_INTERVAL = 200
# The reviewer's budget: init proposes about 40 passes (8,334 steps of 64 on 20,000 rows); this
# test is about where the table lives and how training resumes, which 1,500 steps (about 7
# passes, blessed) show as well as 8,334.
TRAIN_STEPS = 1_500
# Kill once the run has recorded this step: past its first checkpoint, so a restart from step 0
# would show.
KILL_AFTER_STEP = 300
SERVED_ROWS = 500


def _ps_devices(num_ps: int) -> set[str]:
    return {f'/job:ps/replica:0/task:{i}/device:CPU:0' for i in range(num_ps)}


def _init(data_dir: str, spec_dir, capsys) -> int:
    """init on the generated rows; returns the buckets it proposed for TABLE_COLUMN."""
    code = cli.main(['init', '--data', data_dir, '--label', 'click', '--output', str(spec_dir)])
    init = capsys.readouterr()
    assert code == 0, init.err[-3000:]
    line = re.search(
        rf'^  {TABLE_COLUMN} +hash +(\d+) distinct strings in \d+ cells: too many for a '
        r'vocabulary; hashed into (\d+) buckets \(2x the distinct values, at most 2\^21\)$',
        init.out,
        re.MULTILINE,
    )
    assert line, init.out
    distinct, buckets = int(line.group(1)), int(line.group(2))
    assert buckets == 1 << math.ceil(math.log2(2 * distinct))
    return buckets


def _edit_trainer(config_path, num_ps: int, **training) -> None:
    config = yaml.safe_load(config_path.read_text())
    config['trainer']['distribution'] = {'num_ps': num_ps}
    config['trainer']['training'].update(training)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))


def _review(spec_dir, work_dir, proposed_buckets: int) -> None:
    """The reviewer's edits: the table's size, the cluster, checkpoints a rerun resumes from, a
    shorter training."""
    features_path, config_path = spec_dir / 'features.yaml', spec_dir / 'config.yaml'
    features = yaml.safe_load(features_path.read_text())
    (table,) = [f for f in features['features'] if f['name'] == TABLE_COLUMN]
    assert table == {'name': TABLE_COLUMN, 'transform': 'hash', 'num_buckets': proposed_buckets}
    table['num_buckets'] = TABLE_ROWS - 1  # and id num_buckets for a missing value
    features_path.write_text(yaml.safe_dump(features, sort_keys=False))
    _edit_trainer(
        config_path,
        NUM_PS,
        checkpoint_dir=str(work_dir / 'checkpoints'),
        checkpoint_interval_steps=CHECKPOINT_INTERVAL,
        train_steps=TRAIN_STEPS,
    )


def _session_pids(session: int) -> list[int]:
    """Live processes of a session (zombies excluded)."""
    pids = []
    for stat in glob.glob('/proc/[0-9]*/stat'):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        # After the name: state, ppid, pgrp, session.
        if int(fields[3]) == session and fields[0] != 'Z':
            pids.append(int(stat.split('/')[2]))
    return pids


def _wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f'{what}: not within {timeout} s')


def _progress_step(pipeline_root: str) -> int:
    steps = []
    for path in glob.glob(
        os.path.join(pipeline_root, 'Trainer', 'model_run', '*', 'progress.json')
    ):
        try:
            with open(path) as f:
                steps.append(json.load(f)['step'])
        except (OSError, ValueError, KeyError):  # Being replaced.
            continue
    return max(steps, default=0)


def _checkpoint_step(checkpoint_dir) -> int:
    latest = tf.train.latest_checkpoint(str(checkpoint_dir))
    return int(re.search(r'ckpt-(\d+)$', latest).group(1)) if latest else 0


def _run_and_kill(config_path, work_dir, pipeline_root: str) -> tuple[int, int]:
    """`asynctrain run`, SIGKILLed past KILL_AFTER_STEP; (the step it recorded, its last
    checkpoint's step)."""
    command = [sys.executable, '-m', 'asynctrain', 'run', '--config', str(config_path)]
    run = subprocess.Popen(
        [*command, '--work-dir', str(work_dir)],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(
            lambda: (
                _progress_step(pipeline_root) >= KILL_AFTER_STEP
                and _checkpoint_step(work_dir / 'checkpoints') >= CHECKPOINT_INTERVAL
            ),
            timeout=600,
            what='training past its first checkpoint',
        )
        run.kill()
        assert run.wait(timeout=30) == -signal.SIGKILL
        # The coordinator and the in-process cluster's host die with the run.
        _wait_for(lambda: not _session_pids(run.pid), timeout=30, what='the run to be gone')
    finally:
        if run.poll() is None or _session_pids(run.pid):
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    return _progress_step(pipeline_root), _checkpoint_step(work_dir / 'checkpoints')


def _probe(model_run_dir: str, checkpoint_dir, rows, types, tmp_path) -> dict:
    examples = tmp_path / 'examples.b64'
    examples.write_text(
        ''.join(base64.b64encode(raw_example(r, types, 'click')).decode() + '\n' for r in rows)
    )
    output = tmp_path / 'probe.json'
    probe = subprocess.run(
        [sys.executable, '-m', 'tests.e2e.sharded_model_probe']
        + [os.path.join(model_run_dir, 'coordinator_request.json'), str(checkpoint_dir)]
        + [str(examples), str(output)],
        cwd=REPO_ROOT,
        env={**os.environ, 'PYTHONPATH': str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    return json.loads(output.read_text())


def _check_placement(variables: list[dict], num_ps: int) -> list[dict]:
    """The 10^6-row table and its slot: split over every server, no shard holding the whole
    table; nothing of at least `MIN_ROWS` rows on a worker or the coordinator. Returns the two."""
    devices = _ps_devices(num_ps)
    tables = [v for v in variables if v['shape'][:1] == [TABLE_ROWS]]
    # The table and Adagrad's accumulator for it.
    assert len(tables) == 2, [(v['name'], v['shape']) for v in variables]
    for variable in tables:
        shards = variable['shards']
        assert {s['device'] for s in shards} == devices, variable
        assert sum(s['rows'] for s in shards) == TABLE_ROWS
        assert max(s['rows'] for s in shards) < TABLE_ROWS
    for variable in variables:
        if variable['shape'][:1] >= [MIN_ROWS]:
            assert {s['device'] for s in variable['shards']} <= devices, variable
    return tables


def _reported_placement(report: dict) -> list[dict]:
    """The report's model and optimizer variables, in the probe's form."""
    return [*report['placement']['model'], *report['placement']['optimizer']]


def test_a_million_row_table_trains_on_two_ps_resumes_after_kill_9_and_serves(tmp_path, capsys):
    data = recsys_data.RecsysData(rows=ROWS, seed=0, vocabulary_size=TABLE_ROWS)
    planted = recsys_data.generate(data, str(tmp_path / 'recsys'))
    assert planted['vocabulary_sizes'][TABLE_COLUMN] == TABLE_ROWS
    data_dir = os.path.join(tmp_path, 'recsys', recsys_data.DATA_DIR)
    spec_dir, work_dir = tmp_path / 'spec', tmp_path / 'work'

    proposed = _init(data_dir, spec_dir, capsys)
    _review(spec_dir, work_dir, proposed)
    config = load_config(str(spec_dir / 'config.yaml'), work_dir=str(work_dir))
    train_steps = config.trainer.training.train_steps
    assert train_steps == TRAIN_STEPS
    assert KILL_AFTER_STEP + CHECKPOINT_INTERVAL < train_steps

    progress_at_kill, checkpoint_at_kill = _run_and_kill(
        spec_dir / 'config.yaml', work_dir, config.pipeline_root
    )
    assert progress_at_kill >= KILL_AFTER_STEP
    assert CHECKPOINT_INTERVAL <= checkpoint_at_kill < train_steps
    assert not glob.glob(os.path.join(config.serving_dir, '*'))

    started = time.time()
    rerun = run_cli('run', '--config', str(spec_dir / 'config.yaml'), '--work-dir', str(work_dir))
    output = f'stdout:\n{rerun.stdout[-4000:]}\nstderr:\n{rerun.stderr[-4000:]}'
    assert rerun.returncode == 0, output
    summary = run_summary.read_summary(config, started=started)
    assert {'Trainer', 'Evaluator', 'Pusher'} <= set(summary.executed), summary
    assert {'CsvExampleGen', 'Transform', 'ExampleBatcher'} <= set(summary.cached), summary
    report = summary.training
    assert report['num_ps'] == NUM_PS
    assert report['initial_step'] == checkpoint_at_kill
    assert report['steps'] == train_steps
    assert report['steps_this_run'] == train_steps - checkpoint_at_kill
    (table, _) = _check_placement(_reported_placement(report), NUM_PS)
    assert table['name'] == f'{TABLE_COLUMN}_embedding/embeddings'
    metric, value = summary.eval_metric
    assert metric.lower() == 'auc'
    assert summary.blessed is True
    assert config.evaluation.min_value <= value
    # The planted signal bounds what any model can reach (eval split: ~6,700 rows, so a few
    # thousandths of sampling noise).
    assert value < planted['ceiling_auc'] + 0.02, (value, planted['ceiling_auc'])

    with open(os.path.join(data_dir, 'part-00000.csv'), newline='', encoding='ascii') as f:
        rows = [row for _, row in zip(range(SERVED_ROWS), csv.DictReader(f))]
    types = {f.name: f.type for f in load_schema(str(spec_dir / 'schema.pbtxt')).feature}
    probe = _probe(summary.tensorboard_dir, work_dir / 'checkpoints', rows, types, tmp_path)
    assert (probe['step'], probe['num_ps']) == (train_steps, NUM_PS)
    # The shards together are the trained values the checkpoint holds, table and slot.
    keys = sorted(
        k for v in _check_placement(probe['variables'], NUM_PS) for k in v['checkpoint_keys']
    )
    assert len(keys) == 2 and keys[0].startswith('model/') and keys[1].startswith('optimizer/')

    assert summary.pushed_model and summary.pushed_model.startswith(config.serving_dir)
    loaded = tf.saved_model.load(summary.pushed_model)
    examples = tf.constant([raw_example(r, types, 'click') for r in rows])
    served = loaded.signatures['serving_default'](examples=examples)['probabilities'].numpy()
    assert served.shape == (SERVED_ROWS, 1)
    np.testing.assert_allclose(served[:, 0], probe['probabilities'], rtol=0, atol=1e-6)
    clicks = np.array([int(r['click']) for r in rows])
    assert recsys_data.auc(served[:, 0], clicks) > 0.6

    _edit_trainer(
        spec_dir / 'config.yaml', RESHARDED_NUM_PS, train_steps=train_steps + RESHARD_STEPS
    )
    started = time.time()
    resharded = run_cli(
        'run', '--config', str(spec_dir / 'config.yaml'), '--work-dir', str(work_dir)
    )
    output = f'stdout:\n{resharded.stdout[-4000:]}\nstderr:\n{resharded.stderr[-4000:]}'
    assert resharded.returncode == 0, output
    summary = run_summary.read_summary(config, started=started)
    assert 'Trainer' in summary.executed and 'Transform' in summary.cached, summary
    report = summary.training
    assert (report['num_ps'], report['initial_step']) == (RESHARDED_NUM_PS, train_steps)
    assert report['steps'] == train_steps + RESHARD_STEPS
    _check_placement(_reported_placement(report), RESHARDED_NUM_PS)

"""Faults during `local_processes` training, injected with SIGKILL: a parameter server dies, the
whole trainer dies, a fault keeps recurring. Each test checks the final step count, how many steps
were redone, and that the exported model serves (or, for the recurring fault, that training
ends with a clear error and nothing left running).

The supervisor (`recovery`) runs in the test process: it only starts processes, and the
coordinator that connects to the cluster is its child, so no test process joins a cluster.
"""

import glob
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import launch, recovery
from asynctrain.components.trainer.training import run_files
from tests.components.trainer.trainer_testdata import (
    LABEL_KEY,
    REPO_ROOT,
    assert_serves_raw_examples,
    train_command,
)

pytestmark = pytest.mark.integration

TRAIN_STEPS = 80
STEPS_PER_EXECUTION = 5
CHECKPOINT_INTERVAL = 20
# Kill once the coordinator has recorded this step: past the first checkpoint (20), so a
# restart from step 0 would show.
KILL_AFTER_STEP = 30


GRACE_SECONDS = 15.0


def _config(max_restarts: int = 2) -> config_lib.TrainerConfig:
    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=TRAIN_STEPS,
            steps_per_execution=STEPS_PER_EXECUTION,
            checkpoint_interval_steps=CHECKPOINT_INTERVAL,
            summary_interval_steps=10,
            eval_steps=2,
        ),
        distribution=config_lib.DistributionConfig(
            cluster='local_processes',
            num_workers=2,
            num_ps=1,
            max_restarts=max_restarts,
            failure_grace_seconds=GRACE_SECONDS,
        ),
    )


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):  # Not written yet, or being replaced.
        return None


def _latest_checkpoint_step(checkpoint_dir) -> int:
    steps = [
        int(m.group(1))
        for p in glob.glob(os.path.join(checkpoint_dir, 'ckpt-*.index'))
        if (m := re.search(r'ckpt-(\d+)\.index$', p))
    ]
    return max(steps, default=0)


def _wait_for(condition, timeout=240.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f'condition not met within {timeout} s')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) has stopped running too.
    with open(f'/proc/{pid}/stat') as f:
        return f.read().rsplit(')', 1)[1].split()[0] != 'Z'


def _cluster_pids(cluster_file) -> list[int]:
    state = _read_json(cluster_file)
    return [state['coordinator_pid']] + [
        t['pid'] for tasks in state['tasks'].values() for t in tasks
    ]


def _read_bytes(path: str) -> bytes:
    with open(path, 'rb') as f:
        return f.read()


def _parent(pid: int) -> int:
    with open(f'/proc/{pid}/stat') as f:
        return int(f.read().rsplit(') ', 1)[1].split()[1])


def _train(transformed_data, root, config):
    return launch.train_and_export(
        transformed_data.examples,
        transformed_data.transform_graph,
        os.path.join(root, 'model', 'Format-Serving'),
        os.path.join(root, 'model_run'),
        config,
        LABEL_KEY,
    )


def test_killed_parameter_server_restarts_the_cluster_from_the_last_checkpoint(
    transformed_data, tmp_path
):
    """kill -9 a parameter server mid-training: restarted from the last checkpoint, completes.

    The supervisor restarts the cluster and the coordinator; the step count, the checkpoint
    restored and the steps redone are checked, and the exported model serves."""
    run_dir = tmp_path / 'model_run'
    killed = {}

    def kill_parameter_server():
        def progressed():
            state = _read_json(run_dir / recovery.CLUSTER_FILE)
            progress = _read_json(run_dir / run_files.PROGRESS_FILE)
            return state if state and progress and progress['step'] >= KILL_AFTER_STEP else None

        state = _wait_for(progressed)
        killed['progress'] = _read_json(run_dir / run_files.PROGRESS_FILE)['step']
        parents = {_parent(pid) for pid in _cluster_pids(run_dir / recovery.CLUSTER_FILE)}
        killed['parents'] = {(pid, _read_bytes(f'/proc/{pid}/cmdline')) for pid in parents}
        os.kill(state['tasks']['ps'][0]['pid'], signal.SIGKILL)
        # Once the first coordinator has exited, no checkpoint of the first attempt can appear
        # (one being written at the kill may still have completed); the second attempt needs a
        # new cluster and 20 steps before its own first checkpoint.
        _wait_for(lambda: not _alive(state['coordinator_pid']), timeout=120, interval=0.05)
        killed['checkpoint'] = _latest_checkpoint_step(run_dir / 'checkpoints')

    killer = threading.Thread(target=kill_parameter_server, daemon=True)
    killer.start()
    report = _train(transformed_data, str(tmp_path), _config())
    killer.join(timeout=1)

    assert report.steps == TRAIN_STEPS
    assert report.restarts == 1
    # The attempt's servers and coordinator were forked from one fork server, not started by
    # this process as new interpreters.
    ((server, command),) = killed['parents']
    assert server != os.getpid()
    assert b'asynctrain.components.shared.fork_server' in command.split(b'\0')
    first, second = report.attempts
    assert 'ps 0 killed by SIGKILL' in first['outcome']
    assert second['outcome'] == 'succeeded'
    # The restart restored the newest checkpoint there was when the server died, and trained
    # only the remaining steps.
    assert killed['checkpoint'] >= CHECKPOINT_INTERVAL
    assert second['initial_step'] == report.initial_step == killed['checkpoint']
    assert report.steps_this_run == TRAIN_STEPS - killed['checkpoint']
    # Steps redone: trained by the first attempt after its last checkpoint. At least what it
    # recorded past it; less than one checkpoint interval (a checkpoint follows every 20).
    redone = first['last_step'] - second['initial_step']
    assert first['last_step'] >= killed['progress'] >= KILL_AFTER_STEP
    assert 0 <= redone < CHECKPOINT_INTERVAL
    assert_serves_raw_examples(tmp_path / 'model' / 'Format-Serving')


def test_fault_that_keeps_recurring_fails_clearly_after_bounded_retries(transformed_data, tmp_path):
    """A parameter server killed in every attempt: a clear failure after bounded retries.

    `max_restarts` restarts, then `TrainingFailed` naming each attempt; nothing left running, no
    model exported."""
    run_dir = tmp_path / 'model_run'
    killed_attempts, pids = [], []
    stop = threading.Event()

    def kill_every_attempt():
        while not stop.is_set():
            state = _read_json(run_dir / recovery.CLUSTER_FILE)
            if state and state['attempt'] not in killed_attempts:
                pids.extend(_cluster_pids(run_dir / recovery.CLUSTER_FILE))
                os.kill(state['tasks']['ps'][0]['pid'], signal.SIGKILL)
                killed_attempts.append(state['attempt'])
            time.sleep(0.1)

    killer = threading.Thread(target=kill_every_attempt, daemon=True)
    killer.start()
    try:
        with pytest.raises(recovery.TrainingFailed) as failure:
            _train(transformed_data, str(tmp_path), _config(max_restarts=1))
    finally:
        stop.set()
        killer.join(timeout=5)

    message = str(failure.value)
    assert 'training failed 2 times' in message
    assert 'distribution.max_restarts = 1' in message
    assert message.count('ps 0 killed by SIGKILL') == 2
    assert killed_attempts == [1, 2]
    # Bounded: the first attempt and `max_restarts` = 1 restart, no third (the killer kills
    # every attempt it sees, so a third would be in `killed_attempts` too).
    assert pids and not [pid for pid in pids if _alive(pid)]
    assert not os.path.exists(tmp_path / 'model' / 'Format-Serving' / 'saved_model.pb')


def test_killed_trainer_resumes_from_the_last_checkpoint_when_rerun(transformed_data, tmp_path):
    """kill -9 the whole trainer mid-training: the rerun resumes from the last checkpoint.

    `asynctrain train` is killed; its servers and coordinator die with it, and the same command
    run again starts at the last checkpoint, not step 0, and exports a model that serves."""
    output, run_dir = tmp_path / 'out', tmp_path / 'out' / 'model_run'
    config_path = tmp_path / 'trainer.yaml'
    config_path.write_text(json.dumps(config_lib.to_dict(_config(max_restarts=0))))
    env = {**os.environ, 'PYTHONPATH': str(REPO_ROOT)}
    command = train_command(transformed_data, output, config_path)

    trainer = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    try:
        _wait_for(
            lambda: (
                (p := _read_json(run_dir / run_files.PROGRESS_FILE))
                and p['step'] >= KILL_AFTER_STEP
            )
        )
        children = _cluster_pids(run_dir / recovery.CLUSTER_FILE)
        trainer.kill()
        assert trainer.wait(timeout=30) == -signal.SIGKILL
    finally:
        if trainer.poll() is None:
            trainer.kill()
    # The coordinator and every server die with the trainer: nothing holds ports or the files.
    _wait_for(lambda: not [pid for pid in children if _alive(pid)], timeout=30)
    assert not os.path.exists(output / 'model' / 'Format-Serving' / 'saved_model.pb')
    # What the killed run left: its last checkpoint, and the last step it recorded.
    checkpoint_at_kill = _latest_checkpoint_step(run_dir / 'checkpoints')
    progress = _read_json(run_dir / run_files.PROGRESS_FILE)
    assert progress['step'] >= KILL_AFTER_STEP

    rerun = subprocess.run(
        command, env=env, cwd=REPO_ROOT, timeout=600, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report['steps'] == TRAIN_STEPS
    assert checkpoint_at_kill >= CHECKPOINT_INTERVAL
    assert report['initial_step'] == checkpoint_at_kill
    assert report['steps_this_run'] == TRAIN_STEPS - checkpoint_at_kill
    redone = progress['step'] - checkpoint_at_kill
    assert 0 <= redone < CHECKPOINT_INTERVAL
    assert_serves_raw_examples(output / 'model' / 'Format-Serving')

"""The files a training run leaves in its run directory, and the JSON I/O behind them.

`training_report.json` (what the run measured), `progress.json` (the global step last seen, which
a supervisor polls) and the recovery's request and failure files are all read and written through
`tf.io.gfile`, so that they work on a pipeline's storage (gs://, s3://) as on a local disk.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import tensorflow as tf

CHECKPOINT_SUBDIR = 'checkpoints'
REPORT_FILE = 'training_report.json'
# The global step as last seen by the coordinator, rewritten at every summary and checkpoint:
# what a supervisor (`cluster.recovery`) or an operator reads to see how far a run got.
PROGRESS_FILE = 'progress.json'


@dataclasses.dataclass(frozen=True)
class TrainingReport:
    """What one training run measured (written as `training_report.json`).

    Attributes:
      steps: The global step reached (optimizer updates over all workers).
      steps_this_run: Updates applied by this run (less than `steps` after a resume).
      initial_step: The step this run started from (restored from a checkpoint, else 0).
      examples_per_sec: Training examples consumed per second over this run's training time.
      staleness_mean: Mean over updates of (global step at apply - global step at read).
      staleness_max: The largest such staleness.
      input_wait_fraction: Time workers spent waiting for the next batch, as a fraction of the
        time they spent in the train loop.
      seconds: Wall time of the training loop (not counting evaluation and export).
      eval: Evaluation of the final weights on the eval split: loss, auc, accuracy, label_mean,
        examples.
      num_workers: Workers in the cluster.
      num_ps: Parameter servers in the cluster.
      restarts: Times the cluster and coordinator were restarted from a checkpoint (only a
        `local_processes` run restarts itself; see `recovery`).
      attempts: One entry per coordinator attempt when there were restarts: attempt,
        initial_step, last_step (the last global step it recorded; a lower bound of what it
        reached), outcome.
      rescheduled_closures: Closures scheduled again after a worker could not parse the
        coordinator's request (`training.scheduling`); 0 in a healthy run.
      profile: The input-pipeline analysis of the profiler trace `trainer.profile` asked for
        (`profiling.InputPipelineAnalysis.to_dict`); None when no trace was captured.
      placement: Where the trained variables lived (`placement.report`): `model` and
        `optimizer`, each variable with its shards (device, rows, nbytes), and
        `bytes_per_task`. None in a report written before it was recorded.
      gradient_bytes_per_step: Mean bytes of gradient values (and indices) each step sent to the
        parameter servers: below `dense_gradient_bytes_per_step` only with
        `stale_gradients.top_k_fraction`.
      dense_gradient_bytes_per_step: Mean bytes the same gradients take sent dense (embedding
        gradients count as the rows they update either way).
      worker_steps: Steps each worker ran in this run, by task index (a string, as JSON keys
        are); a closure whose measurements were lost with its worker is not counted. None in a
        report written before it was recorded.
    """

    steps: int
    steps_this_run: int
    initial_step: int
    examples_per_sec: float
    staleness_mean: float
    staleness_max: int
    input_wait_fraction: float
    seconds: float
    eval: dict
    num_workers: int
    num_ps: int
    restarts: int = 0
    attempts: tuple = ()
    rescheduled_closures: int = 0
    profile: dict | None = None
    placement: dict | None = None
    gradient_bytes_per_step: float = 0.0
    dense_gradient_bytes_per_step: float = 0.0
    worker_steps: dict | None = None

    @classmethod
    def read(cls, directory: str) -> TrainingReport:
        data = read_json(os.path.join(directory, REPORT_FILE))
        if data is None:
            raise FileNotFoundError(os.path.join(directory, REPORT_FILE))
        data['attempts'] = tuple(data.get('attempts', ()))
        return cls(**data)

    def write(self, directory: str) -> str:
        path = os.path.join(directory, REPORT_FILE)
        tf.io.gfile.makedirs(directory)
        write_json(path, dataclasses.asdict(self))
        return path


def write_json(path: str, data: dict, atomic: bool = False) -> None:
    """Writes `data` as JSON through tf.io.gfile (so also to gs://). `atomic` writes a temporary
    file and renames it over `path`, so that a concurrent reader never sees half of it."""
    target = path + '.tmp' if atomic else path
    with tf.io.gfile.GFile(target, 'w') as f:
        f.write(json.dumps(data, indent=2, sort_keys=True))
    if atomic:
        tf.io.gfile.rename(target, path, overwrite=True)


def read_json(path: str) -> dict | None:
    """The JSON at `path`, or None when there is no such file."""
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def write_progress(run_dir: str, **progress) -> None:
    """Replaces `run_dir/progress.json` atomically: another process polls it."""
    tf.io.gfile.makedirs(run_dir)
    write_json(os.path.join(run_dir, PROGRESS_FILE), {**progress, 'time': time.time()}, atomic=True)


def read_progress(run_dir: str) -> dict | None:
    """What `write_progress` last wrote, or None."""
    return read_json(os.path.join(run_dir, PROGRESS_FILE))

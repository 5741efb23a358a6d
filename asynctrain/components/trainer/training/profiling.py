"""Profiler on demand: a `tf.profiler` trace of the workers over a few training steps, and the
input-bound verdict read from it.

`trainer.profile: {start_step: N, num_steps: K}` (or `asynctrain train --profile-steps N:K`)
starts a `StepTrace` next to the training loop. A thread polls the global step; when it reaches
N, the capture starts, and it covers about K steps:

- `in_process` cluster: the workers' servers run in this process, so the process-wide profiler
  session (`tf.profiler.experimental.start` / `stop`) records them: their executions of the
  train function, their tf.data iterators, the parameter servers and the coordinator. It stops
  once the global step reaches N + K.
- other clusters (`local_processes`, `tf_config`): every TensorFlow gRPC server also serves the
  profiler service on its own port, so `tf.profiler.experimental.client.trace` asks each worker
  for a trace, one `.xplane.pb` per worker. A remote capture lasts a duration, not a number of
  steps: K steps at the rate measured before the capture.

Traces go to `<run dir>/plugins/profile/<timestamp>/`, where TensorBoard's profile plugin
(`tensorboard --logdir <run dir>`, Profile tab) finds them.

Why the verdict is computed here: TensorFlow's own input-pipeline analysis
(`input_pipeline_analyzer`) splits time into steps at step markers, and the workers of
parameter-server training have none (the coordinator sends each closure over gRPC, so no
host-side step marker is on the worker), so on these traces it reports "No step time measured".
`analyze_trace` applies the same rules to the workers' executions of the train function instead:
time in events whose name starts with `IteratorGetNext` is time waiting for input (TF classifies
a host event so, `HOST_WAIT_INPUT`), a step's time is the execution's duration, and TF's
thresholds give the verdict.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import re
import threading
import time

import tensorflow as tf

from asynctrain.components.trainer import config as config_lib

# Where TensorBoard's profile plugin looks for runs, under a log directory.
TRACE_SUBDIR = os.path.join('plugins', 'profile')
TRACE_SUFFIX = '.xplane.pb'
# TensorFlow's thresholds (the input-pipeline analysis of `tf.profiler`): the percentage of step
# time spent waiting for input from which a program is moderately, then highly, input-bound.
MODERATELY_INPUT_BOUND_PERCENT = 5.0
HIGHLY_INPUT_BOUND_PERCENT = 20.0
# A host event TensorFlow counts as waiting for input (`ClassifyCpuEvent`: HOST_WAIT_INPUT).
INPUT_WAIT_EVENT_PREFIX = 'IteratorGetNext'
# A tensor handed between tasks (worker and parameter server): a kernel event is named
# `<node>:<op type>`, and the runtime adds `_Send` and `_Recv` nodes at every cross-task edge.
TRANSFER_EVENT_SUFFIXES = (':_Send', ':_Recv')
# How often the global step is read to start and stop a capture.
POLL_SECONDS = 0.05
# Bounds of a remote capture's duration.
MIN_REMOTE_MS, MAX_REMOTE_MS = 500, 300_000


def input_bound_verdict(input_percent: float) -> str:
    """TF's verdict for a program that waits `input_percent` % of its step time for input."""
    if input_percent >= HIGHLY_INPUT_BOUND_PERCENT:
        return 'highly input-bound'
    if input_percent >= MODERATELY_INPUT_BOUND_PERCENT:
        return 'moderately input-bound'
    return 'not input-bound'


def worker_execution_event(function_name: str) -> re.Pattern:
    """The name of a worker's execution of the `tf.function` `function_name` in a trace (the
    coordinator's side of the call is named `function_name` alone)."""
    return re.compile(rf'^EagerLocalExecute: __inference_{re.escape(function_name)}_\d+$')


@dataclasses.dataclass(frozen=True)
class InputPipelineAnalysis:
    """What one trace says about waiting for input.

    Attributes:
      trace_dir: The trace's directory (one `.xplane.pb` per profiled host).
      executions: Workers' executions of the train function in the trace.
      steps: Batches those executions took from their iterators (one per step). A wait is
        attributed by time alone, so where several workers share a trace's plane (an
        `in_process` cluster) a batch of an execution begun before the capture may be counted
        within another worker's execution: a step or two more than the executions took.
      step_seconds: Total duration of those executions.
      input_wait_seconds: Total duration of the `IteratorGetNext` events within them.
      transfers: `_Send` and `_Recv` kernel events begun within them: tensors handed between
        the worker and the parameter servers (variable reads, updates). Counted on every plane
        of the trace, so on an `in_process` cluster both sides of a transfer are counted.
      transfer_seconds: Total duration of those events.
    """

    trace_dir: str
    executions: int
    steps: int
    step_seconds: float
    input_wait_seconds: float
    transfers: int = 0
    transfer_seconds: float = 0.0

    @property
    def input_percent(self) -> float:
        return 100.0 * self.input_wait_seconds / self.step_seconds if self.step_seconds else 0.0

    @property
    def transfers_per_step(self) -> float:
        return self.transfers / self.steps if self.steps else 0.0

    @property
    def verdict(self) -> str:
        return input_bound_verdict(self.input_percent)

    def to_dict(self) -> dict:
        return {
            **dataclasses.asdict(self),
            'input_percent': self.input_percent,
            'verdict': self.verdict,
            'transfers_per_step': self.transfers_per_step,
        }


def read_xspace(path: str):
    """The `XSpace` proto of one `.xplane.pb` file."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with tf.io.gfile.GFile(path, 'rb') as f:
        space.ParseFromString(f.read())
    return space


def _plane_events(plane):
    """(name, start in ps, duration in ps) of each event of an XPlane."""
    names = {key: metadata.name for key, metadata in plane.event_metadata.items()}
    for line in plane.lines:
        base = line.timestamp_ns * 1000
        for event in line.events:
            yield names[event.metadata_id], base + event.offset_ps, event.duration_ps


def analyze_trace(trace_dir: str, function_name: str = 'train_steps') -> InputPipelineAnalysis:
    """Input wait over the workers' executions of `function_name` in the trace at `trace_dir`.

    Raises:
      ValueError: no `.xplane.pb` in `trace_dir`, or no execution of `function_name` in it.
    """
    paths = tf.io.gfile.glob(os.path.join(trace_dir, '*' + TRACE_SUFFIX))
    if not paths:
        raise ValueError(f'{trace_dir}: expected {TRACE_SUFFIX} files, found none')
    execution = worker_execution_event(function_name)
    executions = steps = transfers = 0
    step_ps = wait_ps = transfer_ps = 0
    for path in paths:
        for plane in read_xspace(path).planes:
            spans, waits, sends = [], [], []
            for name, start, duration in _plane_events(plane):
                if execution.match(name):
                    spans.append((start, start + duration))
                elif name.startswith(INPUT_WAIT_EVENT_PREFIX):
                    waits.append((start, duration))
                elif name.endswith(TRANSFER_EVENT_SUFFIXES):
                    sends.append((start, duration))
            spans.sort()
            executions += len(spans)
            step_ps += sum(end - start for start, end in spans)
            # The iterator and the transfers run on threads of their own: an event belongs to
            # the execution whose span holds its start.
            waited = _within(spans, waits)
            steps += len(waited)
            wait_ps += sum(waited)
            sent = _within(spans, sends)
            transfers += len(sent)
            transfer_ps += sum(sent)
    if not executions:
        raise ValueError(
            f'{trace_dir}: no worker execution of {function_name!r} in the trace '
            f'(expected events named {execution.pattern})'
        )
    return InputPipelineAnalysis(
        trace_dir,
        executions,
        steps,
        step_ps / 1e12,
        wait_ps / 1e12,
        transfers,
        transfer_ps / 1e12,
    )


def _within(spans: list[tuple[int, int]], events: list[tuple[int, int]]) -> list[int]:
    """The durations of `events` (start, duration) that start inside one of the sorted `spans`
    (start, end)."""
    starts = [start for start, _ in spans]
    durations = []
    for start, duration in events:
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and start < spans[i][1]:
            durations.append(duration)
    return durations


def _trace_runs(logdir: str) -> set[str]:
    directory = os.path.join(logdir, TRACE_SUBDIR)
    if not tf.io.gfile.isdir(directory):
        return set()
    return {os.path.join(directory, name.rstrip('/')) for name in tf.io.gfile.listdir(directory)}


class StepTrace:
    """Captures global steps [start_step, start_step + num_steps) of the workers, from a thread
    that watches the global step; `finish` ends it and analyzes the trace."""

    def __init__(
        self,
        profile: config_lib.ProfileConfig,
        logdir: str,
        global_step: tf.Variable,
        worker_addresses: list[str] | None = None,
        function_name: str = 'train_steps',
    ):
        """Starts watching.

        Args:
          profile: Which steps.
          logdir: The TensorBoard log directory (the run directory).
          global_step: The global step (the optimizer's iterations).
          worker_addresses: `host:port` of each worker's server, to trace them remotely; None
            when the workers run in this process.
          function_name: The train `tf.function`'s name, which the analysis looks for.
        """
        self.profile = profile
        self.logdir = logdir
        self.function_name = function_name
        self._global_step = global_step
        self._workers = worker_addresses
        self._runs_before = _trace_runs(logdir)
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name='step-trace', daemon=True)
        self._thread.start()

    def _wait_for_step(self, step: int) -> tuple[float, int] | None:
        """Polls until the global step reaches `step`; (time, step) then, None if finished."""
        while not self._done.is_set():
            now, current = time.monotonic(), int(self._global_step.numpy())
            if current >= step:
                return now, current
            self._done.wait(POLL_SECONDS)
        return None

    def _run(self) -> None:
        start, end = self.profile.start_step, self.profile.start_step + self.profile.num_steps
        try:
            first = (time.monotonic(), int(self._global_step.numpy()))
            if first[1] > start:
                logging.warning('Profiler: not capturing, training resumed at step %d', first[1])
                return
            reached = self._wait_for_step(start)
            if reached is None:
                return
            if self._workers is None:
                tf.profiler.experimental.start(self.logdir)
                try:
                    self._wait_for_step(end)
                finally:
                    tf.profiler.experimental.stop()
                return
            if reached[1] == first[1]:  # No rate measured yet: wait for some progress.
                reached = self._wait_for_step(first[1] + 1)
                if reached is None:
                    return
            steps_per_sec = (reached[1] - first[1]) / max(reached[0] - first[0], 1e-3)
            duration_ms = self.profile.num_steps / steps_per_sec * 1000
            tf.profiler.experimental.client.trace(
                ','.join(f'grpc://{address}' for address in self._workers),
                self.logdir,
                duration_ms=int(min(max(duration_ms, MIN_REMOTE_MS), MAX_REMOTE_MS)),
            )
        except Exception as e:  # A failed capture must not fail the training run.
            self._error = e

    def finish(self) -> InputPipelineAnalysis | None:
        """Ends the capture (a remote one runs its course) and analyzes the new trace; None,
        with a warning, when no trace was captured."""
        self._done.set()
        self._thread.join()
        if self._error is not None:
            logging.warning('Profiler: capture failed: %s', self._error)
            return None
        new_runs = sorted(_trace_runs(self.logdir) - self._runs_before)
        if not new_runs:
            logging.warning(
                'Profiler: no trace captured (training ended before step %d?)',
                self.profile.start_step,
            )
            return None
        try:
            analysis = analyze_trace(new_runs[-1], self.function_name)
        except ValueError as e:
            logging.warning('Profiler: %s', e)
            return None
        logging.info(
            'Profiler: %s (%.1f%% of step time waiting for input); trace in %s',
            analysis.verdict,
            analysis.input_percent,
            analysis.trace_dir,
        )
        return analysis


def start(
    trainer_config: config_lib.TrainerConfig,
    logdir: str,
    cluster,
    global_step: tf.Variable,
) -> StepTrace | None:
    """The capture `trainer_config.profile` asks for, started; None when it asks for none."""
    if not trainer_config.profile.enabled:
        return None
    workers = None
    if trainer_config.distribution.cluster != 'in_process':
        workers = cluster.resolver.cluster_spec().as_dict().get('worker', [])
    return StepTrace(trainer_config.profile, logdir, global_step, workers)


def finish(trace: StepTrace | None) -> dict | None:
    """`trace.finish()` as the training report's `profile` entry."""
    if trace is None:
        return None
    analysis = trace.finish()
    return analysis.to_dict() if analysis else None

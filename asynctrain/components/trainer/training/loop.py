"""The training loop: ParameterServerStrategy, ClusterCoordinator, `tf.function`, checkpoints,
summaries and the training report. Checkpoints restore into any number of parameter servers,
tables and optimizer slots included (`checkpoints` says why).

`task` holds what one worker does (a `task.Task`: binary, multiclass or regression, which this
module never asks); this module owns everything around it. The coordinator (this
process) schedules closures of `steps_per_execution` steps each on whichever worker is free, so
workers never wait for each other and their updates to the parameter servers interleave
(asynchronous training). Each closure reports its loss, the staleness of its updates, and how
long it waited for input.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable

import tensorflow as tf

from asynctrain.components.shared import tf_environment
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import (
    checkpoints,
    connection,
    data,
    evaluation,
    export,
    placement,
    profiling,
    progress,
    run_files,
    scheduling,
    tasks,
)
from asynctrain.components.trainer.training import task as task_lib

# What a train function's result holds, in order (float64, counts exact below 2**53).
MEASUREMENTS = (
    'steps',
    'loss_sum',
    'staleness_sum',
    'staleness_max',
    'input_wait_seconds',
    'seconds',
)


class Trainer:
    """Trains `task` on a cluster: one instance per training run."""

    def __init__(
        self,
        task: task_lib.Task,
        cluster,
        examples_dir: str,
        run_dir: str,
        checkpoint_dir: str | None = None,
    ):
        self.task = task
        self.config = task.config
        self.cluster = cluster
        self.examples_dir = examples_dir
        self.run_dir = run_dir
        self.checkpoint_dir = checkpoint_dir or os.path.join(run_dir, run_files.CHECKPOINT_SUBDIR)
        # Before connecting to the cluster: the task's pass over the data (if any) stays local.
        task.prepare(examples_dir)
        self.strategy = connection.connect(cluster, self.config.distribution)
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)
        with self.strategy.scope():
            self.model = task.build_model()
            self.optimizer = task.build_optimizer()
            # Slot variables exist before a restore, so the checkpoint restores them eagerly.
            self.optimizer.build(self.model.trainable_variables)
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        training = self.config.training
        self.checkpoint_manager = tf.train.CheckpointManager(
            self.checkpoint,
            self.checkpoint_dir,
            max_to_keep=training.max_checkpoints_to_keep,
            step_counter=self.optimizer.iterations,
        )
        self._saved_step = -1
        self._initial_step = 0
        tf_environment.configure_autograph()
        self.train_steps = self._make_train_function()

    def _make_train_function(self) -> Callable:
        features_spec, label_spec = self.task.element_spec
        iterator_spec = tf.data.IteratorSpec((features_spec, label_spec))
        task, model, optimizer, strategy = self.task, self.model, self.optimizer, self.strategy

        def replica_step(features, labels):
            return task.train_step(features, labels, model, optimizer)

        # A plain step when every execution runs one: a while loop around the remote variable
        # reads and updates costs more than the step itself at that size (bench ps, `vs_fit`).
        single_step = self.config.training.steps_per_execution == 1

        # One trace serves every call: the iterator's batch dimension is None and the number of
        # steps is a tensor, so the shorter last execution runs the same graph.
        @tf.function(input_signature=[iterator_spec, tf.TensorSpec([], tf.int32)])
        def train_steps(iterator, num_steps):
            totals = (
                tf.constant(0.0),  # loss sum
                tf.constant(0, tf.int64),  # staleness sum
                tf.constant(0, tf.int64),  # staleness max
                tf.constant(0.0, tf.float64),  # input wait
            )
            started = tf.timestamp()

            def step(totals):
                loss_sum, staleness_sum, staleness_max, input_wait = totals
                # Explicit dependencies: automatic control dependencies do not order
                # `tf.timestamp` against `next(iterator)`, and a while loop may start an
                # iteration's independent ops early, so without them the wait reads as zero.
                with tf.control_dependencies([loss_sum, staleness_sum]):
                    before_input = tf.timestamp()
                with tf.control_dependencies([before_input]):
                    features, labels = next(iterator)
                with tf.control_dependencies(tf.nest.flatten((features, labels))):
                    input_wait += tf.timestamp() - before_input
                outputs = strategy.experimental_local_results(
                    strategy.run(replica_step, args=(features, labels))
                )[0]
                return (
                    loss_sum + outputs['loss'],
                    staleness_sum + outputs['staleness'],
                    tf.maximum(staleness_max, outputs['staleness']),
                    input_wait,
                )

            if single_step:
                totals = step(totals)
            else:
                # The loop stays outside `strategy.run`: the optimizer's cross-replica merge
                # cannot sit inside a while loop of the replica function.
                for _ in tf.range(num_steps):
                    totals = step(totals)
            loss_sum, staleness_sum, staleness_max, input_wait = totals
            with tf.control_dependencies([loss_sum, staleness_sum]):
                elapsed = tf.timestamp() - started
            # One tensor, in the order of `MEASUREMENTS`: the coordinator copies each returned
            # tensor from the worker separately, six copies per execution otherwise, which at
            # one step per execution made our loop slower than `model.fit` (bench ps).
            measured = (num_steps, loss_sum, staleness_sum, staleness_max, input_wait, elapsed)
            return tf.stack([tf.cast(m, tf.float64) for m in measured])

        return train_steps

    def _dataset_fn(self) -> tf.data.Dataset:
        cache_path = None
        if self.config.input.cache == 'file':
            cache_dir = self.config.input.cache_dir or os.path.join(self.run_dir, 'cache')
            tf.io.gfile.makedirs(cache_dir)
            # One cache per worker dataset: tf.data refuses to share a cache file.
            cache_path = os.path.join(cache_dir, f'train-{time.time_ns()}')
        return self.task.build_inputs(
            self.examples_dir, data.TRAIN_SPLIT, training=True, cache_path=cache_path
        )

    def _save_checkpoint(self) -> None:
        # Called after `coordinator.join()`, when no update is in flight. Numbered by global step,
        # so a checkpoint's name says where a resume starts.
        step = int(self.optimizer.iterations.numpy())
        if step != self._saved_step:
            self.checkpoint_manager.save(checkpoint_number=step, check_interval=False)
            self._saved_step = step
        self._write_progress(step)

    def _write_progress(self, step: int) -> None:
        run_files.write_progress(
            self.run_dir,
            step=step,
            initial_step=self._initial_step,
            checkpoint_step=max(self._saved_step, 0),
        )

    def restore(self) -> int:
        """Restores the latest checkpoint if there is one; returns the step it holds (or 0)."""
        path = self.checkpoint_manager.restore_or_initialize()
        step = int(self.optimizer.iterations.numpy())
        self._saved_step = step if path else -1
        if path:
            logging.info('Restored %s at step %d', path, step)
        return step

    def train(
        self, summary_writer: tf.summary.SummaryWriter | None = None, save: bool = True
    ) -> dict:
        """Runs until the global step reaches `train_steps`; returns the aggregate measurements.
        `save=False` skips the final checkpoint (a bench that meters each round's traffic)."""
        training = self.config.training
        initial_step = int(self.optimizer.iterations.numpy())
        self._initial_step = initial_step
        self._write_progress(initial_step)
        # No remote function may be instantiated while another runs (see `scheduling`): the
        # dataset and iterator are created one worker at a time, and the train function runs
        # once (zero steps) on each worker in turn before closures are scheduled in bulk.
        scheduling.create_resources_in_turn(self.coordinator)
        per_worker_dataset = self.coordinator.create_per_worker_dataset(self._dataset_fn)
        per_worker_iterator = iter(per_worker_dataset)
        scheduling.warm_up(
            self.coordinator, self.train_steps, (per_worker_iterator, tf.constant(0, tf.int32))
        )
        scheduler = scheduling.ClosureScheduler(self.coordinator, self.train_steps)
        progress_bar = progress.TrainingProgress(training.train_steps, initial_step)
        totals = _Totals()
        in_flight: list = []
        scheduled = initial_step
        next_summary = scheduled + training.summary_interval_steps
        interval = training.checkpoint_interval_steps
        next_checkpoint = (scheduled // interval + 1) * interval if interval else None
        started = time.monotonic()
        last_summary_time, last_summary_step = started, initial_step
        trace = profiling.start(self.config, self.run_dir, self.cluster, self.optimizer.iterations)
        while scheduled < training.train_steps:
            num_steps = min(training.steps_per_execution, training.train_steps - scheduled)
            if next_checkpoint is not None:
                num_steps = min(num_steps, next_checkpoint - scheduled)
            in_flight.append(
                scheduler.schedule((per_worker_iterator, tf.constant(num_steps, tf.int32)))
            )
            scheduled += num_steps
            if next_checkpoint is not None and scheduled >= next_checkpoint:
                scheduler.join()
                self._save_checkpoint()
                next_checkpoint += interval
            if scheduled >= next_summary or scheduled >= training.train_steps:
                # Fetch only closures at least one interval old: they are finished (or nearly),
                # so the queue keeps running while the coordinator writes summaries.
                ready = (
                    in_flight
                    if scheduled >= training.train_steps
                    else in_flight[: -max(1, self.cluster.num_workers)]
                )
                in_flight = in_flight[len(ready) :]
                interval_totals = _Totals()
                for remote_value in ready:
                    interval_totals.add_remote(remote_value)
                totals.merge(interval_totals)
                now = time.monotonic()
                step = int(self.optimizer.iterations.numpy())
                examples_per_sec = (
                    (step - last_summary_step)
                    * training.batch_size
                    / max(now - last_summary_time, 1e-9)
                )
                last_summary_time, last_summary_step = now, step
                progress_bar.update(
                    step,
                    examples_per_sec,
                    interval_totals.loss_mean,
                    interval_totals.staleness_mean,
                )
                self._write_progress(step)
                if summary_writer is not None and interval_totals.steps:
                    with summary_writer.as_default(step=step):
                        tf.summary.scalar('train/loss', interval_totals.loss_mean)
                        tf.summary.scalar('train/examples_per_sec', examples_per_sec)
                        tf.summary.scalar('train/staleness_mean', interval_totals.staleness_mean)
                        tf.summary.scalar('train/staleness_max', interval_totals.staleness_max)
                        tf.summary.scalar(
                            'train/input_wait_fraction', interval_totals.input_wait_fraction
                        )
                next_summary = scheduled + training.summary_interval_steps
        scheduler.join()
        for remote_value in in_flight:
            totals.add_remote(remote_value)
        seconds = time.monotonic() - started
        progress_bar.close()
        final_step = int(self.optimizer.iterations.numpy())
        if save:
            self._save_checkpoint()
        steps_this_run = final_step - initial_step
        return {
            'steps': final_step,
            'steps_this_run': steps_this_run,
            'initial_step': initial_step,
            'examples_per_sec': steps_this_run * training.batch_size / max(seconds, 1e-9),
            'staleness_mean': totals.staleness_mean,
            'staleness_max': totals.staleness_max,
            'input_wait_fraction': totals.input_wait_fraction,
            'seconds': seconds,
            'loss': totals.loss_mean,
            'rescheduled_closures': scheduler.rescheduled,
            'profile': profiling.finish(trace),
        }

    def serving_model(self) -> tf.keras.Model:
        """A plain, unsharded copy of the trained model: what is evaluated and exported. It needs
        no cluster, and evaluating it reads no weights over the network."""
        plain = self.task.build_model()
        latest = self.checkpoint_manager.latest_checkpoint
        status = tf.train.Checkpoint(model=plain).read(latest)
        status.expect_partial().assert_existing_objects_matched()
        return plain


@dataclasses.dataclass
class _Totals:
    steps: int = 0
    loss_sum: float = 0.0
    staleness_sum: int = 0
    staleness_max: int = 0
    input_wait_seconds: float = 0.0
    seconds: float = 0.0

    def add(self, result: dict) -> None:
        if not isinstance(result, dict):
            raise TypeError(
                f'closure result: expected the dict train_steps returns, got {result!r}'
            )
        self.steps += int(result['steps'])
        self.loss_sum += float(result['loss_sum'])
        self.staleness_sum += int(result['staleness_sum'])
        self.staleness_max = max(self.staleness_max, int(result['staleness_max']))
        self.input_wait_seconds += float(result['input_wait_seconds'])
        self.seconds += float(result['seconds'])

    def add_remote(self, remote_value) -> None:
        """Adds a closure's measurements. Its updates are applied whatever happens here; only
        its measurements are lost if the worker that holds them died since (then the
        measurements cover fewer steps than were trained)."""
        try:
            self.add(dict(zip(MEASUREMENTS, remote_value.fetch().tolist())))
        except (tf.errors.UnavailableError, tf.errors.CancelledError) as e:
            logging.warning(
                'Measurements of one execution lost with its worker: %s', str(e).splitlines()[0]
            )

    def merge(self, other: _Totals) -> None:
        self.steps += other.steps
        self.loss_sum += other.loss_sum
        self.staleness_sum += other.staleness_sum
        self.staleness_max = max(self.staleness_max, other.staleness_max)
        self.input_wait_seconds += other.input_wait_seconds
        self.seconds += other.seconds

    @property
    def loss_mean(self) -> float:
        return self.loss_sum / self.steps if self.steps else math.nan

    @property
    def staleness_mean(self) -> float:
        return self.staleness_sum / self.steps if self.steps else 0.0

    @property
    def input_wait_fraction(self) -> float:
        return self.input_wait_seconds / self.seconds if self.seconds else 0.0


def train_and_export(
    cluster,
    examples_dir: str,
    transform_graph_dir: str,
    serving_model_dir: str,
    model_run_dir: str,
    trainer_config: config_lib.TrainerConfig,
    label_key: str,
    base_model_dir: str | None = None,
    checkpoint_dir: str | None = None,
) -> run_files.TrainingReport:
    """Trains on a running cluster, evaluates, exports: one attempt of the whole Trainer.

    Args:
      cluster: The running cluster (a `cluster.servers.Cluster`: `resolver`, `num_workers`,
        `num_ps`); `cluster.launch` starts it and supervises the attempts.
      examples_dir: Transformed examples with `Split-train/` and `Split-eval/`.
      transform_graph_dir: Transform's output (`transform_fn/`, `transformed_metadata/`).
      serving_model_dir: Where the serving SavedModel goes.
      model_run_dir: Summaries, checkpoints (unless `checkpoint_dir`), `training_report.json`.
      trainer_config: The configuration.
      label_key: The transformed label feature.
      base_model_dir: A previous serving SavedModel to warm-start from (ignored when a
        checkpoint is restored, or when `trainer_config.warm_start` is false).
      checkpoint_dir: Where checkpoints live, overriding `training.checkpoint_dir`; a rerun
        pointing at the same directory resumes from the latest checkpoint.
    """
    schema = task_lib.load_transformed_schema(transform_graph_dir, label_key)
    task = tasks.make_task(schema, trainer_config, transform_graph_dir)
    tf.io.gfile.makedirs(model_run_dir)
    trainer = Trainer(
        task,
        cluster,
        examples_dir,
        model_run_dir,
        checkpoint_dir or trainer_config.training.checkpoint_dir or None,
    )
    # Created after the strategy connected to the cluster, which renames the local device:
    # resources made before that are unusable.
    writer = tf.summary.create_file_writer(model_run_dir)
    initial_step = trainer.restore()
    if initial_step == 0 and base_model_dir and trainer_config.warm_start:
        warm = task.build_model()
        copied = export.load_weights_by_name(warm, base_model_dir)
        logging.info(
            'Warm start: %d of %d weights from %s', copied, len(warm.weights), base_model_dir
        )
        checkpoints.transfer_weights(warm, trainer.model, os.path.join(model_run_dir, 'warm_start'))
    measured = trainer.train(writer)
    serving_model = trainer.serving_model()
    eval_metrics = evaluation.evaluate(task, serving_model, examples_dir)
    with writer.as_default(step=measured['steps']):
        for name, value in eval_metrics.items():
            tf.summary.scalar(f'eval/{name}', value)
    writer.flush()
    features_spec, _ = task.element_spec
    export.export_serving_model(
        serving_model,
        transform_graph_dir,
        serving_model_dir,
        task.serving_outputs,
        model_inputs=tuple(features_spec),
    )
    report = run_files.TrainingReport(
        steps=measured['steps'],
        steps_this_run=measured['steps_this_run'],
        initial_step=measured['initial_step'],
        examples_per_sec=measured['examples_per_sec'],
        staleness_mean=measured['staleness_mean'],
        staleness_max=measured['staleness_max'],
        input_wait_fraction=measured['input_wait_fraction'],
        seconds=measured['seconds'],
        rescheduled_closures=measured['rescheduled_closures'],
        profile=measured['profile'],
        placement=placement.report(trainer.model, trainer.optimizer),
        eval=eval_metrics,
        num_workers=cluster.num_workers,
        num_ps=cluster.num_ps,
    )
    report.write(model_run_dir)
    return report

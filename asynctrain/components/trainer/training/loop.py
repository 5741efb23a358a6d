"""The training loop: ParameterServerStrategy, ClusterCoordinator, checkpoints, summaries and
the training report. Checkpoints restore into any number of parameter servers,
tables and optimizer slots included (`checkpoints` says why).

`task` holds what one worker does (a `task.Task`: binary, multiclass or regression, which this
module never asks); this module owns everything around it. The coordinator (this
process) schedules closures of `steps_per_execution` steps each on whichever worker is free, so
workers never wait for each other and their updates to the parameter servers interleave
(asynchronous training). Each closure runs `train_function`'s `tf.function` and reports its
loss, the staleness of its updates, how long it waited for input, which worker ran it and a
sample of its gradients (`measurements`; written for TensorBoard by `summaries`).
"""

from __future__ import annotations

import logging
import os
import time

import tensorflow as tf

from asynctrain.components.shared import tf_environment
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import (
    checkpoints,
    connection,
    data,
    evaluation,
    export,
    gradient_remedies,
    gradient_statistics,
    measurements,
    placement,
    profiling,
    progress,
    run_files,
    scheduling,
    summaries,
    tasks,
    train_function,
)
from asynctrain.components.trainer.training import task as task_lib


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
            # Worker-local state (residuals, mean squares), only when a remedy is on.
            self.remedies = (
                gradient_remedies.GradientRemedies(self.config.stale_gradients, self.model)
                if self.config.stale_gradients.enabled
                else None
            )
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
        # What each closure's gradient sample holds; each worker's own index, created on the
        # first `train()`.
        self.gradient_layout = gradient_statistics.layout_for(
            self.model.trainable_variables, training.gradient_histograms
        )
        self._worker_indices = None
        tf_environment.configure_autograph()
        self.train_steps = train_function.make(
            task, self.model, self.optimizer, self.strategy, self.remedies, self.gradient_layout
        )

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
        # remedies' per-worker variables, the dataset and the iterator are created one worker at
        # a time, and the train function runs once (zero steps) on each worker in turn before
        # closures are scheduled in bulk.
        scheduling.create_resources_in_turn(self.coordinator)
        if self.remedies is not None:
            scheduling.create_per_worker_variables_in_turn(
                self.coordinator, self.remedies.worker_variables
            )
        # Traced without AutoGraph: building the dataset is Python over Python values (the
        # coordinator would wrap it in a converting `tf.function`, which turned every data module
        # function it calls into graph code, source file by source file: on datasets/penguins'
        # run, creating the dataset took 562 of the Trainer process's 2,296 py-spy samples, and
        # 242 without the conversion).
        per_worker_dataset = self.coordinator.create_per_worker_dataset(
            tf.function(self._dataset_fn, autograph=False)
        )
        per_worker_iterator = iter(per_worker_dataset)
        if self._worker_indices is None:
            self._worker_indices = scheduling.worker_indices(self.coordinator)
        workers = self._worker_indices
        scheduling.warm_up(
            self.coordinator,
            self.train_steps,
            (per_worker_iterator, workers, tf.constant(0, tf.int32)),
        )
        scheduler = scheduling.ClosureScheduler(self.coordinator, self.train_steps)
        progress_bar = progress.TrainingProgress(training.train_steps, initial_step)
        totals = measurements.Totals()
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
                scheduler.schedule((per_worker_iterator, workers, tf.constant(num_steps, tf.int32)))
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
                interval_totals = measurements.Totals()
                for remote_value in ready:
                    interval_totals.add_remote(remote_value, self.gradient_layout)
                totals.merge(interval_totals)
                now = time.monotonic()
                interval_seconds = now - last_summary_time
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
                    summaries.write_interval(
                        summary_writer, step, interval_totals, examples_per_sec, interval_seconds
                    )
                next_summary = scheduled + training.summary_interval_steps
        scheduler.join()
        for remote_value in in_flight:
            totals.add_remote(remote_value, self.gradient_layout)
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
            'gradient_bytes_per_step': totals.gradient_bytes_per_step,
            'dense_gradient_bytes_per_step': totals.dense_gradient_bytes_per_step,
            'worker_steps': dict(sorted(totals.worker_steps.items())),
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
        gradient_bytes_per_step=measured['gradient_bytes_per_step'],
        dense_gradient_bytes_per_step=measured['dense_gradient_bytes_per_step'],
        worker_steps={str(w): n for w, n in measured['worker_steps'].items()},
        profile=measured['profile'],
        placement=placement.report(trainer.model, trainer.optimizer),
        eval=eval_metrics,
        num_workers=cluster.num_workers,
        num_ps=cluster.num_ps,
    )
    report.write(model_run_dir)
    return report

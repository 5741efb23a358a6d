"""The function each closure runs on its worker: `steps_per_execution` asynchronous steps of
the task's `train_step` in one `tf.function`, and what they measured, as one vector.

The loop (`loop.Trainer`) schedules it on the coordinator; everything in it runs on a worker.
Besides the loss, staleness, input wait and gradient bytes summed over its steps, it counts its
steps by staleness, names the worker that ran it (`scheduling.worker_indices`), and carries the
gradient sample of its last step (`gradient_statistics`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import tensorflow as tf

from asynctrain.components.trainer.training import (
    gradient_remedies,
    gradient_statistics,
    measurements,
    scheduling,
)
from asynctrain.components.trainer.training import task as task_lib


class _Sums(NamedTuple):
    """What an execution carries from step to step (a `tf.while_loop`'s loop variables)."""

    loss: tf.Tensor
    staleness: tf.Tensor
    staleness_max: tf.Tensor
    input_wait: tf.Tensor  # seconds
    sent: tf.Tensor  # gradient bytes sent
    dense: tf.Tensor  # the same gradients' bytes, dense
    staleness_counts: tf.Tensor  # steps by staleness
    gradient_sample: tf.Tensor  # the last step's


def make(
    task: task_lib.Task,
    model: tf.keras.Model,
    optimizer: tf.keras.optimizers.Optimizer,
    strategy: tf.distribute.Strategy,
    remedies: gradient_remedies.GradientRemedies | None,
    gradient_layout: gradient_statistics.SampleLayout,
) -> Callable:
    """`train_steps(iterator, worker, num_steps)`: `num_steps` of `task.train_step` on the worker
    that runs it, returning its measurements as one vector (`measurements.split`)."""
    features_spec, label_spec = task.element_spec
    iterator_spec = tf.data.IteratorSpec((features_spec, label_spec))

    def replica_step(features, labels, last):
        return task.train_step(features, labels, model, optimizer, remedies, sample_gradients=last)

    # A plain step when every execution runs one: a while loop around the remote variable
    # reads and updates costs more than the step itself at that size (bench ps, `vs_fit`).
    single_step = task.config.training.steps_per_execution == 1

    # One trace serves every call: the iterator's batch dimension is None and the number of
    # steps is a tensor, so the shorter last execution runs the same graph.
    @tf.function(
        input_signature=[
            iterator_spec,
            scheduling.worker_index_spec(),  # the worker's own index
            tf.TensorSpec([], tf.int32),  # steps
        ]
    )
    def train_steps(iterator, worker, num_steps):
        totals = _Sums(
            loss=tf.constant(0.0),
            staleness=tf.constant(0, tf.int64),
            staleness_max=tf.constant(0, tf.int64),
            input_wait=tf.constant(0.0, tf.float64),
            sent=tf.constant(0, tf.int64),
            dense=tf.constant(0, tf.int64),
            staleness_counts=tf.zeros([measurements.STALENESS_BINS], tf.int64),
            gradient_sample=tf.zeros([gradient_layout.size], tf.float64),
        )
        started = tf.timestamp()

        def step(totals: _Sums, last) -> _Sums:
            # Explicit dependencies: automatic control dependencies do not order
            # `tf.timestamp` against `next(iterator)`, and a while loop may start an
            # iteration's independent ops early, so without them the wait reads as zero.
            # `sent` too: it waits for the previous step's updates of worker state (the
            # gradient remedies' residuals), which this step reads.
            with tf.control_dependencies([totals.loss, totals.staleness, totals.sent]):
                before_input = tf.timestamp()
            with tf.control_dependencies([before_input]):
                features, labels = next(iterator)
            with tf.control_dependencies(tf.nest.flatten((features, labels))):
                input_wait = totals.input_wait + tf.timestamp() - before_input
            outputs = strategy.experimental_local_results(
                strategy.run(replica_step, args=(features, labels, last))
            )[0]
            staleness = outputs['staleness']
            bin_ = tf.minimum(staleness, measurements.STALENESS_BINS - 1)
            return _Sums(
                loss=totals.loss + outputs['loss'],
                staleness=totals.staleness + staleness,
                staleness_max=tf.maximum(totals.staleness_max, staleness),
                input_wait=input_wait,
                sent=totals.sent + outputs['gradient_bytes'],
                dense=totals.dense + outputs['dense_gradient_bytes'],
                staleness_counts=totals.staleness_counts
                + tf.one_hot(bin_, measurements.STALENESS_BINS, dtype=tf.int64),
                gradient_sample=tf.where(last, outputs['gradient_sample'], totals.gradient_sample),
            )

        if single_step:
            totals = step(totals, tf.constant(True))
        else:
            # The loop stays outside `strategy.run`: the optimizer's cross-replica merge
            # cannot sit inside a while loop of the replica function.
            for i in tf.range(num_steps):
                totals = step(totals, tf.equal(i, num_steps - 1))
        with tf.control_dependencies([totals.loss, totals.staleness]):
            elapsed = tf.timestamp() - started
        # One tensor, laid out as `measurements.split` reads it: the coordinator copies each
        # returned tensor from the worker separately, one copy per measurement otherwise,
        # which at one step per execution made our loop slower than `model.fit` (bench ps).
        measured = (
            num_steps,
            totals.loss,
            totals.staleness,
            totals.staleness_max,
            totals.input_wait,
            elapsed,
            totals.sent,
            totals.dense,
            worker,
        )
        return tf.concat(
            [
                tf.stack([tf.cast(m, tf.float64) for m in measured]),
                tf.cast(totals.staleness_counts, tf.float64),
                totals.gradient_sample,
            ],
            axis=0,
        )

    return train_steps

"""Evaluation of a trained model on the eval split: the task's metrics, in one traced pass.

It runs on the coordinator over the plain (unsharded) copy of the model that `loop.Trainer`
returns, so it reads no weights over the network.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from asynctrain.components.trainer.training import data
from asynctrain.components.trainer.training import task as task_lib


def make_eval_step(task: task_lib.Task, keras_model: tf.keras.Model, metrics: dict) -> Callable:
    """The eval step as a `tf.function` traced once: its batch dimension is None, so the partial
    last batch of the eval split runs the same graph."""
    features_spec, label_spec = task.element_spec

    # No Python control flow to convert; AutoGraph would only warn about the closure.
    @tf.function(input_signature=[features_spec, label_spec], autograph=False)
    def eval_step(features, labels):
        task.eval_step(features, labels, keras_model, metrics)
        return tf.shape(labels)[0]

    return eval_step


def evaluate(task: task_lib.Task, keras_model: tf.keras.Model, examples_dir: str) -> dict:
    """Metrics of `keras_model` on the eval split (`eval_steps` batches, or all of it)."""
    task.prepare(examples_dir)
    metrics = task.build_metrics()
    eval_step = make_eval_step(task, keras_model, metrics)
    dataset = task.build_inputs(examples_dir, data.EVAL_SPLIT, training=False)
    if task.config.training.eval_steps:
        dataset = dataset.take(task.config.training.eval_steps)

    # The whole pass in one call (`reduce`, no Python loop to convert): once connected to a
    # cluster, every eager call from the coordinator costs a round of remote bookkeeping.
    @tf.function(autograph=False)
    def evaluate_all():
        return dataset.reduce(tf.constant(0), lambda n, batch: n + eval_step(*batch))

    examples = int(evaluate_all())
    result = {name: float(metric.result()) for name, metric in metrics.items()}
    result['examples'] = examples
    return result

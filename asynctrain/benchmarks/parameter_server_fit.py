"""The `model.fit` variant of `asynctrain bench ps` and `asynctrain bench recsys`, the check that
both variants learn (`held_out_loss`; `held_out_scores` adds the AUC, as `bench async` scores its
rounds), and our loop's rounds (`train_to`).

Keras `model.fit` is what a user of ParameterServerStrategy would pick: the same model, optimizer
and loss, compiled with the same `steps_per_execution` under a ParameterServerStrategy with the
same variable partitioner, on the same cluster, fed by a `DatasetCreator` over the same per-worker
dataset (`task.build_inputs`, as the Trainer builds it). Keras schedules each execution of
`steps_per_execution` steps as one closure on the strategy's `ClusterCoordinator`.

Timing matches the Trainer's: a first `fit` of the same warm-up steps (tracing, dataset start) is
not timed; each later `fit` (one per round) is timed from its epoch's start to its end, which
covers every step and the final `coordinator.join()`. Keras creates the per-worker dataset again
for each `fit`, so a timed epoch includes starting it on each worker (the Trainer's excludes it).

The check: after training, each variant's weights are copied into a plain (unsharded) model and
its mean loss computed on the same held-out batches (the first batches of the split, read in
order), so the variants are compared on what they learned, not on their own running averages.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time

# Batches of the (unshuffled) split both variants' trained weights are scored on.
HELD_OUT_BATCHES = 8


def held_out_batches(task, examples_dir: str, split: str = 'train') -> list:
    """The first `HELD_OUT_BATCHES` batches of `split` (the training split by default), read in
    order."""
    dataset = task.build_inputs(examples_dir, split, training=False)
    return list(dataset.take(HELD_OUT_BATCHES))


def held_out_loss(task, trained_model, batches: list) -> float:
    """Mean loss over `batches` of a plain copy of `trained_model` (sharded or not)."""
    from asynctrain.components.trainer.training import checkpoints

    plain = task.build_model()
    with tempfile.TemporaryDirectory() as scratch:
        checkpoints.transfer_weights(trained_model, plain, scratch)
    losses = [float(task.loss(labels, plain(features))) for features, labels in batches]
    return sum(losses) / len(losses)


def held_out_scores(task, keras_model, batches: list) -> dict:
    """Mean loss and AUC over `batches` of a plain copy of `keras_model` (sharded or not; None:
    the untrained model)."""
    import tensorflow as tf

    from asynctrain.components.trainer.training import checkpoints

    plain = task.build_model()
    if keras_model is not None:
        with tempfile.TemporaryDirectory() as scratch:
            checkpoints.transfer_weights(keras_model, plain, scratch)
    auc = tf.keras.metrics.AUC(from_logits=True)
    losses = []
    for features, labels in batches:
        logits = plain(features)
        losses.append(float(task.loss(labels, logits)))
        auc.update_state(tf.reshape(labels, [-1]), tf.reshape(logits, [-1]))
    return {'loss': sum(losses) / len(losses), 'auc': float(auc.result())}


def train_to(trainer, target: int, save: bool = True) -> dict:
    """Trains our loop on until its global step reaches `target` (one round); its measurements.

    The Trainer trains up to its config's `train_steps`, so each round raises that to `target`.
    """
    config = trainer.config
    trainer.config = dataclasses.replace(
        config, training=dataclasses.replace(config.training, train_steps=target)
    )
    return trainer.train(save=save)


class _EpochTimer:
    """A Keras callback that records the wall time of the (single) epoch."""

    def __init__(self):
        import tensorflow as tf

        timer = self

        class Callback(tf.keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                timer.started = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                timer.seconds = time.perf_counter() - timer.started

        self.callback = Callback()
        self.started = 0.0
        self.seconds = 0.0


def prepare_fit(task, cluster, examples_dir: str, warm_steps: int) -> tuple:
    """`task`'s model compiled under a fresh ParameterServerStrategy on `cluster` and trained
    `warm_steps` by `model.fit` (untimed: tracing, dataset start); returns it and its input."""
    import tensorflow as tf

    from asynctrain.components.trainer.training import connection
    from asynctrain.components.trainer.training import data as data_lib

    config = task.config
    strategy = connection.connect(cluster, config.distribution)
    with strategy.scope():
        keras_model = task.build_model()
        keras_model.compile(
            optimizer=task.build_optimizer(),
            loss=task.loss,
            steps_per_execution=config.training.steps_per_execution,
        )

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        del input_context  # every worker reads every file, shuffled, as the Trainer's do
        return task.build_inputs(examples_dir, data_lib.TRAIN_SPLIT, training=True)

    creator = tf.keras.utils.experimental.DatasetCreator(dataset_fn)
    keras_model.fit(creator, epochs=1, steps_per_epoch=warm_steps, verbose=0)
    return keras_model, creator


def timed_fit(keras_model, creator, steps: int, batch_size: int) -> dict:
    """One more `fit` of `steps` steps, timed over its epoch; returns its rate and the mean
    training loss Keras reported."""
    timer = _EpochTimer()
    history = keras_model.fit(
        creator, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[timer.callback]
    )
    return {
        'steps': steps,
        'seconds': timer.seconds,
        'steps_per_sec': steps / timer.seconds,
        'examples_per_sec': steps * batch_size / timer.seconds,
        'train_loss': float(history.history['loss'][-1]),
    }

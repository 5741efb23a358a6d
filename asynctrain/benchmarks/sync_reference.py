"""The synchronous references of `asynctrain bench async`: MultiWorkerMirroredStrategy (collective
all-reduce over gRPC), one process per worker, each in a CPU budget of its own (the test kit's
`cpu_budget`), on the same examples, model, per-worker batch and optimizer as the Trainer's loop,
trained by Keras `fit` (`loop: fit`) or by a custom loop (`loop: custom`: a `tf.function` step run
on every replica by `strategy.run`, its gradients all-reduced by the optimizer, as TensorFlow's
custom-training-loop guide writes it). The chief scores the weights on the held-out batches after
each round, with the clock stopped, and writes its curve as JSON; it reports each round as it
ends, a line in `spec['progress']`, for the bench to time a disruption by.

A worker behind a proxy (the bench emulates its links) binds `--bind-port` while TF_CONFIG names
the proxy's address, as the Trainer's servers do with `ServerDef.port`.

    python -m asynctrain.benchmarks.sync_reference --spec FILE [--bind-port N]
        (one worker; TF_CONFIG set)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def cluster_resolver(bind_port: int = 0):
    """TF_CONFIG's cluster, its server bound to `bind_port` when that is not 0: the strategy
    builds its `ServerDef` with the resolver's `port` when it has one (TF 2.16 and 2.21
    `collective_all_reduce_strategy.py`, `_initialize_multi_worker`), else binds the port TF_CONFIG
    names."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if bind_port:
        resolver.port = bind_port
    return resolver


def run_worker(spec: dict, bind_port: int = 0) -> None:
    """One worker's training, by `spec['loop']`; the chief (task 0) writes `spec['output']`."""
    import tensorflow as tf

    from asynctrain.benchmarks import parameter_server_fit, transformed_examples
    from asynctrain.components.trainer.training import data as data_lib

    data = transformed_examples.TransformedExamples(**spec['data'])
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=cluster_resolver(bind_port)
    )
    task = transformed_examples.make_task(data, batch_size=spec['batch_size'])
    held_out = parameter_server_fit.held_out_batches(
        task, data.examples_dir, spec['held_out_split']
    )
    with strategy.scope():
        keras_model = task.build_model()
        # As many steps per function call as ours (`spec['steps_per_execution']`); each step
        # still all-reduces its gradients.
        keras_model.compile(
            optimizer=task.build_optimizer(),
            loss=task.loss,
            steps_per_execution=spec['steps_per_execution'],
        )
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    # The global batch is the per-worker batch times the workers, as each of ours reads its own.
    dataset = (
        task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True)
        .unbatch()
        .batch(spec['batch_size'] * spec['workers'], drop_remainder=True)
        .repeat()
        .with_options(options)
    )
    snapshots, clock = [], {'training_s': 0.0, 'started': time.monotonic()}
    chief = json.loads(os.environ['TF_CONFIG'])['task']['index'] == 0

    def snapshot(rounds: int) -> None:
        """The round's wall time and weights (copied with the clock stopped), scored after
        training: a metric's variables cannot be updated inside the strategy's scope."""
        clock['training_s'] += time.monotonic() - clock['started']
        snapshots.append((rounds, clock['training_s'], keras_model.get_weights()))
        if chief and spec.get('progress'):  # the bench watches it to disrupt the run
            with open(spec['progress'], 'a', encoding='utf-8') as f:
                f.write(json.dumps({'round': rounds, 'training_s': clock['training_s']}) + '\n')
        clock['started'] = time.monotonic()

    if spec['loop'] == 'fit':
        fit_rounds(keras_model, dataset, spec, snapshot)
    elif spec['loop'] == 'custom':
        custom_rounds(strategy, task, keras_model, dataset, spec, snapshot)
    else:
        raise ValueError(f"loop: 'fit' or 'custom', got {spec['loop']!r}")
    curve = []
    for rounds, wall_s, weights in snapshots:
        plain = task.build_model()
        plain.set_weights(weights)
        scores = parameter_server_fit.held_out_scores(task, plain, held_out)
        curve.append(
            {
                'wall_s': wall_s,
                'examples': rounds * spec['steps'] * spec['batch_size'] * spec['workers'],
                'held_out_loss': scores['loss'],
                'held_out_auc': scores['auc'],
            }
        )
    if chief:
        with open(spec['output'], 'w', encoding='utf-8') as f:
            json.dump(curve, f)


def fit_rounds(keras_model, dataset, spec: dict, snapshot) -> None:
    """`spec['rounds']` epochs of `spec['steps']` steps with Keras `fit`."""
    import tensorflow as tf

    class Snapshots(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            snapshot(epoch + 1)

    keras_model.fit(
        dataset,
        epochs=spec['rounds'],
        steps_per_epoch=spec['steps'],
        verbose=0,
        callbacks=[Snapshots()],
    )


def custom_rounds(strategy, task, keras_model, dataset, spec: dict, snapshot) -> None:
    """`spec['rounds']` rounds of `spec['steps']` synchronous steps, `steps_per_execution` to a
    `tf.function` call: each replica's loss over its share of the global batch, divided by the
    replicas (the all-reduce sums the gradients), then one update of the mirrored weights."""
    import tensorflow as tf

    optimizer = keras_model.optimizer
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    replicas = strategy.num_replicas_in_sync

    def replica_step(features, labels):
        with tf.GradientTape() as tape:
            loss = task.loss(labels, keras_model(features, training=True)) / replicas
        variables = keras_model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    @tf.function
    def steps(iterator, count):
        for _ in tf.range(count):
            features, labels = next(iterator)
            strategy.run(replica_step, args=(features, labels))

    per_call = spec['steps_per_execution']
    for rounds in range(1, spec['rounds'] + 1):
        # The round's steps, `per_call` to a function call as ours (one trace: a tensor count).
        for start in range(0, spec['steps'], per_call):
            steps(iterator, tf.constant(min(per_call, spec['steps'] - start)))
        snapshot(rounds)


def main() -> int:
    from asynctrain.components.shared import forked_child

    forked_child.die_with_parent()
    parser = argparse.ArgumentParser(prog='sync_reference')
    parser.add_argument('--spec', required=True)
    parser.add_argument('--bind-port', type=int, default=0)
    args = parser.parse_args()
    with open(args.spec, encoding='utf-8') as f:
        run_worker(json.load(f), args.bind_port)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Run as a process by process_pool_test: trains on one cluster after another in this one process,
each named `KIND:WORKERS` on the command line, and prints a JSON line per cluster trained, or
`{"hung": ...}` and exit code 3 when one has not finished in HANG_SECONDS.

A fresh process because TensorFlow's pool is sized by the process's first server: the pytest
process has started its servers long before.

    python -m tests.components.trainer.training.pool_scenario local_processes:1 in_process:3
"""

from asynctrain.components.shared import tf_environment

tf_environment.configure()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import tensorflow as tf  # noqa: E402

from asynctrain.components.trainer import config as config_lib  # noqa: E402
from asynctrain.components.trainer.cluster import servers  # noqa: E402
from asynctrain.components.trainer.training import connection, process_pool  # noqa: E402

HANG_SECONDS = 60
CLOSURES, STEPS_PER_CLOSURE = 20, 4


def train(kind: str, num_workers: int) -> dict:
    """Fits y = sum(x) on per-worker datasets: a loss that training must bring down."""
    distribution = config_lib.DistributionConfig(cluster=kind, num_workers=num_workers, num_ps=1)
    with servers.start(distribution) as cluster:
        strategy = connection.connect(cluster, distribution)
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            weights = tf.Variable(tf.zeros([4, 1]))
            updates = tf.Variable(0, dtype=tf.int64)

        def dataset_fn():
            x = tf.random.stateless_uniform([256, 4], seed=[1, 2])
            y = tf.reduce_sum(x, axis=1, keepdims=True)
            return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)

        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.matmul(x, weights) - y) ** 2)
            weights.assign_sub(0.2 * tape.gradient(loss, weights))
            updates.assign_add(1)
            return loss

        @tf.function
        def closure(iterator):
            loss = 0.0
            for _ in tf.range(STEPS_PER_CLOSURE):
                loss = strategy.run(replica_step, args=next(iterator))
            return loss

        losses = [coordinator.schedule(closure, args=(iterator,)) for _ in range(CLOSURES)]
        coordinator.join()
        return {
            'first_loss': float(losses[0].fetch()),
            'last_loss': float(losses[-1].fetch()),
            'updates': int(updates.numpy()),
        }


def main(plan: list[str]) -> None:
    # As in any process that used TensorFlow before its first cluster (a test session, a bench):
    # the eager context exists, with its settings read, before the first server starts.
    assert float(tf.reduce_sum(tf.ones([2]))) == 2.0
    for name in plan:
        kind, workers = name.split(':')
        finished = threading.Event()

        def watchdog(name=name, finished=finished):
            if not finished.wait(HANG_SECONDS):
                print(json.dumps({'hung': name}), flush=True)
                os._exit(3)

        threading.Thread(target=watchdog, daemon=True).start()
        started = time.monotonic()
        result = train(kind, int(workers))
        finished.set()
        result.update(
            cluster=name,
            seconds=round(time.monotonic() - started, 1),
            pool_threads=process_pool._pool_threads,
        )
        print(json.dumps(result), flush=True)


if __name__ == '__main__':
    main(sys.argv[1:])
    sys.stdout.flush()
    # TensorFlow's in-process servers cannot be stopped; leave without waiting for them.
    os._exit(0)

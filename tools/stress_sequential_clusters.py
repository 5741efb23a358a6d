"""Trains on one in-process cluster after another in this one process and counts the function
removals TensorFlow sent to servers that never had them.

Each round: `launch.train_and_export` for 30 steps (in a child process, as `in_process` training
runs), then a cluster in this process restores that checkpoint and trains 20 more; the resume test
(`loop_test.test_resume_continues_at_the_saved_step_in_one_trace`) holds both of its clusters in
its own process. Before a Trainer connects, `connection.release_earlier_cluster_objects` collects what the
previous cluster left; without it, that cluster's functions die during a later cluster's training
and their removals fail there ("Tried to remove non-existent function", on fd 2).

    .venv/bin/python -m tools.stress_sequential_clusters --iterations 12 --work-dir /tmp/seq 2>/tmp/seq.err

`--code-root` runs it against another copy of this repository (before/after:
`git archive OLD_COMMIT | tar -x -C DIR`). One line per iteration on stdout; count the failed
removals in the saved stderr: `grep -c 'non-existent function' /tmp/seq.err`.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(config_lib, train_steps: int, steps_per_execution: int):
    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            batch_size=64,
            steps_per_execution=steps_per_execution,
            checkpoint_interval_steps=10,
            summary_interval_steps=10,
        )
    )


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--iterations', type=int, default=12)
    parser.add_argument('--work-dir', default='/tmp/stress_sequential_clusters')
    parser.add_argument('--code-root', default=_REPO_ROOT)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.code_root))
    from asynctrain.components.shared import tf_environment

    tf_environment.configure()
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import launch, servers
    from asynctrain.components.trainer.training import loop, run_files, task, tasks
    from tests.components.trainer import trainer_testdata

    data_pickle = os.path.join(args.work_dir, 'taxi.pickle')
    if not os.path.exists(data_pickle):
        data = trainer_testdata.make_transformed_data(os.path.join(args.work_dir, 'taxi'))
        with open(data_pickle, 'wb') as f:
            pickle.dump(data, f)
    with open(data_pickle, 'rb') as f:
        data = pickle.load(f)
    label = trainer_testdata.LABEL_KEY

    def iteration(run: str) -> int:
        launch.train_and_export(
            data.examples,
            data.transform_graph,
            os.path.join(run, 'model'),
            os.path.join(run, 'run'),
            _config(config_lib, 30, 10),
            label,
        )
        config = _config(config_lib, 50, 7)
        schema = task.load_transformed_schema(data.transform_graph, label)
        with servers.start(config.distribution) as cluster:
            trainer = loop.Trainer(
                tasks.BinaryClassificationTask(schema, config),
                cluster,
                data.examples,
                os.path.join(run, 'run2'),
                checkpoint_dir=os.path.join(run, 'run', run_files.CHECKPOINT_SUBDIR),
            )
            trainer.restore()
            return trainer.train()['steps']

    for number in range(args.iterations):
        started = time.monotonic()
        steps = iteration(os.path.join(args.work_dir, f'iteration-{number:03d}'))
        print(f'iteration {number}: {steps} steps, {time.monotonic() - started:.1f} s', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Run as a process by cli_test: trains on a `local_processes` cluster of two workers and one
parameter server, kills worker 1 once training is under way, starts it again from that short-lived
thread, trains on in rounds until worker 1 takes steps again, and prints what it measured.

It runs in its own process because a coordinator that lost a worker keeps trying to reach it in
background threads: no place for the pytest process, which hosts the in-process clusters.

    python -m tests.components.trainer.worker_failure_scenario EXAMPLES TRANSFORM_GRAPH OUTPUT
"""

from asynctrain.components.shared import tf_environment

tf_environment.configure()

import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from asynctrain.components.trainer import config as config_lib  # noqa: E402
from asynctrain.components.trainer.cluster import servers as cluster_lib  # noqa: E402
from asynctrain.components.trainer.training import export, task, tasks  # noqa: E402
from asynctrain.components.trainer.training import loop as train_lib  # noqa: E402

TRAIN_STEPS = 60
KILL_AT_STEP = 15
ROUND_STEPS = 20
# How long the rounds go on for the restarted worker to rejoin: a bound on a condition, not a
# measure. The coordinator reaches the worker again once its gRPC channel's reconnection backoff
# lets it try; that backoff starts at 1 s and grows 1.6x per failed attempt while the worker is
# down, up to 120 s with 20% jitter (gRPC core's subchannel defaults), so a worker down long
# enough could wait up to 144 s after its server listens again. Here it is down a few seconds:
# on both lines the coordinator had recovered it about 5 s after the kill, and it took steps in
# round 1 or 2. (The 1.21 failures that once looked like that wait, 364 rounds and no step of the
# restarted worker, were rounds that trained nothing: each aimed at the same step count.)
REJOIN_TIMEOUT_S = 240


def main(examples: str, transform_graph: str, output: str) -> dict:
    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=TRAIN_STEPS, steps_per_execution=5, checkpoint_interval_steps=0
        ),
        distribution=config_lib.DistributionConfig(
            cluster='local_processes', num_workers=2, num_ps=1
        ),
    )
    schema = task.load_transformed_schema(transform_graph, 'big_tipper')
    with cluster_lib.start(config.distribution) as cluster:
        trainer = train_lib.Trainer(
            tasks.BinaryClassificationTask(schema, config),
            cluster,
            examples,
            os.path.join(output, 'model_run'),
        )
        victim = cluster.processes[(cluster_lib.WORKER, 1)]
        spec = cluster.resolver.cluster_spec().as_dict()
        killed_at, restarted = [], []

        def kill_once_training_then_restart():
            while int(trainer.optimizer.iterations.numpy()) < KILL_AT_STEP:
                time.sleep(0.1)
            killed_at.append(int(trainer.optimizer.iterations.numpy()))
            victim.kill()
            victim.wait()
            # Started again by this thread, which ends once the server listens: the server must
            # outlive it (`forked_child.start_from_lasting_thread`).
            process = cluster_lib.start_server_process(spec, cluster_lib.WORKER, 1)
            restarted.append(process)
            cluster_lib.wait_for_servers(
                {cluster_lib.WORKER: spec[cluster_lib.WORKER]},
                {(cluster_lib.WORKER, 1): process},
                60,
            )

        thread = threading.Thread(target=kill_once_training_then_restart)
        thread.start()
        measured = trainer.train()
        thread.join()
        # Rounds until the restarted worker has run steps in one, as the coordinator sees it.
        rounds, rejoined_steps, steps = 0, 0, measured['steps']
        deadline = time.monotonic() + REJOIN_TIMEOUT_S
        try:
            while not rejoined_steps and time.monotonic() < deadline:
                rounds += 1
                # Each round trains ROUND_STEPS past where the last one ended: a round whose
                # target the global step has already reached schedules no closure at all.
                target = steps + ROUND_STEPS
                trainer.config = dataclasses.replace(
                    config, training=dataclasses.replace(config.training, train_steps=target)
                )
                round_measured = trainer.train()
                steps = round_measured['steps']
                rejoined_steps = round_measured['worker_steps'].get(1, 0)
            victim_exit = victim.wait(timeout=30)
            serving_model = trainer.serving_model()
        finally:
            cluster_lib.stop_processes({(cluster_lib.WORKER, 1): restarted[0]})
    binary_task = tasks.BinaryClassificationTask(schema, config)
    export.export_serving_model(
        serving_model,
        transform_graph,
        os.path.join(output, 'model', 'Format-Serving'),
        binary_task.serving_outputs,
        model_inputs=tuple(binary_task.element_spec[0]),
    )
    return {
        'steps': measured['steps'],
        'killed_at': killed_at[0],
        'victim_exit': victim_exit,
        'rounds_until_rejoined': rounds,
        'rejoined_steps': rejoined_steps,
    }


if __name__ == '__main__':
    print(json.dumps(main(*sys.argv[1:4])), flush=True)
    sys.stdout.flush()
    # The coordinator's threads may still be busy with the cluster; end without waiting for them.
    os._exit(0)

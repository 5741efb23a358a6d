"""Where training runs, chosen once: start the cluster `distribution.cluster` names, train on it.

The executor and `asynctrain train` call `train_and_export` here. An `in_process` cluster and its
coordinator live in a fresh child process (`recovery.train_in_child`): the caller, a TFX executor
that may have run Transform, never connects to the cluster. A `local_processes` run is supervised
by `recovery`, which starts the servers and runs the coordinator as a child, restarting both from
the last checkpoint when a parameter server or the coordinator fails. A `tf_config` chief (a
fresh process of its own, one replica of a TFJob) trains in this process.
"""

from __future__ import annotations

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import recovery, servers
from asynctrain.components.trainer.training import run_files


def train_and_export(
    examples_dir: str,
    transform_graph_dir: str,
    serving_model_dir: str,
    model_run_dir: str,
    trainer_config: config_lib.TrainerConfig,
    label_key: str,
    base_model_dir: str | None = None,
    checkpoint_dir: str | None = None,
) -> run_files.TrainingReport:
    """The whole Trainer, framework-free: what the TFX executor and `asynctrain train` call.

    The arguments are `training.loop.train_and_export`'s, less the cluster, which this starts
    from `trainer_config.distribution` (and stops after).
    """
    paths = dict(
        examples_dir=examples_dir,
        transform_graph_dir=transform_graph_dir,
        serving_model_dir=serving_model_dir,
        model_run_dir=model_run_dir,
        trainer_config=trainer_config,
        label_key=label_key,
        base_model_dir=base_model_dir,
        checkpoint_dir=checkpoint_dir,
    )
    if trainer_config.distribution.cluster == 'local_processes':
        return recovery.train_with_restarts(**paths)
    if trainer_config.distribution.cluster == 'in_process':
        return recovery.train_in_child(**paths)
    with servers.start(trainer_config.distribution) as cluster:
        # Imported here: only a chief trains in this process, and the executor's process (which
        # only launches a child) spends no CPU on the loop's imports.
        from asynctrain.components.trainer.training import loop

        return loop.train_and_export(cluster, **paths)

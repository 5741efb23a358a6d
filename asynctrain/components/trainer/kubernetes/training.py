"""The `tfjob` cluster mode: one Trainer execution as a Kubernetes TFJob.

The executor, in its KFP pod, writes the replicas' trainer config next to the ModelRun artifact,
names the job after the execution, and has `client.train_on_kubernetes` submit a TFJob whose
Chief, Worker and PS replicas run `asynctrain train` with `TF_CONFIG` and write straight into the
Model and ModelRun artifact URIs; it then checks that the chief exported a SavedModel there.
Framework-free like the rest of the Trainer: plain paths and a `TrainerConfig` in, no TFX.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import pathlib

import yaml

from asynctrain.components.shared import object_store
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer import train_arguments
from asynctrain.components.trainer.kubernetes import client
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib

# The replicas' trainer config, written into the ModelRun artifact: every pod reads the same file
# from the pipeline's storage, and the run keeps a record of the settings it trained with.
REPLICA_CONFIG_FILE = 'trainer_config.yaml'
# Relative values paths resolve against the installed package, whose data holds the defaults
# (`asynctrain/kubeflow/tfjob-values.yaml`).
PACKAGE_DATA = pathlib.Path(str(importlib.resources.files('asynctrain')))


class NoModelExported(RuntimeError):
    """The TFJob succeeded but no SavedModel is where the chief was told to export it."""


def values_path(trainer_config: config_lib.TrainerConfig) -> str:
    """`kubernetes.tfjob_values`, a relative path taken from the installed `asynctrain` package."""
    path = trainer_config.kubernetes.tfjob_values
    return path if os.path.isabs(path) else str(PACKAGE_DATA / path)


def write_replica_config(trainer_config: config_lib.TrainerConfig, model_run_dir: str) -> str:
    """Writes `config.in_tf_config_mode(trainer_config)`, what the replicas train with, as YAML into `model_run_dir`; returns its path.

    On a cluster `model_run_dir` is on the pipeline root's storage (gs://, s3://), the one place
    both this pod and the replicas can reach (`object_store.write_text`).
    """
    path = os.path.join(model_run_dir, REPLICA_CONFIG_FILE)
    data = {'trainer': config_lib.to_dict(config_lib.in_tf_config_mode(trainer_config))}
    object_store.write_text(path, yaml.safe_dump(data, sort_keys=False))
    return path


def train_with_tfjob(
    *,
    examples_dir: str,
    transform_graph_dir: str,
    serving_model_dir: str,
    model_run_dir: str,
    trainer_config: config_lib.TrainerConfig,
    label_key: str,
    base_model_dir: str | None,
    execution_key: str,
    runner: client.TFJobRunner | None = None,
) -> str:
    """Trains as a TFJob and returns its name once the chief's SavedModel is in place.

    Args:
      examples_dir: Transformed examples (URI every replica can read).
      transform_graph_dir: Transform's output.
      serving_model_dir: Where the chief exports the serving SavedModel (the Model artifact's
        `Format-Serving`).
      model_run_dir: Summaries, checkpoints, the training report and the replicas' config.
      trainer_config: The Trainer's config, `distribution.cluster` `tfjob`.
      label_key: The transformed label feature.
      base_model_dir: A serving SavedModel to warm-start from, or None.
      execution_key: Identifies this execution: the job name is derived from it, so a retry of
        the same execution names the same job and different executions never share one.
      runner: Runs the built TFJob instead of submitting it with a `TrainingClient`
        (`client.TFJobRunner`; e.g. `local.runner`).

    Raises:
      client.TFJobFailed: the job failed; the message names each failed replica and its reason.
      TimeoutError: the job did not finish within `kubernetes.timeout_seconds` (it is deleted).
      NoModelExported: the job succeeded but `serving_model_dir` holds no SavedModel.
      ValueError: no namespace is configured and this process is not in a pod.
    """
    kubernetes = trainer_config.kubernetes
    name = tfjob_lib.job_name(kubernetes.job_name_prefix, execution_key)
    namespace = kubernetes.namespace or tfjob_lib.pod_namespace()
    train = train_arguments.TrainArguments(
        examples=examples_dir,
        transform_graph=transform_graph_dir,
        serving_model_dir=serving_model_dir,
        model_run_dir=model_run_dir,
        config=write_replica_config(trainer_config, model_run_dir),
        label_key=label_key,
        base_model=base_model_dir,
    )
    logging.info('Training as TFJob %s/%s (image %s)', namespace, name, kubernetes.image)
    client.train_on_kubernetes(
        values_path=values_path(trainer_config),
        name=name,
        namespace=namespace,
        image=kubernetes.image,
        train=train,
        timeout_s=kubernetes.timeout_seconds,
        runner=runner,
    )
    if not object_store.contains_saved_model(serving_model_dir):
        raise NoModelExported(
            f'TFJob {namespace}/{name} succeeded, but the chief exported no SavedModel at '
            f"{serving_model_dir}; see the chief pod's log and {model_run_dir}"
        )
    return name

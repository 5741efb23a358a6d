"""The Trainer's executor: artifacts in, plain paths and a TrainerConfig out, then
`cluster.launch.train_and_export` on this machine, or, in the `tfjob` cluster mode,
`kubernetes.training.train_with_tfjob` on Kubernetes; neither knows anything of TFX."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from asynctrain.components.shared import model_identity, model_statistics, object_store
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer import spec

if TYPE_CHECKING:
    from asynctrain.components.trainer.kubernetes import client

# How the `tfjob` mode runs the TFJob it builds (a `client.TFJobRunner`). None submits it to the
# cluster through the pod's service account, or, where the step's environment names a folder in
# `kubernetes.local.LOG_DIR_VARIABLE` (a rehearsal on one machine: `asynctrain run --compiled
# --tfjob-local`), runs its replicas as local processes. Tests set a runner with their own
# `TrainingClient` here.
tfjob_runner: client.TFJobRunner | None = None


def _base_model_dir(base_models: list[types.Artifact]) -> str | None:
    """The SavedModel to warm-start from: None without a base model, or when the base model is
    the empty one `LatestBlessedModel` hands on before the first push. (`serving_model_dir`,
    not TFX's `serving_model_path`: that one looks for an Estimator's `export/` layout, which no
    model of ours has, through TensorFlow, which cannot open s3:// on the TFX 1.21 line.)"""
    if not base_models:
        return None
    path = path_utils.serving_model_dir(base_models[-1].uri)
    return path if object_store.contains_saved_model(path) else None


def _attach_statistics(statistics: list[types.Artifact], serving_model_dir: str) -> None:
    """Copies the training data's train-split statistics into the exported model."""
    if not statistics:
        return
    split_dir = artifact_utils.get_split_uri(statistics, model_statistics.SPLIT)
    model_statistics.attach(os.path.join(split_dir, 'FeatureStats.pb'), serving_model_dir)


class Executor(base_executor.BaseExecutor):
    """Runs parameter-server training and exports the serving model."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        trainer_config = config_lib.from_dict(json.loads(exec_properties[spec.CONFIG_KEY]))
        base_models = input_dict.get(spec.BASE_MODEL_KEY) or []
        model_uri = artifact_utils.get_single_uri(output_dict[spec.MODEL_KEY])
        paths = dict(
            examples_dir=artifact_utils.get_single_uri(input_dict[spec.EXAMPLES_KEY]),
            transform_graph_dir=artifact_utils.get_single_uri(input_dict[spec.TRANSFORM_GRAPH_KEY]),
            serving_model_dir=path_utils.serving_model_dir(model_uri),
            model_run_dir=artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN_KEY]),
            base_model_dir=_base_model_dir(base_models),
        )
        label_key = exec_properties[spec.LABEL_KEY_KEY]

        if trainer_config.distribution.cluster == 'tfjob':
            from asynctrain.components.trainer.kubernetes import local as tfjob_local
            from asynctrain.components.trainer.kubernetes import training as tfjob_training

            # The Model artifact's URI names this execution in every orchestrator (it holds the
            # pipeline root, the node and the execution), so no two executions share a job name.
            tfjob_training.train_with_tfjob(
                **paths,
                trainer_config=trainer_config,
                label_key=label_key,
                execution_key=model_uri,
                runner=tfjob_runner or tfjob_local.runner_from_environment(os.environ),
            )
        else:
            from asynctrain.components.trainer.cluster import launch

            launch.train_and_export(**paths, trainer_config=trainer_config, label_key=label_key)
        _attach_statistics(input_dict.get(spec.STATISTICS_KEY) or [], paths['serving_model_dir'])
        if exec_properties.get(spec.MODEL_IDENTITY_KEY):
            identity = model_identity.ModelIdentity.from_json(
                exec_properties[spec.MODEL_IDENTITY_KEY]
            )
            model_identity.attach(identity, paths['serving_model_dir'])

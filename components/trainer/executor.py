"""The Trainer's executor: artifacts in, plain paths and a TrainerConfig out, then
`train_lib.train_and_export`, which knows nothing of TFX."""

from __future__ import annotations

import json
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.trainer import config as config_lib
from components.trainer import spec


class Executor(base_executor.BaseExecutor):
    """Runs parameter-server training and exports the serving model."""

    def Do(self, input_dict: dict[str, list[types.Artifact]],
           output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        from components.trainer import train_lib

        self._log_startup(input_dict, output_dict, exec_properties)
        trainer_config = config_lib.from_dict(json.loads(exec_properties[spec.CONFIG_KEY]))
        base_models = input_dict.get(spec.BASE_MODEL_KEY) or []
        base_model_dir = (path_utils.serving_model_path(base_models[-1].uri)
                          if base_models else None)
        train_lib.train_and_export(
            examples_dir=artifact_utils.get_single_uri(input_dict[spec.EXAMPLES_KEY]),
            transform_graph_dir=artifact_utils.get_single_uri(
                input_dict[spec.TRANSFORM_GRAPH_KEY]),
            serving_model_dir=path_utils.serving_model_path(
                artifact_utils.get_single_uri(output_dict[spec.MODEL_KEY])),
            model_run_dir=artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN_KEY]),
            trainer_config=trainer_config,
            label_key=exec_properties[spec.LABEL_KEY_KEY],
            base_model_dir=base_model_dir)

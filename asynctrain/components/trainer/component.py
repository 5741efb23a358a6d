"""The Trainer component: asynchronous parameter-server training in a TFX pipeline.

Stock TFX, Vertex and Kubeflow ship no parameter-server Trainer; this one trains under
`ParameterServerStrategy` with a `ClusterCoordinator`, sharded variables and checkpoints, and
exports the same `Model` artifact stock Trainer does (a SavedModel under `<uri>/Format-Serving`
with `serving_default` and `transform_features` signatures), so stock Evaluator and Pusher
consume it unchanged.
"""

from __future__ import annotations

import json

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import channel, standard_artifacts

from asynctrain.components.shared.model_identity import ModelIdentity
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer import executor
from asynctrain.components.trainer.spec import TrainerSpec


class Trainer(base_component.BaseComponent):
    """Trains on Transform's output and exports a standalone serving model.

    Usage:

    ```python
    trainer = Trainer(
        examples=example_batcher.outputs['batched_examples'],
        transform_graph=transform.outputs['transform_graph'],
        schema=schema_gen.outputs['schema'],
        config=TrainerConfig(training=TrainingConfig(train_steps=2000)),
        label_key='big_tipper')
    ```

    Component `outputs` contains:
     - `model`: Channel of type `standard_artifacts.Model`: the serving SavedModel in
       `<uri>/Format-Serving`.
     - `model_run`: Channel of type `standard_artifacts.ModelRun`: TensorBoard summaries (loss,
       examples/s, staleness, input wait, eval metrics), checkpoints, and
       `training_report.json`.
    """

    SPEC_CLASS = TrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        examples: channel.BaseChannel,
        transform_graph: channel.BaseChannel,
        schema: channel.BaseChannel,
        label_key: str,
        config: config_lib.TrainerConfig | None = None,
        base_model: channel.BaseChannel | None = None,
        statistics: channel.BaseChannel | None = None,
        model_identity: ModelIdentity | None = None,
    ):
        """Constructs a Trainer.

        Args:
          examples: Transformed examples with `train` and `eval` splits: the ExampleBatcher's
            `batched_examples` (pre-batched, what the pipeline passes), or Transform's
            `transformed_examples` as they are; the data module reads either.
          transform_graph: Transform's `transform_graph`: the feature spec and id ranges the
            model is built from, and the graph the export embeds.
          schema: The raw schema (recorded as an input so that a schema change reruns training).
          label_key: The transformed label feature (the feature configuration's label name).
          config: The training configuration; defaults to `TrainerConfig()`.
          base_model: Optional Model (e.g. the latest blessed one) to warm-start from.
          statistics: Optional ExampleStatistics of the examples' raw data: its train split's
            statistics are copied into the exported model (`asynctrain.components.shared.model_statistics`), so
            that a later run can compare its data with what this model was trained on.
          model_identity: Optional: the pipeline's identity, written into the exported model
            (`asynctrain.components.shared.model_identity`), so that `LatestBlessedModel`
            hands on this pipeline's pushes only.
        """
        config = config or config_lib.TrainerConfig()
        if not isinstance(config, config_lib.TrainerConfig):
            raise ValueError(f'config: expected a TrainerConfig, got {type(config).__name__}')
        if not label_key or not isinstance(label_key, str):
            raise ValueError(f'label_key: expected a feature name, got {label_key!r}')
        spec = TrainerSpec(
            examples=examples,
            transform_graph=transform_graph,
            schema=schema,
            base_model=base_model,
            statistics=statistics,
            config=json.dumps(config_lib.to_dict(config), sort_keys=True),
            label_key=label_key,
            model_identity=model_identity.to_json() if model_identity else None,
            model=channel.Channel(type=standard_artifacts.Model),
            model_run=channel.Channel(type=standard_artifacts.ModelRun),
        )
        super().__init__(spec=spec)

"""The LatestBlessedModel component: what a `LatestBlessedModelStrategy` resolver gives, read
from the push destination instead of ML Metadata, so that it runs on every orchestrator.

The work happens in `executor.latest_own_push` and `executor.copy_serving_model`; this module
holds the constructor, its validation and defaults.
"""

from __future__ import annotations

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import channel, standard_artifacts

from asynctrain.components.latest_blessed_model import executor
from asynctrain.components.latest_blessed_model.spec import LatestBlessedModelSpec
from asynctrain.components.shared.model_identity import ModelIdentity


class LatestBlessedModel(base_component.BaseComponent):
    """Hands on the newest model this pipeline pushed, or an empty Model on the first run.

    The Pusher writes a model to its destination only when the Evaluator blessed it, each push in
    its own version directory (`<base_directory>/<unix seconds>/`). The newest version there
    that carries this pipeline's identity is therefore its latest blessed model of every earlier
    run, whichever orchestrator ran it: the local runner, open-source Kubeflow Pipelines (which
    has no resolver tasks) or Vertex AI. It is copied into this component's `model` artifact
    (`Format-Serving/`), so that a downstream step reads a model no later push can change under
    it.

    Each pipeline has a push destination of its own (`<work_dir>/<pipeline_name>/serving_model`),
    but one destination may still hold another pipeline's pushes (a work directory of the shared
    layout of asynctrain 0.1, or two configs naming one destination). The Trainer writes the
    pipeline's identity into every model it exports (`shared.model_identity`: pipeline name,
    label, schema fingerprint); a push whose pipeline name or label is not this pipeline's, or
    that carries no identity, is passed over with a warning naming it, its pipeline and this
    one, and listed in the `passed_over` property.

    When it finds none of its own the `model` artifact holds no SavedModel and its
    `pushed_model` property is ''. The Trainer then trains from scratch and the Evaluator
    judges on the absolute bound alone (`tf.saved_model.contains_saved_model` tells them apart).

    `examples` (today's ExampleGen output) is the trigger: with TFX's cache on, the lookup runs
    again whenever the day's examples are new, and a rerun on the same examples reuses the
    earlier answer, so the whole rerun stays a cache hit.

    Usage:

    ```python
    latest = LatestBlessedModel(
        examples=example_gen.outputs['examples'],
        push_destination=config.serving_dir,
        model_identity=ModelIdentity('taxi', 'big_tipper', schema_fingerprint(schema)),
    )
    trainer = Trainer(..., base_model=latest.outputs['model'])
    ```
    """

    SPEC_CLASS = LatestBlessedModelSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        examples: channel.BaseChannel,
        push_destination: str,
        model_identity: ModelIdentity,
    ):
        """Constructs a LatestBlessedModel.

        Args:
          examples: Today's examples; only their arrival matters (the trigger).
          push_destination: The Pusher's `filesystem.base_directory` (a local path or a URI
            such as `gs://bucket/serving`).
          model_identity: This pipeline's identity, the one its Trainer writes into its models.
        """
        if not isinstance(push_destination, str) or not push_destination:
            raise ValueError(
                f"push_destination: expected the Pusher's base directory, got {push_destination!r}"
            )
        if not isinstance(model_identity, ModelIdentity):
            raise ValueError(
                f"model_identity: expected the pipeline's ModelIdentity, got {model_identity!r}"
            )
        super().__init__(
            spec=LatestBlessedModelSpec(
                examples=examples,
                push_destination=push_destination,
                model_identity=model_identity.to_json(),
                model=channel.Channel(type=standard_artifacts.Model),
            )
        )

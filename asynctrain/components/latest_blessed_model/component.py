"""The LatestBlessedModel component: what a `LatestBlessedModelStrategy` resolver gives, read
from the push destination instead of ML Metadata, so that it runs on every orchestrator.

The work happens in `executor.latest_pushed_version` and `executor.copy_serving_model`; this
module holds the constructor, its validation and defaults.
"""

from __future__ import annotations

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import channel, standard_artifacts

from asynctrain.components.latest_blessed_model import executor
from asynctrain.components.latest_blessed_model.spec import LatestBlessedModelSpec


class LatestBlessedModel(base_component.BaseComponent):
    """Hands on the newest model the Pusher pushed, or an empty Model on the first run.

    The Pusher writes a model to its destination only when the Evaluator blessed it, each push in
    its own version directory (`<base_directory>/<unix seconds>/`). The newest version there is
    therefore the latest blessed model of every earlier run, whichever orchestrator ran it: the
    local runner, open-source Kubeflow Pipelines (which has no resolver tasks) or Vertex AI. It
    is copied into this component's `model` artifact (`Format-Serving/`), so that a downstream
    step reads a model no later push can change under it.

    On the first run the destination is empty: the `model` artifact then holds no SavedModel and
    its `pushed_model` property is ''. The Trainer then trains from scratch and the Evaluator
    judges on the absolute bound alone (`tf.saved_model.contains_saved_model` tells them apart).

    `examples` (today's ExampleGen output) is the trigger: with TFX's cache on, the lookup runs
    again whenever the day's examples are new, and a rerun on the same examples reuses the
    earlier answer, so the whole rerun stays a cache hit.

    Usage:

    ```python
    latest = LatestBlessedModel(
        examples=example_gen.outputs['examples'], push_destination=config.serving_dir)
    trainer = Trainer(..., base_model=latest.outputs['model'])
    ```
    """

    SPEC_CLASS = LatestBlessedModelSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, examples: channel.BaseChannel, push_destination: str):
        """Constructs a LatestBlessedModel.

        Args:
          examples: Today's examples; only their arrival matters (the trigger).
          push_destination: The Pusher's `filesystem.base_directory` (a local path or a URI
            such as `gs://bucket/serving`).
        """
        if not isinstance(push_destination, str) or not push_destination:
            raise ValueError(
                f"push_destination: expected the Pusher's base directory, got {push_destination!r}"
            )
        super().__init__(
            spec=LatestBlessedModelSpec(
                examples=examples,
                push_destination=push_destination,
                model=channel.Channel(type=standard_artifacts.Model),
            )
        )

"""The Evaluator component: TFMA's evaluation and blessing of the exported model, scored in large
batches by one Beam pipeline.

Stock Evaluator runs TFMA's extractors example by example through Beam (at a million rows it was
half of the whole pipeline's time, `asynctrain bench pipeline`). This one reads the same raw
examples and the same two signatures, computes the same metrics from states that add up across
batches (`metrics`), checks them with TFMA's own validator and writes TFMA's own file format
(`results`); the work happens in `scoring.ScoreExamples`.
"""

from __future__ import annotations

import json

from tensorflow_model_analysis.proto import config_pb2
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import channel, standard_artifacts

from asynctrain.components.evaluator import executor, metrics, slicing
from asynctrain.components.evaluator.spec import EvaluatorSpec

DEFAULT_BATCH_SIZE = 4096


class Evaluator(base_beam_component.BaseBeamComponent):
    """Evaluates the candidate model (against a baseline) on raw examples and blesses it.

    Usage (the same arguments as stock `tfx.components.Evaluator`):

    ```python
    evaluator = Evaluator(
        examples=example_gen.outputs['examples'],
        model=trainer.outputs['model'],
        baseline_model=latest_blessed_model.outputs['model'],
        eval_config=config_pb2.EvalConfig(...))
    pusher = Pusher(model=..., model_blessing=evaluator.outputs['blessing'], ...)
    ```

    `eval_config` is a `config_pb2.EvalConfig` within what the pipeline asks of it: TFMA's slices and
    cross slices, example weights, the metrics in `metrics.SUPPORTED_METRICS` each with its
    name, TFMA's jackknife or Poisson bootstrap confidence intervals, and every model spec with
    one preprocessing function (`transform_features`) that returns the label. Anything else is
    refused when the component is built, naming the field.

    Component `outputs` contains:
     - `evaluation`: Channel of type `standard_artifacts.ModelEvaluation`, in TFMA's format
       (`tfma.load_eval_result` and `tfma.load_validation_result` read it).
     - `blessing`: Channel of type `standard_artifacts.ModelBlessing`: a `BLESSED` or
       `NOT_BLESSED` file and stock's custom properties (`blessed`, `current_model`,
       `current_model_id`, `baseline_model`, `baseline_model_id`).
    """

    SPEC_CLASS = EvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(
        self,
        examples: channel.BaseChannel,
        model: channel.BaseChannel,
        eval_config: config_pb2.EvalConfig,
        baseline_model: channel.BaseChannel | None = None,
        example_splits: list[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        drift_anomalies: channel.BaseChannel | None = None,
    ):
        """Constructs an Evaluator.

        Args:
          examples: Raw examples (ExampleGen's output) holding the splits to evaluate on.
          model: The candidate model (the Trainer's `model`).
          eval_config: Metrics, thresholds and model specs, as for stock Evaluator.
          baseline_model: The model the change thresholds compare against, if any.
          example_splits: The splits evaluated together; stock's default, `['eval']`.
          batch_size: Serialized examples per signature call.
          drift_anomalies: DriftValidator's output when its action is `no_push`: unaccepted
            drift withholds the blessing, whatever the metrics.
        """
        metrics.metric_specs(eval_config)
        slicing.slice_specs(eval_config)
        executor.check_model_specs(eval_config)
        splits = list(example_splits or ['eval'])
        if not all(isinstance(s, str) and s for s in splits):
            raise ValueError(f'example_splits: expected split names, got {example_splits!r}')
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f'batch_size: expected an integer >= 1, got {batch_size!r}')
        super().__init__(
            spec=EvaluatorSpec(
                examples=examples,
                model=model,
                baseline_model=baseline_model,
                drift_anomalies=drift_anomalies,
                eval_config=eval_config,
                example_splits=json.dumps(splits),
                batch_size=batch_size,
                evaluation=channel.Channel(type=standard_artifacts.ModelEvaluation),
                blessing=channel.Channel(type=standard_artifacts.ModelBlessing),
            )
        )

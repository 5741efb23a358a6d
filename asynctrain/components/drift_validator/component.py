"""The DriftValidator component: today's data statistics against those of the data the served
model was trained on, feature by feature, with TFDV's drift comparators.

The work happens in `comparison.compare` and the executor; this module holds the constructor,
its validation and defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import channel, standard_artifacts

from asynctrain.components.drift_validator import executor, spec, thresholds
from asynctrain.components.drift_validator.spec import DriftValidatorSpec


class DriftValidator(base_component.BaseComponent):
    """Stops the run, or withholds the push, when today's data drifted from the served model's.

    ExampleValidator checks today's data against the schema, which says what values may be;
    it cannot see a distribution that moved inside those bounds (a fare twice as high, card
    payments taking over from cash). This component compares today's train statistics with the
    statistics of the data the served model was trained on, which the Trainer keeps in the
    model (`spec.MODEL_STATISTICS_PATH`), and so which the LatestBlessedModel output carries:
    Jensen-Shannon divergence for numeric features, L-infinity distance (the largest change of
    one value's share) for categorical ones, as `tfdv.validate_statistics` measures them. A
    schema feature with values on one side only (appeared, disappeared) counts as drift too;
    see `comparison.compare`.

    On unaccepted drift, `action` decides: 'stop' writes the output and then fails the run with
    a message naming each feature, its distance and threshold, and the command that accepts it
    (`asynctrain run --accept-drift FEATURE[,FEATURE]`); 'no_push' lets the run go on and sets
    the output's `blocking` property, for the Evaluator to withhold its blessing on, so that
    today's model is trained and evaluated but not served.

    There is nothing to compare with before the first push, or when the served model was
    pushed before models carried their statistics: the run goes on, judged on the schema
    alone, and the output's `first_run` property is 1 (`first_run_reason` says which).

    The output is an ExampleAnomalies artifact in ExampleValidator's layout
    (`Split-train/SchemaDiff.pb`, TFDV's Anomalies with every feature's measured distance in
    `drift_skew_info`), readable with TFDV's `load_anomalies_binary` and `display_anomalies`.

    Usage:

    ```python
    drift = DriftValidator(
        statistics=example_gen.outputs['statistics'],  # or a StatisticsGen's
        schema=schema_gen.outputs['schema'],
        baseline_model=latest.outputs['model'],
        feature_thresholds={'fare': 0.2},
    )
    ```
    """

    SPEC_CLASS = DriftValidatorSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        statistics: channel.BaseChannel,
        schema: channel.BaseChannel,
        baseline_model: channel.BaseChannel | None = None,
        numeric_threshold: float = thresholds.DEFAULT_NUMERIC_THRESHOLD,
        categorical_threshold: float = thresholds.DEFAULT_CATEGORICAL_THRESHOLD,
        feature_thresholds: Mapping[str, float] | None = None,
        action: str = spec.STOP,
        accepted_features: Sequence[str] = (),
    ):
        """Constructs a DriftValidator.

        Args:
          statistics: Today's ExampleStatistics (StatisticsGen's layout; in the pipeline, the
            ExampleGen's); its train split is compared.
          schema: The schema; its features are the ones compared.
          baseline_model: The served model (LatestBlessedModel's output); empty or None
            before the first push.
          numeric_threshold: Jensen-Shannon divergence allowed for numeric features, (0, 1].
          categorical_threshold: L-infinity distance allowed for categorical features, (0, 1].
          feature_thresholds: Per-feature thresholds overriding those two; names must be schema
            features (checked when the executor reads the schema).
          action: 'stop' (fail the run) or 'no_push' (withhold the blessing) on unaccepted drift.
          accepted_features: Features whose drift is accepted for this run; 'all' accepts all.
        """
        numeric_threshold = thresholds.check_threshold('numeric_threshold', numeric_threshold)
        categorical_threshold = thresholds.check_threshold(
            'categorical_threshold', categorical_threshold
        )
        if feature_thresholds is not None and not isinstance(feature_thresholds, Mapping):
            raise ValueError(
                'feature_thresholds: expected a mapping of feature name to threshold, '
                f'got {feature_thresholds!r}'
            )
        feature_thresholds = dict(feature_thresholds or {})
        for name, value in feature_thresholds.items():
            thresholds.check_threshold(f'feature_thresholds[{name!r}]', value)
        if action not in spec.ACTIONS:
            raise ValueError(f'action: expected one of {", ".join(spec.ACTIONS)}, got {action!r}')
        if isinstance(accepted_features, str) or not all(
            isinstance(name, str) and name for name in accepted_features
        ):
            raise ValueError(
                f'accepted_features: expected a list of feature names (or [{spec.ACCEPT_ALL!r}]), '
                f'got {accepted_features!r}'
            )
        super().__init__(
            spec=DriftValidatorSpec(
                statistics=statistics,
                schema=schema,
                baseline_model=baseline_model,
                numeric_threshold=numeric_threshold,
                categorical_threshold=categorical_threshold,
                feature_thresholds=json.dumps(feature_thresholds, sort_keys=True),
                action=action,
                accepted_features=json.dumps(sorted(set(accepted_features))),
                anomalies=channel.Channel(type=standard_artifacts.ExampleAnomalies),
            )
        )

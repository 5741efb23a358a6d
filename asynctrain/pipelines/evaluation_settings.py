"""The Evaluator's part of the pipeline config: the metric that gates the push and its bound, the
baseline (`evaluation:` in the YAML). Part of
`asynctrain.pipelines.config`, which re-exports every name here."""

from __future__ import annotations

import dataclasses

from asynctrain.components.shared import yaml_config

# The Evaluator's blessing metric: the TFMA metric of each name, its bound (`min_value` is a lower
# bound, `max_value` an upper bound), and the tasks it applies to.
METRICS = {
    'AUC': ('binary',),
    'BinaryAccuracy': ('binary',),
    'Accuracy': ('multiclass',),
    'RMSE': ('regression',),
    'MSE': ('regression',),
}
DEFAULT_METRIC = {'binary': 'AUC', 'multiclass': 'Accuracy', 'regression': 'RMSE'}
UPPER_BOUND_METRICS = ('RMSE', 'MSE')
BASELINES = ('none', 'latest_blessed')


@dataclasses.dataclass(frozen=True)
class EvaluationSettings:
    """The Evaluator's blessing rule.

    Attributes:
      metric: The metric that gates the push, one of `METRICS`; empty means the task's default
        (`DEFAULT_METRIC`: AUC for binary, Accuracy for multiclass, RMSE for regression).
      min_value: For AUC, BinaryAccuracy and Accuracy: the model is blessed only if the metric on
        eval is at least this.
      max_value: For RMSE and MSE (required for them): the model is blessed only if the metric
        on eval is at most this, in the label's units (squared for MSE).
      baseline: `none`, or `latest_blessed`: the candidate is also compared with the last blessed
        model on the same eval split, and blessed only if it is not worse by more than
        `max_regression` (TFMA's change threshold). With no blessed model yet (the first run),
        the absolute bound alone decides.
      max_regression: With `baseline: latest_blessed`: how much worse than the baseline the
        candidate's metric may be, in the metric's units (lower for AUC and accuracy, higher for
        RMSE and MSE).
    """

    metric: str = ''
    min_value: float = 0.6
    max_value: float | None = None
    baseline: str = 'none'
    max_regression: float = 0.01

    def __post_init__(self):
        if self.metric and self.metric not in METRICS:
            yaml_config.fail(
                'evaluation.metric',
                f'unsupported metric {self.metric!r}; allowed: {list(METRICS)}',
            )
        if not 0.0 <= self.min_value <= 1.0:
            yaml_config.fail('evaluation.min_value', 'expected a number in [0, 1]')
        if self.max_value is not None and self.max_value <= 0:
            yaml_config.fail('evaluation.max_value', f'expected a number > 0, got {self.max_value}')
        if self.baseline not in BASELINES:
            yaml_config.fail(
                'evaluation.baseline', f'got {self.baseline!r}; allowed: {list(BASELINES)}'
            )
        if self.max_regression < 0:
            yaml_config.fail(
                'evaluation.max_regression', f'expected a number >= 0, got {self.max_regression}'
            )

    def metric_for(self, task: str) -> str:
        """The blessing metric for `task`; a ConfigError if the configured one does not fit it or
        lacks its bound."""
        metric = self.metric or DEFAULT_METRIC[task]
        if task not in METRICS[metric]:
            allowed = [name for name, tasks in METRICS.items() if task in tasks]
            yaml_config.fail(
                'evaluation.metric', f'{metric} does not apply to a {task} task; allowed: {allowed}'
            )
        if metric in UPPER_BOUND_METRICS and self.max_value is None:
            yaml_config.fail(
                'evaluation.max_value',
                f'required for {metric}: the largest {metric} on eval that is blessed, in the '
                "label's units",
            )
        return metric

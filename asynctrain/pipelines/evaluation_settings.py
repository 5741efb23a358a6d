"""The Evaluator's part of the pipeline config: the metric that gates the push and its bound, the
baseline, and the slices with their own gates (`evaluation:` in the YAML). Part of
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
# `evaluation.confidence_interval_method`: the name of TFMA's `ConfidenceIntervalOptions` method.
CONFIDENCE_INTERVAL_METHODS = {'jackknife': 'JACKKNIFE', 'bootstrap': 'POISSON_BOOTSTRAP'}


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
      slices: Slices to evaluate besides the whole split, each a list of raw feature names (TFMA's
        `feature_keys`): `[[payment_type], [payment_type, trip_start_hour]]` evaluates every
        payment type, and every (payment type, hour) pair. Features the model does not use slice
        too. Slices are the raw values of the input, also where the transform outputs a feature
        under the same name (`payment_type:Cash`, not its vocabulary id, which stock TFMA would
        slice on). With slices, `min_value`, `max_value` and `max_regression` gate the whole split
        only.
      slice_min_value: For AUC, BinaryAccuracy and Accuracy: with `slices`, the model is blessed
        only if the metric is at least this on every slice of them too. A slice of one class (no
        positive or no negative example) has no AUC: it is reported undefined (NaN; TFMA says 0)
        and its gate is not applied, which the run's summary says ("check not applied"). Empty:
        slices are reported, not gated.
      slice_max_value: For RMSE and MSE: with `slices`, the model is blessed only if the metric
        is at most this on every slice of them too. Empty: slices are reported, not gated.
      slice_max_regression: With `slices` and `baseline: latest_blessed`: how much worse than the
        baseline the candidate's metric may be on each slice. Empty: no per-slice comparison.
      min_slice_size: With `slices`: a slice of fewer examples of the eval split than this is
        not evaluated (TFMA's `min_slice_size`: the slice is written with TFMA's note, no metric,
        no plot), and no slice gate is applied to it, which the run's summary says. 0: every
        slice is evaluated.
      example_weight: A numeric column whose value weighs each example in the metrics (TFMA's
        `example_weight_key`; one value per example). Metrics are then reported both weighted and
        unweighted, and the bounds above apply to both.
      confidence_intervals: Report a 95% confidence interval with every metric but the example
        count, by `confidence_interval_method`. The bounds above still gate the metric's value,
        not its interval, as in TFMA. TFMA's interval is the value plus or minus a t quantile
        times the standard error; its bounds are clipped to the metric's range ([0, 1] for AUC
        and the accuracies, at least 0 for RMSE and MSE, [-1, 1] for a change of AUC or
        accuracy against the baseline), so a small slice's interval may be lopsided. A slice
        where some resample has one class has an undefined (NaN) AUC interval.
      confidence_interval_method: With `confidence_intervals`: `jackknife` (TFMA's default: 20
        random partitions of each slice, each metric on all but one) or `bootstrap` (TFMA's
        Poisson bootstrap: 20 samples, each counting every example of a slice a Poisson(1)
        number of times; drawn from each example's bytes, so the same on every run over the
        same examples, however Beam batches them, where TFMA's are unseeded).
      plots: Also TFMA's plots on every slice, as `tfma.view` shows them: for binary tasks the
        calibration plot and the confusion matrices at 1,000 thresholds (the PR and ROC curves),
        for multiclass the confusion matrix of the classes.
    """

    metric: str = ''
    min_value: float = 0.6
    max_value: float | None = None
    baseline: str = 'none'
    max_regression: float = 0.01
    # --- slices and per-slice gates (the Evaluator's slicing_specs / per_slice_thresholds) ---
    slices: tuple[tuple[str, ...], ...] = ()
    slice_min_value: float | None = None
    slice_max_value: float | None = None
    slice_max_regression: float | None = None
    min_slice_size: int = 0
    example_weight: str = ''
    confidence_intervals: bool = False
    confidence_interval_method: str = 'jackknife'
    plots: bool = False

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
        if self.confidence_interval_method not in CONFIDENCE_INTERVAL_METHODS:
            yaml_config.fail(
                'evaluation.confidence_interval_method',
                f'got {self.confidence_interval_method!r}; allowed: '
                f'{list(CONFIDENCE_INTERVAL_METHODS)}',
            )
        if self.confidence_interval_method != 'jackknife' and not self.confidence_intervals:
            yaml_config.fail(
                'evaluation.confidence_interval_method', 'needs `confidence_intervals: true`'
            )
        self._check_slices()

    def _check_slices(self) -> None:
        for index, keys in enumerate(self.slices):
            if not keys or not all(keys) or len(set(keys)) != len(keys):
                yaml_config.fail(
                    f'evaluation.slices[{index}]',
                    f'expected a list of distinct feature names, got {list(keys)}',
                )
        gates = ('slice_min_value', 'slice_max_value', 'slice_max_regression')
        for field in gates:
            if getattr(self, field) is not None and not self.slices:
                yaml_config.fail(f'evaluation.{field}', 'needs `evaluation.slices` to gate')
        if isinstance(self.min_slice_size, bool) or not isinstance(self.min_slice_size, int):
            yaml_config.fail(
                'evaluation.min_slice_size', f'expected an integer, got {self.min_slice_size!r}'
            )
        if self.min_slice_size < 0:
            yaml_config.fail(
                'evaluation.min_slice_size', f'expected a number >= 0, got {self.min_slice_size}'
            )
        if self.min_slice_size and not self.slices:
            yaml_config.fail('evaluation.min_slice_size', 'needs `evaluation.slices`')
        if self.slice_min_value is not None and not 0.0 <= self.slice_min_value <= 1.0:
            yaml_config.fail('evaluation.slice_min_value', 'expected a number in [0, 1]')
        if self.slice_max_value is not None and self.slice_max_value <= 0:
            yaml_config.fail(
                'evaluation.slice_max_value', f'expected a number > 0, got {self.slice_max_value}'
            )
        if self.slice_max_regression is not None:
            if self.slice_max_regression < 0:
                yaml_config.fail(
                    'evaluation.slice_max_regression',
                    f'expected a number >= 0, got {self.slice_max_regression}',
                )
            if self.baseline != 'latest_blessed':
                yaml_config.fail(
                    'evaluation.slice_max_regression', 'needs `baseline: latest_blessed`'
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

    def slice_bound_for(self, metric: str) -> float | None:
        """The per-slice bound of `metric` (a `metric_for` result), None when slices are not
        gated on a value; a ConfigError if the bound given does not fit the metric."""
        upper = metric in UPPER_BOUND_METRICS
        wrong, right = (
            ('slice_min_value', 'slice_max_value')
            if upper
            else ('slice_max_value', 'slice_min_value')
        )
        if getattr(self, wrong) is not None:
            yaml_config.fail(f'evaluation.{wrong}', f'does not apply to {metric}; use {right}')
        return getattr(self, right)

"""The pipeline's typed configuration: one frozen dataclass, loaded from YAML and validated once.

`asynctrain run --config FILE` reads a YAML mapping whose keys are the fields below (nested
sections for nested dataclasses) with the project's one config loader (`asynctrain.components.shared.yaml_config`).
Unknown keys, wrong types and out-of-range values fail before any work starts, with an error
naming the file and the field, e.g. `config.yaml: trainer.training.batch_size: expected int`.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.resources
import os
import pathlib
from typing import Any

from asynctrain.components.shared import yaml_config
from asynctrain.components.shared.tasks import REGRESSION_LOSSES, TASK_TYPES
from asynctrain.components.trainer.config import TrainerConfig

# The bundled datasets' schema and feature configs, package data of the installed `asynctrain`
# (a folder on disk: the package is never imported from a zip).
BUNDLED_SCHEMAS = pathlib.Path(str(importlib.resources.files('asynctrain') / 'schemas'))
BUNDLED_DATA = 'bundled:chicago_taxi'


ConfigError = yaml_config.ConfigError
from_dict = yaml_config.build

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


def _absolute(path: str) -> str:
    """A local path made absolute; a URI (gs://, s3://, hdfs://) passes through unchanged."""
    return path if '://' in path else os.path.abspath(path)


def _inside(path: str, directory: str) -> bool:
    """Whether `path` (a URI or a local path, relative to the current directory) is in `directory`."""
    if '://' in path or '://' in directory:
        return path.rstrip('/').startswith(directory.rstrip('/') + '/')
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def bundled_data_dir() -> str:
    """The Chicago taxi sample that ships inside the installed tfx package (15,002 rows)."""
    import tfx  # Imported here: resolving the default must not load TFX for `--help`.

    return str(pathlib.Path(tfx.__file__).parent / 'examples/chicago_taxi_pipeline/data/simple')


@dataclasses.dataclass(frozen=True)
class ExampleGenSettings:
    """How CSV input becomes examples.

    Attributes:
      train_buckets: Hash buckets assigned to the train split.
      eval_buckets: Hash buckets assigned to the eval split.
      delimiter: CSV field delimiter, one character.
      null_markers: Cell values read as a missing feature besides the empty cell (e.g. `NA`).
      max_bad_fraction: Fraction of rejected rows above which ExampleGen fails (0 = any bad row).
      input_pattern: Files under the data directory, relative; may use `{SPAN}` or `{YYYY}{MM}{DD}`.
      chunk_mb: Megabytes of CSV parsed as one unit of work. Each chunk writes one file per
        split, so a split has about (its share of the input) / chunk_mb files: the readers of the
        examples (Transform, the ExampleBatcher, the Evaluator) spread over at most that many
        workers on a distributed runner. Lower it when the input is small and the workers many.
    """

    train_buckets: int = 2
    eval_buckets: int = 1
    delimiter: str = ','
    null_markers: tuple[str, ...] = ()
    max_bad_fraction: float = 0.0
    input_pattern: str = '*'
    chunk_mb: float = 8.0

    def __post_init__(self):
        for name in ('train_buckets', 'eval_buckets'):
            if getattr(self, name) < 1:
                yaml_config.fail(f'example_gen.{name}', 'expected an integer >= 1')
        if len(self.delimiter) != 1:
            yaml_config.fail(
                'example_gen.delimiter', f'expected one character, got {self.delimiter!r}'
            )
        if not 0.0 <= self.max_bad_fraction <= 1.0:
            yaml_config.fail('example_gen.max_bad_fraction', 'expected a number in [0, 1]')
        if not self.chunk_mb * 2**20 >= 1:
            yaml_config.fail('example_gen.chunk_mb', 'expected a number of megabytes > 0')


@dataclasses.dataclass(frozen=True)
class LabelSettings:
    """The label, when the pipeline config gives it: with a `preprocessing_module`, whose
    `features.yaml` needs no label, or to override the dataset's `features.yaml`.

    Attributes:
      column: The raw CSV column holding the label (its transformed feature has the same name).
      task: One of `binary`, `multiclass`, `regression`.
      positive: Binary only: the column's value that is the positive class; unset, the column
        must hold 0 and 1.
      loss: Regression only: `mse`, `huber` or `msle` (the squared error of log(1 + label), for a
        non-negative label with a long right tail; served in the label's units).
    """

    column: str
    task: str
    positive: str | int | None = None
    loss: str = 'mse'

    def __post_init__(self):
        if not self.column:
            yaml_config.fail('label.column', 'expected the name of a CSV column')
        if self.task not in TASK_TYPES:
            yaml_config.fail('label.task', f'got {self.task!r}; allowed: {list(TASK_TYPES)}')
        if self.positive is not None and self.task != 'binary':
            yaml_config.fail('label.positive', f'only for task binary, got task {self.task!r}')
        if self.loss not in REGRESSION_LOSSES:
            yaml_config.fail('label.loss', f'got {self.loss!r}; allowed: {list(REGRESSION_LOSSES)}')


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
        too. With slices, `min_value`, `max_value` and `max_regression` gate the whole split only.
      slice_min_value: For AUC, BinaryAccuracy and Accuracy: with `slices`, the model is blessed
        only if the metric is at least this on every slice of them too. Empty: slices are reported,
        not gated.
      slice_max_value: For RMSE and MSE: with `slices`, the model is blessed only if the metric
        is at most this on every slice of them too. Empty: slices are reported, not gated.
      slice_max_regression: With `slices` and `baseline: latest_blessed`: how much worse than the
        baseline the candidate's metric may be on each slice. Empty: no per-slice comparison.
      example_weight: A numeric column whose value weighs each example in the metrics (TFMA's
        `example_weight_key`; one value per example). Metrics are then reported both weighted and
        unweighted, and the bounds above apply to both.
      confidence_intervals: Report a 95% confidence interval with every metric but the example
        count (TFMA's default method: a jackknife over 20 random partitions of each slice). The
        bounds above still gate the metric's value, not its interval, as in TFMA.
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
    example_weight: str = ''
    confidence_intervals: bool = False
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


@dataclasses.dataclass(frozen=True)
class RetrainingSettings:
    """What a recurring (daily) run carries over from the previous one.

    Both are inputs of the next run, so with either on, a rerun over unchanged data trains again
    instead of being a cache hit; that is why they are off unless a schedule asks for them.

    Attributes:
      warm_start: The Trainer starts from the latest blessed model's weights.
      analyzer_cache: Transform reuses the latest analyzer cache for spans it has analyzed before.
    """

    warm_start: bool = False
    analyzer_cache: bool = False


DRIFT_ACTIONS = ('stop', 'no_push')


@dataclasses.dataclass(frozen=True)
class DriftSettings:
    """Each run's data compared with the data the served model was trained on.

    The train split's statistics (the ExampleGen's) are compared feature by feature with those the
    latest pushed model carries (the Trainer stores them in the model), with TFDV's drift
    comparators: Jensen-Shannon divergence on quantile histograms for numeric features, L-infinity
    distance between value frequencies for categorical ones; both run from 0 (same) to 1. The
    first run, with no pushed model, is judged on the schema alone. See docs/drift.md.

    Attributes:
      enabled: Compare each run's data with the served model's training data.
      numeric_threshold: Jensen-Shannon divergence above which a numeric feature has drifted.
        0.3: consecutive 1,500-row days of the bundled taxi data stay under 0.13 for fare, tips,
        trip miles and seconds, while fares sent in cents instead of dollars score 1.0.
      categorical_threshold: L-infinity distance above which a categorical feature has drifted:
        the largest change in any one value's share. 0.1: the same taxi days stay under 0.08; a
        value that held more than a tenth of the rows and vanished scores more than 0.1 (a
        distance must exceed its threshold to count as drift).
      features: Per-feature thresholds that replace the default for that feature (schema names);
        `asynctrain init` proposes them for features that vary much from one part of the data
        to the next.
      action: What unaccepted drift does: `stop` fails the run before Transform and training,
        naming the features; `no_push` trains and evaluates, but the Evaluator withholds its
        blessing, so nothing is pushed. Either keeps the model out of serving.
      accept: Features whose drift this run accepts (a known, intended change), or `all`; set for
        one run with `asynctrain run --accept-drift FEATURE[,FEATURE]`.
    """

    enabled: bool = True
    numeric_threshold: float = 0.3
    categorical_threshold: float = 0.1
    features: dict[str, float] = dataclasses.field(default_factory=dict)
    action: str = 'stop'
    accept: tuple[str, ...] = ()

    def __post_init__(self):
        thresholds = [
            ('drift.numeric_threshold', self.numeric_threshold),
            ('drift.categorical_threshold', self.categorical_threshold),
        ] + [(f'drift.features.{name}', value) for name, value in self.features.items()]
        for field, value in thresholds:
            if isinstance(value, bool) or not 0.0 < value <= 1.0:
                yaml_config.fail(field, f'expected a distance in (0, 1], got {value!r}')
        if self.action not in DRIFT_ACTIONS:
            yaml_config.fail('drift.action', f'got {self.action!r}; allowed: {list(DRIFT_ACTIONS)}')


@dataclasses.dataclass(frozen=True)
class TransformSettings:
    """The Transform component's options that are the pipeline's to choose.

    Attributes:
      statistics: Transform also runs TFDV over its input and output: pre-transform statistics
        and schema (the same as the ExampleGen's), post-transform statistics and schema, and the
        transformed features' anomalies against them. Off by default: the ExampleGen's statistics
        and ExampleValidator already check the raw data, nothing downstream reads these five
        artifacts, and they cost a full pass over the data (`asynctrain bench pipeline`).
    """

    statistics: bool = False


@dataclasses.dataclass(frozen=True)
class ExampleBatcherSettings:
    """The ExampleBatcher's options that are the pipeline's to choose.

    Attributes:
      num_files: Files (shards) per split. An example goes to the file a seeded hash of its bytes
        picks, so the same data and seed write the same files on any Beam runner. 0 (the
        default): one file per 4 MB of the split's GZIP examples, at least 8, so that a
        distributed runner writes them in parallel and a worker (or the one process of a
        direct runner) holds one file's examples in memory at a time. A fixed count bounds the
        files, not the memory.
    """

    num_files: int = 0

    def __post_init__(self):
        if self.num_files < 0:
            yaml_config.fail(
                'example_batcher.num_files',
                f'expected an integer >= 0 (0: by size), got {self.num_files}',
            )


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything `create_pipeline` needs.

    Attributes:
      pipeline_name: Name in ML Metadata and Kubeflow.
      data: Directory of CSV input, or `bundled:chicago_taxi` for the sample that ships with TFX.
      work_dir: Run directory: pipeline root, ML Metadata (SQLite), serving directory.
      dataset: A bundled dataset's name (a folder of the package data `asynctrain/schemas/`), or
        the path of a folder, holding `schema.pbtxt` and `features.yaml`.
      preprocessing_module: Optional path to the user's own module defining `preprocessing_fn`;
        by default the function is generated from `features.yaml`.
      label: The label column and task; unset, `features.yaml` defines the label.
      example_gen: CSV reading and splitting.
      trainer: The Trainer's model, training, input pipeline and distribution settings.
      evaluation: The blessing rule.
      transform: The Transform component's options.
      example_batcher: The ExampleBatcher's options.
      retraining: What a daily run carries over from the previous run.
      drift: Each run's data compared with the served model's training data.
      beam_pipeline_args: Passed to every Beam-based component untouched (runner, workers).
      enable_cache: Reuse a component's outputs when its inputs and settings are unchanged.
      date: One day's cycle, `YYYY-MM-DD`: ExampleGen reads that day's span only (the input
        pattern must hold `{YYYY}`, `{MM}` and `{DD}`). Unset: the latest span.
    """

    pipeline_name: str = 'asynctrain-taxi'
    data: str = BUNDLED_DATA
    work_dir: str = 'runs/local'
    dataset: str = 'taxi'
    preprocessing_module: str | None = None
    label: LabelSettings | None = None
    example_gen: ExampleGenSettings = dataclasses.field(default_factory=ExampleGenSettings)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
    evaluation: EvaluationSettings = dataclasses.field(default_factory=EvaluationSettings)
    transform: TransformSettings = dataclasses.field(default_factory=TransformSettings)
    example_batcher: ExampleBatcherSettings = dataclasses.field(
        default_factory=ExampleBatcherSettings
    )
    retraining: RetrainingSettings = dataclasses.field(default_factory=RetrainingSettings)
    drift: DriftSettings = dataclasses.field(default_factory=DriftSettings)
    # Empty: Beam's DirectRunner in memory, one worker. Any argument at all makes TFX build an sdist
    # of its own source for remote Beam workers in every Beam component (about 3 s and 49 MB
    # left in the temporary directory each); DirectRunner workers never read it.
    beam_pipeline_args: tuple[str, ...] = ()
    enable_cache: bool = True
    date: str | None = None

    def __post_init__(self):
        for field, value in (
            ('trainer.training.checkpoint_dir', self.trainer.training.checkpoint_dir),
            ('trainer.input.cache_dir', self.trainer.input.cache_dir),
        ):
            if value and not _inside(value, self.work_dir):
                yaml_config.fail(
                    field,
                    f'{value!r} is outside the work directory {self.work_dir!r}; '
                    'give a path under it',
                )
        if self.date is not None:
            try:
                datetime.date.fromisoformat(self.date)
            except ValueError:
                yaml_config.fail('date', f'expected YYYY-MM-DD, got {self.date!r}')
            if not all(s in self.example_gen.input_pattern for s in ('{YYYY}', '{MM}', '{DD}')):
                yaml_config.fail(
                    'example_gen.input_pattern',
                    'a run for one date needs {YYYY}, {MM} and {DD} in the pattern, got '
                    f'{self.example_gen.input_pattern!r}',
                )

    @property
    def data_dir(self) -> str:
        return bundled_data_dir() if self.data == BUNDLED_DATA else _absolute(self.data)

    @property
    def dataset_dir(self) -> pathlib.Path:
        path = pathlib.Path(self.dataset)
        return (
            path
            if path.is_absolute() or path.exists() and '/' in self.dataset
            else BUNDLED_SCHEMAS / self.dataset
        )

    @property
    def schema_path(self) -> str:
        return str(self.dataset_dir / 'schema.pbtxt')

    @property
    def feature_config_path(self) -> str:
        return str(self.dataset_dir / 'features.yaml')

    @property
    def pipeline_root(self) -> str:
        return os.path.join(_absolute(self.work_dir), 'pipeline_root')

    @property
    def metadata_path(self) -> str:
        return os.path.join(_absolute(self.work_dir), 'metadata.sqlite')

    @property
    def serving_dir(self) -> str:
        return os.path.join(_absolute(self.work_dir), 'serving_model')


def load_config(path: str | None = None, **overrides: Any) -> PipelineConfig:
    """Reads the YAML config at `path` and applies command-line overrides (unset ones ignored)."""
    data = yaml_config.read_mapping(path, 'config') if path else {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return from_dict(PipelineConfig, data)
    except ConfigError as e:
        raise ConfigError(f'{path}: {e}' if path else str(e)) from None

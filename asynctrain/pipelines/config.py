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
import re
from typing import Any

from asynctrain.components.shared import yaml_config
from asynctrain.components.shared.tasks import REGRESSION_LOSSES, TASK_TYPES
from asynctrain.components.trainer.config import TrainerConfig
from asynctrain.pipelines import work_dir_layout
from asynctrain.pipelines.evaluation_settings import EvaluationSettings

# The bundled datasets' schema and feature configs, package data of the installed `asynctrain`
# (a folder on disk: the package is never imported from a zip).
BUNDLED_SCHEMAS = pathlib.Path(str(importlib.resources.files('asynctrain') / 'schemas'))
BUNDLED_DATA = 'bundled:chicago_taxi'
# A pipeline name: a folder name on any filesystem, within TFX's 63 characters.
PIPELINE_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,62}')


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
      pipeline_name: Name in ML Metadata and Kubeflow, and the folder of the work directory
        that holds this pipeline's state: letters, digits, `-`, `_` and `.`, starting with a
        letter or a digit, at most 63 characters (TFX's limit).
      data: Directory of CSV input, or `bundled:chicago_taxi` for the sample that ships with TFX.
      work_dir: Run directory. Each pipeline keeps its state in a folder of it named after the
        pipeline (`<work_dir>/<pipeline_name>/`): pipeline root, ML Metadata (SQLite), push
        destination (`serving_model/`) and logs. A work directory of asynctrain 0.1's shared
        layout (`metadata.sqlite` at its top) is used as it is, with a notice.
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
    # Empty: Beam's DirectRunner in memory, one worker. Arguments naming another runner make TFX
    # build an sdist of its own source for remote Beam workers in every Beam component (about 3 s
    # and 49 MB left in the temporary directory each); on a direct runner the pipeline's
    # executors leave it out (`components.shared.beam_runner`).
    beam_pipeline_args: tuple[str, ...] = ()
    enable_cache: bool = True
    date: str | None = None

    def __post_init__(self):
        if not PIPELINE_NAME.fullmatch(self.pipeline_name or ''):
            yaml_config.fail(
                'pipeline_name',
                f'got {self.pipeline_name!r}; expected letters, digits, -, _ and ., starting '
                'with a letter or a digit, at most 63 characters (it names the folder of the '
                "pipeline's state in the work directory)",
            )
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
    def state_dir(self) -> str:
        """This pipeline's folder in the work directory, `<work_dir>/<pipeline_name>`: its
        pipeline root, ML Metadata, push destination and logs (`work_dir_layout`)."""
        return work_dir_layout.state_dir(_absolute(self.work_dir), self.pipeline_name)

    @property
    def pipeline_root(self) -> str:
        return os.path.join(self.state_dir, work_dir_layout.PIPELINE_ROOT)

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.state_dir, work_dir_layout.METADATA_FILE)

    @property
    def serving_dir(self) -> str:
        return os.path.join(self.state_dir, work_dir_layout.SERVING_DIR)


def load_config(path: str | None = None, **overrides: Any) -> PipelineConfig:
    """Reads the YAML config at `path` and applies command-line overrides (unset ones ignored)."""
    data = yaml_config.read_mapping(path, 'config') if path else {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return yaml_config.build(PipelineConfig, data)
    except yaml_config.ConfigError as e:
        raise yaml_config.ConfigError(f'{path}: {e}' if path else str(e)) from None

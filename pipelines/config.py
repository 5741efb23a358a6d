"""The pipeline's typed configuration: one frozen dataclass, loaded from YAML and validated once.

`asynctrain run --config FILE` reads a YAML mapping whose keys are the fields below (nested
sections for nested dataclasses). Unknown keys, wrong types and out-of-range values fail before any
work starts, with an error naming the field, e.g. `trainer.training.batch_size: expected int`.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import types
import typing
from typing import Any, Union

import yaml

from components.trainer.config import TrainerConfig

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BUNDLED_DATA = 'bundled:chicago_taxi'


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the field."""


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
    """

    train_buckets: int = 2
    eval_buckets: int = 1
    delimiter: str = ','
    null_markers: tuple[str, ...] = ()
    max_bad_fraction: float = 0.0
    input_pattern: str = '*'

    def __post_init__(self):
        for name in ('train_buckets', 'eval_buckets'):
            if getattr(self, name) < 1:
                raise ConfigError(f'example_gen.{name}: expected an integer >= 1')
        if len(self.delimiter) != 1:
            raise ConfigError(
                f'example_gen.delimiter: expected one character, got {self.delimiter!r}'
            )
        if not 0.0 <= self.max_bad_fraction <= 1.0:
            raise ConfigError('example_gen.max_bad_fraction: expected a number in [0, 1]')


@dataclasses.dataclass(frozen=True)
class EvaluationSettings:
    """The Evaluator's blessing rule.

    Attributes:
      metric: TFMA metric class that gates the push (`AUC` or `BinaryAccuracy`).
      min_value: The model is blessed only if the metric on eval is at least this.
    """

    metric: str = 'AUC'
    min_value: float = 0.6

    def __post_init__(self):
        if self.metric not in ('AUC', 'BinaryAccuracy'):
            raise ConfigError(
                f"evaluation.metric: unsupported metric {self.metric!r}; allowed: ['AUC', 'BinaryAccuracy']"
            )
        if not 0.0 <= self.min_value <= 1.0:
            raise ConfigError('evaluation.min_value: expected a number in [0, 1]')


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


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything `create_pipeline` needs.

    Attributes:
      pipeline_name: Name in ML Metadata and Kubeflow.
      data: Directory of CSV input, or `bundled:chicago_taxi` for the sample that ships with TFX.
      work_dir: Run directory: pipeline root, ML Metadata (SQLite), serving directory.
      dataset: Folder under `schemas/` (or a path) holding `schema.pbtxt` and `features.yaml`.
      preprocessing_module: Optional path to the user's own module defining `preprocessing_fn`;
        by default the function is generated from `features.yaml`.
      example_gen: CSV reading and splitting.
      trainer: The Trainer's model, training, input pipeline and distribution settings.
      evaluation: The blessing rule.
      retraining: What a daily run carries over from the previous run.
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
    example_gen: ExampleGenSettings = dataclasses.field(default_factory=ExampleGenSettings)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
    evaluation: EvaluationSettings = dataclasses.field(default_factory=EvaluationSettings)
    retraining: RetrainingSettings = dataclasses.field(default_factory=RetrainingSettings)
    beam_pipeline_args: tuple[str, ...] = (
        '--direct_running_mode=in_memory',
        '--direct_num_workers=1',
    )
    enable_cache: bool = True
    date: str | None = None

    def __post_init__(self):
        for field, value in (
            ('trainer.training.checkpoint_dir', self.trainer.training.checkpoint_dir),
            ('trainer.input.cache_dir', self.trainer.input.cache_dir),
        ):
            if value and not _inside(value, self.work_dir):
                raise ConfigError(
                    f'{field}: {value!r} is outside the work directory '
                    f'{self.work_dir!r}; give a path under it'
                )
        if self.date is not None:
            try:
                datetime.date.fromisoformat(self.date)
            except ValueError:
                raise ConfigError(f'date: expected YYYY-MM-DD, got {self.date!r}') from None
            if not all(s in self.example_gen.input_pattern for s in ('{YYYY}', '{MM}', '{DD}')):
                raise ConfigError(
                    'example_gen.input_pattern: a run for one date needs {YYYY}, {MM} and {DD} '
                    f'in the pattern, got {self.example_gen.input_pattern!r}'
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
            else REPO_ROOT / 'schemas' / self.dataset
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


def _convert(value: Any, tp: Any, where: str) -> Any:
    """Checks `value` against the annotation `tp`, building nested dataclasses."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(value, inner[0], where)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f'{where}: expected a list, got {type(value).__name__}')
        item = typing.get_args(tp)[0]
        return tuple(_convert(v, item, f'{where}[{i}]') for i, v in enumerate(value))
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f'{where}: {value!r} is not allowed; allowed: {list(allowed)}')
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise ConfigError(f'{where}: expected {tp.__name__}, got {value!r}')
        return value
    return value


def from_dict(cls: type, data: Any, where: str = '') -> Any:
    """Builds dataclass `cls` from a mapping, naming the field of any error."""
    prefix = f'{where}.' if where else ''
    if not isinstance(data, dict):
        raise ConfigError(f'{where or "config"}: expected a mapping, got {type(data).__name__}')
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(f'{prefix}{unknown[0]}: unknown field; allowed: {sorted(fields)}')
    kwargs = {k: _convert(v, hints[k], prefix + k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        message = str(e)
        raise ConfigError(
            message if where and message.startswith(where) else f'{where or "config"}: {message}'
        ) from None


def load_config(path: str | None = None, **overrides: Any) -> PipelineConfig:
    """Reads the YAML config at `path` (safe loader) and applies command-line overrides."""
    data: dict = {}
    if path:
        try:
            with open(path, encoding='utf-8') as f:
                data = yaml.safe_load(f) or {}
        except OSError as e:
            raise ConfigError(f'{path}: cannot read the config: {e.strerror}') from None
        except yaml.YAMLError as e:
            raise ConfigError(f'{path}: not valid YAML: {e}') from None
        except UnicodeDecodeError as e:
            raise ConfigError(f'{path}: not UTF-8 text (byte {e.start}): {e.reason}') from None
        if not isinstance(data, dict):
            raise ConfigError(f'{path}: expected a mapping of config fields at the top level')
    data.update({k: v for k, v in overrides.items() if v is not None})
    return from_dict(PipelineConfig, data)

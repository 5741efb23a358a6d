"""`TrainerConfig`: everything the Trainer can be told, as frozen dataclasses.

It is loaded from YAML (the `trainer:` key of the pipeline config, or that section alone) by the
project's one config loader, `asynctrain.components.shared.yaml_config`, so the fields are plain: str, int, float,
bool, tuples and Optional. Every field has a default; each section validates itself once, on
construction, raising a `yaml_config.ConfigError` that names the field path and the allowed values.
"""

from __future__ import annotations

import dataclasses
import re

from asynctrain.components.shared import yaml_config
from asynctrain.components.shared.tasks import REGRESSION_LOSSES, TASK_TYPES
from asynctrain.components.trainer.stale_gradients_config import StaleGradientsConfig

OPTIMIZERS = ('adagrad', 'adam', 'sgd')
CACHE_MODES = ('none', 'memory', 'file')
CLUSTER_MODES = ('in_process', 'local_processes', 'tf_config', 'tfjob')
PARTITIONERS = ('fixed_shards', 'min_shard_size')
# tf.data.AUTOTUNE, spelled as the plain integer tf.data uses, so the config needs no TensorFlow.
AUTOTUNE = -1

# Optimizers for which scaling the gradient by 1/staleness scales the applied step the same way.
# Adam normalizes the gradient's magnitude away, so the option would do nothing there.
_STALENESS_AWARE_OPTIMIZERS = ('adagrad', 'sgd')


def _fail(path: str, message: str) -> None:
    yaml_config.fail(f'trainer.{path}', message)


def _check_choice(path: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        _fail(path, f'got {value!r}; allowed: {list(allowed)}')


def _check_positive(path: str, value, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(path, f'expected a number, got {value!r}')
    if value < 0 or (value == 0 and not allow_zero):
        _fail(path, f'got {value!r}; allowed: {"values >= 0" if allow_zero else "values > 0"}')


def _check_autotune_or_positive(path: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != AUTOTUNE):
        _fail(path, f'got {value!r}; allowed: {AUTOTUNE} (AUTOTUNE) or an integer >= 1')


def _as_tuple(instance, name: str) -> None:
    # YAML gives lists; a frozen config keeps tuples so it stays hashable and immutable.
    value = getattr(instance, name)
    if isinstance(value, list):
        object.__setattr__(instance, name, tuple(value))


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """What is learned from the label: the task owns the model's head, loss, metrics and serving
    outputs. The pipeline fills it from the label's definition (`features.yaml` or `label:`).

    Attributes:
      type: One of `TASK_TYPES`: `binary` (a 0/1 label; one logit, sigmoid cross-entropy),
        `multiclass` (a class id from Transform's `label_classes` vocabulary; one logit per class,
        softmax cross-entropy) or `regression` (a float label; one output, standardized for
        training and served in the label's own units).
      loss: Regression only, one of `REGRESSION_LOSSES`: mean squared error, Huber, or `msle`,
        the squared error of log(1 + label) (a non-negative label with a long right tail), whose
        predictions are served and scored in the label's units.
      huber_delta: Regression with `loss: huber`: where the loss turns linear, in standard
        deviations of the label.
    """

    type: str = 'binary'
    loss: str = 'mse'
    huber_delta: float = 1.0

    def __post_init__(self):
        _check_choice('task.type', self.type, TASK_TYPES)
        _check_choice('task.loss', self.loss, REGRESSION_LOSSES)
        _check_positive('task.huber_delta', self.huber_delta)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The model: embeddings for categorical features, then a feed-forward tower.

    Attributes:
      hidden_units: Width of each hidden layer, in order.
      embedding_dim: Embedding width for categorical features (each table has int_domain.max + 1
        rows, from the transformed schema).
      scale_embeddings: Narrow small vocabularies: each width becomes
        min(embedding_dim, ceil(6 * rows ** 0.25)).
      dropout: Dropout rate after each hidden layer, in [0, 1).
    """

    hidden_units: tuple[int, ...] = (64, 32)
    embedding_dim: int = 8
    scale_embeddings: bool = False
    dropout: float = 0.0

    def __post_init__(self):
        _as_tuple(self, 'hidden_units')
        if not isinstance(self.hidden_units, tuple) or not all(
            isinstance(u, int) and not isinstance(u, bool) and u > 0 for u in self.hidden_units
        ):
            _fail(
                'model.hidden_units',
                f'got {self.hidden_units!r}; allowed: a list of positive integers',
            )
        _check_positive('model.embedding_dim', self.embedding_dim)
        if not 0 <= self.dropout < 1:
            _fail('model.dropout', f'got {self.dropout!r}; allowed: [0, 1)')


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """The optimization.

    Attributes:
      train_steps: Total optimizer steps (over all workers) to reach; a resumed run continues
        from its checkpoint's step up to this.
      eval_steps: Batches of the eval split evaluated after training; 0 evaluates the whole split.
      batch_size: Examples per step on each worker.
      learning_rate: The optimizer's learning rate.
      optimizer: One of `OPTIMIZERS`.
      steps_per_execution: Steps run inside one scheduled `tf.function` call. The coordinator is
        Python, so scheduling one closure per step would make it the bottleneck.
      checkpoint_interval_steps: Save a checkpoint every this many steps (a crash repeats at most
        this many); 0 saves only at the end.
      summary_interval_steps: Write training summaries about every this many steps.
      gradient_histograms: Histograms of sampled gradients in TensorBoard (norms: always).
      max_checkpoints_to_keep: Checkpoints kept in the run directory.
      checkpoint_dir: Where checkpoints go; empty means `checkpoints/` in the run directory
        (the ModelRun artifact). A rerun pointing at the same directory resumes from its latest
        checkpoint and trains only up to `train_steps`.
      staleness_aware_learning_rate: Scale each update by 1 / max(1, staleness), where staleness is
        the number of updates other workers applied between this step's read of the parameters and
        its own update (Zhang et al., 2016). Only for `sgd` and `adagrad`. Off by default: with
        4 workers, one at a quarter CPU or behind a 20 +/- 20 ms link, -0.0009 and -0.0019 of
        held-out AUC, with 8 workers -0.0006: noise (`asynctrain bench async`, docs/benchmarks.md).
      seed: Seed for weight initialization (data order stays random per worker).
    """

    # Measured on the bundled taxi run (docs/bench_ps.json): a PS step costs about the same at
    # batch 256 or 2048 (remote reads and updates), so 2048 x 500 steps trains on 4x the examples
    # of 256 x 1000 in the same time and AUC; 100 steps per execution: 1.05-1.3x 10's steps/s.
    train_steps: int = 500
    eval_steps: int = 0
    batch_size: int = 2048
    learning_rate: float = 0.05
    optimizer: str = 'adagrad'
    steps_per_execution: int = 100
    checkpoint_interval_steps: int = 500
    summary_interval_steps: int = 100
    gradient_histograms: bool = True
    max_checkpoints_to_keep: int = 3
    checkpoint_dir: str = ''
    staleness_aware_learning_rate: bool = False
    seed: int = 0

    def __post_init__(self):
        _check_positive('training.train_steps', self.train_steps)
        _check_positive('training.eval_steps', self.eval_steps, allow_zero=True)
        _check_positive('training.batch_size', self.batch_size)
        _check_positive('training.learning_rate', self.learning_rate)
        _check_choice('training.optimizer', self.optimizer, OPTIMIZERS)
        _check_positive('training.steps_per_execution', self.steps_per_execution)
        _check_positive(
            'training.checkpoint_interval_steps', self.checkpoint_interval_steps, allow_zero=True
        )
        _check_positive('training.summary_interval_steps', self.summary_interval_steps)
        _check_positive('training.max_checkpoints_to_keep', self.max_checkpoints_to_keep)
        if self.staleness_aware_learning_rate and self.optimizer not in _STALENESS_AWARE_OPTIMIZERS:
            _fail(
                'training.staleness_aware_learning_rate',
                f'needs training.optimizer in {list(_STALENESS_AWARE_OPTIMIZERS)}, '
                f'got {self.optimizer!r}',
            )


@dataclasses.dataclass(frozen=True)
class InputConfig:
    """One worker's tf.data pipeline.

    Attributes:
      interleave_cycle_length: Files read concurrently.
      num_parallel_calls: Parallelism of the interleave and of the per-batch parse;
        -1 is AUTOTUNE.
      shuffle_buffer: Examples in the shuffle buffer; 0 disables shuffling.
      cache: One of `CACHE_MODES`: `none`; `memory` keeps the first epoch's parsed batches in
        memory and replays them, reshuffled, in later epochs (the transformed split must fit in
        memory); `file` keeps them in `cache_dir`. See `data.make_dataset` for the trade-off.
      cache_dir: Directory for `cache: file`; empty means the run directory.
      prefetch: Batches prefetched; -1 is AUTOTUNE.
    """

    interleave_cycle_length: int = 4
    num_parallel_calls: int = AUTOTUNE
    shuffle_buffer: int = 10000
    cache: str = 'none'
    cache_dir: str = ''
    prefetch: int = AUTOTUNE

    def __post_init__(self):
        _check_positive('input.interleave_cycle_length', self.interleave_cycle_length)
        _check_autotune_or_positive('input.num_parallel_calls', self.num_parallel_calls)
        _check_positive('input.shuffle_buffer', self.shuffle_buffer, allow_zero=True)
        _check_choice('input.cache', self.cache, CACHE_MODES)
        _check_autotune_or_positive('input.prefetch', self.prefetch)


@dataclasses.dataclass(frozen=True)
class DistributionConfig:
    """The ParameterServerStrategy cluster and how variables are sharded over it.

    Attributes:
      cluster: One of `CLUSTER_MODES`. `in_process`: worker and parameter-server servers inside
        the trainer process on free loopback ports; `local_processes`: each a separate process on
        127.0.0.1; `tf_config`: the cluster `TF_CONFIG` describes (Kubernetes TFJob, Vertex AI),
        where this process is the task `TF_CONFIG` names; `tfjob`: the executor submits a
        Kubernetes TFJob (see `KubernetesConfig`) whose chief trains in `tf_config` mode, and waits.
      num_workers: Workers for `in_process` and `local_processes` (TF_CONFIG brings its own).
      num_ps: Parameter servers for `in_process` and `local_processes`.
      partitioner: One of `PARTITIONERS`: `fixed_shards` splits each variable into `num_shards`
        along its first axis; `min_shard_size` makes shards of at least `min_shard_bytes`, at most
        `max_shards` of them.
      num_shards: Shards per variable for `fixed_shards`; 0 means one per parameter server.
      min_shard_bytes: Smallest shard for `min_shard_size`.
      max_shards: Most shards per variable for `min_shard_size`; 0 means one per parameter server.
      server_threads: inter-op threads of each in-process or local server; 0 means
        num_workers + 1, which an in-process cluster needs on a small machine not to deadlock.
        In-process servers share one pool of TensorFlow's per process, sized by the process's
        first server: at least 8 threads; a later in-process cluster with more workers than that
        pool can serve is refused.
      startup_timeout_seconds: How long `local_processes` waits for its servers to listen.
      max_restarts: `local_processes` only: how many times the cluster and the coordinator are
        restarted from the last checkpoint after a parameter server or the coordinator fails
        (a lost worker needs no restart); then training fails, naming the last failure.
      failure_grace_seconds: `local_processes` only: how long the coordinator gets to stop by
        itself once a parameter server (or every worker) is gone, before it is killed and the
        attempt counted as failed; bounds a coordinator stuck on a dead server.
    """

    cluster: str = 'in_process'
    num_workers: int = 2
    # One server and whole variables: each shard adds a remote read and update to every step, and
    # the default model's variables total 175 KB (docs/bench_ps.json: 2 servers with every
    # variable split cost 30-45% of the steps/s that whole variables reach).
    num_ps: int = 1
    partitioner: str = 'min_shard_size'
    num_shards: int = 0
    min_shard_bytes: int = 256 << 10
    max_shards: int = 0
    server_threads: int = 0
    startup_timeout_seconds: float = 120.0
    max_restarts: int = 3
    failure_grace_seconds: float = 30.0

    def __post_init__(self):
        _check_choice('distribution.cluster', self.cluster, CLUSTER_MODES)
        _check_positive('distribution.num_workers', self.num_workers)
        _check_positive('distribution.num_ps', self.num_ps)
        _check_choice('distribution.partitioner', self.partitioner, PARTITIONERS)
        _check_positive('distribution.num_shards', self.num_shards, allow_zero=True)
        _check_positive('distribution.min_shard_bytes', self.min_shard_bytes)
        _check_positive('distribution.max_shards', self.max_shards, allow_zero=True)
        _check_positive('distribution.server_threads', self.server_threads, allow_zero=True)
        _check_positive('distribution.startup_timeout_seconds', self.startup_timeout_seconds)
        _check_positive('distribution.max_restarts', self.max_restarts, allow_zero=True)
        _check_positive('distribution.failure_grace_seconds', self.failure_grace_seconds)


# A DNS-1035 label: what Kubernetes accepts as a Service name (at most 63 characters). A job name
# prefix must start one, short enough that `<prefix>-<12-char id>-worker-<i>`, the Service name
# the Training Operator gives each pod, stays within 63 characters.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names
DNS_1035_LABEL = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
MAX_DNS_LABEL_LENGTH = 63
MAX_JOB_NAME_PREFIX = 30
DNS_1123_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')


@dataclasses.dataclass(frozen=True)
class KubernetesConfig:
    """Where and how the `tfjob` cluster mode runs its TFJob; read only when
    `distribution.cluster` is `tfjob`.

    Attributes:
      tfjob_values: The TFJob values file (replica counts, resources, node selectors; the format of
        `kubeflow/tfjob-values.yaml`). A relative path resolves against the installed
        `asynctrain` package, whose data holds the default (`asynctrain/kubeflow/tfjob-values.yaml`);
        an absolute path names, for example, a ConfigMap mounted into the pipeline step's pod.
      namespace: Namespace of the TFJob; empty means the namespace of the pod the executor runs
        in (its service account's, read from the mounted service-account token directory).
      image: Container image of the replicas: the project image, usually the pipeline's own.
        Required in `tfjob` mode, because the executor cannot see which image its pod runs.
      job_name_prefix: Start of the TFJob's name, which ends with an id of the execution; lower-
        case letters, digits and `-`, starting with a letter, at most `MAX_JOB_NAME_PREFIX`.
      timeout_seconds: How long the executor waits for the job before deleting it and failing.
    """

    tfjob_values: str = 'kubeflow/tfjob-values.yaml'
    namespace: str = ''
    image: str = ''
    job_name_prefix: str = 'asynctrain-train'
    timeout_seconds: float = 86400.0

    def __post_init__(self):
        if not isinstance(self.tfjob_values, str) or not self.tfjob_values:
            _fail('kubernetes.tfjob_values', f'expected a file path, got {self.tfjob_values!r}')
        for name in ('namespace', 'image'):
            if not isinstance(getattr(self, name), str):
                _fail(f'kubernetes.{name}', f'expected a string, got {getattr(self, name)!r}')
        if self.namespace and (
            not DNS_1123_LABEL.match(self.namespace) or len(self.namespace) > MAX_DNS_LABEL_LENGTH
        ):
            _fail(
                'kubernetes.namespace',
                f"got {self.namespace!r}; allowed: empty (the pod's own "
                'namespace) or a DNS label (lower-case letters, digits and "-", at most 63)',
            )
        prefix = self.job_name_prefix
        if (
            not isinstance(prefix, str)
            or not DNS_1035_LABEL.match(prefix)
            or len(prefix) > MAX_JOB_NAME_PREFIX
        ):
            _fail(
                'kubernetes.job_name_prefix',
                f'got {prefix!r}; allowed: lower-case letters, '
                'digits and "-", starting with a letter and not ending with "-", at most '
                f'{MAX_JOB_NAME_PREFIX} characters',
            )
        _check_positive('kubernetes.timeout_seconds', self.timeout_seconds)


@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """A `tf.profiler` trace of the workers over a few training steps (see
    `training.profiling`), written under the run directory for TensorBoard's Profile tab.

    Attributes:
      start_step: The global step at which the capture starts.
      num_steps: Global steps captured; 0 (the default) captures nothing.
    """

    start_step: int = 0
    num_steps: int = 0

    def __post_init__(self):
        for name in ('start_step', 'num_steps'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                _fail(f'profile.{name}', f'got {value!r}; allowed: an integer >= 0')

    @property
    def enabled(self) -> bool:
        return self.num_steps > 0


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """The Trainer's configuration (`trainer:` in the pipeline config).

    Attributes:
      model: The model's shape.
      training: Steps, batch size, optimizer, checkpoints.
      input: The per-worker input pipeline.
      distribution: The cluster and variable sharding.
      kubernetes: The TFJob of the `tfjob` cluster mode.
      task: The task: binary, multiclass or regression, and its loss.
      model_module: Path to the user's own model: a Python file defining
        `build_model(features, config)` that returns a tf.keras model from the transformed
        features to the task's logits. Empty: the built-in model (`model`).
      warm_start: Initialize from the base model when the component is given one (and no
        checkpoint is restored).
      profile: A profiler trace of the workers over a few steps; off by default.
      stale_gradients: Top-K sparsification and delay compensation; both off by default.
    """

    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
    input: InputConfig = dataclasses.field(default_factory=InputConfig)
    distribution: DistributionConfig = dataclasses.field(default_factory=DistributionConfig)
    kubernetes: KubernetesConfig = dataclasses.field(default_factory=KubernetesConfig)
    task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
    model_module: str = ''
    warm_start: bool = True
    profile: ProfileConfig = dataclasses.field(default_factory=ProfileConfig)
    stale_gradients: StaleGradientsConfig = dataclasses.field(default_factory=StaleGradientsConfig)

    def __post_init__(self):
        for name, cls in (
            ('model', ModelConfig),
            ('training', TrainingConfig),
            ('input', InputConfig),
            ('distribution', DistributionConfig),
            ('kubernetes', KubernetesConfig),
            ('task', TaskConfig),
            ('profile', ProfileConfig),
            ('stale_gradients', StaleGradientsConfig),
        ):
            if not isinstance(getattr(self, name), cls):
                _fail(name, f'expected a {cls.__name__}, got {type(getattr(self, name)).__name__}')
        if self.distribution.cluster == 'tfjob' and not self.kubernetes.image:
            _fail(
                'kubernetes.image',
                'required when distribution.cluster is tfjob: the container '
                'image the TFJob replicas run (the project image)',
            )
        if self.stale_gradients.top_k_fraction and self.training.optimizer != 'sgd':
            # The k entries are applied as plain SGD (see training.gradient_remedies).
            _fail(
                'stale_gradients.top_k_fraction',
                f"needs training.optimizer in ['sgd'], got {self.training.optimizer!r}",
            )


def in_tf_config_mode(config: TrainerConfig) -> TrainerConfig:
    """The same settings with `distribution.cluster: tf_config`: what a TFJob's chief trains
    with, coordinating the cluster `TF_CONFIG` describes (rather than, in `tfjob` mode,
    submitting another TFJob)."""
    return dataclasses.replace(
        config, distribution=dataclasses.replace(config.distribution, cluster='tf_config')
    )


def to_dict(config: TrainerConfig) -> dict:
    """The config as plain JSON-able data (tuples become lists)."""
    return yaml_config.to_dict(config)


def from_dict(data: dict | None) -> TrainerConfig:
    """The inverse of `to_dict`: a ConfigError names any unknown key or bad value by its path."""
    return yaml_config.build(TrainerConfig, data or {}, 'trainer')


def load(path: str | None) -> TrainerConfig:
    """The TrainerConfig in a YAML file: a pipeline config's `trainer:` section, or that section
    alone; defaults without a file. Read through tf.io.gfile when TensorFlow is loaded, so that a
    replica reads the config its executor wrote to the pipeline's storage (gs://, s3://)."""
    if not path:
        return TrainerConfig()
    data = yaml_config.read_mapping(path, 'trainer config', section='trainer')
    try:
        return from_dict(data)
    except yaml_config.ConfigError as e:
        raise yaml_config.ConfigError(f'{path}: {e}') from None

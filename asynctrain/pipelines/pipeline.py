"""`create_pipeline(config, dataset)`: the one place where asynctrain's components are wired
together, from a config and its dataset already loaded and checked at the edge
(`asynctrain.pipelines.dataset.load`). It is pure: it reads no file, touches no network and runs
nothing. The runners (local, Kubeflow) load the dataset and add paths, metadata and runner
settings; the Evaluator's TFMA config comes from `tfma_config`.

    ExampleGen (examples, statistics, parquet_examples) -> ExampleValidator
         |          ImportSchemaGen --^    |
         |                |    +-> DriftValidator (today's statistics against the served
         |                |    |        |           model's training data; `stop`: before
         |                |    |        v           Transform, `no_push`: via the Evaluator)
         +-----> Transform <---------------+
         |           |         |
         |     ExampleBatcher  |
         |           |         |
         +-> [LatestBlessedModel] -> Trainer -> Evaluator -> Pusher
             (warm start, baseline and drift, read from the push destination)
"""

from __future__ import annotations

import dataclasses
import datetime

# TFX's components, DSL and protos from their own modules, not `tfx.v1`: that also imports the
# Vertex AI client (`google.cloud.aiplatform`) and every extension, seconds of start-up that a
# local run never uses.
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.pusher.component import Pusher
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_artifact_strategy import LatestArtifactStrategy
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, range_config_pb2
from tfx.types import standard_artifacts
from tfx.types.channel import Channel

from asynctrain.components.drift_validator.component import DriftValidator
from asynctrain.components.evaluator.component import Evaluator
from asynctrain.components.example_batcher.component import ExampleBatcher
from asynctrain.components.example_gen.component import CsvExampleGen
from asynctrain.components.latest_blessed_model.component import LatestBlessedModel
from asynctrain.components.trainer.component import Trainer
from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing
from asynctrain.components.transform.component import Transform
from asynctrain.pipelines.config import PipelineConfig
from asynctrain.pipelines.dataset import Dataset
from asynctrain.pipelines.tfma_config import eval_config

# Node id of the latest blessed model (warm start and the Evaluator's baseline).
LATEST_BLESSED_MODEL = 'latest_blessed_model'
# Node id of the analyzer-cache resolver, the one node that needs ML Metadata (local runs only).
LATEST_TRANSFORM_CACHE = 'latest_transform_cache'

# Name of the generated preprocessing_fn, imported by path inside the Transform executor.
PREPROCESSING_FN = 'asynctrain.components.transform.preprocessing.preprocessing_fn'


def _drift_validator(
    config: PipelineConfig,
    statistics: Channel,
    schema_gen: ImportSchemaGen,
    latest_blessed_model: LatestBlessedModel,
) -> DriftValidator:
    """Today's train statistics against those the latest pushed model was trained on (its
    settings checked by `dataset.load`)."""
    settings = config.drift
    return DriftValidator(
        statistics=statistics,
        schema=schema_gen.outputs['schema'],
        baseline_model=latest_blessed_model.outputs['model'],
        numeric_threshold=settings.numeric_threshold,
        categorical_threshold=settings.categorical_threshold,
        feature_thresholds=settings.features,
        action=settings.action,
        accepted_features=settings.accept,
    )


def output_config(config: PipelineConfig) -> example_gen_pb2.Output:
    """Hash-bucket train/eval split, as stock ExampleGen expresses it."""
    settings = config.example_gen
    return example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(
                    name='train', hash_buckets=settings.train_buckets
                ),
                example_gen_pb2.SplitConfig.Split(name='eval', hash_buckets=settings.eval_buckets),
            ]
        )
    )


def input_config(config: PipelineConfig) -> example_gen_pb2.Input:
    return example_gen_pb2.Input(
        splits=[
            example_gen_pb2.Input.Split(
                name='single_split', pattern=config.example_gen.input_pattern
            )
        ]
    )


def range_config(config: PipelineConfig) -> range_config_pb2.RangeConfig | None:
    """The span of `config.date`, or None to let ExampleGen take the latest span."""
    if config.date is None:
        return None
    day = datetime.date.fromisoformat(config.date)
    span = example_gen_utils.date_to_span_number(day.year, day.month, day.day)
    return range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=span, end_span_number=span)
    )


@dataclasses.dataclass(frozen=True)
class _Retraining:
    """What a run reads from earlier runs, each opt-in (`retraining`, `evaluation.baseline`,
    `drift`), as inputs: they take part in TFX's cache key.

    Attributes:
      nodes: The nodes that read them, in pipeline order.
      analyzer_cache: The latest Transform cache, or None.
      base_model: The model to warm-start from, or None.
      baseline_model: The Evaluator's baseline, or None.
      before_transform: Nodes Transform waits for: the drift check with `drift.action: stop`,
        so that a drifted day spares the run's work.
      drift_anomalies: With `drift.action: no_push`, the drift check's anomalies, which withhold
        the Evaluator's blessing; else None.
    """

    nodes: tuple = ()
    analyzer_cache: Channel | None = None
    base_model: Channel | None = None
    baseline_model: Channel | None = None
    before_transform: tuple = ()
    drift_anomalies: Channel | None = None


def _retraining(
    config: PipelineConfig,
    dataset: Dataset,
    example_gen: CsvExampleGen,
    schema_gen: ImportSchemaGen,
) -> _Retraining:
    """The retraining inputs `config` asks for.

    The latest blessed model is read from the push destination (`LatestBlessedModel`), the same
    way on every orchestrator: open-source KFP runs no resolver tasks. The analyzer cache keeps
    MLMD's resolver (local runs only; `asynctrain compile` refuses it, see kubeflow_runner).
    """
    nodes = []
    analyzer_cache = None
    if config.retraining.analyzer_cache:
        latest_cache = Resolver(
            strategy_class=LatestArtifactStrategy,
            cache=Channel(type=standard_artifacts.TransformCache),
        ).with_id(LATEST_TRANSFORM_CACHE)
        nodes.append(latest_cache)
        analyzer_cache = latest_cache.outputs['cache']
    reads_pushed = (
        config.retraining.warm_start
        or config.evaluation.baseline == 'latest_blessed'
        or config.drift.enabled
    )
    if not reads_pushed:
        return _Retraining(nodes=tuple(nodes), analyzer_cache=analyzer_cache)
    latest = LatestBlessedModel(
        examples=example_gen.outputs['examples'],
        push_destination=config.serving_dir,
        model_identity=dataset.identity,
    ).with_id(LATEST_BLESSED_MODEL)
    nodes.append(latest)
    before_transform, drift_anomalies = (), None
    if config.drift.enabled:
        drift_validator = _drift_validator(
            config, example_gen.outputs['statistics'], schema_gen, latest
        )
        nodes.append(drift_validator)
        if config.drift.action == 'stop':
            before_transform = (drift_validator,)
        else:
            drift_anomalies = drift_validator.outputs['anomalies']
    return _Retraining(
        nodes=tuple(nodes),
        analyzer_cache=analyzer_cache,
        base_model=latest.outputs['model'] if config.retraining.warm_start else None,
        baseline_model=(
            latest.outputs['model'] if config.evaluation.baseline == 'latest_blessed' else None
        ),
        before_transform=before_transform,
        drift_anomalies=drift_anomalies,
    )


def _example_gen(config: PipelineConfig, label: fc.LabelSpec) -> CsvExampleGen:
    settings = config.example_gen
    return CsvExampleGen(
        input_base=config.data_dir,
        schema_path=config.schema_path,
        input_config=input_config(config),
        output_config=output_config(config),
        range_config=range_config(config),
        delimiter=settings.delimiter,
        null_markers=settings.null_markers,
        max_bad_fraction=settings.max_bad_fraction,
        label_column=label.column if isinstance(label, fc.ColumnLabel) else None,
        chunk_bytes=int(settings.chunk_mb * 2**20),
        # What Transform analyzes (below).
        parquet_copy=True,
    )


def _preprocessing(config: PipelineConfig, dataset: Dataset) -> dict:
    """Transform's preprocessing arguments: the user's module, whose preprocessing_fn may take
    `custom_config` to read the label from it, or ours over the feature config."""
    if config.preprocessing_module:
        return {
            'module_file': config.preprocessing_module,
            'custom_config': preprocessing.label_to_custom_config(dataset.label),
        }
    return {
        'preprocessing_fn': PREPROCESSING_FN,
        'custom_config': preprocessing.config_to_custom_config(
            dataclasses.replace(dataset.features, label=dataset.label)
        ),
    }


def create_pipeline(
    config: PipelineConfig,
    dataset: Dataset,
    *,
    pipeline_root: str | None = None,
    metadata_connection_config=None,
) -> tfx_pipeline.Pipeline:
    """Wires ExampleGen -> ... -> Pusher for `config` and its `dataset` (`dataset.load(config)`,
    which read and checked the files); reads nothing itself."""
    label = dataset.label
    example_gen = _example_gen(config, label)
    # The ExampleGen computes each split's statistics as it encodes the rows: what StatisticsGen
    # would compute by reading every example back (`asynctrain.components.example_gen.split_statistics`).
    statistics = example_gen.outputs['statistics']
    schema_gen = ImportSchemaGen(schema_file=config.schema_path)
    example_validator = ExampleValidator(statistics=statistics, schema=schema_gen.outputs['schema'])
    retraining = _retraining(config, dataset, example_gen, schema_gen)

    transform = Transform(
        # The same rows as `examples`, as Parquet: read a row group at a time in C++ instead of
        # decoding every tf.Example in Python, which was a third of the analysis (profiled at a
        # million taxi rows; `asynctrain bench preprocess`).
        examples=example_gen.outputs['parquet_examples'],
        schema=schema_gen.outputs['schema'],
        analyzer_cache=retraining.analyzer_cache,
        # Without the cache, none is read or written: a quarter of Transform's time on a small
        # day goes to tracing and writing it (profiled on 300 taxi rows: 91 s -> 68 s).
        disable_analyzer_cache=not config.retraining.analyzer_cache,
        disable_statistics=not config.transform.statistics,
        # Transform analyzes only; the ExampleBatcher applies the graph (below). Materializing
        # would transform, encode and write every split one example at a time, to be read back.
        materialize=False,
        **_preprocessing(config, dataset),
    )
    for node in retraining.before_transform:
        transform.add_upstream_node(node)

    # The raw examples transformed by the graph in large batches and written once, shuffled and
    # pre-batched: the Trainer parses a record per step instead of one per example (`asynctrain
    # bench input`).
    example_batcher = ExampleBatcher(
        examples=example_gen.outputs['examples'],
        transform_graph=transform.outputs['transform_graph'],
        num_files=config.example_batcher.num_files,
        transform=True,
    )
    trainer = Trainer(
        examples=example_batcher.outputs['batched_examples'],
        transform_graph=transform.outputs['transform_graph'],
        schema=schema_gen.outputs['schema'],
        base_model=retraining.base_model,
        statistics=statistics,
        config=dataclasses.replace(
            config.trainer,
            task=dataclasses.replace(config.trainer.task, type=label.task, loss=label.loss),
        ),
        label_key=label.key,
        model_identity=dataset.identity,
    )
    evaluator = Evaluator(
        examples=example_gen.outputs['examples'],
        model=trainer.outputs['model'],
        baseline_model=retraining.baseline_model,
        eval_config=eval_config(config, label),
        drift_anomalies=retraining.drift_anomalies,
    )
    pusher = Pusher(
        model=trainer.outputs['model'],
        model_blessing=evaluator.outputs['blessing'],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=config.serving_dir)
        ),
    )

    return tfx_pipeline.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=pipeline_root or config.pipeline_root,
        components=[
            example_gen,
            schema_gen,
            example_validator,
            *retraining.nodes,
            transform,
            example_batcher,
            trainer,
            evaluator,
            pusher,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(config.beam_pipeline_args),
    )

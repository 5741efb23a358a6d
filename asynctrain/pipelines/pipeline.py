"""`create_pipeline(config)`: the one place where asynctrain's components are wired together.

It is pure: it reads the schema and feature config (to fail early on a bad one) but touches no
network and runs nothing. The runners (local, Kubeflow) add paths, metadata and runner settings.

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
import json

import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import config_pb2

# TFX's components, DSL and protos from their own modules, not `tfx.v1`: that also imports the
# Vertex AI client (`google.cloud.aiplatform`) and every extension, seconds of start-up that a
# local run never uses.
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.pusher.component import Pusher
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.components.transform.component import Transform
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
from asynctrain.components.trainer.training.export import (
    PREDICTIONS,
    PROBABILITIES,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
)
from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing
from asynctrain.pipelines import dataset_spec
from asynctrain.pipelines.config import PipelineConfig
from asynctrain.pipelines.evaluation_settings import (
    CONFIDENCE_INTERVAL_METHODS,
    UPPER_BOUND_METRICS,
    EvaluationSettings,
)

# Node id of the latest blessed model (warm start and the Evaluator's baseline).
LATEST_BLESSED_MODEL = 'latest_blessed_model'
# Node id of the analyzer-cache resolver, the one node that needs ML Metadata (local runs only).
LATEST_TRANSFORM_CACHE = 'latest_transform_cache'

# Name of the generated preprocessing_fn, imported by path inside the Transform executor.
PREPROCESSING_FN = 'asynctrain.components.transform.preprocessing.preprocessing_fn'

# Each blessing metric of `evaluation.metric`: the TFMA (or Keras) metric class that computes it
# and the name its value has in the evaluation, which the run summary prints.
TFMA_METRICS = {
    'AUC': ('AUC', 'auc'),
    'BinaryAccuracy': ('BinaryAccuracy', 'binary_accuracy'),
    'Accuracy': ('SparseCategoricalAccuracy', 'accuracy'),
    'RMSE': ('RootMeanSquaredError', 'rmse'),
    'MSE': ('MeanSquaredError', 'mse'),
}
# Metrics reported beside the blessing one, per task (not gated).
# TFMA's plots per task (`evaluation.plots`): none it computes for regression.
_PLOTS = {
    fc.BINARY: ('CalibrationPlot', 'ConfusionMatrixPlot'),
    fc.MULTICLASS: ('MultiClassConfusionMatrixPlot',),
    fc.REGRESSION: (),
}
_REPORTED = {fc.BINARY: ('AUC', 'BinaryAccuracy'), fc.MULTICLASS: (), fc.REGRESSION: ('MSE',)}


def _drift_validator(
    config: PipelineConfig,
    statistics: Channel,
    schema_gen: ImportSchemaGen,
    latest_blessed_model: LatestBlessedModel,
) -> DriftValidator:
    """Today's train statistics against those the latest pushed model was trained on."""
    dataset_spec.check_drift_settings(config)
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


def _metric_config(
    metric: str, threshold: config_pb2.MetricThreshold | None = None
) -> config_pb2.MetricConfig:
    class_name, name = TFMA_METRICS[metric]
    return config_pb2.MetricConfig(
        class_name=class_name, config=json.dumps({'name': name}), threshold=threshold
    )


def _options(settings: EvaluationSettings) -> config_pb2.Options | None:
    """TFMA's options for the confidence intervals and `min_slice_size`; the jackknife, TFMA's
    default method, is left unset so that the eval_config (and the Evaluator's cache key) stays
    as it was before the choice existed."""
    if not settings.confidence_intervals and not settings.min_slice_size:
        return None
    options = config_pb2.Options()
    if settings.min_slice_size:
        options.min_slice_size.value = settings.min_slice_size
    if not settings.confidence_intervals:
        return options
    options.compute_confidence_intervals.value = True
    method = CONFIDENCE_INTERVAL_METHODS[settings.confidence_interval_method]
    if method != 'JACKKNIFE':
        options.confidence_intervals.method = getattr(config_pb2.ConfidenceIntervalOptions, method)
    return options


def eval_config(config: PipelineConfig, label: fc.LabelSpec) -> config_pb2.EvalConfig:
    """Evaluates on raw examples: `transform_features` derives the label, `serving_default` scores.

    The blessing metric follows the label's task (AUC, accuracy, RMSE, or `evaluation.metric`)
    with its bound: at least `min_value` for AUC and accuracies, at most `max_value` for RMSE and
    MSE; with `baseline: latest_blessed`, also no worse than the last blessed model by more than
    `max_regression` (TFX drops that comparison when there is no blessed model yet). With
    `evaluation.slices`, each is a `slicing_specs` entry, and `slice_min_value`/`slice_max_value`
    and `slice_max_regression` gate each of their slices (`per_slice_thresholds`). With
    `evaluation.example_weight`, every metric is computed weighted and unweighted; with
    `evaluation.confidence_intervals`, with TFMA's jackknife or Poisson bootstrap intervals
    (`confidence_interval_method`); with `evaluation.plots`, TFMA's calibration and
    confusion-matrix plots (binary) or its multi-class confusion matrix.
    """
    settings = config.evaluation
    metric = settings.metric_for(label.task)
    slice_bound = settings.slice_bound_for(metric)
    upper = metric in UPPER_BOUND_METRICS
    threshold = _threshold(upper, settings.max_value if upper else settings.min_value)
    if settings.baseline == 'latest_blessed':
        threshold.change_threshold.CopyFrom(_change_threshold(upper, settings.max_regression))
    slicing_specs = [config_pb2.SlicingSpec(feature_keys=list(keys)) for keys in settings.slices]
    if slicing_specs:
        # TFMA checks a metric's `threshold` on every slice (metrics_validator.validate_metrics),
        # so the whole-split gate is a per-slice threshold of the overall slice alone.
        gates = [
            config_pb2.PerSliceMetricThreshold(
                slicing_specs=[config_pb2.SlicingSpec()], threshold=threshold
            )
        ]
        if slice_bound is not None or settings.slice_max_regression is not None:
            slice_threshold = (
                _threshold(upper, slice_bound)
                if slice_bound is not None
                else config_pb2.MetricThreshold()
            )
            if settings.slice_max_regression is not None:
                slice_threshold.change_threshold.CopyFrom(
                    _change_threshold(upper, settings.slice_max_regression)
                )
            gates.append(
                config_pb2.PerSliceMetricThreshold(
                    slicing_specs=slicing_specs, threshold=slice_threshold
                )
            )
        gated = _metric_config(metric)
        gated.per_slice_thresholds.extend(gates)
    else:
        gated = _metric_config(metric, threshold)
    reported = [m for m in _REPORTED[label.task] if m != metric]
    return config_pb2.EvalConfig(
        model_specs=[
            config_pb2.ModelSpec(
                signature_name=SERVING_SIGNATURE,
                label_key=label.key,
                prediction_key=PREDICTIONS if label.task == fc.REGRESSION else PROBABILITIES,
                preprocessing_function_names=[TRANSFORM_SIGNATURE],
                example_weight_key=settings.example_weight,
            )
        ],
        slicing_specs=[config_pb2.SlicingSpec(), *slicing_specs],
        options=_options(settings),
        metrics_specs=[
            config_pb2.MetricsSpec(
                example_weights=config_pb2.ExampleWeightOptions(weighted=True, unweighted=True)
                if settings.example_weight
                else None,
                metrics=[
                    config_pb2.MetricConfig(class_name='ExampleCount'),
                    *(_metric_config(m) for m in reported),
                    gated,
                    *(
                        config_pb2.MetricConfig(class_name=name)
                        for name in (_PLOTS[label.task] if settings.plots else ())
                    ),
                ],
            )
        ],
    )


def _threshold(upper: bool, bound: float | None) -> config_pb2.MetricThreshold:
    return config_pb2.MetricThreshold(
        value_threshold=config_pb2.GenericValueThreshold(
            upper_bound={'value': bound} if upper else None,
            lower_bound=None if upper else {'value': bound},
        )
    )


def _change_threshold(upper: bool, max_regression: float) -> config_pb2.GenericChangeThreshold:
    return config_pb2.GenericChangeThreshold(
        direction=tfma.MetricDirection.LOWER_IS_BETTER
        if upper
        else tfma.MetricDirection.HIGHER_IS_BETTER,
        absolute={'value': max_regression if upper else -max_regression},
    )


def create_pipeline(
    config: PipelineConfig,
    *,
    pipeline_root: str | None = None,
    metadata_connection_config=None,
) -> tfx_pipeline.Pipeline:
    """Wires ExampleGen -> ... -> Pusher for `config`. Raises ConfigError-like errors on bad input."""
    with_module = bool(config.preprocessing_module)
    features = fc.load_feature_config(
        config.feature_config_path, config.schema_path, with_module=with_module
    )
    label = dataset_spec.resolve_label(config, features)
    identity = dataset_spec.model_identity(config, label)

    example_gen = CsvExampleGen(
        input_base=config.data_dir,
        schema_path=config.schema_path,
        input_config=input_config(config),
        output_config=output_config(config),
        range_config=range_config(config),
        delimiter=config.example_gen.delimiter,
        null_markers=config.example_gen.null_markers,
        max_bad_fraction=config.example_gen.max_bad_fraction,
        label_column=label.column if isinstance(label, fc.ColumnLabel) else None,
        chunk_bytes=int(config.example_gen.chunk_mb * 2**20),
        # What Transform analyzes (below).
        parquet_copy=True,
    )
    # The ExampleGen computes each split's statistics as it encodes the rows: what StatisticsGen
    # would compute by reading every example back (`asynctrain.components.example_gen.split_statistics`).
    statistics = example_gen.outputs['statistics']
    schema_gen = ImportSchemaGen(schema_file=config.schema_path)
    example_validator = ExampleValidator(statistics=statistics, schema=schema_gen.outputs['schema'])

    if with_module:
        # The module's preprocessing_fn may take `custom_config` to read the label from it.
        transform_fn = {
            'module_file': config.preprocessing_module,
            'custom_config': preprocessing.label_to_custom_config(label),
        }
    else:
        transform_fn = {
            'preprocessing_fn': PREPROCESSING_FN,
            'custom_config': preprocessing.config_to_custom_config(
                dataclasses.replace(features, label=label)
            ),
        }
    # Retraining inputs: the previous run's analyzer cache and the latest blessed model. They are
    # inputs, so they take part in TFX's cache key. Hence they are opt-in (config.retraining,
    # evaluation.baseline).
    # The latest blessed model is read from the push destination (`LatestBlessedModel`), the same
    # way on every orchestrator: open-source KFP runs no resolver tasks. The analyzer cache keeps
    # MLMD's resolver (local runs only; `asynctrain compile` refuses it, see kubeflow_runner).
    retraining_nodes = []
    analyzer_cache = base_model = baseline_model = None
    if config.retraining.analyzer_cache:
        latest_cache = Resolver(
            strategy_class=LatestArtifactStrategy,
            cache=Channel(type=standard_artifacts.TransformCache),
        ).with_id(LATEST_TRANSFORM_CACHE)
        retraining_nodes.append(latest_cache)
        analyzer_cache = latest_cache.outputs['cache']
    drift_validator = None
    if (
        config.retraining.warm_start
        or config.evaluation.baseline == 'latest_blessed'
        or config.drift.enabled
    ):
        latest_blessed_model = LatestBlessedModel(
            examples=example_gen.outputs['examples'],
            push_destination=config.serving_dir,
            model_identity=identity,
        ).with_id(LATEST_BLESSED_MODEL)
        retraining_nodes.append(latest_blessed_model)
        if config.retraining.warm_start:
            base_model = latest_blessed_model.outputs['model']
        if config.evaluation.baseline == 'latest_blessed':
            baseline_model = latest_blessed_model.outputs['model']
        if config.drift.enabled:
            drift_validator = _drift_validator(config, statistics, schema_gen, latest_blessed_model)
            retraining_nodes.append(drift_validator)

    transform = Transform(
        # The same rows as `examples`, as Parquet: read a row group at a time in C++ instead of
        # decoding every tf.Example in Python, which was a third of the analysis (profiled at a
        # million taxi rows; `asynctrain bench preprocess`).
        examples=example_gen.outputs['parquet_examples'],
        schema=schema_gen.outputs['schema'],
        analyzer_cache=analyzer_cache,
        # Without the cache, none is read or written: a quarter of Transform's time on a small
        # day goes to tracing and writing it (profiled on 300 taxi rows: 91 s -> 68 s).
        disable_analyzer_cache=not config.retraining.analyzer_cache,
        disable_statistics=not config.transform.statistics,
        # Transform analyzes only; the ExampleBatcher applies the graph (below). Materializing
        # would transform, encode and write every split one example at a time, to be read back.
        materialize=False,
        **transform_fn,
    )
    if drift_validator is not None and config.drift.action == 'stop':
        # Stopping before Transform spares the whole run's work on a day that will not be used.
        transform.add_upstream_node(drift_validator)

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
        base_model=base_model,
        statistics=statistics,
        config=dataclasses.replace(
            config.trainer,
            task=dataclasses.replace(config.trainer.task, type=label.task, loss=label.loss),
        ),
        label_key=label.key,
        model_identity=identity,
    )

    evaluator = Evaluator(
        examples=example_gen.outputs['examples'],
        model=trainer.outputs['model'],
        baseline_model=baseline_model,
        eval_config=eval_config(config, label),
        drift_anomalies=(
            drift_validator.outputs['anomalies']
            if drift_validator is not None and config.drift.action == 'no_push'
            else None
        ),
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
            *retraining_nodes,
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

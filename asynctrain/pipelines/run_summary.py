"""What a pipeline run produced, read back from ML Metadata and the artifacts themselves.

Rows read/written/rejected come from the examples artifact's properties, the eval metric (the
one the blessing is gated on, which follows the task: AUC, accuracy, RMSE, ...) and the blessing
from the Evaluator's outputs, the training throughput from the Trainer's report, and the
pushed model's path from the Pusher's artifact.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from typing import Any

from ml_metadata.proto import metadata_store_pb2
from tfx.orchestration import metadata

from asynctrain.components.latest_blessed_model.spec import (
    PASSED_OVER_PROPERTY,
    PUSHED_MODEL_PROPERTY,
)
from asynctrain.components.shared import drift_properties
from asynctrain.components.trainer.training.run_files import REPORT_FILE
from asynctrain.pipelines.config import PipelineConfig

# Properties our ExampleGen records on the examples artifact.
ROW_COUNT_PROPERTIES = ('rows_read', 'rows_written', 'rows_rejected')
RESOLVER_TYPE = 'tfx.dsl.components.common.resolver.Resolver'
# DriftValidator's node id (its class name, as create_pipeline leaves it).
DRIFT_VALIDATOR = 'DriftValidator'
# LatestBlessedModel's node id (`pipeline.LATEST_BLESSED_MODEL`).
LATEST_BLESSED_MODEL = 'latest_blessed_model'


def rows_text(rows: dict) -> str:
    """ExampleGen's row counts, those recorded, in the order read, written, rejected:
    `read 15002, written 15002 (train 10001, eval 5001), rejected 0`; the written rows per
    split where `rows_written_per_split` holds them (the progress line's counts)."""
    parts = []
    for key in ROW_COUNT_PROPERTIES:
        if key in rows:
            part = f'{key.removeprefix("rows_")} {rows[key]}'
            splits = rows.get('rows_written_per_split') if key == 'rows_written' else None
            if splits:
                part += ' (' + ', '.join(f'{k} {v}' for k, v in splits.items()) + ')'
            parts.append(part)
    return ', '.join(parts)


@dataclasses.dataclass
class RunSummary:
    """One run's results.

    Attributes:
      executed: Component ids that ran in this run (resolver nodes are not components).
      cached: Component ids whose outputs were reused from an earlier run.
      rows: Row counts from ExampleGen (read, written, rejected), where recorded.
      eval_metric: (name, value) of the metric the blessing is gated on, on the eval split: the
        name the eval config gave it (`auc`, `accuracy`, `rmse`, ...).
      blessed: Whether the Evaluator blessed the model.
      training: The Trainer's report (examples/s, steps, ...), where recorded.
      pushed_model: Directory of the pushed model, or None if nothing was pushed.
      span: The span ExampleGen read (days since 1970-01-01 for dated input).
      model: Directory of the model the Trainer produced.
      base_model: The pushed model the Trainer warm-started from (the push directory that
        `LatestBlessedModel` copied), or None when it trained from scratch.
      tensorboard_dir: The Trainer's ModelRun directory: its TensorBoard summaries and, when
        asked for, its profiler trace.
      drift: DriftValidator's verdict, where it ran: `first_run`, `drifted` (unaccepted drifts:
        feature, comparator, distance, threshold), `accepted` (feature names), `compared_with`.
      failed_checks: The Evaluator's failed threshold checks, one line each naming the slice,
        the metric, its value and the threshold (`evaluator.checks.failures`).
      unapplied_checks: The Evaluator's threshold checks it did not apply, one line each naming
        the slice, the metric, why (undefined on the slice, or a slice under `min_slice_size`)
        and the threshold (`evaluator.checks.unapplied_checks`).
      passed_over: The pushed models `LatestBlessedModel` did not take, being another
        pipeline's, one line each naming the push, its pipeline and this one.
    """

    executed: list[str]
    cached: list[str]
    rows: dict[str, int]
    eval_metric: tuple[str, float] | None
    blessed: bool | None
    training: dict[str, Any]
    pushed_model: str | None
    span: int | None = None
    model: str | None = None
    base_model: str | None = None
    tensorboard_dir: str | None = None
    drift: dict[str, Any] | None = None
    failed_checks: list[str] = dataclasses.field(default_factory=list)
    passed_over: list[str] = dataclasses.field(default_factory=list)
    unapplied_checks: list[str] = dataclasses.field(default_factory=list)

    def format(self) -> str:
        lines = [f'components executed: {len(self.executed)}, from cache: {len(self.cached)}']
        if self.rows:
            lines.append(f'rows: {rows_text(self.rows)}')
        if self.eval_metric:
            lines.append(
                f'eval {self.eval_metric[0]}: {self.eval_metric[1]:.4f}, '
                f'blessed: {"yes" if self.blessed else "no"}'
            )
        lines.extend(f'failed check: {line}' for line in self.failed_checks)
        lines.extend(f'check not applied: {line}' for line in self.unapplied_checks)
        if 'examples_per_sec' in self.training:
            lines.append(
                f'training: {self.training["examples_per_sec"]:.0f} examples/s '
                f'over {self.training.get("steps", "?")} steps'
            )
        if self.training.get('profile'):
            # The verdict of the profiler trace (`training.profiling`), with TF's thresholds.
            profile = self.training['profile']
            lines.append(
                f'input: {profile["verdict"]} per the profiler trace '
                f'({profile["input_percent"]:.1f}% of step time waiting for input over '
                f'{profile["steps"]} steps); input_wait_fraction '
                f'{self.training["input_wait_fraction"]:.3f}'
            )
        lines.extend(f'latest blessed model: {line}' for line in self.passed_over)
        if self.drift is not None:
            lines.append(drift_text(self.drift))
        lines.append(f'pushed model: {self.pushed_model or "none (not blessed)"}')
        if self.tensorboard_dir:
            lines.append(f'tensorboard: tensorboard --logdir {self.tensorboard_dir}')
        return '\n'.join(lines)


def drift_text(drift: dict[str, Any]) -> str:
    """The drift line of a summary: what was compared and what drifted, with its distance."""
    if drift['first_run']:
        return "drift: nothing to compare with yet; today's data judged on the schema alone"
    parts = []
    for item in drift['drifted']:
        if item.get('distance') is None:
            parts.append(f'{item["feature"]} (present on one side only)')
        else:
            parts.append(
                f'{item["feature"]} ({item["comparator"]} {item["distance"]:.3f} > '
                f'{item["threshold"]:.3f})'
            )
    text = 'drift: ' + ('; '.join(parts) if parts else 'no feature over its threshold')
    if drift['accepted']:
        text += f'; accepted for this run: {", ".join(drift["accepted"])}'
    return text + f' (against {drift["compared_with"]})'


def drift_verdict(get_property: Callable[[str], Any]) -> dict[str, Any]:
    """DriftValidator's verdict, as `drift_text` reads it, from its anomalies artifact's custom
    properties, read by name with `get_property` (None when absent): from MLMD here, from the
    executor output's metadata in a compiled run."""
    return {
        'first_run': bool(get_property(drift_properties.FIRST_RUN_PROPERTY)),
        'drifted': json.loads(get_property(drift_properties.DRIFTED_FEATURES_PROPERTY) or '[]'),
        'accepted': json.loads(get_property(drift_properties.ACCEPTED_FEATURES_PROPERTY) or '[]'),
        'compared_with': get_property(drift_properties.COMPARED_WITH_PROPERTY) or '',
    }


def _drift(anomalies: metadata_store_pb2.Artifact | None) -> dict[str, Any] | None:
    if anomalies is None:
        return None
    return drift_verdict(lambda key: _custom(anomalies, key))


def _custom(artifact: metadata_store_pb2.Artifact, key: str) -> Any:
    if key not in artifact.custom_properties:
        return None
    value = artifact.custom_properties[key]
    return (
        value.int_value
        if value.HasField('int_value')
        else (value.double_value if value.HasField('double_value') else value.string_value)
    )


def _latest(store, type_name: str, producer: str, pipeline_name: str):
    """The newest artifact of `type_name` output by component `producer` of this pipeline."""
    try:
        context = store.get_context_by_type_and_name('node', f'{pipeline_name}.{producer}')
    except Exception:  # The type or context does not exist yet.
        return None
    if context is None:
        return None
    artifacts = [
        a
        for a in store.get_artifacts_by_context(context.id)
        if a.state == metadata_store_pb2.Artifact.LIVE
        and store.get_artifact_types_by_id([a.type_id])[0].name == type_name
    ]
    return max(artifacts, key=lambda a: a.id) if artifacts else None


def _metric_name(metric_config) -> str:
    """The name a metric's value has in the evaluation: its config's `name`, else TFMA's default
    (the class name in snake case)."""
    name = json.loads(metric_config.config or '{}').get('name') if metric_config.config else None
    if name:
        return name
    words = re.sub('(.)([A-Z][a-z0-9]+)', r'\1_\2', metric_config.class_name)
    return re.sub('([a-z])([A-Z])', r'\1_\2', words).lower()


def gated_metric_names(eval_config) -> list[str]:
    """Names of the metrics that carry a threshold in `eval_config` (a `config_pb2.EvalConfig`)."""
    return [
        _metric_name(metric)
        for spec in eval_config.metrics_specs
        for metric in spec.metrics
        if metric.HasField('threshold') or metric.per_slice_thresholds
    ]


def _eval_metric(uri: str) -> tuple[str, float] | None:
    """The gated metric of the evaluation at `uri`, for the candidate model, on the whole split."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.writers import eval_config_writer

    try:
        eval_config = eval_config_writer.load_eval_run(uri)[0]
        # With a baseline the evaluation holds two models; the candidate is the one not marked.
        candidates = [s.name for s in eval_config.model_specs if not s.is_baseline]
        result = tfma.load_eval_result(uri, model_name=candidates[0] or None)
    except Exception:  # No evaluation written (the Evaluator did not run).
        return None
    names = gated_metric_names(eval_config)
    for slice_key, metrics in result.slicing_metrics:
        if slice_key != ():  # The whole split's value: the overall slice.
            continue
        for name, value in metrics.get('', {}).get('', {}).items():
            if name in names:
                # With confidence intervals, TFMA's loader gives the value within its bounds.
                value = value.get('boundedValue', value)
                return name, float(value.get('doubleValue', value.get('value', 'nan')))
    return None


def _failed_checks(uri: str) -> list[str]:
    """The failed threshold checks of the evaluation at `uri` ([] when none or not written)."""
    import tensorflow_model_analysis as tfma

    from asynctrain.components.evaluator import checks

    try:
        validation = tfma.load_validation_result(uri)
    except Exception:  # No validation written (the Evaluator did not run).
        return []
    return checks.failures(validation)


def _unapplied_checks(uri: str) -> list[str]:
    """The threshold checks the evaluation at `uri` did not apply ([] when none or not written)."""
    from asynctrain.components.evaluator import checks

    return checks.read_unapplied_checks(uri)


def read_summary(config: PipelineConfig, started: float) -> RunSummary:
    """Summarizes the latest run of `config.pipeline_name` that started at or after `started`."""
    connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
    with metadata.Metadata(connection) as m:
        store = m.store
        executed, cached = [], []
        for execution in store.get_executions():
            # Milliseconds, truncated: an execution of this run is never earlier than `started`
            # truncated to the millisecond; one of a run that ended just before it can be.
            if execution.create_time_since_epoch < int(started * 1000):
                continue
            # Resolver nodes (latest blessed model, latest cache) only look up artifacts.
            if store.get_execution_types_by_id([execution.type_id])[0].name == RESOLVER_TYPE:
                continue
            name = _execution_node(store, execution, config.pipeline_name)
            if execution.last_known_state == metadata_store_pb2.Execution.CACHED:
                cached.append(name)
            elif execution.last_known_state == metadata_store_pb2.Execution.COMPLETE:
                executed.append(name)
        rows: dict[str, int] = {}
        examples = _latest(store, 'Examples', 'CsvExampleGen', config.pipeline_name)
        if examples is not None:
            for key in ROW_COUNT_PROPERTIES:
                value = _custom(examples, key)
                if value is not None:
                    rows[key] = int(value)
        evaluation = _latest(store, 'ModelEvaluation', 'Evaluator', config.pipeline_name)
        blessing = _latest(store, 'ModelBlessing', 'Evaluator', config.pipeline_name)
        model_run = _latest(store, 'ModelRun', 'Trainer', config.pipeline_name)
        pushed = _latest(store, 'PushedModel', 'Pusher', config.pipeline_name)
        model = _latest(store, 'Model', 'Trainer', config.pipeline_name)
        drift = (
            _latest(store, 'ExampleAnomalies', DRIFT_VALIDATOR, config.pipeline_name)
            if config.drift.enabled
            else None
        )
        latest_blessed = _latest(store, 'Model', LATEST_BLESSED_MODEL, config.pipeline_name)
        base_model = _input_of_latest_execution(
            store, config.pipeline_name, 'Trainer', 'base_model'
        )
    training: dict[str, Any] = {}
    if model_run is not None and os.path.exists(os.path.join(model_run.uri, REPORT_FILE)):
        with open(os.path.join(model_run.uri, REPORT_FILE)) as f:
            training = json.load(f)
    pushed_path = None
    if pushed is not None and _custom(pushed, 'pushed'):
        pushed_path = _custom(pushed, 'pushed_destination')
    return RunSummary(
        executed=sorted(executed),
        cached=sorted(cached),
        rows=rows,
        eval_metric=_eval_metric(evaluation.uri) if evaluation else None,
        blessed=bool(_custom(blessing, 'blessed')) if blessing is not None else None,
        training=training,
        pushed_model=pushed_path,
        span=_custom(examples, 'span') if examples is not None else None,
        model=model.uri if model is not None else None,
        base_model=(_custom(base_model, PUSHED_MODEL_PROPERTY) or None) if base_model else None,
        tensorboard_dir=model_run.uri if model_run is not None else None,
        drift=_drift(drift),
        failed_checks=_failed_checks(evaluation.uri) if evaluation else [],
        unapplied_checks=_unapplied_checks(evaluation.uri) if evaluation else [],
        passed_over=json.loads(
            (_custom(latest_blessed, PASSED_OVER_PROPERTY) if latest_blessed else None) or '[]'
        ),
    )


def _execution_node(store, execution, pipeline_name: str) -> str:
    prefix = f'{pipeline_name}.'
    for context in store.get_contexts_by_execution(execution.id):
        if context.name.startswith(prefix):
            return context.name[len(prefix) :]
    return str(execution.type_id)


def _input_of_latest_execution(store, pipeline_name: str, node: str, key: str):
    """The artifact the newest execution of `node` read as input `key`, or None."""
    context = store.get_context_by_type_and_name('node', f'{pipeline_name}.{node}')
    if context is None:
        return None
    executions = store.get_executions_by_context(context.id)
    if not executions:
        return None
    latest = max(executions, key=lambda e: e.id)
    for event in store.get_events_by_execution_ids([latest.id]):
        if event.type != metadata_store_pb2.Event.INPUT:
            continue
        if any(step.HasField('key') and step.key == key for step in event.path.steps):
            return store.get_artifacts_by_id([event.artifact_id])[0]
    return None

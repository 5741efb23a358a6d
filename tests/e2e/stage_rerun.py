"""One component's execution of a finished pipeline run, read back from ML Metadata and run again
in this process with other Beam arguments: the same input artifacts, the same execution
properties, fresh output folders. What lets a test compare a stage's outputs on two runners
without the rest of the pipeline (a Trainer, say, that is not deterministic) in between."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from ml_metadata.proto import metadata_store_pb2
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.orchestration import data_types_utils, metadata
from tfx.types import artifact_utils


@dataclasses.dataclass(frozen=True)
class Execution:
    """A component's last execution: its artifacts by key and its execution properties."""

    inputs: dict[str, list[types.Artifact]]
    outputs: dict[str, list[types.Artifact]]
    exec_properties: dict[str, Any]


def _artifacts(store, ids: Sequence[int]) -> list[types.Artifact]:
    result = []
    for mlmd_artifact in store.get_artifacts_by_id(list(ids)):
        artifact_type = store.get_artifact_types_by_id([mlmd_artifact.type_id])[0]
        result.append(artifact_utils.deserialize_artifact(artifact_type, mlmd_artifact))
    return result


def last_execution(config, component_id: str, parameters: Sequence[str]) -> Execution:
    """`component_id`'s newest execution in the run's metadata; `parameters`: its spec's
    execution property keys (other custom properties are TFX's own bookkeeping)."""
    connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
    with metadata.Metadata(connection) as m:
        store = m.store
        context = store.get_context_by_type_and_name(
            'node', f'{config.pipeline_name}.{component_id}'
        )
        assert context is not None, f'no execution of {component_id} in {config.metadata_path}'
        execution = max(store.get_executions_by_context(context.id), key=lambda e: e.id)
        ids: dict[int, dict[str, list[int]]] = {
            metadata_store_pb2.Event.INPUT: {},
            metadata_store_pb2.Event.OUTPUT: {},
        }
        for event in store.get_events_by_execution_ids([execution.id]):
            if event.type in ids and event.path.steps:
                ids[event.type].setdefault(event.path.steps[0].key, []).append(event.artifact_id)
        properties = {}
        for key in parameters:
            value = execution.custom_properties.get(key) or execution.properties.get(key)
            if value is not None and value.WhichOneof('value') is not None:
                properties[key] = data_types_utils.get_metadata_value(value)
        return Execution(
            {k: _artifacts(store, v) for k, v in ids[metadata_store_pb2.Event.INPUT].items()},
            {k: _artifacts(store, v) for k, v in ids[metadata_store_pb2.Event.OUTPUT].items()},
            properties,
        )


def rerun(
    component_class,
    execution: Execution,
    output_dir: str,
    beam_pipeline_args: Sequence[str] = (),
) -> dict[str, list[types.Artifact]]:
    """Runs `component_class`'s executor on `execution`'s inputs and properties, its outputs in
    new artifacts (of the same types) under `output_dir/<key>/`; returns them."""
    outputs = {}
    for key, artifacts in execution.outputs.items():
        fresh = []
        for artifact in artifacts:
            copy = type(artifact)()
            copy.uri = os.path.join(output_dir, key)
            os.makedirs(copy.uri, exist_ok=True)
            fresh.append(copy)
        outputs[key] = fresh
    executor_class = component_class.EXECUTOR_SPEC.executor_class
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(beam_pipeline_args),
        tmp_dir=os.path.join(output_dir, '.temp', ''),
        unique_id='rerun',
    )
    executor_class(context).Do(execution.inputs, outputs, dict(execution.exec_properties))
    return outputs

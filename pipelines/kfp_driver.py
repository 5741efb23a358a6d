"""What the open-source KFP 2.x driver and launcher do around one container task, on this machine.

Each function follows the backend's Go code (kubeflow/pipelines, `backend/src/v2/`), named beside
it, so that a compiled spec runs here the way a cluster would run it:

- `run_root`, `output_artifacts`: the driver's output URIs (`metadata.GenerateOutputURI`,
  `driver.provisionOutputs`): `<pipeline root>/<pipeline name>/<run id>/<task>/<uuid>/<output>`;
- `input_parameters`: the driver's parameter resolution (`driver/resolve.go`): constants, pipeline
  inputs (their defaults: no runtime config here), upstream output parameters, defaults of the
  component's own inputs, and the `{{$.pipeline_job_*}}` placeholders;
- `executor_input`: the `{{$}}` ExecutorInput, with `parameterValues` only;
- `merge_executor_output`, `published`: the launcher's `mergeRuntimeArtifacts` and what an
  artifact looks like once it went through ML Metadata (`metadata/converter.go`), which is what a
  downstream task receives.

No caching: every task runs, as on a cluster with caching off.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import uuid
from typing import Any

from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2


@dataclasses.dataclass(frozen=True)
class RunContext:
    """The run that the driver's placeholders name.

    Attributes:
      pipeline_name: `pipelineInfo.name`.
      run_id: The run's id (the cluster's is a UUID).
      pipeline_root: The root every output URI starts with.
      created: The run's creation time, UTC, RFC 3339.
    """

    pipeline_name: str
    run_id: str
    pipeline_root: str
    created: str = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat()
    )


def output_uri(root: str, *paths: str) -> str:
    """`metadata.GenerateOutputURI`: joined with '/', the root's scheme kept (no path cleaning)."""
    return root.rstrip('/') + '/' + '/'.join(p.strip('/') for p in paths)


def run_root(run: RunContext) -> str:
    """The run's own root (`metadata.Client.GetPipeline`: `<root>/<pipeline name>/<run id>`)."""
    return output_uri(run.pipeline_root, run.pipeline_name, run.run_id)


def task_root(run: RunContext, task_name: str) -> str:
    """`provisionOutputs`: the task's root, salted with a new UUID per execution."""
    return output_uri(run_root(run), task_name, str(uuid.uuid4()))


def output_artifacts(component: dict[str, Any], root: str) -> dict[str, list[dict[str, Any]]]:
    """`provisionOutputs`: one RuntimeArtifact per output, named after it, under the task root."""
    outputs = {}
    for name, definition in component.get('outputDefinitions', {}).get('artifacts', {}).items():
        artifact = {
            'name': name,
            'uri': output_uri(root, name),
            'type': definition['artifactType'],
        }
        if definition.get('metadata'):
            artifact['metadata'] = copy.deepcopy(definition['metadata'])
        outputs[name] = [artifact]
    return outputs


def _placeholder(value: Any, run: RunContext, task_name: str) -> Any:
    """`resolveInputParameter`'s run placeholders in a constant string; other values unchanged."""
    if not isinstance(value, str):
        return value
    return {
        '{{$.pipeline_job_name}}': run.run_id,
        '{{$.pipeline_job_resource_name}}': run.run_id,
        '{{$.pipeline_job_uuid}}': run.run_id,
        '{{$.pipeline_task_name}}': task_name,
        '{{$.pipeline_task_uuid}}': task_name,
        '{{$.pipeline_job_create_time_utc}}': run.created,
        '{{$.pipeline_job_schedule_time_utc}}': run.created,
    }.get(value, value)


def input_parameters(
    task_name: str,
    task: dict[str, Any],
    component: dict[str, Any],
    pipeline_inputs: dict[str, Any],
    upstream_parameters: dict[str, dict[str, Any]],
    run: RunContext,
) -> dict[str, Any]:
    """The task's `parameterValues`, resolved as `driver/resolve.go` resolves them.

    Raises:
      ValueError: a parameter form the driver does not resolve (its message), or a required
        input with no value.
    """
    values = {}
    for name, spec in task.get('inputs', {}).get('parameters', {}).items():
        if 'runtimeValue' in spec:
            runtime_value = spec['runtimeValue']
            if 'constant' not in runtime_value:
                kind = next(iter(runtime_value), 'none')
                raise ValueError(
                    f'{task_name}: input parameter {name}: param runtime value spec of type '
                    f'{kind} not implemented'
                )
            values[name] = _placeholder(runtime_value['constant'], run, task_name)
        elif 'componentInputParameter' in spec:
            values[name] = pipeline_inputs[spec['componentInputParameter']]
        elif 'taskOutputParameter' in spec:
            producer = spec['taskOutputParameter']
            values[name] = upstream_parameters[producer['producerTask']][
                producer['outputParameterKey']
            ]
        else:
            kind = next(iter(spec), 'none')
            raise ValueError(
                f'{task_name}: input parameter {name}: parameter spec of type {kind} not '
                'implemented yet'
            )
    for name, definition in component.get('inputDefinitions', {}).get('parameters', {}).items():
        if name in values:
            continue
        if 'defaultValue' in definition:
            values[name] = definition['defaultValue']
        elif not definition.get('isOptional'):
            raise ValueError(f'{task_name}: input parameter {name}: required, and no value given')
    return values


def pipeline_inputs(spec: dict[str, Any]) -> dict[str, Any]:
    """The root's input parameters at their defaults (a run here has no runtime config)."""
    values = {}
    for name, definition in (
        spec.get('root', {}).get('inputDefinitions', {}).get('parameters', {}).items()
    ):
        if 'defaultValue' not in definition and not definition.get('isOptional'):
            raise ValueError(f'root.inputDefinitions.parameters.{name}: required, and no default')
        if 'defaultValue' in definition:
            values[name] = definition['defaultValue']
    return values


def executor_input(
    parameters: dict[str, Any],
    inputs: dict[str, list[dict[str, Any]]],
    outputs: dict[str, list[dict[str, Any]]],
    output_file: str,
) -> str:
    """The `{{$}}` placeholder's value: an ExecutorInput as JSON, parsed by kfp's own proto."""
    message = {
        'inputs': {
            'parameterValues': parameters,
            'artifacts': {name: {'artifacts': artifacts} for name, artifacts in inputs.items()},
        },
        'outputs': {
            'artifacts': {name: {'artifacts': artifacts} for name, artifacts in outputs.items()},
            'outputFile': output_file,
        },
    }
    parsed = json_format.ParseDict(message, pipeline_spec_pb2.ExecutorInput())
    return json_format.MessageToJson(parsed, indent=None)


def merge_executor_output(
    outputs: dict[str, list[dict[str, Any]]], executor_output: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """`launcher_v2.mergeRuntimeArtifacts`: the executor's URI, metadata fields and custom path
    over the driver's, output by output (the first artifact of each list, as the launcher)."""
    merged = copy.deepcopy(outputs)
    for name, artifacts in merged.items():
        written = executor_output.get('artifacts', {}).get(name, {}).get('artifacts', [])
        if not written:
            continue
        source, destination = written[0], artifacts[0]
        if source.get('uri'):
            destination['uri'] = source['uri']
        if source.get('metadata'):
            destination.setdefault('metadata', {}).update(source['metadata'])
        if source.get('customPath'):
            destination['customPath'] = source['customPath']
    return merged


def _through_mlmd(value: Any) -> Any:
    """A metadata value as ML Metadata stores it and `toRuntimeArtifact` reads it back: numbers
    and strings unchanged, a bool as 0/1, a list or a struct wrapped in a struct; a null is
    refused (`StructValueToMLMDValue`: "unknown/unsupported value type")."""
    if value is None:
        raise ValueError('unknown/unsupported value type *structpb.Value_NullValue')
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):
        return {'list': value}
    if isinstance(value, dict):
        return {'struct': value}
    return value


def published(artifact: dict[str, Any], artifact_id: int) -> dict[str, Any]:
    """The artifact as a downstream task receives it: named by its ML Metadata id, its metadata
    after the round trip through ML Metadata, its type as its producer declared it."""
    return {
        'name': str(artifact_id),
        'uri': artifact['uri'],
        'type': artifact['type'],
        'metadata': {k: _through_mlmd(v) for k, v in artifact.get('metadata', {}).items()},
    }
